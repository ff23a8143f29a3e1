"""Slicing a WAN among TE controllers (Symphony, arXiv 2510.11937): which controller owns which
routers, and so which demands (a demand belongs to the slice of its source router).

- ``one``: a single slice (one central controller);
- ``per-router``: every router its own slice (each router's controller sets its own split ratios:
  current practice);
- ``random``: Symphony's randomised connected slicing into k slices (:func:`random_slicing`).

The blast radius of a slicing is the largest share of the total demand sourced in one slice: what
one failed controller leaves without updates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from emulation.sections import StrictModel, known_name
from topologies.wan import WanError, WanTopology

Method = Literal["random", "per-router", "one"]
METHODS: tuple[str, ...] = ("random", "per-router", "one")

#: A slice may exceed the target weight (total / k) by this fraction, and fall short by as much.
SLACK = 0.3


class SliceSpec(StrictModel):
    """``slices:`` how the routers are sliced among controllers: ``method``, ``count`` (random)
    and ``seed``; :func:`make_slicing` of them."""

    count: int = Field(default=5, ge=1)
    """Slices of the ``random`` method (at most the routers)."""
    method: str = "random"
    """How the routers are sliced among controllers: ``random`` (Symphony's randomised connected
    slicing into ``count`` slices), ``per-router`` (a controller per router) or ``one`` (one
    central controller)."""
    seed: int = 0
    """Seed of the random slicing."""

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        return known_name(v, METHODS, "method")

    def slices(self, routers: int) -> int:
        """How many slices this makes of ``routers`` routers."""
        return {"random": self.count, "per-router": routers, "one": 1}[self.method]


@dataclass(frozen=True)
class Slicing:
    """``slice_of[r]``: the slice (0..count-1) that owns router r."""

    method: str
    slice_of: tuple[int, ...]

    @property
    def count(self) -> int:
        """Number of slices."""
        return max(self.slice_of) + 1

    def routers(self, k: int) -> list[int]:
        """The routers of slice ``k``."""
        return [r for r, s in enumerate(self.slice_of) if s == k]

    def shares(self, matrix: np.ndarray) -> list[float]:
        """Every slice's share of ``matrix``'s total demand (the demand its routers source)."""
        sourced = np.asarray(matrix, dtype=float).sum(axis=1)
        per = np.bincount(self.slice_of, weights=sourced, minlength=self.count)
        return [float(x) for x in (per / per.sum() if per.sum() > 0 else per)]

    def blast_radius(self, matrix: np.ndarray) -> float:
        """The largest share of ``matrix``'s total demand sourced in one slice (0..1)."""
        return max(self.shares(matrix))


def make_slicing(method: Method, topo: WanTopology, mean_matrix: np.ndarray, count: int = 5,
                 seed: int = 0, attempts: int = 100) -> Slicing:
    """The slicing of ``topo`` by ``method`` (module doc); ``count``, ``seed`` and ``attempts`` are
    for ``random``. :raises WanError: unknown method, or no valid random slicing was found."""
    if method == "one":
        return Slicing("one", (0,) * topo.routers)
    if method == "per-router":
        return Slicing("per-router", tuple(range(topo.routers)))
    if method == "random":
        return random_slicing(topo, mean_matrix, count, seed, attempts)
    raise WanError(f"slices.method: unknown {method!r} (known: {', '.join(METHODS)})")


def random_slicing(topo: WanTopology, mean_matrix: np.ndarray, count: int, seed: int = 0,
                   attempts: int = 100) -> Slicing:
    """Symphony's randomised connected slicing (its artefact's procedure):

    every router weighs the demand it sources in ``mean_matrix``; the target weight of a slice is
    total / count. Each attempt seeds the slices with heavy sources that are not neighbours of one
    another, then random routers; grows the slices in turn through unassigned neighbours (so each
    stays connected), taking the heaviest neighbour that keeps the slice within the target, else a
    random one within ``(1 + SLACK)`` of it; and is rejected if some router cannot be reached, a
    slice ends below ``(1 - SLACK)`` of the target, or it repeats an earlier slicing. Of the
    ``attempts`` (seeded), the one whose per-slice sourced demand has the smallest standard
    deviation is kept.

    A router that alone sources more than ``(1 + SLACK)`` of the target (GEANT's heaviest sources
    37% of its demand) fits no slice within the quota: such routers are peeled off first, each a slice of its
    own, and the rest is sliced into the remaining slices with the target recomputed over the
    remaining demand (our extension; the artefact would find no valid slicing).

    :raises WanError: ``count`` outside ``1..routers``, or no attempt was valid.
    """
    n = topo.routers
    if not 1 <= count <= n:
        raise WanError(f"slices.count: must be in 1..{n} for {topo.name}, got {count}")
    weight = np.asarray(mean_matrix, dtype=float).sum(axis=1)
    alone: list[int] = []
    for r in np.argsort(-weight, kind="stable"):
        rest = count - len(alone)
        if rest <= 1 or weight[r] <= (1 + SLACK) * (weight.sum() - weight[alone].sum()) / rest:
            break
        alone.append(int(r))
    target = (weight.sum() - weight[alone].sum()) / (count - len(alone))
    neighbours = [set() for _ in range(n)]
    for u, v in topo.links:
        neighbours[u].add(v)
        neighbours[v].add(u)
    rng = np.random.default_rng(seed)
    best, best_sd, seen = None, np.inf, set()
    for _ in range(attempts):
        got = _attempt(n, count, weight, target, neighbours, rng, alone)
        if got is None:
            continue
        key = _canonical(got)
        if key in seen:
            continue
        seen.add(key)
        sd = float(np.std(np.bincount(got, weights=weight, minlength=count)))
        if sd < best_sd:
            best, best_sd = got, sd
    if best is None:
        raise WanError(f"slices: no valid random slicing of {topo.name} into {count} slices in {attempts} attempts")
    return Slicing("random", tuple(int(s) for s in best))


def _attempt(n, count, weight, target, neighbours, rng, alone=()) -> list[int] | None:
    slice_of = [-1] * n
    order = [r for r in np.argsort(-weight, kind="stable") if r not in alone]
    seeds: list[int] = list(alone)
    for r in order:  # heavy sources, spread apart (no two seeds adjacent), half of the seeds at most
        if len(seeds) >= len(alone) + (count - len(alone) + 1) // 2:
            break
        if all(r not in neighbours[s] for s in seeds) and rng.random() < 0.8:
            seeds.append(int(r))
    rest = [r for r in range(n) if r not in seeds]
    rng.shuffle(rest)
    seeds += [int(r) for r in rest[:count - len(seeds)]]
    load = np.zeros(count)
    for k, r in enumerate(seeds):
        slice_of[r] = k
        load[k] = weight[r]
    growing = True
    while growing and -1 in slice_of:
        growing = False
        for k in range(len(alone), count):
            cands = sorted({v for r in range(n) if slice_of[r] == k for v in neighbours[r] if slice_of[v] < 0})
            if not cands:
                continue
            fits = [v for v in cands if load[k] + weight[v] <= target]
            if fits:
                pick = max(fits, key=lambda v: weight[v])
            else:
                loose = [v for v in cands if load[k] + weight[v] <= target * (1 + SLACK)]
                if not loose:
                    continue
                pick = loose[rng.integers(len(loose))]
            slice_of[pick] = k
            load[k] += weight[pick]
            growing = True
    if -1 in slice_of or load[len(alone):].min() < target * (1 - SLACK):
        return None
    return slice_of


def _canonical(slice_of: list[int]) -> tuple[int, ...]:
    """The slicing with slices renumbered in order of first appearance (equal partitions compare equal)."""
    names: dict[int, int] = {}
    return tuple(names.setdefault(s, len(names)) for s in slice_of)
