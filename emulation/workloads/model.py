"""The Workload form: ordered steps of transfers, consumed by both backends.

A transfer moves a contiguous range of the buffer's chunks (``chunk`` .. ``chunk+nchunks-1``)
from one rank to another; ``op`` says whether the receiver adds it to its copy (``reduce``),
replaces its copy with it (``copy``) or keeps it beside its own data (``append``: AllToAll
blocks from different origins). Chunk ids index the workload's ``chunks`` equal pieces of the
buffer; ``bytes`` is what travels on the wire.

``owner`` maps every chunk to the rank whose *shard* it is: the rank that must end with it
reduced (ReduceScatter), that starts with it (AllGather), or the root (Broadcast). Collectives
without shards (AllReduce, AllToAll) leave it empty.

Spec: ``docs/architecture.md`` (vocabulary: step, transfer), ``docs/mechanisms.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

Op = Literal["reduce", "copy", "append"]

#: Collectives the generators produce (nccl-tests names).
COLLECTIVES = ("allreduce", "reducescatter", "allgather", "alltoall", "broadcast")


@dataclass(frozen=True)
class Transfer:
    """``bytes`` bytes of chunks ``[chunk, chunk + nchunks)`` from rank ``src`` to rank ``dst``."""

    src: int
    dst: int
    bytes: int
    chunk: int
    nchunks: int = 1
    op: Op = "reduce"

    def to_json(self) -> dict:
        """``{"src", "dst", "bytes", "chunk", "nchunks", "op"}``."""
        return {
            "src": self.src,
            "dst": self.dst,
            "bytes": self.bytes,
            "chunk": self.chunk,
            "nchunks": self.nchunks,
            "op": self.op,
        }


@dataclass(frozen=True)
class Step:
    """Transfers that run together; the next step starts after all of them complete."""

    phase: str
    transfers: tuple[Transfer, ...]

    def pairs(self) -> set[tuple[int, int]]:
        """Distinct (src, dst) pairs of the step."""
        return {(t.src, t.dst) for t in self.transfers}

    def demand(self, ranks: int) -> np.ndarray:
        """The step's demand matrix: ``(ranks, ranks)`` bytes, ``[src, dst]`` summed over its
        transfers (the diagonal stays 0: a transfer joins two ranks)."""
        out = np.zeros((ranks, ranks))
        for t in self.transfers:
            out[t.src, t.dst] += t.bytes
        return out


@dataclass(frozen=True)
class Workload:
    """A collective as steps of transfers.

    :param collective: one of :data:`COLLECTIVES`.
    :param algorithm: e.g. ``"ring"``, ``"rhd"``.
    :param ranks: number of ranks n.
    :param bytes: buffer size s in bytes (per rank; for AllToAll the whole send buffer).
    :param chunks: how many equal pieces chunk ids refer to.
    :param owner: ``(chunks,)`` rank owning each chunk's shard, or ``()`` (module doc).
    """

    collective: str
    algorithm: str
    ranks: int
    bytes: int
    chunks: int
    steps: tuple[Step, ...] = field(default_factory=tuple)
    owner: tuple[int, ...] = ()

    def chunk_bytes(self, chunk: int, nchunks: int = 1) -> int:
        """Bytes of chunks ``[chunk, chunk + nchunks)`` (integer split of ``bytes``)."""
        lo = self.bytes * chunk // self.chunks
        hi = self.bytes * (chunk + nchunks) // self.chunks
        return hi - lo

    def transfer(self, src: int, dst: int, chunk: int, nchunks: int = 1, op: Op = "reduce") -> Transfer:
        """A transfer of chunks ``[chunk, chunk + nchunks)`` sized from this workload's buffer."""
        return Transfer(src, dst, self.chunk_bytes(chunk, nchunks), chunk, nchunks, op)

    def relabel(self, perm: list[int] | tuple[int, ...]) -> Workload:
        """The same collective with rank r renamed ``perm[r]`` (``perm`` a permutation of
        ``0..ranks-1``): transfers and ``owner`` follow. :raises ValueError: not a permutation."""
        if sorted(perm) != list(range(self.ranks)):
            raise ValueError(f"not a permutation of {self.ranks} ranks: {list(perm)}")
        steps = tuple(Step(s.phase, tuple(
            Transfer(perm[t.src], perm[t.dst], t.bytes, t.chunk, t.nchunks, t.op) for t in s.transfers))
            for s in self.steps)
        return replace(self, steps=steps, owner=tuple(perm[r] for r in self.owner))

    def placed(self, gpus: list[int] | tuple[int, ...], total: int) -> Workload:
        """The same collective with rank r running on GPU ``gpus[r]`` of a fabric of ``total``
        GPUs (``ranks`` becomes ``total``; GPUs outside ``gpus`` take no part, e.g. a rack's
        spares). :raises ValueError: ``gpus`` not ``ranks`` distinct GPUs below ``total``."""
        if len(gpus) != self.ranks or len(set(gpus)) != self.ranks or not all(0 <= g < total for g in gpus):
            raise ValueError(f"need {self.ranks} distinct GPUs in 0..{total - 1}, got {list(gpus)}")
        steps = tuple(Step(s.phase, tuple(
            Transfer(gpus[t.src], gpus[t.dst], t.bytes, t.chunk, t.nchunks, t.op) for t in s.transfers))
            for s in self.steps)
        return replace(self, ranks=total, steps=steps, owner=tuple(gpus[r] for r in self.owner))

    @property
    def transfer_count(self) -> int:
        """Number of transfers over all steps."""
        return sum(len(s.transfers) for s in self.steps)

    @property
    def bytes_sent(self) -> int:
        """Total bytes on the wire over all steps."""
        return sum(t.bytes for s in self.steps for t in s.transfers)

    def to_json(self) -> dict:
        """``{"collective", "algorithm", "ranks", "bytes", "chunks", "owner", "steps": [{"phase",
        "transfers": [...]}]}`` (the ``ocslab schedule --json`` form)."""
        return {
            "collective": self.collective,
            "algorithm": self.algorithm,
            "ranks": self.ranks,
            "bytes": self.bytes,
            "chunks": self.chunks,
            "owner": list(self.owner),
            "steps": [
                {"phase": s.phase, "transfers": [t.to_json() for t in s.transfers]}
                for s in self.steps
            ],
        }


@dataclass(frozen=True)
class Tenant:
    """A tenant's job placed on a shared fabric: ``workload`` (ranks ``0..n-1``) on fabric GPUs
    ``gpus`` (rank r on ``gpus[r]``), started ``start_s`` (s) after the first tenant. Both
    backends run lists of them (:mod:`emulation.flowsim.tenants`, :mod:`emulation.emulator.tenants`)."""

    name: str
    workload: Workload
    gpus: tuple[int, ...]
    start_s: float = 0.0
