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

from pydantic import field_validator, model_validator

from emulation.envelope import envelope
from emulation.flowsim.wan import interval, simulate_wan
from emulation.kinds import Kind, RunRequest, validated
from emulation.output import Progress, Refused, fail
from emulation.planners.divergence import Deviation
from emulation.planners.slicing import SliceSpec
from emulation.planners.te import TeSpec
from emulation.planners.tunnels import TunnelSpec
from emulation.scenario.schema import EmulationSpec, NamedScenario, ScenarioError, StrictModel
from emulation.te_intervals import Interval, ReplaySpec, TrafficSpec, WanSetup, prepare
from emulation.wan import report
from emulation.wan.results import WanResult
from topologies.wan import TrafficMatrices, WanError, WanTopology, load_bundled, wan_directory

#: The fastest emulated WAN link (Mbit/s): every UDP datagram crosses the userspace switch of
#: every router on its path.
MAX_LINK_MBPS = 200.0


class WanSpec(StrictModel):
    """``wan:``: the topology (bundled: ``b4``, ``abilene``, ``geant``; or a directory with
    ``topology.json`` and ``traffic_matrices.csv``, :mod:`topologies.wan`), the sections of the
    layers they parametrise (traffic and replay: :mod:`emulation.te_intervals`; tunnels, TE,
    slicing, divergence: :mod:`emulation.planners`)."""

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
    t, s, p = sc.wan.traffic, sc.wan.slices, sc.wan.replay
    if t.first >= len(tms):
        raise ScenarioError(f"wan.traffic.first: {t.first} but {sc.wan.topology} has {len(tms)} matrices")
    if t.count is not None and t.first + t.count > len(tms):
        raise ScenarioError(f"wan.traffic.count: {t.first} + {t.count} exceeds the {len(tms)} matrices")
    if s.method == "random" and s.count > topo.routers:
        raise ScenarioError(f"wan.slices.count: {s.count} slices of {topo.routers} routers")
    count, slices = t.replayed(len(tms)), s.slices(topo.routers)
    if p.kill is not None and p.kill.slice >= slices:
        raise ScenarioError(f"wan.replay.kill.slice: {p.kill.slice} but there are {slices} slices")
    if p.kill is not None and p.kill.interval >= count:
        raise ScenarioError(f"wan.replay.kill.interval: {p.kill.interval} but {count} matrices are replayed")
    if p.fail is not None and tuple(p.fail.link) not in topo.links:
        raise ScenarioError(f"wan.replay.fail.link: {list(p.fail.link)} is not a link of {topo.name}")
    if p.fail is not None and p.fail.interval >= count:
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
    return prepare(*w.load(), w.traffic, w.tunnels, w.slices, w.divergence)


def _result(sc: WanScenario, setup: WanSetup, intervals: list[Interval], packet: dict | None = None) -> WanResult:
    """The :class:`WanResult` of ``intervals`` (``packet``: the packet backend's settings)."""
    w, topo, slicing, mean = sc.wan, setup.topo, setup.slicing, setup.mean
    return WanResult(
        topology={"name": topo.name, "routers": list(topo.names), "links": [list(l) for l in topo.links],
                  "capacity": list(topo.capacity)},
        te=w.te.settings(), tunnels={"k": w.tunnels.k, "count": len(setup.tunnels.paths)},
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
    rep = replay_wan(setup, sc.wan.te.settings(), p, run_dir, link_mbps=emu.link_mbps, controller=emu.controller,
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
