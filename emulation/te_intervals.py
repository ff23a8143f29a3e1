"""A WAN traffic-engineering run over a series of traffic matrices (Symphony, arXiv 2510.11937),
as both backends take and give it: its set-up (:class:`WanSetup`, :func:`prepare`: the
topology, its tunnels, the replayed matrices, how the routers are sliced among controllers and
how far each controller's view of the demand is off) and the record of every interval
(:class:`Interval`, and what the packet backend measured in it, :class:`Measured`).

The flow backend's WAN model (:mod:`emulation.flowsim.wan`) and the packet replay
(:mod:`emulation.emulator.wan_replay`) both start from a :class:`WanSetup` and neither imports the
other; the WAN kind's result holds the :class:`Interval` records.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from emulation.planners.divergence import Deviation
from emulation.planners.slicing import Slicing, make_slicing
from emulation.planners.tunnels import Tunnels, k_shortest
from topologies.wan import TrafficMatrices, WanError, WanTopology


@dataclass(frozen=True)
class WanSetup:
    """What both backends derive from a WAN scenario: the topology, its tunnels and capacities
    (``(links,)``, demand units), the replayed matrices (``indices[j]`` is matrix j's index in the
    series, ``matrices[j]`` it times the scale, ``(routers, routers)``), their mean, the slicing
    and every controller's deviation."""

    topo: WanTopology
    tunnels: Tunnels
    capacity: np.ndarray
    indices: list[int]
    matrices: list[np.ndarray]
    mean: np.ndarray
    slicing: Slicing
    deviation: Deviation


def prepare(topo: WanTopology, tms: TrafficMatrices, *, first: int = 0, count: int | None = None,
            scale: float = 1.0, k: int = 4, slice_method: str = "random", slice_count: int = 5,
            slice_seed: int = 0, deviation: Deviation = Deviation()) -> WanSetup:
    """The :class:`WanSetup` of ``count`` matrices of ``tms`` from index ``first`` (default: all
    to the end), each times ``scale``, over the ``k`` shortest tunnels of every demand
    (:func:`emulation.planners.tunnels.k_shortest`), the routers sliced by ``slice_method``
    (``random``: ``slice_count`` slices, seeded with ``slice_seed``;
    :func:`emulation.planners.slicing.make_slicing` on the replayed matrices' mean) and every
    controller's view of the demand off by ``deviation``.

    :raises topologies.wan.WanError: the matrices asked for are not in ``tms``, k < 1, a pair of
        routers has no path, or no valid slicing was found.
    """
    count = count if count is not None else len(tms) - first
    if not 0 <= first < len(tms) or count < 1 or first + count > len(tms):
        raise WanError(f"traffic: {count} matrices from index {first} asked of a series of {len(tms)}")
    indices = list(range(first, first + count))
    mean = tms.matrices[first:first + count].mean(axis=0) * scale
    return WanSetup(topo, k_shortest(topo, k), np.array(topo.capacity), indices,
                    [tms[i] * scale for i in indices], mean,
                    make_slicing(slice_method, topo, mean, slice_count, slice_seed), deviation)


class Measured(BaseModel):
    """What the packet backend measured in one interval: every link's load (demand units, from
    the switches' port counters: ``link_load`` bytes sent into the link, ``link_carried`` bytes
    that came out of it) over the measurement window, per demand ``[src, dst, sent, lost]``
    datagrams (whole interval) and datagrams that arrived out of order, every live slice
    controller's reinstall time (``reinstall_s``: solving its view plus rewriting its groups until
    the switches' barrier replies) and the datagrams lost among those sent from the interval's
    start until the last new group was acknowledged, and the measured blast radius: the
    share of the offered demand whose installed splits are not its controller's fresh solution;
    ``calm``: datagrams sent and lost after the reinstall on demands whose tunnels cross no link
    computed above 90% (they should lose none: the faithfulness check of the replay)."""

    model_config = ConfigDict(extra="forbid")

    window_s: list[float]
    link_load: list[float]
    link_carried: list[float]
    demands: list[list[float]]
    sent: int
    lost: int
    reordered: int
    reinstall_s: dict[str, float]
    lost_during_reinstall: int
    stale_demand_share: float
    events: list[str] = []
    calm: list[int] = [0, 0]


class Interval(BaseModel):
    """One traffic matrix (demand units of the topology): offered, carried by the controllers'
    splits, delivered after proportional sharing on overloaded links, lost there, the MLU, the
    congestion (sum of overload), the worst link's overload (fraction) and every link's load."""

    model_config = ConfigDict(extra="forbid")

    index: int
    offered: float
    carried: float
    delivered: float
    loss: float
    mlu: float
    congestion: float
    max_overload: float
    link_load: list[float]
    measured: Measured | None = None
