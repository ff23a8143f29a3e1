"""The flow backend's reference cases at any GPU count: the inputs of ``scripts/bench_flowsim.py``
and of the tests that compare the simulator's paths (general and fast, old and new engine).

Each case is a collective on a fabric under a plan, AllReduce of ``nbytes`` per GPU unless said:

- ``ring``: Ring AllReduce on a static ring of cables (the bandwidth-optimal baseline);
- ``rhd``: recursive halving-doubling (Rabenseifner) on a non-blocking switch;
- ``rd``: full-vector recursive doubling on a non-blocking switch;
- ``rhd-ring``: RHD on an OCS star whose circuits form a ring, never reconfigured (PCCL's
  baseline, arXiv 2509.15450: partners 2^k hops away share links);
- ``pccl-dp``: RHD on the same OCS star (R = 10 us) under PCCL's dynamic program (arXiv
  2509.15450), which reconfigures to each step's partners where that pays;
- ``stragglar``: StragglAR AllReduce (arXiv 2505.23523) on a non-blocking switch, its straggler
  (rank n-1) arriving :data:`STRAGGLER_DELAY_S` late;
- ``moe``: an MoE layer's dispatch under uniform routing: a direct AllToAll of ``nbytes`` per GPU
  inside every expert-parallel group of :data:`EP_GROUP` GPUs, all groups at once, on a
  non-blocking switch (:func:`~emulation.workloads.alltoall.grouped_alltoall`).

Every case uses 400 Gbit/s ports and alpha = :data:`ALPHA_S`.
"""

from __future__ import annotations

import numpy as np

from emulation.fabric import Fabric
from emulation.planners import CostModel, make_plan
from emulation.schedule import Plan
from emulation.workloads import build
from emulation.workloads.alltoall import grouped_alltoall
from emulation.workloads.model import Workload
from topologies import eps_star, ocs_star, static_ring

#: The cases, in the benchmark's order.
CASES = ("ring", "rhd", "rd", "rhd-ring", "pccl-dp", "stragglar", "moe")
#: The fabric of each case, as the benchmark prints it.
FABRICS = {"ring": "static ring", "rhd": "non-blocking switch", "rd": "non-blocking switch",
           "rhd-ring": "OCS star, ring of circuits", "pccl-dp": "OCS star, R = 10 us",
           "stragglar": "non-blocking switch", "moe": "non-blocking switch"}
#: Port rate of every case, Gbit/s.
PORT_GBPS = 400.0
#: Per-transfer latency alpha of every case, seconds.
ALPHA_S = 2e-6
#: Reconfiguration delay R of the OCS star cases, seconds.
RECONFIGURATION_DELAY_S = 10e-6
#: How late the StragglAR case's straggler arrives, seconds.
STRAGGLER_DELAY_S = 1e-3
#: GPUs per expert-parallel group of the MoE case (smaller fabrics: one group of all GPUs).
EP_GROUP = 64


def case_inputs(case: str, gpus: int, nbytes: int) -> tuple[Fabric, Workload]:
    """The fabric and the workload of ``case`` on ``gpus`` GPUs, ``nbytes`` bytes per GPU.

    :raises KeyError: an unknown case. :raises ValueError: sizes the case's workload refuses.
    """
    if case not in CASES:
        raise KeyError(f"unknown case {case!r} (known: {', '.join(CASES)})")
    if case == "ring":
        return static_ring(gpus, PORT_GBPS), build("ring", gpus, nbytes)
    if case in ("rhd-ring", "pccl-dp"):
        return ocs_star(gpus, 2, PORT_GBPS, RECONFIGURATION_DELAY_S), build("rhd", gpus, nbytes)
    fabric = eps_star(gpus, PORT_GBPS)
    if case == "moe":
        return fabric, grouped_alltoall(gpus, nbytes, min(EP_GROUP, gpus))
    return fabric, build(case, gpus, nbytes)


def case_plan(case: str, fabric: Fabric, workload: Workload) -> Plan:
    """The plan of ``case``: PCCL's ``dp`` for ``pccl-dp`` (cost model alpha = :data:`ALPHA_S`),
    ``none`` (the fabric as built) for every other case.

    :raises emulation.schedule.PlanError: the planner cannot plan it.
    """
    return make_plan("dp" if case == "pccl-dp" else "none", fabric, workload, CostModel(alpha_s=ALPHA_S))


def case_arrivals(case: str, gpus: int) -> np.ndarray | None:
    """``(gpus,)`` arrival times in seconds (the StragglAR case's straggler, rank n-1, arrives
    :data:`STRAGGLER_DELAY_S` late), or None: every rank at 0."""
    if case != "stragglar":
        return None
    arr = np.zeros(gpus)
    arr[-1] = STRAGGLER_DELAY_S
    return arr
