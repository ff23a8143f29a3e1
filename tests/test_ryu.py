"""The controller apps under Ryu's ``ryu-manager`` (Ryu 4.34 on Python 3.9, ``.venv-ryu``):
the demo's three runs with the same dark-window and ordering properties as under OS-Ken.

Skipped, with the one-line reason, where ``.venv-ryu`` could not be made (no Python 3.9)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from emulation.emulator.capabilities import detect

from emulation.emulator.net import RYU_VENV, ryu_unavailable
from emulation.collective.report import ring_alpha_beta_s

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
    scen = tmp_path / "demo.yaml"  # the demo's 25 MiB runs (its 1 MiB ones add no path under Ryu)
    scen.write_text((ROOT / "experiments" / "demo.yaml").read_text().replace("sizes: [25MiB, 1MiB]", "sizes: [25MiB]"))
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "run", str(scen), "--controller", "ryu",
                        "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    d = json.loads((out / "result.json").read_text())["result"]
    assert d["controller"] == "ryu"
    # 8 GPUs: packet sockets (no PMD thread below 17 GPUs), or the kernel datapath where it exists
    assert d["datapath"] == ("kernel" if detect().ovs_kernel_datapath else "packet")
    assert len(d["tcp_congestion"]) == 1  # every connection runs the same, and it is recorded
    assert "ryu" in (out / "emulation" / "controller.log").read_text().lower()
    runs = {(x["name"], x["bytes"]): x for x in d["runs"]}
    assert len(runs) == 3
    for x in runs.values():
        assert x["checks"]["ok"], (x["name"], x["checks"])
        tdf = d["scale"]["tdf"] * x["byte_scale"] / d["scale"]["byte_scale"]  # the run's own (raised for short steps)
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
    from emulation.wan_packet import emulate_wan

    sc = kinds.load_as(ROOT / "experiments" / "wan_b4.yaml", "wan")
    sc = sc.model_copy(update={
        "wan": sc.wan.model_copy(update={"traffic": sc.wan.traffic.model_copy(update={"scale": 0.5, "count": 2}),
                                         "te": sc.wan.te.model_copy(update={"regulariser": "symphony"})}),
        "emulation": sc.emulation.model_copy(update={"controller": "ryu"})})
    res = emulate_wan(sc.wan, sc.emulation, tmp_path / "emulation")
    assert "ryu.controller.ofp_handler" in (tmp_path / "emulation" / "controller-0.log").read_text()
    ag = res.agreement
    assert ag["links"] >= 30 and ag["rel_error_median"] < 0.05 and ag["rel_error_p95"] < 0.15
    assert ag["loss"] < 0.01


def _get_json(port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return json.loads(r.read())


def _ocs_flow_circuits(port: int, fabric) -> set[tuple[int, int]]:
    """The circuit rules in OCS 0's flow table as ofctl_rest's ``GET /stats/flow/<dpid>`` shows
    them: ``{(in_port, out_port)}`` of every rule of the circuit priority."""
    from controllers.circuit_switch import PRIO_CIRCUIT
    from emulation import dataplane as dpn

    flows = _get_json(port, f"/stats/flow/{dpn.DPID_OCS}")[str(dpn.DPID_OCS)]
    out = set()
    for f in flows:
        if f["priority"] == PRIO_CIRCUIT:
            assert len(f["actions"]) == 1 and f["actions"][0].startswith("OUTPUT:"), f
            out.add((f["match"]["in_port"], int(f["actions"][0].split(":")[1])))
    return out


def _circuit_rules(fabric, config) -> set[tuple[int, int]]:
    """The ``(in_port, out_port)`` rules that carry ``config``'s circuits on OCS 0 (both ways)."""
    from emulation import dataplane as dpn

    ocs = fabric.ocs[0]
    return {(ocs.port_number(x), dpn.ocs_out_port(ocs.port_number(y)))
            for c in config[ocs.name] for x, y in ((c.a, c.b), (c.b, c.a))}


@pytest.mark.emulation
def test_ryus_ofctl_rest_beside_the_apps_shows_exactly_the_controllers_circuits(run_dir):
    """The demo fabric under ryu-manager with ``ryu.app.ofctl_rest`` (``--ofctl-rest``): the OCS's
    flow table read through ``GET /stats/flow/<dpid>`` holds exactly the circuits ``GET
    /circuits`` reports (8 GPUs x 2 ports: 8 circuits, 16 one-way rules), before and after a
    reconfiguration to the halving-doubling partners at distance 4; the three servers (OpenFlow,
    ocslab's API, ofctl_rest) listen on three distinct loopback ports."""
    why = ryu_unavailable()
    if why:
        pytest.skip(f"ryu unavailable: {why}")
    from emulation import dataplane as dpn
    from emulation import kinds
    from emulation.emulator.net import EmulatedFabric, free_port
    from emulation.fabric import assign_ports

    fabric = kinds.load(ROOT / "experiments" / "demo.yaml")[1].experiment.fabric
    port = free_port()
    with EmulatedFabric(fabric, run_dir / "emulation", link_mbps=10.0, controller="ryu", ofctl_rest=port) as emu:
        assert emu.ofctl_rest_port == port
        api = int(emu.client.base.rsplit(":", 1)[1])
        listening = _listeners(emu.controller.pid)
        assert listening == {f"127.0.0.1:{p}" for p in (emu.ofp_port, api, port)} and len(listening) == 3, listening
        assert dpn.DPID_OCS in _get_json(port, "/stats/switches")
        before = emu.client.circuits()
        rules = _ocs_flow_circuits(port, fabric)
        print(f"ofctl_rest: {len(rules)} circuit rules on the OCS, controller reports "
              f"{sum(len(v) for v in before.to_json().values())} circuits")
        assert rules == _circuit_rules(fabric, before) and len(rules) == 16, (sorted(rules), before.to_json())
        after = assign_ports(fabric, "ocs0", [(i, i + 4) for i in range(4)] * 2)
        res = emu.client.apply(after, 0.001)
        assert res["changed"] and res["removed"] == 8 and res["added"] == 8, res
        now = emu.client.circuits()
        assert now == after
        rules = _ocs_flow_circuits(port, fabric)
        print(f"after one reconfiguration: {len(rules)} circuit rules, e.g. {sorted(rules)[:2]}")
        assert rules == _circuit_rules(fabric, now) and len(rules) == 16, (sorted(rules), now.to_json())
    assert "ryu.app.ofctl_rest" in (run_dir / "emulation" / "controller.log").read_text()


def _listeners(pid: int) -> set[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    return {line.split()[3] for line in out.splitlines() if f"pid={pid}," in line}


def test_ofctl_rest_is_refused_in_one_line_where_it_cannot_load(tmp_path, monkeypatch):
    """``--ofctl-rest`` on OS-Ken 4.x (no ``os_ken.app.ofctl_rest``), on a port in use, or on the
    flow backend: exit status 2 and one line before anything starts; ``ryu-manager`` is given
    ``ryu.app.ofctl_rest``."""
    import importlib.util
    import socket

    import emulation.emulator.net as net
    from topologies import ocs_star

    fabric = ocs_star(4, 2, 400, 0.0, "ring")
    if importlib.util.find_spec("os_ken.app.ofctl_rest") is None:
        with pytest.raises(net.MachineUnfit, match=r"^--ofctl-rest: this OS-Ken has no os_ken.app.ofctl_rest"):
            net.EmulatedFabric(fabric, tmp_path, link_mbps=10, controller="os-ken", ofctl_rest=0)
        r = subprocess.run([sys.executable, "-m", "emulation.cli", "run", "experiments/demo.yaml", "--ofctl-rest", "0",
                            "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=120)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("ocslab: --ofctl-rest: "), r.stderr
        assert not (tmp_path / "out").exists()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        busy = s.getsockname()[1]
        with pytest.raises(net.MachineUnfit, match=f"--ofctl-rest: port {busy} on 127.0.0.1 is not free"):
            net.ofctl_rest_port(busy)
    with pytest.raises(net.MachineUnfit, match="a TCP port in"):
        net.ofctl_rest_port("eighty")
    monkeypatch.setenv(net.OFCTL_REST_ENV, "")
    assert net.EmulatedFabric(fabric, tmp_path, link_mbps=10).ofctl_rest_port is None
    r = subprocess.run([sys.executable, "-m", "emulation.cli", "run", "experiments/demo.yaml", "--backend", "flow",
                        "--ofctl-rest"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("ocslab: --ofctl-rest: only a collective scenario on the packet")
    if not ryu_unavailable():
        cmd, _ = net.controller_command("ryu", ["circuit_switch", "api", "ofctl_rest"], ["--wsapi-port", "1"])
        assert cmd[-3:] == ["controllers.circuit_switch", "controllers.api", "ryu.app.ofctl_rest"]
