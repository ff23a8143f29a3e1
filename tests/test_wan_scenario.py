"""WAN scenarios end to end on the flow backend: ``ocslab run`` and ``ocslab te`` on B4."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from emulation.wan.run import run_wan
from emulation.wan.scenario import load_wan_scenario

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
    d = json.loads((out / "result.json").read_text())
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
    sc = load_wan_scenario(WAN)
    lp = run_wan(sc).summary()
    sym = run_wan(_with(sc, regulariser="symphony")).summary()
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


def test_a_replay_that_lost_packets_on_calm_paths_is_refused():
    """The packet replay's faithfulness check: demands whose tunnels stay below 90% utilisation
    must not lose datagrams; if more than 1% are lost there the machine, not the network, dropped
    them and the run is refused."""
    from emulation.emulator.net import EmulationError
    from emulation.wan.replay import check_faithful
    from emulation.wan.results import Measured

    res = run_wan(load_wan_scenario(WAN).model_copy(update={}))
    def measured(calm):
        return Measured(window_s=[1, 2], link_load=[], link_carried=[], demands=[], sent=1, lost=0, reordered=0,
                        reinstall_s={}, lost_during_reinstall=0, stale_demand_share=0, calm=calm)
    ok = res.model_copy(update={"intervals": [i.model_copy(update={"measured": measured([1000, 10])})
                                              for i in res.intervals[:2]]})
    check_faithful(ok)  # 20 of 2000 = 1.0%: accepted
    bad = res.model_copy(update={"intervals": [i.model_copy(update={"measured": measured([1000, 11])})
                                               for i in res.intervals[:2]]})
    with pytest.raises(EmulationError, match="22 of 2000 datagrams"):
        check_faithful(bad)
