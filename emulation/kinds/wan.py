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
replayed. The ``wan:`` section is :class:`emulation.te_intervals.WanSpec`, the result
:class:`emulation.te_intervals.WanResult`; the kind also answers ``ocslab te``.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import model_validator

from emulation.backends import ScenarioBackend
from emulation.flowsim.wan import run_wan
from emulation.kinds import Kind, RunRequest, with_controller
from emulation.envelope import FailedCheck
from emulation.output import fail, verdict
from emulation.scenario.schema import EmulationSpec, NamedScenario
from emulation.te_intervals import WanResult, WanSpec
from emulation.wan import report
from topologies.wan import WanError

#: The fastest emulated WAN link (Mbit/s): every UDP datagram crosses the userspace switch of
#: every router on its path.
MAX_LINK_MBPS = 200.0


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
    backend: ScenarioBackend = "flow"
    """Where ``ocslab run`` runs it unless ``--backend`` says otherwise: ``flow`` (every
    matrix solved and carried in the flow model) or ``packet`` (UDP flows through Open vSwitch
    routers, one TE controller per slice)."""

    @model_validator(mode="before")
    @classmethod
    def _emulation(cls, data):
        data = EmulationSpec.defaulted(data, {"link_mbps", "controller"}, "wan", link_mbps=8.0)
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


def _run(req: RunRequest) -> WanResult:
    """Every matrix an interval: on the flow backend (:func:`emulation.flowsim.wan.run_wan`) or
    replayed with real packets (:func:`emulation.wan_packet.emulate_wan`, logs in ``out/emulation``)."""
    sc = req.scenario
    if req.backend == "flow":
        return run_wan(sc.wan, req.progress)
    from emulation.wan_packet import emulate_wan

    return emulate_wan(sc.wan, with_controller(sc.emulation, req.controller), req.out / "emulation", req.progress)


def _te(sc: WanScenario, args, path: Path) -> int:
    """``ocslab te``: the TE solution of matrix ``--tm`` (:meth:`emulation.te_intervals.WanSpec.routes`:
    its objective, regulariser and capacity headroom; one central controller, the true demand):
    tunnels as router paths, split ratios per demand, link utilisations; a table or ``--json``.
    Exit status 1 when the solution is not feasible (:meth:`emulation.planners.te.TeRoutes.infeasible`)."""
    from emulation.figures import console, table

    topo, tms = sc.wan.load()
    if not 0 <= args.tm < len(tms):
        return fail(f"--tm: must be in 0..{len(tms) - 1} for {topo.name}, got {args.tm}")
    r = sc.wan.routes(args.tm, (topo, tms))
    sol = r.solution
    failed = [FailedCheck.of(p, f"matrix {args.tm}") for p in r.infeasible(sc.wan.te.capacity_headroom)]
    if args.json:
        # capacity_headroom right after the solution's objective and regulariser (a dict keeps a
        # key where it first appeared)
        print(json.dumps({"scenario": sc.name, "matrix": args.tm, "objective": None, "regulariser": None,
                          "capacity_headroom": sc.wan.te.capacity_headroom, **r.to_json()}))
        return verdict(failed)
    out = console()
    out.print(f"{sc.name} matrix {args.tm}: {sol.objective} (lambda {sol.regulariser:g}) optimum "
              f"{sol.value:.4g}; carried {sol.carried:.0f} of {r.offered:.0f}; MLU {sol.mlu:.3f}")
    out.print(table("links", ("link", "capacity", "load", "utilisation"),
                    ((f"{l.src}->{l.dst}", f"{l.capacity:.0f}", f"{l.load:.1f}", f"{l.utilisation:.3f}")
                     for l in r.links)))
    return verdict(failed)


KIND = Kind(name="wan", scenario=WanScenario, result=WanResult, backends=("flow", "packet"), run=_run,
            show=report.print_summary, write=report.write, deep=lambda sc: sc.wan.check(), data_errors=(WanError,),
            options=frozenset({"controller"}), commands={"te": _te}, checks=lambda r: r.failed_checks())
