"""ReduceScatter and AllGather as steps of transfers (ring, recursive, direct).

Spec: ``docs/mechanisms.md`` (baseline algorithms; nccl-tests busbw factor (n-1)/n). The
buffer (s bytes per rank) is cut into n chunks of s/n, one *shard* per rank
(:attr:`~emulation.workloads.model.Workload.owner`): ReduceScatter ends with rank r holding its
shard reduced over all ranks; AllGather starts with rank r holding only its shard and ends with
every rank holding every shard. On a non-blocking fabric both cost
``(n-1)/n s beta`` plus alpha per step: Ring n-1 steps, recursive log2(n), direct 1.

Recursive algorithms, n a power of two (MPICH's choice of order, so that shards stay in rank
order and every transfer is one contiguous range):

- ReduceScatter by recursive *halving*: step j = 0..L-1 pairs rank r with ``r XOR 2^(L-1-j)``
  (the farthest partner first); each sends the half of its current range that holds the
  partner's shard (s / 2^(j+1) bytes, reduce).
- AllGather by recursive *doubling*: step k = 0..L-1 pairs rank r with ``r XOR 2^k``; each
  sends everything it holds (2^k shards, copy).

Non-powers of two: with m the largest power of two <= n, the m *core* ranks run the algorithm
over m *blocks*; block b holds the shards of core b and of the extra rank b+m (if b+m < n), laid
out next to each other (so chunk ids are a permutation of ranks: see ``owner``). ReduceScatter
first folds each extra rank's whole buffer into its core (s bytes) and finally hands it its
shard; AllGather first hands the extra's shard to its core and finally copies the whole buffer
back to the extra. Two extra steps, as for the AllReduce fold (not bandwidth-optimal).
"""

from __future__ import annotations

from dataclasses import replace

from emulation.workloads.allreduce import check_sizes
from emulation.workloads.model import Op, Step, Transfer, Workload


def ring_reducescatter(ranks: int, nbytes: int) -> Workload:
    """Ring ReduceScatter on 0 -> 1 -> ... -> n-1 -> 0: step t = 0..n-2, rank r sends chunk
    (r - t - 1) mod n to r+1 (reduce); rank r ends with chunk r. :raises ValueError: sizes."""
    return _ring("reducescatter", ranks, nbytes, first=-1, op="reduce")


def ring_allgather(ranks: int, nbytes: int) -> Workload:
    """Ring AllGather: step t = 0..n-2, rank r sends chunk (r - t) mod n to r+1 (copy).
    :raises ValueError: sizes."""
    return _ring("allgather", ranks, nbytes, first=0, op="copy")


def _ring(collective: str, ranks: int, nbytes: int, first: int, op: Op) -> Workload:
    """n-1 ring steps; at step t rank r sends chunk (r + first - t) mod n to r+1."""
    check_sizes(ranks, nbytes)
    n = ranks
    w = Workload(collective, "ring", n, nbytes, n, owner=tuple(range(n)))
    phase = "reduce-scatter" if op == "reduce" else "all-gather"
    steps = tuple(
        Step(phase, tuple(w.transfer(r, (r + 1) % n, (r + first - t) % n, op=op) for r in range(n)))
        for t in range(n - 1))
    return _with(w, steps)


def direct_reducescatter(ranks: int, nbytes: int) -> Workload:
    """Direct ReduceScatter: one step, every rank sends chunk j to rank j (reduce).
    :raises ValueError: sizes."""
    check_sizes(ranks, nbytes)
    n = ranks
    w = Workload("reducescatter", "direct", n, nbytes, n, owner=tuple(range(n)))
    return _with(w, (Step("reduce-scatter", tuple(
        w.transfer(r, j, j) for r in range(n) for j in range(n) if j != r)),))


def direct_allgather(ranks: int, nbytes: int) -> Workload:
    """Direct AllGather: one step, rank j sends chunk j to every rank (copy).
    :raises ValueError: sizes."""
    check_sizes(ranks, nbytes)
    n = ranks
    w = Workload("allgather", "direct", n, nbytes, n, owner=tuple(range(n)))
    return _with(w, (Step("all-gather", tuple(
        w.transfer(j, r, j, op="copy") for j in range(n) for r in range(n) if r != j)),))


class _Blocks:
    """Block layout of the recursive algorithms (module doc): ``owner`` per chunk, ``start[b]``
    the first chunk of block b (``start[m] == n``), ``pos[r]`` the chunk of rank r's shard."""

    def __init__(self, n: int):
        self.n = n
        self.m = 1 << (n.bit_length() - 1)
        self.levels = self.m.bit_length() - 1
        owner: list[int] = []
        self.start = []
        for b in range(self.m):
            self.start.append(len(owner))
            owner += [b] + ([b + self.m] if b + self.m < n else [])
        self.start.append(n)
        self.owner = tuple(owner)
        self.pos = {r: c for c, r in enumerate(owner)}

    def chunks(self, lo: int, hi: int) -> tuple[int, int]:
        """Chunk range ``(first, count)`` of blocks ``[lo, hi)``."""
        return self.start[lo], self.start[hi] - self.start[lo]


def rhd_reducescatter(ranks: int, nbytes: int) -> Workload:
    """Recursive-halving ReduceScatter (module doc); any n >= 2. :raises ValueError: sizes."""
    check_sizes(ranks, nbytes)
    b = _Blocks(ranks)
    n, m = ranks, b.m
    w = Workload("reducescatter", "rhd", n, nbytes, n, owner=b.owner)
    steps: list[Step] = []
    if m < n:
        steps.append(Step("fold", tuple(w.transfer(r, r - m, 0, n) for r in range(m, n))))
    ranges = {r: (0, m) for r in range(m)}
    for j in range(b.levels):
        k = b.levels - 1 - j
        transfers: list[Transfer] = []
        for r in range(m):
            lo, hi = ranges[r]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if not (r >> k) & 1 else ((mid, hi), (lo, mid))
            transfers.append(w.transfer(r, r ^ (1 << k), *b.chunks(*give)))
            ranges[r] = keep
        steps.append(Step("reduce-scatter", tuple(transfers)))
    if m < n:
        steps.append(Step("unfold", tuple(w.transfer(r - m, r, b.pos[r], 1, "copy") for r in range(m, n))))
    return _with(w, tuple(steps))


def rd_allgather(ranks: int, nbytes: int) -> Workload:
    """Recursive-doubling AllGather (module doc); any n >= 2. :raises ValueError: sizes."""
    check_sizes(ranks, nbytes)
    b = _Blocks(ranks)
    n, m = ranks, b.m
    w = Workload("allgather", "rd", n, nbytes, n, owner=b.owner)
    steps: list[Step] = []
    if m < n:
        steps.append(Step("fold", tuple(w.transfer(r, r - m, b.pos[r], 1, "copy") for r in range(m, n))))
    ranges = {r: (r, r + 1) for r in range(m)}
    for k in range(b.levels):
        transfers = [w.transfer(r, r ^ (1 << k), *b.chunks(*ranges[r]), "copy") for r in range(m)]
        ranges = {r: (min(ranges[r][0], ranges[r ^ (1 << k)][0]), max(ranges[r][1], ranges[r ^ (1 << k)][1]))
                  for r in range(m)}
        steps.append(Step("all-gather", tuple(transfers)))
    if m < n:
        steps.append(Step("unfold", tuple(w.transfer(r - m, r, 0, n, "copy") for r in range(m, n))))
    return _with(w, tuple(steps))


def _with(w: Workload, steps: tuple[Step, ...]) -> Workload:
    return replace(w, steps=steps)
