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
``static_partitions`` adds Propius' static partitioning baseline (per allocator); result
:class:`emulation.tenancy.results.TenancyResult`. ``tenants`` (with ``tenancy.fabric`` and
``emulation``) run at once on the packet backend beside the flow backend; result
:class:`emulation.tenancy.results.TenantsResult`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Union

from pydantic import Field, field_validator, model_validator

from emulation.envelope import envelope
from emulation.flowsim.job_manager import POLICIES, static_partitions
from emulation.kinds import Kind, RunRequest, validated
from emulation.output import Refused
from emulation.planners.allocators import PhotonicSpec
from emulation.planners.tenants import TenantFabricSpec, TenantSpec
from emulation.scenario.schema import EmulationSpec, NamedScenario, ScenarioError, StrictModel
from emulation.tenancy import report
from emulation.tenancy.results import TenancyResult, TenantsResult
from emulation.workloads.tenant_jobs import TraceSpec
from topologies.torus_rack import LEGAL_SHAPES, RackError, RackSpec, TorusRack


class TenancySection(StrictModel):
    """``tenancy:`` the rack, a trace to replay (flow backend) or tenants to run with packets
    (packet backend), and what is compared."""

    rack: RackSpec = RackSpec()
    """The rack: its torus, servers and spares."""
    trace: TraceSpec | None = None
    """A request trace replayed on the flow backend; none: ``tenants`` run instead."""
    tenants: list[TenantSpec] = Field(default_factory=list)
    """Tenants run at once with packets (packet backend); empty: a ``trace`` replays instead."""
    fabric: TenantFabricSpec = TenantFabricSpec()
    """The emulated fabric the ``tenants`` run on."""
    allocators: list[Literal["torus-contiguous", "photonic"]] = Field(
        default_factory=lambda: ["torus-contiguous", "photonic"], min_length=1)
    """Slice allocators compared: ``torus-contiguous`` (contiguous blocks of the torus) or
    ``photonic`` (Morphlux: a slice's servers joined by circuits routed through the interposer)."""
    schedulers: list[str] = Field(default_factory=lambda: ["fifo"], min_length=1)
    """Job-manager policies compared, each with every allocator: ``fifo``, ``random``, ``srtf``
    (shortest remaining time), ``srdf`` (smallest remaining demand), ``las`` (least attained
    service) or ``irs`` (scarcest placements first)."""
    static_partitions: int | None = Field(default=None, ge=1)
    """Partitions of Propius' static partitioning baseline, added per allocator; none: no such
    baseline."""
    photonic: PhotonicSpec = PhotonicSpec()
    """The photonic allocator's candidate routes and reconfiguration delay."""

    @field_validator("schedulers")
    @classmethod
    def _schedulers(cls, v):
        for s in v:
            if s not in POLICIES:
                raise ValueError(f"{s!r} is not one of {', '.join(POLICIES)}")
        return v


class TenancyScenario(NamedScenario):
    """A whole tenancy scenario file (module doc): a ``trace`` replays on the flow backend,
    ``tenants`` run at once on the packet backend (``backend: mininet``) beside the flow
    backend's run of the same tenants, at ``emulation``'s settings (byte scale 0.001 unless
    given)."""

    tenancy: TenancySection
    """The rack, a trace or tenants, and what is compared."""
    emulation: EmulationSpec = EmulationSpec(byte_scale=0.001)
    """The packet backend's scale model (a packet run of ``tenants``)."""
    backend: Literal["flow", "mininet"] = "flow"
    """``flow`` for a ``trace``; ``mininet`` for ``tenants`` (the flow backend runs the same
    tenants beside them)."""

    @model_validator(mode="before")
    @classmethod
    def _emulation(cls, data):
        # a fabric spread over servers runs collective scenarios only
        return EmulationSpec.defaulted(data, set(EmulationSpec.model_fields) - {"servers", "ssh_config"}, byte_scale=0.001)

    @model_validator(mode="after")
    def _kind(self):
        t = self.tenancy
        if (t.trace is None) == (not t.tenants):
            raise ValueError("tenancy: give either trace (a replay on the flow backend) or tenants (a packet run)")
        if t.tenants and self.backend != "mininet":
            raise ValueError("backend: tenants run on the packet backend: set backend: mininet")
        if t.trace is not None and self.backend != "flow":
            raise ValueError("backend: a trace replays on the flow backend: set backend: flow")
        names = [x.name for x in t.tenants]
        if len(set(names)) != len(names):
            raise ValueError("tenancy.tenants: tenant names must differ")
        return self


def _deep(sc: TenancyScenario) -> None:
    t = sc.tenancy
    try:
        rack = t.rack.build()
    except RackError as e:
        raise ScenarioError(str(e).replace("rack.", "tenancy.rack.", 1)) from None
    if t.rack.spares >= rack.servers:
        raise ScenarioError(f"tenancy.rack.spares: {t.rack.spares} spare servers of a {rack.servers}-server rack")
    if t.tenants:
        for i, x in enumerate(t.tenants):
            try:
                rack.shape_for(x.gpus)
            except RackError:
                raise ScenarioError(f"tenancy.tenants.{i}.gpus: no legal slice shape has {x.gpus} accelerators "
                                    f"(legal: {', '.join(str(a * b * c) for a, b, c in _legal(rack))})") from None
            if x.algorithm == "rhd" and x.gpus & (x.gpus - 1):
                raise ScenarioError(f"tenancy.tenants.{i}.algorithm: rhd needs a power-of-two GPU count")
        need = sum(x.gpus for x in t.tenants)
        have = (rack.servers - t.rack.spares) * rack.per_server
        if need > have:
            raise ScenarioError(f"tenancy.tenants: {need} GPUs asked for, the rack has {have}")
        return
    for n in t.trace.sizes:
        try:
            rack.shape_for(n)
        except RackError:
            raise ScenarioError(f"tenancy.trace.sizes: no legal slice shape has {n} accelerators (legal: "
                                f"{', '.join(str(a * b * c) for a, b, c in _legal(rack))})") from None
    if t.static_partitions is not None:
        if t.rack.spares:
            raise ScenarioError("tenancy.static_partitions: static partitioning covers the whole rack; set "
                                "tenancy.rack.spares to 0")
        try:
            static_partitions(rack, t.static_partitions)
        except ValueError as e:
            raise ScenarioError(f"tenancy.{e}") from None


def _legal(rack: TorusRack):
    return [s for s in LEGAL_SHAPES if rack.orientations(s)]


def _load(path: Path, data: dict) -> TenancyScenario:
    """Validate a tenancy scenario; build its rack and check its sizes and partitions.
    :raises ScenarioError: one line naming the field."""
    return validated(TenancyScenario, data, path, _deep)


def _run(req: RunRequest):
    """A trace's replays on the flow backend (:func:`emulation.tenancy.run.run_tenancy`), or the
    tenants on the packet backend beside the flow backend
    (:func:`emulation.tenancy.run.run_packet`)."""
    sc = req.scenario
    need = "flow" if sc.tenancy.trace is not None else "mininet"
    if req.backend != need:
        raise Refused(f"--backend: a tenancy {'trace replays on the flow backend' if need == 'flow' else 'scenario with tenants runs on the packet backend (mininet)'}, not {req.backend}")
    if sc.tenancy.trace is not None:
        from emulation.tenancy.run import run_tenancy

        return envelope("tenancy", sc.name, "flow", run_tenancy(sc, req.progress))
    from emulation.tenancy.run import run_packet

    return envelope("tenancy", sc.name, "both", run_packet(sc, req.out, req.progress, req.force))


#: A tenancy scenario's result: a trace's replays or the tenants' packet run.
TenancyOutcome = Union[TenancyResult, TenantsResult]

KIND = Kind(name="tenancy", scenario=TenancyScenario, result=TenancyOutcome, backends=("flow", "mininet"),
            load=_load, run=_run, show=report.show, write=report.write, options=frozenset({"force"}))
