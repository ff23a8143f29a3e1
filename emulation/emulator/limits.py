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
    by_cpu = int(switching_mbps_per_core(mtu) * cores / (MIN_MBPS * max(1, ports_per_gpu)))
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
