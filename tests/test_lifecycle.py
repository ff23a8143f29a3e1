"""Life cycle of emulations: sizes beyond 8 GPUs start, nothing of ours is left behind (census
before and after), a SIGKILLed run's leftovers are named by the next run and removed by
``ocslab clean``, a second emulation at once is refused naming the first.

Real Open vSwitch, controller and Mininet hosts (root; see conftest.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from emulation.emulator import census
from emulation.emulator.session import PacketSession
from emulation.emulator.net import EmulatedFabric, EmulationError, MachineBusy
from emulation.emulator.orchestrator import run_workload
from emulation.flowsim import simulate
from emulation.planners import make_plan
from emulation.scale import Scale
from emulation.scenario.schema import EmulationSpec
from emulation.workloads import build
from topologies import ocs_star
from emulation_probes import agents_running

pytestmark = pytest.mark.emulation
ROOT = Path(__file__).resolve().parents[1]


def _ocslab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "emulation.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_sixteen_gpu_ring_runs_on_packets_like_the_flow_model(run_dir):
    n, size, alpha = 16, 4 << 20, 5e-6
    f = ocs_star(n, 2, 400, 0.0, "ring")
    w = build("ring", n, size)
    plan = make_plan("none", f, w)
    with PacketSession(f, run_dir, EmulationSpec(byte_scale=0.1)) as session:  # calibrated
        emu, scale = session.emu, session.scale
        pkt = run_workload(emu, "ring", w, plan, scale, alpha, run_dir / "ring")
    flow = simulate(f, w, plan, alpha_s=alpha)
    err = (pkt.time_s - flow.time_s) / flow.time_s
    print(f"16-GPU ring at {scale.link_mbps:g} Mbit/s: packet {pkt.time_s * 1e3:.4f} ms, flow "
          f"{flow.time_s * 1e3:.4f} ms, error {err:+.2%}")
    assert pkt.bytes_delivered == pkt.bytes_sent == w.bytes_sent
    assert len(pkt.steps) == 2 * (n - 1)
    assert abs(err) < 0.12, (pkt.time_s, flow.time_s)  # measured +2.9..+5.2% (4 runs, 2026-11)


def test_thirty_two_gpus_start_and_tear_down_leaving_nothing(run_dir):
    f = ocs_star(32, 2, 400, 0.0, "ring")
    before = census.take()
    t0 = time.monotonic()
    with EmulatedFabric(f, run_dir, link_mbps=10.0) as emu:
        started = time.monotonic() - t0
        assert len(emu.net.hosts) == 32 and len(emu.net.switches) == 33
        out = emu.host(0).cmd("ping -c 1 -W 2 10.0.0.17")  # GPU 0 -> GPU 16: across the OCS
        assert " 0% packet loss" in out, out
        t1 = time.monotonic()
    stopped = time.monotonic() - t1
    print(f"32 GPUs: started in {started:.1f} s, torn down in {stopped:.1f} s")
    assert census.take().diff(before) == {}


def test_fifteen_emulations_in_one_process_leave_nothing_behind(run_dir):
    """Fifteen fabrics built and torn down in one process leave the census (bridges, namespaces,
    processes, descriptors, qdiscs, files) as it was: a leak of one thing per emulation shows as
    15, and one every few emulations still shows (a hundred took 200 s of CI's 25 minutes,
    thirty 55 s)."""
    f = ocs_star(2, 2, 400, 0.0, "ring")
    for i in range(2):  # warm-up: modules, first bridges, caches
        with EmulatedFabric(f, run_dir / f"warm{i}", link_mbps=10.0):
            pass
    before = census.take()
    t0 = time.monotonic()
    for i in range(15):
        with EmulatedFabric(f, run_dir / f"e{i}", link_mbps=10.0) as emu:
            assert emu.client.alive()
    print(f"15 emulations: {(time.monotonic() - t0) / 15:.2f} s each; census {before.sizes()}")
    assert census.take().diff(before) == {}


def _write_long_scenario(path: Path) -> None:
    path.write_text("""
name: long
fabric: {topology: ocs-star, gpus: 4, ports_per_gpu: 2, port_gbps: 400, initial: ring}
sizes: [256MiB]
runs: [{name: ring, algorithm: ring}]
emulation: {link_mbps: 10, byte_scale: 0.1, headroom: skip}
""")


def _wait_for_agents(p: subprocess.Popen, out: Path) -> None:
    """Until the run in ``out`` has its agents moving data (then 1 s more)."""
    log = out / "emulation" / "ring-256MiB" / "agent-g3.log"
    deadline = time.monotonic() + 90
    while not (log.exists() and agents_running()):
        assert p.poll() is None, "the run ended before its agents started"
        assert time.monotonic() < deadline, "the run did not reach its agents"
        time.sleep(0.1)
    time.sleep(1.0)


def test_an_interrupted_run_leaves_nothing_behind(run_dir):
    scen = run_dir / "long.yaml"
    _write_long_scenario(scen)
    out = run_dir / "out"
    before = census.take()
    # Ctrl-C's SIGINT must reach the run even if this test runs as a background job of a script
    # (which starts with SIGINT ignored, and so would the run).
    p = subprocess.Popen([sys.executable, "-m", "emulation.cli", "run", str(scen), "--out", str(out)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _wait_for_agents(p, out)
    p.send_signal(signal.SIGINT)
    text, _ = p.communicate(timeout=120)
    assert p.returncode == 130, text
    # no process, bridge, port, interface, namespace, qdisc or temporary file of the run survives
    assert census.take().diff(before) == {}


@pytest.mark.parametrize("victim", ["runner", "process group"])
def test_a_sigkilled_run_is_named_by_the_next_and_removed_by_ocslab_clean(run_dir, victim):
    scen = run_dir / "long.yaml"
    _write_long_scenario(scen)
    before = census.take()
    out = run_dir / "out"
    p = subprocess.Popen([sys.executable, "-m", "emulation.cli", "run", str(scen), "--out", str(out)],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    _wait_for_agents(p, out)
    if victim == "runner":
        os.kill(p.pid, signal.SIGKILL)
    else:
        os.killpg(p.pid, signal.SIGKILL)  # the runner and everything in its process group
    p.wait(10)
    left = census.take().diff(before)
    assert "bridges" in left and "interfaces" in left, left  # SIGKILL gives no chance to tear down

    again = _ocslab("run", str(scen), "--out", str(run_dir / "again"))
    print("next run:", again.stderr.strip())
    assert again.returncode == 2 and "ocslab clean" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    assert not (run_dir / "again").exists()

    cleaned = _ocslab("clean")
    print(cleaned.stdout)
    assert cleaned.returncode == 0, cleaned.stderr
    assert "removed bridge ocl-o0" in cleaned.stdout and "removed run record" in cleaned.stdout
    assert census.take().diff(before) == {}
    assert _ocslab("clean").stdout.strip() == "clean: nothing of ocslab's was left behind"


def test_a_record_from_an_earlier_boot_is_dropped_but_one_from_this_boot_is_refused(run_dir):
    """/run survives reboots on these machines: a record whose holder died with an earlier boot
    left nothing that can still exist but bridges, so the next run drops it; a dead holder of this
    boot may have left state behind and is refused as before."""
    from emulation.emulator import registry
    from emulation.emulator.net import claim_machine

    def record(run_id: str, boot: str) -> Path:
        p = registry.REGISTRY_DIR / f"{run_id}.json"
        registry.REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
        e = registry.Entry(run_id=run_id, pid=1, start=-1, argv=["ocslab", "run"], run_dir=str(run_dir / run_id),
                           started_at=time.time() - 3600, boot=boot)
        p.write_text(json.dumps(e.__dict__))
        return p

    old = record("1-earlier-boot", "00000000-0000-0000-0000-000000000000")
    claim_machine(run_dir).release()
    assert not old.exists()

    same = record("1-this-boot", registry.boot_id())
    try:
        with pytest.raises(MachineBusy, match="ocslab clean"):
            claim_machine(run_dir)
        assert same.exists()
    finally:
        same.unlink(missing_ok=True)


def test_a_second_emulation_at_once_is_refused_naming_the_first(run_dir):
    scen = run_dir / "long.yaml"
    _write_long_scenario(scen)
    f = ocs_star(2, 2, 400, 0.0, "ring")
    with EmulatedFabric(f, run_dir / "first", link_mbps=10.0):
        with pytest.raises(MachineBusy, match=f"pid {os.getpid()}"):
            EmulatedFabric(f, run_dir / "second", link_mbps=10.0).__enter__()
        r = _ocslab("run", str(scen), "--out", str(run_dir / "second"))
        assert r.returncode == 2 and f"pid {os.getpid()}" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and not (run_dir / "second").exists()
        c = _ocslab("clean")
        assert c.returncode == 2 and "nothing removed" in c.stderr, c.stderr


def _ring_in_a_thread(emu: EmulatedFabric, run_dir: Path, caught: dict, **kw) -> threading.Thread:
    """A long 4-GPU Ring (256 MiB at 10 Mbit/s) run in a thread, returned once its agents have
    moved data for 1 s; an :class:`EmulationError` lands in ``caught`` with the time it was raised."""
    f = emu.fabric
    w = build("ring", f.gpus, 256 << 20)

    def run() -> None:
        try:
            run_workload(emu, "ring", w, make_plan("none", f, w), Scale(10.0, 0.1, 400), 5e-6, run_dir / "ring", **kw)
        except EmulationError as e:
            caught["t"], caught["error"] = time.monotonic(), str(e)

    t = threading.Thread(target=run)
    t.start()
    deadline = time.monotonic() + 60
    while not ((run_dir / "ring" / "agent-g3.log").exists() and agents_running()):
        assert t.is_alive() and time.monotonic() < deadline, caught
        time.sleep(0.05)
    time.sleep(1.0)
    return t


@pytest.mark.parametrize("fault", ["controller killed", "switch daemon stopped"])
def test_a_controller_or_switch_lost_mid_run_fails_the_run_within_a_second(run_dir, fault):
    """The controller SIGKILLed, or Open vSwitch's daemon SIGSTOPped (and continued as soon as
    the run has failed: other bridges of the machine are frozen for about a second)."""
    from emulation.emulator.net import ovs_vswitchd_pid

    before = census.take()
    caught: dict = {}
    with EmulatedFabric(ocs_star(4, 2, 400, 0.0, "ring"), run_dir, link_mbps=10.0) as emu:
        t = _ring_in_a_thread(emu, run_dir, caught)
        if fault == "controller killed":
            pid = emu.controller.pid
            os.kill(pid, signal.SIGKILL)
        else:
            pid = ovs_vswitchd_pid()
            os.kill(pid, signal.SIGSTOP)
        hit = time.monotonic()
        try:
            t.join(60)
        finally:
            if fault != "controller killed":
                os.kill(pid, signal.SIGCONT)
        assert not t.is_alive()
    detection = caught["t"] - hit
    print(f"{fault}: run failed after {detection * 1e3:.0f} ms: {caught['error']}")
    expected = f"controller (pid {pid}) exited" if fault == "controller killed" else f"ovs-vswitchd (pid {pid}) is stopped"
    assert expected in caught["error"] and caught["error"].startswith("step ")
    assert detection < 1.0  # measured 94-162 ms (4 runs each, 2026-11)
    assert census.take().diff(before) == {}


def test_an_agent_that_dies_mid_step_fails_the_run_naming_it_and_keeps_what_was_measured(run_dir):
    import json

    scen = run_dir / "long.yaml"
    _write_long_scenario(scen)
    scen.write_text(scen.read_text().replace("sizes: [256MiB]", "sizes: [1MiB, 256MiB]"))
    out = run_dir / "out"
    before = census.take()
    p = subprocess.Popen([sys.executable, "-m", "emulation.cli", "run", str(scen), "--out", str(out)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_agents(p, out)
    agent_g2 = [b"emulation.emulator.agent", b"ctl.sock", b"2", b""]  # python -m emulation.emulator.agent CONTROL RANK
    victim = [pid for pid in census.descendants(p.pid)
              if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[-4:] == agent_g2]
    assert len(victim) == 1, victim
    os.kill(victim[0], signal.SIGKILL)
    _, err = p.communicate(timeout=120)
    print(err.strip())
    assert p.returncode == 1 and len(err.strip().splitlines()) == 1, err
    assert "agent of GPU 2 exited with -9" in err and "step " in err and "partial results" in err
    env = json.loads((out / "result.json").read_text())
    assert env["complete"] is False and "agent of GPU 2" in env["error"]
    assert [(r["name"], r["bytes"]) for r in env["result"]["runs"]] == [("ring", 1 << 20)]  # the finished run is kept
    assert census.take().diff(before) == {}


def test_a_step_that_exceeds_its_timeout_fails_the_run_naming_it(run_dir):
    """A circuit cut mid-step (both of GPU 0's fabric ports taken down behind the controller's
    back) stalls the step until its timeout."""
    from emulation import dataplane as dpn

    before = census.take()
    caught: dict = {}
    with EmulatedFabric(ocs_star(4, 2, 400, 0.0, "ring"), run_dir, link_mbps=10.0) as emu:
        t = _ring_in_a_thread(emu, run_dir, caught, step_timeout_s=3.0)
        for j in range(2):
            subprocess.run(["ip", "link", "set", f"{dpn.nic_name(0)}-eth{dpn.nic_port(j)}", "down"], check=True)
        t.join(60)
        assert not t.is_alive()
    print(f"step timeout 3 s: {caught['error']}")
    # GPU 0 sends nothing more, so no GPU finishes the step
    assert caught["error"].startswith("step 0: GPUs [") and "did not report 'done' within 3 s" in caught["error"]
    assert census.take().diff(before) == {}
