"""Amendment 5d's intervention (issue #34): the KV heads rule C names, hidden together, against
random sets of as many KV heads; the gap measured on the contents the heads were not chosen on."""

import numpy as np

from phasescope.reproduce.amendment5 import intervention_verdict
from phasescope.reproduce.intervention import beaten, named_kv_heads, random_sets


def result(named_lowered, random_lowered, named=((0, 1), (1, 2))):
    randoms = [{"kv_heads": [[0, 0], [0, 1]], "lowered_pp": v} for v in random_lowered]
    return {"named": [list(h) for h in named], "gap_unablated_pp": 12.0, "named_lowered_pp": named_lowered} | {
        "random": randoms
    }


def seed_row(seed, named_lowered, random_lowered, accuracy=0.5):
    iv = result(named_lowered, random_lowered)
    return {"recipe": "tiny-s4-kv4", "seed": seed, "variant": "plain", "mean_accuracy": accuracy, "learned": True} | {
        "intervention": iv
    }


def test_named_heads_are_the_union_of_each_phases_top_kv_head():
    kv = {"causal": [{"kv_heads": [[1, 3]]}, {"kv_heads": [[0, 3]]}, {"kv_heads": [[0, 2]]}, {"kv_heads": [[0, 2]]}]}
    assert named_kv_heads(kv) == [(0, 2), (0, 3), (1, 3)]


def test_random_sets_are_seeded_draws_of_distinct_units_of_the_named_size():
    units = [(layer, h) for layer in range(2) for h in range(4)]
    drawn = random_sets(units, 3, seed=4)
    assert drawn == random_sets(units, 3, seed=4) and drawn != random_sets(units, 3, seed=5)
    assert len(drawn) == 20 and all(len(set(s)) == 3 and set(s) <= set(units) for s in drawn)
    counts = np.bincount([units.index(u) for s in random_sets(units, 3, 0, n=4000) for u in s], minlength=8)
    assert np.all(np.abs(counts / 4000 - 3 / 8) < 0.04)  # every unit equally likely


def test_beating_counts_strictly_larger_drops_and_a_withheld_gap_is_no_result():
    assert beaten(result(5.0, [1.0] * 18 + [5.0, 7.0])) == 18  # a tie is not beaten
    assert beaten(result(None, [1.0] * 20)) is None
    assert beaten(result(5.0, [1.0] * 19 + [None])) is None


def test_the_verdict_needs_19_of_20_on_every_counted_seed():
    strong = [seed_row(s, 9.0, [0.5] * 19 + [10.0]) for s in range(5)]
    assert intervention_verdict(strong)["verdict"] == "explains"
    weak = [seed_row(s, 1.0, list(np.linspace(-3, 3, 20))) for s in range(5)]
    assert intervention_verdict(weak)["verdict"] == "does not explain"
    assert intervention_verdict(strong[:3] + weak[3:])["verdict"] == "inconclusive"
    assert intervention_verdict(strong[:2])["verdict"] == "inconclusive"  # too few seeds
    outside_band = strong[:4] + [seed_row(4, 1.0, [2.0] * 20, accuracy=0.99) | {"learned": False}]
    assert intervention_verdict(outside_band)["verdict"] == "explains"  # the uncounted seed is not judged
    withheld = strong[:4] + [seed_row(4, None, [0.5] * 20)]
    assert intervention_verdict(withheld)["verdict"] == "inconclusive"


def test_the_intervention_on_a_shipped_model_measures_the_gap_on_the_held_out_half(tmp_path, monkeypatch):
    """Tiny settings on a shipped 4-KV-head model: the unablated gap is analyze's gap of the held-out
    half of a plain sweep, and each set's drop is that gap minus the gap with the set hidden."""
    import phasescope
    import phasescope.reproduce.intervention as intervention
    from phasescope.analysis.heads import split_contents
    from phasescope.analysis.stats import analyze_records
    from phasescope.backends import resolve_model
    from phasescope.inspect.kv_heads import hide_kv_entries
    from phasescope.reproduce.intervention import run_intervention
    from phasescope.train.shipped import ASSETS

    monkeypatch.setattr(intervention, "RESAMPLES", 200)  # the point estimate of the gap is all this test reads
    model = ASSETS / "tiny-s4-kv4-s0"
    kv = {
        "causal": [{"kv_heads": [[0, 1]]}, {"kv_heads": [[1, 2]]}],
        "heads": [{"layer": layer, "kv_head": h} for layer in range(2) for h in range(4)],
    }
    offsets = list(range(12))
    out = run_intervention(model, 1, kv, samples=24, offsets=offsets, n_random=2)
    records = phasescope.sweep(str(model), "kv-retrieval", offsets=offsets, samples=24, seed=0).records
    _, tested = split_contents(np.array([r.content_id for r in records]), 0)
    held_out = [r.to_json() for r in records if r.content_id in set(tested.tolist())]
    base = analyze_records(held_out, n_resamples=200)["gap_pp"]
    assert out["settings"]["tested_contents"] == 12 and out["gap_unablated_pp"] == base
    loaded = resolve_model(str(model))
    with hide_kv_entries(loaded.module, [(0, 1), (1, 2)]):
        hidden = phasescope.sweep(loaded, "kv-retrieval", offsets=offsets, samples=24, seed=0).records
    gap = analyze_records([r.to_json() for r in hidden if r.content_id in set(tested.tolist())], n_resamples=200)
    assert out["named"] == [[0, 1], [1, 2]] and out["named_lowered_pp"] == base - gap["gap_pp"]
    assert [len(r["kv_heads"]) for r in out["random"]] == [2, 2]
