"""The schema of collective scenario files (``ocslab run``): what each section may hold.

A scenario is one experiment: fabric + workloads + planner + scale + backend. Files are YAML;
every field is checked on load (:mod:`emulation.scenario.load`) and a bad one is reported as a
single line ``FILE: field.path: what is wrong`` (:class:`ScenarioError`); a loaded scenario is
resolved once into what the backends run (:mod:`emulation.scenario.resolve`).

Example (``experiments/demo.yaml``)::

    name: demo
    fabric: {topology: ocs-star, gpus: 8, ports_per_gpu: 2, port_gbps: 400,
             reconfiguration_delay_s: 10.0e-6, initial: ring}
    cost: {alpha_s: 5.0e-6, delta_s: 0}
    sizes: [25MiB, 1MiB]
    runs:
      - {name: ring, algorithm: ring, planner: none}
      - {name: rhd-static, algorithm: rhd, planner: none}
      - {name: rhd-circuits, algorithm: rhd, planner: always}
    emulation: {link_mbps: auto, byte_scale: 0.1}
    # optional: backend: flow, semantics: dependency-driven, iterations: 10,
    #           straggler: {rank: 7, delay_s: 1.0e-3, jitter_s: 0, distribution: uniform, seed: 0}

Base topology: ``fabric.topology`` (``ocs-star``, ``ring``, ``torus``, ``eps``) and, for an OCS,
``fabric.initial`` (``ring``, ``torus``, ``empty``); p = ``fabric.ports_per_gpu``,
R = ``fabric.reconfiguration_delay_s``, delta = ``cost.delta_s``. A run may name its
``collective`` (default ``allreduce``; see ``emulation.workloads.ALGORITHMS``) and its
``planner`` (``none``, ``always``, ``greedy``, ``dp``, ``overlap``; ``greedy`` and ``dp`` use ``cost``).
``iterations`` repeats every (size, run), each iteration with its own straggler delay D
(:class:`StragglerSpec`); results keep one record per iteration.

MoE layers and time-slotted OCS (``experiments/moe_*.yaml``): a ``moe:`` section
(:class:`emulation.workloads.moe.MoELayer`, on the fabric's GPUs) defines one layer's routing; runs with ``collective: moe`` and ``algorithm:
padded`` or ``payload`` replay its dispatch and combine (``sizes`` is then optional; such a run
is labelled with the per-GPU routed bytes). A run's ``schedule`` (:class:`RunSpec`) puts the OCS
in rotor mode instead of a planner: ``rotor`` (round-robin matchings, equal slots) or ``plan``
(a duplex BvN plan of the run's traffic matrix); both need ``ocs-star`` with one port per GPU.

See ``docs/architecture.md`` (data flow: experiments/*.yaml --load+validate--> Scenario).
"""

from __future__ import annotations

import inspect
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import Field, PrivateAttr, field_validator, model_validator

from emulation.backends import ScenarioBackend
from emulation import dataplane as dpn
from emulation.fabric import Fabric, FabricError
from emulation.planners import PLANNERS, CostModel
from emulation.sections import SectionError, StrictModel, known_name
from emulation.units import parse_bytes
from emulation.workloads import ALGORITHMS, known
from emulation.workloads.moe import MoELayer
from topologies import BUILDERS

#: The largest fabric a scenario describes (GPUs); the flow backend runs it, the packet backend
#: is bounded by the machine (:mod:`emulation.emulator.limits`).
MAX_GPUS = 131072


class ScenarioError(SectionError):
    """A scenario that cannot be run; ``str()`` is one line naming the field."""


class FabricSpec(StrictModel):
    """``fabric:`` section; ``topology`` names a builder in ``topologies.BUILDERS``. A ``rack``
    (:func:`topologies.builders.rack`, training scenarios) also takes ``spares`` (spare GPUs
    beside the ``gpus`` working ones) and ``electrical_gbps`` (the rate of its slower
    electrical path, real Gbit/s)."""

    topology: str
    """The base topology, the name of a builder of ``topologies.BUILDERS``: ``ocs-star`` (every
    port of every GPU on one OCS), ``ring`` or ``torus`` (static cables), ``eps`` (one electrical
    packet switch), ``rack`` (working and spare GPUs on one OCS; training scenarios) or
    ``parallel-ocs`` (``switches`` OCSes in parallel, one port of every GPU on each)."""
    gpus: int = Field(ge=2, le=MAX_GPUS)
    """Number of GPUs (a rack's working GPUs, besides its spares)."""
    ports_per_gpu: int = Field(default=2, ge=1, le=16)
    """Fabric ports of every GPU (a static ``ring`` has 2, a ``torus`` 4, an ``eps`` 1; a
    rack's are its optical ports)."""
    port_gbps: float = Field(default=400.0, gt=0)
    """Rate of every fabric port, real Gbit/s."""
    reconfiguration_delay_s: float = Field(default=0.0, ge=0)
    """R: how long the OCS is dark while it changes circuits, real seconds (``ocs-star``,
    ``rack``)."""
    switches: int = Field(default=2, ge=1, le=16)
    """OCSes in parallel, each GPU with one port on every one (``parallel-ocs`` only; its
    ``ports_per_gpu`` is this number)."""
    initial: str = "ring"
    """The OCS's circuits at the start (the base topology): ``ring`` (GPU i to i+1 mod n, 2
    ports per GPU), ``torus`` (``ocs-star`` only, 4 ports per GPU) or ``empty`` (no circuit)."""
    spares: int = Field(default=0, ge=0, le=64)
    """Spare GPUs beside the ``gpus`` working ones (``rack`` only)."""
    electrical_gbps: float | None = Field(default=None, gt=0)
    """Rate of the rack's slower electrical path (one more port per GPU on a packet switch),
    real Gbit/s; none: the rack has no electrical path (``rack`` only)."""

    @field_validator("topology")
    @classmethod
    def _known(cls, v: str) -> str:
        return known_name(v, BUILDERS, "topology")

    @model_validator(mode="after")
    def _rack_only(self) -> FabricSpec:
        if self.topology != "rack":
            if self.spares:
                raise ValueError(f"spares: only a rack has spare GPUs, not {self.topology}")
            if self.electrical_gbps is not None:
                raise ValueError(f"electrical_gbps: only a rack has an electrical path, not {self.topology}")
        return self

    @model_validator(mode="after")
    def _builder_takes(self) -> FabricSpec:
        takes = _parameters(self.topology)
        for name in sorted(self.model_fields_set - {"topology"} - takes):
            if name == "ports_per_gpu":
                continue  # checked against the built fabric (:meth:`build`)
            raise ValueError(f"{name}: a {self.topology} fabric takes no {name} "
                             f"(its fields: {', '.join(sorted(takes | {'ports_per_gpu'}))})")
        return self

    def build(self) -> Fabric:
        """Build the fabric with the parameters its builder takes.

        :raises ScenarioError: ``fabric: ...``, the builder rejects the parameters, or
            ``ports_per_gpu`` was given and differs from the built fabric's (a static ring has 2
            ports per GPU, a torus 4, an eps 1).
        """
        values = self.model_dump()
        kwargs = {k: values[k] for k in _parameters(self.topology)}
        try:
            fabric = BUILDERS[self.topology](**kwargs)
        except FabricError as e:
            raise ScenarioError(f"fabric: {e}") from None
        if "ports_per_gpu" in self.model_fields_set and fabric.ports_per_gpu != self.ports_per_gpu \
                and "ports_per_gpu" not in kwargs:
            raise ScenarioError(f"fabric.ports_per_gpu: a {self.topology} fabric has {fabric.ports_per_gpu} "
                                f"ports per GPU, not {self.ports_per_gpu}")
        return fabric


def _parameters(topology: str) -> set[str]:
    """The scenario fields the builder of ``topology`` takes (its keyword parameters)."""
    return set(inspect.signature(BUILDERS[topology]).parameters)


class EmulationSpec(StrictModel):
    """``emulation:`` section: the scale model of the packet backend.

    ``link_mbps`` is the emulated rate B_e of every port (Mbit/s) or ``auto``: the highest rate
    at which this machine's headroom probe (every link saturated at once) reaches
    ``headroom_target`` of link rate (:mod:`emulation.emulator.calibration`). A given rate is
    probed too; ``headroom`` says what happens when it misses the target: ``refuse`` (the run
    stops before anything is measured, naming the rate that would work), ``warn`` (it runs, with
    a warning in the result), ``skip`` (no probe; not with ``auto``). ``byte_scale`` s: emulated
    bytes = real bytes x s; TDF = s x port rate / B_e. ``controller``: the framework the
    controller apps run on, ``os-ken`` or ``ryu`` (``ryu-manager`` from ``.venv-ryu``, which
    ``make setup`` makes where a Python 3.9 exists). ``apps``: paths of your own
    controller apps (``.py``, relative to the working directory), loaded beside the built-in
    ones (docs/controllers.md, Your own controller app). ``mtu``: MTU of every fabric interface (bytes, 1500
    or up to 9000 for jumbo frames): the switch's CPU cost is per frame, so 9000 carries 4-8x the
    emulated traffic on the same machine (docs/emulator.md, How many GPUs this machine emulates
    faithfully); each frame then stands for ``mtu / byte_scale`` real bytes."""

    link_mbps: float | Literal["auto"] = "auto"
    """The emulated rate B_e of every link, Mbit/s (at most 1000), or ``auto``: the highest rate
    at which this machine's headroom probe, every link saturated at once, reaches
    ``headroom_target`` of link rate."""
    mtu: int = Field(default=dpn.MTU, ge=dpn.MTU, le=dpn.MAX_MTU)
    """MTU of every fabric interface, bytes; above 1500, jumbo frames: the switch's CPU cost is
    per frame, so 9000 carries 4-8x the emulated traffic on the same machine."""
    controller: Literal["os-ken", "ryu"] = "os-ken"
    """The framework the controller apps run on: ``os-ken``, or ``ryu`` (``ryu-manager`` from
    ``.venv-ryu``, which ``make setup`` makes where a Python 3.9 exists)."""
    apps: tuple[str, ...] = ()
    """Your own controller apps: paths of ``.py`` files, relative to the working directory,
    loaded beside the built-in ones."""

    @field_validator("apps")
    @classmethod
    def _apps(cls, v):
        from controllers.app_check import check_apps

        problem = check_apps(v)
        if problem:
            raise ValueError(problem)
        return v
    byte_scale: float = Field(default=0.1, gt=0, le=1)
    """Byte scale s, a fraction: the packet backend sends s x the real bytes (TDF = s x port rate
    / ``link_mbps``). A run whose smallest step would be under 64 frames on the wire is emulated
    at a larger s (up to 8 times this, at most 1), recorded as its ``byte_scale`` in the result."""
    headroom: Literal["refuse", "warn", "skip"] = "refuse"
    """What a ``link_mbps`` whose headroom probe misses ``headroom_target`` does: ``refuse`` (the
    run stops before anything is measured, naming the rate that would work), ``warn`` (it runs,
    with a warning in the result) or ``skip`` (no probe; not with ``auto``)."""
    headroom_target: float = Field(default=0.98, gt=0.5, le=1)
    """Fraction of the link rate the headroom probe must reach with every link saturated at
    once."""
    servers: tuple[str, ...] = ()
    """Spread the fabric over these servers (ssh destinations) with Mininet's cluster edition:
    GPUs and their NICs in blocks per server, the OCS on the first (or sharded, ``ocs``), links
    between servers as VXLAN tunnels (docs/cluster.md). Empty: everything on this machine."""
    ssh_config: str | None = None
    """The ssh client configuration (``ssh -F``) reaching ``servers``; default: the lab's
    (``ocslab servers up``) while it is up and has them, else your own."""
    ocs: Literal["central", "sharded"] = "central"
    """Where each OCS of a fabric spread over ``servers`` lives: ``central``, one bridge on the
    first server that every frame between servers crosses; ``sharded``, one bridge per server
    holding its GPUs' ports, a circuit between two servers through a tunnel of its own between
    them (docs/cluster.md, Sharded OCS). ``sharded`` needs two or more servers."""

    @model_validator(mode="after")
    def _sharded(self):
        if self.ocs == "sharded" and len(self.servers) < 2:
            raise ValueError("ocs: sharded needs two or more emulation.servers to shard the OCS over")
        return self

    @field_validator("servers")
    @classmethod
    def _servers(cls, v):
        if len(set(v)) != len(v):
            raise ValueError("a server is named twice")
        for name in v:
            if not name or any(c.isspace() for c in name) or name.startswith("-"):
                raise ValueError(f"{name!r} is not an ssh destination")
        return v

    @field_validator("link_mbps")
    @classmethod
    def _rate(cls, v):
        if v != "auto" and not 0 < v <= 1000:
            raise ValueError(f"must be auto or in (0, 1000] Mbit/s, got {v:g}")
        return v

    @staticmethod
    def defaulted(data, only: set[str] | None = None, kind: str = "", **defaults):
        """A scenario mapping whose ``emulation`` section gets a kind's own ``defaults`` where
        the file gives none (for a kind's ``model_validator(mode="before")``).

        :param only: the fields the kind honours; any other given is refused.
        :param kind: the kind's name, for the refusal.
        :raises ValueError: ``emulation.FIELD: a KIND scenario does not use it ...``, a field the
            kind does not honour.
        """
        if not isinstance(data, dict):
            return data
        given = data.get("emulation", {})
        if not isinstance(given, dict):
            return data
        if only is not None:
            unused = sorted(set(given) - only)
            if unused:
                raise ValueError(f"emulation.{unused[0]}: a {kind or 'scenario of this'} scenario does not use it "
                                 f"(it takes {', '.join('emulation.' + f for f in sorted(only))})")
        return {**data, "emulation": {**defaults, **given}}

    @model_validator(mode="after")
    def _auto_needs_probe(self):
        if self.link_mbps == "auto" and self.headroom == "skip":
            raise ValueError("link_mbps: auto is chosen by the headroom probe; it cannot be combined with headroom: skip")
        return self


class StragglerSpec(StrictModel):
    """``straggler:`` section: rank ``rank`` arrives at every collective D seconds after the
    others (real seconds). D is drawn per iteration from ``distribution`` with a generator seeded
    with ``seed``: ``uniform`` (default) ``delay_s + U[0, jitter_s)``; ``normal``
    ``delay_s + N(0, jitter_s)`` clipped at 0; ``exponential`` ``delay_s + Exp(mean jitter_s)``.
    With ``jitter_s: 0`` D is ``delay_s`` every time. Every algorithm sees the same D in an
    iteration; ``stragglar`` runs are relabelled so that this rank is the straggler."""

    rank: int = Field(ge=0)
    """The straggling rank (a rank of the fabric's GPUs)."""
    delay_s: float = Field(ge=0)
    """Base delay of the straggler's arrival at every collective, real seconds."""
    jitter_s: float = Field(default=0.0, ge=0)
    """Spread of the extra delay drawn per iteration, real seconds: the uniform's width, the
    normal's standard deviation or the exponential's mean; 0: the delay is ``delay_s`` every time."""
    distribution: Literal["uniform", "normal", "exponential"] = "uniform"
    """How the extra delay is drawn: ``uniform`` U[0, jitter_s), ``normal`` N(0, jitter_s)
    (the delay clipped at 0) or ``exponential`` of mean ``jitter_s``."""
    seed: int = 0
    """Seed of the generator that draws the delays."""

    def delays_s(self, iterations: int) -> list[float]:
        """D for iterations ``0 .. iterations-1`` (seconds, deterministic in ``seed``)."""
        if not self.jitter_s:
            return [self.delay_s] * iterations
        rng = np.random.default_rng(self.seed)
        if self.distribution == "uniform":
            extra = rng.uniform(0, self.jitter_s, iterations)
        elif self.distribution == "normal":
            extra = rng.normal(0, self.jitter_s, iterations)
        else:
            extra = rng.exponential(self.jitter_s, iterations)
        return [max(0.0, self.delay_s + float(x)) for x in extra]


MOE_MODES = ("padded", "payload")


class RunSpec(StrictModel):
    """One entry of ``runs:``: a collective by an algorithm, and a planner, run for every size
    of ``sizes``. Collectives and algorithms: ``emulation.workloads.ALGORITHMS`` (and ``moe``:
    ``padded``, ``payload``); planners: ``none``, ``always``, ``greedy``, ``dp``, ``overlap``
    (``emulation.planners``).

    ``schedule`` (time-slotted OCS, :mod:`emulation.flowsim.slotted`, :mod:`emulation.emulator.slotted`):
    ``none`` (default: the planner reconfigures between steps), ``rotor`` (the round-robin
    matchings of K_n, every slot ``slot_s`` real seconds; default: the largest (src, dst) buffer
    of the padded collective, or of the workload, at the port rate) or ``plan``
    (:func:`emulation.planners.bvn.duplex_plan` of the run's traffic matrix, priced with the
    fabric's R). Every slot carries ``slot_headroom`` (fraction) more than it must, and hosts keep a
    guard band of ``guard_s`` at both ends of a slot (real seconds; both backends).
    ``forwarding``: ``direct`` (default: a transfer waits for a circuit to its destination) or
    ``two-hop`` (the excess of pairs whose demand outgrows their slot is relayed through
    intermediate GPUs, RotorLB-style: :mod:`emulation.planners.relay`; needs a schedule)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z_0-9.-]+$")
    """The run's name, unique in the scenario; it labels the run's results."""
    collective: str = "allreduce"
    """The collective: one of ``emulation.workloads.ALGORITHMS`` (``allreduce``,
    ``reducescatter``, ``allgather``, ``alltoall``, ``broadcast``) or ``moe`` (the ``moe:``
    layer's dispatch and combine)."""
    algorithm: str
    """The algorithm that runs the collective (such as ``ring`` or ``rhd`` for an allreduce;
    ``padded`` or ``payload`` for ``moe``)."""
    planner: str = "none"
    """Who sets the OCS's circuits step by step: ``none`` (the initial circuits throughout),
    ``always`` (every step on its ideal topology), ``greedy`` or ``dp`` (reconfigure where the
    ``cost:`` model says it pays) or ``overlap`` (each step's peers wired one step ahead, for
    dependency-driven runs; SWOT)."""
    schedule: Literal["none", "rotor", "plan", "spectra", "spectra-baseline"] = "none"
    """Time-slotted OCS instead of a planner: ``none`` (the planner reconfigures between steps),
    ``rotor`` (the round-robin matchings of all GPUs, equal slots) or ``plan`` (a duplex BvN plan
    of the run's traffic matrix, priced with the fabric's R), both on ``ocs-star`` with one port
    per GPU; or, on ``parallel-ocs``, every step's demand matrix scheduled over the parallel OCSes
    by ``spectra`` (Spectra: decompose, assign by load, equalize; arXiv 2603.07373) or
    ``spectra-baseline`` (one decomposition, every OCS in lockstep), steps one after the other
    (:func:`emulation.planners.spectra.plan_parallel`)."""
    slot_s: float | None = Field(default=None, gt=0)
    """Length of every rotor slot, real seconds; none: the largest (src, dst) buffer of the
    padded collective, or of the workload, at the port rate (``rotor`` only)."""
    guard_s: float = Field(default=0.0, ge=0)
    """Guard band hosts keep at both ends of a slot, real seconds (both backends); with a
    ``spectra`` schedule, what every slot is lengthened by (the packet backend refuses a run whose
    guard is shorter than its senders need at the emulated rate, and says how long it must be)."""
    slot_headroom: float = Field(default=0.0, ge=0, le=10)
    """How much more than it must every slot carries, a fraction (0.1: a tenth more)."""
    forwarding: Literal["direct", "two-hop"] = "direct"
    """``direct`` (a transfer waits for a circuit to its destination) or ``two-hop`` (the excess
    of pairs whose demand outgrows their slot is relayed through intermediate GPUs, RotorLB-style;
    needs a schedule)."""

    @field_validator("collective")
    @classmethod
    def _collective(cls, v: str) -> str:
        if v not in ALGORITHMS and v != "moe":
            raise ValueError(f"unknown collective {v!r} (known: {', '.join(ALGORITHMS)}, moe)")
        return v

    @model_validator(mode="after")
    def _algo(self) -> RunSpec:
        if self.collective == "moe":
            if self.algorithm not in MOE_MODES:
                raise ValueError(f"algorithm: unknown moe algorithm {self.algorithm!r} (known: {', '.join(MOE_MODES)})")
        elif self.algorithm not in ALGORITHMS[self.collective]:
            raise ValueError(f"algorithm: unknown {self.collective} algorithm {self.algorithm!r} "
                             f"(known: {known(self.collective)})")
        if self.schedule != "none" and self.planner != "none":
            raise ValueError(f"planner: must be none with schedule {self.schedule} (the rotor sets the circuits)")
        if self.slot_s is not None and self.schedule != "rotor":
            raise ValueError("slot_s: only a rotor schedule takes a slot length")
        if self.forwarding == "two-hop" and self.schedule not in ("rotor", "plan"):
            raise ValueError("forwarding: two-hop needs a schedule (rotor or plan)")
        if self.slot_headroom and self.schedule.startswith("spectra"):
            raise ValueError("slot_headroom: a spectra schedule sizes its slots to its demand; lengthen them with "
                             "guard_s")
        return self

    @field_validator("planner")
    @classmethod
    def _planner(cls, v: str) -> str:
        return known_name(v, PLANNERS, "planner")


class NamedScenario(StrictModel):
    """What every kind of scenario file holds: its ``name`` (letters, digits, ``_``, ``.``, ``-``;
    it names the results directory) and an optional ``description``."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z_0-9.-]+$")
    """The scenario's name; it names the results directory."""
    description: str = ""
    """What the scenario is about, free text."""


class Scenario(NamedScenario):
    """A whole collective scenario file. ``sizes`` are buffer sizes (bytes, or strings like ``25MiB``)."""

    fabric: FabricSpec
    """The fabric: its GPUs, their ports and the switches between them."""
    cost: CostModel = CostModel()
    """The cost model: per-message latency and per-hop delay, applied to transfers and used by
    the planners to price steps."""
    sizes: list[int] = Field(default_factory=list)
    """Buffer sizes every run runs at, bytes, or strings with a unit: binary ``KiB``, ``MiB``,
    ``GiB``, ``TiB`` (2^10 ...) or decimal ``KB``, ``MB``, ``GB``, ``TB`` (10^3 ...), such as
    ``25MiB`` (a bare ``25M`` is refused: it could be either); optional when every run is ``moe``."""
    runs: list[RunSpec] = Field(min_length=1)
    """The runs, each a collective by an algorithm with a planner or a schedule, run at every
    size."""
    moe: MoELayer | None = None
    """One MoE layer's routing on the fabric's GPUs, replayed by runs with collective ``moe``;
    none: no such run."""
    emulation: EmulationSpec = EmulationSpec()
    """The packet backend's scale model: the emulated link rate, byte scale, MTU and
    controller."""
    backend: ScenarioBackend = "packet"
    """Where ``ocslab run`` runs it unless ``--backend`` says otherwise: ``packet`` (the packet
    backend: real packets on an emulated fabric) or ``flow`` (the flow-level simulator);
    ``mininet``, the packet backend's earlier name, loads with a deprecation warning."""
    semantics: Literal["round-synchronous", "dependency-driven"] = "round-synchronous"
    """How steps follow one another: ``round-synchronous`` (a step starts once the previous one
    is delivered, and after R if it reconfigures) or ``dependency-driven`` (a transfer starts as
    soon as the chunks it sends have arrived and its circuit is live, so steps overlap and
    traffic on kept circuits moves through a reconfiguration's dark window; both backends,
    per-step plans only: rotor runs and runs on parallel OCSes are round-synchronous)."""
    straggler: StragglerSpec | None = None
    """A rank that arrives late at every collective; none: no straggler."""
    iterations: int = Field(default=1, ge=1, le=10_000)
    """How many times every (size, run) runs, each time with its own straggler delay; results
    keep one record per iteration."""

    @field_validator("sizes", mode="before")
    @classmethod
    def _sizes(cls, v: Any) -> Any:
        if not isinstance(v, list):
            raise ValueError("must be a list of byte sizes")
        return [parse_bytes(x) for x in v]

    @model_validator(mode="after")
    def _unique_names(self) -> Scenario:
        names = [r.name for r in self.runs]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"runs: duplicate run name {sorted(dup)[0]!r}")
        return self

    @model_validator(mode="before")
    @classmethod
    def _moe_on_fabric(cls, data: Any) -> Any:
        """The MoE layer runs on the fabric's GPUs: ``moe.gpus`` comes from ``fabric.gpus``."""
        if isinstance(data, dict) and isinstance(data.get("moe"), dict) and isinstance(data.get("fabric"), dict):
            if "gpus" in data["moe"]:
                raise ValueError("moe.gpus: the layer runs on the fabric's GPUs; set fabric.gpus")
            data = {**data, "moe": {**data["moe"], "gpus": data["fabric"].get("gpus")}}
        return data

    @model_validator(mode="after")
    def _moe_and_sizes(self) -> Scenario:
        if any(r.collective != "moe" for r in self.runs) and not self.sizes:
            raise ValueError("sizes: at least one buffer size is needed (runs other than moe)")
        if any(r.collective == "moe" for r in self.runs) and self.moe is None:
            raise ValueError("moe: a moe section is needed by runs with collective moe")
        if any(r.schedule in ("rotor", "plan") for r in self.runs) and (
                self.fabric.topology != "ocs-star" or self.fabric.ports_per_gpu != 1):
            raise ValueError("fabric: a rotor schedule needs topology ocs-star with ports_per_gpu 1")
        spectra = [r.name for r in self.runs if r.schedule.startswith("spectra")]
        if spectra and self.fabric.topology != "parallel-ocs":
            raise ValueError(f"fabric: run {spectra[0]}'s spectra schedule needs topology parallel-ocs, not "
                             f"{self.fabric.topology}")
        return self

    @model_validator(mode="after")
    def _no_rack(self) -> Scenario:
        if self.fabric.topology == "rack":
            raise ValueError("fabric: a rack with spares is for training scenarios (a job: section; ocslab train)")
        return self

    @model_validator(mode="after")
    def _straggler_rank(self) -> Scenario:
        spectra = [r.name for r in self.runs if r.schedule.startswith("spectra")]
        if self.straggler is not None and spectra:
            raise ValueError(f"straggler: run {spectra[0]}'s spectra schedule starts every GPU at once (no straggler)")
        if self.straggler is not None and self.straggler.rank >= self.fabric.gpus:
            raise ValueError(f"straggler.rank: {self.straggler.rank} is not a rank of {self.fabric.gpus} GPUs")
        return self

    _experiment: Any = PrivateAttr(default=None)

    @property
    def experiment(self):
        """The :class:`~emulation.scenario.Experiment` checked at load
        (:func:`~emulation.scenario.load.check_experiment`), or None."""
        return self._experiment

    def keep_experiment(self, exp) -> None:
        """Keep ``exp`` as :attr:`experiment` (its small resolved runs are not planned again)."""
        self._experiment = exp

    def model_copy(self, *, update: dict | None = None, deep: bool = False) -> Scenario:
        """A copy (pydantic's); one with fields changed (``update``) drops the experiment kept
        at load, which was resolved from the old fields."""
        copy = super().model_copy(update=update, deep=deep)
        if update:
            copy._experiment = None
        return copy

    def to_yaml(self) -> str:
        """The scenario as resolved (defaults filled in), YAML."""
        return yaml.safe_dump(self.model_dump(mode="json", exclude={"moe": {"gpus"}}), sort_keys=False)
