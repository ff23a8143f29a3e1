"""The flow backend's prediction of gloo's AllReduce: its time on a fabric in a given
configuration, with the job's ranks on given GPUs.

gloo's AllReduce is the ``ring`` workload (:mod:`emulation.torchjob.allreduce_perf`), placed on
the job's GPUs (:meth:`emulation.workloads.model.Workload.placed`) and simulated on the fabric
in the given configuration; a pair without a circuit between them takes the fabric's other
paths (the electrical switch at its own rate, :meth:`emulation.fabric.Fabric.link_gbps`).
Alpha (per message) is fitted from one measured AllReduce time (:func:`fit_alpha`):
:func:`emulation.torchjob.perf.allreduce_perf` fits it from its smallest size; a training run
(LUMION) fits it from the job's AllReduce before the failure, then predicts the AllReduce on
every configuration the job runs on (before the failure, and after each recovery).

Spec: ``docs/architecture.md`` (flow-level backend).
"""

from __future__ import annotations

import dataclasses

from emulation.fabric import Configuration, Fabric
from emulation.flowsim import simulate
from emulation.planners import make_plan
from emulation.workloads import build


def predict_allreduce(fabric: Fabric, config: Configuration, placement: list[int], nbytes: int,
                      alpha_s: float = 0.0) -> float:
    """Flow-backend time (s, in the rate unit of ``fabric.port_gbps``) of the ring AllReduce of
    ``nbytes`` with rank r on GPU ``placement[r]``, on ``fabric`` in configuration ``config``.

    :raises ValueError: bad placement or sizes. :raises emulation.flowsim.SimulationError: unroutable.
    """
    w = build("ring", len(placement), nbytes).placed(placement, fabric.gpus)
    at = dataclasses.replace(fabric, initial=config)
    return simulate(at, w, make_plan("none", at, w), alpha_s=alpha_s).time_s


def fit_alpha(fabric: Fabric, config: Configuration, placement: list[int], nbytes: int, measured_s: float) -> float:
    """Per-message latency alpha (s) that makes :func:`predict_allreduce` equal ``measured_s``
    (a ring AllReduce sends ``2 (n - 1)`` messages in sequence); 0 if the fluid time alone
    exceeds it.

    :param measured_s: the measured AllReduce time of ``nbytes``, s (same time unit as
        :func:`predict_allreduce`).
    :raises ValueError: bad placement (fewer than 2 ranks, a GPU not on the fabric) or sizes.
    :raises emulation.flowsim.SimulationError: unroutable.
    """
    n = len(placement)
    return max(0.0, measured_s - predict_allreduce(fabric, config, placement, nbytes)) / (2 * (n - 1))
