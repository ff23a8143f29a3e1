"""The launcher: run a real ``torch.distributed`` program on the emulated GPUs.

One process per GPU host (rank r on GPU r), started like ``torchrun`` would: ``MASTER_ADDR`` =
GPU 0's fabric address, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` = 0, and
``GLOO_SOCKET_IFNAME`` = the host's fabric interface, so the rendezvous and every gloo byte cross
the emulated fabric (neighbours over their circuits, other pairs forwarded by the GPUs' NIC
bridges). Processes run single-threaded (``OMP_NUM_THREADS=1``; 8 ranks share 2 cores). TCP
keeps its congestion window across idle periods (``net.ipv4.tcp_slow_start_after_idle = 0`` in
every GPU's namespace, as ML clusters tune it): a collective after a pause must not restart
from slow start, or mid-size AllReduces measure TCP's ramp, not the fabric. Receive buffers
are capped at :data:`TCP_RMEM_MAX` (``net.ipv4.tcp_rmem``): gloo's sockets would otherwise open
windows of megabytes, more than the emulated links' queues are sized for
(:attr:`emulation.emulator.net.EmulatedFabric.queue_packets`). A failure does lose segments (the
failed GPU's circuits go dark), so TCP's minimum retransmission timeout is
:data:`~emulation.emulator.net.FAST_RTO_MIN_MS` for the job (Linux default 200 ms; data centre
hosts lower it too), restored afterwards.

Spec: ``docs/architecture.md`` (packet-level backend).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from emulation import dataplane as dpn
from emulation.poll import wait_until
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


def torch_missing() -> str | None:
    """The one line refusing a torch job where PyTorch is not installed (how to install it), or
    None where it is."""
    if torch_available():
        return None
    return (f"torch: PyTorch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh, or {sys.executable} -m pip "
            f"install torch==2.13.0)")


def name_service(emu: EmulatedFabric, directory: Path) -> list[str]:
    """A command prefix that runs a program in a private mount namespace whose ``/etc/hosts``
    names every GPU (``g0`` ... at its fabric address, after the machine's own entries) and
    whose ``/etc/resolv.conf`` has no name server; the files go to ``directory``.

    torch's rendezvous looks up its peers' names (``getnameinfo``). The machine's name server
    sits in 10.0.0.0/8, which inside a GPU's namespace is the emulated fabric: each query would
    be dropped there and time out (about 6 s per rendezvous measured). The machine's own files
    are not touched.
    """
    directory.mkdir(parents=True, exist_ok=True)
    hosts, resolv = directory / "hosts", directory / "resolv.conf"
    own = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
    hosts.write_text(own + "".join(f"{dpn.gpu_ip(g)} {dpn.host_name(g)}\n" for g in range(emu.fabric.gpus)))
    resolv.write_text("# ocslab: no name server inside the emulated GPUs\n")
    # the files' paths are arguments of the script, never part of its text: a results directory
    # may hold spaces or shell characters
    script = 'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(hosts.resolve()),
            str(resolv.resolve())]


def tune_tcp(emu: EmulatedFabric, gpus: list[int]) -> None:
    """TCP as a torch job wants it in the namespaces of ``gpus`` (GPU indices; module doc): no
    slow start after idle, receive buffers capped at :data:`TCP_RMEM_MAX` bytes. Lasts as long as
    the namespaces (nothing to restore)."""
    for g in gpus:
        emu.host(g).cmd("sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 "
                         f"net.ipv4.tcp_rmem='4096 {TCP_RMEM_MAX // 2} {TCP_RMEM_MAX}'")


class TorchJob:
    """``python -m module args...`` as rank r on GPU ``gpus[r]`` (torchrun's environment, module
    doc), started at construction; logs go to ``log_dir/torch-gG.log``. The environment also
    has ``OCSLAB_GPU`` = the GPU and ``extra_env``.

    :param module: the program, ``python -m`` style (e.g. ``emulation.torchjob.train``).
    :param args: its command-line arguments, the same for every rank.
    :param gpus: GPU indices, rank r on ``gpus[r]``.
    :param master_port: TCP port of the rendezvous on rank 0's GPU (a relaunch takes a new one,
        so that it never meets the old store's sockets).
    :param standby: start warm standbys instead: ``module`` gets ``--standby standby`` and no
        rank; it announces ``standby/ready-gG`` and blocks on the FIFO ``standby/assign-gG`` until
        :meth:`assign` writes to it (the protocol of
        :mod:`emulation.torchjob.train`).
    """

    def __init__(self, emu: EmulatedFabric, module: str, args: list[str], log_dir: Path, gpus: list[int],
                 master_port: int = MASTER_PORT, extra_env: dict[str, str] | None = None,
                 standby: Path | None = None):
        self.emu = emu
        self.module = module
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.gpus = list(gpus)
        self.standby = standby
        self.ended: set[int] = set()  # GPUs whose process we ended on purpose
        base = {"LOCAL_RANK": "0", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **(extra_env or {})}
        if standby is None:
            base.update(MASTER_ADDR=dpn.gpu_ip(self.gpus[0]), MASTER_PORT=str(master_port),
                        WORLD_SIZE=str(len(self.gpus)))
        else:
            standby.mkdir(parents=True, exist_ok=True)
            args = [*args, "--standby", str(standby.resolve())]
        self.procs = {}
        prefix = name_service(emu, self.log_dir)
        for r, g in enumerate(self.gpus):
            env = {**base, "OCSLAB_GPU": str(g), "GLOO_SOCKET_IFNAME": f"{dpn.host_name(g)}-eth0"}
            if standby is None:
                env["RANK"] = str(r)
            self.procs[g] = emu.popen(g, [*prefix, sys.executable, "-m", module, *args],
                                      self.log_dir / f"torch-g{g}.log", env=env)

    def ready(self) -> bool:
        """Standbys: whether every one has announced itself. :raises EmulationError: one died."""
        self.done()
        return all((self.standby / f"ready-g{g}").exists() for g in self.gpus)

    def assign(self, placement: list[int], master_port: int, launch: int) -> float:
        """Standbys: make rank r of launch ``launch`` the standby on GPU ``placement[r]`` (the
        rendezvous on ``placement[0]``, TCP port ``master_port``), end the standbys not placed;
        returns the CLOCK_MONOTONIC time (s) the assignments were written.

        :raises EmulationError: a placed standby is not waiting on its FIFO (it died).
        """
        spare = [g for g in self.gpus if g not in placement]
        self.kill(spare)
        t = time.monotonic()
        for r, g in enumerate(placement):
            msg = json.dumps({"rank": r, "world": len(placement), "master_addr": dpn.gpu_ip(placement[0]),
                              "master_port": master_port, "launch": launch}).encode()
            try:  # the standby blocks reading its FIFO; no reader (it died): ENXIO
                fd = os.open(self.standby / f"assign-g{g}", os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                raise EmulationError(f"the standby on GPU {g} is not waiting ({e.strerror}; see "
                                     f"{self.log_dir}/torch-g{g}.log)") from None
            try:
                os.write(fd, msg)  # under PIPE_BUF: written at once
            finally:
                os.close(fd)
        self.gpus = list(placement)
        return t

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
        wait_until(self.done, timeout_s, lambda: EmulationError(
            f"torch job {self.module} did not finish in {timeout_s:g} s (logs in {self.log_dir})"))

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
