"""round-robin matchings, the rotor AllToAll, Birkhoff-von Neumann decomposition,
and the MoE traffic generator (docs/mechanisms.md PipSwitch, docs/mechanisms.md)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from emulation.planners.bvn import (
    DecompositionError,
    bvn_decompose,
    reconstruct,
    reconstruction_error,
    sinkhorn,
    stuff,
)
from emulation.workloads.checker import check
from emulation.workloads.matchings import check_one_factorisation, round_robin_matchings, rotor_alltoall
from emulation.workloads.moe import MoELayer, moe_workload, route


@pytest.mark.parametrize("n", range(2, 34))
def test_round_robin_matchings_cover_every_pair_once(n):
    ms = round_robin_matchings(n)
    assert len(ms) == (n - 1 if n % 2 == 0 else n)
    check_one_factorisation(n, ms)
    for m in ms:  # perfect for even n, one idle rank for odd n
        assert len(m) == n // 2
    check(rotor_alltoall(n, n * 1000))


def test_checker_of_the_factorisation_catches_a_missing_and_a_doubled_pair():
    ms = list(round_robin_matchings(6))
    with pytest.raises(ValueError, match="never matched"):
        check_one_factorisation(6, tuple(ms[:-1]))
    with pytest.raises(ValueError, match="more than once"):
        check_one_factorisation(6, tuple(ms + [ms[0]]))
    with pytest.raises(ValueError, match="uses a rank twice"):
        check_one_factorisation(6, tuple(ms[:-1] + [((0, 1), (1, 2), (3, 4))]))


@pytest.mark.parametrize("n, seed", [(2, 0), (5, 1), (8, 2), (16, 3), (64, 4)])
def test_bvn_reconstructs_the_stuffed_matrix_and_covers_the_demand(n, seed):
    rng = np.random.default_rng(seed)
    m = rng.pareto(1.2, (n, n)) * 1e6
    m[rng.random((n, n)) < 0.3] = 0.0  # sparse, skewed
    np.fill_diagonal(m, 0.0)
    terms = bvn_decompose(m)
    st = stuff(m)
    line = max(m.sum(0).max(), m.sum(1).max())
    assert (st >= m).all()
    np.testing.assert_allclose(st.sum(0), line, rtol=1e-9)
    np.testing.assert_allclose(st.sum(1), line, rtol=1e-9)
    assert reconstruction_error(m, terms) < 1e-6
    assert (reconstruct(terms, n) >= m - 1e-6 * m.max()).all()  # covers the demand
    # the schedule's total circuit time is the busiest port's: the lower bound for any schedule
    assert sum(t.weight for t in terms) == pytest.approx(line, rel=1e-6)
    assert len(terms) <= n * n - 2 * n + 2
    for t in terms:
        assert sorted(t.perm) == list(range(n)) and t.weight > 0


def test_bvn_of_a_uniform_all_to_all_is_the_round_robin_cycle_size():
    n = 8
    m = np.full((n, n), 1000.0)
    np.fill_diagonal(m, 0)
    terms = bvn_decompose(m)
    assert len(terms) == n - 1  # n-1 permutations of weight 1000, like the rotor's matchings
    assert all(t.weight == pytest.approx(1000.0) for t in terms)


def test_sinkhorn_balances_and_bad_matrices_are_rejected():
    rng = np.random.default_rng(0)
    m = rng.random((6, 6)) * 10
    np.fill_diagonal(m, 0)
    s = sinkhorn(m)
    np.testing.assert_allclose(s.sum(0), 1, atol=1e-8)
    np.testing.assert_allclose(s.sum(1), 1, atol=1e-8)
    for bad in (np.ones((2, 3)), -np.ones((3, 3)), np.full((3, 3), np.nan)):
        with pytest.raises(DecompositionError):
            bvn_decompose(bad)
    assert bvn_decompose(np.zeros((4, 4))) == []


# ---- MoE traffic ----------------------------------------------------------------------------


def test_uniform_routing_matches_the_spec_volume_and_respects_capacity():
    layer = MoELayer(gpus=8, experts=16, top_k=2, capacity_factor=1.25, tokens_per_gpu=4096, hidden=2048, seed=3)
    tr = route(layer)
    assert layer.capacity == int(np.ceil(1.25 * 2 * 4096 / 16)) == 640
    assert (tr.routed.sum(axis=1) == 4096 * 2).all()  # k distinct experts per token
    assert (tr.kept <= layer.capacity).all() and (tr.kept <= tr.routed).all()
    off = ~np.eye(8, dtype=bool)
    per_gpu = tr.dispatch[off].reshape(8, 7).sum(axis=1)
    spec = 4096 * 2 * 2048 * 4 * 7 / 8  # S k H b (P-1)/P
    assert np.allclose(per_gpu, spec, rtol=0.05)
    assert tr.dropped < 0.01 * 8 * 4096 * 2  # CF 1.25 absorbs the fluctuations of uniform routing


def test_padded_dispatch_is_capacity_times_local_experts_and_never_below_payload():
    layer = MoELayer(gpus=8, experts=16, top_k=2, capacity_factor=1.0, tokens_per_gpu=2048, skew="zipf",
                     skew_param=1.2, seed=5)
    tr = route(layer)
    assert (tr.dispatch_padded == layer.capacity * 2 * layer.token_bytes).all()
    assert (tr.dispatch <= tr.dispatch_padded).all()
    tile = layer.tile_tokens * layer.token_bytes
    assert (tr.combine % tile == 0).all() and (tr.combine >= tr.dispatch.T).all()
    assert (tr.combine - tr.dispatch.T < tile).all()  # at most one partial tile per stream


@pytest.mark.parametrize("skew, param", [("zipf", 1.2), ("dirichlet", 0.3)])
def test_under_skew_payload_efficient_sends_fewer_bytes_than_padded(skew, param):
    layer = MoELayer(gpus=8, experts=16, top_k=2, tokens_per_gpu=4096, skew=skew, skew_param=param, seed=11)
    tr = route(layer)
    ratio = tr.network_bytes("padded") / tr.network_bytes("payload")
    assert ratio > 1.3, ratio
    assert tr.dropped > 0  # hot experts overflow their capacity
    uni = route(MoELayer(gpus=8, experts=16, top_k=2, tokens_per_gpu=4096, seed=11))
    assert uni.network_bytes("padded") / uni.network_bytes("payload") < ratio


def test_routing_is_seeded_and_the_workload_carries_the_matrices():
    a = route(MoELayer(gpus=4, experts=8, tokens_per_gpu=512, skew="dirichlet", skew_param=0.5, seed=1))
    b = route(MoELayer(gpus=4, experts=8, tokens_per_gpu=512, skew="dirichlet", skew_param=0.5, seed=1))
    c = route(MoELayer(gpus=4, experts=8, tokens_per_gpu=512, skew="dirichlet", skew_param=0.5, seed=2))
    assert np.array_equal(a.routed, b.routed) and not np.array_equal(a.routed, c.routed)
    for mode in ("padded", "payload"):
        w = moe_workload(a, mode)
        check(w)
        assert [s.phase for s in w.steps] == ["dispatch", "combine"]
        for st in w.steps:
            m = a.matrix(st.phase, mode)
            got = np.zeros_like(m)
            for t in st.transfers:
                got[t.src, t.dst] += t.bytes
            np.fill_diagonal(m := m.copy(), 0)
            assert np.array_equal(got, m)


def test_bad_moe_layers_name_the_field():
    for kw, field in (({"experts": 12}, "experts"), ({"top_k": 40}, "top_k"), ({"skew": "pareto"}, "skew"),
                      ({"capacity_factor": 0}, "capacity_factor"), ({"gpus": 1, "experts": 1}, "gpus")):
        args = {"gpus": 8, "experts": 16, **kw}
        with pytest.raises(ValueError, match=field):
            MoELayer(**args)


# ---- slotted schedules in the flow backend --------------------------------------------------
def test_rotor_all_to_all_takes_one_cycle_when_a_slot_fits_a_block():
    from emulation.flowsim.slotted import simulate_slotted
    from emulation.schedule import SlotSchedule
    from emulation.workloads import build

    n, s, gbps, dark = 8, 8 << 20, 400.0, 1e-6
    bps = gbps * 1e9 / 8
    block = s // n
    rr = round_robin_matchings(n)
    w = build("direct", n, s, "alltoall")
    res = simulate_slotted(w, SlotSchedule.from_matchings(rr, (block / bps,) * (n - 1), dark), gbps)
    st = res.slots
    assert res.time_s == pytest.approx((n - 1) * (dark + block / bps), rel=1e-9)  # the last slot's end
    assert st.slot_utilisation == pytest.approx(1.0)
    # half a block per slot: two turns of the rotor, the last block done at the end of the second
    res2 = simulate_slotted(w, SlotSchedule.from_matchings(rr, (0.5 * block / bps,) * (n - 1), dark), gbps)
    assert res2.time_s == pytest.approx(2 * (n - 1) * (dark + 0.5 * block / bps), rel=1e-9)
    # slots of two blocks: done after one turn, each slot half used
    res3 = simulate_slotted(w, SlotSchedule.from_matchings(rr, (2 * block / bps,) * (n - 1), dark), gbps)
    st3 = res3.slots
    assert res3.time_s == pytest.approx((n - 1) * dark + (n - 2) * 2 * block / bps + block / bps, rel=1e-9)
    assert 0.5 < st3.slot_utilisation < 0.6


def test_bvn_schedule_serves_its_matrix_within_one_turn_and_never_after_a_rotor():
    from emulation.flowsim.slotted import simulate_slotted
    from emulation.schedule import SlotSchedule

    gbps = 400.0
    bps = gbps * 1e9 / 8
    layer = MoELayer(gpus=8, experts=16, tokens_per_gpu=2048, skew="zipf", skew_param=1.2, seed=2)
    tr = route(layer)
    w = moe_workload(tr, "payload")
    dispatch = _one_step(w, 0)
    m = tr.dispatch.astype(float).copy()
    np.fill_diagonal(m, 0)
    terms = bvn_decompose(m)
    dark = 1e-6
    bvn = SlotSchedule.from_permutations(terms, gbps, dark)
    res = simulate_slotted(dispatch, bvn, gbps)
    line = max(m.sum(0).max(), m.sum(1).max())
    assert line / bps <= res.time_s <= bvn.cycle_s * (1 + 1e-9)
    rr = round_robin_matchings(8)
    # a demand-oblivious rotor sized for the mean pair: the hot pairs need several turns
    mean = m.sum() / (8 * 7)
    rotor = SlotSchedule.from_matchings(rr, (mean / bps,) * len(rr), dark)
    res_rr = simulate_slotted(dispatch, rotor, gbps)
    print(f"dispatch: BvN {res.time_s * 1e6:.1f} us ({len(terms)} slots), rotor {res_rr.time_s * 1e6:.1f} us")
    assert res.time_s < res_rr.time_s


def test_slotted_rejects_pairs_the_schedule_never_connects():
    from emulation.flowsim.simulate import SimulationError
    from emulation.flowsim.slotted import simulate_slotted
    from emulation.schedule import SlotSchedule
    from emulation.workloads import build

    w = build("direct", 4, 4096, "alltoall")
    with pytest.raises(SimulationError, match="never connected"):
        simulate_slotted(w, SlotSchedule.from_matchings((((0, 1), (2, 3)),), (1e-6,)), 400.0)


def _one_step(w, index):
    """Step ``index`` of ``w`` as a workload of its own."""
    from emulation.workloads.model import Workload

    return Workload(w.collective, w.algorithm, w.ranks, w.bytes, w.chunks, (w.steps[index],))


@pytest.mark.parametrize("n, seed", [(2, 0), (3, 1), (5, 2), (8, 3), (9, 4), (16, 5)])
def test_duplex_decompositions_are_matchings_covering_both_directions(n, seed):
    from emulation.planners.bvn import bidirectional_decompose, duplex_coverage, weighted_round_robin

    rng = np.random.default_rng(seed)
    m = rng.pareto(1.2, (n, n)) * 1e6
    m[rng.random((n, n)) < 0.3] = 0.0
    np.fill_diagonal(m, 0.0)
    sym = np.maximum(m, m.T)
    line = sym.sum(1).max()
    for slots in (bidirectional_decompose(m), weighted_round_robin(m)):
        assert duplex_coverage(m, slots) >= -1e-6  # every pair's circuit time covers both ways
        for s in slots:
            used = [g for p in s.pairs for g in p]
            assert len(used) == len(set(used)) and all(a < b for a, b in s.pairs) and s.weight > 0
        assert sum(s.weight for s in slots) >= line * (1 - 1e-9)  # the busiest port bounds any schedule
    # the split BvN costs at most 1.5x the symmetric BvN (odd cycles: L/(L-1) <= 3/2)
    assert sum(s.weight for s in bidirectional_decompose(m)) <= 1.5 * line * (1 + 1e-9)


def test_odd_cycles_are_split_into_rotating_matchings():
    from emulation.planners.bvn import bidirectional_decompose, duplex_coverage

    # a triangle of equal demand: no perfect matching; three one-edge slots of w/2 each
    m = np.array([[0, 4, 4], [4, 0, 4], [4, 4, 0]], dtype=float)
    slots = bidirectional_decompose(m)
    held = {p: 0.0 for p in ((0, 1), (0, 2), (1, 2))}
    for s in slots:
        for p in s.pairs:
            held[p] += s.weight
    assert held == pytest.approx({p: 4.0 for p in held})
    assert sum(s.weight for s in slots) == pytest.approx(12.0)  # 3 x 4: the triangle's edges in turn
    assert duplex_coverage(m, slots) == pytest.approx(0.0, abs=1e-12)


def test_duplex_plan_prices_dark_windows_and_keeps_the_cheaper_schedule():
    from emulation.planners.bvn import bidirectional_decompose, duplex_plan, weighted_round_robin

    tr = route(MoELayer(gpus=8, experts=16, skew="zipf", skew_param=1.2, seed=0))
    m = np.maximum(tr.dispatch, tr.combine.T).astype(float)
    bvn, wrr = bidirectional_decompose(m), weighted_round_robin(m)
    per_slot = 10e-6 * 50e9  # R = 10 us at 400 Gbit/s, in bytes
    slots, method = duplex_plan(m, per_slot)
    costs = {k: sum(s.weight for s in v) + len(v) * per_slot for k, v in (("bvn", bvn), ("weighted-round-robin", wrr))}
    assert method == min(costs, key=costs.get)
    assert sum(s.weight for s in slots) + len(slots) * per_slot == pytest.approx(min(costs.values()))
    # capacity 1.0 saturates the hot GPU's port: the weighted round-robin reaches its line sum
    sym = np.maximum(m, m.T)
    np.fill_diagonal(sym, 0)
    assert sum(s.weight for s in wrr) == pytest.approx(sym.sum(1).max())
    assert len(wrr) == 7


def test_guard_bands_shorten_what_a_slot_carries():
    from emulation.flowsim.slotted import simulate_slotted
    from emulation.schedule import SlotSchedule
    from emulation.schedule import WeightedMatching
    from emulation.workloads import build

    gbps, guard = 400.0, 2e-6
    bps = gbps * 1e9 / 8
    w = build("direct", 2, 2 * 50_000, "alltoall")  # 50 kB each way
    plain = SlotSchedule.from_weighted([WeightedMatching(50_000, ((0, 1),))], gbps, 0.0)
    guarded = SlotSchedule.from_weighted([WeightedMatching(50_000, ((0, 1),))], gbps, 0.0, guard)
    assert guarded.slots_s[0] == pytest.approx(plain.slots_s[0] + 2 * guard)
    r0 = simulate_slotted(w, plain, gbps)
    r1 = simulate_slotted(w, guarded, gbps)
    assert r0.time_s == pytest.approx(50_000 / bps)
    assert r1.time_s == pytest.approx(guard + 50_000 / bps)  # the slot's guard, then the bytes
    with pytest.raises(ValueError, match="guard_s"):
        SlotSchedule(((0, 1),), (1e-6,), 0.0, 0.6e-6)


def _scenario(tmp_path, text):
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


OCS1 = "fabric: {topology: ocs-star, gpus: 8, ports_per_gpu: 1, port_gbps: 400, reconfiguration_delay_s: 1.0e-5, initial: empty}\n"
MOE = "moe: {experts: 16, skew: zipf, skew_param: 1.2, tokens_per_gpu: 1024}\n"


@pytest.mark.parametrize("body, message", [
    (OCS1 + MOE + "runs: [{name: a, collective: moe, algorithm: dense}]", "runs.0.algorithm: unknown moe algorithm 'dense'"),
    (OCS1 + "runs: [{name: a, collective: moe, algorithm: payload}]", "moe: a moe section is needed"),
    (OCS1 + "moe: {experts: 12}\nruns: [{name: a, collective: moe, algorithm: payload}]", "moe.experts: 12 is not a multiple"),
    ("fabric: {topology: eps, gpus: 8, ports_per_gpu: 1}\n" + MOE
     + "runs: [{name: a, collective: moe, algorithm: payload, schedule: rotor}]", "fabric: a rotor schedule needs"),
    (OCS1 + MOE + "runs: [{name: a, collective: moe, algorithm: payload, schedule: plan, slot_s: 1.0e-4}]",
     "slot_s: only a rotor"),
    (OCS1 + MOE + "runs: [{name: a, collective: moe, algorithm: payload, schedule: rotor, planner: always}]",
     "planner: must be none"),
    (OCS1 + MOE + "runs: [{name: a, collective: moe, algorithm: payload, schedule: rotor, guard_s: -1.0}]",
     "runs.0.guard_s"),
    (OCS1 + MOE + "runs: [{name: a, algorithm: ring}]", "sizes: at least one"),
])
def test_bad_moe_scenarios_name_the_field(tmp_path, body, message):
    from emulation.scenario import ScenarioError, load_scenario

    with pytest.raises(ScenarioError, match=re.escape(message)):
        load_scenario(_scenario(tmp_path, "name: t\n" + body))


def test_moe_scenario_runs_once_per_run_and_reports_padding_and_slots(tmp_path):
    from emulation.collective import runner
    from emulation.scenario import load_scenario

    sc = load_scenario(_scenario(tmp_path, "name: t\n" + OCS1 + MOE + """runs:
  - {name: rotor, collective: moe, algorithm: padded, schedule: rotor}
  - {name: plan, collective: moe, algorithm: payload, schedule: plan}
"""))
    res = runner.run_flow(sc).to_json()["result"]
    by = {r["name"]: r for r in res["runs"]}
    assert len(res["runs"]) == 2
    layer = sc.moe
    assert by["rotor"]["bytes"] == 1024 * 2 * 8192  # S k H b per GPU
    tr = route(layer)
    off = ~np.eye(8, dtype=bool)
    assert by["rotor"]["padding_bytes"] == tr.network_bytes("padded") - 2 * tr.dispatch[off].sum()
    assert by["plan"]["padding_bytes"] == tr.network_bytes("payload") - 2 * tr.dispatch[off].sum()
    assert by["plan"]["padding_bytes"] < by["rotor"]["padding_bytes"]
    assert by["rotor"]["slots"]["method"] == "round-robin" and by["rotor"]["slots"]["slots_per_turn"] == 7
    assert 0 < by["plan"]["slots"]["slot_utilisation"] <= 1
    assert by["plan"]["time_s"] <= by["rotor"]["time_s"] * (1 + 1e-9)


def test_rotor_runs_with_a_straggler_are_refused_on_packets_before_anything_starts(tmp_path):
    from emulation.collective import runner
    from emulation.scenario import load_scenario

    sc = load_scenario(_scenario(tmp_path, "name: t\n" + OCS1 + MOE + """straggler: {rank: 3, delay_s: 1.0e-4}
runs: [{name: rotor, collective: moe, algorithm: payload, schedule: rotor}]
"""))
    with pytest.raises(runner.BackendError, match="straggler: rotor runs"):
        runner.run(sc, "packet", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert runner.run(sc, "flow", tmp_path / "flow").to_json()["result"]["runs"][0]["straggler_delay_s"] == pytest.approx(1e-4)
