"""The GPUs' ports polled by a PMD thread over AF_XDP: the second core put to work.

With Open vSwitch's userspace datapath (no kernel module) every frame is received and forwarded
by ovs-vswitchd, and by default all of it runs in its one main thread: on 2 cores, one sits at
98-99% while the other is 36-40% idle, and that thread is what bounds how many GPUs a machine
emulates faithfully (docs/emulator.md). Ports of type ``afxdp`` are instead polled by a PMD
("poll mode driver") thread pinned to a core of its own (``other_config:pmd-cpu-mask``), and
receive through an XDP socket, which costs less per frame than a packet socket (measured here on
a two-namespace TCP stream through a NIC and an OCS bridge: 10-11 us of ovs-vswitchd CPU per
data frame against 16-19 us).

Which ports: the GPU's own link to its NIC (``g<i>-eth0``'s root-namespace end), where every frame
a GPU sends enters the fabric. The PMD thread receives it and forwards it through the NIC bridge
onto the fabric port's veth, whose egress queue (HTB, :mod:`emulation.emulator.shaper`) is the
emulated link. Those veths stay packet-socket ports: Open vSwitch sends on them through the
kernel's queueing layer, which a frame sent on an XDP socket would bypass. The OCS inputs stay
packet-socket ports too, so ``tcpdump`` still sees what enters the OCS (an XDP socket takes its
frames before any capture), and are polled by the main thread: the two threads, on two cores,
share the work. The headroom probe (every link saturated) reached, on this 2-core machine: 32
GPUs x 2 ports at 10 Mbit/s 94% (39% with packet sockets only), 64 GPUs at 2.5 Mbit/s 95%
(below the 90% mark before).

The PMD thread busy-polls its core while our ports exist; the mask is Open vSwitch's, so the
previous one is recorded (the run's record, :mod:`emulation.emulator.registry`) and put back at
teardown, or by ``ocslab clean`` after a SIGKILL. Jumbo frames do not fit an XDP socket's 4 KiB
frames: a fabric with an MTU above 1500 keeps packet sockets, as does the kernel datapath (the
Vagrant VMs), which needs neither.
"""

from __future__ import annotations

import os
import re
import subprocess

from emulation import dataplane as dpn
from emulation.poll import wait_until

#: The largest MTU (bytes) whose frames fit an AF_XDP frame in Open vSwitch (4 KiB buffers):
#: only the standard MTU is used.
MAX_MTU = dpn.MTU
#: Fabrics of at most this many GPUs keep packet sockets by default: they calibrate to the same
#: rate either way, and the PMD thread, busy-polling a core of two, leaves the agents and the
#: controller one core, so steps start late. Measured 2026-11-27, 3 runs each, idle machine: the
#: demo (8 GPUs) at 10 Mbit/s either way, RHD with circuits at 25 MiB +3.4 to +4.8% off the flow
#: backend with the PMD thread, +2.1 to +2.4% without; ring16 (16 GPUs) at 5 Mbit/s either way,
#: +2.9 to +3.3% with it, +2.2 to +2.6% without. Above it the PMD thread buys the rate (32 GPUs:
#: 10 Mbit/s against 2.5, docs/emulator.md).
PMD_MIN_GPUS = 17


class PmdError(RuntimeError):
    """Open vSwitch refused an AF_XDP port or the PMD thread's core (one line, with its answer)."""


def _vsctl(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["ovs-vsctl", f"--timeout={int(timeout)}", *args], capture_output=True, text=True,
                          timeout=timeout + 5)


def available(cores: int | None = None) -> bool:
    """Open vSwitch offers ``afxdp`` ports and the machine has a core to spare for the PMD thread
    (``cores``: default the CPUs this process may run on)."""
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    if cores < 2:
        return False
    r = _vsctl("get", "Open_vSwitch", ".", "iface_types", timeout=5)
    return r.returncode == 0 and "afxdp" in r.stdout.strip().strip("[]").replace('"', "").replace(",", " ").split()


def pmd_mask(cores: int | None = None) -> str:
    """The ``pmd-cpu-mask`` that pins the PMD thread to the last core this process may use, hex."""
    cpus = sorted(os.sched_getaffinity(0))
    last = cpus[-1] if cores is None else cores - 1
    return f"{1 << last:x}"


def current_mask() -> str | None:
    """Open vSwitch's ``other_config:pmd-cpu-mask`` now, or None when unset."""
    r = _vsctl("--if-exists", "get", "Open_vSwitch", ".", "other_config:pmd-cpu-mask", timeout=5)
    value = r.stdout.strip().strip('"')
    return value or None


def set_mask(mask: str | None) -> None:
    """Set (None: remove) Open vSwitch's ``pmd-cpu-mask``. Raises nothing: best effort, as at
    teardown."""
    if mask is None:
        _vsctl("remove", "Open_vSwitch", ".", "other_config", "pmd-cpu-mask", timeout=10)
    else:
        _vsctl("set", "Open_vSwitch", ".", f"other_config:pmd-cpu-mask={mask}", timeout=10)


def poll_ports(ports: list[str], timeout_s: float = 60.0) -> None:
    """Make ``ports`` (root-namespace device names of our bridges' ports) AF_XDP ports in generic
    mode, in one transaction, and wait until each has its XDP socket (``ovs-appctl dpctl/show``
    lists it with ``xdp-mode-in-use``).

    :raises PmdError: Open vSwitch refused a port, or one had no XDP socket in ``timeout_s``.
    """
    if not ports:
        return
    args: list[str] = []
    for p in ports:
        args += ["--", "set", "Interface", p, "type=afxdp", "options:xdp-mode=generic"]
    r = _vsctl(*args[1:], timeout=timeout_s)
    if r.returncode:
        raise PmdError(f"AF_XDP ports: ovs-vsctl: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    pending = set(ports)

    def ready() -> bool:
        text = subprocess.run(["ovs-appctl", "dpctl/show"], capture_output=True, text=True, timeout=10).stdout
        for port in re.findall(r"port \d+: (\S+) \(afxdp:[^)]*xdp-mode-in-use=", text):
            pending.discard(port)
        if pending:
            err = _vsctl("get", "Interface", min(pending), "error", timeout=5).stdout.strip()
            if err not in ("", "[]"):
                raise PmdError(f"AF_XDP port {min(pending)}: {err.strip(chr(34))}")
        return not pending

    wait_until(ready, timeout_s, lambda: PmdError(f"AF_XDP ports: {min(pending)} had no XDP socket in {timeout_s:g} s"),
               interval_s=0.05)


def unpoll_ports(ports: list[str]) -> None:
    """Give ``ports`` back to packet sockets (the netdev default type). Raises nothing."""
    args: list[str] = []
    for p in ports:
        args += ["--", "set", "Interface", p, 'type=""']
    if args:
        _vsctl(*args[1:], timeout=60)


def xsk_drops(ports: list[str]) -> dict[str, int]:
    """``{port: frames its XDP socket's receive ring dropped}`` (Open vSwitch's
    ``xsk_queue_*_rx_dropped`` statistics) of the AF_XDP ports among ``ports``."""
    if not ports:
        return {}
    r = _vsctl("--format=csv", "--no-headings", "--columns=name,statistics", "list", "Interface", *ports, timeout=10)
    out = {}
    for line in r.stdout.splitlines():
        name, _, stats = line.partition(",")
        name = name.strip('"')
        total = 0
        for item in stats.strip('"{}').split(","):
            key, _, value = item.strip().partition("=")
            if key.startswith("xsk_queue_") and key.endswith("_rx_dropped") and value.isdigit():
                total += int(value)
        out[name] = total
    return out
