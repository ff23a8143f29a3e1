"""A WAN scenario on the flow backend: every traffic matrix an interval, allocated by the slices'
controllers (each on its own view of the demand, :mod:`emulation.wan.divergence`) and carried on
the true demand, with the links shared proportionally where the union overloads them.

Per interval (demand units of the topology): ``offered`` (the matrix), ``carried`` (what the
controllers' splits admit), ``delivered`` (after proportional sharing: a tunnel whose busiest link
is loaded L over capacity c delivers c / L of what it carries), ``loss = carried - delivered``,
the MLU, ``congestion`` (sum of overload) and the worst link's overload; every link's load.
"""

from __future__ import annotations

import datetime as dt
import platform
from collections.abc import Callable

import numpy as np

from emulation import __version__
from emulation.wan.divergence import Deviation, diverged
from emulation.wan.results import Interval, WanResult
from emulation.wan.scenario import WanScenario
from emulation.wan.slicing import make_slicing
from emulation.wan.tunnels import Tunnels, k_shortest

Progress = Callable[[str, int, int], None]


def delivered(tunnels: Tunnels, splits: np.ndarray, volumes: np.ndarray, load: np.ndarray,
              capacity: np.ndarray) -> float:
    """Demand delivered when every overloaded link passes ``capacity / load`` of what enters it,
    a tunnel being limited by its most overloaded link (proportional share)."""
    share = np.minimum(1.0, np.asarray(capacity, dtype=float) / np.maximum(load, 1e-300))
    worst = np.array([share[list(p)].min() if p else 1.0 for p in tunnels.paths])
    return float((splits * volumes[tunnels.demand_of] * worst).sum())


def run_wan(sc: WanScenario, progress: Progress | None = None) -> WanResult:
    """Run every interval of ``sc`` (module doc); deterministic in the scenario's seeds.

    :raises emulation.wan.te.TeError: a solver failed.
    """
    w = sc.wan
    topo, tms = w.load()
    first = w.traffic.first
    count = w.traffic.count if w.traffic.count is not None else len(tms) - first
    picked = range(first, first + count)
    tunnels = k_shortest(topo, w.tunnels.k)
    cap = np.array(topo.capacity)
    mean = tms.matrices[first:first + count].mean(axis=0) * w.traffic.scale
    slicing = make_slicing(w.slices.method, topo, mean, w.slices.count, w.slices.seed)
    dev = Deviation(w.divergence.distribution, w.divergence.sd, w.divergence.seed)
    intervals = []
    for j, i in enumerate(picked):
        if progress:
            progress(f"matrix {i}", j, count)
        tm = tms[i] * w.traffic.scale
        out = diverged(tunnels, tm, cap, slicing, w.te.objective, dev, i, w.te.lam, w.te.headroom)
        vol = tunnels.volumes(tm)
        got = delivered(tunnels, out.splits, vol, out.load, cap)
        intervals.append(Interval(index=i, offered=float(vol.sum()), carried=out.carried, delivered=got,
                                  loss=max(0.0, out.carried - got), mlu=out.mlu, congestion=out.congestion,
                                  max_overload=out.max_overload, link_load=[float(x) for x in out.load]))
    if progress:
        progress("done", count, count)
    return WanResult(
        scenario=sc.name, backend="flow", created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        versions={"ocslab": __version__, "python": platform.python_version()},
        topology={"name": topo.name, "routers": list(topo.names), "links": [list(l) for l in topo.links],
                  "capacity": list(topo.capacity)},
        te={"objective": w.te.objective, "regulariser": w.te.lam, "headroom": w.te.headroom},
        tunnels={"k": w.tunnels.k, "count": len(tunnels.paths)},
        slicing={"method": slicing.method, "count": slicing.count, "slice_of": list(slicing.slice_of),
                 "blast_radius": slicing.blast_radius(mean)},
        divergence=w.divergence.model_dump(), traffic=w.traffic.model_dump(), intervals=intervals)
