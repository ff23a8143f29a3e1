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


def tune_tcp(emu: EmulatedFabric, gpus: list[int]) -> None:
    """TCP as a torch job wants it in the namespaces of ``gpus`` (module doc): no slow start
    after idle, receive buffers capped at :data:`TCP_RMEM_MAX`."""
    for g in gpus:
        emu.host(g).cmd("sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 "
                         f"net.ipv4.tcp_rmem='4096 {TCP_RMEM_MAX // 2} {TCP_RMEM_MAX}'")


class TorchJob:
    """``python -m module args...`` as rank r on GPU ``gpus[r]`` (torchrun's environment, module
    doc), started at construction; logs go to ``log_dir/torch-gG.log``. The environment also
    has ``OCSLAB_GPU`` = the GPU and ``extra_env``.

    :param master_port: TCP port of the rendezvous on rank 0's GPU (a relaunch takes a new one,
        so that it never meets the old store's sockets).
    """

    def __init__(self, emu: EmulatedFabric, module: str, args: list[str], log_dir: Path, gpus: list[int],
                 master_port: int = MASTER_PORT, extra_env: dict[str, str] | None = None):
        self.emu = emu
        self.module = module
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.gpus = list(gpus)
        self.ended: set[int] = set()  # GPUs whose process we ended on purpose
        base = {"MASTER_ADDR": dpn.gpu_ip(self.gpus[0]), "MASTER_PORT": str(master_port),
                "WORLD_SIZE": str(len(self.gpus)), "LOCAL_RANK": "0", "OMP_NUM_THREADS": "1",
                "PYTHONUNBUFFERED": "1", **(extra_env or {})}
        self.procs = {}
        for r, g in enumerate(self.gpus):
            env = {**base, "RANK": str(r), "OCSLAB_GPU": str(g), "GLOO_SOCKET_IFNAME": f"{dpn.host_name(g)}-eth0"}
            self.procs[g] = emu.popen(g, [sys.executable, "-m", module, *args], self.log_dir / f"torch-g{g}.log",
                                      env=env)

    def done(self) -> bool:
        """Whether every rank has exited with status 0 (ranks ended on purpose excepted).

        :raises EmulationError: a rank failed (its log named).
        """
        for g, p in self.procs.items():
            if g not in self.ended and p.poll() not in (None, 0):
                raise EmulationError(f"torch rank on GPU {g} exited with {p.returncode} "
                                     f"(see {self.log_dir}/torch-g{g}.log)")
        return all(p.poll() is not None for p in self.procs.values())

    def wait(self, timeout_s: float) -> None:
        """Poll until :meth:`done`. :raises EmulationError: a rank failed or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while not self.done():
            if time.monotonic() > deadline:
                raise EmulationError(f"torch job {self.module} did not finish in {timeout_s:g} s (logs in {self.log_dir})")
            time.sleep(0.05)

    def kill(self, gpus: list[int] | None = None) -> None:
        """SIGKILL the ranks on ``gpus`` (default all) by pid and reap them."""
        for g in self.gpus if gpus is None else gpus:
            p = self.procs[g]
            self.ended.add(g)
            if p.poll() is None:
                p.kill()
            p.wait()
            if p in self.emu.children:
                self.emu.children.remove(p)


def run_torch(emu: EmulatedFabric, module: str, args: list[str], run_dir: Path, timeout_s: float,
              ranks: list[int] | None = None) -> dict[int, int]:
    """Run ``python -m module args...`` as rank r on GPU ``ranks[r]`` (default GPU r) and wait
    for every process (:class:`TorchJob`); TCP is tuned for the job (:func:`tune_tcp`, rto_min
    :data:`~emulation.emulator.net.FAST_RTO_MIN_MS`, restored afterwards).

    :param timeout_s: wall-clock seconds for the whole job.
    :returns: ``{gpu: exit status}`` (all 0).
    :raises EmulationError: a rank failed (its log named) or the job timed out; every process
        still running is ended (by pid).
    """
    ranks = list(range(emu.fabric.gpus)) if ranks is None else ranks
    tune_tcp(emu, ranks)
    emu.set_rto_min(FAST_RTO_MIN_MS)
    job = None
    try:
        job = TorchJob(emu, module, args, run_dir, ranks)
        job.wait(timeout_s)
        return {g: 0 for g in ranks}
    finally:
        if job is not None:
            job.kill()
        emu.set_rto_min(None)
