"""WAN scenarios end to end on the flow backend: ``ocslab run`` and ``ocslab te`` on B4."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emulation import kinds
from emulation.flowsim.wan import run_wan

ROOT = Path(__file__).resolve().parents[1]
WAN = ROOT / "experiments" / "wan_b4.yaml"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "emulation.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def _with(sc, **te):
    return sc.model_copy(update={"wan": sc.wan.model_copy(update={"te": sc.wan.te.model_copy(update=te)})})


def test_run_writes_one_interval_per_matrix_with_consistent_accounting(tmp_path):
    out = tmp_path / "wan"
    r = _cli("run", str(WAN), "--out", str(out))
    assert r.returncode == 0, r.stderr
    d = json.loads((out / "result.json").read_text())["result"]
    assert len(d["intervals"]) == 36 and d["tunnels"]["count"] == 528
    cap = np.array(d["topology"]["capacity"])
    for i in d["intervals"]:
        assert i["delivered"] <= i["carried"] * (1 + 1e-9) and i["carried"] <= i["offered"] * (1 + 1e-9)
        assert i["loss"] == pytest.approx(i["carried"] - i["delivered"], abs=1e-6)
        over = np.maximum(np.array(i["link_load"]) - cap, 0)
        assert i["congestion"] == pytest.approx(over.sum(), rel=1e-9, abs=1e-9)
        assert i["mlu"] == pytest.approx(max(i["link_load"] / cap), rel=1e-12)
    assert (out / "intervals.csv").exists() and (out / "links.png").stat().st_size > 10_000
    assert "blast radius" in r.stdout


def test_regularised_slices_stay_within_capacity_where_the_lp_union_overloads():
    """B4, 36 Abilene matrices at 0.8 x, five random slices with 5% half-normal deviation,
    max-flow: the LP union overloads (measured: mean congestion 153.3, worst link 16.9% over,
    0.66% of the carried demand lost); with Symphony's regulariser nothing is overloaded."""
    sc = kinds.load_as(WAN, "wan")
    lp = run_wan(sc.wan).summary
    sym = run_wan(_with(sc, regulariser="symphony").wan).summary
    assert lp["mean_congestion"] > 50 and lp["max_overload"] > 0.05 and lp["loss_over_carried"] > 0
    assert sym["mean_congestion"] < 0.01 * lp["mean_congestion"] and sym["max_overload"] < 0.01
    assert sym["delivered_over_offered"] >= lp["delivered_over_offered"]


@pytest.mark.parametrize("objective", ["mcf", "min-mlu"])
def test_te_json_gives_valid_splits_and_loads(tmp_path, objective):
    scen = tmp_path / "wan.yaml"
    scen.write_text(WAN.read_text().replace("objective: max-flow", f"objective: {objective}"))
    r = _cli("te", str(scen), "--tm", "7", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["objective"] == objective and d["matrix"] == 7 and len(d["demands"]) == 132
    loads: dict = {}
    for dem in d["demands"]:
        total = sum(t["split"] for t in dem["tunnels"])
        want = 1.0 if objective == "min-mlu" else d["value"]
        if dem["demand"] > 0:
            assert total == pytest.approx(want, abs=1e-5)
        for t in dem["tunnels"]:
            for a, b in zip(t["path"], t["path"][1:]):
                loads[(a, b)] = loads.get((a, b), 0.0) + t["split"] * dem["demand"]
    for link in d["links"]:
        assert link["load"] == pytest.approx(loads.get((link["src"], link["dst"]), 0.0), rel=1e-9, abs=1e-6)
        assert link["utilisation"] == pytest.approx(link["load"] / link["capacity"])
    if objective == "mcf":
        assert max(link["utilisation"] for link in d["links"]) <= 1 + 1e-5


def test_a_replay_that_lost_packets_on_calm_paths_fails_its_check():
    """The packet replay's faithfulness check: demands whose tunnels stay below 90% utilisation
    must not lose datagrams; if more than 1% are lost there the machine, not the network, dropped
    them and the result names the failed check (a flow result has none to fail)."""
    from emulation.te_intervals import Interval, Measured, WanResult, calm_loss

    def measured(calm):
        return Measured(window_s=[1, 2], link_load=[], link_carried=[], demands=[], sent=1, lost=0, reordered=0,
                        reinstall_s={}, lost_during_reinstall=0, stale_demand_share=0, calm=calm)
    assert calm_loss([measured([1000, 10])] * 2) is None  # 20 of 2000 = 1.0%: held
    failed = calm_loss([measured([1000, 11])] * 2)
    assert failed.check == "calm loss" and failed.detail.startswith("22 of 2000 datagrams (1.10%)")

    def result(packet, m):
        iv = Interval(index=0, offered=1, carried=1, delivered=1, loss=0, mlu=0.5, congestion=0, max_overload=0,
                      link_load=[], measured=m)
        return WanResult(topology={"capacity": []}, te={}, tunnels={}, slicing={}, divergence={}, traffic={},
                         intervals=[iv, iv], packet=packet)
    assert [c.check for c in result({"link_mbps": 8}, measured([1000, 11])).failed_checks()] == ["calm loss"]
    assert result({"link_mbps": 8}, measured([1000, 10])).failed_checks() == []
    assert result(None, None).failed_checks() == []


PORTS = """OFPST_PORT reply (OF1.3) (xid=0x2): 2 ports
  port  2: rx pkts=10, bytes=5000, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=20, bytes=9000, drop=0, errs=0, coll=0
           duration=12.345s
  port LOCAL: rx pkts=0, bytes=0, drop=0, errs=0, frame=0, over=0, crc=0
           tx pkts=0, bytes=0, drop=0, errs=0, coll=0
           duration=12.346s
"""


def test_port_rates_use_the_switchs_own_reading_times():
    """A link's rate is its counter's change over the switch's own times of the two readings
    (the port's duration), whatever the wall-clock times of the calls that read them."""
    from emulation.emulator.wan_net import PortSnapshot, _parse_ports

    assert _parse_ports(PORTS) == {2: (5000, 9000, 12.345)}
    a = PortSnapshot(tx=np.array([0.0, 100.0]), tx_s=np.array([1.0, 1.0]), rx=np.array([0.0, 50.0]),
                     rx_s=np.array([1.2, 1.0]), began=10.0, ended=10.5)
    b = PortSnapshot(tx=np.array([2000.0, 100.0]), tx_s=np.array([3.0, 2.0]), rx=np.array([1800.0, 50.0]),
                     rx_s=np.array([3.0, 2.0]), began=12.0, ended=13.9)  # a reading that took 1.9 s
    sent, received = b.rates(a)
    assert sent.tolist() == [1000.0, 0.0] and received.tolist() == [1000.0, 0.0]
    with pytest.raises(ValueError, match="not read later"):
        a.rates(b)


def test_a_replay_whose_counter_readings_leave_their_interval_is_refused():
    """Readings late for their interval (a busy machine) would measure the next matrix or no
    traffic at all: the run is refused, naming the times."""
    from emulation.emulator.net import EmulationError
    from emulation.emulator.wan_net import PortSnapshot
    from emulation.emulator.wan_replay import _check_window

    def snap(began, ended):
        z = np.zeros(1)
        return PortSnapshot(tx=z, tx_s=z, rx=z, rx_s=z, began=began, ended=ended)

    _check_window(2, 100.0, 103.0, 100.2, snap(101.0, 101.2), snap(102.5, 102.8))
    with pytest.raises(EmulationError, match=r"matrix 2: .* and 2.90-3.20 s"):
        _check_window(2, 100.0, 103.0, 100.2, snap(101.0, 101.2), snap(102.9, 103.2))
    with pytest.raises(EmulationError, match="installed at 1.50 s"):
        _check_window(2, 100.0, 103.0, 101.5, snap(101.0, 101.2), snap(102.5, 102.8))
