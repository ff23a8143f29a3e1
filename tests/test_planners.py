"""Planner properties (docs/mechanisms.md, PCCL and short-circuiting) and the cost model."""

import math

import numpy as np
import pytest

from emulation.flowsim import simulate
from emulation.planners import (
    CostModel,
    StepCoster,
    ideal_substeps,
    make_plan,
    matching_groups,
    plan_cost,
    topology_key,
)
from emulation.workloads import build
from topologies.builders import ocs_star, torus_dims

GBPS = 400.0
B = GBPS * 1e9 / 8  # bytes/s
COST = CostModel(alpha_s=2e-6, delta_s=0.5e-6)


def fabric(n=16, r=1e-6, base="ring", p=None):
    return ocs_star(n, p or (2 if base == "ring" else 4), GBPS, r, base)


def ideal_keys(f, w):
    return [topology_key(ideal_substeps(f, st)[0][1]) for st in w.steps]


@pytest.mark.parametrize("planner", ["dp", "greedy"])
@pytest.mark.parametrize("alg", ["rhd", "rd"])
def test_r_to_zero_reconfigures_every_step_whose_pattern_differs(planner, alg):
    f = fabric(16, r=1e-12)
    w = build(alg, 16, 4 << 20)
    plan = make_plan(planner, f, w, COST)
    keys = ideal_keys(f, w)
    prev = [topology_key(f.initial)] + keys[:-1]
    assert [s.action for s in plan.steps] == ["reconfigure" if k != p else "keep" for k, p in zip(keys, prev)]
    assert [topology_key(s.configuration) for s in plan.steps] == keys
    assert plan.reconfigurations >= len(w.steps) // 2  # not a vacuous check


@pytest.mark.parametrize("planner", ["dp", "greedy"])
@pytest.mark.parametrize("base", ["ring", "torus"])
def test_r_to_infinity_never_reconfigures(planner, base):
    f = fabric(16, r=1e3, base=base)
    w = build("rhd", 16, 4 << 20)
    plan = make_plan(planner, f, w, COST)
    assert plan.reconfigurations == 0
    assert all(s.configuration == f.initial for s in plan.steps)
    assert plan.predicted_s == pytest.approx(plan_cost(f, make_plan("none", f, w), COST), rel=1e-12)


@pytest.mark.parametrize("r", [0.0, 1e-9, 1e-6, 1e-3])
@pytest.mark.parametrize("n", [8, 13, 32])
def test_ring_on_a_ring_never_reconfigures(r, n):
    f = fabric(n, r=r)
    for planner in ("dp", "greedy", "always"):
        assert make_plan(planner, f, build("ring", n, 1 << 20), COST).reconfigurations == 0


@pytest.mark.parametrize("base,alg,size", [("ring", "rhd", 64 << 10), ("ring", "rhd", 16 << 20),
                                           ("ring", "rd", 1 << 20), ("torus", "rhd", 16 << 20),
                                           ("torus", "direct", 1 << 20)])
def test_dp_cost_is_non_decreasing_in_r_and_never_worse_than_greedy(base, alg, size):
    costs = []
    for r in np.logspace(-9, -1, 17):
        f = fabric(16, r=float(r), base=base)
        w = build(alg, 16, size)
        dp = make_plan("dp", f, w, COST)
        got = plan_cost(f, dp, COST)
        assert got == pytest.approx(dp.predicted_s, rel=1e-12)  # the realised plan costs what the DP found
        for other in ("greedy", "none", "always"):
            assert got <= plan_cost(f, make_plan(other, f, w, COST), COST) * (1 + 1e-12), (other, r)
        costs.append(got)
    assert all(b >= a * (1 - 1e-12) for a, b in zip(costs, costs[1:]))
    assert costs[-1] > costs[0] * 1.05  # reconfiguring mattered somewhere in the sweep


def test_dp_beats_greedy_where_greedy_is_myopic():
    # RD exchanges the whole buffer: greedy switches for step 0 whenever one step pays R; the DP
    # weighs whole sequences. Find an R where the DP is strictly better.
    w = build("rhd", 32, 1 << 20)
    gaps = []
    for r in np.logspace(-7, -4, 31):
        f = fabric(32, r=float(r))
        gaps.append(plan_cost(f, make_plan("greedy", f, w, COST), COST) - plan_cost(f, make_plan("dp", f, w, COST), COST))
    assert min(gaps) >= -1e-15 and max(gaps) > 0


def test_cost_model_closed_forms_on_a_ring():
    """RHD step k on a ring: alpha + 2^k delta + s/(2B) (k < L-1); on circuits to the partner:
    alpha + delta + m_k/(pB); Ring: alpha + delta + s/(nB); equal total propagation 2(n-1) delta."""
    n, s = 32, 8 << 20
    a, d = COST.alpha_s, COST.delta_s
    f = fabric(n)
    coster = StepCoster(f, COST)
    rhd, ring = build("rhd", n, s), build("ring", n, s)
    levels = int(math.log2(n))
    for k, st in enumerate(rhd.steps[:levels - 1]):
        c = coster.cost(st, f.initial)
        assert c.dilation == 2**k
        assert c.time_s == pytest.approx(a + 2**k * d + s / 2 / B, rel=1e-12)
        ideal = ideal_substeps(f, st)[0][1]
        assert coster.cost(st, ideal).time_s == pytest.approx(a + d + s / 2 ** (k + 1) / (2 * B), rel=1e-12)
    for st in ring.steps:
        assert coster.cost(st, f.initial).time_s == pytest.approx(a + d + s / n / B, rel=1e-12)
    prop = lambda w: sum(coster.cost(st, f.initial).dilation for st in w.steps)  # noqa: E731
    assert prop(rhd) == prop(ring) == 2 * (n - 1)


@pytest.mark.parametrize("alg,r", [("rhd", 1e-6), ("rhd", 50e-6), ("rd", 5e-6), ("ring", 1e-6)])
def test_flow_backend_matches_the_dp_prediction_on_uniform_steps(alg, r):
    f = fabric(16, r=r)
    plan = make_plan("dp", f, build(alg, 16, 16 << 20), COST)
    res = simulate(f, plan.workload, plan, alpha_s=COST.alpha_s, delta_s=COST.delta_s)
    assert res.time_s == pytest.approx(plan.predicted_s, rel=1e-9)


@pytest.mark.parametrize("n,p", [(8, 2), (16, 2), (16, 4), (9, 2), (12, 3)])
def test_matching_groups_cover_every_pair_once_within_ports(n, p):
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
    groups = matching_groups(pairs, p, n)
    flat = [q for g in groups for q in g]
    assert sorted(flat) == pairs
    for g in groups:
        deg = np.bincount(np.array(g).ravel(), minlength=n)
        assert deg.max() <= p
    lower = math.ceil((n - 1) / p)
    assert lower <= len(groups) <= lower + 1


def test_direct_alltoall_plan_splits_into_matching_substeps_and_simulates():
    f = fabric(8, r=1e-6)
    w = build("direct", 8, 8 << 20, "alltoall")
    plan = make_plan("dp", f, w, COST)
    assert len(plan.workload.steps) == 4  # K_8 in groups of degree 2: shifts 1, 2, 3, 4
    assert plan.steps[0].action == "keep"  # shift 1 is the ring itself
    res = simulate(f, plan.workload, plan, alpha_s=COST.alpha_s, delta_s=COST.delta_s)
    assert res.bytes_sent == w.bytes_sent
    assert res.time_s == pytest.approx(plan.predicted_s, rel=1e-9)


def test_torus_dims_and_base_topology():
    assert [torus_dims(n) for n in (8, 16, 128, 7)] == [(2, 4), (4, 4), (8, 16), (1, 7)]
    f = fabric(128, base="torus")
    from emulation.routing import Routes

    dist = Routes(f, None, 4).dist[:128]
    assert dist.max() == 4 + 8  # rows/2 + cols/2
    assert all(len([c for c in f.initial["ocs0"] if g in (c.a.gpu, c.b.gpu)]) == 4 for g in range(128))


def test_plan_sweep_equals_planning_each_r_on_its_own():
    from emulation.planners import plan_sweep

    w = build("rhd", 16, 1 << 20)
    rs = [1e-8, 1e-6, 3.7e-6, 1e-4]
    for planner in ("greedy", "dp"):
        swept = plan_sweep(planner, fabric(16, r=0.0), w, COST, rs)
        for r, plan in zip(rs, swept):
            alone = make_plan(planner, fabric(16, r=r), w, COST)
            assert [s.configuration for s in plan.steps] == [s.configuration for s in alone.steps]
            assert plan.predicted_s == pytest.approx(alone.predicted_s, rel=1e-12)
            assert plan.reconfiguration_delay_s == r


def test_reproduce_scripts_print_tables_and_write_plots(tmp_path):
    import csv
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "sc"
    got = subprocess.run([sys.executable, str(root / "scripts/reproduce_shortcircuit.py"), "--gpus", "16",
                          "--sizes", "4KiB", "1MiB", "--b-sizes", "64KiB", "--r-us", "0.01", "1000",
                          "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    assert "total propagation Ring 15.00 us, RHD 15.00 us (equal)" in got.stdout  # 2(n-1) x 0.5 us
    rows = list(csv.DictReader((out / "sweep_b.csv").open()))
    assert [float(r["reconfiguration_delay_s"]) for r in rows] == [1e-8, 1e-3]
    assert float(rows[0]["speedup_dp_over_ring"]) > 1 > float(rows[1]["speedup_dp_over_ring"])
    assert (out / "shortcircuit_a.png").stat().st_size > 10_000
    bad = subprocess.run([sys.executable, str(root / "scripts/reproduce_pccl.py"), "--sizes", "lots"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--sizes" in bad.stderr
