"""A WAN traffic-engineering run over a series of traffic matrices (Symphony, arXiv 2510.11937),
as both backends take and give it: the ``wan:`` section (:class:`WanSpec`: the topology and the
sections of its traffic, tunnels, TE, slicing, divergence and packet replay; :meth:`WanSpec.check`
against the topology's data, :meth:`WanSpec.routes` for one matrix's TE solution), its set-up
(:class:`WanSetup`, :func:`prepare`: the topology, its tunnels, the replayed matrices, how the
routers are sliced among controllers and how far each controller's view of the demand is off),
the record of every interval (:class:`Interval`, and what the packet backend measured in it,
:class:`Measured`) and the run's result (:class:`WanResult`).

The flow backend's WAN model (:mod:`emulation.flowsim.wan`) and the packet replay
(:mod:`emulation.emulator.wan_replay`) both start from a :class:`WanSetup` and neither imports the
other. The sections a WAN run is prepared from live with what they parametrise:
:class:`TrafficSpec` and the packet replay's :class:`ReplaySpec` here, the tunnels', TE's,
slicing's and deviation's with their planners. :func:`summary` and :func:`agreement` condense a
series of intervals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from emulation.envelope import FailedCheck
from emulation.planners.divergence import Deviation
from emulation.planners.slicing import SliceSpec, Slicing, make_slicing
from emulation.planners.te import TeRoutes, TeSpec, te_routes
from emulation.planners.tunnels import Tunnels, TunnelSpec, k_shortest
from emulation.sections import SectionError, StrictModel
from topologies.wan import TrafficMatrices, WanError, WanTopology, load_bundled, wan_directory


class TrafficSpec(StrictModel):
    """``traffic:`` the topology's own matrices (``bundled``) or a ``tm,src,dst,demand`` CSV
    over its routers, multiplied by ``scale``, ``count`` of them from index ``first`` (default:
    all)."""

    matrices: str = "bundled"
    """The demand matrices: ``bundled`` (the topology's own) or the path of a
    ``tm,src,dst,demand`` CSV over its routers (demands in the unit of the link capacities)."""
    scale: float = Field(default=1.0, gt=0)
    """Factor every demand is multiplied by."""
    first: int = Field(default=0, ge=0)
    """Index of the first matrix replayed."""
    count: int | None = Field(default=None, ge=1)
    """Matrices replayed from ``first``, one interval each; none: all the rest."""

    def replayed(self, available: int) -> int:
        """How many matrices are replayed of a series of ``available``."""
        return self.count if self.count is not None else available - self.first


class KillSpec(StrictModel):
    """``replay.kill:`` SIGKILL slice ``slice``'s controller at the start of interval
    ``interval`` (counted from the first replayed matrix)."""

    slice: int = Field(ge=0)
    """The slice whose controller is killed (SIGKILL), 0-based."""
    interval: int = Field(ge=1)
    """The interval at whose start it is killed, counted from the first replayed matrix."""


class FailSpec(StrictModel):
    """``replay.fail:`` take the cable of ``link`` ``[u, v]`` (router indices; both directions)
    down halfway through interval ``interval``; every controller recomputes without it."""

    link: tuple[int, int]
    """The link ``[u, v]`` taken down, router indices (both directions of its cable)."""
    interval: int = Field(ge=0)
    """The interval halfway through which it goes down, counted from the first replayed matrix."""


class ReplaySpec(StrictModel):
    """``replay:`` how the packet backend replays the matrices
    (:func:`emulation.emulator.wan_replay.replay_wan`): ``interval_s`` how long each matrix is
    replayed, ``flows`` UDP flows per demand, ``payload_bytes`` per datagram, ``warmup_s`` after
    each interval's start before link loads are measured, and the faults ``kill`` and ``fail``.
    (The emulated rate of the largest-capacity link is the scenario's ``emulation.link_mbps``:
    Mbit/s of frames, every link shaped in proportion to its capacity.)"""

    interval_s: float = Field(default=3.0, ge=1.0, le=60)
    """How long each matrix is replayed, seconds."""
    flows: int = Field(default=128, ge=1, le=1000)
    """UDP flows per demand (the routers' select groups split flows, not packets)."""
    payload_bytes: int = Field(default=500, ge=64, le=1400)
    """UDP payload of every datagram, bytes."""
    warmup_s: float = Field(default=1.0, ge=0.2)
    """Time from each interval's start to when link loads are measured, seconds (at least 0.5 s
    of the interval must remain)."""
    kill: KillSpec | None = None
    """A slice controller killed during the replay; none: no kill."""
    fail: FailSpec | None = None
    """A link taken down during the replay; none: no link fails."""

    @model_validator(mode="after")
    def _warmup(self):
        if self.warmup_s > self.interval_s - 0.5:
            raise ValueError(f"warmup_s: {self.warmup_s} leaves under 0.5 s of the {self.interval_s} s interval")
        return self


class WanSpec(StrictModel):
    """``wan:``: the topology (bundled: ``b4``, ``abilene``, ``geant``; or a directory with
    ``topology.json`` and ``traffic_matrices.csv``, :mod:`topologies.wan`), the sections of the
    layers they parametrise (traffic and replay here; tunnels, TE, slicing, divergence:
    :mod:`emulation.planners`)."""

    topology: str
    """The WAN: ``b4``, ``abilene`` or ``geant`` (bundled with their matrices), or a directory
    holding ``topology.json`` and ``traffic_matrices.csv``."""
    traffic: TrafficSpec = TrafficSpec()
    """Which demand matrices are replayed, and how scaled."""
    tunnels: TunnelSpec = TunnelSpec()
    """The tunnels every demand may use."""
    te: TeSpec = TeSpec()
    """The TE every controller solves."""
    slices: SliceSpec = SliceSpec()
    """How the routers are sliced among controllers."""
    divergence: Deviation = Deviation()
    """How far each controller's view of the demand is off the true demand."""
    replay: ReplaySpec = ReplaySpec()
    """How the packet backend replays the matrices, and its faults."""

    @field_validator("topology")
    @classmethod
    def _topology(cls, v: str) -> str:
        wan_directory(v)
        return v

    def load(self) -> tuple[WanTopology, TrafficMatrices]:
        """The topology and its traffic matrices (all of them, unscaled). :raises WanError:
        unreadable files."""
        return load_bundled(self.topology, self.traffic.matrices)

    def check(self) -> None:
        """That the replayed matrices, the slices and the faults exist in the topology's data.

        :raises SectionError: ``wan.FIELD: problem``. :raises WanError: unreadable files."""
        topo, tms = self.load()
        t, s, p = self.traffic, self.slices, self.replay
        if t.first >= len(tms):
            raise SectionError(f"wan.traffic.first: {t.first} but {self.topology} has {len(tms)} matrices")
        if t.count is not None and t.first + t.count > len(tms):
            raise SectionError(f"wan.traffic.count: {t.first} + {t.count} exceeds the {len(tms)} matrices")
        if s.method == "random" and s.count > topo.routers:
            raise SectionError(f"wan.slices.count: {s.count} slices of {topo.routers} routers")
        count, slices = t.replayed(len(tms)), s.slices(topo.routers)
        if p.kill is not None and p.kill.slice >= slices:
            raise SectionError(f"wan.replay.kill.slice: {p.kill.slice} but there are {slices} slices")
        if p.kill is not None and p.kill.interval >= count:
            raise SectionError(f"wan.replay.kill.interval: {p.kill.interval} but {count} matrices are replayed")
        if p.fail is not None and tuple(p.fail.link) not in topo.links:
            raise SectionError(f"wan.replay.fail.link: {list(p.fail.link)} is not a link of {topo.name}")
        if p.fail is not None and p.fail.interval >= count:
            raise SectionError(f"wan.replay.fail.interval: {p.fail.interval} but {count} matrices are replayed")

    def setup(self) -> WanSetup:
        """What both backends replay (:func:`prepare`). :raises WanError: unreadable data."""
        return prepare(*self.load(), self.traffic, self.tunnels, self.slices, self.divergence)

    def routes(self, index: int, data: tuple[WanTopology, TrafficMatrices] | None = None) -> TeRoutes:
        """The TE solution of matrix ``index`` (scaled), solved by one central controller on the
        true demand (:func:`emulation.planners.te.te_routes`); ``data``: the topology and matrices
        when already loaded (:meth:`load`).

        :raises IndexError: no such matrix. :raises emulation.planners.te.TeError: the solver failed.
        """
        topo, tms = data if data is not None else self.load()
        if not 0 <= index < len(tms):
            raise IndexError(f"must be in 0..{len(tms) - 1} for {topo.name}, got {index}")
        te = self.te
        return te_routes(topo, k_shortest(topo, self.tunnels.k), tms[index] * self.traffic.scale, te.objective, te.lam,
                         te.capacity_headroom)


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


def prepare(topo: WanTopology, tms: TrafficMatrices, traffic: TrafficSpec = TrafficSpec(),
            tunnels: TunnelSpec = TunnelSpec(), slices: SliceSpec = SliceSpec(),
            deviation: Deviation = Deviation()) -> WanSetup:
    """The :class:`WanSetup` of ``traffic.count`` matrices of ``tms`` from index ``traffic.first``
    (default: all to the end), each times ``traffic.scale``, over the ``tunnels.k`` shortest
    tunnels of every demand (:func:`emulation.planners.tunnels.k_shortest`), the routers sliced
    by ``slices`` (:func:`emulation.planners.slicing.make_slicing` on the replayed matrices' mean)
    and every controller's view of the demand off by ``deviation``.

    :raises topologies.wan.WanError: the matrices asked for are not in ``tms``, a pair of routers
        has no path, or no valid slicing was found.
    """
    first, count = traffic.first, traffic.replayed(len(tms))
    if not 0 <= first < len(tms) or count < 1 or first + count > len(tms):
        raise WanError(f"traffic: {count} matrices from index {first} asked of a series of {len(tms)}")
    indices = list(range(first, first + count))
    mean = tms.matrices[first:first + count].mean(axis=0) * traffic.scale
    return WanSetup(topo, k_shortest(topo, tunnels.k), np.array(topo.capacity), indices,
                    [tms[i] * traffic.scale for i in indices], mean,
                    make_slicing(slices.method, topo, mean, slices.count, slices.seed), deviation)


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

    def worst_demand(self) -> tuple[int, int, float]:
        """``(src, dst, share lost)`` of the demand that lost the largest share of its datagrams."""
        d = max(self.demands, key=lambda d: d[3] / d[2] if d[2] else 0)
        return int(d[0]), int(d[1]), d[3] / d[2] if d[2] else 0.0


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


#: A demand whose tunnels cross no link computed above this utilisation should lose nothing
#: (the packet replay's ``calm`` datagrams, :attr:`Measured.calm`).
CALM_UTILISATION = 0.9
#: Most datagrams such demands may lose (share): past it the emulator, not the modelled network,
#: dropped them, and the run fails its check (:func:`calm_loss`).
CALM_LOSS = 0.01


def calm_loss(measured: list[Measured]) -> FailedCheck | None:
    """The packet replay's faithfulness check: demands far from any overloaded link (outside
    reinstalls and faults; ``measured``: every interval's :attr:`Measured.calm`) lost at most
    :data:`CALM_LOSS` of their datagrams; the failed check if they lost more, else None."""
    sent = sum(m.calm[0] for m in measured)
    lost = sum(m.calm[1] for m in measured)
    if not sent or lost <= CALM_LOSS * sent:
        return None
    return FailedCheck(check="calm loss", detail=f"{lost} of {sent} datagrams ({lost / sent:.2%}) were lost on paths "
                                                 f"loaded below {CALM_UTILISATION:.0%} (at most {CALM_LOSS:.0%}): this "
                                                 "machine dropped packets the network would carry; lower "
                                                 "emulation.link_mbps or raise wan.replay.payload_bytes")


#: Links loaded below this fraction of capacity are left out of :func:`agreement`'s relative error.
AGREEMENT_FLOOR = 0.1


def summary(intervals: list[Interval]) -> dict[str, float]:
    """Over ``intervals``: mean congestion, largest overload (fraction), mean delivered /
    offered, mean loss / carried."""
    iv = intervals
    return {"mean_congestion": float(np.mean([i.congestion for i in iv])),
            "max_overload": max((i.max_overload for i in iv), default=0.0),
            "delivered_over_offered": float(np.mean([i.delivered / i.offered for i in iv if i.offered > 0])),
            "loss_over_carried": float(np.mean([i.loss / i.carried for i in iv if i.carried > 0]))}


def agreement(intervals: list[Interval], capacity: list[float], skip: set[int] = frozenset()) -> dict[str, float] | None:
    """Measured against computed link load over ``intervals`` not in ``skip`` (indices), links of
    ``capacity`` (demand units): the median and 95th percentile of the relative error on links
    loaded to at least :data:`AGREEMENT_FLOOR` of capacity, and of the error in utilisation
    points on every link; datagrams lost / sent; the longest reinstall between intervals (s).
    None if an interval was not measured (the flow backend) or no link was busy."""
    rel, pts, sent, lost, re = [], [], 0, 0, []
    cap = np.array(capacity)
    for j, i in enumerate(intervals):
        m = i.measured
        if m is None:
            return None
        sent, lost = sent + m.sent, lost + m.lost
        if j > 0:  # the first install precedes the traffic and includes the solvers' start-up
            re += list(m.reinstall_s.values())
        if j in skip:
            continue
        c, x = np.array(i.link_load), np.array(m.link_load)
        busy = c >= AGREEMENT_FLOOR * cap
        rel += list(np.abs(x[busy] - c[busy]) / c[busy])
        pts += list(np.abs(x - c) / cap)
    if not rel:
        return None
    return {"links": len(rel), "rel_error_median": float(np.median(rel)), "rel_error_p95": float(np.percentile(rel, 95)),
            "util_error_median": float(np.median(pts)), "util_error_p95": float(np.percentile(pts, 95)),
            "loss": lost / sent if sent else 0.0, "reinstall_max_s": max(re, default=0.0)}


class WanResult(BaseModel):
    """A WAN run's result (inside the envelope, :mod:`emulation.envelope`): the topology, TE,
    tunnels, slicing, divergence and traffic as run, one :class:`Interval` per matrix, the packet
    backend's settings (``packet``), and the derived :attr:`summary` and :attr:`agreement`."""

    model_config = ConfigDict(extra="forbid")

    topology: dict[str, Any]
    te: dict[str, Any]
    tunnels: dict[str, int]
    slicing: dict[str, Any]
    divergence: dict[str, Any]
    traffic: dict[str, Any]
    intervals: list[Interval]
    packet: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _derived(cls, d: Any) -> Any:
        """Read back from JSON: the derived summary and agreement are recomputed, not read."""
        return {k: v for k, v in d.items() if k not in ("summary", "agreement")} if isinstance(d, dict) else d

    @computed_field
    @property
    def summary(self) -> dict[str, float]:
        """:func:`summary` of the intervals."""
        return summary(self.intervals)

    @computed_field
    @property
    def agreement(self) -> Optional[dict[str, float]]:
        """:meth:`agreement_skipping` no interval."""
        return self.agreement_skipping(frozenset())

    def failed_checks(self) -> list[FailedCheck]:
        """The checks of a packet replay that failed (:func:`calm_loss`); a flow run has none."""
        got = calm_loss([i.measured for i in self.intervals if i.measured]) if self.packet else None
        return [got] if got else []

    def killed_slice(self) -> tuple[int, float] | None:
        """The slice whose controller the packet replay killed and its share of the demand's
        sources (the computed blast radius), or None."""
        dead = [e.split()[3] for i in self.intervals if i.measured for e in i.measured.events
                if e.startswith("controller of slice")]
        return (int(dead[0]), self.slicing["shares"][int(dead[0])]) if dead and self.slicing.get("shares") else None

    def agreement_skipping(self, skip: set[int] = frozenset()) -> dict[str, float] | None:
        """Packet backend only (else None): :func:`agreement` of the intervals not in ``skip``
        (indices into ``intervals``)."""
        return agreement(self.intervals, self.topology["capacity"], skip)

    @classmethod
    def of(cls, spec: WanSpec, setup: WanSetup, intervals: list[Interval], packet: dict | None = None) -> WanResult:
        """The result of ``intervals`` run from ``spec`` and its ``setup`` (``packet``: the packet
        backend's settings)."""
        topo, slicing, mean = setup.topo, setup.slicing, setup.mean
        return cls(topology={"name": topo.name, "routers": list(topo.names), "links": [list(l) for l in topo.links],
                             "capacity": list(topo.capacity)},
                   te=spec.te.settings(), tunnels={"k": spec.tunnels.k, "count": len(setup.tunnels.paths)},
                   slicing={"method": slicing.method, "count": slicing.count, "slice_of": list(slicing.slice_of),
                            "blast_radius": slicing.blast_radius(mean), "shares": slicing.shares(mean)},
                   divergence=spec.divergence.model_dump(), traffic=spec.traffic.model_dump(), intervals=intervals,
                   packet=packet)
