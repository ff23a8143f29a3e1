"""StragglAR in closed form on a non-blocking switch (emulation.flowsim.stragglar) against the
full round-synchronous engine: the same step records bit for bit, the same totals, the same
bytes on every link it lists."""

import numpy as np
import pytest

from emulation.flowsim import SimulationError, simulate
from emulation.flowsim.cases import ALPHA_S, case_inputs, case_plan
from emulation.flowsim.stragglar import closed_form_refusal, simulate_stragglar_switch
from emulation.planners import make_plan
from emulation.workloads.stragglar import stragglar_allreduce, with_straggler
from topologies.builders import eps_star, static_ring


def _arrivals(n: int) -> dict[str, np.ndarray]:
    late = np.zeros(n)
    late[-1] = 1e-3  # the bench's straggler: arrives during phase A
    very = np.zeros(n)
    very[-1] = 0.5  # arrives after phase A: the first rounds of phase B wait for it
    mixed = late.copy()
    mixed[0] = 3e-4  # a non-straggler late too: phase A's first steps wait for it
    return {"none": np.zeros(n), "late": late, "very late": very, "mixed": mixed}


@pytest.mark.parametrize("n", [4, 8, 16, 32, 64, 128, 256, 512, 1024])
@pytest.mark.parametrize("nbytes", [1 << 20, 1_000_003])
def test_closed_form_equals_the_full_engine(n, nbytes):
    fabric, workload = case_inputs("stragglar", n, nbytes)
    plan = case_plan("stragglar", fabric, workload)
    for label, arr in _arrivals(n).items():
        full = simulate(fabric, plan.workload, plan, alpha_s=ALPHA_S, delta_s=1e-7, arrivals_s=arr,
                        record_transfers=False)
        closed = simulate_stragglar_switch(fabric, nbytes, alpha_s=ALPHA_S, delta_s=1e-7, arrivals_s=arr)
        rows = lambda r: [(s.index, s.phase, s.start_s, s.end_s, s.max_link_bytes, s.action) for s in r.steps]
        assert rows(closed) == rows(full), label
        assert closed.time_s == full.time_s > 0
        assert (closed.bytes_sent, closed.bytes_delivered, closed.transfers_omitted) == \
            (full.bytes_sent, full.bytes_delivered, full.transfers_omitted)
        listed = {tuple(l[:4]): l[4] for l in full.link_bytes}
        assert all(listed[tuple(l[:4])] == l[4] for l in closed.link_bytes)
        assert len(listed) - len(closed.link_bytes) == closed.links_omitted == n - 1
        # every downlink is listed, and so is the straggler's uplink
        assert sum(1 for l in closed.link_bytes if l[2] < n) == n
        assert any(l[0] == n - 1 for l in closed.link_bytes)


@pytest.mark.parametrize("n, rank", [(16, 3), (64, 0), (64, 62)])
def test_another_straggler_relabels_the_links_and_keeps_the_times(n, rank):
    fabric = eps_star(n, 400.0)
    w = with_straggler(stragglar_allreduce(n, 1_000_003), rank)
    plan = make_plan("none", fabric, w)
    arr = np.zeros(n)
    arr[rank] = 1e-3
    full = simulate(fabric, w, plan, alpha_s=ALPHA_S, arrivals_s=arr, record_transfers=False)
    closed = simulate_stragglar_switch(fabric, 1_000_003, alpha_s=ALPHA_S, arrivals_s=arr, straggler=rank)
    assert [(s.start_s, s.end_s, s.max_link_bytes) for s in closed.steps] == \
        [(s.start_s, s.end_s, s.max_link_bytes) for s in full.steps]
    listed = {tuple(l[:4]): l[4] for l in full.link_bytes}
    assert all(listed[tuple(l[:4])] == l[4] for l in closed.link_bytes)
    assert any(l[0] == rank for l in closed.link_bytes)  # the straggler's uplink


def test_refusals_name_what_does_not_fit():
    assert "power of two" in closed_form_refusal(eps_star(12))
    assert "semantics" in closed_form_refusal(eps_star(16), "dependency-driven")
    assert "planner" in closed_form_refusal(eps_star(16), planner="dp")
    assert "one packet switch" in closed_form_refusal(static_ring(16, 400.0))
    assert closed_form_refusal(eps_star(16)) is None
    with pytest.raises(SimulationError, match="power of two"):
        simulate_stragglar_switch(eps_star(24), 1 << 20)
    with pytest.raises(SimulationError, match="straggler"):
        simulate_stragglar_switch(eps_star(16), 1 << 20, straggler=16)
    with pytest.raises(SimulationError, match="arrivals_s"):
        simulate_stragglar_switch(eps_star(16), 1 << 20, arrivals_s=[0.0] * 15)


def test_a_scenario_whose_stragglar_does_not_fit_runs_it_in_closed_form(monkeypatch):
    """The memory check sends a StragglAR job that does not fit to the closed form, and the
    scenario's result equals the one the full engine gives where it fits (here: memory made
    small enough that 1,024 GPUs of StragglAR do not fit, while Ring does)."""
    from emulation.flowsim import limits
    from emulation.collective.runner import run_flow
    from emulation.scenario.load import check_experiment
    from emulation.scenario.schema import Scenario

    data = {"name": "s1024", "fabric": {"topology": "eps", "gpus": 1024, "port_gbps": 400},
            "cost": {"alpha_s": 2e-6}, "sizes": ["1MiB"], "backend": "flow",
            "runs": [{"name": "stragglar", "algorithm": "stragglar", "planner": "none"},
                     {"name": "ring", "algorithm": "ring", "planner": "none"}],
            "straggler": {"rank": 5, "delay_s": 1e-3}}

    def results(memory: int | None):
        if memory is not None:
            monkeypatch.setattr(limits, "available_memory", lambda: memory)
        exp = check_experiment(Scenario.model_validate(data))
        closed = [exp.in_closed_form(r, s) for s, r in exp.jobs]
        return closed, run_flow(exp).result.runs

    full_closed, full = results(None)
    small_closed, small = results(300 << 20)
    assert full_closed == [False, False] and small_closed == [True, False]
    for a, b in zip(full, small):
        assert [(s.start_s, s.end_s, s.max_link_bytes) for s in a.steps] == \
            [(s.start_s, s.end_s, s.max_link_bytes) for s in b.steps]
        assert (a.time_s, a.bytes_sent, a.bytes_delivered, a.checks.ok) == (b.time_s, b.bytes_sent, b.bytes_delivered, True)
    listed = {tuple(l[:4]): l[4] for l in full[0].link_bytes}
    assert small[0].links_omitted == 1023 and all(listed[tuple(l[:4])] == l[4] for l in small[0].link_bytes)
    assert any(l[0] == 5 for l in small[0].link_bytes)  # the straggler's uplink is GPU 5's
