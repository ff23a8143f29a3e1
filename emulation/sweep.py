"""One point of a parameter sweep on the flow backend: plan a collective, simulate the plan.

Used by ``scripts/reproduce_shortcircuit.py`` and ``scripts/reproduce_pccl.py``
(``docs/mechanisms.md``). Round-synchronous semantics, as the planners' cost model assumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from emulation.fabric import Fabric
from emulation.flowsim import simulate
from emulation.planners import CostModel, make_plan, plan_cost, plan_sweep
from emulation.schedule import Plan
from emulation.units import parse_bytes
from emulation.workloads.model import Workload

#: Above this many transfers in one step, a run is timed with the cost model instead of the
#: fluid engine (direct AllReduce on a 128-GPU torus base: 16,256 transfers x 4 paths per step
#: take ~3 minutes to simulate; the cost model gives 1.812 ms there against the engine's
#: 1.807 ms at 16 MiB, and 10.803 vs 10.802 ms on the ring base).
MAX_FLOW_TRANSFERS = 4096


@dataclass(frozen=True)
class Point:
    """Result of one sweep point.

    :ivar time_s: completion time, seconds (flow backend, or cost model: see ``method``).
    :ivar predicted_s: the cost-model time of the plan, seconds.
    :ivar reconfigurations: steps marked reconfigure.
    :ivar steps: steps executed (sub-steps of matchings counted).
    :ivar method: ``"flow"`` or ``"model"``.
    """

    time_s: float
    predicted_s: float
    reconfigurations: int
    steps: int
    method: str


def time_planner(fabric: Fabric, workload: Workload, planner: str, model: CostModel,
             max_flow_transfers: int = MAX_FLOW_TRANSFERS) -> Point:
    """Plan ``workload`` with ``planner`` on ``fabric`` and time the plan (:func:`time_plan`).

    :raises emulation.planners.PlanError: the planner cannot plan it.
    :raises emulation.flowsim.SimulationError: the plan cannot be simulated.
    """
    return time_plan(fabric, make_plan(planner, fabric, workload, model), model, max_flow_transfers)


def time_plan(fabric: Fabric, plan: Plan, model: CostModel, max_flow_transfers: int = MAX_FLOW_TRANSFERS) -> Point:
    """Time ``plan`` on the flow backend (round-synchronous), or with the cost model when a step
    has more than ``max_flow_transfers`` transfers.

    :raises emulation.flowsim.SimulationError: the plan cannot be simulated.
    """
    predicted = plan.predicted_s if plan.predicted_s is not None else plan_cost(fabric, plan, model)
    widest = max(len(s.transfers) for s in plan.workload.steps)
    if widest > max_flow_transfers:
        return Point(predicted, predicted, plan.reconfigurations, len(plan.steps), "model")
    res = simulate(fabric, plan.workload, plan, alpha_s=model.alpha_s, delta_s=model.delta_s,
                   record_transfers=False)
    return Point(res.time_s, predicted, plan.reconfigurations, len(plan.steps), "flow")


def static_and_dp(point: tuple) -> tuple[Point, list[Point]]:
    """PCCL's two sides of one sweep point (arXiv 2509.15450): ``(base, ports_per_gpu, gpus,
    bytes, algorithm, [R s, ...], CostModel, port Gbit/s)`` -> the algorithm on an OCS star whose
    fixed configuration is ``base`` (planner ``none``), and under the ``dp`` plan at each R. A
    module-level function of plain arguments, so that :func:`emulation.parallel.map_points` can
    ship it to other processes."""
    from emulation.workloads import build
    from topologies import ocs_star

    base, ports, gpus, size, alg, rs, model, gbps = point
    f0 = ocs_star(gpus, ports, gbps, 0.0, base)
    w = build(alg, gpus, size)
    return time_planner(f0, w, "none", model), [time_plan(f0, q, model) for q in plan_sweep("dp", f0, w, model, list(rs))]


def add_model_arguments(parser, alpha_us: float, out: str) -> None:
    """Add the sweep scripts' common flags to an ``argparse`` parser: ``--alpha-us``,
    ``--delta-us`` (cost model, microseconds), ``--gbps`` (port rate B) and ``--out`` (results
    directory, default ``out`` under the repository's root)."""
    parser.add_argument("--alpha-us", type=float, default=alpha_us, help="per-message latency alpha, us")
    parser.add_argument("--delta-us", type=float, default=0.5, help="per-hop propagation delay delta, us")
    parser.add_argument("--gbps", type=float, default=400.0, help="port rate B, Gbit/s")
    root = Path(__file__).resolve().parents[1]
    parser.add_argument("--out", type=Path, default=root / out, help=f"results directory (default {out} in the repository)")


def model_from_arguments(args) -> CostModel:
    """The :class:`CostModel` of :func:`add_model_arguments`' flags.

    :raises ValueError: a negative alpha or delta, or a non-positive rate (message names the flag).
    """
    if args.alpha_us < 0 or args.delta_us < 0:
        raise ValueError("--alpha-us and --delta-us must be >= 0")
    if args.gbps <= 0:
        raise ValueError("--gbps must be > 0")
    return CostModel(args.alpha_us * 1e-6, args.delta_us * 1e-6)


def parse_sizes(values: list[str], flag: str = "--sizes") -> list[int]:
    """Byte sizes from the command line (``4KiB``, ``16MiB``, ...).

    :raises ValueError: one is not a size (the message names ``flag``).
    """
    try:
        return [parse_bytes(x) for x in values]
    except ValueError as e:
        raise ValueError(f"{flag}: {e}") from None
