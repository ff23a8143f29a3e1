"""The ``torch`` driver: run a real ``torch.distributed`` program on the emulated GPUs.

One process per GPU host (rank r on GPU r), started like ``torchrun`` would: ``MASTER_ADDR`` =
GPU 0's fabric address, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` = 0, and
``GLOO_SOCKET_IFNAME`` = the host's fabric interface, so the rendezvous and every gloo byte cross
the emulated fabric (neighbours over their circuits, other pairs forwarded by the GPUs' NIC
bridges). Processes run single-threaded (``OMP_NUM_THREADS=1``; 8 ranks share 2 cores).

Spec: issue 7; ``shared/DESIGN.md`` (packet-level backend).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from emulation import dataplane as dpn
from emulation.emulator.net import EmulatedFabric, EmulationError

#: TCP port of the torch.distributed rendezvous (TCPStore) on GPU 0.
MASTER_PORT = 29500


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
    for r, g in enumerate(ranks):
        env = {**base, "RANK": str(r), "GLOO_SOCKET_IFNAME": f"{dpn.host_name(g)}-eth0"}
        procs[g] = emu.popen(g, [sys.executable, "-m", module, *args], run_dir / f"torch-g{g}.log", env=env)
    deadline = time.monotonic() + timeout_s
    try:
        while any(p.poll() is None for p in procs.values()):
            failed = [g for g, p in procs.items() if p.poll() not in (None, 0)]
            if failed:
                raise EmulationError(f"torch rank on GPU {failed[0]} exited with {procs[failed[0]].returncode} "
                                     f"(see {run_dir}/torch-g{failed[0]}.log)")
            if time.monotonic() > deadline:
                raise EmulationError(f"torch job {module} did not finish in {timeout_s:g} s (logs in {run_dir})")
            time.sleep(0.05)
        failed = [g for g, p in procs.items() if p.returncode != 0]
        if failed:
            raise EmulationError(f"torch rank on GPU {failed[0]} exited with {procs[failed[0]].returncode} "
                                 f"(see {run_dir}/torch-g{failed[0]}.log)")
        return {g: p.returncode for g, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
            if p in emu.children:
                emu.children.remove(p)
