"""A step's ideal topology (PCCL's G_t*) and its decomposition into groups of matchings.

Spec: ``docs/mechanisms.md`` (PCCL, arXiv 2509.15450: "the ideal topology G_t* for a step is its demand graph
when every degree <= p (spare ports give parallel circuits); otherwise decompose it into
matchings").

Decomposition: the step's distinct GPU pairs are taken in order of ring distance
``min(|u - v|, n - |u - v|)`` (then by u) and each is put into the first group in which both
GPUs still have a free port (first fit, at most p pairs per GPU per group). For the
shift-invariant patterns of the direct algorithms this packs the complete graph K_n into
ceil(n/p) groups for p = 2 (each group the union of the shifts ±d), close to the n-1 matchings
/ p lower bound. Each group becomes one sub-step with its own ideal topology.
"""

from __future__ import annotations

import numpy as np

from emulation.arrays import unique
from emulation.fabric import Configuration, Fabric, FabricError, assign_ports
from emulation.planners.cost import max_peers
from emulation.schedule import PlanError
from emulation.workloads.model import Step


def single_ocs(fabric: Fabric) -> str:
    """Name of the fabric's only OCS. :raises PlanError: it has none or several."""
    if len(fabric.ocs) != 1:
        raise PlanError(f"planner needs exactly one OCS, fabric {fabric.name} has {len(fabric.ocs)}")
    return fabric.ocs[0].name


def ideal_configuration(fabric: Fabric, step: Step) -> Configuration:
    """The step's demand graph as circuits on the fabric's single OCS, spare ports filled with
    parallel circuits (canonical port assignment; plans reuse staying circuits when realised).

    :raises PlanError: no single OCS, or a GPU talks to more peers than it has ports (see
        :func:`ideal_configurations`).
    """
    name = single_ocs(fabric)
    lo, hi = np.minimum(step.src, step.dst), np.maximum(step.src, step.dst)
    key = unique(lo * fabric.gpus + hi)
    pairs = list(zip(*(x.tolist() for x in np.divmod(key, fabric.gpus)))) if key.size else []
    try:
        return assign_ports(fabric, name, pairs, fill=True)
    except FabricError as e:
        raise PlanError(f"step {step.phase}: {e}") from None


def matching_groups(pairs: list[tuple[int, int]], ports: int, gpus: int) -> list[list[tuple[int, int]]]:
    """Split undirected GPU pairs into groups in which every GPU has at most ``ports`` pairs
    (first fit in ring-distance order, module doc). Pairs are ``(u, v)``, u != v."""
    def dist(p: tuple[int, int]) -> tuple[int, int, int]:
        d = abs(p[0] - p[1])
        return min(d, gpus - d), min(p), max(p)

    groups: list[list[tuple[int, int]]] = []
    used: list[dict[int, int]] = []
    for u, v in sorted({(min(p), max(p)) for p in pairs}, key=dist):
        for g, deg in enumerate(used):
            if deg.get(u, 0) < ports and deg.get(v, 0) < ports:
                break
        else:
            groups.append([])
            used.append({})
            g, deg = len(groups) - 1, used[-1]
        groups[g].append((u, v))
        deg[u] = deg.get(u, 0) + 1
        deg[v] = deg.get(v, 0) + 1
    return groups


def ideal_substeps(fabric: Fabric, step: Step) -> list[tuple[Step, Configuration]]:
    """``[(step, G_t*)]`` when every GPU of ``step`` has at most p peers, else one
    ``(sub-step, its ideal configuration)`` per group of :func:`matching_groups` (sub-steps named
    ``"<phase> i/k"``, transfers in their original order).

    :raises PlanError: the fabric has no single OCS.
    """
    single_ocs(fabric)
    if max_peers(step) <= fabric.ports_per_gpu:
        return [(step, ideal_configuration(fabric, step))]
    pairs = [(t.src, t.dst) for t in step.transfers]
    groups = matching_groups(pairs, fabric.ports_per_gpu, fabric.gpus)
    which = {p: g for g, grp in enumerate(groups) for p in grp}
    out = []
    for g in range(len(groups)):
        sub = Step(f"{step.phase} {g + 1}/{len(groups)}",
                   tuple(t for t in step.transfers if which[(min(t.src, t.dst), max(t.src, t.dst))] == g))
        out.append((sub, ideal_configuration(fabric, sub)))
    return out
