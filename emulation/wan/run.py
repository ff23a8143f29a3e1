"""A WAN scenario on the flow backend: every traffic matrix an interval, allocated by the slices'
controllers (each on its own view of the demand, :mod:`emulation.planners.divergence`) and carried on
the true demand, with the links shared proportionally where the union overloads them.

Per interval (demand units of the topology): ``offered`` (the matrix), ``carried`` (what the
controllers' splits admit), ``delivered`` (after proportional sharing: a tunnel whose busiest link
is loaded L over capacity c delivers c / L of what it carries), ``loss = carried - delivered``,
the MLU, ``congestion`` (sum of overload) and the worst link's overload; every link's load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from emulation.output import Progress
from emulation.planners.divergence import Deviation, Outcome, diverged
from emulation.wan.results import Interval, Measured, WanResult
from emulation.planners.slicing import Slicing, make_slicing
from emulation.planners.tunnels import Tunnels, k_shortest
from topologies.wan import WanTopology



def delivered(tunnels: Tunnels, splits: np.ndarray, volumes: np.ndarray, load: np.ndarray,
              capacity: np.ndarray) -> float:
    """Demand delivered when every overloaded link passes ``capacity / load`` of what enters it,
    a tunnel being limited by its most overloaded link (proportional share)."""
    share = np.minimum(1.0, np.asarray(capacity, dtype=float) / np.maximum(load, 1e-300))
    worst = np.array([share[list(p)].min() if p else 1.0 for p in tunnels.paths])
    return float((splits * volumes[tunnels.demand_of] * worst).sum())


@dataclass(frozen=True)
class WanSetup:
    """What both backends derive from a WAN scenario: the topology, its tunnels and capacities,
    the replayed matrices (``indices[j]`` is matrix j's index in the series, ``matrices[j]`` it
    times the scale), their mean, the slicing and every controller's deviation."""

    topo: WanTopology
    tunnels: Tunnels
    capacity: np.ndarray
    indices: list[int]
    matrices: list[np.ndarray]
    mean: np.ndarray
    slicing: Slicing
    deviation: Deviation


def prepare(sc) -> WanSetup:
    """The :class:`WanSetup` of ``sc`` (a :class:`emulation.kinds.wan.WanScenario`). :raises topologies.wan.WanError: unreadable data."""
    w = sc.wan
    topo, tms = w.load()
    first = w.traffic.first
    count = w.traffic.count if w.traffic.count is not None else len(tms) - first
    indices = list(range(first, first + count))
    mean = tms.matrices[first:first + count].mean(axis=0) * w.traffic.scale
    return WanSetup(topo, k_shortest(topo, w.tunnels.k), np.array(topo.capacity), indices,
                    [tms[i] * w.traffic.scale for i in indices], mean,
                    make_slicing(w.slices.method, topo, mean, w.slices.count, w.slices.seed),
                    Deviation(w.divergence.distribution, w.divergence.sd, w.divergence.seed))


def interval(setup: WanSetup, j: int, out: Outcome, measured: Measured | None = None) -> Interval:
    """Interval ``j`` of ``setup`` from the union's outcome on the true matrix (module doc)."""
    vol = setup.tunnels.volumes(setup.matrices[j])
    got = delivered(setup.tunnels, out.splits, vol, out.load, setup.capacity)
    return Interval(index=setup.indices[j], offered=float(vol.sum()), carried=out.carried, delivered=got,
                    loss=max(0.0, out.carried - got), mlu=out.mlu, congestion=out.congestion,
                    max_overload=out.max_overload, link_load=[float(x) for x in out.load], measured=measured)


def result(sc, setup: WanSetup, intervals: list[Interval], packet: dict | None = None) -> WanResult:
    """The :class:`WanResult` of ``intervals`` (``packet``: the packet backend's settings)."""
    w, topo, slicing, mean = sc.wan, setup.topo, setup.slicing, setup.mean
    return WanResult(
        topology={"name": topo.name, "routers": list(topo.names), "links": [list(l) for l in topo.links],
                  "capacity": list(topo.capacity)},
        te={"objective": w.te.objective, "regulariser": w.te.lam, "capacity_headroom": w.te.capacity_headroom},
        tunnels={"k": w.tunnels.k, "count": len(setup.tunnels.paths)},
        slicing={"method": slicing.method, "count": slicing.count, "slice_of": list(slicing.slice_of),
                 "blast_radius": slicing.blast_radius(mean), "shares": slicing.shares(mean)},
        divergence=w.divergence.model_dump(), traffic=w.traffic.model_dump(), intervals=intervals, packet=packet)


def run_wan(sc, progress: Progress | None = None) -> WanResult:
    """Run every interval of ``sc`` (module doc); deterministic in the scenario's seeds.

    :raises emulation.planners.te.TeError: a solver failed.
    """
    w = sc.wan
    setup = prepare(sc)
    count = len(setup.indices)
    intervals = []
    for j, (i, tm) in enumerate(zip(setup.indices, setup.matrices)):
        if progress:
            progress(f"matrix {i}", j, count)
        out = diverged(setup.tunnels, tm, setup.capacity, setup.slicing, w.te.objective, setup.deviation, i,
                       w.te.lam, w.te.capacity_headroom)
        intervals.append(interval(setup, j, out))
    if progress:
        progress("done", count, count)
    return result(sc, setup, intervals)
