"""The results of a rail scenario (``result.json``, inside the envelope), typed: the sweep on the
flow backend (:class:`RailsResult`, of the flow layer's :class:`~emulation.flowsim.rail_sweep.
FabricRun` records) and the torch job on the packet backend (:class:`TorchJobResult`, of the
records :func:`emulation.torchjob.rails_job.run_rail_job` gives). Opus, arXiv 2507.08119."""

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


class Rewire(BaseModel):
    """One rewire by the Opus app: the OCS, when it went dark (controller clock, s), R requested
    and the dark window measured (s)."""

    model_config = ConfigDict(extra="forbid")

    ocs: Optional[str] = None
    t_dark: Optional[float] = None
    requested_s: float
    measured_s: float


class TorchJobRun(BaseModel):
    """One control mode's torch job (real seconds): the steady iteration time and every
    iteration's start and end, the most any rank waited on the controller per iteration, the
    largest compute overrun, the loss per iteration, the job's round trip to the controller,
    the headroom probe, the rewires, the flow backend's iteration time and reconfigurations per
    iteration for the same trace, the ``deviation`` (packet over flow, minus one) and the
    ``timeline`` of the second iteration (``{"t0", "t1", "intervals": [[gpu, t0, t1, kind, dim,
    phase]]}``)."""

    model_config = ConfigDict(extra="forbid")

    iteration_s: float
    iterations_end_s: list[float]
    iterations_start_s: list[float]
    control_wait_s: float
    overrun_s: float
    loss: list[float]
    control_rtt_s: float
    headroom: dict[str, Any]
    time_dilation: float = 1.0
    """The port rate over the emulated link rate (1: no dilation); every time here is already
    divided by it."""
    reconfigurations: list[Rewire]
    flow_iteration_s: float
    flow_reconfigurations_per_iteration: float
    deviation: float
    timeline: dict[str, Any]


class TorchJobResult(BaseModel):
    """A rail scenario's torch job on the packet backend beside the flow backend (``ocslab
    train``; inside the envelope): the fabric's port rate ``link_mbps`` (Mbit/s; each run's
    ``headroom.link_mbps`` is the rate it was emulated at, lower under time dilation), R (s), the
    fabric's size and one :class:`TorchJobRun` per control mode."""

    model_config = ConfigDict(extra="forbid")

    link_mbps: float
    reconfiguration_delay_s: float
    gpus: int
    servers: int
    gpus_per_server: int
    runs: dict[str, TorchJobRun]
