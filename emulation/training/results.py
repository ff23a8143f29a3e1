"""The result of a training scenario (``ocslab run``/``train``, ``result.json``'s ``result``): the
job's size, the machine, and one record per recovery of the failed GPU with their comparison.

The records of a recovery (:class:`~emulation.torchjob.recoveries.RecoveryRun`, its timeline,
steady state, loss and steps, and :class:`~emulation.torchjob.recoveries.RecoveryComparison`)
are what the packet backend's recovery runs measured: they live with those runs,
:mod:`emulation.torchjob.recoveries`, which fills them. Times in the timeline are emulated
seconds after the failure; ``failure_to_rewritten_s`` also gives the real-equivalent time
(control plane as measured, dark window divided by the TDF). LUMION, arXiv 2505.23105.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from emulation.torchjob.recoveries import RecoveryComparison, RecoveryRun


class TrainingResult(BaseModel):
    """A training scenario's result (inside the envelope, :mod:`emulation.envelope`): the TDF,
    the model's parameters and gradient bytes per AllReduce, the machine's capabilities, one
    record per recovery and their comparison."""

    model_config = ConfigDict(extra="forbid")

    tdf: float
    parameters: int
    gradient_bytes: int
    capabilities: dict[str, Any]
    runs: list[RecoveryRun]
    comparison: RecoveryComparison
