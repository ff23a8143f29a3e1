"""The controller apps under Ryu's ``ryu-manager`` (Ryu 4.34 on Python 3.9, ``.venv-ryu``):
the demo's three runs with the same dark-window and ordering properties as under OS-Ken.

Skipped, with the one-line reason, where ``.venv-ryu`` could not be made (no Python 3.9)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from emulation.emulator.net import RYU_VENV, ryu_unavailable
from emulation.report import ring_alpha_beta_s

ROOT = Path(__file__).resolve().parents[1]


def test_the_apps_import_and_register_their_options_under_ryu():
    why = ryu_unavailable()
    if why:
        pytest.skip(f"ryu unavailable: {why}")
    code = ("import ryu.cfg, sys; sys.argv = ['x']\n"
            "import controllers.sdn as s, controllers.circuit_switch, controllers.routing, controllers.api, "
            "controllers.failover\n"
            "print(s.RUNTIME, s.App.__module__)")
    r = subprocess.run([str(RYU_VENV / "bin" / "python"), "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["ryu", "ryu.base.app_manager"]


@pytest.mark.emulation
def test_the_demo_runs_under_ryu_manager_like_under_os_ken(tmp_path):
    """``ocslab run experiments/demo.yaml --controller ryu``: every run completes with its
    checks, the controller measured every dark window at least as long as requested (and within
    20% + 2 ms emulated of it, the bound the OS-Ken tests use), the steps are in order, and Ring
    lands within 5% of the alpha-beta model, as under OS-Ken."""
    why = ryu_unavailable()
    if why:
        pytest.skip(f"ryu unavailable: {why}")
    out = tmp_path / "demo-ryu"
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "run", "experiments/demo.yaml", "--controller", "ryu",
                        "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    d = json.loads((out / "result.json").read_text())["result"]
    assert d["controller"] == "ryu"
    assert "ryu" in (out / "emulation" / "controller.log").read_text().lower()
    runs = {(x["name"], x["bytes"]): x for x in d["runs"]}
    assert len(runs) == 6
    tdf = d["scale"]["tdf"]
    for x in runs.values():
        assert x["checks"]["ok"], (x["name"], x["checks"])
        steps = x["steps"]
        assert all(a["end_s"] <= b["start_s"] + 1e-9 for a, b in zip(steps, steps[1:]))
        for s in steps:
            if s["action"] == "reconfigure":
                req, meas = s["reconfiguration_delay_s"], s["dark_window_measured_s"]
                assert req <= meas <= 1.2 * req + 0.002 / tdf, (x["name"], req, meas)
    ring = runs[("ring", 25 << 20)]
    pred = ring_alpha_beta_s(8, 25 << 20, 5e-6, 400)
    assert abs(ring["time_s"] - pred) / pred < 0.05, (ring["time_s"], pred)


def test_without_a_ryu_environment_the_reason_is_one_line(tmp_path, monkeypatch):
    import emulation.emulator.net as net

    monkeypatch.setattr(net, "RYU_VENV", tmp_path / ".venv-ryu")
    assert "OCSLAB_EXTRAS=ryu make setup" in net.ryu_unavailable()
    (tmp_path / ".venv-ryu").mkdir()
    (tmp_path / ".venv-ryu" / "UNAVAILABLE").write_text("no Python 3.9 found\n")
    assert net.ryu_unavailable() == "no Python 3.9 found"
    with pytest.raises(net.EmulationError, match="ryu is unavailable: no Python 3.9 found"):
        net.controller_command("ryu", ["circuit_switch"], [])
    cmd, _ = net.controller_command("os-ken", ["circuit_switch"], ["--x"])
    assert cmd[1:] == ["-m", "controllers", "circuit_switch", "--x"]


@pytest.mark.emulation
def test_the_wan_slice_controllers_run_under_ryu_manager(tmp_path):
    """Five WAN TE controllers (``controllers/wan_te.py``, Symphony's regulariser through cvxpy)
    under ryu-manager replay two B4 matrices: the switches' port counters agree with the
    computed link loads as under OS-Ken (measured there: median 1.2-2.1%, p95 4.1-6.3%)."""
    why = ryu_unavailable()
    if why:
        pytest.skip(f"ryu unavailable: {why}")
    from emulation import kinds
    from emulation.kinds.wan import emulate_wan

    sc = kinds.load_as(ROOT / "experiments" / "wan_b4.yaml", "wan")
    sc = sc.model_copy(update={
        "wan": sc.wan.model_copy(update={"traffic": sc.wan.traffic.model_copy(update={"scale": 0.5, "count": 2}),
                                         "te": sc.wan.te.model_copy(update={"regulariser": "symphony"})}),
        "emulation": sc.emulation.model_copy(update={"controller": "ryu"})})
    res = emulate_wan(sc, tmp_path / "emulation")
    assert "ryu.controller.ofp_handler" in (tmp_path / "emulation" / "controller-0.log").read_text()
    ag = res.agreement
    assert ag["links"] >= 30 and ag["rel_error_median"] < 0.05 and ag["rel_error_p95"] < 0.15
    assert ag["loss"] < 0.01
