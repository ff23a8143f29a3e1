"""Flow-level backend: max-min fairness, closed forms of the alpha-beta model, semantics,
stragglers, sanity checks (docs/mechanisms.md, docs/architecture.md flow-level backend)."""

import math

import networkx as nx
import numpy as np
import pytest

from emulation.checks import check_run
from emulation.fabric import Circuit, Configuration, PortRef
from emulation.flowsim import SimulationError, simulate
from emulation.flowsim.engine import FluidEngine
from emulation.flowsim.maxmin import max_min_rates
from emulation.planners import make_plan
from emulation.schedule import plan_from_configurations
from emulation.results import RunResult
from emulation.routing import Routes, link_loads
from emulation.workloads import build
from emulation.workloads.dependencies import chunk_dependencies
from emulation.workloads.model import Step, Workload
from topologies import eps_star, ocs_star, static_ring

B = 400.0  # Gbit/s
BPS = B * 1e9 / 8  # bytes/s


def rel(a, b):
    return abs(a - b) / abs(b)


# ---- max-min fairness ----------------------------------------------------------------------
def test_max_min_textbook_example():
    # Links 0 (cap 1) and 1 (cap 2). Flow A crosses both, B only link 0, C and D only link 1.
    # Link 0 splits 1/2, 1/2; A is frozen at 1/2, so C and D share the remaining 1.5: 0.75 each.
    pf = np.array([0, 0, 1, 2, 3])
    pl = np.array([0, 1, 0, 1, 1])
    r = max_min_rates(pf, pl, np.array([1.0, 2.0]), 4)
    assert r.tolist() == pytest.approx([0.5, 0.5, 0.75, 0.75], rel=1e-12)


def test_max_min_dark_link_gives_zero_and_others_take_the_rest():
    pf = np.array([0, 1, 1])
    pl = np.array([0, 0, 1])
    r = max_min_rates(pf, pl, np.array([3.0, 0.0]), 2)
    assert r.tolist() == [3.0, 0.0]


def test_max_min_rejects_a_flow_without_links():
    with pytest.raises(ValueError):
        max_min_rates(np.array([0]), np.array([0]), np.array([1.0]), 2)


def test_engine_recomputes_shares_at_every_arrival_and_completion():
    # One link of 1 byte/s. Flow a (2 B) from t=0, flow b (1 B) from t=1: a alone until 1, then
    # both at 1/2: a has 1 B left and b 1 B, both done at t=3.
    eng = FluidEngine(np.array([1.0]))
    ids = eng.add(np.array([2.0, 1.0]), np.array([0.0, 1.0]), np.array([0, 1]), np.array([0, 0]))
    done = {}
    while (ev := eng.step()) is not None:
        for i in ev[1]:
            done[int(i)] = ev[0]
    assert done[int(ids[0])] == pytest.approx(3.0) and done[int(ids[1])] == pytest.approx(3.0)


def test_engine_finishes_flows_whose_time_is_below_the_clock_resolution():
    """At t = 1000 s a 1e-13 s remainder rounds away (now + ttf == now): the flow must still
    finish instead of the clock stalling (found at 1,024 GPUs, 2,046 steps)."""
    eng = FluidEngine(np.array([1e12]), now=1e3)
    eng.add(np.array([0.05]), np.array([1e3]), np.array([0]), np.array([0]))
    t, done = eng.step()
    assert done.size == 1 and t >= 1e3 and eng.step() is None


# ---- closed forms on a non-blocking switch --------------------------------------------------
def _run(fabric, alg, n, s, alpha=0.0, delta=0.0, planner="none", **kw):
    w = build(alg, n, s)
    return simulate(fabric, w, make_plan(planner, fabric, w), alpha_s=alpha, delta_s=delta, **kw)


@pytest.mark.parametrize("n", [4, 8, 16, 64])
@pytest.mark.parametrize("alpha,delta", [(0.0, 0.0), (5e-6, 0.0), (3e-6, 0.5e-6)])
def test_closed_forms_on_a_non_blocking_switch(n, alpha, delta):
    s = n * 3 * (1 << 16)  # divisible: every chunk has the same size
    f = eps_star(n, B)
    hop = alpha + 2 * delta  # GPU -> switch -> GPU: 2 hops
    L = int(math.log2(n))
    ring = 2 * (n - 1) * hop + 2 * (n - 1) / n * s / BPS
    rhd = 2 * L * hop + 2 * (n - 1) / n * s / BPS
    direct = 2 * hop + 2 * (n - 1) / n * s / BPS
    assert rel(_run(f, "ring", n, s, alpha, delta).time_s, ring) < 1e-9
    assert rel(_run(f, "rhd", n, s, alpha, delta).time_s, rhd) < 1e-9
    assert rel(_run(f, "direct", n, s, alpha, delta).time_s, direct) < 1e-9


def test_rhd_on_a_ring_pays_two_to_the_k_congestion():
    """docs/mechanisms.md: partner 2^k hops away, so 2^k transfers share every link."""
    n, s, alpha = 32, 32 << 20, 2e-6
    r = _run(static_ring(n, B), "rhd", n, s, alpha)
    L = int(math.log2(n))
    for k in range(L - 1):  # the last level has partners n/2 away: both directions, split
        st = r.steps[k]
        m = s / 2 ** (k + 1)  # bytes per transfer
        congestion = (st.end_s - st.start_s - alpha) * BPS / m
        assert congestion == pytest.approx(2**k, rel=1e-9)
    # the simulator's busiest link agrees with the routing's static link loads
    f = static_ring(n, B)
    routes = Routes(f, f.initial, 2)
    w = build("rhd", n, s)
    for k, st in enumerate(r.steps):
        assert st.max_link_bytes == pytest.approx(max(link_loads(routes, w.steps[k].transfers).values()))


def test_a_matching_step_takes_alpha_plus_m_over_b():
    n, s, alpha, R = 16, 16 << 20, 1e-6, 7e-6
    f = ocs_star(n, 1, B, R, "empty")  # one port per GPU: every circuit step is a matching
    r = _run(f, "rhd", n, s, alpha, planner="always")
    w = build("rhd", n, s)
    for st, ws in zip(r.steps, w.steps):
        m = ws.transfers[0].bytes
        want = alpha + m / BPS + (R if st.action == "reconfigure" else 0.0)
        assert rel(st.end_s - st.start_s, want) < 1e-9


def test_parallel_circuits_add_bandwidth():
    n, s = 8, 8 << 20
    one = _run(ocs_star(n, 1, B, 0, "empty"), "rhd", n, s, planner="always")
    four = _run(ocs_star(n, 4, B, 0, "empty"), "rhd", n, s, planner="always")
    assert rel(one.time_s, 4 * four.time_s) < 1e-9


# ---- semantics, dark windows, stragglers ------------------------------------------------------
def test_straggler_delays_round_synchronous_ring_by_d():
    n, s, alpha, d = 8, 8 << 20, 3e-6, 250e-6
    f = eps_star(n, B)
    base = _run(f, "ring", n, s, alpha).time_s
    arr = np.zeros(n)
    arr[5] = d
    late = _run(f, "ring", n, s, alpha, arrivals_s=arr)
    assert rel(late.time_s, base + d) < 1e-9
    dep = _run(f, "ring", n, s, alpha, arrivals_s=arr, semantics="dependency-driven")
    assert dep.time_s <= late.time_s * (1 + 1e-12)


def test_dependency_driven_ring_pipelines_and_matches_round_synchronous_without_stragglers():
    n, s = 16, 16 << 20
    f = static_ring(n, B)
    a = _run(f, "ring", n, s, 1e-6)
    b = _run(f, "ring", n, s, 1e-6, semantics="dependency-driven")
    assert rel(a.time_s, b.time_s) < 1e-9
    assert b.semantics == "dependency-driven"


def test_dark_window_darkens_only_the_changed_circuits():
    """Dependency-driven: a transfer over an unchanged circuit moves during the dark window;
    round-synchronous waits for the whole reconfiguration."""
    f = ocs_star(4, 2, B, 50e-6, "ring")
    m = 1 << 20
    w0 = Workload("probe", "two-steps", 4, m, 1)
    a = w0.transfer(0, 1, 0, op="copy")
    b = w0.transfer(2, 0, 0, op="copy")  # a new circuit 0<->2 in step 1
    w = Workload("probe", "two-steps", 4, m, 1, (Step("s0", (a,)), Step("s1", (w0.transfer(1, 2, 0, op="copy"), b))))
    # step 1: keep circuits 0<->1 and 1<->2, add 0<->2 on the ports the ring used for 0<->3 and 2<->3
    kept = [c for c in f.initial["ocs0"] if {c.a.gpu, c.b.gpu} in ({0, 1}, {1, 2})]
    cfg = Configuration({"ocs0": kept + [Circuit.of(PortRef(0, 1), PortRef(2, 1))]})
    f.check_configuration(cfg)
    plan = plan_from_configurations("test", f.initial, [f.initial, cfg], 50e-6, w)
    rs = simulate(f, w, plan)
    dd = simulate(f, w, plan, semantics="dependency-driven")
    t_fluid = m / BPS
    # round-synchronous: step 1 starts after step 0 and R, both transfers then take m/B
    assert rel(rs.time_s, t_fluid + 50e-6 + t_fluid) < 1e-9
    by = {(t.src, t.dst): t for t in dd.transfers}
    assert rel(by[(1, 2)].end_s, by[(1, 2)].start_s + t_fluid) < 1e-9  # unchanged circuit: no wait
    assert by[(1, 2)].end_s < t_fluid + 50e-6  # finished inside the dark window
    assert rel(by[(2, 0)].end_s, t_fluid + 50e-6 + t_fluid) < 1e-9  # new circuit: after R


def test_chunk_dependencies_of_ring_are_the_previous_hop():
    w = build("ring", 4, 4096)
    deps = chunk_dependencies(w)
    n = 4
    assert all(d == [] for d in deps[:n])
    for t in range(n, len(deps)):
        assert deps[t] and max(deps[t]) // n == t // n - 1  # the chunk's last hop, one step back


def test_deterministic_and_seeded_arrivals(tmp_path):
    from emulation.scenario import load_scenario, resolve

    p = tmp_path / "s.yaml"
    body = ("name: s\nfabric: {topology: eps, gpus: 8, port_gbps: 400}\nsizes: [1MiB]\n"
            "runs: [{name: ring, algorithm: ring}]\nbackend: flow\n"
            "straggler: {rank: 3, delay_s: 1.0e-4, jitter_s: 1.0e-4, seed: %d}\n")
    p.write_text(body % 1)
    a1, a1b = resolve(load_scenario(p)).arrivals_s[0], resolve(load_scenario(p)).arrivals_s[0]
    p.write_text(body % 2)
    a2 = resolve(load_scenario(p)).arrivals_s[0]
    assert a1 == a1b and a1 != a2
    assert 1e-4 <= a1[3] < 2e-4 and sum(a1) == a1[3]


def test_unroutable_transfer_is_a_simulation_error():
    f = ocs_star(4, 2, B, 0, "empty")
    w = build("ring", 4, 4096)
    with pytest.raises(SimulationError):
        simulate(f, w, make_plan("none", f, w))


# ---- sanity checks and sensitivity --------------------------------------------------------------
def test_sanity_checks_pass_on_simulations_and_catch_broken_results():
    f = ocs_star(8, 2, B, 1e-5, "ring")
    for alg, planner in (("ring", "none"), ("rhd", "none"), ("rhd", "always")):
        r = _run(f, alg, 8, 8 << 20, 1e-6, planner=planner)
        c = check_run(r, f)
        assert c.ok, c.problems
        assert 0.5 < c.max_link_utilisation <= 1.0 and c.busbw_over_injection <= 1.0
    good = _run(f, "ring", 8, 8 << 20)
    d = good.to_json()
    d["bytes_delivered"] -= 1
    assert not check_run(RunResult.model_validate(d), f).ok
    d = good.to_json()
    for s in d["steps"]:  # a clock that runs twice too fast
        s["end_s"] = s["start_s"] + (s["end_s"] - s["start_s"]) / 2
    d["time_s"] /= 2
    problems = check_run(RunResult.model_validate(d), f).problems
    assert any("link capacity" in p for p in problems)


def test_a_reroute_longer_than_the_dark_window_fails_the_checks():
    """The packet backend records how long the controller rerouted inside each dark window
    (``timing.reroute_s``); one longer than R stretched the window and the run is not faithful."""
    f = ocs_star(8, 2, B, 1e-5, "ring")
    d = _run(f, "rhd", 8, 8 << 20, 1e-6, planner="always").to_json()
    steps = [s for s in d["steps"] if s["reconfiguration_delay_s"]]
    assert steps
    for s in steps:
        s["timing"] = {"reroute_s": 0.5 * s["reconfiguration_delay_s"]}
    assert check_run(RunResult.model_validate(d), f).ok
    steps[-1]["timing"] = {"reroute_s": 1.5 * steps[-1]["reconfiguration_delay_s"]}
    c = check_run(RunResult.model_validate(d), f)
    assert not c.ok and any(p.startswith(f"dark window: step {steps[-1]['index']}'s rerouting") for p in c.problems)


def test_sensitivity_gpu_count_and_link_rate_change_the_result(tmp_path):
    """A result that did not move with the GPU count or the link rate would be a broken model."""
    from emulation.collective.runner import run_flow
    from emulation.scenario import load_scenario

    def time_of(gpus, gbps):
        p = tmp_path / f"s{gpus}-{gbps}.yaml"
        p.write_text(f"name: s\nfabric: {{topology: ocs-star, gpus: {gpus}, ports_per_gpu: 2, port_gbps: {gbps}}}\n"
                     "cost: {alpha_s: 2.0e-6}\nsizes: [4MiB]\nruns: [{name: rhd, algorithm: rhd}]\nbackend: flow\n")
        return run_flow(load_scenario(p)).result.runs[0].time_s

    base = time_of(8, 400)
    assert time_of(16, 400) > base * 1.05
    slow = time_of(8, 200)
    assert slow > base * 1.5


def test_routes_are_shortest_paths_and_split_fully():
    f = ocs_star(12, 3, B, 0, "ring")
    w = build("rhd", 8, 1 << 20)
    from emulation.planners import ideal_configuration

    g = nx.MultiDiGraph()
    r = Routes(f, f.initial, 3)
    for l in r.links:
        g.add_edge(l.u, l.v)
    dist = dict(nx.all_pairs_shortest_path_length(g))
    for s in range(12):
        for d in range(12):
            if s != d:
                sub = r.subflows(s, d)
                assert sum(fr for _, fr, _ in sub) == pytest.approx(1.0)
                assert all(len(p) == dist[s][d] for _, _, p in sub)
    f8 = ocs_star(8, 2, B, 0, "empty")
    cfg = ideal_configuration(f8, w.steps[0])
    assert all(len(p) == 1 for t in w.steps[0].transfers for _, _, p in Routes(f8, cfg, 2).subflows(t.src, t.dst))


@pytest.mark.parametrize("fabric, alg, n, size, planner", [
    (static_ring, "ring", 128, 1 << 30, "none"),  # evenly divided: 2 of 254 steps simulated
    (static_ring, "ring", 128, 10 ** 9 + 7, "none"),  # uneven chunks: the byte columns differ
    (eps_star, "rhd", 1024, 1 << 28, "none"),
    (eps_star, "ring", 1024, 1 << 28, "none"),
    (ocs_star, "rhd", 128, 1 << 24, "always"),  # reconfigurations: dark windows between steps
])
def test_reusing_equal_steps_gives_the_general_paths_times(fabric, alg, n, size, planner):
    """A step equal to an earlier one (same pairs, bytes, configuration) reuses its simulation
    shifted in time: the run's times, per step and in all, equal running every step (1e-9)."""
    f = fabric(n, 400.0) if fabric is not ocs_star else ocs_star(n, 2, 400.0, 5e-6)
    w = build(alg, n, size)
    plan = make_plan(planner, f, w)
    fast = simulate(f, w, plan, alpha_s=2e-6, delta_s=1e-7, record_transfers=False)
    slow = simulate(f, w, plan, alpha_s=2e-6, delta_s=1e-7, record_transfers=False, reuse_steps=False)
    assert rel(fast.time_s, slow.time_s) < 1e-9
    ends = np.array([[a.end_s, b.end_s, a.max_link_bytes, b.max_link_bytes] for a, b in zip(fast.steps, slow.steps)])
    assert np.allclose(ends[:, 0], ends[:, 1], rtol=1e-9, atol=0) and (ends[:, 2] == ends[:, 3]).all()
    assert fast.link_bytes == slow.link_bytes and fast.bytes_delivered == slow.bytes_delivered == w.bytes_sent
    if alg == "ring":  # the closed form on a ring of links: 2(n-1) (alpha + chunk / B + delta)
        chunk = max(w.chunk_bytes(c) for c in range(n))
        assert rel(fast.time_s, 2 * (n - 1) * (2e-6 + chunk / 50e9 + 1e-7 * (2 if fabric is eps_star else 1))) < 1e-9
