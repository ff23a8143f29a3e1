"""Run results, the same form for both backends (``result.json``).

Times are real-equivalent seconds (the emulator divides measured times by the TDF); bandwidths
are Gbit/s. ``algbw = bytes / time``; ``busbw = algbw x factor`` with the nccl-tests factors
(AllReduce 2(n-1)/n; AllGather, ReduceScatter, AllToAll (n-1)/n; others 1).

Spec: ``docs/architecture.md`` (results).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests bus bandwidth factor of ``collective`` on ``ranks`` ranks."""
    n = ranks
    if collective == "allreduce":
        return 2 * (n - 1) / n
    if collective in ("allgather", "reducescatter", "alltoall", "alltoallv"):
        return (n - 1) / n
    return 1.0


@dataclass
class StepResult:
    """One step: when it started and ended (s from the run's start), its reconfiguration, and
    ``max_link_bytes``, the real bytes routed over its busiest directed link, and (packet
    backend) the TCP segments retransmitted during the step."""

    index: int
    phase: str
    start_s: float
    end_s: float
    action: str = "keep"
    reconfiguration_delay_s: float | None = None
    dark_window_measured_s: float | None = None
    max_link_bytes: float | None = None
    retransmissions: int | None = None
    drops: dict | None = None  # packet backend: packets lost in the step, by place (emulation/drops.py)
    timing: dict | None = None  # packet backend: where the step's time went beyond the transfers (s)
    stalls: int | None = None  # rotor runs: windows that opened on a connection stalled by a loss in the dark

    @property
    def duration_s(self) -> float:
        """``end_s - start_s``."""
        return self.end_s - self.start_s


@dataclass
class TransferResult:
    """One transfer (real-equivalent bytes) with its start and end (s from the run's start)."""

    step: int
    src: int
    dst: int
    bytes: int
    start_s: float
    end_s: float


@dataclass
class RunResult:
    """One collective run: ``name`` and ``bytes`` identify it within a scenario.

    ``transfers`` may be left out of large runs (``transfers_omitted`` says how many);
    ``link_bytes`` is ``[[u, up, v, vp, bytes], ...]``, the real bytes each directed link carried
    over the run; ``checks`` holds the sanity checks (:func:`emulation.checks.check_run`);
    ``predicted_s`` is the planner's cost-model time of the plan (seconds; greedy, dp, always);
    ``iteration`` numbers repeated runs (scenario ``iterations``) and ``straggler_delay_s`` is the
    straggler's arrival delay D in that iteration (0 without a straggler).
    """

    name: str
    collective: str
    algorithm: str
    planner: str
    ranks: int
    bytes: int
    backend: str
    time_s: float
    steps: list[StepResult] = field(default_factory=list)
    transfers: list[TransferResult] = field(default_factory=list)
    bytes_sent: int = 0
    bytes_delivered: int = 0
    semantics: str = "round-synchronous"
    transfers_omitted: int = 0
    link_bytes: list[list[float]] = field(default_factory=list)
    checks: dict = field(default_factory=dict)
    predicted_s: float | None = None
    iteration: int = 0
    straggler_delay_s: float = 0.0
    slots: dict = field(default_factory=dict)  # time-slotted runs: slot utilisation, rotor turns, timing
    padding_bytes: int = 0  # bytes sent that carry no payload (MoE null tokens, tile rounding)
    drops: dict = field(default_factory=dict)  # packet backend: packets lost in the run, by place

    @property
    def algbw_gbps(self) -> float:
        """``bytes / time`` in Gbit/s."""
        return self.bytes * 8 / self.time_s / 1e9 if self.time_s > 0 else float("inf")

    @property
    def busbw_gbps(self) -> float:
        """``algbw x`` the nccl-tests factor, Gbit/s."""
        return self.algbw_gbps * bus_factor(self.collective, self.ranks)

    @property
    def reconfigurations(self) -> int:
        """Steps that reconfigured the fabric."""
        return sum(s.action == "reconfigure" for s in self.steps)

    def to_json(self) -> dict:
        """Plain dict with ``algbw_gbps`` and ``busbw_gbps`` added."""
        d = asdict(self)
        d["algbw_gbps"] = self.algbw_gbps
        d["busbw_gbps"] = self.busbw_gbps
        return d

    @staticmethod
    def from_json(d: dict) -> RunResult:
        """Inverse of :meth:`to_json`."""
        d = {k: v for k, v in d.items() if k not in ("algbw_gbps", "busbw_gbps")}
        d["steps"] = [StepResult(**s) for s in d.get("steps", [])]
        d["transfers"] = [TransferResult(**t) for t in d.get("transfers", [])]
        return RunResult(**d)
