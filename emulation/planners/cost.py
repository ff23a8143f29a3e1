"""The planners' analytical cost model: alpha + delta x dilation + beta x congestion.

Spec: ``docs/mechanisms.md`` (PCCL, arXiv 2509.15450: step cost on topology G is
``alpha + delta x dilation(t, G) + beta x congestion(t, G)``, shortest-path routing; short-circuiting:
RHD step k on a ring costs ``alpha + 2^k delta + s/(2B)``, on a circuit to the partner
``alpha + delta + m_k/(pB)``).

A step's transfers are routed exactly as both backends route them
(:meth:`emulation.routing.Routes.subflow_arrays`: shortest paths, spread over ``p`` channels);
*congestion* is the most bytes any directed link carries in the step, *dilation* the longest
path in hops. With ``B`` the port rate (bytes/s)::

    cost(step, G) = alpha + delta x dilation + congestion / B        (seconds; inf if unroutable)

It is the fluid model's time whenever the most loaded link stays the bottleneck of all its flows
(uniform steps such as Ring and RHD); otherwise it is a lower bound of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from pydantic import ConfigDict

from emulation.arrays import unique
from emulation.fabric import Configuration, Fabric
from emulation.routing import Routes, RoutingError
from emulation.workloads.model import Step

#: A configuration's GPU-level multigraph: sorted ``(ocs, u, v)`` with u < v, one per circuit.
TopologyKey = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class CostModel:
    """Per-message latency ``alpha_s`` and per-hop propagation ``delta_s`` (real seconds); a
    scenario's ``cost:`` section. Each field's description is its ``metadata["description"]``
    (pydantic reads it; :mod:`emulation.scenario.fields`).

    :raises ValueError: a negative or non-finite value (naming the field).
    """

    __pydantic_config__ = ConfigDict(extra="forbid", allow_inf_nan=False)

    alpha_s: float = field(default=0.0, metadata={"description": (
        "Per-message latency alpha, real seconds: every transfer starts this long after it is issued (both "
        "backends); the planners add it to every step's cost.")})
    delta_s: float = field(default=0.0, metadata={"description": (
        "Per-hop propagation delay delta, real seconds: a transfer's data arrives hops x delta after it leaves "
        "(flow backend); the planners add it per hop of a step's longest path.")})

    def __post_init__(self) -> None:
        for name in ("alpha_s", "delta_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name}: must be a finite number >= 0, got {v}")


@dataclass(frozen=True)
class StepCost:
    """Cost of one step on one configuration: ``time_s`` (seconds), ``dilation`` (hops),
    ``max_link_bytes`` (bytes on the most loaded directed link: the cost model's *congestion*, as
    the short-circuiting papers call it; the WAN's ``congestion`` is another quantity, a sum of
    overload)."""

    time_s: float
    dilation: int
    max_link_bytes: float


UNROUTABLE = StepCost(math.inf, 0, math.inf)


def topology_key(config: Configuration) -> TopologyKey:
    """The GPU multigraph of ``config``: equal keys mean no circuit has to change (the port
    assignment can be reused), so planners compare configurations by key. Memoised on the
    (immutable) configuration."""
    key = getattr(config, "_topology_key", None)
    if key is None:
        key = ()
        for name in sorted(config):
            key += tuple(zip([name] * len(config.circuit_rows(name)), *_pairs(config, name)))
        config._topology_key = key
    return key


def _pairs(config: Configuration, ocs: str) -> tuple[list[int], list[int]]:
    """``(lower GPUs, higher GPUs)`` of ``config``'s circuits on ``ocs``, sorted by pair."""
    rows = config.circuit_rows(ocs)
    lo, hi = np.minimum(rows[:, 0], rows[:, 2]), np.maximum(rows[:, 0], rows[:, 2])
    order = np.lexsort((hi, lo))
    return lo[order].tolist(), hi[order].tolist()


def gpu_pairs(config: Configuration, ocs: str) -> list[tuple[int, int]]:
    """GPU pairs ``(u, v)`` of ``config``'s circuits on ``ocs``, one per circuit (parallel
    circuits repeat), sorted."""
    return list(zip(*_pairs(config, ocs)))


def max_peers(step: Step) -> int:
    """Most distinct peers (sent to or received from) any GPU has in ``step``."""
    if not len(step):
        return 0
    span = int(max(step.src.max(), step.dst.max())) + 1
    ends = unique(np.concatenate([step.src * span + step.dst, step.dst * span + step.src]))  # distinct (GPU, peer)
    return int(np.bincount(ends // span).max())


class StepCoster:
    """Evaluates :func:`cost` of steps on configurations of one fabric, caching routes per
    topology and costs per (transfer pattern, topology)."""

    def __init__(self, fabric: Fabric, model: CostModel):
        self.fabric = fabric
        self.model = model
        self._routes: dict[TopologyKey, Routes | None] = {}
        self._costs: dict[tuple[bytes, TopologyKey], StepCost] = {}
        # by id(step); the step itself is kept in the value so that its id stays unique
        self._sigs: dict[int, tuple[Step, bytes, np.ndarray]] = {}

    def _signature(self, step: Step) -> tuple[bytes, np.ndarray]:
        got = self._sigs.get(id(step))
        if got is None:
            rows = np.stack([step.src, step.dst, step.bytes], 1).reshape(-1, 3)
            got = self._sigs[id(step)] = (step, rows.tobytes(), rows)
        return got[1], got[2]

    def routes(self, config: Configuration) -> Routes:
        """Routes over ``config`` with ``ports_per_gpu`` channels (as the backends use)."""
        key = topology_key(config)
        r = self._routes.get(key)
        if r is None:
            r = self._routes[key] = Routes(self.fabric, config, self.fabric.ports_per_gpu)
        return r

    def cost(self, step: Step, config: Configuration) -> StepCost:
        """:class:`StepCost` of ``step`` on ``config`` (:data:`UNROUTABLE` if a pair has no path)."""
        sig, rows = self._signature(step)
        key = (sig, topology_key(config))
        got = self._costs.get(key)
        if got is None:
            got = self._costs[key] = self._evaluate(rows, self.routes(config))
        return got

    def _evaluate(self, rows: np.ndarray, routes: Routes) -> StepCost:
        if not len(rows):
            return StepCost(0.0, 0, 0.0)
        try:
            s = routes.subflow_arrays(rows[:, 0], rows[:, 1])
        except RoutingError:
            return UNROUTABLE
        loads = s.link_loads(s.flow_bytes(rows[:, 2]), routes.rows.shape[0])
        congestion = float(loads.max()) if loads.size else 0.0
        dilation = int(s.hops.max()) if s.hops.size else 0
        m = self.model
        return StepCost(m.alpha_s + m.delta_s * dilation + congestion / self.fabric.port_bytes_per_s,
                        dilation, congestion)


def plan_cost(fabric: Fabric, plan, model: CostModel) -> float:
    """Cost-model time of executing ``plan`` (a :class:`~emulation.schedule.Plan`) round by
    round: the sum of its steps' costs on their configurations plus R per reconfiguration
    (seconds; inf if some step is unroutable)."""
    coster = StepCoster(fabric, model)
    steps = plan.workload.steps
    total = sum(coster.cost(st, sp.configuration).time_s for st, sp in zip(steps, plan.steps))
    return total + plan.reconfiguration_delay_s * plan.reconfigurations


__all__ = ["CostModel", "StepCost", "StepCoster", "TopologyKey", "gpu_pairs", "max_peers",
           "plan_cost", "topology_key"]
