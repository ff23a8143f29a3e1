"""two-hop forwarding on a rotor (RotorLB-style; emulation.planners.relay) in the flow
backend and the scenario, and per-GPU expert popularity (emulation.workloads.moe)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from emulation.flowsim.slotted import simulate_slotted
from emulation.schedule import SlotSchedule
from emulation.schedule import WeightedMatching
from emulation.planners.relay import two_hop, window_bytes
from emulation.workloads.matchings import round_robin_matchings
from emulation.workloads.model import Step, Transfer, Workload
from emulation.workloads.moe import MoELayer, moe_workload, route

GBPS = 400.0
BPS = GBPS * 1e9 / 8


def _workload(n: int, pairs: dict[tuple[int, int], list[int]]) -> Workload:
    steps = (Step("dispatch", tuple(Transfer(s, d, b, d, 1, "append") for (s, d), bs in pairs.items() for b in bs)),)
    return Workload("alltoallv", "test", n, 1, n, steps)


def _rotor(n: int, window: float) -> SlotSchedule:
    return SlotSchedule.from_matchings(round_robin_matchings(n), [window / BPS] * (n - 1 if n % 2 == 0 else n))


def test_a_hot_pair_is_relayed_through_the_gpu_whose_circuit_to_the_destination_comes_next():
    # 4 GPUs, slots S0 {0-3, 1-2}, S1 {0-2, 1-3}, S2 {0-1, 2-3}, T = one slot; 0 -> 1 wants 3 windows.
    # Direct: one window per turn, so three turns (9 T). Two-hop: in S0, 0 offloads one window to 3,
    # which forwards it to 1 in S1; 2 reaches 1 only in S0, already past, so it takes nothing; the
    # remaining two windows go direct in S2 of turns 1 and 2 (6 T).
    w_bytes = 1 << 20
    T = w_bytes / BPS
    wl = _workload(4, {(0, 1): [3 * w_bytes]})
    sched = _rotor(4, w_bytes)
    plan = two_hop(wl, sched.configs, np.full(3, float(w_bytes)))
    assert plan.parts == ((((None, 2 * w_bytes), (3, w_bytes)),),)
    assert plan.relayed_bytes == w_bytes and plan.turns == (2,)
    direct = simulate_slotted(wl, sched, GBPS)
    relayed = simulate_slotted(wl, sched, GBPS, relay=plan)
    assert direct.time_s == pytest.approx(9 * T, rel=1e-9)
    assert relayed.time_s == pytest.approx(6 * T, rel=1e-9)
    assert relayed.slots.relayed_bytes == w_bytes and direct.slots.relayed_bytes == 0


@pytest.mark.parametrize("n", [4, 6, 7, 8])
def test_demand_that_fits_its_windows_is_never_relayed(n):
    rng = np.random.default_rng(n)
    w_bytes = 1 << 20
    wl = _workload(n, {(s, d): [int(rng.integers(1, w_bytes))] for s in range(n) for d in range(n) if s != d})
    sched = _rotor(n, w_bytes)
    plan = two_hop(wl, sched.configs, np.full(len(sched.configs), float(w_bytes)))
    assert plan.relayed_bytes == 0 and plan.turns == (1,)
    assert simulate_slotted(wl, sched, GBPS, relay=plan).time_s == simulate_slotted(wl, sched, GBPS).time_s


@pytest.mark.parametrize("seed", range(4))
def test_relay_parts_cover_every_transfer_and_never_lose_to_direct(seed):
    layer = MoELayer(8, 16, capacity_factor=2.0, skew="zipf", skew_param=1.2, popularity="per-gpu",
                     tokens_per_gpu=1024, seed=seed)
    wl = moe_workload(route(layer), "payload")
    w_bytes = float(np.median([t.bytes for t in wl.steps[0].transfers]))
    sched = _rotor(8, w_bytes)
    plan = two_hop(wl, sched.configs, np.full(7, w_bytes))
    for step, parts in zip(wl.steps, plan.parts):
        assert len(parts) == len(step.transfers)
        for t, ps in zip(step.transfers, parts):
            assert sum(b for _v, b in ps) == t.bytes
            assert all(b > 0 and v not in (t.src, t.dst) for v, b in ps if v is not None)
    assert plan.relayed_bytes > 0
    direct = simulate_slotted(wl, sched, GBPS).time_s
    relayed = simulate_slotted(wl, sched, GBPS, relay=plan).time_s
    print(f"seed {seed}: direct {direct * 1e3:.3f} ms, two-hop {relayed * 1e3:.3f} ms, "
          f"relayed {plan.relayed_bytes / 2**20:.1f} MiB")
    assert relayed <= direct * (1 + 1e-9)


def test_a_pair_sends_its_transfers_one_after_another():
    w_bytes = 1 << 20
    T = w_bytes / BPS
    wl = _workload(4, {(0, 1): [w_bytes // 2, w_bytes // 2]})
    res = simulate_slotted(wl, _rotor(4, w_bytes), GBPS)
    ends = sorted(t.end_s for t in res.transfers)
    assert ends == pytest.approx([2.5 * T, 3 * T], rel=1e-9)  # S2 = [2T, 3T]


def test_window_bytes_inverts_the_slot_length():
    sched = SlotSchedule.from_weighted([WeightedMatching(5e6, ((0, 1),))], GBPS, 1e-5, 1.2e-5, 0.15)
    assert window_bytes(sched.slots_s, 1.2e-5, 0.15, GBPS) == pytest.approx([5e6])


def test_per_gpu_popularity_skews_pairs_not_one_destination():
    shared = route(MoELayer(8, 16, capacity_factor=2.0, skew="zipf", skew_param=1.2))
    per_gpu = route(MoELayer(8, 16, capacity_factor=2.0, skew="zipf", skew_param=1.2, popularity="per-gpu"))
    assert per_gpu.popularity.shape == (8, 16) and shared.popularity.shape == (16,)

    def hottest(m):
        m = m.astype(float).copy()
        np.fill_diagonal(m, -1)
        return {int(d) for d in m.argmax(axis=1)}

    assert len(hottest(shared.dispatch)) <= 2 < len(hottest(per_gpu.dispatch))
    col = lambda m: (m.sum(axis=0) - np.diag(m)).max()  # noqa: E731 - busiest receiving port
    assert col(per_gpu.dispatch) < col(shared.dispatch)
    with pytest.raises(ValueError, match="popularity: unknown 'local'"):
        MoELayer(8, 16, popularity="local")


OCS1 = "fabric: {topology: ocs-star, gpus: 8, ports_per_gpu: 1, port_gbps: 400, reconfiguration_delay_s: 1.0e-5, initial: empty}\n"
MOE = "moe: {experts: 16, skew: zipf, skew_param: 1.2, tokens_per_gpu: 1024, popularity: per-gpu, capacity_factor: 2.0}\n"


@pytest.mark.parametrize("body, message", [
    (OCS1 + MOE + "runs: [{name: a, collective: moe, algorithm: payload, forwarding: two-hop}]",
     "runs.0.forwarding: two-hop needs a schedule"),
    (OCS1 + MOE + "runs: [{name: a, collective: moe, algorithm: payload, schedule: rotor, forwarding: three-hop}]",
     "runs.0.forwarding"),
    (OCS1 + MOE + "runs: [{name: a, collective: moe, algorithm: payload, schedule: rotor, slot_s: 2.0e-5, guard_s: 1.0e-5}]",
     "runs.0: slot_s: 2e-05 s does not exceed the two guard bands"),
    (OCS1 + "moe: {experts: 16, popularity: local}\nruns: [{name: a, collective: moe, algorithm: payload}]",
     "moe.popularity"),
])
def test_bad_two_hop_scenarios_name_the_field(tmp_path, body, message):
    from emulation.scenario import ScenarioError, load_scenario

    path = tmp_path / "s.yaml"
    path.write_text("name: t\n" + body)
    with pytest.raises(ScenarioError, match=re.escape(message)):
        load_scenario(path)


def test_two_hop_scenario_reports_relayed_bytes_and_beats_the_direct_rotor(tmp_path):
    from emulation.collective import runner
    from emulation.scenario import load_scenario

    path = tmp_path / "s.yaml"
    path.write_text("name: t\n" + OCS1 + MOE + """runs:
  - {name: direct, collective: moe, algorithm: payload, schedule: rotor, slot_s: 5.0e-5, guard_s: 1.0e-6}
  - {name: relay, collective: moe, algorithm: payload, schedule: rotor, slot_s: 5.0e-5, guard_s: 1.0e-6, forwarding: two-hop}
""")
    by = {r["name"]: r for r in runner.run_flow(load_scenario(path)).to_json()["result"]["runs"]}
    assert by["direct"]["slots"]["forwarding"] == "direct" and by["direct"]["slots"]["relayed_bytes"] == 0
    assert by["relay"]["slots"]["forwarding"] == "two-hop" and by["relay"]["slots"]["relayed_bytes"] > 0
    assert by["relay"]["slots"]["slots_per_turn"] == 7
    assert by["relay"]["slots"]["turn_s"] == pytest.approx(7 * (5e-5 + 1e-5))
    assert by["relay"]["time_s"] < by["direct"]["time_s"]
    assert by["relay"]["checks"]["ok"] and by["relay"]["bytes_delivered"] == by["direct"]["bytes_delivered"]
