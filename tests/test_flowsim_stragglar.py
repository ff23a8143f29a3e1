"""StragglAR in closed form on a non-blocking switch (emulation.flowsim.stragglar) against the
full round-synchronous engine: the same step records bit for bit, the same totals, the same
bytes on every link it lists."""

import numpy as np
import pytest

from emulation.flowsim import SimulationError, simulate
from emulation.flowsim.cases import ALPHA_S, case_inputs, case_plan
from emulation.flowsim.stragglar import closed_form_refusal, simulate_stragglar_switch
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


def test_refusals_name_what_does_not_fit():
    assert "power of two" in closed_form_refusal(eps_star(12), 12)
    assert "semantics" in closed_form_refusal(eps_star(16), 16, "dependency-driven")
    assert "planner" in closed_form_refusal(eps_star(16), 16, planner="dp")
    assert "one packet switch" in closed_form_refusal(static_ring(16, 400.0), 16)
    assert closed_form_refusal(eps_star(16), 16) is None
    with pytest.raises(SimulationError, match="power of two"):
        simulate_stragglar_switch(eps_star(24), 1 << 20)
    with pytest.raises(SimulationError, match="arrivals_s"):
        simulate_stragglar_switch(eps_star(16), 1 << 20, arrivals_s=[0.0] * 15)
