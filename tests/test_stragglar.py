"""StragglAR: synthesised schedules, their checker, the straggler model in scenarios,
and the alpha-beta numbers of docs/mechanisms.md on the flow backend."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emulation.flowsim import simulate
from emulation.planners import make_plan
from emulation.collective.runner import run_flow
from emulation.scenario import load_scenario, resolve
from emulation.workloads import build
from emulation.workloads.checker import ScheduleError
from emulation.workloads.model import Step, Workload
from emulation.workloads.stragglar import (
    check_stragglar,
    describe_step,
    lower_bound_rounds,
    stragglar_allreduce,
    stragglar_rounds,
    with_straggler,
)
from topologies import eps_star, ocs_star

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30
ALPHA = 3e-6
GBPS = 450 * 8 * GIB / 1e9  # 450 GiB/s per GPU
BPS = GBPS * 1e9 / 8


# ---- synthesis and checker -------------------------------------------------------------------
#: Every size up to 48, then a few: the greedy synthesis of an odd size above 48 takes 3-7 s
#: (networkx matchings), 13 of them 52 s of the suite.
CHECKED_SIZES = [*range(3, 49), 51, 57, 62, 63, 64]


@pytest.mark.parametrize("n", CHECKED_SIZES)
def test_synthesised_schedule_passes_the_checker(n):
    w = stragglar_allreduce(n, 1 << 20)
    check_stragglar(w)
    rounds = len(stragglar_rounds(n))
    assert sum(s.phase == "A" for s in w.steps) == n - 2
    assert sum(s.phase == "B" for s in w.steps) == rounds
    # the straggler's n-1 sequential exchanges bound any schedule of this structure
    assert rounds >= n - 1 + (math.ceil(math.log2(n)) - 1)
    if n % 2 == 0:  # the paper's reach for even n: n - 2 + ceil(log2 n), or one more
        assert rounds <= lower_bound_rounds(n) + 1


@pytest.mark.parametrize("n, rounds", [(4, 4), (8, 9), (16, 18), (32, 35), (64, 68)])
def test_powers_of_two_reach_n_minus_2_plus_log2_n(n, rounds):
    assert len(stragglar_rounds(n)) == rounds == n - 2 + int(math.log2(n))


def test_four_ranks_give_the_spec_example():
    w = stragglar_allreduce(4, 3 << 20)
    got = [describe_step(s, 3) for s in w.steps if s.phase == "B"]
    assert got == ["0<=>S(c0)", "1<=>S(c1)   0->2(c0)", "2<=>S(c2)   0<->1(c0/c1)", "S->1(c2)   0<->2(c1/c2)"]


def test_every_phase_b_transfer_moves_one_chunk_of_s_over_n_minus_1():
    n, s = 8, 7 << 20
    w = stragglar_allreduce(n, s)
    assert w.chunks == n - 1
    for st in w.steps:
        assert all(t.bytes == s // (n - 1) and t.nchunks == 1 for t in st.transfers)


def _replace(w: Workload, index: int, step: Step) -> Workload:
    steps = list(w.steps)
    steps[index] = step
    return Workload(w.collective, w.algorithm, w.ranks, w.bytes, w.chunks, tuple(steps))


def test_checker_rejects_a_round_that_is_not_a_matching():
    w = stragglar_allreduce(8, 1 << 20)
    i = next(k for k, s in enumerate(w.steps) if s.phase == "B" and len(s.transfers) >= 6)
    st = w.steps[i]
    t = st.transfers[3]
    extra = w.transfer(t.src, (t.dst + 1) % 7 if (t.dst + 1) % 7 != t.src else (t.dst + 2) % 7, t.chunk, op="copy")
    with pytest.raises(ScheduleError, match="not a matching|paired"):
        check_stragglar(_replace(w, i, Step("B", st.transfers + (extra,))))


def test_checker_rejects_forwarding_a_partially_reduced_chunk():
    n = 8
    w = stragglar_allreduce(n, 1 << 20)
    first_b = next(k for k, s in enumerate(w.steps) if s.phase == "B")
    # after Phase A rank 1 holds chunk 1 reduced over the non-stragglers only: forwarding it early
    bad = Step("B", w.steps[first_b].transfers + (w.transfer(1, 2, 1, op="copy"),))
    with pytest.raises(ScheduleError, match="not fully reduced"):
        check_stragglar(_replace(w, first_b, bad))


def test_checker_rejects_a_schedule_that_stops_early():
    w = stragglar_allreduce(8, 1 << 20)
    short = Workload(w.collective, w.algorithm, w.ranks, w.bytes, w.chunks, w.steps[:-1])
    with pytest.raises(ScheduleError):
        check_stragglar(short)


@pytest.mark.parametrize("rank", [0, 3, 7])
def test_relabelled_schedule_keeps_the_straggler_out_of_phase_a(rank):
    w = with_straggler(stragglar_allreduce(8, 1 << 20), rank)
    check_stragglar(w, straggler=rank)
    assert all(rank not in (t.src, t.dst) for s in w.steps if s.phase == "A" for t in s.transfers)
    b0 = next(s for s in w.steps if s.phase == "B")
    assert {(t.src, t.dst) for t in b0.transfers} == {(0 if rank != 0 else 7, rank), (rank, 0 if rank != 0 else 7)}


# ---- alpha-beta numbers on the flow backend (EPS) -------------------------------------------
def _flow(fabric, alg, n, s, d, planner="none"):
    w = build(alg, n, s)
    plan = make_plan(planner, fabric, w)
    arr = [0.0] * n
    arr[-1] = d
    return simulate(fabric, plan.workload, plan, alpha_s=ALPHA, arrivals_s=arr).time_s


@pytest.mark.parametrize("n, spec_ratio", [(8, 1.36), (16, 1.56)])
def test_post_barrier_ring_over_stragglar_matches_the_spec(n, spec_ratio):
    f = eps_star(n, GBPS)
    d = 1.0  # far beyond Phase A: the straggler's arrival is the barrier
    strag = _flow(f, "stragglar", n, GIB, d) - d
    ring = _flow(f, "ring", n, GIB, d) - d
    c = len(stragglar_rounds(n))
    assert strag == pytest.approx(c * ALPHA + c / (n - 1) * GIB / BPS, rel=1e-6)  # Phase B closed form
    assert ring == pytest.approx(2 * (n - 1) * ALPHA + 2 * (n - 1) / n * GIB / BPS, rel=1e-9)
    assert ring / strag == pytest.approx(spec_ratio, rel=0.01)


def test_end_to_end_is_max_of_delay_and_phase_a_plus_phase_b():
    n = 8
    f = eps_star(n, GBPS)
    a = (n - 2) * ALPHA + (n - 2) / (n - 1) * GIB / BPS
    b = 9 * ALPHA + 9 / (n - 1) * GIB / BPS
    ring = 2 * (n - 1) * ALPHA + 2 * (n - 1) / n * GIB / BPS
    for d in (0.0, 0.3 * a, a, 1.7 * a):
        assert _flow(f, "stragglar", n, GIB, d) == pytest.approx(max(d, a) + b, rel=1e-6)
        assert _flow(f, "ring", n, GIB, d) == pytest.approx(d + ring, rel=1e-9)
    # crossover: StragglAR wins from D = a + b - ring (spec: about 0.88 ms)
    x = a + b - ring
    assert x == pytest.approx(0.88e-3, rel=0.01)
    assert _flow(f, "stragglar", n, GIB, 0.95 * x) > _flow(f, "ring", n, GIB, 0.95 * x)
    assert _flow(f, "stragglar", n, GIB, 1.05 * x) < _flow(f, "ring", n, GIB, 1.05 * x)


def test_ocs_with_one_circuit_per_gpu_per_round_matches_the_eps_when_r_is_zero():
    n, d = 8, 1.0
    eps = _flow(eps_star(n, GBPS), "stragglar", n, GIB, d) - d
    f = ocs_star(n, 1, GBPS, 0.0, "empty")
    w = build("stragglar", n, GIB)
    plan = make_plan("always", f, w)
    for sp, st in zip(plan.steps, plan.workload.steps):
        if st.phase == "B":  # each round runs on its own matching: one circuit per GPU
            pairs = {(min(c.a.gpu, c.b.gpu), max(c.a.gpu, c.b.gpu)) for _, c in sp.configuration.all_circuits()}
            assert pairs == {(min(t.src, t.dst), max(t.src, t.dst)) for t in st.transfers}
    assert _flow(f, "stragglar", n, GIB, d, "always") - d == pytest.approx(eps, rel=1e-9)
    r = 10e-6
    slow = _flow(ocs_star(n, 1, GBPS, r, "empty"), "stragglar", n, GIB, d, "always") - d
    rounds = len(stragglar_rounds(n))
    # every round after the first waits R (the first reconfigures while the straggler is late)
    assert slow == pytest.approx(eps + (rounds - 1) * r, rel=1e-6)


# ---- scenarios: the straggler model ----------------------------------------------------------
SCEN = """
name: strag
fabric: {topology: eps, gpus: 8, port_gbps: 3865.47}
cost: {alpha_s: 3.0e-6}
sizes: [64MiB]
runs:
  - {name: stragglar, algorithm: stragglar}
  - {name: ring, algorithm: ring}
  - {name: rhd, algorithm: rhd}
backend: flow
"""


def test_iterations_draw_one_seeded_delay_each_and_every_algorithm_sees_it(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(SCEN + "iterations: 6\nstraggler: {rank: 2, delay_s: 0.02, jitter_s: 0.01, seed: 4}\n")
    sc = load_scenario(p)
    rows = [list(r) for r in resolve(sc).arrivals_s]
    assert rows == [list(r) for r in resolve(load_scenario(p)).arrivals_s]  # seeded
    ds = [r[2] for r in rows]
    assert all(0.02 <= d < 0.03 for d in ds) and len(set(ds)) == 6
    assert all(r[k] == 0.0 for r in rows for k in range(8) if k != 2)
    res = run_flow(sc).to_json()["result"]
    assert len(res["runs"]) == 3 * 6
    for it, d in enumerate(ds):
        got = {r["name"]: r for r in res["runs"] if r["iteration"] == it}
        assert all(r["straggler_delay_s"] == d for r in got.values())
        assert got["ring"]["time_s"] == pytest.approx(d + 2 * 7 * 3e-6 + 2 * 7 / 8 * (64 << 20) / (3865.47e9 / 8),
                                                      rel=1e-6)
        assert got["stragglar"]["time_s"] < got["ring"]["time_s"]  # D is well past Phase A
    # the stragglar run was relabelled: rank 2 never takes part in Phase A
    plan = resolve(sc).resolve(sc.runs[0], 1 << 20).schedule
    assert all(2 not in (t.src, t.dst) for s in plan.workload.steps if s.phase == "A" for t in s.transfers)


@pytest.mark.parametrize("dist", ["uniform", "normal", "exponential"])
def test_delay_distributions_are_seeded_and_have_their_moments(dist):
    from emulation.scenario import StragglerSpec

    st = StragglerSpec(rank=0, delay_s=0.02, jitter_s=0.005, distribution=dist, seed=7)
    d = np.array(st.delays_s(4000))
    assert np.array_equal(d, st.delays_s(4000))
    assert (d >= 0).all()
    mean = {"uniform": 0.0225, "normal": 0.02, "exponential": 0.025}[dist]
    assert d.mean() == pytest.approx(mean, rel=0.02)
    assert StragglerSpec(rank=0, delay_s=0.02).delays_s(3) == [0.02] * 3


def test_bad_straggler_fields_give_one_line_and_status_2(tmp_path):
    for extra, field in (("straggler: {rank: 1, delay_s: 0.01, distribution: pareto}\n", "straggler.distribution"),
                         ("iterations: 0\n", "iterations"),
                         ("straggler: {rank: 9, delay_s: 0.01}\n", "straggler.rank")):
        p = tmp_path / "bad.yaml"
        p.write_text(SCEN + extra)
        r = subprocess.run([sys.executable, "-m", "emulation.cli", "run", str(p), "--backend", "flow",
                            "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 2 and field in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "out").exists()


def test_schedule_command_prints_phases_and_round_count():
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "workload", "stragglar", "--ranks", "8",
                        "--bytes", "7MiB"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "phase B: 9 rounds" in r.stdout and "│ A " in r.stdout and "│ B " in r.stdout
    assert "0<=>S(c0)" in r.stdout


def test_llama_scenario_reports_mean_and_tail_per_algorithm():
    from emulation.collective.report import iteration_stats

    sc = load_scenario(ROOT / "experiments" / "stragglar_llama.yaml")
    assert sc.fabric.gpus == 8 and sc.sizes == [12 * GIB] and sc.iterations >= 5
    ds = np.array(sc.straggler.delays_s(sc.iterations))
    assert ((ds >= 0.020) & (ds < 0.030)).all()
    stats = {st["name"]: st for st in iteration_stats(run_flow(sc))}
    n, s, bps = 8, 12 * GIB, sc.fabric.port_gbps * 1e9 / 8
    a = (n - 2) * ALPHA + (n - 2) / (n - 1) * s / bps
    b = 9 * ALPHA + 9 / (n - 1) * s / bps
    ring = 2 * (n - 1) * ALPHA + 2 * (n - 1) / n * s / bps
    assert stats["stragglar"]["mean_s"] == pytest.approx(np.maximum(ds, a).mean() + b, rel=1e-6)
    assert stats["ring"]["mean_s"] == pytest.approx(ds.mean() + ring, rel=1e-6)
    for other in ("ring", "rhd", "direct"):
        assert stats["stragglar"]["mean_s"] < 0.9 * stats[other]["mean_s"]
        assert stats["stragglar"]["p99_s"] < stats[other]["p99_s"]
