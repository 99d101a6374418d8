# The two set-up commands of the README:
#   make demo   create .venv (CPU torch first, then the project) and run the main job
#   make test   create .venv the same way and run lint + the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN := torch==2.13.0

.PHONY: venv demo test lint format bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned: a bare `torch` requirement would pull a multi-GB CUDA build
	$(BIN)/pip install --quiet $(TORCH_PIN)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

venv: $(BIN)/.installed

demo: venv
	$(BIN)/phasescope demo

test: venv
	$(BIN)/ruff check src tests benchmarks docs experiments
	$(BIN)/python -m pytest

lint: venv
	$(BIN)/ruff check src tests benchmarks docs experiments
	$(BIN)/ruff format --check src tests benchmarks docs experiments

format: venv
	$(BIN)/ruff format src tests benchmarks docs experiments
	$(BIN)/ruff check --fix src tests benchmarks docs experiments

bench: venv
	$(BIN)/python benchmarks/attention.py --json docs/attention_benchmark.json
	$(BIN)/python benchmarks/training.py --json docs/training_benchmark.json
	$(BIN)/python benchmarks/sweep_overhead.py
	$(BIN)/python benchmarks/sweep_prefix.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
