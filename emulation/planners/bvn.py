"""Birkhoff-von Neumann decomposition of a demand matrix into weighted circuit configurations.

Spec: ``specs/fabrics.md`` (PipSwitch: "for a non-uniform demand matrix, a Birkhoff-von Neumann
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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching


class DecompositionError(ValueError):
    """The matrix cannot be decomposed (negative, not square, not finite)."""


@dataclass(frozen=True)
class WeightedMatching:
    """A permutation ``perm`` (``perm[i]`` = the GPU that i sends to; ``perm[i] == i`` means
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


def bvn_decompose(m: np.ndarray, rel_tol: float = 1e-9, max_terms: int | None = None) -> list[WeightedMatching]:
    """Decompose the stuffed ``m`` into weighted permutations (module doc), largest first.

    :param m: (n, n) demand, bytes. :param rel_tol: stop when every remaining cell is below
        ``rel_tol x max(M')``. :param max_terms: default n^2.
    :returns: ``[WeightedMatching]`` with ``sum weight x P = stuff(m)`` within ``rel_tol``.
    :raises DecompositionError: bad matrix.
    """
    rest = stuff(m)
    n = rest.shape[0]
    scale = rest.max()
    if scale <= 0:
        return []
    out: list[WeightedMatching] = []
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
        out.append(WeightedMatching(w, tuple(int(c) for c in cols)))
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
    match = maximum_bipartite_matching(csr_matrix(mask.astype(np.int8)), perm_type="column")
    return bool((match >= 0).all())


def reconstruct(terms: list[WeightedMatching], n: int) -> np.ndarray:
    """``sum_k w_k P_k`` as an (n, n) matrix."""
    out = np.zeros((n, n))
    for t in terms:
        out[np.arange(n), list(t.perm)] += t.weight
    return out


def reconstruction_error(m: np.ndarray, terms: list[WeightedMatching]) -> float:
    """``|sum_k w_k P_k - stuff(M)|_max / max(stuff(M))`` (0 for an all-zero M)."""
    target = stuff(m)
    scale = target.max()
    return float(np.abs(reconstruct(terms, target.shape[0]) - target).max() / scale) if scale > 0 else 0.0
