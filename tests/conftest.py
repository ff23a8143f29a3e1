"""Shared fixtures. Tests marked ``emulation`` need root, Open vSwitch and Mininet; they are
skipped with the reason when those are missing (CI runs as root and has them)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _emulation_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not shutil.which("ovs-vsctl"):
        return "Open vSwitch is not installed (make setup)"
    if subprocess.run(["ovs-vsctl", "--timeout=3", "show"], capture_output=True).returncode:
        return "Open vSwitch is not running (make setup starts it)"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not importable (make setup)"
    return None


def pytest_collection_modifyitems(config, items):
    # The longest tests first (stable otherwise): run on several workers, a two-minute test that
    # starts last ends the suite two minutes after the rest (it did, in 460 s).
    items.sort(key=lambda item: "long" not in item.keywords)
    reason = _emulation_unavailable()
    if reason:
        for item in items:
            if "emulation" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def run_dir(tmp_path_factory, request) -> Path:
    """A fresh directory under runs/tests/ (not the system temporary directory)."""
    d = ROOT / "runs" / "tests" / request.node.name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


@pytest.fixture
def controller_process(run_dir):
    """``start(fabric, apps) -> (process, ofp_port, api_port, client)``: the real controller on
    ``fabric`` (written to ``run_dir``) with ``apps``, no switches, ready to answer its API; ended
    (by pid) after the test."""
    import json
    import sys
    import time

    from emulation.emulator.controller_client import ControllerClient
    from emulation.emulator.net import free_port, stop_pid

    started = []

    def start(fabric, apps):
        path = run_dir / "fabric.json"
        path.write_text(json.dumps(fabric.to_json()))
        ofp, api = free_port(), free_port()
        p = subprocess.Popen([sys.executable, "-m", "controllers", *apps,
                              "--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", str(ofp),
                              "--ocslab-fabric", str(path), "--ocslab-api-port", str(api),
                              "--log-file", str(run_dir / "controller.log")], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(p)
        client = ControllerClient(api)
        deadline = time.monotonic() + 30
        while not client.alive():
            assert p.poll() is None and time.monotonic() < deadline, "controller did not start"
            time.sleep(0.05)
        return p, ofp, api, client

    yield start
    for p in started:
        stop_pid(p)
