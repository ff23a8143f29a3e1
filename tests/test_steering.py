"""Open vSwitch pinned to one core and the GPUs' receive steered to the others
(emulation/emulator/steering.py): the masks the kernel takes, a steered fabric that forwards and
gives the cores back, the default that steers large fabrics only, and ``ocslab clean`` putting
ovs-vswitchd's cores back after a SIGKILL. Real Open vSwitch, controller and Mininet hosts (root;
see conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from emulation.emulator import registry, steering
from emulation.emulator.calibration import measure_headroom
from emulation.emulator.datapath import Datapath
from emulation.emulator.limits import PROBE_PASS
from emulation.emulator.net import EmulatedFabric, EmulationError, ovs_vswitchd_pid
from emulation.poll import wait_until
from emulation.scale import Scale
from topologies import ocs_star


def test_masks_are_the_kernels_bitmaps_and_open_vswitch_takes_the_lowest_core():
    assert steering.rps_mask({1}) == "2" and steering.rps_mask({1, 2, 3}) == "e"
    assert steering.rps_mask({0, 33}) == "2,00000001" and steering.rps_mask({32}) == "1,00000000"
    assert steering.split({0, 1}) == (0, {1}) and steering.split({2, 5, 7}) == (2, {5, 7})
    with pytest.raises(steering.SteeringError, match="two cores"):
        steering.split({3})
    assert not steering.can_steer(cores=1) and steering.can_steer(cores=2)


def test_pinning_takes_every_thread_and_a_core_that_does_not_exist_is_one_line():
    code = "import threading, time\nfor _ in range(3): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\ntime.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", code])
    try:
        assert wait_until(lambda: len(steering.threads(p.pid)) == 4, 10.0, lambda: AssertionError("no threads"))
        first = min(os.sched_getaffinity(0))
        steering.pin(p.pid, [first])
        assert {tuple(os.sched_getaffinity(t)) for t in steering.threads(p.pid)} == {(first,)}
        with pytest.raises(steering.SteeringError, match=r"thread \d+: cores \[4095\]"):
            steering.pin(p.pid, [4095])
    finally:
        p.kill()
        p.wait()
    assert steering.threads(p.pid) == []


def test_by_default_fabrics_of_seventeen_gpus_or_more_are_steered_where_open_vswitch_forwards_in_userspace():
    assert steering.steer_by_default(17, kernel_datapath=False, cores=2)
    assert not steering.steer_by_default(16, kernel_datapath=False, cores=2)
    assert not steering.steer_by_default(64, kernel_datapath=True, cores=2)
    assert not steering.steer_by_default(64, kernel_datapath=False, cores=1)


def test_the_datapath_is_one_value_and_an_unknown_one_is_refused_before_anything_starts(run_dir):
    with pytest.raises(EmulationError, match="datapath: 'xdp' is not one of packet, pmd, steer"):
        EmulatedFabric(ocs_star(4, 2, 400.0, 0.0, "ring"), run_dir / "emulation", link_mbps=10.0, datapath="xdp")
    assert not (run_dir / "emulation").exists()
    assert Datapath("steer").name(kernel=False) == "steer" and Datapath().name(kernel=True) == "kernel"
    assert Datapath("pmd", on_servers=True).mode == "packet"
    with pytest.raises(ValueError, match="datapath: steer only on one machine"):
        Datapath("steer", on_servers=True)


def _cores(pid: int) -> dict[int, list[int]]:
    return {tid: sorted(os.sched_getaffinity(tid)) for tid in steering.threads(pid)}


@pytest.mark.emulation
def test_a_steered_fabric_pins_open_vswitch_steers_the_gpus_receive_and_gives_the_cores_back(run_dir):
    if not steering.can_steer():
        pytest.skip("one core: nothing to steer to")
    pid = ovs_vswitchd_pid()
    before = _cores(pid)
    ovs_core, receive = steering.split()
    f = ocs_star(4, 2, 400.0, 0.0, "ring")
    with EmulatedFabric(f, run_dir / "emulation", link_mbps=10.0, datapath="steer") as emu:
        assert emu.datapath == "steer"
        assert set(map(tuple, _cores(pid).values())) == {(ovs_core,)}
        assert registry.entries()[0].ovs_affinity == [pid, before[pid]]
        for host in emu.net.hosts:
            assert steering.rps_of(host) == {f"{host.name}-eth0": steering.rps_mask(receive)}
        assert emu.net.pingAll(timeout=2) == 0.0
        # every link saturated at once still runs at the link rate
        head = measure_headroom(emu, Scale(10.0, 0.1, f.port_gbps), run_dir / "probe", 1.0)
        print("probe efficiency", head["efficiency"])
        assert head["efficiency"] >= PROBE_PASS
    after = _cores(pid)
    assert after[pid] == before[pid] and all(after[t] == before[t] for t in after if t in before)


@pytest.mark.emulation
def test_a_fabric_of_sixteen_gpus_or_fewer_is_not_steered_unless_asked(run_dir):
    pid = ovs_vswitchd_pid()
    before = _cores(pid)
    with EmulatedFabric(ocs_star(4, 2, 400.0, 0.0, "ring"), run_dir / "emulation", link_mbps=10.0) as emu:
        now = _cores(pid)  # ovs-vswitchd starts and ends handler threads: those of both moments compared
        assert emu.datapath != "steer" and all(now[t] == before[t] for t in now if t in before)
        assert registry.entries()[0].ovs_affinity == []


@pytest.mark.emulation
def test_ocslab_clean_gives_a_killed_runs_process_its_cores_back(run_dir):
    """The record of a run that died this boot names a process it pinned: ``clean`` unpins it.
    A process of our own stands for ovs-vswitchd, so that the machine's is not touched."""
    if not steering.can_steer():
        pytest.skip("one core: nothing to pin")
    cores = sorted(os.sched_getaffinity(0))
    stand_in = subprocess.Popen(["sleep", "60"])
    try:
        steering.pin(stand_in.pid, [cores[0]])
        assert os.sched_getaffinity(stand_in.pid) == {cores[0]}
        registry.REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
        rec = registry.REGISTRY_DIR / "1-killed-steered.json"
        e = registry.Entry(run_id="1-killed-steered", pid=1, start=-1, argv=["ocslab", "run"],
                           run_dir=str(run_dir / "killed"), started_at=time.time() - 60, boot=registry.boot_id(),
                           ovs_affinity=[stand_in.pid, cores])
        rec.write_text(json.dumps(e.__dict__))
        done = registry.clean()
        print(done)
        assert f"ovs-vswitchd (pid {stand_in.pid}) back on cores {cores}" in done
        assert sorted(os.sched_getaffinity(stand_in.pid)) == cores and not rec.exists()
    finally:
        stand_in.kill()
        stand_in.wait()
