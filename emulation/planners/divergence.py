"""The divergence experiment (Symphony, arXiv 2510.11937): slice controllers that see slightly
different demands, each installing only its own demands' splits, and what the union does to the
links under the true demand.

For one traffic matrix D and a slicing, every slice i draws its own view
``D_i[d] = D[d] (1 - p)`` with ``p`` drawn per demand from the deviation distribution (the
production one is private; :class:`Deviation` documents ours), solves TE on ``D_i`` and keeps the
splits of the demands sourced in its slice; the union of the slices' splits carries the true D.
Congestion is ``sum_e max(0, load_e - c_e)`` (demand units) and the overload
``max_e (load_e / c_e - 1)``, 0 if no link is above capacity.

A planner beside the TE solvers (:mod:`emulation.planners.te`) and the slicing
(:mod:`emulation.planners.slicing`): the flow backend's WAN model (:mod:`emulation.flowsim.wan`)
solves every slice here (:func:`diverged`); the packet replay (:mod:`emulation.emulator.wan_replay`)
hands the same :func:`views` to real controllers and evaluates the splits they installed
(:func:`evaluate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field

from emulation.planners.slicing import Slicing
from emulation.planners.te import Objective, link_load, solve
from emulation.planners.tunnels import Tunnels
from emulation.sections import StrictModel


class Deviation(StrictModel):
    """``divergence:`` how far a controller's view of a demand is off: every controller sees
    ``D (1 - p)``, p drawn independently per slice and demand from a generator seeded with
    ``seed`` and the matrix index, capped at 0.95."""

    distribution: Literal["half-normal", "heavy-tail"] = "half-normal"
    """How a controller's error p on a demand is drawn, per controller and demand:
    ``half-normal`` (``|N(0, sd)|``) or ``heavy-tail`` (``Lomax(shape 3) x sd x 2``: the
    same scale, rare large errors); p is capped at 0.95."""
    sd: float = Field(default=0.05, ge=0, le=0.5)
    """Scale of the error p, a fraction of the demand; 0: every controller sees the true demand."""
    seed: int = 0
    """Seed of the error draws (with the matrix index)."""

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` deviations p in [0, 0.95]."""
        if self.distribution == "half-normal":
            p = np.abs(rng.normal(0.0, self.sd, size))
        else:
            p = rng.pareto(3.0, size) * self.sd * 2
        return np.minimum(p, 0.95)


@dataclass(frozen=True)
class Outcome:
    """The union's effect on the links for one matrix: ``congestion`` (demand units, summed over
    links), ``max_overload`` (fraction above capacity of the worst link), ``mlu``, the union's
    splits and link loads under the true demand, and the demand carried."""

    congestion: float
    max_overload: float
    mlu: float
    carried: float
    splits: np.ndarray
    load: np.ndarray


def evaluate(tunnels: Tunnels, splits: np.ndarray, matrix: np.ndarray, capacity: np.ndarray) -> Outcome:
    """The links under ``matrix`` when tunnel t carries ``splits[t]`` of its demand."""
    vol = tunnels.volumes(matrix)
    load = link_load(tunnels, splits, vol)
    cap = np.asarray(capacity, dtype=float)
    util = load / cap
    return Outcome(float(np.maximum(load - cap, 0.0).sum()), float(max(util.max(initial=0.0) - 1.0, 0.0)),
                   float(util.max(initial=0.0)), float(splits @ vol[tunnels.demand_of]), splits, load)


def views(tunnels: Tunnels, matrix: np.ndarray, slicing: Slicing, deviation: Deviation,
          index: int = 0) -> dict[int, np.ndarray]:
    """``{slice: its view of matrix}`` for every slice that sources a demand: demand d seen as
    ``D_d (1 - p)``, p drawn per slice and demand from a generator seeded with the deviation's
    seed and ``index`` (the matrix's index in its series)."""
    vol = tunnels.volumes(matrix)
    source = np.array([slicing.slice_of[s] for s, _ in tunnels.demands])
    rng = np.random.default_rng([deviation.seed, index])
    src, dst = np.array(tunnels.demands).T
    out = {}
    for k in range(slicing.count):
        if not (source == k).any():
            continue
        view = np.zeros(np.shape(matrix))
        view[src, dst] = vol * (1 - deviation.draw(rng, len(vol)))
        out[k] = view
    return out


def owned(tunnels: Tunnels, slicing: Slicing, k: int) -> np.ndarray:
    """``(tunnels,)`` bool: the tunnels of the demands slice k sources."""
    source = np.array([slicing.slice_of[s] for s, _ in tunnels.demands])
    return np.isin(tunnels.demand_of, np.flatnonzero(source == k))


def diverged(tunnels: Tunnels, matrix: np.ndarray, capacity: np.ndarray, slicing: Slicing, objective: Objective,
             deviation: Deviation, index: int = 0, regulariser: float = 0.0, headroom: float = 0.0) -> Outcome:
    """Every slice solves ``objective`` on its own view of ``matrix`` (:func:`views`) and
    installs its own demands' splits; the union under the true demand (module doc)."""
    splits = np.zeros(len(tunnels.paths))
    for k, view in views(tunnels, matrix, slicing, deviation, index).items():
        sol = solve(tunnels, view, capacity, objective, regulariser, headroom)
        mine = owned(tunnels, slicing, k)
        splits[mine] = sol.splits[mine]
    return evaluate(tunnels, splits, matrix, capacity)
