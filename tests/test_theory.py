"""The gradient-flow model (phasescope.theory): limits where symmetry must hold, a regime where it
must break, and the hand-derived gradient against autograd of an independently written loss."""

import json
import math

import numpy as np
import pytest
import torch

from phasescope.theory import FlowConfig, critical_capacity, gradient, integrate, raw_coverage, uniform_curvature
from phasescope.theory.run import run_theory, summarise


def torch_loss(theta, g, d, noise, vocab, rho):
    """The loss of docs/theory.md written again from the equations, in torch."""
    s = theta.shape[-1]
    a = torch.softmax(theta, dim=-1)
    interference = (a**2).sum(-1, keepdim=True) - a**2 + noise
    u = math.log(vocab - 1) + g**2 * interference / (2 * d) - g * a
    return ((1 - rho) / s * torch.nn.functional.softplus(u)).sum()


@pytest.mark.parametrize("s", [1, 2, 4, 7])
def test_hand_gradient_equals_autograd(s):
    rng = np.random.default_rng(s)
    theta, g = rng.normal(size=(3, s)), rng.normal(size=(3, s)) * 5
    rho = rng.uniform(0, 0.5, size=s)
    t_theta = torch.tensor(theta, requires_grad=True)
    t_g = torch.tensor(g, requires_grad=True)
    torch_loss(t_theta, t_g, 16.0, 0.3, 32, torch.tensor(rho)).backward()
    d_theta, d_g = gradient(theta, g, 16.0, 0.3, 32, rho)
    np.testing.assert_allclose(d_theta, t_theta.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(d_g, t_g.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_one_offset_has_nothing_to_break():
    cfg = FlowConfig(step=1, capacity=4.0, noise=0.25, horizon=500.0)
    assert uniform_curvature(cfg) == math.inf and critical_capacity(cfg) is None
    out = integrate(cfg, 4, np.random.default_rng(0))
    np.testing.assert_allclose(out["a"], 1.0)
    assert summarise(cfg, out)["broken_fraction"] == 0.0


@pytest.mark.parametrize("noise", [0.0, 0.25])
def test_ample_capacity_keeps_the_uniform_pooling(noise):
    cfg = FlowConfig(step=4, capacity=128.0, noise=noise, horizon=3000.0)
    assert uniform_curvature(cfg) > 0
    out = integrate(cfg, 16, np.random.default_rng(1))
    row = summarise(cfg, out)
    assert row["broken_fraction"] == 0.0
    assert np.abs(out["a"] - 0.25).max() < 0.01  # the flow returns to uniform, not merely stays near
    assert row["gap_pp_mean"] < 1.0


def test_limited_capacity_breaks_symmetry_with_spread_preferences():
    cfg = FlowConfig(step=4, capacity=8.0, noise=0.25, horizon=3000.0)
    assert uniform_curvature(cfg) < 0
    out = integrate(cfg, 32, np.random.default_rng(2))
    row = summarise(cfg, out)
    assert row["broken_fraction"] == 1.0
    assert row["gap_pp_mean"] > 30
    counts = row["top_offset_counts"]
    assert sum(c > 0 for c in counts) == 4 and max(counts) < 20  # different starts prefer different offsets


def test_critical_capacity_separates_the_two_regimes():
    base = FlowConfig(step=4, noise=0.25)
    d_star = critical_capacity(base)
    assert d_star is not None and 10 < d_star < 100
    assert uniform_curvature(FlowConfig(step=4, noise=0.25, capacity=0.9 * d_star)) < 0
    assert uniform_curvature(FlowConfig(step=4, noise=0.25, capacity=1.1 * d_star)) > 0
    # more noise needs more capacity to keep the uniform pooling
    assert critical_capacity(FlowConfig(step=4, noise=1.0)) > d_star


def test_raw_coverage_geometry():
    np.testing.assert_array_equal(raw_coverage(4, 0, 4), 0.0)
    rho = raw_coverage(4, 8, 4)
    assert np.all(np.diff(rho) > 0)  # late offsets sit nearer the query
    # offset 3 with the query at phase 0 of the next block is 1 token back: covered by L = 2
    assert raw_coverage(4, 2, 1)[3] == 0.25


def test_run_theory_is_json_and_writes_figures(tmp_path):
    from phasescope.theory.figures import write_figures

    seen = []
    result = run_theory(step=4, n_starts=2, seed=0, horizon=50.0, on_setting=lambda k, cfg: seen.append((k, cfg)))
    assert [k for k, _ in seen] == list(range(1, len(seen) + 1)) and len({cfg for _, cfg in seen}) == len(seen)
    assert seen[0][1].step == 4 and len(seen) > 10  # every distinct setting announced once, the main one first
    assert result == run_theory(step=4, n_starts=2, seed=0, horizon=50.0)  # watching changes nothing
    text = json.dumps(result)
    assert json.loads(text)["config"]["step"] == 4
    assert [row["step"] for row in result["by_step"]] == [2, 4, 6, 8]
    assert len(result["starts"]) == 2 and len(result["starts"][0]["weights"]) == 4
    paths = write_figures(result, tmp_path)
    assert all(p.stat().st_size > 1000 for p in paths)


def test_cli_registers_theory_with_help_on_every_option():
    from typer.testing import CliRunner

    from phasescope.cli import app

    result = CliRunner().invoke(app, ["theory", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--step", "--starts", "--seed", "--capacity", "--noise", "--out"):
        assert option in result.output


@pytest.mark.parametrize("bad", [["--noise", "inf"], ["--capacity", "inf"]])
def test_cli_refuses_a_non_finite_noise_or_capacity(bad):
    from typer.testing import CliRunner

    from phasescope.cli import app

    result = CliRunner().invoke(app, ["theory", *bad], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and f"{bad[0]} " in result.output and "a finite number" in result.output
