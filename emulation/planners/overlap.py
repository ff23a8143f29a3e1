"""The ``overlap`` planner: reconfiguration overlapped with transmission (SWOT, arXiv 2510.19322).

A collective whose steps are matchings (recursive doubling or halving-doubling: every GPU talks
to one peer per step) needs a new circuit per step. With ``always`` every step reconfigures
every port to its peer, and the step waits for the dark window R. With ``overlap`` every GPU
gives half its p ports to the current step's peer and half to the *next* step's peer (p - p//2
and p//2): step k runs on ``C_k = circuits to the peers of step k + circuits to the peers of
step k + 1``. Going from ``C_k`` to ``C_(k+1)`` keeps the circuits to step k + 1's peers and
rewires the others. Under dependency-driven execution (``semantics: dependency-driven``) step
k + 1's transfers then start at once on the kept circuits while the other ports are dark (with
an odd p, the parts on the circuit added to them wait for it). A step waits for R only through
the rule that the OCS reconfigures once at a time: an epoch opens after the previous dark
window, so a step shorter than R still waits for the rest of it. The price is bandwidth: a step
runs on half the ports where ``always`` gives it all of them. Under round-synchronous execution
every step still waits for the rewiring, so the plan only helps dependency-driven runs.

"Step k + 1" is the next step whose peers differ from step k's (recursive halving-doubling's
two middle steps share their peers; they then run on their half and the other half keeps the
previous step's circuits). A step whose circuits the previous configuration already
holds keeps it (no reconfiguration); otherwise ``C_k`` reuses the circuits of ``C_(k-1)`` that
join a wanted pair (:func:`emulation.fabric.assign_ports` with ``keep``) and rewires the rest.
"""

from __future__ import annotations

from emulation.fabric import Configuration, Fabric, FabricError, assign_ports
from emulation.planners.cost import CostModel
from emulation.planners.ideal import single_ocs
from emulation.schedule import Plan, PlanError, plan_from_configurations, reconfiguration_delay
from emulation.workloads.model import Workload


def step_pairs(workload: Workload, k: int) -> list[tuple[int, int]]:
    """The undirected GPU pairs of step ``k``, sorted.

    :raises PlanError: a GPU talks to more than one peer in the step (not a matching).
    """
    st = workload.steps[k]
    pairs = sorted({(min(a, b), max(a, b)) for a, b in zip(st.src.tolist(), st.dst.tolist())})
    seen: dict[int, tuple[int, int]] = {}
    for p in pairs:
        for g in p:
            if g in seen:
                raise PlanError(f"step {k}: GPU {g} talks to two peers ({seen[g]} and {p}); the overlap planner "
                                f"needs steps that are matchings (rd, rhd)")
            seen[g] = p
    return pairs


def _joins(config: Configuration, ocs: str, pairs: list[tuple[int, int]]) -> bool:
    """True if ``config`` has at least as many circuits on ``ocs`` joining every pair as ``pairs``
    lists it."""
    have: dict[tuple[int, int], int] = {}
    for c in config.get(ocs, ()):
        key = (min(c.a.gpu, c.b.gpu), max(c.a.gpu, c.b.gpu))
        have[key] = have.get(key, 0) + 1
    for p in set(pairs):
        if have.get(p, 0) < pairs.count(p):
            return False
    return True


def plan_overlap(fabric: Fabric, workload: Workload, model: CostModel | None = None) -> Plan:
    """Step k on half the ports to its peers and half to step k + 1's peers (module doc).

    :raises PlanError: the fabric has no single OCS, fewer than 2 ports per GPU, or a step is
        not a matching.
    """
    name = single_ocs(fabric)
    if fabric.ports_per_gpu < 2:
        raise PlanError(f"the overlap planner needs 2 ports per GPU or more (one for the next step), "
                        f"fabric {fabric.name} has {fabric.ports_per_gpu}")
    pairs = [step_pairs(workload, k) for k in range(len(workload.steps))]
    configs: list[Configuration] = []
    current = Configuration({name: fabric.initial.get(name, ())})
    for k in range(len(pairs)):
        nxt = next((q for q in pairs[k + 1:] if q != pairs[k]), [])
        p = fabric.ports_per_gpu
        want = pairs[k] * (p - p // 2) + nxt * (p // 2)
        if not _joins(current, name, want):
            try:
                current = assign_ports(fabric, name, want, keep=current.get(name, ()))
            except FabricError as e:
                raise PlanError(f"step {k}: {e}") from None
        configs.append(current)
    return plan_from_configurations("overlap", fabric.initial, configs, reconfiguration_delay(fabric), workload)
