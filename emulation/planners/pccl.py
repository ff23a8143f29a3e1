"""When to reconfigure: the greedy short-circuit heuristic and PCCL's dynamic program.

Spec: ``docs/mechanisms.md`` ("Ring vs recursive doubling on a ring, and short-circuiting":
greedy; "PCCL": dynamic program). Both minimise the round-synchronous cost-model time
(:mod:`emulation.planners.cost`) of a collective on a fabric with one OCS whose initial
configuration is the base topology G0, where every change of configuration costs R (the
changed circuits are dark, the step waits).

For every step t a planner *chooses* either to run the whole step on some configuration G
(cost ``cost(t, G)``), or to run it on its ideal topology G_t* (:mod:`emulation.planners.ideal`;
when a GPU has more peers than ports, G_t* is a sequence of sub-steps on matchings, each change
inside costing R). Entering a choice whose first configuration differs from the current one
costs R.

- ``greedy``: walk the steps; switch to G_t* when ``R + cost(G_t*) < cost(t, current)``, else
  stay on the current configuration (which may be an earlier step's G_j*).
- ``dp``: states = G0 plus the ideal configurations of *every* step (the spec's states(t) only
  hold G_j* for j <= t; allowing all j lets a step run on a later step's topology, never
  worse, same complexity);
  ``f(t, G) = min over G' of f(t-1, G') + R [G != G'] + cost(t, G)``, answer ``min_G f(T, G)``,
  backtracking gives keep / reconfigure per step. Optimal for the cost model over these
  states, so never worse than greedy, ``none`` (all G0) or ``always``. Ties keep the current
  configuration. O(T x |states|) step costs, cached per (transfer pattern, topology).

Configurations are compared by their GPU multigraph (:func:`~emulation.planners.cost.topology_key`);
the final plan reuses every circuit that stays, so only changed circuits go dark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

from emulation.fabric import Configuration, Fabric, FabricError, assign_ports
from emulation.planners.cost import CostModel, StepCoster, TopologyKey, gpu_pairs, topology_key
from emulation.planners.ideal import ideal_substeps, single_ocs
from emulation.schedule import Plan, PlanError, plan_from_configurations, reconfiguration_delay
from emulation.workloads.model import Step, Workload


@dataclass(frozen=True)
class Choice:
    """How one workload step runs: as ``steps`` (the step, or its sub-steps) on ``configs``
    (one per entry); ``run_s`` = their cost-model times, ``changes`` = configuration changes
    between them (each costs R)."""

    steps: tuple[Step, ...]
    configs: tuple[Configuration, ...]
    run_s: float
    changes: int = 0

    def cost(self, reconfiguration_delay_s: float) -> float:
        """Seconds the choice takes once entered, with reconfiguration delay ``reconfiguration_delay_s``."""
        return self.run_s + reconfiguration_delay_s * self.changes

    @cached_property
    def entry(self) -> TopologyKey:
        """Topology the choice starts on."""
        return topology_key(self.configs[0])

    @cached_property
    def exit(self) -> TopologyKey:
        """Topology the choice ends on."""
        return topology_key(self.configs[-1])


class PlanContext:
    """Shared state of planning runs: fabric, R, costs and every step's ideal :class:`Choice`.
    Costs do not depend on R, so one context plans a workload for many R (:func:`plan_sweep`).

    :raises PlanError: the fabric has no single OCS.
    """

    def __init__(self, fabric: Fabric, workload: Workload, model: CostModel):
        self.fabric = fabric
        self.workload = workload
        self.ocs = single_ocs(fabric)
        self.r = reconfiguration_delay(fabric)
        self.coster = StepCoster(fabric, model)
        self.g0 = fabric.initial
        self.ideals = [self._ideal(st) for st in workload.steps]

    def _ideal(self, step: Step) -> Choice:
        subs = ideal_substeps(self.fabric, step)
        run = sum(self.coster.cost(s, c).time_s for s, c in subs)
        keys = [topology_key(c) for _, c in subs]
        changes = sum(a != b for a, b in zip(keys, keys[1:]))
        return Choice(tuple(s for s, _ in subs), tuple(c for _, c in subs), run, changes)

    def whole(self, step: Step, config: Configuration) -> Choice:
        """Run ``step`` at once on ``config`` (cost inf if unroutable there)."""
        return Choice((step,), (config,), self.coster.cost(step, config).time_s)

    def states(self) -> dict[TopologyKey, Configuration]:
        """G0 and every configuration of every step's ideal choice, by topology, G0 first."""
        out = {topology_key(self.g0): self.g0}
        for ch in self.ideals:
            for c in ch.configs:
                out.setdefault(topology_key(c), c)
        return out

    def realise(self, planner: str, choices: list[Choice]) -> Plan:
        """The plan executing ``choices`` (one per workload step): sub-steps spliced into the
        plan's workload, circuits that stay reused. ``predicted_s`` = the choices' costs + R per
        change between them.

        :raises PlanError: a configuration cannot be realised on the OCS's ports.
        """
        steps: list[Step] = []
        configs: list[Configuration] = []
        current = self.g0
        predicted = 0.0
        for ch in choices:
            predicted += ch.cost(self.r) + (self.r if ch.entry != topology_key(current) else 0.0)
            for st, cfg in zip(ch.steps, ch.configs):
                if topology_key(cfg) != topology_key(current):
                    try:
                        current = assign_ports(self.fabric, self.ocs, gpu_pairs(cfg, self.ocs),
                                               keep=current[self.ocs])
                    except FabricError as e:
                        raise PlanError(f"step {st.phase}: {e}") from None
                steps.append(st)
                configs.append(current)
        w = self.workload
        workload = replace(w, steps=tuple(steps))
        return plan_from_configurations(planner, self.g0, configs, self.r, workload, predicted)


def plan_greedy(fabric: Fabric, workload: Workload, model: CostModel | None = None) -> Plan:
    """Greedy short-circuiting (module doc). :raises PlanError: no single OCS."""
    return greedy(PlanContext(fabric, workload, model or CostModel()))


def greedy(ctx: PlanContext) -> Plan:
    """:func:`plan_greedy` on a prepared context (with its current R)."""
    workload = ctx.workload
    current = ctx.g0
    choices = []
    for step, ideal in zip(workload.steps, ctx.ideals):
        stay = ctx.whole(step, current)
        switch = ideal.cost(ctx.r) + (ctx.r if ideal.entry != topology_key(current) else 0.0)
        pick = ideal if switch < stay.run_s else stay
        choices.append(pick)
        current = pick.configs[-1]
    return ctx.realise("greedy", choices)


def plan_dp(fabric: Fabric, workload: Workload, model: CostModel | None = None) -> Plan:
    """PCCL's dynamic program over steps (module doc). :raises PlanError: no single OCS, or no
    configuration routes some step."""
    return dp(PlanContext(fabric, workload, model or CostModel()))


def dp(ctx: PlanContext) -> Plan:
    """:func:`plan_dp` on a prepared context (with its current R)."""
    workload = ctx.workload
    states = ctx.states()
    r = ctx.r
    # f: exit topology -> (time so far, previous exit topology, choice); layers kept for backtracking
    f: dict[TopologyKey, tuple[float, TopologyKey | None, Choice | None]] = {topology_key(ctx.g0): (0.0, None, None)}
    layers = []
    for step, ideal in zip(workload.steps, ctx.ideals):
        best_key = min(f, key=lambda k: f[k][0])
        best = f[best_key][0]
        choices = [ctx.whole(step, c) for c in states.values()]
        if len(ideal.steps) > 1:
            choices.append(ideal)
        new: dict[TopologyKey, tuple[float, TopologyKey | None, Choice | None]] = {}
        for ch in choices:
            cost = ch.cost(r)
            if math.isinf(cost):
                continue
            stay = f.get(ch.entry)
            if stay is not None and stay[0] <= best + r:
                start, prev = stay[0], ch.entry
            else:
                start, prev = best + r, best_key
            total = start + cost
            old = new.get(ch.exit)
            if old is None or total < old[0]:
                new[ch.exit] = (total, prev, ch)
        if not new:
            raise PlanError(f"step {step.phase}: no configuration routes it")
        layers.append(new)
        f = new
    key = min(f, key=lambda k: f[k][0])
    picked: list[Choice] = []
    for layer in reversed(layers):
        _, prev, ch = layer[key]
        picked.append(ch)
        key = prev
    picked.reverse()
    return ctx.realise("dp", picked)


def plan_sweep(planner: str, fabric: Fabric, workload: Workload, model: CostModel,
               r_values: list[float]) -> list[Plan]:
    """Plans of ``workload`` by ``planner`` (``"greedy"`` or ``"dp"``) for every reconfiguration
    delay in ``r_values`` (seconds), computing step costs once (they do not depend on R).

    :raises PlanError: no single OCS. :raises KeyError: another planner.
    """
    fn = {"greedy": greedy, "dp": dp}[planner]
    ctx = PlanContext(fabric, workload, model)
    out = []
    for r in r_values:
        ctx.r = r
        out.append(fn(ctx))
    return out
