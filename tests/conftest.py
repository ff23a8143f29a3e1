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
