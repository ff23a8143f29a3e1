"""WAN traffic engineering on the packet backend: real Open vSwitch routers, one OS-Ken TE
controller process per slice, paced UDP flows; a cable failure and a controller kill."""

import numpy as np
import pytest

from emulation import kinds
from emulation.flowsim.wan import run_wan
from emulation.wan_packet import emulate_wan

pytestmark = pytest.mark.emulation


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """experiments/wan_b4_faults.yaml shortened to 4 matrices: link 0-1 fails in matrix 1, slice
    0's controller is killed at matrix 2 (~30 s)."""
    from pathlib import Path

    sc = kinds.load_as(Path(__file__).resolve().parents[1] / "experiments" / "wan_b4_faults.yaml", "wan")
    sc = sc.model_copy(update={"wan": sc.wan.model_copy(update={
        "traffic": sc.wan.traffic.model_copy(update={"count": 4})})})
    return sc, emulate_wan(sc.wan, sc.emulation, tmp_path_factory.mktemp("wan") / "emulation")


def test_computed_side_is_the_flow_backends_and_packets_agree_with_it(faults):
    """Before any fault the controllers' union is exactly what the flow backend computes, and the
    switches' port counters agree with it link by link. Measured (B4 at 0.5 x, 128 flows per
    demand, links loaded to >= 10% of capacity), relative error: idle machine median 1.2-2.1%,
    p95 4.1-6.3% (6 runs); with two or three busy loops on the two cores median 1.9-2.3%, p95
    4.7-5.7% (3 runs). The bounds leave room for 2.5x that spread. (A CI run once gave p95 22%:
    the counters were read late, partly after the traffic of the interval had ended; the readings
    are now timed by the switch and a reading outside its interval refuses the run.)"""
    sc, res = faults
    flow = run_wan(sc.wan)
    assert np.allclose(res.intervals[0].link_load, flow.intervals[0].link_load, rtol=1e-6, atol=1e-6)
    ag = res.agreement_skipping({1})  # the cable fails in the middle of interval 1
    assert ag["links"] >= 60
    assert ag["rel_error_median"] < 0.05 and ag["rel_error_p95"] < 0.15
    first = res.intervals[0].measured
    assert first.sent > 5000 and first.lost <= 0.01 * first.sent
    # reinstalls between intervals finish before the measurement window opens (the first install,
    # before any traffic, includes the solver's start-up)
    assert all(0 < r < sc.wan.replay.warmup_s for i in res.intervals[2:] for r in i.measured.reinstall_s.values())


def test_a_failed_cable_is_routed_around_by_the_slices_using_it(faults):
    sc, res = faults
    links = res.topology["links"]
    down = [links.index([0, 1]), links.index([1, 0])]
    assert any("rerouted" in e for e in res.intervals[1].measured.events)
    cap = np.array(res.topology["capacity"])
    for i in res.intervals[2:]:  # after the failure: nothing computed or measured on the cable
        assert all(i.link_load[e] == 0 for e in down)
        assert all(i.measured.link_load[e] < 0.01 * cap[e] for e in down)
        assert i.measured.lost <= 0.01 * i.measured.sent


def test_a_killed_controller_leaves_its_routers_forwarding_on_stale_splits(faults):
    """Slice 0's controller is SIGKILLed at interval 2: its routers keep their groups (secure
    fail mode), so its demands are still delivered, on splits that no longer follow the demand:
    the measured blast radius (demand on stale splits) is within slice 0's share of the demand."""
    sc, res = faults
    share = res.slicing["shares"][0]
    assert res.intervals[1].measured.stale_demand_share == 0
    for i in res.intervals[2:]:
        m = i.measured
        assert set(m.reinstall_s) == {"1", "2", "3", "4"}  # slice 0 no longer answers
        assert 0 < m.stale_demand_share <= share + 1e-9
        mine = [d for d in m.demands if res.slicing["slice_of"][int(d[0])] == 0 and d[2] > 0]
        assert mine and sum(d[3] for d in mine) <= 0.02 * sum(d[2] for d in mine)
