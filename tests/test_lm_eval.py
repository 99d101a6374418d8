"""lm-eval tasks made phase-aware (``--probe lm-eval:TASK``), checked against lm-eval itself.

Two local tasks (tests/data/lm_eval: a multiple-choice YAML task with one few-shot example and
a generation task with two filters) on a tiny transformers Qwen3: at offset 0 phasescope sends
exactly lm-eval's tokens, and its acc, acc_norm, exact_match and generations equal what
``lm_eval.simple_evaluate`` computes on the same model and documents; the served backend gives
the same records; analyze, export and the lm-eval wrapper ``phasescope-ensemble`` work."""

import json
import os
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # nothing downloads: the tasks read local JSON files
os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("lm_eval")

ROOT = Path(__file__).parent.parent
TASKS = "tests/data/lm_eval"  # the YAML files name their data relative to the repository root
OFFSETS = range(8)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny Qwen3 with an EOS token, its phasescope sweep and lm-eval's own evaluation."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    import phasescope
    from hf_models import eos_word_tokenizer, tiny_qwen3

    old = os.getcwd()
    os.chdir(ROOT)
    try:
        tokenizer = eos_word_tokenizer()
        model_dir = tiny_qwen3(tmp_path_factory.mktemp("lm") / "model", tokenizer)
        run = tmp_path_factory.mktemp("lm") / "run"
        probe = "lm-eval:ps_capitals,ps_phrases"
        phasescope.sweep(f"hf:{model_dir}", probe, step=4, offsets=OFFSETS, include_path=TASKS, out=run)
        lm = HFLM(pretrained=str(model_dir), device="cpu", batch_size=8, dtype="float32")
        manager = TaskManager(include_path=TASKS, include_defaults=False)
        tasks = ["ps_capitals", "ps_phrases"]
        lm_eval = simple_evaluate(model=lm, tasks=tasks, task_manager=manager, log_samples=True, bootstrap_iters=0)
        yield {"model": model_dir, "tokenizer": tokenizer, "run": run, "lm": lm, "lm_eval": lm_eval}
    finally:
        os.chdir(old)


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]


def test_offset_zero_is_lm_evals_rendering_token_for_token(setup, monkeypatch):
    from phasescope.probes.lm_eval_tasks import build_lm_eval_probe

    monkeypatch.chdir(ROOT)
    probe = build_lm_eval_probe("ps_capitals,ps_phrases", setup["tokenizer"], 4, 0, TASKS)
    lm = setup["lm"]
    groups = list(probe.stream(list(OFFSETS), probe.default_samples(), None))
    assert len(groups) == 24 + 20
    for doc, group in zip(probe.docs, groups, strict=True):
        zero = next(it for it in group if it.offset == 0)
        for inst in doc.instances:
            context = inst.args[0]
            if inst.request_type == "generate_until":
                assert zero.input_ids == lm.tok_encode(context)
            else:
                context_ids, continuation = lm._encode_pair(context, inst.args[1])
                assert zero.input_ids == context_ids
                assert zero.candidates[str(inst.idx)] == continuation
        for item in group:  # the padding adds exactly d tokens; each record's phase is its answer's own
            assert len(item.input_ids) == len(zero.input_ids) + item.offset
            assert item.input_ids[-len(zero.input_ids) + 1 :] == zero.input_ids[1:]


def test_offset_zero_metrics_equal_lm_evals_own(setup):
    ours = defaultdict(list)
    generations = {}
    for r in records(setup["run"]):
        if r["offset"] == 0:
            for key, value in r["task_metrics"].items():
                ours[(r["task"], key)].append(value)
            if "generation" in r:
                generations[r["doc_id"]] = r["generation"]
    theirs = setup["lm_eval"]["results"]
    for (task, key), values in ours.items():
        assert sum(values) / len(values) == pytest.approx(theirs[task][key], abs=1e-12), (task, key)
    assert {k[1] for k in ours if k[0] == "ps_capitals"} == {"acc,none", "acc_norm,none"}
    assert {k[1] for k in ours if k[0] == "ps_phrases"} == {"exact_match,whole", "exact_match,first-word"}
    assert 0 < theirs["ps_capitals"]["acc,none"] < 1  # not a trivial agreement
    for sample in setup["lm_eval"]["samples"]["ps_phrases"]:
        assert generations[sample["doc_id"]] == sample["resps"][0][0]


def test_analyze_gives_each_task_metric_per_phase_and_export_writes_lm_eval_json(setup, tmp_path):
    from typer.testing import CliRunner

    import phasescope
    from phasescope.cli import app
    from phasescope.export import load_run
    from phasescope.rundir import RunDir

    metrics = phasescope.analyze(setup["run"], n_resamples=200)
    assert RunDir(setup["run"]).read_sweep().contents_by_sample is False  # the probe said so in spec.json
    assert json.loads(RunDir(setup["run"]).spec.read_text())["contents_by_sample"] is False
    acc = metrics.task_metrics["ps_capitals"]["acc,none"]
    assert acc["offset_0"] == pytest.approx(setup["lm_eval"]["results"]["ps_capitals"]["acc,none"])
    assert [p["phase"] for p in acc["phases"]] == [0, 1, 2, 3] and all(p["ci"] for p in acc["phases"])
    out = tmp_path / "results.json"
    result = CliRunner().invoke(app, ["export", str(setup["run"]), "--format", "lm-eval", "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    for key in ("acc,none", "acc_norm,none"):
        assert data["results"]["ps_capitals"][key] == pytest.approx(setup["lm_eval"]["results"]["ps_capitals"][key])
        assert set(data["phase_results"]["ps_capitals"]) == {"0", "1", "2", "3"}
    theirs = setup["lm_eval"]
    assert data["versions"] == {t: theirs["versions"][t] for t in data["versions"]}  # as lm-eval reports them
    assert data["n-shot"]["ps_capitals"] == theirs["n-shot"]["ps_capitals"]
    assert data["configs"]["ps_capitals"]["output_type"] == theirs["configs"]["ps_capitals"]["output_type"]
    assert data["model_name"] == f"hf:{setup['model']}" and data["date"] and data["lm_eval_version"]
    assert "acc_phase_range_raw_pp,none" in data["results"]["ps_capitals"]  # named as what it is: raw max - min
    result = CliRunner().invoke(app, ["export", str(setup["run"]), "--format", "csv", "--out", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    assert {p.name for p in (tmp_path / "t").iterdir()} == {
        f"{n}.csv" for n in ("records", "phases", "offsets", "task_metrics")
    }
    tables = load_run(setup["run"])
    assert {"task", "doc_id", "metric.acc,none", "padding_tokens", "logprob_target"} <= set(tables.records.columns)
    import pandas as pd

    for _, row in tables.records.head(20).iterrows():  # the target's log-prob once, as logprob_target
        assert pd.isna(row.get(f"logprob.{row['target']}"))
    assert len(tables.records) == 44 * len(OFFSETS)

    page = phasescope.report(setup["run"]).read_text()  # report.html carries each task's own metrics
    assert 'alt="gap_by_task.png"' in page  # #59 item 1: each task's gap, one row each
    for task, metric in (("ps_capitals", "acc_norm,none"), ("ps_phrases", "exact_match,first-word")):
        assert f"lm-eval task {task}: its metrics per phase" in page and f"<td>{metric}</td>" in page
    offset_0 = metrics.task_metrics["ps_capitals"]["acc,none"]["offset_0"]
    assert f"<td>acc,none</td><td>{offset_0:.3f}</td>" in page


def test_a_run_of_two_tasks_gets_one_verdict_per_task_on_its_own_metric(setup):
    """'overall accuracy 0.134 over 352 records' mixed ps_capitals' acc with ps_phrases'
    exact_match (#46 part 5): each task is analyzed on its own records, with its own verdict."""
    import phasescope
    from phasescope.analysis.per_task import shared_alpha
    from phasescope.analysis.stats import analyze_records
    from phasescope.rundir.records import read_records

    metrics = phasescope.analyze(setup["run"], n_resamples=200)
    assert list(metrics.per_task) == ["ps_capitals", "ps_phrases"]
    assert metrics.verdict.sentence.startswith("2 tasks pooled (each task's own verdict follows, every task's tests")
    assert metrics.per_task["ps_capitals"]["metric"] == "acc,none"
    assert metrics.per_task["ps_phrases"]["metric"].startswith("exact_match")
    records = read_records(setup["run"] / "records.jsonl").records
    alone = {t: analyze_records([r for r in records if r.task == t], seed=0, n_resamples=200) for t in metrics.per_task}
    shared_alpha(alone, "task")  # each task as if swept alone, its tests adjusted with the other task's
    assert metrics.per_task["ps_phrases"]["verdict"] == alone["ps_phrases"]["verdict"]["sentence"]
    assert "; prompts of " in metrics.per_task["ps_phrases"]["verdict"]  # re-read, it still names its lengths
    assert metrics.per_task["ps_phrases"]["overall_accuracy"] == alone["ps_phrases"]["overall_accuracy"]
    from rich.console import Console

    from phasescope.reporting.terminal import verdict_text

    console = Console(width=200, record=True)
    console.print(verdict_text(metrics))
    text = console.export_text()
    assert "ps_capitals (acc,none): " in text and "ps_phrases (exact_match" in text
    assert "<b>ps_phrases</b> (exact_match" in phasescope.report(setup["run"]).read_text()


@pytest.mark.parametrize("width", [1280, 400])
def test_the_lm_eval_report_in_chromium(setup, chrome, width, tmp_path):
    """The lm-eval run's report.html (tests/browser.py): verdict first, each task's table on the
    page, nothing sticking out at either width."""
    import phasescope
    from browser import look, problems

    run = tmp_path / "run"
    shutil.copytree(setup["run"], run)
    facts = look(chrome, phasescope.report(run), width, tmp_path / "shot.png")
    assert problems(facts, width) == []
    assert facts["verdict_text"].startswith("Verdict: ")


def test_the_served_backend_gives_the_same_records(setup, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    import phasescope
    from fake_server import FakeVLLM
    from phasescope.backends.served import Options as ServedOptions

    monkeypatch.chdir(ROOT)
    server = FakeVLLM(AutoModelForCausalLM.from_pretrained(setup["model"]))
    try:
        spec = f"openai:{server.url}#tiny"
        options = ServedOptions(tokenizer=str(setup["model"]))
        run = tmp_path / "served"
        phasescope.sweep(
            spec, "lm-eval:ps_phrases", step=4, offsets=OFFSETS, samples=3, include_path=TASKS, options=options, out=run
        )
    finally:
        server.close()
    local = {(r["doc_id"], r["offset"]): r for r in records(setup["run"]) if r["task"] == "ps_phrases"}
    for r in records(run):
        twin = local[(r["doc_id"], r["offset"])]
        assert (r["generation"], r["task_metrics"], r["phase"]) == (
            twin["generation"],
            twin["task_metrics"],
            twin["phase"],
        )
        assert r["logprob_target"] == pytest.approx(twin["logprob_target"], abs=1e-3)


def test_bad_input_is_refused_with_the_reason(setup, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from phasescope.cli import app
    from phasescope.probes import ProbeError
    from phasescope.probes.lm_eval_tasks import build_lm_eval_probe

    monkeypatch.chdir(ROOT)
    tok = setup["tokenizer"]
    (tmp_path / "ppl.yaml").write_text(
        "task: ps_ppl\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {ROOT / TASKS / 'phrases.jsonl'}\n"
        "output_type: loglikelihood_rolling\ntest_split: test\ndoc_to_text: ''\ndoc_to_target: '{{prefix}}'\n"
        "metric_list:\n  - metric: word_perplexity\n"
    )
    with pytest.raises(ProbeError, match="loglikelihood_rolling is not supported"):
        build_lm_eval_probe("ps_ppl", tok, 4, 0, str(tmp_path))
    with pytest.raises(ProbeError, match="no such directory"):
        build_lm_eval_probe("ps_capitals", tok, 4, 0, str(tmp_path / "missing"))
    both = build_lm_eval_probe("ps_capitals,ps_phrases", tok, 4, 0, TASKS)
    first = sum(d.task.config.task == "ps_capitals" for d in both.docs)
    with pytest.raises(ProbeError, match=rf"leaves task\(s\) ps_phrases without a document.*--samples {first + 1} or"):
        next(both.stream(list(OFFSETS), first, None))
    assert next(both.stream(list(OFFSETS), first + 1, None))  # one document of the second task: both are scored
    args = ["sweep", "--model", f"hf:{setup['model']}", "--step", "4", "--probe", "lm-eval:ps_capitals"]
    result = CliRunner().invoke(app, [*args, "--include-path", "nowhere", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "error: --include-path nowhere: no such directory" in result.output
    assert "Traceback" not in result.output


def test_phasescope_ensemble_is_an_lm_eval_model(setup, monkeypatch):
    import sys

    from lm_eval import simple_evaluate
    from lm_eval.api.registry import model_registry
    from lm_eval.tasks import TaskManager

    from phasescope import lm_eval_plugin
    from phasescope.lm_eval_model import PhaseEnsembleLM

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", ["/usr/bin/lm_eval", "--model", "phasescope-ensemble"])
    lm_eval_plugin.activate()  # what phasescope_lm_eval.pth does when lm-eval's command line starts
    assert "phasescope-ensemble" in model_registry and "hf" in model_registry
    out = simple_evaluate(
        model="phasescope-ensemble",
        model_args=f"base=hf,pretrained={setup['model']},step=4",
        tasks=["ps_capitals"],
        task_manager=TaskManager(include_path=TASKS, include_defaults=False),
        limit=6,
        bootstrap_iters=0,
        device="cuda:0" if not torch.cuda.is_available() else None,  # lm_eval's CLI default: cpu here, as hf does
    )
    assert 0 <= out["results"]["ps_capitals"]["acc,none"] <= 1
    # what the user writes in --model_args wins over lm_eval's own --device instead of clashing with it
    lm = PhaseEnsembleLM.create_from_arg_string(
        f"base=hf,pretrained={setup['model']},step=4,device=cpu", {"device": "cuda:0", "batch_size": 2}
    )
    assert lm.batch_size == 2 and lm.step == 4


def test_documents_of_their_own_lengths_get_a_tested_verdict(setup, tmp_path, monkeypatch):
    """Issue #29: every document has its own length, so offset 0 lands on its own phase; the run
    still analyzes to a tested verdict (here in the log-prob margin: the tiny random model gives
    each document the same answer at every offset)."""
    import phasescope

    monkeypatch.chdir(ROOT)
    run = phasescope.sweep(f"hf:{setup['model']}", "lm-eval:ps_capitals", step=4, include_path=TASKS, out=tmp_path)
    starts = {r.phase for r in run.records if r.offset == 0}
    assert len(starts) >= 3 and len(run.records) == 24 * 24
    verdict = phasescope.analyze(tmp_path, n_resamples=499).verdict
    assert verdict.p_value is not None and verdict.effect_ci is not None and "not tested" not in verdict.sentence


def test_loading_and_rendering_tasks_draws_no_progress_bars(tmp_path, monkeypatch, capfd):
    """datasets' "Generating test split" and lm-eval's per-task bar littered a sweep's output;
    they are off while tasks load and render, and datasets' bars are on again after."""
    import datasets

    from phasescope.probes.lm_eval_tasks import documents, load_tasks

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")  # a first load generates splits
    monkeypatch.chdir(ROOT)
    for task in load_tasks(["ps_capitals"], TASKS).values():
        assert documents(task)
    err = capfd.readouterr().err
    assert "it/s" not in err and "examples/s" not in err, err
    assert datasets.is_progress_bar_enabled()


def test_a_multiple_choice_record_keeps_its_target_as_text(setup):
    """#46 part 10: a multiple-choice target is named "3" (its index, as lm-eval's doc_to_target),
    and its text is kept beside it: " Paris" for France, the model's answer as text too."""
    capitals = [json.loads(line) for line in (ROOT / "tests/data/lm_eval/capitals.jsonl").open()]
    rights = {d["choices"][d["answer"]] for d in capitals}
    rows = [r for r in records(setup["run"]) if r.get("task") == "ps_capitals"]
    assert rows and all(r["target_text"] is not None and r["answer_text"] is not None for r in rows)
    texts = {r["target_text"].strip() for r in rows}
    assert "Paris" in texts and texts <= rights
    assert {r["target"] for r in rows} <= {str(i) for i in range(4)}


def test_a_task_naming_its_own_data_files_loads_from_any_directory(tmp_path, monkeypatch):
    """#59: from another directory a local task failed with "Unable to find '<cwd>/tests/data/lm_eval/...'":
    datasets reads a relative data_files path from the working directory; phasescope finds it by the YAML."""
    from phasescope.probes.lm_eval_tasks import documents, load_tasks

    here = {name: len(documents(task)) for name, task in load_tasks(["ps_capitals"], str(ROOT / TASKS)).items()}
    monkeypatch.chdir(tmp_path)
    there = {name: len(documents(task)) for name, task in load_tasks(["ps_capitals"], str(ROOT / TASKS)).items()}
    assert there == here == {"ps_capitals": 24}
