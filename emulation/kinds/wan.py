"""The ``wan`` kind: WAN traffic engineering over sliced controllers (Symphony, arXiv 2510.11937;
``experiments/wan_*.yaml``): a topology, its traffic matrices, tunnels, the TE formulation, how the
routers are sliced among controllers, and how far each controller's view of the demand is off.

Example (``experiments/wan_b4.yaml``)::

    name: wan_b4
    wan:
      topology: b4
      traffic: {matrices: bundled, scale: 0.8, first: 0, count: 36}
      tunnels: {k: 4, method: ksp}
      te: {objective: max-flow, regulariser: 0, capacity_headroom: 0}
      slices: {count: 5, method: random, seed: 0}
      divergence: {distribution: half-normal, sd: 0.05, seed: 0}
    backend: flow

``te.regulariser`` is lambda of Symphony's ``lambda x sum_e u_e^2`` (0: the plain LP;
``symphony``: the artefact's value for the objective, :data:`emulation.planners.te.SYMPHONY_LAMBDA`).
``divergence.sd: 0`` gives every controller the true demand. On the packet backend the routers
are Open vSwitch bridges programmed by one controller per slice (``emulation.controller``), the
largest link runs at ``emulation.link_mbps`` and ``wan.replay`` says how the matrices are
replayed. Result: :class:`emulation.wan.results.WanResult`; also answers ``ocslab te``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from emulation.envelope import envelope
from emulation.flowsim.wan import interval, simulate_wan
from emulation.kinds import Kind, RunRequest, validated
from emulation.output import Progress, Refused, fail
from emulation.planners.divergence import Deviation
from emulation.planners.slicing import METHODS
from emulation.planners.te import OBJECTIVES, SYMPHONY_LAMBDA
from emulation.scenario.schema import EmulationSpec, NamedScenario, ScenarioError, StrictModel, known_name
from emulation.te_intervals import Interval, WanSetup, prepare
from emulation.wan import report
from emulation.wan.results import WanResult
from topologies.wan import TrafficMatrices, WanError, WanTopology, load_bundled, wan_directory

#: The fastest emulated WAN link (Mbit/s): every UDP datagram crosses the userspace switch of
#: every router on its path.
MAX_LINK_MBPS = 200.0


class TrafficSpec(StrictModel):
    """``traffic:``: the topology's own matrices (``bundled``) or a ``tm,src,dst,demand`` CSV
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


class TunnelSpec(StrictModel):
    """``tunnels:``: ``k`` shortest simple paths per demand (``ksp``: hop count, Yen)."""

    k: int = Field(default=4, ge=1, le=16)
    """Tunnels per demand: its k shortest simple paths."""
    method: Literal["ksp"] = "ksp"
    """How the tunnels are found: ``ksp`` (Yen's k shortest paths by hop count)."""


class TeSpec(StrictModel):
    """``te:``: the ``objective`` (``max-flow``, ``mcf``, ``min-mlu``), the regulariser lambda
    (a number >= 0, or ``symphony``) and ``capacity_headroom``, the fraction of every link's
    capacity the TE leaves free."""

    objective: str = "mcf"
    """What every controller's TE optimises: ``max-flow`` (the carried demand), ``mcf`` (maximum
    concurrent flow: the fraction of every demand carried) or ``min-mlu`` (the maximum link
    utilisation, minimised)."""
    regulariser: float | Literal["symphony"] = 0.0
    """The regulariser lambda: the weight of ``sum_e u_e^2`` (link utilisations) Symphony adds
    to the objective, a number >= 0 (0: the plain LP), or ``symphony``: its artefact's value for
    the objective."""
    capacity_headroom: float = Field(default=0.0, ge=0, lt=1)
    """Fraction of every link's capacity the TE leaves free."""

    @field_validator("objective")
    @classmethod
    def _objective(cls, v: str) -> str:
        return known_name(v, OBJECTIVES, "objective")

    @field_validator("regulariser")
    @classmethod
    def _lam(cls, v):
        if v != "symphony" and v < 0:
            raise ValueError(f"must be >= 0 or symphony, got {v}")
        return v

    @property
    def lam(self) -> float:
        """lambda as a number."""
        return SYMPHONY_LAMBDA[self.objective] if self.regulariser == "symphony" else float(self.regulariser)


class SliceSpec(StrictModel):
    """``slices:``: ``method`` (``random``, ``per-router``, ``one``), ``count`` (random) and
    ``seed``."""

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


class DivergenceSpec(StrictModel):
    """``divergence:``: every controller's view of a demand is ``D (1 - p)``, p drawn per
    controller and demand (:class:`emulation.planners.divergence.Deviation`)."""

    distribution: Literal["half-normal", "heavy-tail"] = "half-normal"
    """How a controller's error p on a demand is drawn, per controller and demand:
    ``half-normal`` (``|N(0, sd)|``) or ``heavy-tail`` (``Lomax(shape 3) x sd x 2``: the
    same scale, rare large errors); p is capped at 0.95."""
    sd: float = Field(default=0.05, ge=0, le=0.5)
    """Scale of the error p, a fraction of the demand; 0: every controller sees the true demand."""
    seed: int = 0
    """Seed of the error draws (with the matrix index)."""


class KillSpec(StrictModel):
    """``packet.kill:``: SIGKILL slice ``slice``'s controller at the start of interval
    ``interval`` (counted from the first replayed matrix)."""

    slice: int = Field(ge=0)
    """The slice whose controller is killed (SIGKILL), 0-based."""
    interval: int = Field(ge=1)
    """The interval at whose start it is killed, counted from the first replayed matrix."""


class FailSpec(StrictModel):
    """``packet.fail:``: take the cable of ``link`` ``[u, v]`` (router indices; both directions)
    down halfway through interval ``interval``; every controller recomputes without it."""

    link: tuple[int, int]
    """The link ``[u, v]`` taken down, router indices (both directions of its cable)."""
    interval: int = Field(ge=0)
    """The interval halfway through which it goes down, counted from the first replayed matrix."""


class ReplaySpec(StrictModel):
    """``wan.replay:`` how the packet backend replays the matrices: ``interval_s`` how long each
    matrix is replayed, ``flows`` UDP flows per demand, ``payload_bytes`` per datagram,
    ``warmup_s`` after each interval's start before link loads are measured, and the faults
    ``kill`` and ``fail``. (The emulated rate of the largest-capacity link is
    ``emulation.link_mbps``: Mbit/s of frames, every link shaped in proportion to its capacity;
    the slice controllers' framework ``emulation.controller``.)"""

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
    ``topology.json`` and ``traffic_matrices.csv``, :mod:`topologies.wan`), the sections above and
    the packet backend's ``replay`` (:class:`ReplaySpec`)."""

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
    divergence: DivergenceSpec = DivergenceSpec()
    """How far each controller's view of the demand is off the true demand."""
    replay: ReplaySpec = ReplaySpec()
    """How the packet backend replays the matrices, and its faults."""

    @field_validator("topology")
    @classmethod
    def _topology(cls, v: str) -> str:
        wan_directory(v)
        return v

    def load(self) -> tuple[WanTopology, TrafficMatrices]:
        """The topology and its traffic matrices (all of them, unscaled).

        :raises WanError: unreadable files.
        """
        return load_bundled(self.topology, self.traffic.matrices)


class WanScenario(NamedScenario):
    """A whole WAN scenario file (module doc). ``emulation``: ``link_mbps`` (the largest link's
    emulated rate, at most :data:`MAX_LINK_MBPS`; default 8) and ``controller``; the other
    emulation settings do not apply to a WAN."""

    wan: WanSpec
    """The WAN: topology, traffic, tunnels, TE, slicing, divergence and the packet replay."""
    emulation: EmulationSpec = EmulationSpec(link_mbps=8.0, headroom="skip")
    """The packet backend's ``link_mbps`` (the emulated rate of the largest-capacity link,
    Mbit/s, at most 200; every link shaped in proportion to its capacity) and ``controller`` (the
    slice controllers' framework); no other emulation field applies."""
    backend: Literal["flow", "mininet"] = "flow"
    """Where ``ocslab run`` runs it unless ``--backend`` says otherwise: ``flow`` (every
    matrix solved and carried in the flow model) or ``mininet`` (UDP flows through Open vSwitch
    routers, one TE controller per slice)."""

    @model_validator(mode="before")
    @classmethod
    def _emulation(cls, data):
        data = EmulationSpec.defaulted(data, {"link_mbps", "controller"}, link_mbps=8.0)
        if isinstance(data, dict) and isinstance(data.get("emulation"), dict):
            data["emulation"]["headroom"] = "skip"  # no probe: the replay checks its own pacing
        return data

    @model_validator(mode="after")
    def _rate(self):
        r = self.emulation.link_mbps
        if r == "auto" or r > MAX_LINK_MBPS:
            raise ValueError(f"emulation.link_mbps: a WAN replay needs a rate in (0, {MAX_LINK_MBPS:g}] Mbit/s, "
                             f"got {r}")
        return self


def _deep(sc: WanScenario) -> None:
    topo, tms = sc.wan.load()
    t = sc.wan.traffic
    if t.first >= len(tms):
        raise ScenarioError(f"wan.traffic.first: {t.first} but {sc.wan.topology} has {len(tms)} matrices")
    if t.count is not None and t.first + t.count > len(tms):
        raise ScenarioError(f"wan.traffic.count: {t.first} + {t.count} exceeds the {len(tms)} matrices")
    s = sc.wan.slices
    if s.method == "random" and s.count > topo.routers:
        raise ScenarioError(f"wan.slices.count: {s.count} slices of {topo.routers} routers")
    p = sc.wan.replay
    count = t.count if t.count is not None else len(tms) - t.first
    slices = {"random": s.count, "per-router": topo.routers, "one": 1}[s.method]
    if p.kill is not None and p.kill.slice >= slices:
        raise ScenarioError(f"wan.replay.kill.slice: {p.kill.slice} but there are {slices} slices")
    if p.kill is not None and p.kill.interval >= count:
        raise ScenarioError(f"wan.replay.kill.interval: {p.kill.interval} but {count} matrices are replayed")
    if p.fail is not None:
        if tuple(p.fail.link) not in topo.links:
            raise ScenarioError(f"wan.replay.fail.link: {list(p.fail.link)} is not a link of {topo.name}")
        if p.fail.interval >= count:
            raise ScenarioError(f"wan.replay.fail.interval: {p.fail.interval} but {count} matrices are replayed")


def _load(path: Path, data: dict) -> WanScenario:
    """Validate a WAN scenario and check its matrices, slicing and faults.
    :raises ScenarioError: one line naming the field."""
    try:
        return validated(WanScenario, data, path, _deep)
    except WanError as e:
        raise ScenarioError(f"{path}: {e}") from None


def _setup(sc: WanScenario) -> WanSetup:
    """What both backends replay of ``sc`` (:func:`emulation.te_intervals.prepare`).
    :raises WanError: unreadable data."""
    w = sc.wan
    topo, tms = w.load()
    return prepare(topo, tms, first=w.traffic.first, count=w.traffic.count, scale=w.traffic.scale, k=w.tunnels.k,
                   slice_method=w.slices.method, slice_count=w.slices.count, slice_seed=w.slices.seed,
                   deviation=Deviation(w.divergence.distribution, w.divergence.sd, w.divergence.seed))


def _te_settings(sc: WanScenario) -> dict:
    """The TE every controller solves: objective, lambda (a number) and capacity headroom."""
    return {"objective": sc.wan.te.objective, "regulariser": sc.wan.te.lam,
            "capacity_headroom": sc.wan.te.capacity_headroom}


def _result(sc: WanScenario, setup: WanSetup, intervals: list[Interval], packet: dict | None = None) -> WanResult:
    """The :class:`WanResult` of ``intervals`` (``packet``: the packet backend's settings)."""
    w, topo, slicing, mean = sc.wan, setup.topo, setup.slicing, setup.mean
    return WanResult(
        topology={"name": topo.name, "routers": list(topo.names), "links": [list(l) for l in topo.links],
                  "capacity": list(topo.capacity)},
        te=_te_settings(sc), tunnels={"k": w.tunnels.k, "count": len(setup.tunnels.paths)},
        slicing={"method": slicing.method, "count": slicing.count, "slice_of": list(slicing.slice_of),
                 "blast_radius": slicing.blast_radius(mean), "shares": slicing.shares(mean)},
        divergence=w.divergence.model_dump(), traffic=w.traffic.model_dump(), intervals=intervals, packet=packet)


def run_wan(sc: WanScenario, progress: Progress | None = None) -> WanResult:
    """``sc`` on the flow backend: every matrix an interval, solved by every slice on its own view
    and carried on the true demand (:func:`emulation.flowsim.wan.simulate_wan`); deterministic in
    the scenario's seeds.

    :raises WanError: unreadable data. :raises emulation.planners.te.TeError: a solver failed.
    """
    setup = _setup(sc)
    te = sc.wan.te
    return _result(sc, setup, simulate_wan(setup, te.objective, te.lam, te.capacity_headroom, progress))


def emulate_wan(sc: WanScenario, run_dir: Path, progress: Progress | None = None) -> WanResult:
    """``sc`` on the packet backend: its matrices replayed as UDP flows through Open vSwitch
    routers, one TE controller per slice (:func:`emulation.emulator.wan_replay.replay_wan`; logs in
    ``run_dir``); every interval's computed side is the flow model of the splits the switches held
    (:func:`emulation.flowsim.wan.interval`), beside what was measured.

    :raises emulation.emulator.net.EmulationError: see :func:`emulation.emulator.wan_replay.replay_wan`.
    """
    from emulation.emulator.wan_replay import replay_wan

    setup, p, emu = _setup(sc), sc.wan.replay, sc.emulation
    rep = replay_wan(setup, _te_settings(sc), p, run_dir, link_mbps=emu.link_mbps, controller=emu.controller,
                     progress=progress)
    intervals = [interval(setup, j, o, m) for j, (o, m) in enumerate(zip(rep.outcomes, rep.measured))]
    return _result(sc, setup, intervals, {**p.model_dump(), "link_mbps": emu.link_mbps, "controller": emu.controller,
                                          "mbps_per_unit": rep.mbps_per_unit, "frame_bytes": rep.frame_bytes})


def _run(req: RunRequest):
    """Every matrix an interval: on the flow backend (:func:`run_wan`) or replayed with real
    packets (:func:`emulate_wan`, logs in ``out/emulation``)."""
    sc = req.scenario
    if req.controller:
        sc = sc.model_copy(update={"emulation": sc.emulation.model_copy(update={"controller": req.controller})})
    if req.backend == "flow":
        return envelope("wan", sc.name, "flow", run_wan(sc, req.progress))
    from emulation.emulator.net import ryu_unavailable

    if sc.emulation.controller == "ryu" and ryu_unavailable():
        raise Refused(f"--controller: ryu is unavailable here: {ryu_unavailable()}")
    return envelope("wan", sc.name, "mininet", emulate_wan(sc, req.out / "emulation", req.progress))


def _te(sc: WanScenario, args, path: Path) -> int:
    """``ocslab te``: the TE solution of matrix ``--tm`` (its objective, regulariser and capacity
    headroom; one central controller, the true demand; :func:`emulation.planners.te.te_routes`):
    tunnels as router paths, split ratios per demand, link utilisations; a table or ``--json``."""
    from dataclasses import asdict

    from emulation.figures import console, table
    from emulation.planners.te import te_routes
    from emulation.planners.tunnels import k_shortest

    topo, tms = sc.wan.load()
    if not 0 <= args.tm < len(tms):
        return fail(f"--tm: must be in 0..{len(tms) - 1} for {topo.name}, got {args.tm}")
    t_ = sc.wan.te
    r = te_routes(topo, k_shortest(topo, sc.wan.tunnels.k), tms[args.tm] * sc.wan.traffic.scale, t_.objective,
                  t_.lam, t_.capacity_headroom)
    sol = r.solution
    if args.json:
        print(json.dumps({"scenario": sc.name, "matrix": args.tm, "objective": sol.objective,
                          "regulariser": sol.regulariser, "capacity_headroom": t_.capacity_headroom,
                          "value": sol.value, "carried": sol.carried, "offered": r.offered, "mlu": sol.mlu,
                          "demands": [asdict(d) for d in r.demands], "links": [asdict(l) for l in r.links]}))
        return 0
    out = console()
    out.print(f"{sc.name} matrix {args.tm}: {sol.objective} (lambda {sol.regulariser:g}) optimum "
              f"{sol.value:.4g}; carried {sol.carried:.0f} of {r.offered:.0f}; MLU {sol.mlu:.3f}")
    out.print(table("links", ("link", "capacity", "load", "utilisation"),
                    ((f"{l.src}->{l.dst}", f"{l.capacity:.0f}", f"{l.load:.1f}", f"{l.utilisation:.3f}")
                     for l in r.links)))
    return 0


KIND = Kind(name="wan", scenario=WanScenario, result=WanResult, backends=("flow", "mininet"), load=_load, run=_run,
            show=report.print_summary, write=report.write, options=frozenset({"controller"}), commands={"te": _te})
