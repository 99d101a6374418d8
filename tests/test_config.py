"""Bad geometry is rejected at construction, naming field, value and allowed range."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phasescope.kv import CompressionConfig, entry_ends, scheme
from phasescope.model import ModelConfig, preset


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(step=0), "step"),
        (dict(step=4, window=3), "window"),
        (dict(local=-1), "local"),
        (dict(step=4, align=4), "align"),
        (dict(step=4, align=-1), "align"),
        (dict(pooler="max"), "pooler"),
        (dict(visibility="sometimes"), "visibility"),
        (dict(rope="end"), "rope"),
        (dict(kind="sparse"), "kind"),
        (dict(pooler="channel_gate", step=4, window=6), "window"),
        (dict(kind="sliding", local=0), "local"),
        (dict(rope="none", value_rope=True), "value_rope"),
        (dict(kind="full", value_rope=1), "value_rope"),
    ],
)
def test_invalid_geometry_names_field_value_and_range(kwargs, field):
    with pytest.raises(ValueError, match=rf"{field}=.*allowed: "):
        CompressionConfig(**kwargs)


def test_heads_that_do_not_divide_are_rejected():
    with pytest.raises(ValueError, match=r"n_kv_heads=3 is invalid; allowed: a divisor of n_heads \(4\)"):
        ModelConfig(vocab_size=10, n_heads=4, n_kv_heads=3)


def test_unknown_keys_and_names_are_rejected():
    with pytest.raises(ValueError, match="unknown keys"):
        CompressionConfig.from_dict({"step": 4, "stride": 2})
    with pytest.raises(ValueError, match="unknown scheme"):
        scheme("v5")
    with pytest.raises(ValueError, match="unknown fields"):
        scheme("v4-csa", stride=2)


def test_deepseek_v4_schemes_use_the_v4_value_path():
    for name in ("v4-csa", "v4-hca", "v4.1"):
        assert scheme(name).value_rope, name
    assert not scheme("study").value_rope
    with pytest.raises(ValueError, match=r"value_rope=True is invalid; allowed: False when rope=.none."):
        scheme("v4-csa", rope="none")


def test_config_round_trips_through_dict():
    cfg = preset("tiny", 40, scheme("v4-csa", local=8))
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


@given(
    step=st.integers(1, 9),
    align_frac=st.integers(0, 100),
    start=st.integers(0, 40),
    length=st.integers(0, 40),
)
def test_entry_ends_are_exactly_the_boundary_phase_positions(step, align_frac, start, length):
    align = align_frac % step
    ends = entry_ends(start, start + length, step, align).tolist()
    expected = [p for p in range(start, start + length) if (p - align) % step == step - 1]
    assert ends == expected


def test_stagger_spreads_heads_over_phases():
    cfg = CompressionConfig(step=4, window=4, stagger=True)
    assert [cfg.head_align(h, 4) for h in range(4)] == [0, 1, 2, 3]
    assert [cfg.head_align(h, 2) for h in range(2)] == [0, 2]
