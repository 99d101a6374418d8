"""Shared test helpers, and the markers that sort the suite (CONTRIBUTING.md, "Set up and test"):

* ``slow``: tests that took more than 5 s (since stop 27: 2 s) in a timing run (the node ids in ``SLOW``, matched as
  substrings so parametrized variants are included; a whole module is named by its path + ``::``);
* ``vllm``: the tests that serve a model through a real vLLM on CPU (tests/test_vllm.py).

``make test-fast`` runs ``-m "not slow and not vllm"``; ``make test`` runs everything.
"""

import pytest
import torch

from phasescope.kv import CompressionConfig
from phasescope.model import Decoder, ModelConfig

torch.set_num_threads(2)

SLOW = (
    "tests/test_benchmarks.py::test_benchmark_quick_smoke",
    "tests/test_mixed_phases.py::test_a_real_tokenizer_sweep_gets_a_tested_verdict",
    "tests/test_mixed_phases.py::test_defect_1_",
    "tests/test_mixed_phases.py::test_contents_correlated_with_their_start_phase",
    "tests/test_mixed_phases.py::test_lm_eval_like_documents",
    "tests/test_readme.py::test_readme_demo_output_is_what_the_demo_prints",
    "tests/test_real_tokenizers.py::test_every_probe_runs_end_to_end_on_a_tiny_model_with_the_real_tokenizer",
    "tests/test_reproduce.py::test_reproduce_end_to_end_on_shipped_models",
    "tests/test_faults.py::test_demo_mistakes",
    "tests/test_faults.py::test_report_describes_the_records_on_disk",
    "tests/test_niah.py::test_multi_token_candidates_from_the_prompt_cache_equal_plain_forwards",
    "tests/test_niah.py::test_a_sweep_holds_one_batch_of_contents_not_the_whole_sweep",
    "tests/test_lm_eval.py::",
    "tests/test_ablation.py::test_ablation_matrix_runs_on_deepseek_v4",
    "tests/test_ablation.py::test_the_ablate_command_writes_the_matrix_for_a_shipped_model",
    "tests/test_prefix.py::test_an_interrupted_sweep_with_reuse_resumes_to_the_same_records",
    "tests/test_prefix.py::test_native_decoder_with_and_without_prefix_reuse",
    "tests/test_training.py::test_qwen3_recipe_estimate_builds_and_runs_a_step",
    "tests/test_training.py::test_two_process_torchrun_matches_one_process",
    "tests/test_calibration.py::",
    "tests/test_prompts.py::test_the_example_file_gives_equal_records_on_hf_served_and_native",
    # above 2 s in a timing run (stop 27), so that make test-fast stays under 2 minutes
    "tests/test_prompts.py::test_the_cli_sweeps_the_example_file_and_a_long_haystack",
    "tests/test_training.py::test_the_estimate_is_within_2x_of_a_real_run",
    "tests/test_sweep.py::test_planted_phase_probabilities_of_the_code_probe_are_recovered_with_content_intervals",
    "tests/test_sweep.py::test_code_probe_sampled_end_to_end_on_a_tiny_hf_model_gives_intervals",
    "tests/test_report_sections.py::test_theory_section_figures_and_headline_numbers",
    "tests/test_log_score.py::test_a_steep_margin_drift_with_uneven_contents_is_not_a_phase_effect",
    "tests/test_properties.py::test_arbitrary_objects_as_records_are_refused_cleanly",
    "tests/test_ablation.py::test_a_drift_over_offsets_is_not_read_as_phase_specialization",
    "tests/test_real_tokenizers.py::test_prompts_are_padded_to_every_phase_on_both_tokenizers",
)
VLLM = ("tests/test_vllm.py::",)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than 2 s (deselect with -m 'not slow'; make test-fast)")
    config.addinivalue_line("markers", "vllm: serves a model through a real vLLM on CPU (tests/test_vllm.py)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(name in item.nodeid for name in SLOW):
            item.add_marker(pytest.mark.slow)
        if any(name in item.nodeid for name in VLLM):
            item.add_marker(pytest.mark.vllm)


def tiny_model(scheme: CompressionConfig, *, n_layers=2, n_heads=4, n_kv_heads=2, seed=0, **kw) -> Decoder:
    """A tiny float64 decoder with random (non-trivial) weights for equivalence tests."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=kw.pop("vocab_size", 50),
        d_model=kw.pop("d_model", 32),
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=kw.pop("head_dim", 8),
        d_ff=kw.pop("d_ff", 48),
        layers=(scheme,) * n_layers,
        **kw,
    )
    model = Decoder(cfg).double()
    with torch.no_grad():  # move learned gates/sinks/biases off their neutral init
        for name, p in model.named_parameters():
            if any(key in name for key in ("offset_logits", "sink", "position_bias", "norm_weight", "pos_")):
                p.copy_(torch.randn_like(p))
    return model


@pytest.fixture
def model_dir(tmp_path):
    """A copy of the demo's tiny-s4 model directory (tests may damage it)."""
    import shutil

    from phasescope.demo import ASSETS

    target = tmp_path / "model"
    shutil.copytree(ASSETS / "tiny-s4", target)
    return target


@pytest.fixture
def swept(tmp_path, model_dir):
    """A 4-content sweep of ``model_dir`` in tmp_path/run, made through the command line."""
    from typer.testing import CliRunner

    from phasescope.cli import app

    run = tmp_path / "run"
    args = ["sweep", "--model", str(model_dir), "--out", str(run), "--samples", "4", "--no-progress"]
    assert CliRunner().invoke(app, args).exit_code == 0
    return run
