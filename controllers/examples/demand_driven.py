"""Example app: demand-driven circuits (a Helios/c-Through-style scheduler fed by the job, not
by counters). Before every step of a collective, the emulator tells the controller the bytes the
step's transfers will carry between each pair of GPUs (:class:`controllers.events.EventStepBegin`);
this app weighs every GPU pair by them (both directions), gives circuits on the first OCS to the
heaviest pairs, one round of maximum-weight matching (Edmonds' algorithm, networkx) per port of a
GPU, a pair's weight divided by the circuits it already has after each round, and asks for that
configuration for the step (:meth:`~controllers.events.EventStepBegin.set_circuits`), with the
run's dark window. The circuits are in place when the step is released, their dark window counted
in the run's time.

It acts only while the user's apps own the circuits: runs whose scenario says ``planner: none``
(``docs/controllers.md``, Who owns the OCS when). When the heaviest pairs would leave a pair of the
step without a path, it keeps the circuits in place if they carry the step, or else returns to the
fabric's initial configuration.

    .venv/bin/ocslab run SCENARIO.yaml --app controllers/examples/demand_driven.py

Each decision is logged in the controller's event log (``demand-driven`` events, ``GET /events``):
the step, the pairs and their weights (bytes), and ``action`` ``reconfigure`` or ``keep``.
"""

from __future__ import annotations

import networkx as nx

from controllers.base import OcsLabApp
from controllers.events import OWNER_APP, EventCollectiveBegin, EventStepBegin
from controllers.sdn import set_ev_cls
from emulation.fabric import Configuration, assign_ports

#: Dark window (seconds) when the run does not give one (its R scaled to the emulation).
RECONFIGURATION_DELAY_S = 0.01


def heaviest_pairs(demand: dict[tuple[int, int], int], ports: int) -> list[tuple[int, int]]:
    """GPU pairs ``(a, b)``, a < b, one entry per circuit, for ``demand`` ``{(src, dst): bytes}``
    on GPUs of ``ports`` ports each: ``ports`` rounds of maximum-weight matching, the weight of a
    pair (bytes both ways) divided by 1 + the circuits it already has."""
    weight: dict[tuple[int, int], float] = {}
    for (a, b), v in demand.items():
        if a != b and v > 0:
            key = (min(a, b), max(a, b))
            weight[key] = weight.get(key, 0) + v
    given: dict[tuple[int, int], int] = {}
    out: list[tuple[int, int]] = []
    for _ in range(ports):
        g = nx.Graph()
        g.add_weighted_edges_from((a, b, w / (1 + given.get((a, b), 0))) for (a, b), w in weight.items())
        matched = sorted(tuple(sorted(e)) for e in nx.max_weight_matching(g))
        for e in matched:
            given[e] = given.get(e, 0) + 1
        out += matched
    return sorted(out)


def carries(config: Configuration, demand: dict[tuple[int, int], int]) -> bool:
    """Whether the circuits of ``config`` join every pair of ``demand`` by some path."""
    g = nx.Graph()
    g.add_nodes_from(x for pair in demand for x in pair)
    g.add_edges_from((c.a.gpu, c.b.gpu) for circuits in config.values() for c in circuits)
    return all(a == b or nx.has_path(g, a, b) for a, b in demand)


class DemandDriven(OcsLabApp):
    """Sets each step's circuits from its demand (module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._dark = RECONFIGURATION_DELAY_S

    @set_ev_cls(EventCollectiveBegin)
    def _collective(self, ev):
        self._dark = ev.reconfiguration_delay_s or RECONFIGURATION_DELAY_S

    @set_ev_cls(EventStepBegin)
    def _step(self, ev):
        if ev.owner != OWNER_APP or not ev.demand:
            return
        f = self.state.fabric
        ocs = f.ocs[0].name
        with self.state.lock:
            current = self.state.circuits
        pairs = heaviest_pairs(ev.demand, f.ports_per_gpu)
        want = Configuration({**current, ocs: assign_ports(f, ocs, pairs)[ocs]})
        if not carries(want, ev.demand):
            want = current if carries(current, ev.demand) else f.initial
        action = "keep" if want == current else "reconfigure"
        if action == "reconfigure":
            ev.set_circuits(self.name, want, self._dark)
        weights = {}
        for (a, b), v in ev.demand.items():
            weights[(min(a, b), max(a, b))] = weights.get((min(a, b), max(a, b)), 0) + v
        self.state.log_event("demand-driven", run=ev.name, step=ev.step, action=action,
                             pairs=[list(p) for p in pairs], weights=[weights.get(p, 0) for p in pairs])
