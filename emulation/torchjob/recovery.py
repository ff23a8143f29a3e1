"""The job supervisor of a LUMION run: train, fail a GPU, let the controller recover, resume.

One run of :func:`run_recovery` on a fresh :class:`~emulation.emulator.net.EmulatedFabric`:

1. the controller's failover app is armed with the recovery mode, the job's placement and the
   spares (it precomputes every answer, ``controllers/failover.py``);
2. launch 0 of :mod:`emulation.torchjob.train` starts on the working GPUs;
3. rank 0 logs step ``failure.at_step`` and pauses (``--pause-after``: the failure point does not
   depend on how fast the supervisor notices); GPU k fails: every fabric port of its NIC and its
   host interface go down (``ip link set ... down``) and its rank is SIGKILLed; rank 0 goes on;
4. the controller detects the failure by port status, installs the precomputed configuration
   and logs ``failover`` with the new placement; when ``gpu-failed`` appears the supervisor
   ends the surviving ranks (they would wait for their dead neighbour until gloo's timeout),
   as torchrun's elastic agent restarts a whole group;
5. launch 1 starts on the new placement (rank map rewritten: rank r on ``placement[r]``), with
   a new rendezvous port; it resumes from the last checkpoint and trains to the end. With a
   warm restart (default) launch 1 is made of standby processes started, torch imported, on
   every GPU before launch 0: the relaunch assigns them their ranks
   (:class:`~emulation.torchjob.launch.TorchJob` ``standby``), so it costs the rendezvous and
   not the seconds of starting Python and torch.

Evidence that nothing reached the failed GPU after the rewrite: the packet counters
(``ovs-ofctl dump-ports``) of the switch ports facing it -- the OCS's output (patch) ports to
its NIC and the electrical switch's port -- read when the failure is injected, when the
supervisor sees the ``failover`` event, and at the end; and the OCS's flow table at the end
(no rule outputs to those ports).

Spec: ``docs/mechanisms.md`` (LUMION, arXiv 2505.23105).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

from emulation import dataplane as dpn
from emulation.emulator.controller_client import ControllerError
from emulation.emulator.net import FAST_RTO_MIN_MS, EmulationError
from emulation.emulator.session import PacketSession
from emulation.fabric import Fabric
from emulation.poll import wait_until
from emulation.torchjob.launch import MASTER_PORT, TorchJob, tune_tcp

_PORT_LINE = re.compile(r"port\s+(\d+):\s+rx pkts=(\d+).*?tx pkts=(\d+)", re.S)


def port_counters(bridge: str) -> dict[int, tuple[int, int]]:
    """``{OpenFlow port: (rx packets, tx packets)}`` of ``bridge`` (``ovs-ofctl dump-ports``)."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", bridge], capture_output=True,
                         text=True, timeout=30).stdout
    return {int(p): (int(rx), int(tx)) for p, rx, tx in _PORT_LINE.findall(out)}


def facing_ports(fabric: Fabric, gpu: int) -> dict[str, list[int]]:
    """Switch ports that deliver to ``gpu``: ``{bridge: [OpenFlow port]}`` -- each OCS's output
    (patch) port to the GPU's NIC, and each electrical switch's port cabled to it."""
    out: dict[str, list[int]] = {}
    for k, ocs in enumerate(fabric.ocs):
        ports = [dpn.ocs_out_port(m) for m, ref in enumerate(ocs.ports, start=1) if ref.gpu == gpu]
        if ports:
            out[dpn.ocs_name(k)] = ports
    for k, eps in enumerate(fabric.eps):
        ports = [m for m, ref in enumerate(eps.ports, start=1) if ref.gpu == gpu]
        if ports:
            out[dpn.eps_name(k)] = ports
    return out


def delivered_packets(fabric: Fabric, gpu: int) -> int:
    """Packets the switches have sent toward ``gpu`` so far (tx of :func:`facing_ports`)."""
    total = 0
    for bridge, ports in facing_ports(fabric, gpu).items():
        counters = port_counters(bridge)
        total += sum(counters.get(p, (0, 0))[1] for p in ports)
    return total


def rules_to(fabric: Fabric, gpu: int) -> list[str]:
    """Flow rules of the OCS bridges that output to a port facing ``gpu``."""
    found = []
    for bridge, ports in facing_ports(fabric, gpu).items():
        if dpn.node_kind(bridge) != "o":
            continue
        flows = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge], capture_output=True,
                               text=True, timeout=30).stdout
        found += [f"{bridge}: {line.strip()}" for line in flows.splitlines()
                  if any(re.search(rf"output:{p}\b", line) for p in ports)]
    return found


def fail_gpu(emu: EmulatedFabric, gpu: int) -> None:
    """Take GPU ``gpu`` down: every fabric port of its NIC bridge and its host interface."""
    for j in range(emu.fabric.ports_per_gpu):
        subprocess.run(["ip", "link", "set", f"{dpn.nic_name(gpu)}-eth{dpn.nic_port(j)}", "down"],
                       capture_output=True, timeout=10)
    emu.host(gpu).cmd(f"ip link set {dpn.host_name(gpu)}-eth0 down")


def _release(fifo: Path) -> None:
    """Let rank 0 go on after its pause (nothing to do if it is gone: it ran on the failed GPU)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader
        return
    try:
        os.write(fd, b"go\n")
    finally:
        os.close(fd)


def _read_steps(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # a line being written
            break
    return rows


def run_recovery(fabric: Fabric, job: dict, placement: list[int], spares: list[int], mode: str, failed_gpu: int,
                 at_step: int, spec, reconfiguration_delay_s: float, out: Path, timeout_s: float,
                 restart: str = "warm") -> dict:
    """Run the training job, fail ``failed_gpu`` once step ``at_step`` is logged, recover by
    ``mode`` (module doc).

    :param fabric: the rack (:func:`topologies.builders.rack`) holding the job's ring.
    :param job: the job as JSON (:class:`emulation.torchjob.recoveries.JobSpec`).
    :param spec: the scenario's ``emulation:`` section, made into a packet session
        (:class:`~emulation.emulator.session.PacketSession`, byte scale 1: the job sends real bytes).
    :param placement: GPU of every rank at launch; ``spares``: the spare GPUs, preferred first.
    :param reconfiguration_delay_s: emulated dark window of the recovery's reconfiguration, seconds.
    :param timeout_s: wall-clock bound of each launch.
    :param restart: ``warm``: a standby process waits, torch imported, on every GPU of the rack
        from the start (before launch 0, so it does not disturb the measured steps), and the
        relaunch assigns ranks to the standbys of the new placement; ``cold``: the relaunch
        starts new processes.
    :returns: ``{"mode", "placement": [before, after], "events": {...}, "launches": [[rank
        records], ...], "steps": [...], "evidence": {...}, "packet": {...}}`` with CLOCK_MONOTONIC
        times (module doc); ``packet`` the session's record (capabilities, datapath, headroom).
    :raises EmulationError: the emulation, a rank or the recovery failed, or the job ended
        before step ``at_step``.
    """
    out.mkdir(parents=True, exist_ok=True)
    job_file = out / "job.json"
    job_file.write_text(json.dumps(job))
    steps_file = out / "steps.jsonl"
    args = ["--job", str(job_file.resolve()), "--dir", str(out.resolve())]
    with PacketSession(fabric, out, spec, byte_scale=1.0) as session:
        emu = session.emu
        emu.client.arm_failover(mode, placement, spares, reconfiguration_delay_s)
        seq = len(emu.client.events())
        tune_tcp(emu, list(range(fabric.gpus)))
        emu.set_rto_min(FAST_RTO_MIN_MS)
        standby = first = None
        try:
            if restart == "warm":
                standby = TorchJob(emu, "emulation.torchjob.train", args, out / "launch-1",
                                   list(range(fabric.gpus)), standby=out / "standby")
                wait_until(standby.ready, timeout_s, lambda: EmulationError(
                    f"the standbys were not ready within {timeout_s:g} s (logs in {out}/launch-1)"))
            pause = out / "pause.fifo"  # rank 0 waits on it after step at_step (exact failure point)
            if pause.exists():
                pause.unlink()
            os.mkfifo(pause)
            first = TorchJob(emu, "emulation.torchjob.train", args + ["--launch", "0", "--pause-after", str(at_step),
                                                                     "--pause-fifo", str(pause.resolve())],
                             out / "launch-0", placement)
            def reached() -> bool:
                if any(r.get("step", -1) >= at_step for r in _read_steps(steps_file)):
                    return True
                if first.done():
                    raise EmulationError(f"failure.at_step: the job ended before step {at_step} (logs in {out}/launch-0)")
                return False

            wait_until(reached, timeout_s, lambda: EmulationError(
                f"step {at_step} not reached within {timeout_s:g} s (logs in {out}/launch-0)"), interval_s=0.002)
            before = delivered_packets(fabric, failed_gpu)
            t_fail = time.monotonic()
            fail_gpu(emu, failed_gpu)
            first.kill([failed_gpu])
            _release(pause)
            if standby is not None:
                standby.kill([failed_gpu])
            events: dict[str, dict] = {"failure": {"t": t_fail, "gpu": failed_gpu}}
            cursor = [seq]

            def recovered() -> bool:
                for ev in emu.client.events(cursor[0]):
                    cursor[0] = ev["seq"] + 1
                    if ev["kind"] in ("gpu-failed", "failover") and ev.get("gpu", ev.get("failed_gpu")) == failed_gpu:
                        events[ev["kind"]] = ev
                    elif ev["kind"] == "failover-failed":
                        raise EmulationError(f"the controller could not recover: {ev['error']}")
                if "gpu-failed" in events:
                    first.kill()  # survivors would block on their dead neighbour
                return "failover" in events

            wait_until(recovered, 60, lambda: EmulationError(
                f"the controller did not recover GPU {failed_gpu} within 60 s (see {out}/emulation/controller.log)"),
                interval_s=0.01)
            at_rewrite = delivered_packets(fabric, failed_gpu)
            first.kill()
            new = events["failover"]["placement"]
            if standby is not None:
                second, t_restart = standby, standby.assign(new, MASTER_PORT + 1, 1)
            else:
                t_restart = time.monotonic()
                second = TorchJob(emu, "emulation.torchjob.train", args + ["--launch", "1"], out / "launch-1", new,
                                  master_port=MASTER_PORT + 1)
            events["restart"] = {"t": t_restart, "placement": new, "restart": restart}
            try:
                second.wait(timeout_s)
            finally:
                second.kill()
        finally:
            for j in (first, standby):
                if j is not None:
                    j.kill()
            emu.set_rto_min(None)
            try:
                emu.client.disarm_failover()  # tearing the links down reports every port down
            except ControllerError:
                pass  # the controller is gone: nothing left to disarm (the original error stands)
        at_end = delivered_packets(fabric, failed_gpu)
        rules = rules_to(fabric, failed_gpu)
    launches = []
    for launch in (0, 1):
        d = out / f"launch-{launch}"
        launches.append(sorted((json.loads(p.read_text()) for p in d.glob("rank-*.json")), key=lambda r: r["rank"]))
    return {
        "mode": mode,
        "failed_gpu": failed_gpu,
        "placement": [placement, new],
        "spares": spares,
        "events": events,
        "launches": launches,
        "steps": _read_steps(steps_file),
        "evidence": {
            "facing_ports": facing_ports(fabric, failed_gpu),
            "packets_to_failed_gpu": {"before_failure": before, "at_rewrite_seen": at_rewrite, "at_end": at_end,
                                      "between_failure_and_rewrite": at_rewrite - before,
                                      "after_rewrite": at_end - at_rewrite},
            "ocs_rules_to_failed_gpu": rules,
        },
        "packet": session.meta,
    }
