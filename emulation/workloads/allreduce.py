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

from emulation.workloads.model import Step, Workload


def ring_allreduce(ranks: int, nbytes: int) -> Workload:
    """Ring AllReduce on the ring 0 -> 1 -> ... -> n-1 -> 0.

    ReduceScatter: step t, rank r sends chunk (r - t) mod n to r+1 (reduce); AllGather: step t,
    rank r sends chunk (r + 1 - t) mod n (copy). n chunks of s/n, 2(n-1) steps.

    :raises ValueError: ranks < 2 or nbytes < 1.
    """
    check_sizes(ranks, nbytes)
    n = ranks
    w = Workload("allreduce", "ring", n, nbytes, n)
    steps = []
    for t in range(n - 1):
        steps.append(Step("reduce-scatter", tuple(
            w.transfer(r, (r + 1) % n, (r - t) % n, op="reduce") for r in range(n))))
    for t in range(n - 1):
        steps.append(Step("all-gather", tuple(
            w.transfer(r, (r + 1) % n, (r + 1 - t) % n, op="copy") for r in range(n))))
    return replace(w, steps=tuple(steps))


def rhd_allreduce(ranks: int, nbytes: int) -> Workload:
    """Recursive halving-doubling AllReduce (Rabenseifner); fold/unfold for non-powers of two.

    ReduceScatter by recursive halving: step k = 0..L-1, rank r exchanges with r XOR 2^k the
    half of its current chunk range it gives up (s / 2^(k+1) bytes, reduce); AllGather mirrors
    it (k = L-1..0, copy). Chunks: m (the power of two) pieces.

    :raises ValueError: ranks < 2 or nbytes < 1.
    """
    check_sizes(ranks, nbytes)
    n = ranks
    m = 1 << (n.bit_length() - 1)
    levels = m.bit_length() - 1
    w = Workload("allreduce", "rhd", n, nbytes, m)
    steps: list[Step] = []
    if m < n:
        steps.append(Step("fold", tuple(w.transfer(r, r - m, 0, m, "reduce") for r in range(m, n))))
    ranges = {r: (0, m) for r in range(m)}
    history: list[dict[int, tuple[int, int]]] = []
    for k in range(levels):
        history.append(dict(ranges))
        transfers = []
        new = {}
        for r in range(m):
            lo, hi = ranges[r]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if not (r >> k) & 1 else ((mid, hi), (lo, mid))
            transfers.append(w.transfer(r, r ^ (1 << k), give[0], give[1] - give[0], "reduce"))
            new[r] = keep
        ranges = new
        steps.append(Step("reduce-scatter", tuple(transfers)))
    for k in reversed(range(levels)):
        transfers = []
        for r in range(m):
            lo, hi = ranges[r]
            transfers.append(w.transfer(r, r ^ (1 << k), lo, hi - lo, "copy"))
        ranges = history[k]
        steps.append(Step("all-gather", tuple(transfers)))
    if m < n:
        steps.append(Step("unfold", tuple(w.transfer(r - m, r, 0, m, "copy") for r in range(m, n))))
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
    if m < n:
        steps.append(Step("fold", tuple(w.transfer(r, r - m, 0, 1, "reduce") for r in range(m, n))))
    for k in range(m.bit_length() - 1):
        steps.append(Step("exchange", tuple(w.transfer(r, r ^ (1 << k), 0, 1, "reduce") for r in range(m))))
    if m < n:
        steps.append(Step("unfold", tuple(w.transfer(r - m, r, 0, 1, "copy") for r in range(m, n))))
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
    rs = Step("reduce-scatter", tuple(w.transfer(r, j, j, op="reduce") for r in range(n) for j in range(n) if j != r))
    ag = Step("all-gather", tuple(w.transfer(j, r, j, op="copy") for j in range(n) for r in range(n) if r != j))
    return replace(w, steps=(rs, ag))


def check_sizes(ranks: int, nbytes: int) -> None:
    """:raises ValueError: ranks < 2 or nbytes < 1 (one message naming the field)."""
    if ranks < 2:
        raise ValueError(f"ranks must be at least 2, got {ranks}")
    if nbytes < 1:
        raise ValueError(f"bytes must be at least 1, got {nbytes}")
