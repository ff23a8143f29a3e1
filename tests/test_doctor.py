"""``ocslab doctor``: the machine's findings, each problem with its fix, and the calibration's
GPU counts (emulation/emulator/doctor.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from emulation.emulator import doctor, limits

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "emulation.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_gpu_counts_come_from_the_fastest_rate_that_passed():
    cal = {"target": 0.98, "probes": [{"link_mbps": 10.0, "efficiency": 0.81}, {"link_mbps": 5.0, "efficiency": 0.994}]}
    got = doctor.capacity_of(cal, 64 << 30)
    # 16 GPUs x 2 ports x 5 Mbit/s forwarded faithfully: 160 Mbit/s of link load
    assert got["rate_mbps"] == 5.0 and got["faithful_mbps"] == 160.0 and got["ceiling"]
    assert got["gpus"] == {2.5: 32, 5.0: 16, 10.0: 8, 20.0: 4} and set(got["bound"].values()) == {"CPU"}
    tight = doctor.capacity_of(cal, 20 * limits.MEMORY_PER_GPU_BYTES)
    assert tight["gpus"][2.5] == 20 and tight["bound"][2.5] == "memory" and tight["bound"][5.0] == "CPU"
    first = doctor.capacity_of({"target": 0.98, "probes": [{"link_mbps": 10.0, "efficiency": 0.99}]}, 64 << 30)
    assert first["faithful_mbps"] == 320.0 and not first["ceiling"]  # a floor: nothing faster was tried
    with pytest.raises(ValueError, match="no probe reached"):
        doctor.capacity_of({"target": 0.98, "probes": [{"link_mbps": 0.5, "efficiency": 0.4}]}, 64 << 30)


def test_the_open_vswitch_version_is_read_from_its_banner():
    assert doctor.ovs_version_tuple("ovs-vsctl (Open vSwitch) 3.1.0") == (3, 1, 0)
    assert doctor.ovs_version_tuple("ovs-vsctl (Open vSwitch) 2.13") == (2, 13) < doctor.TSO_SINCE
    assert doctor.ovs_version_tuple("absent") is None


def test_a_server_that_is_not_in_the_lab_is_refused_in_one_line(tmp_path):
    out = tmp_path / "d"
    r = _cli("doctor", "--server", "nosuchserver", "--out", str(out))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--server nosuchserver: not a lab server" in r.stderr and not out.exists()


@pytest.mark.emulation
def test_doctor_finds_this_machines_packet_backend_and_calibrates_it(run_dir):
    """On a CI machine (root, Open vSwitch answering, no kernel datapath, no netem): every
    finding is one line, netem is a problem with its fix that does not block, and the
    calibration's link load agrees with the capacity model the packet backend refuses by
    (80 Mbit/s per core at MTU 1500) within a factor of two either way."""
    r = _cli("doctor", "--out", str(run_dir / "d"))
    print(r.stdout, r.stderr[-2000:])
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert re.search(r"^ +Open vSwitch: \d+\.\d+\.\d+, answering$", r.stdout, re.M)
    assert re.search(r"^ +HTB: yes$", r.stdout, re.M) and re.search(r"^ +root: yes$", r.stdout, re.M)
    netem = [line for line in lines if " netem: " in line]
    assert len(netem) == 1 and (netem[0].startswith("PROBLEM netem: no") and "sch_netem" in netem[0]
                                or netem[0].strip() == "netem: yes")
    m = re.search(r"this machine forwards ([\d.]+) Mbit/s of link load faithfully", r.stdout)
    faithful = float(m.group(1))
    model = limits.switching_mbps_per_core() * len(os.sched_getaffinity(0))
    assert model / 2 <= faithful <= model * 2, (faithful, model)
    counts = dict((float(rate), int(n)) for n, rate in re.findall(r"(\d+) at ([\d.]+)", r.stdout.split("capacity:")[1]))
    assert counts[10.0] == int(faithful / 10 // 2) and counts[2.5] >= 4 * counts[10.0]
    assert lines[-1] == "doctor: nothing blocks the packet backend"


def test_without_open_vswitch_the_finding_blocks_and_names_its_fix(monkeypatch):
    import shutil

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name.startswith("ovs") else real(name, *a, **k))
    found = {f.topic: f for f in doctor.machine_findings()}
    assert found["Open vSwitch"].blocking and found["Open vSwitch"].line() == (
        "Open vSwitch: not installed -> make setup (installs openvswitch-switch)")
    assert found["userspace TSO"].found == "no Open vSwitch" and not found["userspace TSO"].blocking
    assert found["PMD thread (AF_XDP)"].found == "no"
