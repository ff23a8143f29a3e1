"""``ocslab doctor``: what this machine, or each named lab server, can emulate with real
packets, and every problem in one line with its fix.

A lab-VM user (a machine whose kernel datapath these CI machines cannot test) runs it first.
It reports

- the facts the packet backend depends on: root, cores, memory, the Open vSwitch version and
  whether its daemon answers, the datapaths it offers (the kernel module, AF_XDP ports for the
  PMD thread, userspace TSO), HTB and netem, time namespaces, OS-Ken and Ryu, Mininet, iperf
  and tshark (:func:`machine_findings`; a lab server's over ssh: :func:`server_findings`);
- a short calibration (:func:`capacity`): the headroom probe of
  :mod:`emulation.emulator.calibration` on a 16-GPU, two-port OCS star, from 10 Mbit/s per link
  down until a rate reaches the target, and from the link load the machine forwarded there, the
  GPU count it runs at a few link rates (:func:`emulation.emulator.limits.gpus_per_machine`,
  bounded by memory). The calibration is a measurement of this machine, not a fitted figure.

A finding marked ``blocking`` stops every packet run (no root, no Open vSwitch, no HTB); others
only narrow what can be emulated (no netem: no link delay; no Ryu: OS-Ken only).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from emulation import dataplane as dpn
from emulation.emulator import limits
from emulation.machine import available_memory

#: The rates (Mbit/s per link) the capacity is given at.
RATES_MBPS = (2.5, 5.0, 10.0, 20.0)
#: The calibration's fabric: GPUs x ports of an OCS star (32 directed links at 10 Mbit/s offer
#: twice the 160 Mbit/s a 2-core machine forwards, so the probe finds the ceiling, not a floor).
PROBE_GPUS, PROBE_PORTS = 16, 2
#: Probes between the fastest rate that passed and the slowest that missed, each at their middle.
BISECT_PROBES = 2
#: Open vSwitch's userspace datapath segments TCP for packet-socket ports from this version on.
TSO_SINCE = (2, 14)


@dataclass(frozen=True)
class Finding:
    """One line of the report: ``topic`` (``cores``, ``netem``...), what was ``found``, and for
    a problem its one-line ``fix``; ``blocking``: no packet run can start without it."""

    topic: str
    found: str
    fix: str | None = None
    blocking: bool = False

    def line(self) -> str:
        """``topic: found`` and, for a problem, `` -> fix``."""
        return f"{self.topic}: {self.found}" + (f" -> {self.fix}" if self.fix else "")


def _out(cmd: list[str], timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def ovs_version_tuple(text: str) -> tuple[int, ...] | None:
    """``(3, 1, 0)`` from ``ovs-vsctl --version``'s first line (None when it names no version)."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


def machine_findings() -> list[Finding]:
    """The packet backend's prerequisites on this machine (module doc), one :class:`Finding`
    each. Probes run in a throw-away network namespace (:mod:`emulation.emulator.capabilities`);
    nothing else is changed. Raises nothing."""
    from emulation.emulator import capabilities
    from emulation.emulator.net import ryu_unavailable

    root = os.geteuid() == 0
    cores = len(os.sched_getaffinity(0))
    out = [Finding("root", "yes" if root else "no", None if root else "run as root (sudo ocslab doctor)",
                   blocking=not root)]
    out.append(Finding("cores", f"{cores} (Open vSwitch forwards about "
                                f"{limits.switching_mbps_per_core() * cores:.0f} Mbit/s of link load at MTU {dpn.MTU})",
                       None if cores >= 2 else "the PMD thread and steering need 2 cores; a VM with 2 or more"))
    out.append(Finding("memory", f"{available_memory() >> 20} MiB available "
                                 f"({available_memory() // limits.MEMORY_PER_GPU_BYTES} GPUs at "
                                 f"{limits.MEMORY_PER_GPU_BYTES >> 20} MiB each)"))
    caps = capabilities.detect()
    if caps.ovs_version == "absent":
        out.append(Finding("Open vSwitch", "not installed", "make setup (installs openvswitch-switch)",
                           blocking=True))
    else:
        running = _out(["ovs-vsctl", "--timeout=5", "show"]).returncode == 0
        out.append(Finding("Open vSwitch", f"{caps.ovs_version.split()[-1]}, "
                                           f"{'answering' if running else 'not running'}",
                           None if running else "make setup (starts ovsdb-server and ovs-vswitchd)",
                           blocking=not running))
    out.append(Finding("kernel datapath", "yes (the openvswitch module)" if caps.ovs_kernel_datapath else
                       "no: Open vSwitch forwards in userspace (the netdev datapath), on the CPU"))
    out.append(Finding("PMD thread (AF_XDP)", "yes" if caps.afxdp else "no"))
    version = ovs_version_tuple(caps.ovs_version)
    tso = "" if version is None else _out(["ovs-vsctl", "--timeout=5", "--if-exists", "get", "Open_vSwitch", ".",
                                           "other_config:userspace-tso-enable"]).stdout.strip().strip('"')
    out.append(Finding("userspace TSO", "no Open vSwitch" if version is None else
                       ("available" if version >= TSO_SINCE else "not in this version")
                       + f" (other_config:userspace-tso-enable={tso or 'unset'}); no ocslab datapath uses it yet"))
    out.append(Finding("HTB", "yes" if caps.htb else "no", None if caps.htb else
                       "the kernel's sch_htb module (linux-modules-extra on Ubuntu)", blocking=not caps.htb))
    out.append(Finding("netem", "yes" if caps.netem else "no (links have no propagation delay)",
                       None if caps.netem else "the kernel's sch_netem module, for scenarios with a per-hop delay"))
    out.append(Finding("time namespaces", "yes" if os.path.exists("/proc/self/ns/time") else "no"))
    osken = importlib.util.find_spec("os_ken") is not None
    out.append(Finding("OS-Ken", "yes" if osken else "no", None if osken else "make setup", blocking=not osken))
    ryu = ryu_unavailable()
    out.append(Finding("Ryu", "yes" if ryu is None else "no", ryu))
    mn = caps.mininet_version
    out.append(Finding("Mininet", mn, "make setup" if mn == "absent" else None, blocking=mn == "absent"))
    for tool, why in (("iperf", "ocslab up's iperf"), ("tshark", "ocslab pcap's cross-check")):
        there = shutil.which(tool) is not None
        out.append(Finding(tool, "yes" if there else "no", None if there else f"apt install {tool} ({why})"))
    return out


def server_findings(name: str) -> list[Finding]:
    """A lab server's prerequisites (``ocslab servers up``), read over ssh: it answers, its
    cores and memory, its Open vSwitch and whether the daemon answers. Raises nothing: an
    unreachable server is one blocking finding."""
    from emulation.emulator import server_lab
    from emulation.emulator.sites import Site

    site = Site(name, server_lab.ssh_config())
    try:
        r = site.run(["sh", "-c", "nproc; grep MemAvailable /proc/meminfo; ovs-vsctl --version | head -1"], 20)
        if r.returncode:
            return [Finding(f"{name}", "does not answer over ssh",
                            f"ocslab servers up {name} ({(r.stderr or r.stdout).strip()[-120:]})", blocking=True)]
        nproc, mem, ovs = (r.stdout.splitlines() + ["", "", ""])[:3]
        answers = site.switch_answers()
        return [Finding(f"{name} cores", nproc.strip()),
                Finding(f"{name} memory", f"{int(mem.split()[1]) >> 10} MiB available" if mem else "unknown"),
                Finding(f"{name} Open vSwitch", f"{ovs.split()[-1] if ovs else 'absent'}, "
                                                f"{'answering' if answers else 'not answering'}",
                        None if answers else f"ocslab servers down; ocslab servers up {name}", blocking=not answers)]
    finally:
        site.close()


def capacity(out: Path) -> dict:
    """Calibrate a :data:`PROBE_GPUS` x :data:`PROBE_PORTS` OCS star (module doc) with the
    packet session's ``auto`` policy (logs under ``out/emulation``), which halves the rate until
    one passes, then probe up to :data:`BISECT_PROBES` rates between the fastest that passed and
    the slowest that missed; give :func:`capacity_of` every probe.

    :raises emulation.emulator.calibration.CalibrationError: no rate reaches the target.
    :raises emulation.emulator.net.EmulationError: the fabric could not be brought up.
    """
    from emulation.emulator.session import PacketSession
    from emulation.scenario.schema import EmulationSpec
    from topologies import ocs_star

    from emulation.emulator.calibration import measure_headroom
    from emulation.scale import Scale

    fabric = ocs_star(PROBE_GPUS, PROBE_PORTS, 400, 10e-6, "ring")
    with PacketSession(fabric, out, EmulationSpec(link_mbps="auto")) as session:
        cal = dict(session.meta["calibration"])
        probes, target = list(cal["probes"]), cal["target"]
        for _ in range(BISECT_PROBES):  # the session halves the rate; narrow the ceiling down
            lo = max(p["link_mbps"] for p in probes if p["efficiency"] >= target)
            hi = min((p["link_mbps"] for p in probes if p["efficiency"] < target and p["link_mbps"] > lo), default=None)
            if hi is None or hi < 1.2 * lo:
                break
            rate = round((lo + hi) / 2, 3)
            session.emu.set_link_mbps(rate)
            probes.append(measure_headroom(session.emu, Scale(rate, session.scale.byte_scale, fabric.port_gbps),
                                           out / "emulation" / "doctor" / f"probe-{rate:g}mbps"))
        return capacity_of({**cal, "probes": probes}, available_memory())


def capacity_of(calibration: dict, memory: int) -> dict:
    """GPU counts from a calibration of the probe fabric (``{"target", "probes": [{"link_mbps",
    "efficiency"}, ...]}``, :meth:`~emulation.emulator.calibration.Calibration.to_json`) on a
    machine with ``memory`` bytes available: the highest rate that reached the target, the link
    load offered there, which the machine forwarded faithfully (every link saturated at once,
    :func:`~emulation.emulator.limits.carried_mbps` at efficiency 1, as
    :func:`~emulation.emulator.limits.packet_gpu_limit` counts), and per rate of
    :data:`RATES_MBPS` the GPUs with :data:`PROBE_PORTS` ports that load gives
    (:func:`~emulation.emulator.limits.gpus_per_machine`), or fewer where memory binds.

    :returns: ``{"probes", "target", "rate_mbps" (the passing probe's), "faithful_mbps", "ports", "ceiling" (a faster rate was probed and
        missed: the load is the machine's ceiling, not a floor), "gpus": {rate: n},
        "bound": {rate: "CPU" or "memory"}}``.
    :raises ValueError: no probe reached the target.
    """
    passed = [p for p in calibration["probes"] if p["efficiency"] >= calibration["target"]]
    if not passed:
        raise ValueError("no probe reached the target")
    best = max(passed, key=lambda p: p["link_mbps"])
    faithful = limits.carried_mbps(PROBE_GPUS, PROBE_PORTS, best["link_mbps"], 1.0)
    by_memory = memory // limits.MEMORY_PER_GPU_BYTES
    gpus, bound = {}, {}
    for rate in RATES_MBPS:
        by_cpu = limits.gpus_per_machine(faithful, rate, PROBE_PORTS, efficiency=1.0)
        gpus[rate], bound[rate] = (by_cpu, "CPU") if by_cpu <= by_memory else (by_memory, "memory")
    return {"probes": calibration["probes"], "target": calibration["target"], "rate_mbps": best["link_mbps"],
            "faithful_mbps": faithful, "ports": PROBE_PORTS,
            "ceiling": any(p["link_mbps"] > best["link_mbps"] for p in calibration["probes"]),
            "gpus": gpus, "bound": bound}
