"""WAN scenario files (``ocslab run``, ``ocslab te``): a topology, its traffic matrices, tunnels,
the TE formulation, how the routers are sliced among controllers, and how far each controller's
view of the demand is off.

Example (``experiments/wan_b4.yaml``)::

    name: wan_b4
    wan:
      topology: b4
      traffic: {matrices: measured, scale: 0.8, first: 0, count: 36}
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
from emulation.wan.te import OBJECTIVES, SYMPHONY_LAMBDA
from topologies.wan import BUNDLED, WanError, load_bundled


class TrafficSpec(StrictModel):
    """``traffic:``: the ``measured`` matrices of the bundled topology, multiplied by ``scale``,
    ``count`` of them from index ``first`` (default: all)."""

    matrices: Literal["measured"] = "measured"
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
    """``wan:``: the topology (a bundled one: ``b4``) and the sections above."""

    topology: str
    traffic: TrafficSpec = TrafficSpec()
    tunnels: TunnelSpec = TunnelSpec()
    te: TeSpec = TeSpec()
    slices: SliceSpec = SliceSpec()
    divergence: DivergenceSpec = DivergenceSpec()

    @field_validator("topology")
    @classmethod
    def _topology(cls, v: str) -> str:
        return known_name(v, BUNDLED, "topology")


class WanScenario(NamedScenario):
    """A whole WAN scenario file."""

    wan: WanSpec
    backend: Literal["flow"] = "flow"

    @model_validator(mode="before")
    @classmethod
    def _backend(cls, data):
        if isinstance(data, dict) and data.get("backend") == "mininet":
            raise ValueError("backend: WAN scenarios run on the flow backend in this version "
                             "(the packet replay through per-slice controllers is not available yet)")
        return data


def load_wan_scenario(path: str | Path) -> WanScenario:
    """Read and validate a WAN scenario; check its matrices and slicing exist.

    :raises ScenarioError: one line, ``FILE: field: problem``.
    """
    def check(sc: WanScenario) -> None:
        topo, tms = load_bundled(sc.wan.topology)
        t = sc.wan.traffic
        if t.first >= len(tms):
            raise ScenarioError(f"wan.traffic.first: {t.first} but {sc.wan.topology} has {len(tms)} matrices")
        if t.count is not None and t.first + t.count > len(tms):
            raise ScenarioError(f"wan.traffic.count: {t.first} + {t.count} exceeds the {len(tms)} matrices")
        s = sc.wan.slices
        if s.method == "random" and s.count > topo.routers:
            raise ScenarioError(f"wan.slices.count: {s.count} slices of {topo.routers} routers")

    try:
        return load_checked(path, WanScenario, ("runs", "collective", "run"), check)
    except WanError as e:
        raise ScenarioError(f"{path}: {e}") from None
