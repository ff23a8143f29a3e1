"""WAN scenario files (``ocslab run``, ``ocslab te``): a topology, its traffic matrices, tunnels,
the TE formulation, how the routers are sliced among controllers, and how far each controller's
view of the demand is off.

Example (``experiments/wan_b4.yaml``)::

    name: wan_b4
    wan:
      topology: b4
      traffic: {matrices: bundled, scale: 0.8, first: 0, count: 36}
      tunnels: {k: 4, method: ksp}
      te: {objective: max-flow, regulariser: 0, headroom: 0}
      slices: {count: 5, method: random, seed: 0}
      divergence: {distribution: half-normal, sd: 0.05, seed: 0}
    backend: flow

``te.regulariser`` is lambda of Symphony's ``lambda x sum_e u_e^2`` (0: the plain LP; ``symphony``:
the artefact's value for the objective, :data:`emulation.wan.te.SYMPHONY_LAMBDA`).
``divergence.sd: 0`` gives every controller the true demand. Bad fields are reported as one line
``FILE: field: problem`` (:class:`emulation.scenario.ScenarioError`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from emulation.scenario.load import load_checked
from emulation.scenario.schema import NamedScenario, ScenarioError, StrictModel, known_name
from emulation.wan.slicing import METHODS
from emulation.planners.te import OBJECTIVES, SYMPHONY_LAMBDA
from topologies.wan import TrafficMatrices, WanError, WanTopology, load_bundled, wan_directory


class TrafficSpec(StrictModel):
    """``traffic:``: the topology's own matrices (``bundled``) or a ``tm,src,dst,demand`` CSV
    over its routers, multiplied by ``scale``, ``count`` of them from index ``first`` (default:
    all)."""

    matrices: str = "bundled"
    scale: float = Field(default=1.0, gt=0)
    first: int = Field(default=0, ge=0)
    count: int | None = Field(default=None, ge=1)


class TunnelSpec(StrictModel):
    """``tunnels:``: ``k`` shortest simple paths per demand (``ksp``: hop count, Yen)."""

    k: int = Field(default=4, ge=1, le=16)
    method: Literal["ksp"] = "ksp"


class TeSpec(StrictModel):
    """``te:``: the ``objective`` (``max-flow``, ``mcf``, ``min-mlu``), the regulariser lambda
    (a number >= 0, or ``symphony``) and the capacity ``headroom`` fraction."""

    objective: str = "mcf"
    regulariser: float | Literal["symphony"] = 0.0
    headroom: float = Field(default=0.0, ge=0, lt=1)

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
    method: str = "random"
    seed: int = 0

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        return known_name(v, METHODS, "method")


class DivergenceSpec(StrictModel):
    """``divergence:``: every controller's view of a demand is ``D (1 - p)``, p drawn per
    controller and demand (:class:`emulation.wan.divergence.Deviation`)."""

    distribution: Literal["half-normal", "heavy-tail"] = "half-normal"
    sd: float = Field(default=0.05, ge=0, le=0.5)
    seed: int = 0


class WanSpec(StrictModel):
    """``wan:``: the topology (bundled: ``b4``, ``abilene``, ``geant``; or a directory with
    ``topology.json`` and ``traffic_matrices.csv``, :mod:`topologies.wan`) and the sections above."""

    topology: str
    traffic: TrafficSpec = TrafficSpec()
    tunnels: TunnelSpec = TunnelSpec()
    te: TeSpec = TeSpec()
    slices: SliceSpec = SliceSpec()
    divergence: DivergenceSpec = DivergenceSpec()

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


class KillSpec(StrictModel):
    """``packet.kill:``: SIGKILL slice ``slice``'s controller at the start of interval
    ``interval`` (counted from the first replayed matrix)."""

    slice: int = Field(ge=0)
    interval: int = Field(ge=1)


class FailSpec(StrictModel):
    """``packet.fail:``: take the cable of ``link`` ``[u, v]`` (router indices; both directions)
    down halfway through interval ``interval``; every controller recomputes without it."""

    link: tuple[int, int]
    interval: int = Field(ge=0)


class PacketSpec(StrictModel):
    """``packet:`` (``--backend mininet`` only): ``link_mbps`` the emulated rate of the
    largest-capacity link (Mbit/s of frames; every link is shaped in proportion to its
    capacity), ``interval_s`` how long each matrix is replayed, ``flows`` UDP flows per demand,
    ``payload_bytes`` per datagram, ``warmup_s`` after each interval's start before link loads
    are measured, the faults ``kill`` and ``fail``, and the framework the slice controllers run on
    (``controller``: ``os-ken`` or ``ryu``)."""

    link_mbps: float = Field(default=8.0, gt=0, le=200)
    interval_s: float = Field(default=3.0, ge=1.0, le=60)
    flows: int = Field(default=128, ge=1, le=1000)
    payload_bytes: int = Field(default=500, ge=64, le=1400)
    warmup_s: float = Field(default=1.0, ge=0.2)
    kill: KillSpec | None = None
    fail: FailSpec | None = None
    controller: Literal["os-ken", "ryu"] = "os-ken"

    @model_validator(mode="after")
    def _warmup(self):
        if self.warmup_s > self.interval_s - 0.5:
            raise ValueError(f"warmup_s: {self.warmup_s} leaves under 0.5 s of the {self.interval_s} s interval")
        return self


class WanScenario(NamedScenario):
    """A whole WAN scenario file."""

    wan: WanSpec
    packet: PacketSpec = PacketSpec()
    backend: Literal["flow", "mininet"] = "flow"


def load_wan_scenario(path: str | Path) -> WanScenario:
    """Read and validate a WAN scenario; check its matrices and slicing exist.

    :raises ScenarioError: one line, ``FILE: field: problem``.
    """
    def check(sc: WanScenario) -> None:
        topo, tms = sc.wan.load()
        t = sc.wan.traffic
        if t.first >= len(tms):
            raise ScenarioError(f"wan.traffic.first: {t.first} but {sc.wan.topology} has {len(tms)} matrices")
        if t.count is not None and t.first + t.count > len(tms):
            raise ScenarioError(f"wan.traffic.count: {t.first} + {t.count} exceeds the {len(tms)} matrices")
        s = sc.wan.slices
        if s.method == "random" and s.count > topo.routers:
            raise ScenarioError(f"wan.slices.count: {s.count} slices of {topo.routers} routers")
        p = sc.packet
        count = t.count if t.count is not None else len(tms) - t.first
        slices = {"random": s.count, "per-router": topo.routers, "one": 1}[s.method]
        if p.kill is not None and p.kill.slice >= slices:
            raise ScenarioError(f"packet.kill.slice: {p.kill.slice} but there are {slices} slices")
        if p.kill is not None and p.kill.interval >= count:
            raise ScenarioError(f"packet.kill.interval: {p.kill.interval} but {count} matrices are replayed")
        if p.fail is not None:
            if tuple(p.fail.link) not in topo.links:
                raise ScenarioError(f"packet.fail.link: {list(p.fail.link)} is not a link of {topo.name}")
            if p.fail.interval >= count:
                raise ScenarioError(f"packet.fail.interval: {p.fail.interval} but {count} matrices are replayed")

    try:
        return load_checked(path, WanScenario, ("runs", "collective", "run"), check)
    except WanError as e:
        raise ScenarioError(f"{path}: {e}") from None
