"""Property-based fault tests: random and corrupted records, record files, configs and probe
files given to the loaders give a clear ``InputError`` or a correct result; never another
exception, and never a NaN in an output."""

import json
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phasescope.analysis.stats import analyze_records
from phasescope.data.retrieval import RetrievalTask
from phasescope.errors import InputError
from phasescope.kv.config import CompressionConfig
from phasescope.model.config import ModelConfig
from phasescope.probes import CompletionSpec
from phasescope.rundir.files import read_json
from phasescope.rundir.records import read_records
from phasescope.train.config import TrainConfig
from phasescope.train.recipes import get_recipe

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 30), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def valid_record(content: int, offset: int, correct: bool) -> dict:
    return {
        "content_id": content,
        "offset": offset,
        "phase": offset % 4,
        "step": 4,
        "correct": correct,
        "logprob_target": -1.0,
        "logprobs": {"right": -1.0, "other": -2.0},
        "target": "right",
    }


def base_records(seed: int, n_contents: int = 12) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [valid_record(c, d, bool(rng.random() < 0.6)) for c in range(n_contents) for d in range(8)]


def no_nan(obj) -> None:
    json.dumps(obj, allow_nan=False)  # raises on NaN / inf anywhere


def analyze_or_refuse(records) -> None:
    try:
        metrics = analyze_records(records, n_resamples=50)
    except InputError:
        return
    no_nan(metrics)
    for row in metrics["phases"]:
        assert row["accuracy"] is None or 0 <= row["accuracy"] <= 1


@SETTINGS
@given(
    seed=st.integers(0, 10),
    edits=st.lists(
        st.tuples(st.integers(0, 95), st.sampled_from(list(valid_record(0, 0, True))), json_values), max_size=3
    ),
    drop=st.lists(st.integers(0, 95), max_size=40),
)
def test_records_with_random_fields_are_analyzed_or_refused(seed, edits, drop):
    records = base_records(seed)
    for index, field, value in edits:
        records[index][field] = value
    records = [r for i, r in enumerate(records) if i not in set(drop)]
    analyze_or_refuse(records)


@SETTINGS
@given(records=st.lists(st.dictionaries(st.sampled_from(list(valid_record(0, 0, True))), json_values), max_size=6))
def test_arbitrary_objects_as_records_are_refused_cleanly(records):
    analyze_or_refuse(records)


@SETTINGS
@given(seed=st.integers(0, 5), cut=st.integers(0, 4000), insert=st.binary(max_size=12), at=st.integers(0, 4000))
def test_a_corrupted_records_file_is_read_or_refused(tmp_path_factory, seed, cut, insert, at):
    path = tmp_path_factory.mktemp("r") / "records.jsonl"
    data = "".join(json.dumps(r) + "\n" for r in base_records(seed)).encode()
    data = data[: at % (len(data) + 1)] + insert + data[at % (len(data) + 1) :]
    path.write_bytes(data[: len(data) - cut % (len(data) + 1)])
    try:
        found = read_records(path)
    except InputError:
        return
    if found.records:
        analyze_or_refuse(found.records)


def mutate(config: dict, path: list, value) -> dict:
    """Set (or delete, with value ...) one key somewhere in a nested config."""
    target = config
    for key in path[:-1]:
        if not isinstance(target, dict) or key not in target:
            return config
        target = target[key]
    if isinstance(target, dict):
        if value is Ellipsis:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value
    return config


TRAIN = json.loads(get_recipe("tiny-s4").to_json())
KEYS = [[k] for k in TRAIN] + [[s, k] for s in ("model", "task") for k in TRAIN[s]] + [["scheme", "step"]]


@SETTINGS
@given(path=st.sampled_from(KEYS), value=st.one_of(json_values, st.just(Ellipsis)))
def test_a_mutated_train_config_is_built_or_refused(path, value):
    data = mutate(json.loads(json.dumps(TRAIN)), path, value)
    try:
        cfg = TrainConfig.from_dict(data)
    except InputError:
        return
    assert math.isfinite(cfg.lr) and cfg.model.norm_eps > 0 and cfg.steps >= 1


@SETTINGS
@given(data=json_values)
def test_arbitrary_json_as_a_config_is_refused_cleanly(data):
    for cls in (ModelConfig, CompressionConfig, RetrievalTask, TrainConfig):
        try:
            cls.from_dict(data)
        except InputError:
            pass


@SETTINGS
@given(data=st.one_of(json_values, st.fixed_dictionaries({"prompt": json_values, "candidates": json_values})))
def test_a_random_probe_file_is_loaded_or_refused(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("p") / "probe.json"
    path.write_text(json.dumps(data))
    try:
        spec = CompletionSpec.from_file(path)
    except InputError:
        return
    assert spec.prompt.count("{pad}") == 1 and spec.target in spec.candidates


@SETTINGS
@given(content=st.binary(max_size=40))
def test_random_bytes_as_a_json_file_are_refused_naming_the_file(tmp_path_factory, content):
    path = tmp_path_factory.mktemp("j") / "spec.json"
    path.write_bytes(content)
    try:
        assert isinstance(read_json(path, "sweep spec"), dict)
    except InputError as err:
        assert str(path) in str(err)
