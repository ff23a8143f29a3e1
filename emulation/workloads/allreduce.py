"""AllReduce algorithms as steps of transfers.

Spec: ``docs/mechanisms.md`` (baseline algorithms). Costs on a non-blocking fabric, n ranks,
buffer s bytes, per-message latency alpha, inverse bandwidth beta:

- Ring: 2(n-1) steps, ``2(n-1) alpha + 2(n-1)/n s beta``.
- Recursive halving-doubling (Rabenseifner, "rhd"): ``2 log2(n) alpha + 2(n-1)/n s beta`` for n
  a power of two.
  Partner at step k is ``rank XOR 2^k`` (k = 0 first), so on a ring the partner of step k is
  2^k hops away.
- Recursive doubling, full vector ("rd"): log2(n) steps exchanging the whole buffer with
  ``rank XOR 2^k``: ``log2(n) alpha + log2(n) s beta``.
- Direct (one-shot): 2 steps, ``2 alpha + 2(n-1)/n s beta`` on a non-blocking switch.

Non-powers of two (rhd, rd): with m the largest power of two <= n, ranks m..n-1 first *fold*
their whole buffer into rank r-m (one step), the m ranks run the algorithm, and ranks r-m finally
*unfold* the result to rank r. It is simple and correct but adds two steps of s bytes; the
bandwidth-optimal 3-2 elimination of Thakur et al. is not used.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from emulation.workloads.model import OPS, Step, Workload


def ring_allreduce(ranks: int, nbytes: int) -> Workload:
    """Ring AllReduce on the ring 0 -> 1 -> ... -> n-1 -> 0.

    ReduceScatter: step t, rank r sends chunk (r - t) mod n to r+1 (reduce); AllGather: step t,
    rank r sends chunk (r + 1 - t) mod n (copy). n chunks of s/n, 2(n-1) steps.

    Columnar and O(n) in memory: every step shares the ``src``/``dst`` arrays, and its chunk
    and byte columns are windows on one array of 2n entries (chunk ids ``k mod n``).

    :raises ValueError: ranks < 2 or nbytes < 1.
    """
    check_sizes(ranks, nbytes)
    n = ranks
    w = Workload("allreduce", "ring", n, nbytes, n)
    src = np.arange(n, dtype=np.int64)
    dst = (src + 1) % n
    ids = np.concatenate([src, src])  # ids[o + r] = (o + r) mod n
    size = w.chunk_bytes(ids)  # >= 0: every column below is a window of these arrays
    one = np.broadcast_to(np.int64(1), (n,))
    for col in (src, dst, ids, size):
        col.flags.writeable = False  # read-only: every step holds these very arrays, not views of them
    steps = []
    for phase, op, first in (("reduce-scatter", "reduce", 0), ("all-gather", "copy", 1)):
        code = np.broadcast_to(np.int8(OPS.index(op)), (n,))
        for t in range(n - 1):
            o = (n + first - t) % n  # chunk of rank r: (r + first - t) mod n = ids[o + r]
            steps.append(Step.columns(phase, src, dst, size[o:o + n], ids[o:o + n], one, code, checked=True))
    return replace(w, steps=tuple(steps))


def rhd_allreduce(ranks: int, nbytes: int) -> Workload:
    """Recursive halving-doubling AllReduce (Rabenseifner); fold/unfold for non-powers of two.

    ReduceScatter by recursive halving: step k = 0..L-1, rank r exchanges with r XOR 2^k the
    half of its current chunk range it gives up (s / 2^(k+1) bytes, reduce); AllGather mirrors
    it (k = L-1..0, copy). Chunks: m (the power of two) pieces. Columnar: one array operation
    per step.

    :raises ValueError: ranks < 2 or nbytes < 1.
    """
    check_sizes(ranks, nbytes)
    n = ranks
    m = 1 << (n.bit_length() - 1)
    levels = m.bit_length() - 1
    w = Workload("allreduce", "rhd", n, nbytes, m)
    steps: list[Step] = []
    folded = np.arange(m, n, dtype=np.int64)
    if m < n:
        steps.append(Step.columns("fold", folded, folded - m, w.chunk_bytes(0, m), 0, m, "reduce"))
    r = np.arange(m, dtype=np.int64)
    lo, hi = np.zeros(m, dtype=np.int64), np.full(m, m, dtype=np.int64)
    history = []
    for k in range(levels):
        history.append((lo, hi))
        mid = (lo + hi) // 2
        upper = ((r >> k) & 1).astype(bool)  # keeps the upper half
        give_lo, give_hi = np.where(upper, lo, mid), np.where(upper, mid, hi)
        steps.append(Step.columns("reduce-scatter", r, r ^ (1 << k), w.chunk_bytes(give_lo, give_hi - give_lo),
                                  give_lo, give_hi - give_lo, "reduce"))
        lo, hi = np.where(upper, mid, lo), np.where(upper, hi, mid)
    for k in reversed(range(levels)):
        steps.append(Step.columns("all-gather", r, r ^ (1 << k), w.chunk_bytes(lo, hi - lo), lo, hi - lo, "copy"))
        lo, hi = history[k]
    if m < n:
        steps.append(Step.columns("unfold", folded - m, folded, w.chunk_bytes(0, m), 0, m, "copy"))
    return replace(w, steps=tuple(steps))


def rd_allreduce(ranks: int, nbytes: int) -> Workload:
    """Full-vector recursive doubling AllReduce: step k = 0..L-1, rank r exchanges its whole
    buffer with ``r XOR 2^k`` and adds it (1 chunk); fold/unfold for non-powers of two.

    :raises ValueError: ranks < 2 or nbytes < 1.
    """
    check_sizes(ranks, nbytes)
    n = ranks
    m = 1 << (n.bit_length() - 1)
    w = Workload("allreduce", "rd", n, nbytes, 1)
    steps: list[Step] = []
    folded = np.arange(m, n, dtype=np.int64)
    if m < n:
        steps.append(Step.columns("fold", folded, folded - m, nbytes, 0, 1, "reduce"))
    r = np.arange(m, dtype=np.int64)
    for k in range(m.bit_length() - 1):
        steps.append(Step.columns("exchange", r, r ^ (1 << k), nbytes, 0, 1, "reduce"))
    if m < n:
        steps.append(Step.columns("unfold", folded - m, folded, nbytes, 0, 1, "copy"))
    return replace(w, steps=tuple(steps))


def direct_allreduce(ranks: int, nbytes: int) -> Workload:
    """Direct (one-shot) AllReduce: every rank sends chunk j to rank j (ReduceScatter, one
    step), then rank j sends reduced chunk j to every rank (AllGather, one step).

    n chunks of s/n; each step has n(n-1) transfers and needs a GPU to reach all peers at once
    (an EPS, or a full mesh). Cost on a non-blocking switch: ``2 alpha + 2(n-1)/n s beta``
    (each GPU port is shared by its n-1 concurrent transfers).

    :raises ValueError: ranks < 2 or nbytes < 1.
    """
    check_sizes(ranks, nbytes)
    n = ranks
    w = Workload("allreduce", "direct", n, nbytes, n)
    src, dst = np.nonzero(~np.eye(n, dtype=bool))  # (r, j), j != r, row-major
    rs = Step.columns("reduce-scatter", src, dst, w.chunk_bytes(dst), dst, 1, "reduce")
    ag = Step.columns("all-gather", src, dst, w.chunk_bytes(src), src, 1, "copy")
    return replace(w, steps=(rs, ag))


def check_sizes(ranks: int, nbytes: int) -> None:
    """:raises ValueError: ranks < 2 or nbytes < 1 (one message naming the field)."""
    if ranks < 2:
        raise ValueError(f"ranks must be at least 2, got {ranks}")
    if nbytes < 1:
        raise ValueError(f"bytes must be at least 1, got {nbytes}")
