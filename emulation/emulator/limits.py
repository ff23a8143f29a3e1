"""How large a fabric the packet backend can emulate on this machine, decided before anything is
created.

The headroom model: Open vSwitch's userspace datapath forwards every emulated frame on the CPU,
at a cost per frame, not per byte, so the aggregate rate a machine can carry faithfully is about
:data:`SWITCHING_MBPS_PER_CORE` x cores at the default MTU (measured: calibration reached its 98%
target at 10 Mbit/s on 8 GPUs x 2 ports and at 5 Mbit/s on 16 x 2 on a 2-core machine, 160
Mbit/s either way), and that times the frame size over 1514 bytes with jumbo frames (measured
with ``scripts/bench_packet_ceiling.py --mtu 9000``: 80 Mbit/s on 8 x 2 and 10 Mbit/s on 32 x 2
at 96-97% of link rate, 1,000-1,250 Mbit/s in all). Calibration
(:mod:`emulation.emulator.calibration`) lowers the per-port rate B_e as the fabric grows, down to
:data:`~emulation.emulator.calibration.MIN_MBPS`; a fabric whose ports would need less than that
is refused here, with the limit. Memory is the other bound: every GPU is a namespace with a
shell and an agent process (:data:`MEMORY_PER_GPU_BYTES`, measured 30-40 MB with its agent).

The capacity model (:func:`gpus_per_machine`, :func:`lab_gpus`) sizes a fabric from the link load
a machine was measured to carry (:func:`carried_mbps`, ``scripts/bench_packet_ceiling.py``), for
one machine or a lab of several.
"""

from __future__ import annotations

import os

from emulation import dataplane as dpn
from emulation.emulator.calibration import MIN_MBPS
from emulation.machine import available_memory

#: Aggregate emulated port rate one core of ovs-vswitchd forwards at >= 98% of link rate (Mbit/s),
#: in frames of the default MTU.
SWITCHING_MBPS_PER_CORE = 80.0


def switching_mbps_per_core(mtu: int = dpn.MTU) -> float:
    """:data:`SWITCHING_MBPS_PER_CORE` for frames of ``mtu`` bytes (the cost is per frame: 80
    Mbit/s at 1500, 476 at 9000)."""
    return SWITCHING_MBPS_PER_CORE * dpn.frame_bytes(mtu) / dpn.frame_bytes(dpn.MTU)
#: Memory one emulated GPU takes while a run moves data (bytes), with a margin.
MEMORY_PER_GPU_BYTES = 64 << 20


def packet_gpu_limit(ports_per_gpu: int, cores: int | None = None, memory: int | None = None,
                     mtu: int = dpn.MTU) -> tuple[int, str]:
    """The most GPUs with ``ports_per_gpu`` fabric ports each that the packet backend runs here
    with frames of ``mtu`` bytes, and the resource that sets it (``"CPU"`` or ``"memory"``).

    :param cores, memory: this machine's (``os.cpu_count()``, MemAvailable) by default.
    """
    cores = cores or os.cpu_count() or 1
    memory = available_memory() if memory is None else memory
    by_cpu = gpus_per_machine(switching_mbps_per_core(mtu) * cores, MIN_MBPS, max(1, ports_per_gpu), efficiency=1.0)
    by_memory = int(memory // MEMORY_PER_GPU_BYTES)
    return (by_cpu, "CPU") if by_cpu <= by_memory else (by_memory, "memory")


def check_packet_size(gpus: int, ports_per_gpu: int, field: str = "fabric.gpus", mtu: int = dpn.MTU) -> str | None:
    """One line naming ``field`` and the limit if ``gpus`` is beyond :func:`packet_gpu_limit`
    at ``mtu``, else None."""
    limit, why = packet_gpu_limit(ports_per_gpu, mtu=mtu)
    if gpus <= limit:
        return None
    cores = os.cpu_count() or 1
    reason = (f"{cores} cores forward about {switching_mbps_per_core(mtu) * cores:.0f} Mbit/s at MTU {mtu}, "
              f"{MIN_MBPS:g} Mbit/s per port at the least" if why == "CPU" else
              f"{available_memory() >> 20} MiB available, {MEMORY_PER_GPU_BYTES >> 20} MiB per GPU")
    return (f"{field}: {gpus} GPUs with {ports_per_gpu} ports each is beyond what the packet backend can "
            f"emulate faithfully here (at most {limit}: {reason}); use the flow backend")


#: The headroom probe's pass mark: carried load over offered (every link saturated at once).
PROBE_PASS = 0.90


def carried_mbps(gpus: int, ports_per_gpu: int, link_mbps: float, efficiency: float) -> float:
    """The link load (Mbit/s, summed over every emulated link) a machine carried in a headroom
    probe of ``gpus`` x ``ports_per_gpu`` links at ``link_mbps`` that reached ``efficiency``
    (carried over offered): the machine's forwarding capacity, measured, when the probe is at the
    machine's ceiling (``scripts/bench_packet_ceiling.py``)."""
    return gpus * ports_per_gpu * link_mbps * efficiency


def gpus_per_machine(capacity_mbps: float, link_mbps: float, ports_per_gpu: int = 2,
                     reserve_links: float = 0.0, efficiency: float = PROBE_PASS) -> int:
    """The most GPUs one machine that forwards ``capacity_mbps`` of link load emulates at
    ``link_mbps`` per link with ``ports_per_gpu`` links each, every link carrying ``efficiency``
    of its rate (default: the probe's pass mark, :data:`PROBE_PASS`; 1: ``capacity_mbps`` is
    what the machine forwards faithfully, as in :func:`packet_gpu_limit`): ``n`` with
    ``(n x ports_per_gpu + reserve_links) x link_mbps x efficiency <= capacity_mbps``.
    ``reserve_links``: links' worth of load the machine also forwards for others (a tunnel's
    end: :func:`lab_gpus`).

    :raises ValueError: a non-positive rate, capacity or port count.
    """
    if not (capacity_mbps > 0 and link_mbps > 0 and ports_per_gpu >= 1):
        raise ValueError(f"need capacity_mbps > 0, link_mbps > 0, ports_per_gpu >= 1, got {capacity_mbps}, "
                         f"{link_mbps}, {ports_per_gpu}")
    return max(0, int((capacity_mbps / (link_mbps * efficiency) - reserve_links) // ports_per_gpu))


def lab_gpus(machines: int, capacity_mbps: float, link_mbps: float, ports_per_gpu: int = 2,
             ocs: str = "sharded") -> int:
    """The most GPUs a lab of ``machines`` machines, each forwarding ``capacity_mbps`` of link
    load, emulates at ``link_mbps`` per link for a Ring AllReduce (neighbours placed on the same
    machine, consecutive ranks on consecutive machines).

    A frame costs a machine alone two passes of its datapath (the GPU's NIC bridge, then the
    OCS); ``capacity_mbps`` is what one machine carried that way.

    - ``ocs="sharded"``: every machine runs the OCS ports of its own GPUs; a circuit between two
      machines continues through a tunnel, whose ends cost a pass each (and the far shard one
      more). Counted as one more link of load per direction on each of its machines: a Ring
      crosses each of a machine's two boundaries with ``ports_per_gpu / 2`` circuits (at least
      1), so every machine reserves ``4 x max(1, ports_per_gpu / 2)`` links
      (:func:`gpus_per_machine`).
    - ``ocs="central"``: one machine holds the whole OCS (as Mininet places a switch on one
      server); every frame reaches it through a tunnel, crosses the OCS and leaves through a
      tunnel, three passes there against two on a machine alone, so the lab emulates about two
      thirds of what one machine does alone, however many machines it has.

    :raises ValueError: see :func:`gpus_per_machine`; an unknown ``ocs``; fewer than 1 machine.
    """
    if machines < 1:
        raise ValueError(f"machines: need at least 1, got {machines}")
    if ocs == "central":
        return gpus_per_machine(capacity_mbps * (2 / 3 if machines > 1 else 1), link_mbps, ports_per_gpu)
    if ocs != "sharded":
        raise ValueError(f"ocs: sharded or central, got {ocs!r}")
    reserve = 0 if machines == 1 else 4 * max(1, ports_per_gpu // 2)
    return machines * gpus_per_machine(capacity_mbps, link_mbps, ports_per_gpu, reserve)
