"""Birkhoff-von Neumann decomposition of a demand matrix into weighted circuit configurations.

Spec: ``docs/mechanisms.md`` (PipSwitch, arXiv 2501.18136: "for a non-uniform demand matrix, a Birkhoff-von Neumann
decomposition (Sinkhorn-balance, then peel off matchings) into few weighted configurations").

A time-slotted OCS that holds permutation P_k for a slot of length w_k / B carries
``sum_k w_k P_k`` bytes between the pairs; the schedule serves a demand matrix M (bytes,
``M[i, j]`` from GPU i to GPU j) when that sum *covers* M elementwise.

Method:

1. :func:`sinkhorn` balances M to a doubly stochastic matrix ``diag(x) M diag(y)``. It shows
   the *shape* of the traffic, but its decomposition does not carry M's bytes (it rescales rows
   and columns), so the schedule is built on a *stuffed* matrix instead:
2. :func:`stuff` adds dummy demand to M so that every row and column sums to the largest line
   sum m of M (greedy over the cells with the largest row and column deficits first); M' >= M
   elementwise, and M'/m is doubly stochastic, so by Birkhoff's theorem it is a convex
   combination of permutation matrices. No schedule can serve M in less than m / B (the busiest
   port), and the stuffed schedule takes exactly m / B of circuit time.
3. :func:`bvn_decompose` peels permutations off M': each time a *bottleneck* permutation (the
   largest tau such that the cells >= tau hold a perfect matching, found by binary search with
   Hopcroft-Karp; among those, the one with the most demand by ``linear_sum_assignment``),
   weighted by its smallest entry. Each term zeroes at least one cell, so at most
   n^2 - 2n + 2 terms; the bottleneck rule takes large terms first and needs fewer in practice.

:func:`reconstruction_error` is ``|sum_k w_k P_k - M'|_max / max(M')`` (tests: below 1e-6).

Bidirectional circuits (:func:`bidirectional_decompose`). A permutation such as 0->1->2->0 needs
an OCS that switches every transmit fibre on its own, and TCP needs its ACKs to come back. An OCS
whose circuits are duplex (the emulator's: a circuit joins two ports both ways) holds matchings,
and a circuit {i, j} held t seconds carries t B each way, so it serves M when the circuit time of
every pair covers ``S = max(M, M^T)``. With ``S <= sum_k w_k P_k`` (the BvN of S) and S symmetric,
``S <= sum_k w_k (P_k + P_k^T) / 2``; each term is realised by splitting every cycle of P_k into
matchings: a 2-cycle is one circuit for w; an even cycle is its two alternating matchings, w/2
each; an odd cycle of length L is L matchings of (L-1)/2 edges (each skipping a different edge),
w/(L-1) each, so every edge gets w/2 (the cycle's fractional chromatic index). Cycles are
disjoint and run side by side; the term lasts w, or w L/(L-1) if it has an odd cycle.

Few slots matter as much as circuit time once every slot costs a dark window R, so
:func:`duplex_plan` also prices the demand-weighted round-robin (the n-1 matchings of K_n, each held
for its largest pair demand: at most n-1 slots) and keeps the cheaper of the two under
``total weight + slots x R B``. With capacity-limited MoE traffic (capacity factor 1.0) the hot
GPU's port is saturated, every schedule needs its line sum, and the weighted round-robin reaches it
with the fewest slots; sparse or non-capacity-bounded demand favours the split BvN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emulation.schedule import WeightedMatching
from emulation.workloads.matchings import round_robin_matchings


class DecompositionError(ValueError):
    """The matrix cannot be decomposed (negative, not square, not finite)."""


@dataclass(frozen=True)
class BvnTerm:
    """One term of a Birkhoff-von Neumann decomposition: a permutation ``perm`` (``perm[i]`` = the GPU that i sends to; ``perm[i] == i`` means
    port i idle) held for ``weight`` bytes of every circuit."""

    weight: float
    perm: tuple[int, ...]

    def pairs(self) -> list[tuple[int, int]]:
        """The directed ``(src, dst)`` circuits of the matching (idle ports left out)."""
        return [(i, j) for i, j in enumerate(self.perm) if i != j]


def _validate(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        raise DecompositionError(f"demand must be a square matrix of at least 2 x 2, got shape {m.shape}")
    if not np.isfinite(m).all() or (m < 0).any():
        raise DecompositionError("demand must be finite and non-negative")
    return m


def sinkhorn(m: np.ndarray, iterations: int = 1000, tol: float = 1e-9) -> np.ndarray:
    """Sinkhorn-Knopp balancing: the doubly stochastic ``diag(x) (M + eps) diag(y)`` (eps a tiny
    floor so that zero cells, e.g. the diagonal, do not block convergence).

    :param m: (n, n) non-negative. :returns: (n, n), rows and columns summing to 1 within ``tol``.
    :raises DecompositionError: bad matrix.
    """
    m = _validate(m)
    a = m + max(m.max(), 1.0) * 1e-12
    for _ in range(iterations):
        a /= a.sum(axis=1, keepdims=True)
        a /= a.sum(axis=0, keepdims=True)
        if np.abs(a.sum(axis=1) - 1).max() < tol:
            break
    return a


def stuff(m: np.ndarray) -> np.ndarray:
    """M plus dummy demand so that every row and column sums to M's largest line sum (module
    doc); the diagonal is stuffed last, so dummy traffic prefers real circuits to idle ports.

    :returns: (n, n) M' >= M. :raises DecompositionError: bad matrix.
    """
    m = _validate(m)
    target = max(m.sum(axis=1).max(), m.sum(axis=0).max())
    out = m.copy()
    row = target - out.sum(axis=1)
    col = target - out.sum(axis=0)
    # Off-diagonal cells first; a full pass over all cells then closes every deficit (for each
    # row either its deficit reaches 0 or every column's does, and the deficits sum equally).
    for with_diagonal in (False, True):
        for i in np.argsort(-row, kind="stable"):
            for j in np.argsort(-col, kind="stable"):
                if i == j and not with_diagonal:
                    continue
                add = min(row[i], col[j])
                if add > 0:
                    out[i, j] += add
                    row[i] -= add
                    col[j] -= add
    return out


def bvn_decompose(m: np.ndarray, rel_tol: float = 1e-9, max_terms: int | None = None) -> list[BvnTerm]:
    """Decompose the stuffed ``m`` into weighted permutations (module doc), largest first.

    :param m: (n, n) demand, bytes. :param rel_tol: stop when every remaining cell is below
        ``rel_tol x max(M')``. :param max_terms: default n^2.
    :returns: ``[BvnTerm]`` with ``sum weight x P = stuff(m)`` within ``rel_tol``.
    :raises DecompositionError: bad matrix.
    """
    from scipy.optimize import linear_sum_assignment  # here, not at import: the CLI's refusals need no SciPy

    rest = stuff(m)
    n = rest.shape[0]
    scale = rest.max()
    if scale <= 0:
        return []
    out: list[BvnTerm] = []
    floor = rel_tol * scale
    for _ in range(max_terms or n * n):
        if rest.max() <= floor:
            break
        tau = _bottleneck(rest, floor)
        if tau is None:
            break  # numerical leftovers only
        # among the permutations whose every cell holds >= tau, the one with the most demand
        support = rest >= tau
        rows, cols = linear_sum_assignment(np.where(support, -rest, 1e3 * scale))
        w = float(rest[rows, cols].min())
        rest[rows, cols] -= w
        out.append(BvnTerm(w, tuple(int(c) for c in cols)))
    return out


def _bottleneck(rest: np.ndarray, floor: float) -> float | None:
    """The largest tau such that the cells ``>= tau`` hold a perfect matching (binary search over
    the distinct values, Hopcroft-Karp via scipy); None if even ``> floor`` holds none."""
    values = np.unique(rest[rest > floor])
    lo, hi = 0, len(values) - 1
    if hi < 0 or not _perfect(rest >= values[0]):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if _perfect(rest >= values[mid]) else (lo, mid - 1)
    return float(values[lo])


def _perfect(mask: np.ndarray) -> bool:
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    match = maximum_bipartite_matching(csr_matrix(mask.astype(np.int8)), perm_type="column")
    return bool((match >= 0).all())


def reconstruct(terms: list[BvnTerm], n: int) -> np.ndarray:
    """``sum_k w_k P_k`` as an (n, n) matrix."""
    out = np.zeros((n, n))
    for t in terms:
        out[np.arange(n), list(t.perm)] += t.weight
    return out


def reconstruction_error(m: np.ndarray, terms: list[BvnTerm]) -> float:
    """``|sum_k w_k P_k - stuff(M)|_max / max(stuff(M))`` (0 for an all-zero M)."""
    target = stuff(m)
    scale = target.max()
    return float(np.abs(reconstruct(terms, target.shape[0]) - target).max() / scale) if scale > 0 else 0.0


def _cycles(perm: tuple[int, ...]) -> list[list[int]]:
    seen, out = set(), []
    for start in range(len(perm)):
        if start in seen or perm[start] == start:
            continue
        cyc, i = [], start
        while i not in seen:
            seen.add(i)
            cyc.append(i)
            i = perm[i]
        out.append(cyc)
    return out


def _cycle_matchings(cyc: list[int], w: float) -> list[tuple[float, list[tuple[int, int]]]]:
    """A cycle's matchings and durations (module doc): every edge held w/2 (a 2-cycle: w)."""
    length = len(cyc)
    edges = [tuple(sorted((cyc[i], cyc[(i + 1) % length]))) for i in range(length)]
    if length == 2:
        return [(w, [edges[0]])]
    if length % 2 == 0:
        return [(w / 2, edges[0::2]), (w / 2, edges[1::2])]
    # skip edge j: the (L-1)/2 edges j+1, j+3, ... are pairwise disjoint
    return [(w / (length - 1), [edges[(j + 1 + 2 * q) % length] for q in range((length - 1) // 2)])
            for j in range(length)]


def bidirectional_decompose(m: np.ndarray, rel_tol: float = 1e-9) -> list[WeightedMatching]:
    """Schedule ``m`` on duplex circuits: the BvN of ``max(M, M^T)`` with every permutation split
    into matchings (module doc). Consecutive identical matchings are merged.

    :param m: (n, n) demand, bytes. :returns: ``[WeightedMatching]`` whose circuit time covers
        ``max(M, M^T)`` (:func:`duplex_coverage`); total weight between the largest line sum of
        ``max(M, M^T)`` and 1.5 times the BvN total.
    :raises DecompositionError: bad matrix.
    """
    m = _validate(m)
    sym = np.maximum(m, m.T)
    np.fill_diagonal(sym, 0.0)
    out: list[WeightedMatching] = []
    for term in bvn_decompose(sym, rel_tol):
        parts = [_cycle_matchings(c, term.weight) for c in _cycles(term.perm)]
        cuts = sorted({round(sum(d for d, _ in seq[:i]), 12) for seq in parts for i in range(len(seq) + 1)})
        for a, b in zip(cuts, cuts[1:]):
            mid = (a + b) / 2
            pairs = []
            for seq in parts:  # the matching each cycle holds at time mid
                t = 0.0
                for d, edges in seq:
                    if t <= mid < t + d:
                        pairs += edges
                        break
                    t += d
            if not pairs or b - a <= rel_tol * term.weight:
                continue
            pairs = tuple(sorted(pairs))
            if out and out[-1].pairs == pairs:
                out[-1] = WeightedMatching(out[-1].weight + b - a, pairs)
            else:
                out.append(WeightedMatching(b - a, pairs))
    return out


def duplex_coverage(m: np.ndarray, slots: list[WeightedMatching]) -> float:
    """``min over pairs of (circuit time - max(M, M^T)) / max(M)`` for a duplex schedule:
    >= 0 (within rounding) when every pair's demand both ways is covered."""
    m = _validate(m)
    n = m.shape[0]
    held = np.zeros((n, n))
    for s in slots:
        for i, j in s.pairs:
            held[i, j] += s.weight
            held[j, i] += s.weight
    sym = np.maximum(m, m.T)
    np.fill_diagonal(sym, 0.0)
    scale = sym.max()
    return float((held - sym).min() / scale) if scale > 0 else 0.0


def weighted_round_robin(m: np.ndarray) -> list[WeightedMatching]:
    """The round-robin 1-factorisation of K_n (:func:`emulation.workloads.matchings.round_robin_matchings`),
    each matching held for the largest ``max(M, M^T)`` demand among its pairs (matchings with no
    demand left out). :raises DecompositionError: bad matrix."""
    m = _validate(m)
    sym = np.maximum(m, m.T)
    out = []
    for match in round_robin_matchings(m.shape[0]):
        w = max(float(sym[i, j]) for i, j in match)
        if w > 0:
            out.append(WeightedMatching(w, tuple(sorted(tuple(sorted(p)) for p in match))))
    return out


def duplex_plan(m: np.ndarray, reconfiguration_bytes: float = 0.0) -> tuple[list[WeightedMatching], str]:
    """The cheaper duplex schedule for ``m`` (module doc): :func:`bidirectional_decompose`
    (``"bvn"``) or :func:`weighted_round_robin` (``"weighted-round-robin"``), by
    ``sum of weights + slots x reconfiguration_bytes`` (R x B, the bytes a port could have sent
    during one dark window); ties go to the fewer slots.

    :returns: ``(slots, method)``. :raises DecompositionError: bad matrix.
    """
    options = [(bidirectional_decompose(m), "bvn"), (weighted_round_robin(m), "weighted-round-robin")]

    def cost(o):
        return (sum(s.weight for s in o[0]) + len(o[0]) * reconfiguration_bytes, len(o[0]))

    return min(options, key=cost)
