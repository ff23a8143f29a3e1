"""A WAN on the flow backend (Symphony, arXiv 2510.11937): every traffic matrix an interval,
allocated by the slices' controllers (each on its own view of the demand,
:func:`emulation.planners.divergence.diverged`) and carried on the true demand, with the links
shared proportionally where the union overloads them.

Per interval (demand units of the topology): ``offered`` (the matrix), ``carried`` (what the
controllers' splits admit), ``delivered`` (after proportional sharing: a tunnel whose busiest link
is loaded L over capacity c delivers c / L of what it carries), ``loss = carried - delivered``,
the MLU, ``congestion`` (sum of overload) and the worst link's overload; every link's load
(:class:`emulation.te_intervals.Interval`). :func:`run_wan` runs a ``wan:`` section into a
:class:`~emulation.te_intervals.WanResult`.
"""

from __future__ import annotations

import numpy as np

from emulation.output import Progress
from emulation.planners.divergence import Outcome, diverged
from emulation.planners.te import Objective
from emulation.planners.tunnels import Tunnels
from emulation.te_intervals import Interval, Measured, WanResult, WanSetup, WanSpec


def delivered(tunnels: Tunnels, splits: np.ndarray, volumes: np.ndarray, load: np.ndarray,
              capacity: np.ndarray) -> float:
    """Demand delivered when every overloaded link passes ``capacity / load`` of what enters it,
    a tunnel being limited by its most overloaded link (proportional share). ``splits``:
    ``(tunnels,)``; ``volumes``: ``(demands,)``; ``load``, ``capacity``: ``(links,)``, demand
    units."""
    share = np.minimum(1.0, np.asarray(capacity, dtype=float) / np.maximum(load, 1e-300))
    worst = np.array([share[list(p)].min() if p else 1.0 for p in tunnels.paths])
    return float((splits * volumes[tunnels.demand_of] * worst).sum())


def interval(setup: WanSetup, j: int, out: Outcome, measured: Measured | None = None) -> Interval:
    """Interval ``j`` of ``setup`` from the union's outcome on the true matrix (module doc), with
    what the packet backend ``measured`` in it, if anything."""
    vol = setup.tunnels.volumes(setup.matrices[j])
    got = delivered(setup.tunnels, out.splits, vol, out.load, setup.capacity)
    return Interval(index=setup.indices[j], offered=float(vol.sum()), carried=out.carried, delivered=got,
                    loss=max(0.0, out.carried - got), mlu=out.mlu, congestion=out.congestion,
                    max_overload=out.max_overload, link_load=[float(x) for x in out.load], measured=measured)


def simulate_wan(setup: WanSetup, objective: Objective, regulariser: float = 0.0, headroom: float = 0.0,
                 progress: Progress | None = None) -> list[Interval]:
    """Every interval of ``setup`` (module doc): each slice solves ``objective`` (with Symphony's
    ``regulariser`` lambda and the capacity ``headroom`` fraction; :func:`emulation.planners.te.solve`)
    on its own view of the matrix; deterministic in the deviation's seed.

    :param progress: called as ``progress(label, done, total)`` before each matrix.
    :raises emulation.planners.te.TeError: a solver failed.
    """
    count = len(setup.indices)
    intervals = []
    for j, (i, tm) in enumerate(zip(setup.indices, setup.matrices)):
        if progress:
            progress(f"matrix {i}", j, count)
        out = diverged(setup.tunnels, tm, setup.capacity, setup.slicing, objective, setup.deviation, i,
                       regulariser, headroom)
        intervals.append(interval(setup, j, out))
    if progress:
        progress("done", count, count)
    return intervals


def run_wan(spec: WanSpec, progress: Progress | None = None) -> WanResult:
    """A ``wan:`` section on the flow backend: every matrix an interval, solved by every slice on
    its own view and carried on the true demand (:func:`simulate_wan`); deterministic in its
    seeds.

    :raises WanError: unreadable data. :raises emulation.planners.te.TeError: a solver failed.
    """
    setup, te = spec.setup(), spec.te
    return WanResult.of(spec, setup, simulate_wan(setup, te.objective, te.lam, te.capacity_headroom, progress))
