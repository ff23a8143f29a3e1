"""Run results, the same form for both backends (``result.json``).

Times are real-equivalent seconds (the emulator divides measured times by the TDF); bandwidths
are Gbit/s. ``algbw = bytes / time``; ``busbw = algbw x factor`` with the nccl-tests factors
(AllReduce 2(n-1)/n; AllGather, ReduceScatter, AllToAll (n-1)/n; others 1).

Spec: ``docs/architecture.md`` (results).
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from emulation.backends import ResultBackend


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests bus bandwidth factor of ``collective`` on ``ranks`` ranks."""
    n = ranks
    if collective == "allreduce":
        return 2 * (n - 1) / n
    if collective in ("allgather", "reducescatter", "alltoall", "alltoallv"):
        return (n - 1) / n
    return 1.0


def busbw_gbps(collective: str, ranks: int, nbytes: float, time_s: float) -> float:
    """nccl-tests bus bandwidth, Gbit/s: ``nbytes x 8 / time_s / 1e9 x`` :func:`bus_factor`
    (``inf`` for a zero time)."""
    algbw = nbytes * 8 / time_s / 1e9 if time_s > 0 else float("inf")
    return algbw * bus_factor(collective, ranks)


class _Record(BaseModel):
    """A part of ``result.json``: unknown fields are refused, NaN and infinities allowed
    (an unfinished transfer ends at ``inf``)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class StepResult(_Record):
    """One step: when it started and ended (s from the run's start), its reconfiguration
    (``reconfiguration_delay_s`` R requested, ``dark_window_measured_s`` as measured; the flow
    backend's equal R), and ``max_link_bytes``, the real bytes routed over its busiest directed
    link. Packet backend only: ``retransmissions`` (TCP segments retransmitted during the step),
    ``drops`` (packets lost, by place: :mod:`emulation.drops`), ``timing`` (where the step's
    time went beyond the transfers, s) and, on a rotor, ``stalls`` (windows that opened on a
    connection stalled by a loss in the dark)."""

    index: int
    phase: str
    start_s: float
    end_s: float
    action: Literal["keep", "reconfigure", "slotted"] = "keep"
    reconfiguration_delay_s: Optional[float] = None
    dark_window_measured_s: Optional[float] = None
    max_link_bytes: Optional[float] = None
    retransmissions: Optional[int] = None
    drops: Optional[dict[str, Any]] = None
    timing: Optional[dict[str, float]] = None
    stalls: Optional[int] = None

    @property
    def duration_s(self) -> float:
        """``end_s - start_s``."""
        return self.end_s - self.start_s

    @classmethod
    def of(cls, index: int, phase: str, start_s: float, end_s: float, action: str = "keep", **fields) -> StepResult:
        """Step ``index`` of ``phase`` from ``start_s`` to ``end_s`` (s), with ``action`` and any other field."""
        return cls(index=index, phase=phase, start_s=start_s, end_s=end_s, action=action, **fields)


class TransferResult(_Record):
    """One transfer (real-equivalent bytes) with its start and end (s from the run's start)."""

    step: int
    src: int
    dst: int
    bytes: int
    start_s: float
    end_s: float

    @classmethod
    def of(cls, step: int, src: int, dst: int, nbytes: int, start_s: float, end_s: float) -> TransferResult:
        """A record built by a backend, unvalidated (millions of them in a large run)."""
        return cls.model_construct(step=step, src=src, dst=dst, bytes=nbytes, start_s=start_s, end_s=end_s)


class Checks(_Record):
    """The sanity checks of a run (:func:`emulation.checks.check_run`): ``ok`` when
    ``problems`` (one line each) is empty; ``max_link_utilisation`` and
    ``busbw_over_injection`` are fractions (1 = the physical limit); ``emulator_drops`` counts
    the packets the emulator lost as an artefact."""

    ok: bool
    bytes_conserved: bool
    max_link_utilisation: float
    busbw_over_injection: float
    emulator_drops: int = 0
    problems: list[str] = Field(default_factory=list)


class Percentiles(_Record):
    """Median, 99th percentile and maximum of a sample (seconds)."""

    median: float
    p99: float
    max: float


class Slots(_Record):
    """A time-slotted run (:class:`emulation.schedule.SlottedPlan`) or a run on parallel OCSes
    (:class:`emulation.schedule.ParallelPlan`). Both backends: ``slot_utilisation`` (delivered
    bytes / bytes the up circuits could carry until the end), ``cycles`` (rotor turns until the
    end; parallel OCSes: the end over the schedules' makespans), ``relayed_bytes`` (two-hop
    forwarding) and the schedule's shape (:meth:`emulation.schedule.SlottedPlan.summary`:
    ``method``, ``slots_per_turn``, ``turn_s``, ``reconfiguration_delay_s``, ``guard_s``,
    ``forwarding``, ``planned_turns``; :meth:`emulation.schedule.ParallelPlan.summary` also
    ``planned_makespan_s`` and ``lower_bound_s``, per step). Packet backend: ``slots_run``,
    ``start_error_s`` (the controller's ``|measured - planned|`` slot start, emulated s),
    ``dark_window_measured_s`` (median, real s) and ``guard_emulated_s``."""

    slot_utilisation: float
    cycles: float
    relayed_bytes: int = 0
    method: Optional[str] = None
    slots_per_turn: Optional[int] = None
    turn_s: Optional[float] = None
    reconfiguration_delay_s: Optional[float] = None
    guard_s: Optional[float] = None
    forwarding: Optional[Literal["direct", "two-hop"]] = None
    planned_turns: Optional[list[int]] = None
    slots_run: Optional[int] = None
    start_error_s: Optional[Percentiles] = None
    dark_window_measured_s: Optional[float] = None
    guard_emulated_s: Optional[float] = None
    planned_makespan_s: Optional[list[float]] = None
    lower_bound_s: Optional[list[float]] = None


class RunResult(_Record):
    """One collective run: ``name`` and ``bytes`` identify it within a scenario.

    ``transfers`` may be left out of large runs (``transfers_omitted`` says how many);
    ``link_bytes`` is ``[[u, up, v, vp, bytes], ...]``, the real bytes each directed link carried
    over the run (``links_omitted``: how many links carried bytes that are not listed, in a
    closed-form run that does not derive every sender, :mod:`emulation.flowsim.stragglar`);
    ``checks`` holds the sanity checks (:func:`emulation.checks.check_run`);
    ``predicted_s`` is the planner's cost-model time of the plan (seconds; greedy, dp, always;
    parallel OCSes: the guarded makespans summed);
    ``iteration`` numbers repeated runs (scenario ``iterations``) and ``straggler_delay_s`` is the
    straggler's arrival delay D in that iteration (0 without a straggler); ``padding_bytes`` are
    bytes sent that carry no payload (MoE null tokens, tile rounding); ``slots`` describes a
    time-slotted run or one on parallel OCSes; ``drops`` (packet backend) the packets lost in the run, by place
    (:mod:`emulation.drops`); ``byte_scale`` (packet backend) the byte scale s it was emulated at:
    the scenario's, or larger for a run of small steps (:meth:`emulation.scale.Scale.for_steps`). ``algbw_gbps`` and ``busbw_gbps`` are derived (Gbit/s).
    """

    name: str
    collective: str
    algorithm: str
    planner: str
    ranks: int
    bytes: int
    backend: ResultBackend
    time_s: float
    steps: list[StepResult] = Field(default_factory=list)
    transfers: list[TransferResult] = Field(default_factory=list)
    bytes_sent: int = 0
    bytes_delivered: int = 0
    semantics: str = "round-synchronous"
    transfers_omitted: int = 0
    link_bytes: list[list[float]] = Field(default_factory=list)
    links_omitted: int = 0
    checks: Optional[Checks] = None
    predicted_s: Optional[float] = None
    iteration: int = 0
    straggler_delay_s: float = 0.0
    slots: Optional[Slots] = None
    padding_bytes: int = 0
    drops: dict[str, Any] = Field(default_factory=dict)
    byte_scale: Optional[float] = None

    @computed_field
    @property
    def algbw_gbps(self) -> float:
        """``bytes / time`` in Gbit/s."""
        return self.bytes * 8 / self.time_s / 1e9 if self.time_s > 0 else float("inf")

    @computed_field
    @property
    def busbw_gbps(self) -> float:
        """``algbw x`` the nccl-tests factor, Gbit/s."""
        return busbw_gbps(self.collective, self.ranks, self.bytes, self.time_s)

    @property
    def reconfigurations(self) -> int:
        """Steps that reconfigured the fabric."""
        return sum(s.action == "reconfigure" for s in self.steps)

    def to_json(self) -> dict:
        """Plain dict (``result.json``'s form), with ``algbw_gbps`` and ``busbw_gbps``; ``slots``
        holds only the fields that apply to the backend."""
        d = self.model_dump()
        if self.slots is not None:
            d["slots"] = self.slots.model_dump(exclude_none=True)
        return d

    @model_validator(mode="before")
    @classmethod
    def _derived(cls, d: Any) -> Any:
        """Read back from JSON: the derived bandwidths are recomputed, not read."""
        if isinstance(d, dict) and ("algbw_gbps" in d or "busbw_gbps" in d):
            d = {k: v for k, v in d.items() if k not in ("algbw_gbps", "busbw_gbps")}
        return d


def _added(values: list) -> Any:
    """Numbers added; dicts merged key by key (recursively); anything else: the first one."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sum(values)
    if all(isinstance(v, dict) for v in values):
        return {k: _added([v[k] for v in values if k in v]) for k in dict.fromkeys(k for v in values for k in v)}
    return values[0]


def sequenced(parts: list[RunResult], workload=None, planner: str | None = None) -> RunResult:
    """One run made of ``parts``, runs of consecutive steps (one step each or more), part k
    starting when part k - 1 ended: step and transfer records shifted by that offset (steps
    renumbered in order, each transfer keeping its step), ``time_s``, bytes, ``drops`` (counts
    added, places merged), omitted counts and ``link_bytes`` (per link) added; the slots of every
    part combined: utilisation as delivered bytes over the up circuits' capacity of all parts,
    cycles as the time over the summed makespans, slots run added, slot-start percentiles and
    the median dark window of the worst part. Per-step records (retransmissions, timing) stay
    with their steps. ``collective``, ``algorithm`` and ``bytes`` are ``workload``'s (a
    :class:`~emulation.workloads.model.Workload`, whose steps the parts ran) and ``planner`` is
    ``planner``, when given; the other fields are the first part's.

    :raises ValueError: no part."""
    if not parts:
        raise ValueError("parts: at least one run")
    steps, transfers, t = [], [], 0.0
    for p in parts:
        base = len(steps)
        for st in p.steps:
            steps.append(st.model_copy(update={"index": len(steps), "start_s": st.start_s + t, "end_s": st.end_s + t}))
        transfers += [tr.model_copy(update={"step": tr.step + base, "start_s": tr.start_s + t, "end_s": tr.end_s + t})
                      for tr in p.transfers]
        t += p.time_s
    links: dict[tuple, float] = {}
    for p in parts:
        for row in p.link_bytes:
            links[tuple(row[:4])] = links.get(tuple(row[:4]), 0.0) + row[4]
    out = parts[0].model_copy(update={
        "steps": steps, "transfers": transfers, "time_s": t, "bytes_sent": sum(p.bytes_sent for p in parts),
        "bytes_delivered": sum(p.bytes_delivered for p in parts),
        "transfers_omitted": sum(p.transfers_omitted for p in parts),
        "links_omitted": sum(p.links_omitted for p in parts),
        "link_bytes": [[*k, v] for k, v in links.items()],
        "drops": _added([p.drops for p in parts]) if all(p.drops for p in parts) else {},
        **({"collective": workload.collective, "algorithm": workload.algorithm, "bytes": workload.bytes}
           if workload is not None else {}), **({"planner": planner} if planner else {})})
    slots = [(p, p.slots) for p in parts if p.slots is not None]
    if slots:
        capacity = sum(p.bytes_delivered / s.slot_utilisation for p, s in slots if s.slot_utilisation > 0)
        span = sum(p.time_s / s.cycles for p, s in slots if s.cycles > 0)
        starts = [s.start_error_s for _p, s in slots if s.start_error_s is not None]
        darks = [s.dark_window_measured_s for _p, s in slots if s.dark_window_measured_s is not None]
        runs = [s.slots_run for _p, s in slots]
        out.slots = slots[0][1].model_copy(update={
            "slot_utilisation": sum(p.bytes_delivered for p, _s in slots) / capacity if capacity else 0.0,
            "cycles": t / span if span else 0.0,
            "slots_run": sum(runs) if None not in runs else None,
            "start_error_s": Percentiles(median=max(x.median for x in starts), p99=max(x.p99 for x in starts),
                                         max=max(x.max for x in starts)) if starts else None,
            "dark_window_measured_s": max(darks) if darks else None})
    return out


class FabricRecord(_Record):
    """The fabric that was built (not the scenario's request): builder name, fabric name, GPUs,
    ports per GPU, port rate (Gbit/s) and R (the largest OCS reconfiguration delay, s)."""

    topology: str
    name: str
    gpus: int
    ports_per_gpu: int
    port_gbps: float
    reconfiguration_delay_s: float


class CollectiveResult(_Record):
    """A collective scenario's result (``result.json``'s ``result``, inside the envelope of
    :mod:`emulation.envelope`, which says which scenario, backend, versions and warnings): the
    built ``fabric``, the ``cost`` alpha/delta, ``semantics``, ``straggler``, ``iterations``,
    every iteration's ``arrivals_s`` and the ``runs``. Flow backend: ``simulation_wall_s`` per
    job. Packet backend: the machine's ``capabilities``, the ``controller`` framework (``os-ken``
    or ``ryu``) and your own controller ``apps``, the fabric interfaces' ``mtu`` (bytes), the
    ``datapath`` that forwarded the frames (``packet``: packet sockets served by ovs-vswitchd's main
    thread; ``pmd``: the GPUs' ports over AF_XDP, polled by a PMD thread; ``steer``: packet
    sockets, ovs-vswitchd on one core and the GPUs' receive steered to the others; ``kernel``:
    Open vSwitch's kernel datapath; docs/emulator.md), the TCP
    congestion controls the GPUs' connections ran (``tcp_congestion``, e.g. ``["cubic"]``), who
    changed the circuits (``circuits_changed_by``: reconfigurations per ``emulator``, ``rotor`` or
    app name), the link-rate ``calibration`` and chosen ``headroom`` probe, ``slotted_rate_cap_mbps`` (the
    highest rate at which every time-slotted run's guard band, and every parallel-OCS run's guard,
    suffices; the calibration stays under it), the ``scale`` model, the ``servers`` the fabric was
    spread over (empty: one machine; docs/cluster.md), whether its ``ocs`` was ``central`` or
    ``sharded`` over them, and (sharded) ``cross_server_circuits``: ``{"added", "crossing"}``, the
    circuits the session's reconfigurations set up (the initial ones not counted) and those of
    them joining two shards
    (an incomplete run holds the runs measured before it failed)."""

    fabric: FabricRecord
    cost: dict[str, float]
    semantics: str
    straggler: Optional[dict[str, Any]] = None
    iterations: int = 1
    arrivals_s: list[list[float]] = Field(default_factory=list)
    simulation_wall_s: Optional[dict[str, float]] = None
    capabilities: Optional[dict[str, Any]] = None
    controller: Optional[str] = None
    apps: list[str] = Field(default_factory=list)
    mtu: Optional[int] = None
    datapath: Optional[Literal["packet", "pmd", "steer", "kernel"]] = None
    servers: list[str] = Field(default_factory=list)
    ocs: Optional[Literal["central", "sharded"]] = None
    cross_server_circuits: Optional[dict[str, int]] = None
    tcp_congestion: list[str] = Field(default_factory=list)
    circuits_changed_by: dict[str, int] = Field(default_factory=dict)
    slotted_rate_cap_mbps: Optional[float] = None
    calibration: Optional[dict[str, Any]] = None
    headroom: Optional[dict[str, Any]] = None
    scale: Optional[dict[str, float]] = None
    runs: list[RunResult] = Field(default_factory=list)
