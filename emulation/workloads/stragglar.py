"""StragglAR: AllReduce with a persistent straggler, synthesised for any n (no stored schedules).

Spec: StragglAR (arXiv 2505.23523; ``docs/mechanisms.md``). The straggler is rank
S = n-1 (relabel with :func:`with_straggler`); the buffer is cut into n-1 chunks.

- Phase ``A`` (while the straggler is late): ring ReduceScatter among ranks 0..n-2, n-2 steps
  of s/(n-1); rank g ends with chunk g reduced over the non-stragglers.
- Phase ``B`` (from the straggler's arrival): rounds, each a *matching* (every rank is in at
  most one pair, so it sends at most one chunk and receives at most one). Round r <= n-2 holds
  the straggler exchange r <=> S of chunk r (both ``reduce``: both end with chunk r fully
  reduced); the other pairs *forward* (one way) or *swap* (both ways) fully reduced chunks the
  receiver lacks (``copy``). Every transfer moves s/(n-1) bytes, so on a non-blocking switch
  Phase B costs ``c (alpha + s/((n-1) B))`` for c rounds.

Synthesis of the rounds (:func:`stragglar_rounds`):

- n a power of two, 2^L: a *pipelined doubling* construction that meets the bound
  n - 2 + L (4 -> 4, 8 -> 9, 16 -> 18, 32 -> 35, 64 -> 68). Invariant from round L on: every
  non-straggler holds exactly one *active* (reduced, not yet everywhere) chunk, and chunk r-j
  has 2^(j-1) holders at the start of round r. In round r the holders of the oldest active
  chunk o = r-L (2^(L-1) of them, one being the busy rank r) swap with the holders of the newer
  chunks (2^(L-1) - 1), so o reaches everyone and every newer chunk doubles; the rank about to
  meet the straggler in round x must by then hold chunk x-L (it is the one holder of o that is
  idle), which decides the pairing of those ranks. Rounds 1..L-1 fill the empty ranks by
  one-way forwards (rank r-1 hands its new chunk to rank r-1+L, the rank that needs it first).
  After round n-2 the straggler holds every chunk and acts as one more holder of chunk n-2.
  Every receive slot of every round is used, so no schedule of this structure is shorter.
- other n: the spec's greedy. Per round, after the straggler exchange, a maximum-cardinality
  maximum-weight matching (networkx) on the free ranks with weight 2 where both sides hold a
  chunk the other lacks and 1 where one does; each sender sends the highest-index chunk its
  partner lacks. Two tie-break weightings (three for odd n) are tried and the shortest schedule
  kept. Reached: even n within one round of n - 2 + ceil(log2 n) (6 -> 7, 10 -> 12, 12 -> 14,
  24 -> 27); odd n need more, the greedy leaving ranks idle (e.g. 7 -> 10, 9 -> 13, 35 -> 46).

Every schedule is verified by :func:`check_stragglar` (tests: every n from 3 to 64).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

from emulation.workloads.allreduce import check_sizes
from emulation.workloads.checker import ScheduleError, apply_step, check, initial_state
from emulation.workloads.model import Step, Workload

Kind = Literal["exchange", "forward", "swap"]


@dataclass(frozen=True)
class Move:
    """One transfer of Phase B: ``chunk`` from ``src`` to ``dst``; ``kind`` as in the module doc."""

    src: int
    dst: int
    chunk: int
    kind: Kind


def lower_bound_rounds(ranks: int) -> int:
    """``n - 2 + ceil(log2 n)``: Phase B rounds of the paper's structure (exact for powers of two)."""
    return ranks - 2 + (ranks - 1).bit_length()


@lru_cache(maxsize=None)
def stragglar_rounds(ranks: int) -> tuple[tuple[Move, ...], ...]:
    """Phase B of StragglAR on ``ranks`` ranks (straggler ``ranks - 1``): a tuple of rounds.

    :raises ValueError: ranks < 2.
    """
    if ranks < 2:
        raise ValueError(f"ranks must be at least 2, got {ranks}")
    if ranks & (ranks - 1) == 0:
        return _doubling_rounds(ranks)
    weightings = ("plain", "newest") if ranks % 2 == 0 else ("plain", "newest", "oldest")
    return min((_matching_rounds(ranks, w) for w in weightings), key=len)


#: Kinds of a Phase B transfer, by code (:func:`doubling_columns`).
KINDS: tuple[Kind, ...] = ("exchange", "forward", "swap")


def doubling_columns(n: int):
    """The pipelined-doubling construction for n a power of two (module doc), one round at a
    time, as arrays: yields ``(src, dst, chunk, kind)`` per round, each (M,) int64 (``kind``:
    codes into :data:`KINDS`), transfers in the order :func:`stragglar_rounds` lists them.
    O(n) array operations per round; the construction ends after ``n - 2 + log2 n`` rounds.

    :raises ValueError: n not a power of two >= 2.
    """
    if n < 2 or n & (n - 1):
        raise ValueError(f"ranks: the doubling construction needs a power of two, got {n}")
    levels = n.bit_length() - 1
    s = n - 1
    active = np.full(s, -1, dtype=np.int64)  # every non-straggler's one active chunk (-1: none)
    ranks = np.arange(s, dtype=np.int64)
    for r in range(lower_bound_rounds(n)):
        parts: list[tuple[np.ndarray, ...]] = []
        if r <= n - 2:
            parts.append((np.array([r, s]), np.array([s, r]), np.array([r, r]), np.array([0, 0])))
        if 1 <= r < levels:
            holders = ranks[(active >= 0) & (ranks != r)]
            senders = holders[np.lexsort((holders, active[holders]))]
            empty = np.arange(2 * levels - 1, n - 1)
            empty = empty[active[empty] < 0]
            a0, b0 = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
            if r - 1 + levels <= n - 2:
                a0, b0 = np.array([r - 1]), np.array([r - 1 + levels])
                senders = senders[senders != r - 1]
            m = min(senders.size, empty.size)
            a, b = np.concatenate([a0, senders[:m]]), np.concatenate([b0, empty[:m]])
            chunk = active[a]
            parts.append((a, b, chunk, np.ones(a.size, dtype=np.int64)))
            active[b] = chunk
        elif r >= levels:
            oldest = r - levels
            group = ranks[(active == oldest) & (ranks != r)]
            newer = ranks[(active > oldest) & (ranks != r)]
            newer = newer[np.lexsort((newer, active[newer]))]  # by chunk, then rank
            chunks = active[newer]
            # rank u meets the straggler in round u holding chunk u - L: it takes that chunk's last holder
            eligible = (group > r) & (group <= n - 2)
            last = np.searchsorted(chunks, group - levels, "right") - 1
            found = eligible & (last >= 0) & (chunks[np.maximum(last, 0)] == group - levels)
            taken = np.zeros(newer.size, dtype=bool)
            taken[last[found]] = True
            pool = newer[~taken]
            if r >= n - 1:
                pool = np.append(pool, s)
            rest = group[~found]
            if pool.size != rest.size:
                raise AssertionError(f"doubling construction broke at n={n}, round {r}")
            u = np.concatenate([group[found], rest])
            v = np.concatenate([newer[last[found]], pool])
            back = np.where(v == s, n - 2, active[np.minimum(v, s - 1)])
            both = v != s
            src = np.stack([u, v], 1).ravel()
            dst = np.stack([v, u], 1).ravel()
            chunk = np.stack([np.full(u.size, oldest), back], 1).ravel()
            kind = np.stack([np.full(u.size, 2), np.where(both, 2, 1)], 1).ravel()
            keep = np.stack([both, np.ones(u.size, dtype=bool)], 1).ravel()
            parts.append((src[keep], dst[keep], chunk[keep], kind[keep]))
            active[u] = back
        if r <= n - 2:
            active[r] = r
        yield tuple(np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
                    for i in range(4))


def _doubling_rounds(n: int) -> tuple[tuple[Move, ...], ...]:
    """:func:`doubling_columns` as :class:`Move` tuples."""
    return tuple(tuple(Move(int(a), int(b), int(c), KINDS[k]) for a, b, c, k in zip(*(x.tolist() for x in cols)))
                 for cols in doubling_columns(n))


def _matching_rounds(n: int, weighting: str) -> tuple[tuple[Move, ...], ...]:
    """The spec's greedy matching synthesis (module doc); ``weighting`` ``plain``, ``newest`` or
    ``oldest`` (among matchings with the most transfers, prefer pairs whose transfers carry newer,
    or older, chunks)."""
    s = n - 1
    holds: list[set[int]] = [set() for _ in range(n)]
    rounds: list[tuple[Move, ...]] = []
    r = 0
    while not all(len(h) == n - 1 for h in holds):
        if r > 4 * n:
            raise AssertionError(f"StragglAR synthesis made no progress at n={n}")
        moves: list[Move] = []
        busy: set[int] = set()
        if r <= n - 2:
            moves += [Move(r, s, r, "exchange"), Move(s, r, r, "exchange")]
            busy = {r, s}
        free = [u for u in range(n) if u not in busy]

        def pick(u: int, v: int) -> int | None:
            lack = holds[u] - holds[v]
            return max(lack) if lack else None

        import networkx as nx  # here, not at import: the CLI's refusals need no networkx
        g = nx.Graph()
        for i, u in enumerate(free):
            for v in free[i + 1:]:
                sends = [c for c in (pick(u, v), pick(v, u)) if c is not None]
                if sends:
                    bonus = {"plain": 0, "newest": sum(c + 1 for c in sends),
                             "oldest": sum(n - c for c in sends)}[weighting]
                    # float weights (exact for these small integers) skip networkx's optimality
                    # self-check, a third of the time
                    g.add_edge(u, v, weight=float(len(sends) * 10 * n * n + bonus))
        for u, v in sorted(tuple(sorted(e)) for e in nx.max_weight_matching(g, maxcardinality=True)):
            cu, cv = pick(u, v), pick(v, u)
            kind: Kind = "swap" if cu is not None and cv is not None else "forward"
            moves += [Move(a, b, c, kind) for a, b, c in ((u, v, cu), (v, u, cv)) if c is not None]
        _apply(holds, moves)
        rounds.append(tuple(moves))
        r += 1
    return tuple(rounds)


def _apply(holds: list[set[int]], moves: list[Move]) -> None:
    for m in moves:
        holds[m.dst].add(m.chunk)
        if m.kind == "exchange":
            holds[m.src].add(m.chunk)


def stragglar_allreduce(ranks: int, nbytes: int) -> Workload:
    """StragglAR AllReduce (module doc) with the straggler at rank ``ranks - 1``: steps of phase
    ``A`` (ring ReduceScatter of n-1 chunks among ranks 0..n-2) then of phase ``B``.

    :raises ValueError: ranks < 2 or nbytes < 1.
    """
    check_sizes(ranks, nbytes)
    n = ranks
    k = n - 1
    w = Workload("allreduce", "stragglar", n, nbytes, k)
    # Phase A as a Ring: every step shares the rank columns and windows one chunk array.
    src = np.arange(k, dtype=np.int64)
    dst = (src + 1) % k
    ids = np.concatenate([src, src])  # ids[o + g] = (o + g) mod k
    size = w.chunk_bytes(ids)
    steps = [Step.columns("A", src, dst, size[o:o + k], ids[o:o + k], 1, "reduce", checked=True)
             for o in ((k - t - 1) % k for t in range(k - 1))]
    if n >= 2 and n & (n - 1) == 0:
        size_of = w.chunk_bytes(np.arange(k, dtype=np.int64))
        for a, b, c, kind in doubling_columns(n):
            steps.append(Step.columns("B", a, b, size_of[c], c, 1, np.where(kind == 0, 0, 1).astype(np.int8),
                                      checked=True))
    else:
        for rnd in stragglar_rounds(n):
            steps.append(Step("B", tuple(
                w.transfer(m.src, m.dst, m.chunk, op="reduce" if m.kind == "exchange" else "copy") for m in rnd)))
    return replace(w, steps=tuple(steps))


def with_straggler(w: Workload, rank: int) -> Workload:
    """``w`` with ranks ``rank`` and ``n-1`` swapped, so that the straggler is ``rank``.

    :raises ValueError: rank out of range.
    """
    n = w.ranks
    if not 0 <= rank < n:
        raise ValueError(f"straggler rank {rank} is not a rank of {n}")
    if rank == n - 1:
        return w
    perm = list(range(n))
    perm[rank], perm[n - 1] = n - 1, rank
    return w.relabel(perm)


def check_stragglar(w: Workload, straggler: int | None = None) -> None:
    """Verify a StragglAR workload: it computes AllReduce (:func:`~emulation.workloads.checker.check`);
    phase ``A`` never involves the straggler; every phase ``B`` round is a matching (each rank in
    at most one pair); every transfer of phase ``B`` other than a straggler exchange sends a
    chunk that is fully reduced at its sender; at the end every rank holds all n-1 chunks fully
    reduced.

    :param straggler: the straggler's rank (default n-1).
    :raises ScheduleError: any of these fails (the message names the step).
    """
    n = w.ranks
    s = n - 1 if straggler is None else straggler
    check(w)
    state = initial_state(w)
    full = np.ones(n, dtype=np.int64)
    for i, step in enumerate(w.steps):
        if step.phase == "A" and any(s in (t.src, t.dst) for t in step.transfers):
            raise ScheduleError(f"step {i}: phase A involves the straggler {s}")
        if step.phase == "B":
            partner: dict[int, int] = {}
            for t in step.transfers:
                for a, b in ((t.src, t.dst), (t.dst, t.src)):
                    if partner.setdefault(a, b) != b:
                        raise ScheduleError(f"step {i}: rank {a} is paired with {partner[a]} and {b} (not a matching)")
                exchange = s in (t.src, t.dst) and t.op == "reduce"
                if not exchange and not all(np.array_equal(state[t.src, c], full)
                                            for c in range(t.chunk, t.chunk + t.nchunks)):
                    raise ScheduleError(f"step {i}: rank {t.src} forwards chunk {t.chunk}, not fully reduced")
        state = apply_step(state, step, i)
    for r in range(n):
        if not (state[r] == 1).all():
            raise ScheduleError(f"rank {r} does not end with every chunk fully reduced")


def describe_step(step: Step, straggler: int) -> str:
    """The spec's notation for one step: ``0<=>S(c0)`` exchange, ``0->2(c0)`` forward,
    ``0<->1(c0/c1)`` swap (``S`` is the straggler)."""
    name = {straggler: "S"}
    by_pair: dict[tuple[int, int], dict[int, int]] = {}
    for t in step.transfers:
        by_pair.setdefault((min(t.src, t.dst), max(t.src, t.dst)), {})[t.src] = t.chunk
    out = []
    for (a, b), sent in by_pair.items():
        na, nb = name.get(a, str(a)), name.get(b, str(b))
        if len(sent) == 1:
            (src, c), = sent.items()
            dst = b if src == a else a
            out.append(f"{name.get(src, str(src))}->{name.get(dst, str(dst))}(c{c})")
        elif sent[a] == sent[b]:
            out.append(f"{na}<=>{nb}(c{sent[a]})")
        else:
            out.append(f"{na}<->{nb}(c{sent[a]}/c{sent[b]})")
    out.sort(key=lambda x: ("S" not in x.split("(")[0], x))
    return "   ".join(out)
