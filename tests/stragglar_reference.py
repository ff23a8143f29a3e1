"""StragglAR's workload as it was built first (Python objects per move and per transfer): a
reference for the array construction in emulation/workloads/stragglar.py."""

from __future__ import annotations

from dataclasses import replace

from emulation.workloads.allreduce import check_sizes
from emulation.workloads.model import Step, Workload
from emulation.workloads.stragglar import Move, stragglar_rounds


def reference_doubling_rounds(n: int) -> tuple[tuple[Move, ...], ...]:
    """The pipelined-doubling construction as it was written first, one Python object per move
    (a reference for the array construction, :func:`emulation.workloads.stragglar.doubling_columns`)."""
    levels = n.bit_length() - 1
    s = n - 1
    active: dict[int, int] = {}  # non-straggler -> its one active chunk
    holds = [set() for _ in range(n)]
    rounds: list[tuple[Move, ...]] = []
    r = 0
    while not all(len(h) == n - 1 for h in holds):
        moves: list[Move] = []
        if r <= n - 2:
            moves += [Move(r, s, r, "exchange"), Move(s, r, r, "exchange")]
        if r < levels:
            if r >= 1:
                senders = sorted((u for u in active if u != r), key=lambda u: (active[u], u))
                empty = [x for x in range(2 * levels - 1, n - 1) if x not in active]
                pairs = []
                if r - 1 + levels <= n - 2:
                    pairs.append((r - 1, r - 1 + levels))
                    senders.remove(r - 1)
                pairs += zip(senders, empty)
                moves += [Move(a, b, active[a], "forward") for a, b in pairs]
        else:
            oldest = r - levels
            group = sorted(u for u, c in active.items() if c == oldest and u != r)
            newer: dict[int, list[int]] = {}
            for u in sorted(active):
                if u != r and active[u] > oldest:
                    newer.setdefault(active[u], []).append(u)
            if r >= n - 1:
                newer.setdefault(n - 2, []).append(s)
            pairs, rest = [], []
            for u in group:
                need = u - levels  # rank u meets the straggler in round u holding chunk u - L
                if r < u <= n - 2 and newer.get(need):
                    pairs.append((u, newer[need].pop()))
                else:
                    rest.append(u)
            pool = [v for c in sorted(newer) for v in newer[c]]
            if len(pool) != len(rest):
                raise AssertionError(f"doubling construction broke at n={n}, round {r}")
            pairs += zip(rest, pool)
            for u, v in pairs:
                if v != s:
                    moves.append(Move(u, v, oldest, "swap"))
                moves.append(Move(v, u, n - 2 if v == s else active[v], "swap" if v != s else "forward"))
        for m in moves:
            if m.kind != "exchange" and m.dst != s and m.chunk != r - levels:
                active[m.dst] = m.chunk
        if r <= n - 2:
            active[r] = r
        _apply(holds, moves)
        rounds.append(tuple(moves))
        r += 1
    return tuple(rounds)


def _apply(holds: list[set[int]], moves: list[Move]) -> None:
    for m in moves:
        holds[m.dst].add(m.chunk)
        if m.kind == "exchange":
            holds[m.src].add(m.chunk)


def reference_stragglar_allreduce(ranks: int, nbytes: int) -> Workload:
    """StragglAR AllReduce (module doc) with the straggler at rank ``ranks - 1``: steps of phase
    ``A`` (ring ReduceScatter of n-1 chunks among ranks 0..n-2) then of phase ``B``.

    :raises ValueError: ranks < 2 or nbytes < 1.
    """
    check_sizes(ranks, nbytes)
    n = ranks
    k = n - 1
    w = Workload("allreduce", "stragglar", n, nbytes, k)
    steps = [Step("A", tuple(w.transfer(g, (g + 1) % k, (g - t - 1) % k) for g in range(k)))
             for t in range(k - 1)]
    for rnd in (reference_doubling_rounds(n) if n & (n - 1) == 0 else stragglar_rounds(n)):
        steps.append(Step("B", tuple(
            w.transfer(m.src, m.dst, m.chunk, op="reduce" if m.kind == "exchange" else "copy") for m in rnd)))
    return replace(w, steps=tuple(steps))
