"""Data dependencies between the transfers of a workload (dependency-driven semantics).

A transfer may start once the chunks it sends have arrived at its source: it depends on every
transfer of an *earlier* step that delivered any of those chunks to that rank (read after
write, per chunk). Transfers of one step never depend on each other through chunks. Beside
the chunks, a transfer waits for the previous transfer between the same two ranks (one
in-order connection per (source, destination) pair, as NCCL's): that one may be in the same
step.

Transfers are numbered in step-major order (step 0's transfers, then step 1's, ...), as
:meth:`~emulation.workloads.model.Workload.transfer_count` counts them. The dependencies are
computed with array operations: chunk ranges are cut, per rank, at every boundary any transfer
of that rank uses, so a range of k chunks costs as many pieces as boundaries fall inside it
(RHD's halving ranges: O(log n) pieces, not O(n) chunks).

Spec: ``docs/mechanisms.md`` (execution semantics: "dependency-driven: a transfer starts when
the chunk it sends has arrived").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emulation.arrays import unique

from emulation.workloads.model import Workload


@dataclass(frozen=True)
class Dependencies:
    """A relation between T transfers in compressed sparse rows: transfer t relates to
    ``indices[indptr[t]:indptr[t + 1]]`` (sorted, distinct).

    :ivar indptr: (T + 1,) int64 row starts. :ivar indices: (D,) int64 transfer ids.
    """

    indptr: np.ndarray
    indices: np.ndarray

    @staticmethod
    def from_pairs(row: np.ndarray, col: np.ndarray, transfers: int) -> Dependencies:
        """The relation holding the pairs ``(row[i], col[i])`` (duplicates dropped) over
        ``transfers`` transfers."""
        key = unique(np.asarray(row, dtype=np.int64) * transfers + np.asarray(col, dtype=np.int64))
        row, col = np.divmod(key, transfers) if transfers else (key, key)
        indptr = np.zeros(transfers + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=transfers), out=indptr[1:])
        return Dependencies(indptr, col)

    def of(self, t: int) -> np.ndarray:
        """The transfers ``t`` relates to (a view)."""
        return self.indices[self.indptr[t]:self.indptr[t + 1]]

    def counts(self) -> np.ndarray:
        """(T,) how many transfers each relates to."""
        return np.diff(self.indptr)

    def transposed(self) -> Dependencies:
        """The converse relation: for a dependency relation, every transfer's dependents."""
        t = self.indptr.size - 1
        row = np.repeat(np.arange(t, dtype=np.int64), self.counts())
        return Dependencies.from_pairs(self.indices, row, t)

    def to_lists(self) -> list[list[int]]:
        """One sorted list per transfer."""
        cols = self.indices.tolist()
        ptr = self.indptr.tolist()
        return [cols[a:b] for a, b in zip(ptr, ptr[1:])]


def transfer_columns(workload: Workload) -> dict[str, np.ndarray]:
    """Every transfer's columns in step-major order: ``src``, ``dst``, ``chunk``, ``nchunks``,
    ``step`` (int64) and ``bytes`` (float64), each of shape (T,)."""
    steps = [s for s in workload.steps]
    sizes = [len(s) for s in steps]

    def cat(name: str, dtype) -> np.ndarray:
        parts = [np.asarray(getattr(s, name), dtype=dtype) for s in steps if len(s)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    return {"src": cat("src", np.int64), "dst": cat("dst", np.int64), "chunk": cat("chunk", np.int64),
            "nchunks": cat("nchunks", np.int64), "bytes": cat("bytes", np.float64),
            "step": np.repeat(np.arange(len(steps), dtype=np.int64), sizes)}


def _expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(owner, value)``: every integer of every range ``[lo[i], hi[i])``, with its range i."""
    n = hi - lo
    owner = np.repeat(np.arange(lo.size, dtype=np.int64), n)
    start = np.cumsum(n) - n
    return owner, np.arange(owner.size, dtype=np.int64) - start[owner] + lo[owner]


def chunk_dependency_arrays(workload: Workload, cols: dict[str, np.ndarray] | None = None) -> Dependencies:
    """Read-after-write dependencies through chunks (module doc), as :class:`Dependencies`.

    :param cols: :func:`transfer_columns` of ``workload``, if already made.
    """
    c = transfer_columns(workload) if cols is None else cols
    t = c["src"].size
    if not t:
        return Dependencies(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    lo, hi, step = c["chunk"], c["chunk"] + c["nchunks"], c["step"]
    span = int(hi.max()) + 1
    # Per-rank boundaries of every range read (at the source) or written (at the destination).
    bounds = unique(np.concatenate([c["src"] * span + lo, c["src"] * span + hi,
                                       c["dst"] * span + lo, c["dst"] * span + hi]))

    def pieces(rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(transfer, piece id) of every elementary piece of every transfer's range at ``rank``."""
        a = np.searchsorted(bounds, rank * span + lo)
        b = np.searchsorted(bounds, rank * span + hi)
        owner, piece = _expand(a, b)
        return owner, piece

    w_t, w_piece = pieces(c["dst"])
    r_t, r_piece = pieces(c["src"])
    steps = len(workload.steps) + 1
    wkey = w_piece * steps + step[w_t]
    order = np.argsort(wkey, kind="stable")
    wkey, w_t = wkey[order], w_t[order]
    # Writers of a piece in a step before the reader's: those between (piece, 0) and (piece, step).
    first = np.searchsorted(wkey, r_piece * steps)
    last = np.searchsorted(wkey, r_piece * steps + step[r_t])
    reader, at = _expand(first, last)
    return Dependencies.from_pairs(r_t[reader], w_t[at], t)


def connection_predecessors(src: np.ndarray, dst: np.ndarray, ranks: int) -> np.ndarray:
    """(T,) the previous transfer (in step-major order) between the same ``(src, dst)`` pair, or
    -1 for the first on its pair."""
    key = np.asarray(src, dtype=np.int64) * ranks + np.asarray(dst, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    prev = np.full(key.size, -1, dtype=np.int64)
    same = key[order[1:]] == key[order[:-1]]
    prev[order[1:][same]] = order[:-1][same]
    return prev


def transfer_dependencies(workload: Workload, cols: dict[str, np.ndarray] | None = None) -> Dependencies:
    """Every transfer's dependencies under dependency-driven execution: its chunks' writers
    (:func:`chunk_dependency_arrays`) and the previous transfer on its connection
    (:func:`connection_predecessors`).

    :param cols: :func:`transfer_columns` of ``workload``, if already made.
    """
    c = transfer_columns(workload) if cols is None else cols
    chunks = chunk_dependency_arrays(workload, c)
    prev = connection_predecessors(c["src"], c["dst"], workload.ranks)
    has = np.flatnonzero(prev >= 0)
    t = c["src"].size
    row = np.concatenate([np.repeat(np.arange(t, dtype=np.int64), chunks.counts()), has])
    return Dependencies.from_pairs(row, np.concatenate([chunks.indices, prev[has]]), t)


def chunk_dependencies(workload: Workload) -> list[list[int]]:
    """For every transfer (ids in step-major order, as :meth:`Workload.transfer_count`
    enumerates them), the sorted ids of the transfers it depends on through chunks."""
    return chunk_dependency_arrays(workload).to_lists()
