"""The Python API (emulation/api.py, docs/api.md): load, run, read, change a field, judge;
the same results as ``ocslab run``, without root on the flow backend."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from emulation import api
from emulation.scenario import ScenarioError

ROOT = Path(__file__).resolve().parents[1]


def test_load_run_read_and_a_sweep_over_r(tmp_path):
    sc = api.load(ROOT / "experiments" / "demo.yaml")
    assert api.kind_of(sc) == "collective"
    env = api.run(sc, backend="flow", out=tmp_path / "demo")
    assert api.verdict(env) == 0 and env.failed_checks == [] and env.backend == "flow"
    times = {(r.name, r.bytes): r.time_s for r in env.result.runs}
    assert times[("ring", 25 << 20)] == pytest.approx(0.988e-3, rel=1e-3)  # the README's flow figure
    back = api.read(tmp_path / "demo")
    assert {(r.name, r.bytes): r.time_s for r in back.result.runs} == times
    with open(tmp_path / "demo" / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(env.result.runs) and rows[0]["name"] == "ring" and float(rows[0]["time_s"]) > 0

    # a sweep: RHD with a reconfiguration per step pays R per step, so its time grows with R
    circuits, reconfigs = [], set()
    for r in (1e-6, 1e-5, 1e-4):
        one = api.changed(sc, {"fabric.reconfiguration_delay_s": r, "sizes": ["1MiB"]})
        assert one.fabric.reconfiguration_delay_s == r and sc.fabric.reconfiguration_delay_s == 10e-6
        env = api.run(one, backend="flow", out=tmp_path / f"r{r:g}")
        run = next(x for x in env.result.runs if x.name == "rhd-circuits")
        circuits.append(run.time_s)
        reconfigs.add(sum(s.action == "reconfigure" for s in run.steps))
    (k,) = reconfigs  # the same plan at every R: each reconfiguration costs R more
    assert 1 <= k <= 6 and circuits[0] < circuits[1] < circuits[2]
    assert circuits[2] - circuits[1] == pytest.approx(k * (1e-4 - 1e-5), rel=1e-6)


def test_a_scenario_from_a_dict_is_validated_like_a_file(tmp_path):
    import yaml

    data = yaml.safe_load((ROOT / "experiments" / "demo.yaml").read_text())
    assert api.kind_of(api.from_dict(data)) == "collective"
    data["fabric"]["gpus"] = 0
    with pytest.raises(ScenarioError, match=r"^mine: fabric.gpus"):
        api.from_dict(data, "mine")
    with pytest.raises(ScenarioError, match="fabric.no_such"):
        api.changed(api.load(ROOT / "experiments" / "demo.yaml"), {"fabric.no_such": 1})


def test_a_large_result_keeps_its_records_in_columns_beside_a_small_result_json(tmp_path, monkeypatch):
    """Above LARGE_RESULT records, steps, transfers and link bytes go to runs.npz; reading puts
    them back exactly, and numpy reads a column without ocslab."""
    import json

    import numpy as np

    from emulation import envelope
    from emulation.envelope import EnvelopeError

    sc = api.changed(api.load(ROOT / "experiments" / "demo.yaml"), {"sizes": ["1MiB"]})
    small = api.run(sc, backend="flow", out=tmp_path / "small")
    assert not (tmp_path / "small" / "runs.npz").exists() and api.read(tmp_path / "small").columns is None
    monkeypatch.setattr(envelope, "LARGE_RESULT", 10)  # the demo at 8 GPUs holds about 60 records
    env = api.run(sc, backend="flow", out=tmp_path / "large")
    data = json.loads((tmp_path / "large" / "result.json").read_text())
    assert data["columns"] == "runs.npz"
    assert all(r["steps"] == [] and r["transfers"] == [] and r["link_bytes"] == [] for r in data["result"]["runs"])
    back = api.read(tmp_path / "large")
    assert back.result.model_dump() == env.result.model_dump()
    assert [r.model_dump() for r in back.result.runs] == [r.model_dump() for r in small.result.runs]
    rhd = next(i for i, r in enumerate(env.result.runs) if r.name == "rhd-circuits")
    with np.load(tmp_path / "large" / "runs.npz") as cols:
        assert cols[f"{rhd}.steps.end_s"].tolist() == [s.end_s for s in env.result.runs[rhd].steps]
        assert cols[f"{rhd}.steps.action"].tolist() == [s.action for s in env.result.runs[rhd].steps]
    bare = api.read(tmp_path / "large", records=False)
    assert bare.result.runs[rhd].steps == [] and bare.result.runs[rhd].time_s == env.result.runs[rhd].time_s
    (tmp_path / "large" / "runs.npz").write_bytes(b"not a zip")
    with pytest.raises(EnvelopeError, match=r"result.json: columns: runs.npz: not a NumPy archive"):
        api.read(tmp_path / "large")


def test_columns_keep_nulls_mappings_and_types():
    from emulation.columns import from_columns, to_columns

    records = [{"index": 0, "phase": "a", "end_s": 1.5, "retransmissions": None, "drops": None, "ok": True},
               {"index": 1, "phase": "b", "end_s": float("inf"), "retransmissions": 3, "drops": {"htb": 2}, "ok": False},
               {"index": 2, "phase": "c", "end_s": 2, "retransmissions": 0, "drops": {}, "ok": True}]
    cols = to_columns(records)
    assert cols["index"].dtype.kind == "i" and cols["end_s"].dtype.kind == "f" and cols["ok"].dtype.kind == "b"
    assert cols["retransmissions.null"].tolist() == [True, False, False] and "drops.json" in cols
    assert from_columns(cols) == records
    assert from_columns(to_columns([{"a": None, "b": 1}])) == [{"b": 1}]  # null everywhere: no column


def test_runs_of_one_second_without_out_get_directories_of_their_own(tmp_path, monkeypatch):
    """A sweep without ``out=`` (flow runs take well under a second) must not collide on the
    default ``runs/<name>-<UTC time>``; an ``out`` in use is refused naming ``out=``."""
    from emulation import output
    from emulation.output import Refused

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(output, "stamp", lambda: "20261128-120000")  # every run in the same second
    sc = api.changed(api.load(ROOT / "experiments" / "demo.yaml"), {"sizes": ["1MiB"]})
    for _ in range(3):
        api.run(sc, backend="flow")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "demo-20261128-120000", "demo-20261128-120000-2", "demo-20261128-120000-3"]
    with pytest.raises(Refused, match=r"^out= runs/demo-20261128-120000: exists and is not empty$"):
        api.run(sc, backend="flow", out="runs/demo-20261128-120000")
