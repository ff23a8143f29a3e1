"""The results of a rail scenario (``result.json``, inside the envelope), typed: the sweep on the
flow backend (:class:`RailsResult`, of the flow layer's :class:`~emulation.flowsim.rail_sweep.
FabricRun` records); the torch job's result on the packet backend is
:class:`emulation.torchjob.rails_job.TorchJobResult`, with the job that fills it. Opus, arXiv
2507.08119."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from emulation.flowsim.rail_sweep import FabricRun


class RailsResult(BaseModel):
    """A rail scenario's sweep (inside the envelope, :mod:`emulation.envelope`): ``model`` with
    ``params`` parameters, the controller's round trip, ``main`` (the scenario's fabric),
    ``larger`` fabrics, ``timeline`` intervals ``[rank, t0, t1, kind, dim, phase]`` of one steady
    iteration per mode at ``timeline_delay_s`` (``{mode: {"t0", "t1", "intervals"}}``, seconds),
    the ``paper`` table if the scenario has one."""

    model_config = ConfigDict(extra="forbid")

    model: str
    params: int
    control_rtt_s: float
    main: FabricRun
    larger: list[FabricRun] = Field(default_factory=list)
    timeline_delay_s: float = 0.0
    timeline: dict[str, dict[str, Any]] = Field(default_factory=dict)
    paper: Optional[dict[str, Any]] = None
