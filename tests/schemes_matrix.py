"""The scheme matrix every engine test runs: every registered pooler in several geometries."""

from phasescope.kv import POOLERS, CompressionConfig


def _cases():
    cases = {
        "full": CompressionConfig(kind="full"),
        "full-sink": CompressionConfig(kind="full", sink=True),
        "sliding-3": CompressionConfig(kind="sliding", local=3),
        "scalar_gate-stagger-sink": CompressionConfig(
            step=4, window=8, local=3, stagger=True, sink=True, pooler="scalar_gate"
        ),
        # DeepSeek-V4's value path: values rotated like keys, output de-rotated per query
        "full-valuerope": CompressionConfig(kind="full", value_rope=True),
        "sliding-3-valuerope": CompressionConfig(kind="sliding", local=3, value_rope=True),
        "channel_gate-v4-valuerope": CompressionConfig(
            step=4, window=8, local=3, sink=True, pooler="channel_gate", value_rope=True
        ),
        "channel_gate-stagger-valuerope": CompressionConfig(
            step=4, window=4, local=2, stagger=True, pooler="channel_gate", value_rope=True
        ),
        "scalar_gate-winrope-valuerope": CompressionConfig(
            step=3, window=6, align=1, local=2, rope="window_start", pooler="scalar_gate", value_rope=True
        ),
    }
    for pooler in POOLERS:
        geoms = {
            "s4w4": dict(step=4, window=4, local=3),
            "s3w6-align2": dict(step=3, window=6, align=2, local=2, sink=True),
            "s4w8-strict-L0": dict(step=4, window=8, visibility="strict", local=0),
            "s4w4-stagger-winrope": dict(step=4, window=4, local=2, stagger=True, rope="window_start"),
            "s2w4-norope": dict(step=2, window=4, align=1, local=1, rope="none"),
        }
        for geom, kw in geoms.items():
            cases[f"{pooler}-{geom}"] = CompressionConfig(pooler=pooler, **kw)
    return cases


SCHEME_CASES = _cases()
