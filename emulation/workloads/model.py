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

#: What a receiver does with a transfer's chunks; :attr:`Step.op` holds indices into this.
OPS: tuple[Op, ...] = ("reduce", "copy", "append")

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


class Step:
    """Transfers that run together; the next step starts after all of them complete.

    Stored as columns, one entry per transfer (T transfers): ``src``, ``dst``, ``bytes``,
    ``chunk``, ``nchunks`` (int64 arrays of shape (T,)) and ``op`` (int8 codes into
    :data:`OPS`). The columns are read-only and may be views shared between steps (a Ring
    AllReduce's 2(n-1) steps share their ``src`` and ``dst`` arrays and slide a window over one
    chunk array), so a 16,384-rank Ring takes O(n) memory, not O(n^2). ``transfers`` gives the
    same step as :class:`Transfer` objects, built on first use.

    ``Step(phase, transfers)`` builds one from Transfer objects; :meth:`columns` from arrays.
    """

    __slots__ = ("phase", "src", "dst", "bytes", "chunk", "nchunks", "op", "_transfers")

    def __init__(self, phase: str, transfers=()):
        ts = tuple(transfers)
        rows = np.array([(t.src, t.dst, t.bytes, t.chunk, t.nchunks) for t in ts], dtype=np.int64).reshape(-1, 5)
        ops = np.array([OPS.index(t.op) for t in ts], dtype=np.int8)
        self._set(phase, rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3], rows[:, 4], ops)
        self._transfers = ts

    @classmethod
    def columns(cls, phase: str, src, dst, nbytes, chunk, nchunks=1, op: Op = "reduce", *,
                checked: bool = False) -> Step:
        """A step from columns: ``src``, ``dst``, ``nbytes`` (bytes on the wire), ``chunk``,
        ``nchunks``: (T,) integer arrays or scalars (broadcast, without copying); ``op``: one of
        :data:`OPS` for every transfer, or a (T,) array of their codes.

        :param checked: the caller has checked the columns (a generator whose steps are windows
            of arrays it checked once: a Ring AllReduce's 2(n-1) steps); they are not scanned again.
        :raises ValueError: columns of different lengths, a negative rank or size, or an unknown op.
        """
        self = cls.__new__(cls)
        if isinstance(op, str):
            if op not in OPS:
                raise ValueError(f"op: unknown {op!r} (known: {', '.join(OPS)})")
            op = OPS.index(op)
        cols = [c if isinstance(c, np.ndarray) else np.asarray(c) for c in (src, dst, nbytes, chunk, nchunks, op)]
        size = max((c.size for c in cols if c.ndim), default=0)
        if any(c.ndim and c.shape != (size,) for c in cols):
            raise ValueError(f"step {phase!r}: columns of different lengths {[c.shape for c in cols]}")
        for k, c in enumerate(cols):
            want = np.int8 if k == 5 else np.int64
            if c.dtype != want:
                c = c.astype(want)
            cols[k] = c if c.shape == (size,) else np.broadcast_to(c, (size,))
        if size and not checked and (
                min(int(cols[0].min()), int(cols[1].min()), int(cols[2].min()), int(cols[3].min())) < 0
                or int(cols[4].min()) < 1 or int(cols[5].max()) >= len(OPS)):
            raise ValueError(f"step {phase!r}: negative rank, bytes or chunk, nchunks < 1, or unknown op code")
        self._set(phase, *cols)
        self._transfers = None
        return self

    def _set(self, phase, src, dst, nbytes, chunk, nchunks, op) -> None:
        for name, col in zip(("src", "dst", "bytes", "chunk", "nchunks", "op"), (src, dst, nbytes, chunk, nchunks, op)):
            if col.flags.writeable:
                col = col.view()
                col.flags.writeable = False
            object.__setattr__(self, name, col)
        object.__setattr__(self, "phase", phase)

    def __setattr__(self, name, value):
        if name != "_transfers":
            raise AttributeError(f"Step is immutable ({name})")
        object.__setattr__(self, name, value)

    @property
    def transfers(self) -> tuple[Transfer, ...]:
        """The step's transfers as objects (built once, on first use)."""
        if self._transfers is None:
            ops = [OPS[k] for k in self.op.tolist()]
            self._transfers = tuple(Transfer(*row, op) for row, op in zip(
                zip(self.src.tolist(), self.dst.tolist(), self.bytes.tolist(), self.chunk.tolist(),
                    self.nchunks.tolist()), ops))
        return self._transfers

    def __len__(self) -> int:
        return int(self.src.size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Step):
            return NotImplemented
        return self.phase == other.phase and all(
            np.array_equal(getattr(self, c), getattr(other, c)) for c in ("src", "dst", "bytes", "chunk", "nchunks", "op"))

    def __hash__(self) -> int:
        return hash((self.phase, len(self), self.src.tobytes(), self.dst.tobytes(), self.bytes.tobytes()))

    def __repr__(self) -> str:
        return f"Step({self.phase!r}, {len(self)} transfers, {int(self.bytes.sum())} bytes)"

    def relabelled(self, perm: np.ndarray, memo: dict | None = None) -> Step:
        """The step with rank r renamed ``perm[r]`` (``perm`` an int array). ``memo`` (one dict
        for all steps of a workload) keeps rank columns that steps share shared."""
        memo = {} if memo is None else memo

        def mapped(col: np.ndarray) -> np.ndarray:
            got = memo.get(id(col))
            if got is None or got[0] is not col:
                got = memo[id(col)] = (col, perm[col])
            return got[1]

        return Step.columns(self.phase, mapped(self.src), mapped(self.dst), self.bytes, self.chunk, self.nchunks,
                            self.op)

    def pairs(self) -> set[tuple[int, int]]:
        """Distinct (src, dst) pairs of the step."""
        return set(zip(self.src.tolist(), self.dst.tolist()))

    def demand(self, ranks: int) -> np.ndarray:
        """The step's demand matrix: ``(ranks, ranks)`` bytes, ``[src, dst]`` summed over its
        transfers (the diagonal stays 0: a transfer joins two ranks)."""
        out = np.zeros((ranks, ranks))
        np.add.at(out, (self.src, self.dst), self.bytes.astype(float))
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

    def chunk_bytes(self, chunk, nchunks=1):
        """Bytes of chunks ``[chunk, chunk + nchunks)`` (integer split of ``bytes``); ints, or
        int64 arrays of any shape (element-wise)."""
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
        p = np.asarray(perm, dtype=np.int64)
        memo: dict = {}
        steps = tuple(s.relabelled(p, memo) for s in self.steps)
        return replace(self, steps=steps, owner=tuple(int(p[r]) for r in self.owner))

    def placed(self, gpus: list[int] | tuple[int, ...], total: int) -> Workload:
        """The same collective with rank r running on GPU ``gpus[r]`` of a fabric of ``total``
        GPUs (``ranks`` becomes ``total``; GPUs outside ``gpus`` take no part, e.g. a rack's
        spares). :raises ValueError: ``gpus`` not ``ranks`` distinct GPUs below ``total``."""
        if len(gpus) != self.ranks or len(set(gpus)) != self.ranks or not all(0 <= g < total for g in gpus):
            raise ValueError(f"need {self.ranks} distinct GPUs in 0..{total - 1}, got {list(gpus)}")
        g = np.asarray(gpus, dtype=np.int64)
        memo: dict = {}
        steps = tuple(s.relabelled(g, memo) for s in self.steps)
        return replace(self, ranks=total, steps=steps, owner=tuple(int(g[r]) for r in self.owner))

    @property
    def transfer_count(self) -> int:
        """Number of transfers over all steps."""
        return sum(len(s) for s in self.steps)

    @property
    def smallest_step_bytes(self) -> int:
        """Real bytes of the largest transfer of the step whose largest transfer is smallest (0:
        no step moves bytes); what :meth:`emulation.scale.Scale.for_steps` sizes a run by."""
        tops = [int(st.bytes.max()) for st in self.steps if len(st) and st.bytes.max() > 0]
        return min(tops, default=0)

    @property
    def bytes_sent(self) -> int:
        """Total bytes on the wire over all steps. A byte column that is a window of a larger
        array (a Ring AllReduce's) is summed from that array's prefix sums, once per array."""
        prefix: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        total = 0
        for st in self.steps:
            col = st.bytes
            if not col.size:
                continue
            if col.strides == (0,):
                total += int(col[0]) * col.size
                continue
            root = col
            while isinstance(root.base, np.ndarray):
                root = root.base
            if root is col or root.ndim != 1 or root.dtype != col.dtype or col.strides != root.strides:
                total += int(col.sum())
                continue
            got = prefix.get(id(root))
            if got is None or got[0] is not root:
                got = prefix[id(root)] = (root, np.concatenate([[0], np.cumsum(root)]))
            lo = (col.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // root.itemsize
            total += int(got[1][lo + col.size] - got[1][lo])
        return total

    def to_json(self) -> dict:
        """``{"collective", "algorithm", "ranks", "bytes", "chunks", "owner", "steps": [{"phase",
        "transfers": [...]}]}`` (the ``ocslab workload --json`` form)."""
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
