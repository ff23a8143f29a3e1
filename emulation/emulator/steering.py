"""The GPUs' receive work moved off Open vSwitch's core: ovs-vswitchd pinned to one core, the
GPUs' TCP receive steered (RPS) to the others.

With packet sockets, a frame that ovs-vswitchd sends to a GPU's veth is received by the GPU's
TCP stack at once, in a softirq on the sending core: the receiving GPU's TCP work (checking the
segment, waking its reader, its ACK, its next paced segments) runs in ovs-vswitchd's thread and
on its time. ``perf`` on this 2-core machine, a 32-GPU OCS star at 5 Mbit/s per link with every
link saturated (the headroom probe): 88% of ovs-vswitchd's samples were in the kernel, 58% inside
its ``sendmmsg`` calls, most of that the receivers' TCP, and 12% in Open vSwitch's own code. One
core was saturated, the other partly idle.

Receive Packet Steering (RPS) hands a frame arriving on a device to the backlog of another core,
by the device's ``rps_cpus`` mask. Set on each GPU's own link (``g<i>-eth0``, in the GPU's
namespace), the receivers' TCP runs on the cores that Open vSwitch does not, and pinning
ovs-vswitchd's threads (all but PMD threads) to one core keeps the scheduler from putting it on
the cores doing that work.

What it buys, measured by ``scripts/bench_packet_ceiling.py`` (OCS star, 2 ports per GPU, ring of
circuits; the highest rate at which the headroom probe reaches 90% and a 25 MiB Ring is within
10% of alpha-beta at the byte scale ``ocslab run`` gives it), the same run on the same machine:

=====  ======  ========================  =====================
GPUs   MTU     packet sockets            steered and pinned
=====  ======  ========================  =====================
16     9000    20 Mbit/s (probe 97.7%)   40 Mbit/s (98.5%)
32     9000    10 Mbit/s (96.0%)         20 Mbit/s (92.9%)
64     9000    5 Mbit/s (94.2%)          5 Mbit/s (94.0%)
=====  ======  ========================  =====================

At 64 GPUs the steered probe at 10 Mbit/s reached 97.8-98.7% on a fresh fabric (four runs) but
67-92% after the benchmark's overloaded runs at 40 and 20 Mbit/s on the same fabric (three). At MTU 1500 the PMD thread over AF_XDP
(:mod:`emulation.emulator.pmd`) does as well or better, so steering is the default where that
path is not used (jumbo frames, which do not fit an XDP socket, or an Open vSwitch without
``afxdp`` ports), for fabrics of at least :data:`STEER_MIN_GPUS` GPUs
(:func:`steer_by_default`).

A Ring's steps each wait for their slowest GPU, and a machine this busy starts its n senders over
milliseconds: at 32 GPUs, 20 Mbit/s and MTU 9000, the last sender of a step wrote its first byte
5.2 ms (real) after the step's release, 71% of what the Ring lost against alpha-beta at byte
scale 0.1 (+17.3%; that lag was 10.5% of a step). At the byte scale ``ocslab run`` uses for such
short steps (0.70: each step at least 64 frames) the lag was 2.6% of a step and Ring came within
2.9%.

The pin is a change to the machine's own Open vSwitch: the previous affinity is recorded in the
run's record (:mod:`emulation.emulator.registry`) and put back at teardown, or by ``ocslab
clean`` after a SIGKILL. The ``rps_cpus`` masks live on the GPUs' devices and go with them.
"""

from __future__ import annotations

import os
from pathlib import Path


#: Fabrics of fewer GPUs are not steered by default: they calibrate to the same rate either way
#: at MTU 1500 (the demo, ring16), and their tests and tables were measured without it; the
#: same bound as the PMD thread's (:data:`emulation.emulator.pmd.PMD_MIN_GPUS`).
STEER_MIN_GPUS = 17


class SteeringError(RuntimeError):
    """A GPU's device refused its ``rps_cpus`` mask, or ovs-vswitchd its affinity (one line)."""


def can_steer(cores: int | None = None) -> bool:
    """The machine has a core besides Open vSwitch's (``cores``: default the CPUs this process may
    run on)."""
    return (cores if cores is not None else len(os.sched_getaffinity(0))) >= 2


def steer_by_default(gpus: int, kernel_datapath: bool, cores: int | None = None) -> bool:
    """Whether a fabric of ``gpus`` GPUs the PMD thread does not poll (it would take the second
    core) is steered when nobody asks: not where Open vSwitch forwards in the kernel, and only
    with two cores or more (``cores``: default the CPUs this process may use) and at least
    :data:`STEER_MIN_GPUS` GPUs."""
    return not kernel_datapath and can_steer(cores) and gpus >= STEER_MIN_GPUS


def split(cpus: set[int] | None = None) -> tuple[int, set[int]]:
    """``(Open vSwitch's core, the receive cores)`` from ``cpus`` (default: those this process may
    run on): the lowest for Open vSwitch, every other one for the GPUs' receive.

    :raises SteeringError: fewer than two cores.
    """
    cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SteeringError(f"steering needs two cores or more, this process may use {len(cpus)}")
    return cpus[0], set(cpus[1:])


def rps_mask(cores: set[int]) -> str:
    """The ``rps_cpus`` text for ``cores``: a hex bitmap in comma-separated 32-bit groups, as the
    kernel prints it (``{1}`` -> ``"2"``, ``{0, 33}`` -> ``"2,00000001"``)."""
    bits = sum(1 << c for c in cores)
    groups = []
    while True:
        groups.append(bits & 0xFFFFFFFF)
        bits >>= 32
        if not bits:
            break
    head, *rest = reversed(groups)
    return ",".join([f"{head:x}"] + [f"{g:08x}" for g in rest])


def threads(pid: int) -> list[int]:
    """The thread ids of process ``pid`` other than its PMD threads (which Open vSwitch pins by its
    own ``pmd-cpu-mask``); [] when it is gone."""
    out = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    for tid in tids:
        try:
            comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            continue
        if not comm.startswith("pmd"):
            out.append(int(tid))
    return sorted(out)


def affinity(pid: int) -> list[int]:
    """The cores process ``pid``'s main thread may run on, sorted.

    :raises SteeringError: no such process.
    """
    try:
        return sorted(os.sched_getaffinity(pid))
    except ProcessLookupError:
        raise SteeringError(f"no process {pid}") from None


def pin(pid: int, cores: list[int] | set[int]) -> None:
    """Let every thread of ``pid`` but its PMD threads run only on ``cores``. A thread started
    meanwhile by one not yet pinned is pinned on the next pass (until a pass finds none, at most
    five); threads that end meanwhile are skipped.

    :raises SteeringError: the kernel refused the set (e.g. a core that does not exist).
    """
    want = set(cores)
    for _ in range(5):
        todo = []
        for tid in threads(pid):
            try:
                if os.sched_getaffinity(tid) != want:
                    todo.append(tid)
            except ProcessLookupError:
                continue
        if not todo:
            return
        for tid in todo:
            try:
                os.sched_setaffinity(tid, want)
            except ProcessLookupError:
                continue
            except OSError as e:
                raise SteeringError(f"process {pid} thread {tid}: cores {sorted(want)}: {e.strerror}") from None


def _in_own_sysfs(script: str) -> str:
    """A shell command running ``script`` with a sysfs mounted from inside the current network
    namespace (a namespace's devices show only there) on a private mount, the way ``ip netns
    exec`` does."""
    return f"unshare -m sh -c 'umount -l /sys && mount -t sysfs none /sys && {script}'"


def steer_receive(hosts, cores: set[int]) -> None:
    """Set ``rps_cpus`` of every receive queue of every interface of each Mininet host in ``hosts``
    to ``cores``, each host from inside its namespace.

    :raises SteeringError: a host's write failed (its output in the message).
    """
    mask = rps_mask(cores)
    for host in hosts:
        names = " ".join(host.intfNames())
        out = host.cmd(_in_own_sysfs(f"for d in {names}; do for q in /sys/class/net/$d/queues/rx-*; do "
                                     f"echo {mask} > $q/rps_cpus || exit 1; done; done && echo steered"))
        if out.strip().splitlines()[-1:] != ["steered"]:
            raise SteeringError(f"host {host.name}: rps_cpus {mask}: {out.strip()[-160:]}")


def rps_of(host) -> dict[str, str]:
    """``{interface: rps_cpus of its first receive queue}`` of a Mininet host (as the kernel
    prints it, e.g. ``"2"``)."""
    out = {}
    for name in host.intfNames():
        text = host.cmd(_in_own_sysfs(f"cat /sys/class/net/{name}/queues/rx-0/rps_cpus")).strip()
        out[name] = text.splitlines()[-1] if text else ""
    return out
