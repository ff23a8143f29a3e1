"""Detect what this machine's kernel and Open vSwitch can emulate, without touching anything
that is not ours (probes run in a network namespace made for the purpose and removed after).

Spec: ``docs/architecture.md``, machines (no OVS kernel module, no netem on the CI machines; Vagrant VMs have
both), ``docs/architecture.md`` (capabilities are detected, used and recorded).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import asdict, dataclass

from emulation.emulator import pmd


@dataclass(frozen=True)
class Capabilities:
    """What the emulator can use here.

    :param ovs_kernel_datapath: the ``openvswitch`` kernel module is loaded (else
        ``datapath_type=netdev``, with offloads off on every veth).
    :param netem: ``sch_netem`` works (propagation delay can be emulated).
    :param htb: HTB rate limiting works.
    :param afxdp: the userspace datapath can poll the GPUs' ports with a PMD thread over AF_XDP on
        a core of its own (:mod:`emulation.emulator.pmd`).
    """

    ovs_kernel_datapath: bool
    netem: bool
    htb: bool
    ovs_version: str
    mininet_version: str
    kernel: str
    afxdp: bool = False

    @property
    def datapath(self) -> str:
        """Mininet ``datapath`` argument: ``kernel`` or ``user``."""
        return "kernel" if self.ovs_kernel_datapath else "user"

    def to_json(self) -> dict:
        """Plain dict, with ``datapath`` added."""
        return {**asdict(self), "datapath": self.datapath}


def _run(cmd: list[str], timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _qdisc_works(kind: str) -> bool:
    """Try ``tc qdisc add ... <kind>`` on a veth inside a throw-away namespace (False without
    iproute2's ``ip`` and ``tc``)."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return False
    ns = f"ocslab-probe-{os.getpid()}"
    try:
        if _run(["ip", "netns", "add", ns]).returncode:
            return False
        _run(["ip", "-n", ns, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1"])
        args = {"netem": ["netem", "delay", "1ms"], "htb": ["htb", "default", "1"]}[kind]
        return _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "probe0", "root", *args]).returncode == 0
    finally:
        _run(["ip", "netns", "del", ns])


def detect() -> Capabilities:
    """Probe the machine (root needed for the qdisc probes; they report False otherwise)."""
    kernel_dp = os.path.isdir("/sys/module/openvswitch")
    if not kernel_dp and shutil.which("modprobe"):
        kernel_dp = _run(["modprobe", "-q", "openvswitch"]).returncode == 0 and os.path.isdir("/sys/module/openvswitch")
    ovs = _run(["ovs-vsctl", "--version"]).stdout.splitlines()[0] if shutil.which("ovs-vsctl") else "absent"
    try:
        import mininet.net

        mn = getattr(mininet.net, "VERSION", "unknown")
    except ImportError:
        mn = "absent"
    is_root = os.geteuid() == 0
    return Capabilities(
        ovs_kernel_datapath=kernel_dp,
        netem=is_root and _qdisc_works("netem"),
        htb=is_root and _qdisc_works("htb"),
        ovs_version=ovs,
        mininet_version=mn,
        kernel=os.uname().release,
        afxdp=not kernel_dp and ovs != "absent" and pmd.available(),
    )
