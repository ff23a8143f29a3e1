"""Scenario files: load, validate, resolve into fabric + runs.

A scenario is one experiment: fabric + workloads + planner + scale + backend. Files are YAML;
every field is checked on load and a bad one is reported as a single line
``FILE: field.path: what is wrong`` (:class:`ScenarioError`).

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
``planner`` (``none``, ``always``, ``greedy``, ``dp``; the latter two use ``cost``).
``iterations`` repeats every (size, run), each iteration with its own straggler delay D
(:class:`StragglerSpec`); results keep one record per iteration.

MoE layers and time-slotted OCS (``experiments/moe_*.yaml``): a ``moe:`` section
(:class:`MoESpec`) defines one layer's routing; runs with ``collective: moe`` and ``algorithm:
padded`` or ``payload`` replay its dispatch and combine (``sizes`` is then optional; such a run
is labelled with the per-GPU routed bytes). A run's ``schedule`` (:class:`RunSpec`) puts the OCS
in rotor mode instead of a planner: ``rotor`` (round-robin matchings, equal slots) or ``plan``
(a duplex BvN plan of the run's traffic matrix); both need ``ocs-star`` with one port per GPU.

Spec: ``docs/architecture.md`` (data flow: experiments/*.yaml --load+validate--> Scenario).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from emulation.fabric import Fabric, FabricError
from emulation.planners import PLANNERS, CostModel, Plan, PlanError, make_plan
from emulation.scale import Scale
from emulation.workloads import ALGORITHMS, build, known
from emulation.workloads.moe import MoELayer, moe_workload, route
from emulation.workloads.stragglar import with_straggler
from topologies import BUILDERS

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


#: The largest fabric a scenario describes (GPUs); the flow backend runs it, the packet backend
#: is bounded by the machine (:mod:`emulation.emulator.limits`).
MAX_GPUS = 4096


class ScenarioError(ValueError):
    """A scenario that cannot be run; ``str()`` is one line naming the field."""


def parse_bytes(value: Any) -> int:
    """``25MiB`` / ``1 GiB`` / ``4096`` -> bytes (int). :raises ValueError: not a size."""
    if isinstance(value, bool):
        raise ValueError(f"not a byte size: {value!r}")
    if isinstance(value, int):
        n = value
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMG]i?B|B)?\s*", str(value), re.I)
        if not m:
            raise ValueError(f"not a byte size: {value!r} (e.g. 4096, 64KiB, 25MiB, 1GiB)")
        n = int(float(m.group(1)) * _UNITS[(m.group(2) or "").upper()])
    if n < 1:
        raise ValueError(f"byte size must be positive, got {value!r}")
    return n


def format_bytes(n: int) -> str:
    """Human form: ``26214400`` -> ``25MiB``."""
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= f and n % f == 0:
            return f"{n // f}{unit}"
    return f"{n}B"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class FabricSpec(_Strict):
    """``fabric:`` section; ``topology`` names a builder in ``topologies.BUILDERS``. A ``rack``
    (:func:`topologies.builders.rack`, training scenarios) also takes ``spares`` (spare GPUs
    beside the ``gpus`` working ones) and ``electrical_gbps`` (the rate of its slower
    electrical path, real Gbit/s)."""

    topology: str
    gpus: int = Field(ge=2, le=MAX_GPUS)
    ports_per_gpu: int = Field(default=2, ge=1, le=16)
    port_gbps: float = Field(default=400.0, gt=0)
    reconfiguration_delay_s: float = Field(default=0.0, ge=0)
    initial: str = "ring"
    spares: int = Field(default=0, ge=0, le=64)
    electrical_gbps: float | None = Field(default=None, gt=0)

    @field_validator("topology")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in BUILDERS:
            raise ValueError(f"unknown topology {v!r} (known: {', '.join(BUILDERS)})")
        return v

    @model_validator(mode="after")
    def _rack_only(self) -> FabricSpec:
        if self.topology != "rack":
            if self.spares:
                raise ValueError(f"spares: only a rack has spare GPUs, not {self.topology}")
            if self.electrical_gbps is not None:
                raise ValueError(f"electrical_gbps: only a rack has an electrical path, not {self.topology}")
        return self

    def build(self) -> Fabric:
        """Build the fabric. :raises ScenarioError: ``fabric: ...``, the builder rejects the parameters."""
        extra = {"spares": self.spares, "electrical_gbps": self.electrical_gbps} if self.topology == "rack" else {}
        try:
            return BUILDERS[self.topology](
                gpus=self.gpus, ports_per_gpu=self.ports_per_gpu, port_gbps=self.port_gbps,
                reconfiguration_delay_s=self.reconfiguration_delay_s, initial=self.initial, **extra)
        except (FabricError, TypeError) as e:
            raise ScenarioError(f"fabric: {e}") from None


class CostSpec(_Strict):
    """``cost:`` section: alpha (s per message) and delta (s per hop), real-equivalent."""

    alpha_s: float = Field(default=0.0, ge=0)
    delta_s: float = Field(default=0.0, ge=0)


class EmulationSpec(_Strict):
    """``emulation:`` section: the scale model of the packet backend.

    ``link_mbps`` is the emulated rate B_e of every port (Mbit/s) or ``auto``: the highest rate
    at which this machine's headroom probe (every link saturated at once) reaches
    ``headroom_target`` of link rate (:mod:`emulation.emulator.calibration`). A given rate is
    probed too; ``headroom`` says what happens when it misses the target: ``refuse`` (the run
    stops before anything is measured, naming the rate that would work), ``warn`` (it runs, with
    a warning in the result), ``skip`` (no probe; not with ``auto``). ``byte_scale`` s: emulated
    bytes = real bytes x s; TDF = s x port rate / B_e."""

    link_mbps: float | Literal["auto"] = "auto"
    byte_scale: float = Field(default=0.1, gt=0, le=1)
    headroom: Literal["refuse", "warn", "skip"] = "refuse"
    headroom_target: float = Field(default=0.98, gt=0.5, le=1)

    @field_validator("link_mbps")
    @classmethod
    def _rate(cls, v):
        if v != "auto" and not 0 < v <= 1000:
            raise ValueError(f"must be auto or in (0, 1000] Mbit/s, got {v:g}")
        return v

    @model_validator(mode="after")
    def _auto_needs_probe(self):
        if self.link_mbps == "auto" and self.headroom == "skip":
            raise ValueError("link_mbps: auto is chosen by the headroom probe; it cannot be combined with headroom: skip")
        return self


class StragglerSpec(_Strict):
    """``straggler:`` section: rank ``rank`` arrives at every collective D seconds after the
    others (real seconds). D is drawn per iteration from ``distribution`` with a generator seeded
    with ``seed``: ``uniform`` (default) ``delay_s + U[0, jitter_s)``; ``normal``
    ``delay_s + N(0, jitter_s)`` clipped at 0; ``exponential`` ``delay_s + Exp(mean jitter_s)``.
    With ``jitter_s: 0`` D is ``delay_s`` every time. Every algorithm sees the same D in an
    iteration; ``stragglar`` runs are relabelled so that this rank is the straggler."""

    rank: int = Field(ge=0)
    delay_s: float = Field(ge=0)
    jitter_s: float = Field(default=0.0, ge=0)
    distribution: Literal["uniform", "normal", "exponential"] = "uniform"
    seed: int = 0

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


class MoESpec(_Strict):
    """``moe:`` section: one MoE layer on the fabric's GPUs (:class:`emulation.workloads.moe.MoELayer`;
    docs/mechanisms.md): ``experts`` in total (a multiple of the GPUs), ``top_k``, ``capacity_factor``,
    ``tokens_per_gpu`` S, ``hidden`` H, ``element_bytes`` b, routing ``skew`` (``uniform``,
    ``zipf`` with exponent ``skew_param``, ``dirichlet`` with concentration ``skew_param``),
    ``popularity`` (``shared``: one popularity vector for all GPUs; ``per-gpu``: one per source GPU),
    ``seed``, combine tiles of ``tile_tokens`` x ``tile_cols``."""

    experts: int = Field(ge=1)
    top_k: int = Field(default=2, ge=1)
    capacity_factor: float = Field(default=1.0, gt=0)
    tokens_per_gpu: int = Field(default=4096, ge=1)
    hidden: int = Field(default=2048, ge=1)
    element_bytes: int = Field(default=4, ge=1)
    skew: Literal["uniform", "zipf", "dirichlet"] = "uniform"
    skew_param: float = Field(default=1.0, gt=0)
    popularity: Literal["shared", "per-gpu"] = "shared"
    seed: int = 0
    tile_tokens: int = Field(default=128, ge=1)
    tile_cols: int = Field(default=64, ge=1)

    def layer(self, gpus: int) -> MoELayer:
        """The layer on ``gpus`` GPUs. :raises ValueError: naming the field."""
        return MoELayer(gpus=gpus, **self.model_dump())


MOE_MODES = ("padded", "payload")


class RunSpec(_Strict):
    """One entry of ``runs:``: a collective by an algorithm, and a planner, run for every size
    of ``sizes``. Collectives and algorithms: ``emulation.workloads.ALGORITHMS`` (and ``moe``:
    ``padded``, ``payload``); planners: ``none``, ``always``, ``greedy``, ``dp``
    (``emulation.planners``).

    ``schedule`` (time-slotted OCS, :mod:`emulation.flowsim.slotted`, :mod:`emulation.emulator.slotted`):
    ``none`` (default: the planner reconfigures between steps), ``rotor`` (the round-robin
    matchings of K_n, every slot ``slot_s`` real seconds; default: the largest (src, dst) buffer
    of the padded collective, or of the workload, at the port rate) or ``plan``
    (:func:`emulation.planners.bvn.duplex_plan` of the run's traffic matrix, priced with the
    fabric's R). Every slot carries ``headroom`` (fraction) more than it must, and hosts keep a
    guard band of ``guard_s`` at both ends of a slot (real seconds; both backends).
    ``forwarding``: ``direct`` (default: a transfer waits for a circuit to its destination) or
    ``two-hop`` (the excess of pairs whose demand outgrows their slot is relayed through
    intermediate GPUs, RotorLB-style: :mod:`emulation.planners.relay`; needs a schedule)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    collective: str = "allreduce"
    algorithm: str
    planner: str = "none"
    schedule: Literal["none", "rotor", "plan"] = "none"
    slot_s: float | None = Field(default=None, gt=0)
    guard_s: float = Field(default=0.0, ge=0)
    headroom: float = Field(default=0.0, ge=0, le=10)
    forwarding: Literal["direct", "two-hop"] = "direct"

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
        if self.forwarding == "two-hop" and self.schedule == "none":
            raise ValueError("forwarding: two-hop needs a schedule (rotor or plan)")
        return self

    @field_validator("planner")
    @classmethod
    def _planner(cls, v: str) -> str:
        if v not in PLANNERS:
            raise ValueError(f"unknown planner {v!r} (known: {', '.join(PLANNERS)})")
        return v


class Scenario(_Strict):
    """A whole scenario file. ``sizes`` are buffer sizes (bytes, or strings like ``25MiB``)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    fabric: FabricSpec
    cost: CostSpec = CostSpec()
    sizes: list[int] = Field(default_factory=list)
    runs: list[RunSpec] = Field(min_length=1)
    moe: MoESpec | None = None
    emulation: EmulationSpec = EmulationSpec()
    backend: Literal["mininet", "flow"] = "mininet"
    semantics: Literal["round-synchronous", "dependency-driven"] = "round-synchronous"
    straggler: StragglerSpec | None = None
    iterations: int = Field(default=1, ge=1, le=10_000)

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

    @model_validator(mode="after")
    def _moe_and_sizes(self) -> Scenario:
        if any(r.collective != "moe" for r in self.runs) and not self.sizes:
            raise ValueError("sizes: at least one buffer size is needed (runs other than moe)")
        if any(r.collective == "moe" for r in self.runs):
            if self.moe is None:
                raise ValueError("moe: a moe section is needed by runs with collective moe")
            try:
                self.moe.layer(self.fabric.gpus)
            except ValueError as e:
                raise ValueError(f"moe: {e}") from None
        if any(r.schedule != "none" for r in self.runs) and (
                self.fabric.topology != "ocs-star" or self.fabric.ports_per_gpu != 1):
            raise ValueError("fabric: a rotor schedule needs topology ocs-star with ports_per_gpu 1")
        return self

    @model_validator(mode="after")
    def _no_rack(self) -> Scenario:
        if self.fabric.topology == "rack":
            raise ValueError("fabric: a rack with spares is for training scenarios (a job: section; ocslab train)")
        return self

    @model_validator(mode="after")
    def _straggler_rank(self) -> Scenario:
        if self.straggler is not None and self.straggler.rank >= self.fabric.gpus:
            raise ValueError(f"straggler.rank: {self.straggler.rank} is not a rank of {self.fabric.gpus} GPUs")
        return self

    # ---- resolution ----------------------------------------------------------------------
    def arrivals_s(self, iteration: int = 0) -> list[float]:
        """Arrival time of every rank at the collective in ``iteration`` (real seconds; 0 but
        the straggler's)."""
        return self._arrivals(iteration + 1)[iteration]

    def iteration_arrivals_s(self) -> list[list[float]]:
        """:meth:`arrivals_s` of every iteration, ``(iterations, gpus)``."""
        return self._arrivals(self.iterations)

    def _arrivals(self, count: int) -> list[list[float]]:
        out = [[0.0] * self.fabric.gpus for _ in range(count)]
        if self.straggler is not None:
            for row, d in zip(out, self.straggler.delays_s(count)):
                row[self.straggler.rank] = d
        return out

    def build_fabric(self) -> Fabric:
        """Build the fabric (:meth:`FabricSpec.build`). :raises ScenarioError: the builder rejects it."""
        return self.fabric.build()

    def cost_model(self) -> CostModel:
        """The planners' cost model: this scenario's alpha and delta."""
        return CostModel(self.cost.alpha_s, self.cost.delta_s)

    def jobs(self) -> list[tuple[int, RunSpec]]:
        """Every ``(size, run)`` to execute: each run for every size, a ``moe`` run once (its
        size: the per-GPU routed bytes S k H b)."""
        out = []
        for size in self.sizes:
            out += [(size, r) for r in self.runs if r.collective != "moe"]
        if self.moe is not None:
            layer = self.moe.layer(self.fabric.gpus)
            per_gpu = layer.tokens_per_gpu * layer.top_k * layer.token_bytes
            out += [(per_gpu, r) for r in self.runs if r.collective == "moe"]
        return out

    def workload(self, run: RunSpec, gpus: int, nbytes: int):
        """``run``'s workload for an ``nbytes`` buffer (a moe run: its layer's dispatch and combine).

        :raises ValueError: bad sizes.
        """
        if run.collective == "moe":
            return moe_workload(_routed(self.moe.layer(gpus)), run.algorithm)
        w = build(run.algorithm, gpus, nbytes, run.collective)
        if run.algorithm == "stragglar" and self.straggler is not None:
            w = with_straggler(w, self.straggler.rank)
        return w

    def padding_bytes(self, run: RunSpec, workload) -> int:
        """Bytes of ``workload`` that carry no token: a moe run's null tokens (padded) or tile
        rounding (payload); 0 for other collectives."""
        if run.collective != "moe":
            return 0
        tr = _routed(self.moe.layer(workload.ranks))
        off = ~np.eye(workload.ranks, dtype=bool)
        payload = 2 * int(tr.dispatch[off].sum())  # every kept token travels out and back
        return workload.bytes_sent - payload

    def slot_schedule(self, run: RunSpec, workload):
        """The time-slotted OCS of a ``schedule`` run (:class:`RunSpec`), an
        :class:`emulation.flowsim.slotted.Slotted` in real seconds (with its relay plan for
        ``forwarding: two-hop``); None for ``schedule: none``.

        :raises ValueError: the schedule cannot be built (e.g. a guard band longer than a slot).
        """
        from emulation.flowsim.slotted import Slotted, SlotSchedule
        from emulation.planners.bvn import DuplexSlot, duplex_plan
        from emulation.planners.relay import two_hop, window_bytes
        from emulation.workloads.matchings import round_robin_matchings

        if run.schedule == "none":
            return None
        f = self.fabric
        bps = f.port_gbps * 1e9 / 8
        n = workload.ranks
        demand = np.zeros((n, n))
        for st in workload.steps:
            step = np.zeros((n, n))
            for t in st.transfers:
                step[t.src, t.dst] += t.bytes
            demand = np.maximum(demand, step)
        if run.schedule == "rotor":
            if run.slot_s is not None:
                if run.slot_s <= 2 * run.guard_s:
                    raise ValueError(f"slot_s: {run.slot_s:.3g} s does not exceed the two guard bands "
                                     f"(2 x guard_s = {2 * run.guard_s:.3g} s)")
                pair = (run.slot_s - 2 * run.guard_s) * bps / (1 + run.headroom)
            elif run.collective == "moe":
                layer = self.moe.layer(n)
                pair = layer.capacity * layer.experts_per_gpu * layer.token_bytes
            else:
                pair = float(np.maximum(demand, demand.T).max())
            slots = [DuplexSlot(pair, m) for m in round_robin_matchings(n)]
            method = "round-robin"
        else:
            slots, method = duplex_plan(demand, f.reconfiguration_delay_s * bps)
        sched = SlotSchedule.from_duplex(slots, f.port_gbps, f.reconfiguration_delay_s, run.guard_s, run.headroom)
        relay = None
        if run.forwarding == "two-hop":
            relay = two_hop(workload, sched.configs, window_bytes(sched.slots_s, run.guard_s, run.headroom, f.port_gbps))
        return Slotted(sched, method, relay)

    def plan(self, run: RunSpec, fabric: Fabric, nbytes: int) -> Plan:
        """Build ``run``'s workload for an ``nbytes`` buffer on ``fabric`` and plan it; backends
        execute ``plan.workload`` (a ``schedule`` run: with the planner ``none`` on no fabric
        state; the rotor sets the circuits).

        :raises PlanError: the planner cannot plan it. :raises ValueError: bad sizes.
        """
        w = self.workload(run, fabric.gpus, nbytes)
        if run.schedule != "none":
            return Plan("slotted-" + run.schedule, fabric.initial, (), self.fabric.reconfiguration_delay_s, w)
        return make_plan(run.planner, fabric, w, self.cost_model())

    def scale(self, link_mbps: float | None = None) -> Scale:
        """The packet backend's scale model for this scenario, at ``link_mbps`` (default: the
        scenario's own rate).

        :raises ValueError: the scenario's rate is ``auto`` and no rate was given (calibrate first).
        """
        rate = link_mbps if link_mbps is not None else self.emulation.link_mbps
        if rate == "auto":
            raise ValueError("emulation.link_mbps is auto: the rate comes from calibration")
        return Scale(rate, self.emulation.byte_scale, self.fabric.port_gbps)

    def to_yaml(self) -> str:
        """The scenario as resolved (defaults filled in), YAML."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


@functools.lru_cache(maxsize=16)
def _routed(layer: MoELayer):
    """:func:`emulation.workloads.moe.route`, once per layer (a scenario asks for the workload,
    its padding and its schedule; 64 GPUs x 4096 tokens is worth not routing thrice)."""
    return route(layer)


def read_yaml(path: str | Path) -> dict:
    """The mapping in YAML file ``path``. :raises ScenarioError: unreadable, not YAML, not a mapping."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise ScenarioError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: must be a mapping of sections (fabric, ...)")
    return data


def validate(model: type[BaseModel], data: dict, path: str | Path):
    """``model.model_validate(data)``; a validation error becomes one line naming the field.

    :raises ScenarioError: ``FILE: field.path: problem``.
    """
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        # model-level checks name their field at the start of the message
        field = re.match(r"([a-z_]+(?:\.[a-z_0-9]+)*): (.*)", msg)
        if loc and field and err["type"] == "value_error":
            loc, msg = f"{loc}.{field.group(1)}", field.group(2)
        elif not loc and field and err["type"] == "value_error":
            loc, msg = field.group(1), field.group(2)
        raise ScenarioError(f"{path}: {loc}: {msg}" if loc else f"{path}: {msg}") from None


def load_checked(path: str | Path, model: type[BaseModel], other_kind: tuple[str, str, str], check) -> BaseModel:
    """Read ``path`` (:func:`read_yaml`), refuse a file of the other scenario kind, validate it
    as ``model`` (:func:`validate`) and run ``check(scenario)``, prefixing its one-line error
    with the path.

    :param other_kind: ``(section, kind, command)``: a file with that top-level section is a
        scenario of that kind, run by that ``ocslab`` command.
    :raises ScenarioError: one line, ``FILE: field: problem``.
    """
    path = Path(path)
    data = read_yaml(path)
    section, kind, command = other_kind
    if section in data:
        raise ScenarioError(f"{path}: {section}: a {kind} scenario; run it with: ocslab {command} {path}")
    sc = validate(model, data, path)
    try:
        check(sc)
    except ScenarioError as e:
        raise ScenarioError(f"{path}: {e}") from None
    return sc


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file, and check that its fabric builds and every run can be
    planned.

    :raises ScenarioError: one line, ``FILE: field: problem``.
    """
    def check(sc: Scenario) -> None:
        _check_memory(sc)
        _check_plannable(sc, sc.build_fabric())

    return load_checked(path, Scenario, ("job", "training", "train"), check)


def _check_memory(sc: Scenario) -> None:
    """Refuse a scenario whose largest workload would not fit in memory (:mod:`emulation.flowsim.limits`)."""
    from emulation.flowsim.limits import check_memory

    counters = []
    for size, r in sc.jobs():
        def count_at(k: int, r=r, size=size) -> int:
            return sc.workload(r, k, size).transfer_count

        try:
            count_at(8)
        except ValueError:
            continue  # not buildable at the fitting sizes: planning itself will say what is wrong
        counters.append(count_at)
    msg = check_memory(counters, sc.fabric.gpus) if counters else None
    if msg:
        raise ScenarioError(msg)


def _check_plannable(sc: Scenario, fabric: Fabric) -> None:
    sizes = {id(r): size for size, r in sc.jobs()}
    for i, run in enumerate(sc.runs):
        try:
            plan = sc.plan(run, fabric, sizes[id(run)])
            if run.schedule != "none":
                sc.slot_schedule(run, plan.workload)
        except (PlanError, ValueError) as e:
            raise ScenarioError(f"runs.{i}: {e}") from None
