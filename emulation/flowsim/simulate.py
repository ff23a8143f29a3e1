"""Simulate one (Workload, Plan) on a fabric with the fluid model; returns a RunResult.

Cost model (``docs/mechanisms.md``, common cost model):

- every directed link (circuit, parallel circuit, cable, EPS port) has the fabric's port rate B
  (an EPS may set a rate of its own: :meth:`emulation.fabric.Fabric.link_gbps`);
- a transfer is split over its distinct channel paths exactly as the emulator splits it
  (:meth:`emulation.routing.Routes.subflow_arrays`); each piece is a flow that gets its
  max-min fair share of every link on its path, recomputed at every start and finish;
- a transfer released at t starts moving at ``t + alpha``; a piece that finishes its fluid at
  t_f is delivered at ``t_f + hops x delta``; the transfer is delivered with its last piece;
- a rank that arrives late (``arrivals_s[r]``, a straggler) releases no transfer before then.

Step semantics:

- ``round-synchronous`` (what the packet emulator executes): step i is released when step i-1
  is delivered; a step marked ``reconfigure`` first waits R (the fabric is dark while the
  circuits change) and its transfers then run on the new configuration.
- ``dependency-driven``: a transfer is released as soon as the chunks it sends have arrived
  (:func:`~emulation.workloads.dependencies.transfer_dependencies`) and the previous transfer
  between the same two ranks is delivered (one in-order connection per pair, as NCCL's), so
  steps overlap. The fabric changes as a whole: the reconfiguration before step i starts once
  every transfer of the earlier steps is delivered; only the circuits that change are dark for
  R, so transfers over unchanged circuits move during the dark window.

The executions live in :mod:`emulation.flowsim.rounds` and :mod:`emulation.flowsim.dependency`;
both simulate steps through :class:`~emulation.flowsim.steps.StepSimulator` and record into a
:class:`~emulation.flowsim.account.RunAccount`.

Deterministic: no randomness here (arrivals are drawn, seeded, by the caller).

Spec: ``docs/architecture.md`` (flow-level backend), ``docs/mechanisms.md``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from emulation.bulk import gc_paused
from emulation.fabric import Fabric
from emulation.flowsim.account import RunAccount
from emulation.flowsim.dependency import WavesOverlap, event_memory, run_events, run_waves
from emulation.flowsim.links import LinkSpace, SimulationError
from emulation.flowsim.rounds import run_round_synchronous
from emulation.flowsim.steps import StepSimulator
from emulation.machine import available_memory
from emulation.results import RunResult
from emulation.schedule import Plan
from emulation.workloads.model import Workload

Semantics = Literal["round-synchronous", "dependency-driven"]
SEMANTICS = ("round-synchronous", "dependency-driven")
#: Share of the available memory a dependency-driven run may plan its state for.
MEMORY_SHARE = 0.75

__all__ = ["SEMANTICS", "LinkSpace", "SimulationError", "simulate"]


def simulate(fabric: Fabric, workload: Workload, plan: Plan, *, alpha_s: float = 0.0,
             delta_s: float = 0.0, semantics: Semantics = "round-synchronous",
             arrivals_s: np.ndarray | list[float] | None = None, name: str | None = None,
             record_transfers: bool = True, reuse_steps: bool = True, waves: bool = True) -> RunResult:
    """Run ``workload`` under ``plan`` on ``fabric`` in virtual time.

    :param alpha_s: per-transfer latency alpha, seconds.
    :param delta_s: per-hop propagation delay delta, seconds.
    :param semantics: ``"round-synchronous"`` or ``"dependency-driven"`` (module doc).
    :param arrivals_s: (ranks,) time each rank arrives at the collective, seconds (default 0).
    :param record_transfers: keep one :class:`TransferResult` per transfer (large runs may not).
    :param reuse_steps: a step whose transfers (sources, destinations, bytes, releases relative
        to the first) and configuration equal an earlier step's, and that runs alone on the
        fabric, takes the earlier step's simulation shifted in time instead of running the fluid
        engine again (exact: the fluid model is invariant under a shift of time). A Ring
        AllReduce of an evenly divided buffer simulates 2 of its 2(n-1) steps. False: every step
        is run.
    :param waves: dependency-driven only: first try the waves engine, which takes the steps in
        order and is exact when they do not overlap in time (it checks that at every step and
        otherwise falls back); False: the event-driven engine only
        (:mod:`emulation.flowsim.dependency`).
    :returns: a :class:`RunResult` with ``backend="flow"``; times in seconds, bytes real.
    :raises SimulationError: ranks differ from the fabric's GPUs, the plan does not match the
        workload, a transfer is unroutable, the flows deadlock, or a dependency-driven run whose
        steps overlap needs more memory than this machine has for the event-driven engine.
    """
    n = workload.ranks
    if n != fabric.gpus:
        raise SimulationError(f"workload has {n} ranks, fabric {fabric.gpus} GPUs")
    if len(plan.steps) != len(workload.steps):
        raise SimulationError(f"plan has {len(plan.steps)} steps, workload {len(workload.steps)}")
    if semantics not in SEMANTICS:
        raise SimulationError(f"semantics must be one of {', '.join(SEMANTICS)}, got {semantics!r}")
    arr = np.zeros(n) if arrivals_s is None else np.asarray(arrivals_s, dtype=float)
    if arr.shape != (n,) or (arr < 0).any():
        raise SimulationError(f"arrivals_s must be {n} non-negative times")
    with gc_paused():  # millions of step records and circuits, no cycles (emulation.bulk)
        return _simulate(fabric, workload, plan, alpha_s, delta_s, semantics, arr, name, record_transfers,
                         reuse_steps, waves)


def _simulate(fabric, workload, plan, alpha_s, delta_s, semantics, arr, name, record_transfers, reuse_steps,
              waves) -> RunResult:
    space = LinkSpace(fabric)
    sim = StepSimulator(space, alpha_s, delta_s, reuse_steps)
    account = RunAccount(space, workload, plan, record_transfers)
    if semantics == "round-synchronous":
        run_round_synchronous(account, sim, arr)
        return account.result(name or workload.algorithm, semantics)
    budget = MEMORY_SHARE * (available_memory() or (1 << 34))
    why = "the waves engine was not asked for"
    if waves:
        try:
            run_waves(account, sim, arr, int(budget))
            return account.result(name or workload.algorithm, semantics)
        except WavesOverlap as e:
            why = str(e)
            account = RunAccount(space, workload, plan, record_transfers)
    need = event_memory(workload.transfer_count, 2.0 * fabric.ports_per_gpu)
    if need > budget:
        raise SimulationError(f"dependency-driven: {why}, and the event-driven engine would need about "
                              f"{need / 2**30:.1f} GiB for {workload.transfer_count} transfers "
                              f"({budget / 2**30:.1f} GiB may be used here)")
    run_events(account, sim, arr)
    return account.result(name or workload.algorithm, semantics)
