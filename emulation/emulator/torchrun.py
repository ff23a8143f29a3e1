"""The ``torch`` driver: run a real ``torch.distributed`` program on the emulated GPUs.

One process per GPU host (rank r on GPU r), started like ``torchrun`` would: ``MASTER_ADDR`` =
GPU 0's fabric address, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` = 0, and
``GLOO_SOCKET_IFNAME`` = the host's fabric interface, so the rendezvous and every gloo byte cross
the emulated fabric (neighbours over their circuits, other pairs forwarded by the GPUs' NIC
bridges). Processes run single-threaded (``OMP_NUM_THREADS=1``; 8 ranks share 2 cores). TCP
keeps its congestion window across idle periods (``net.ipv4.tcp_slow_start_after_idle = 0`` in
every GPU's namespace, as ML clusters tune it): a collective after a pause must not restart
from slow start, or mid-size AllReduces measure TCP's ramp, not the fabric. Receive buffers
are capped at :data:`TCP_RMEM_MAX` (``net.ipv4.tcp_rmem``): gloo's sockets would otherwise open
windows of megabytes, and a link queue longer than the userspace switch's packet-socket buffer
loses packets silently (``shared/MACHINE.md``). Such losses still happen now and then, so TCP's
minimum retransmission timeout is :data:`~emulation.emulator.net.FAST_RTO_MIN_MS` for the job (Linux default 200 ms; data
centre hosts lower it too), restored afterwards.

Spec: issue 7; ``shared/DESIGN.md`` (packet-level backend).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from emulation import dataplane as dpn
from emulation.emulator.net import FAST_RTO_MIN_MS, EmulatedFabric, EmulationError

#: TCP port of the torch.distributed rendezvous (TCPStore) on GPU 0.
MASTER_PORT = 29500
#: Largest TCP receive buffer in the GPUs' namespaces, bytes (emulated links' bandwidth-delay
#: product is a few KB at tens of Mbit/s).
TCP_RMEM_MAX = 64 << 10


def torch_available() -> bool:
    """Whether PyTorch imports in this interpreter (the optional ``torch`` extra)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def run_torch(emu: EmulatedFabric, module: str, args: list[str], run_dir: Path, timeout_s: float,
              ranks: list[int] | None = None) -> dict[int, int]:
    """Run ``python -m module args...`` as rank r on GPU ``ranks[r]`` (default GPU r) and wait
    for every process; logs go to ``run_dir/torch-gG.log``.

    :param timeout_s: wall-clock seconds for the whole job.
    :returns: ``{gpu: exit status}`` (all 0).
    :raises EmulationError: a rank failed (its log named) or the job timed out; every process
        still running is ended (by pid).
    """
    ranks = list(range(emu.fabric.gpus)) if ranks is None else ranks
    run_dir.mkdir(parents=True, exist_ok=True)
    procs = {}
    base = {"MASTER_ADDR": dpn.gpu_ip(ranks[0]), "MASTER_PORT": str(MASTER_PORT), "WORLD_SIZE": str(len(ranks)),
            "LOCAL_RANK": "0", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    for g in ranks:
        emu.host(g).cmd("sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 "
                         f"net.ipv4.tcp_rmem='4096 {TCP_RMEM_MAX // 2} {TCP_RMEM_MAX}'")
    emu.set_rto_min(FAST_RTO_MIN_MS)
    for r, g in enumerate(ranks):
        env = {**base, "RANK": str(r), "GLOO_SOCKET_IFNAME": f"{dpn.host_name(g)}-eth0"}
        procs[g] = emu.popen(g, [sys.executable, "-m", module, *args], run_dir / f"torch-g{g}.log", env=env)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            failed = [g for g, p in procs.items() if p.poll() not in (None, 0)]
            if failed:
                raise EmulationError(f"torch rank on GPU {failed[0]} exited with {procs[failed[0]].returncode} "
                                     f"(see {run_dir}/torch-g{failed[0]}.log)")
            if all(p.poll() == 0 for p in procs.values()):
                return {g: 0 for g in procs}
            if time.monotonic() > deadline:
                raise EmulationError(f"torch job {module} did not finish in {timeout_s:g} s (logs in {run_dir})")
            time.sleep(0.05)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
            if p in emu.children:
                emu.children.remove(p)
        emu.set_rto_min(None)
