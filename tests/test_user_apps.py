"""Your own controller apps, loaded beside the built-in ones: the two examples of
``controllers/examples/`` on the packet backend, and one loaded from outside the repository."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from emulation import dataplane as dpn
from emulation.emulator.net import EmulatedFabric
from emulation.poll import wait_until
from topologies import ocs_star

pytestmark = pytest.mark.emulation
EXAMPLES = Path(__file__).resolve().parents[1] / "controllers" / "examples"


def _events(emu, kind: str) -> list[dict]:
    return [e for e in emu.client.events() if e["kind"] == kind]


def test_static_schedule_cycles_the_circuits_on_its_own_clock(run_dir):
    """4 GPUs x 2 ports from the ring: the app reconfigures 4 times, 1 s apart, alternating
    skip-one (0-2, 1-3) and the ring, each with its 20 ms dark window measured."""
    f = ocs_star(4, 2, 400, 0.0, "ring")
    with EmulatedFabric(f, run_dir, link_mbps=20, apps=(str(EXAMPLES / "static_schedule.py"),)) as emu:
        wait_until(lambda: len(_events(emu, "static-schedule")) >= 2, 15, lambda: AssertionError("no schedule"))
        pairs = {tuple(sorted((c.a.gpu, c.b.gpu))) for c in emu.client.circuits()["ocs0"]}
        wait_until(lambda: len(_events(emu, "static-schedule")) >= 4, 15, lambda: AssertionError("stalled"))
        steps = _events(emu, "static-schedule")
        recon = _events(emu, "reconfigured")
    assert [s["config"] for s in steps] == [0, 1, 0, 1]
    assert pairs == {(0, 1), (1, 2), (2, 3), (0, 3)}  # after the second step: the ring again
    gaps = [b["t"] - a["t"] for a, b in zip(steps, steps[1:])]
    assert all(0.95 <= g <= 1.5 for g in gaps), gaps  # PERIOD_S = 1 s, plus each apply's dark window
    assert len(recon) == 4 and all(0.02 <= r["dark_window_measured_s"] <= 0.03 for r in recon)


def test_demand_driven_app_gives_the_hot_pairs_circuits(run_dir, tmp_path):
    """4 GPUs x 1 port, no circuits: GPU 0 floods GPU 2 and GPU 1 floods GPU 3 (UDP). The app,
    loaded from a copy outside the repository, measures that demand at the NICs and connects
    exactly those pairs; then ping 0 -> 2 goes through."""
    mine = tmp_path / "elsewhere" / "my_scheduler.py"
    mine.parent.mkdir()
    shutil.copy(EXAMPLES / "demand_driven.py", mine)
    f = ocs_star(4, 1, 400, 0.0, "empty")
    with EmulatedFabric(f, run_dir, link_mbps=20, apps=(str(mine),)) as emu:
        floods = [emu.host(a).popen(["python3", "-c",
                                     "import socket, time\n"
                                     "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                                     "end = time.time() + 8\n"
                                     "while time.time() < end:\n"
                                     f"    s.sendto(b'x' * 1200, ('{dpn.gpu_ip(b)}', 9)); time.sleep(0.002)\n"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                  for a, b in ((0, 2), (1, 3))]
        try:
            wait_until(lambda: _events(emu, "demand-driven"), 10, lambda: AssertionError("the app never reconfigured"))
            decided = _events(emu, "demand-driven")[0]
            pairs = {tuple(sorted((c.a.gpu, c.b.gpu))) for c in emu.client.circuits()["ocs0"]}
            ping = emu.host(0).cmd(f"ping -c 3 -i 0.1 -W 1 {dpn.gpu_ip(2)}")
        finally:
            for p in floods:
                p.kill()
                p.wait()
    assert decided["pairs"] == [[0, 2], [1, 3]] and min(decided["weights"]) >= 50_000
    assert pairs == {(0, 2), (1, 3)}
    assert " 0% packet loss" in ping, ping
    assert 0.01 <= decided["dark_window_measured_s"] <= 0.02
