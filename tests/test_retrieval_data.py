"""The retrieval task generator: layout invariants, phase balance, determinism."""

import numpy as np
import pytest

from phasescope.data.retrieval import BOS, IGNORE, QUERY, RetrievalTask, phase_histogram, sample_batch

TASK = RetrievalTask(
    n_keys=20,
    n_values=20,
    n_filler=5,
    key_len=2,
    value_len=2,
    n_pairs=10,
    n_queries=3,
    max_gap=2,
    min_distance=12,
    seq_len=130,
)


def test_rows_follow_the_documented_layout():
    batch = sample_batch(TASK, 50, np.random.default_rng(0))
    for b in range(50):
        ids = batch.input_ids[b]
        assert ids[0] == BOS and len(ids) == TASK.seq_len
        for q in range(TASK.n_queries):
            k, v, a = batch.key_pos[b, q], batch.value_pos[b, q], batch.answer_pos[b, q]
            assert v == k + TASK.key_len
            assert ids[a - TASK.key_len - 1] == QUERY
            assert np.array_equal(ids[a - TASK.key_len : a], ids[k : k + TASK.key_len]), "query repeats the key"
            assert np.array_equal(ids[a : a + TASK.value_len], ids[v : v + TASK.value_len]), "answer is the value"
            assert np.array_equal(batch.targets[b, a - 1 : a - 1 + TASK.value_len], ids[a : a + TASK.value_len])
            query_start = TASK.seq_len - TASK.n_queries * TASK.query_len
            assert query_start - (v + TASK.value_len - 1) > TASK.min_distance
        assert (batch.targets[b] != IGNORE).sum() == TASK.n_queries * TASK.value_len
        keys = {tuple(ids[k : k + 2]) for k in batch.key_pos[b]}
        assert len(keys) == TASK.n_queries, "queried keys are distinct"


def test_every_phase_is_equally_represented():
    hist = phase_histogram(TASK, steps=(2, 3, 4, 6, 8), n_rows=6000, rng=np.random.default_rng(1))
    for step, shares in hist.items():
        assert np.allclose(shares, 1 / step, atol=0.015), (step, shares)


def test_generator_is_deterministic_per_seed():
    a = sample_batch(TASK, 4, np.random.default_rng(7)).input_ids
    b = sample_batch(TASK, 4, np.random.default_rng(7)).input_ids
    c = sample_batch(TASK, 4, np.random.default_rng(8)).input_ids
    assert np.array_equal(a, b) and not np.array_equal(a, c)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(seq_len=60), "seq_len=60 is invalid"),
        (dict(n_queries=11), "n_queries=11 is invalid"),
        (dict(n_keys=3, key_len=1), "fewer distinct keys"),
        (dict(max_gap=-1), "max_gap=-1 is invalid"),
    ],
)
def test_impossible_tasks_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RetrievalTask(**{**TASK.to_dict(), **kwargs})


def test_the_defaults_are_a_valid_task_the_tiny_recipes_task():
    from phasescope.train.recipes import TINY_TASK

    assert RetrievalTask() == TINY_TASK
    batch = sample_batch(RetrievalTask(), 2, np.random.default_rng(0))
    assert batch.input_ids.shape == (2, 128) and batch.value_pos.shape == (2, 8)
