"""Flow-vs-packet agreement: one scenario's ``result.json`` from each backend, side by side.

The relative error of a time is ``(flow - packet) / packet`` (the packet backend is the
reference: it measured real packets). Per run the completion time is compared; per step the
step's duration (``end - start``, dark window included).

Spec: ``docs/architecture.md`` (results: ``ocslab compare``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console

from emulation.envelope import FailedCheck, ResultEnvelope
from emulation.figures import console as wide_console
from emulation.figures import figure, table
from emulation.units import format_bytes


class CompareError(ValueError):
    """The two results do not describe the same scenario and runs."""


def _err(flow: float, packet: float) -> float:
    return (flow - packet) / packet if packet > 0 else float("inf")


class StepComparison(BaseModel):
    """One step's duration on each backend (real-equivalent s) and the relative error."""

    index: int
    phase: str
    action: str
    packet_s: float
    flow_s: float
    error: float


class RunComparison(BaseModel):
    """One run's completion time on each backend (real-equivalent s), the relative error and
    its steps."""

    name: str
    bytes: int
    iteration: int
    packet_s: float
    flow_s: float
    error: float
    steps: list[StepComparison]

    @property
    def label(self) -> str:
        """``name size`` and ``#iteration`` after the first."""
        return f"{self.name} {format_bytes(self.bytes)}" + (f" #{self.iteration}" if self.iteration else "")


class Comparison(BaseModel):
    """``compare.json``: every run of a scenario on both backends, the largest completion-time
    error (a fraction) and the checks that failed: either backend's (their ``where`` begins
    ``flow`` or ``packet``) and the error bound, if one was given (``ocslab compare
    --max-error``)."""

    scenario: str
    runs: list[RunComparison]
    max_abs_error: float
    failed_checks: list[FailedCheck] = []

    def judge(self, packet: ResultEnvelope, flow: ResultEnvelope, max_error: float | None = None) -> Comparison:
        """Set :attr:`failed_checks` from both backends' envelopes and the bound ``max_error``
        (a fraction; None: none); returns itself."""
        failed = [c.model_copy(update={"where": f"{name} {c.where}".strip()})
                  for name, env in (("flow", flow), ("packet", packet)) for c in env.failed_checks]
        if max_error is not None and self.max_abs_error > max_error:
            worst = max(self.runs, key=lambda r: abs(r.error))
            failed.append(FailedCheck(check="agreement", where=worst.label,
                                      detail=f"packet {worst.packet_s * 1e3:.3f} ms against flow {worst.flow_s * 1e3:.3f} "
                                             f"ms (error {worst.error:+.1%} of the packet time), beyond --max-error "
                                             f"{max_error:.1%}"))
        self.failed_checks = failed
        return self


def compare(packet: ResultEnvelope, flow: ResultEnvelope) -> Comparison:
    """Compare the two results of one scenario (module doc); times in real-equivalent seconds,
    errors as fractions.

    :param packet: the envelope of the packet backend's collective result, ``flow`` of the flow
        backend's.
    :raises CompareError: not a packet and a flow result of one scenario, or the runs or their
        steps differ.
    """
    if packet.backend != "packet" or flow.backend != "flow":
        raise CompareError("compare needs a packet result and a flow result")
    if packet.scenario != flow.scenario:
        raise CompareError(f"the packet result is of scenario {packet.scenario}, not {flow.scenario}")
    fruns = {(r.name, r.bytes, r.iteration): r for r in flow.result.runs}
    out = []
    for p in packet.result.runs:
        f = fruns.get((p.name, p.bytes, p.iteration))
        if f is None:
            raise CompareError(f"run {p.name} {format_bytes(p.bytes)} iteration {p.iteration} has no flow result")
        if len(f.steps) != len(p.steps):
            raise CompareError(f"run {p.name}: {len(p.steps)} packet steps but {len(f.steps)} flow steps")
        steps = [StepComparison(index=ps.index, phase=ps.phase, action=ps.action, packet_s=ps.duration_s,
                                flow_s=fs.duration_s, error=_err(fs.duration_s, ps.duration_s))
                 for ps, fs in zip(p.steps, f.steps)]
        out.append(RunComparison(name=p.name, bytes=p.bytes, iteration=p.iteration, packet_s=p.time_s,
                                 flow_s=f.time_s, error=_err(f.time_s, p.time_s), steps=steps))
    return Comparison(scenario=packet.scenario, runs=out, max_abs_error=max((abs(r.error) for r in out), default=0.0))


def write(cmp: Comparison, out: Path) -> None:
    """Write ``compare.json`` and ``compare.png`` (completion times per run, and every step's
    flow duration against its packet duration) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(cmp.model_dump(), indent=1))
    with figure(out / "compare.png", 1, 2, size=(12, 4.8)) as (_fig, axes):
        _plot(cmp, *axes[0])


def _plot(cmp: Comparison, a, b) -> None:
    labels = [r.label.replace(" ", "\n", 1) for r in cmp.runs]
    x = range(len(labels))
    a.bar([i - 0.2 for i in x], [r.packet_s * 1e3 for r in cmp.runs], 0.4, label="packet")
    a.bar([i + 0.2 for i in x], [r.flow_s * 1e3 for r in cmp.runs], 0.4, label="flow")
    for i, r in enumerate(cmp.runs):
        a.annotate(f"{r.error:+.1%}", (i, max(r.packet_s, r.flow_s) * 1e3), ha="center",
                   va="bottom", fontsize="small")
    a.set_xticks(list(x), labels, fontsize="small")
    a.set_ylabel("completion time (ms, real-equivalent)")
    a.set_yscale("log")
    a.legend()
    a.set_title(f"{cmp.scenario}: completion time")
    for r in cmp.runs:
        b.scatter([s.packet_s * 1e6 for s in r.steps], [s.flow_s * 1e6 for s in r.steps], s=12,
                  label=r.label)
    lim = [min(s.packet_s for r in cmp.runs for s in r.steps) * 1e6 * 0.8,
           max(s.packet_s for r in cmp.runs for s in r.steps) * 1e6 * 1.2]
    b.plot(lim, lim, "k--", lw=0.8, label="flow = packet")
    b.fill_between(lim, [v * 0.9 for v in lim], [v * 1.1 for v in lim], color="grey", alpha=0.15, label="±10%")
    b.set_xscale("log")
    b.set_yscale("log")
    b.set_xlabel("packet step duration (µs)")
    b.set_ylabel("flow step duration (µs)")
    b.set_title("per step")
    b.legend(fontsize="x-small")


def print_compare(cmp: Comparison, console: Console | None = None, steps: bool = True) -> None:
    """Print the per-run table and (``steps``) one per-step table per run."""
    console = console or wide_console(110)
    console.print(table(f"{cmp.scenario}: flow vs packet (error = (flow - packet) / packet)",
                        ("run", "bytes", "packet (ms)", "flow (ms)", "error"),
                        ([r.name + (f" #{r.iteration}" if r.iteration else ""), format_bytes(r.bytes),
                          f"{r.packet_s * 1e3:.4f}", f"{r.flow_s * 1e3:.4f}", f"{r.error:+.1%}"] for r in cmp.runs),
                        left=["run"]))
    if steps:
        for r in cmp.runs:
            st = table(f"{r.name} {format_bytes(r.bytes)}: steps",
                       ("step", "phase", "action", "packet (µs)", "flow (µs)", "error"),
                       ([s.index, s.phase, s.action, f"{s.packet_s * 1e6:.2f}", f"{s.flow_s * 1e6:.2f}",
                         f"{s.error:+.1%}"] for s in r.steps), left=["phase", "action"])
            st.title_justify = "left"
            console.print(st)
    console.print(f"largest completion-time error: {cmp.max_abs_error:.1%}")
