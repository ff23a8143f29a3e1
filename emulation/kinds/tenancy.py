"""The ``tenancy`` kind: many tenants' jobs arriving on one photonic or electrical rack, allocated
by an allocator and ordered by a job manager's policy (Morphlux arXiv 2508.03674, Lumorph arXiv
2501.18169, Propius arXiv 2510.19617; ``experiments/tenancy_*.yaml``).

Example (``experiments/tenancy_rack64.yaml``)::

    name: tenancy_rack64
    tenancy:
      rack: {dims: [4, 4, 4], server: [2, 2, 1], spares: 0}
      trace: {jobs: 400, seed: 0, interarrival_s: 250, sizes: {4: 0.4, 8: 0.3, 16: 0.2, 32: 0.1},
              rounds: [1, 10], round_s: [60, 600], comm_share: 0.5, tenants: 4}
      allocators: [torus-contiguous, photonic]
      schedulers: [fifo, random, srtf, srdf, las, irs]
      static_partitions: 2
      photonic: {k_routes: 5, reconfiguration_delay_s: 3.7e-6}

A ``trace`` replays on the flow backend: every allocator with every scheduler;
``static_partitions`` adds Propius' static partitioning baseline (per allocator); the sweep's
section and result are :class:`emulation.flowsim.rack_sweep.RackSweepSpec` and
:class:`~emulation.flowsim.rack_sweep.TenancyResult`. ``tenants`` (with ``tenancy.fabric`` and
``emulation``) run at once on the packet backend beside the flow backend; result
:class:`emulation.tenants_packet.TenantsResult`.
"""

from __future__ import annotations

from typing import Union

from pydantic import Field, model_validator

from emulation.backends import ScenarioBackend
from emulation.envelope import envelope
from emulation.flowsim.rack_sweep import RackSweepSpec, TenancyResult, sweep_tenancy
from emulation.kinds import Kind, RunRequest
from emulation.output import Refused
from emulation.planners.tenants import TenantFabricSpec, TenantSpec
from emulation.scenario.schema import EmulationSpec, NamedScenario
from emulation.sections import SectionError
from emulation.tenancy import report
from emulation.tenants_packet import TenantsResult, compare_tenants
from topologies.torus_rack import RackError


class TenancySection(RackSweepSpec):
    """``tenancy:`` the rack sweep's section (a trace to replay on the flow backend), or tenants
    to run with packets (packet backend) on ``fabric``."""

    tenants: list[TenantSpec] = Field(default_factory=list)
    """Tenants run at once with packets (packet backend); empty: a ``trace`` replays instead."""
    fabric: TenantFabricSpec = TenantFabricSpec()
    """The emulated fabric the ``tenants`` run on."""


class TenancyScenario(NamedScenario):
    """A whole tenancy scenario file (module doc): a ``trace`` replays on the flow backend,
    ``tenants`` run at once on the packet backend (``backend: packet``) beside the flow
    backend's run of the same tenants, at ``emulation``'s settings (byte scale 0.001 unless
    given)."""

    tenancy: TenancySection
    """The rack, a trace or tenants, and what is compared."""
    emulation: EmulationSpec = EmulationSpec(byte_scale=0.001)
    """The packet backend's scale model (a packet run of ``tenants``)."""
    backend: ScenarioBackend = "flow"
    """``flow`` for a ``trace``; ``packet`` for ``tenants`` (the flow backend runs the same
    tenants beside them)."""

    @model_validator(mode="before")
    @classmethod
    def _emulation(cls, data):
        # a fabric spread over servers runs collective scenarios only
        return EmulationSpec.defaulted(data, set(EmulationSpec.model_fields) - {"servers", "ssh_config", "ocs"}, "tenancy",
                                         byte_scale=0.001)

    @model_validator(mode="after")
    def _kind(self):
        t = self.tenancy
        if (t.trace is None) == (not t.tenants):
            raise ValueError("tenancy: give either trace (a replay on the flow backend) or tenants (a packet run)")
        if t.tenants and self.backend != "packet":
            raise ValueError("backend: tenants run on the packet backend: set backend: packet")
        if t.trace is not None and self.backend != "flow":
            raise ValueError("backend: a trace replays on the flow backend: set backend: flow")
        names = [x.name for x in t.tenants]
        if len(set(names)) != len(names):
            raise ValueError("tenancy.tenants: tenant names must differ")
        return self


def _deep(sc: TenancyScenario) -> None:
    """The rack sweep's checks (:meth:`RackSweepSpec.check`); the tenants' sizes and algorithms."""
    t = sc.tenancy
    rack = t.check()
    for i, x in enumerate(t.tenants):
        try:
            rack.shape_for(x.gpus)
        except RackError as e:
            raise SectionError(f"tenancy.tenants.{i}.gpus: {str(e).removeprefix('accelerators: ')}") from None
        if x.algorithm == "rhd" and x.gpus & (x.gpus - 1):
            raise SectionError(f"tenancy.tenants.{i}.algorithm: rhd needs a power-of-two GPU count")
    need, have = sum(x.gpus for x in t.tenants), (rack.servers - t.rack.spares) * rack.per_server
    if need > have:
        raise SectionError(f"tenancy.tenants: {need} GPUs asked for, the rack has {have}")


def _run(req: RunRequest):
    """A trace's replays on the flow backend (:func:`emulation.flowsim.rack_sweep.sweep_tenancy`),
    or the tenants on the packet backend beside the flow backend
    (:func:`emulation.tenants_packet.compare_tenants`)."""
    sc = req.scenario
    need = "flow" if sc.tenancy.trace is not None else "packet"
    if req.backend != need:
        raise Refused(f"--backend: a tenancy {'trace replays on the flow backend' if need == 'flow' else 'scenario with tenants runs on the packet backend'}, not {req.backend}")
    if need == "flow":
        return sweep_tenancy(sc.tenancy, req.progress)
    t = sc.tenancy
    return envelope("tenancy", sc.name, "both", compare_tenants(t.rack, t.tenants, t.fabric, sc.emulation, req.out,
                                                            req.progress, refuse=not req.force))


KIND = Kind(name="tenancy", scenario=TenancyScenario, result=Union[TenancyResult, TenantsResult],
            backends=("flow", "packet"), run=_run, deep=_deep, options=frozenset({"force"}),
            show={TenancyResult: report.print_summary, TenantsResult: report.print_packet},
            write={TenancyResult: report.write, TenantsResult: report.write_packet},
            checks={TenancyResult: lambda r: [], TenantsResult: lambda r: r.failed_checks()})
