"""Sanity checks run on every result, whatever the backend.

- bytes delivered equal bytes sent;
- no directed link carries more than its capacity over any step: for every step, the bytes
  routed over its busiest link (``StepResult.max_link_bytes``) fit in ``B x`` the step's
  duration (a packet run that beats this has a broken clock or a leaky shaper);
- busbw never exceeds the per-GPU injection bandwidth (ports per GPU x port rate);
- (packet backend, time-slotted runs) the emulated switch started 99% of its slots within the
  guard band;
- (packet backend) every reconfiguration rerouted inside its dark window: a controller slower
  than R stretches the window, which the physical switch would not have;
- (packet backend) the emulator lost no packet of its own: every drop was modelled congestion
  or a dark circuit (:mod:`emulation.drops`), none an artefact of the emulator.

Each failed check is one line ``check: detail`` in the run's ``checks.problems``;
:func:`failed_checks` names them in the result envelope, and a command whose run failed one
exits with status 1 (docs/commands.md, exit statuses).

Spec: ``docs/architecture.md`` (results; sanity checks on both backends).
"""

from __future__ import annotations

from emulation import dataplane as dpn
from emulation.drops import artefact_problem, summarise
from emulation.envelope import FailedCheck
from emulation.fabric import Fabric
from emulation.results import Checks, CollectiveResult, RunResult
from emulation.schedule import ClosedFormRun, RunDescription

#: Relative slack before a check fails (timing noise of the packet backend).
TOLERANCE = 0.01


def check_run(run: RunResult, fabric: Fabric, tolerance: float = TOLERANCE) -> Checks:
    """Check ``run`` against the physics of ``fabric``.

    :returns: the :class:`~emulation.results.Checks`; utilisation and the busbw ratio are
        fractions (1 = the limit).
    """
    problems = []
    conserved = run.bytes_delivered == run.bytes_sent
    if not conserved:
        problems.append(f"bytes: delivered {run.bytes_delivered} of {run.bytes_sent} sent")
    cap = fabric.port_bytes_per_s
    util, worst = 0.0, None
    for s in run.steps:
        dur = s.end_s - s.start_s
        if s.max_link_bytes and dur > 0:
            u = s.max_link_bytes / (cap * dur)
            if u > util:
                util, worst = u, s.index
        elif s.max_link_bytes and dur <= 0:
            util, worst = float("inf"), s.index
    if util > 1 + tolerance:
        problems.append(f"link capacity: step {worst} moved {util:.3f}x what its busiest link can carry")
    injection = fabric.ports_per_gpu * fabric.port_gbps
    ratio = run.busbw_gbps / injection if run.time_s > 0 else float("inf")
    if ratio > 1 + tolerance:
        problems.append(f"busbw: {run.busbw_gbps:.1f} Gbit/s exceeds the injection bandwidth {injection:.0f} Gbit/s")
    late = run.slots.start_error_s.p99 if run.slots and run.slots.start_error_s else None
    guard = run.slots.guard_emulated_s if run.slots else None
    if late is not None and guard is not None and late > guard:
        problems.append(f"slot starts: 1% of slots started more than {late * 1e3:.2f} ms late, beyond the "
                        f"{guard * 1e3:.2f} ms guard band (emulated): lower emulation.link_mbps")
    slow = [s for s in run.steps if s.reconfiguration_delay_s and s.timing
            and s.timing.get("reroute_s", 0.0) > s.reconfiguration_delay_s * (1 + tolerance)]
    if slow:
        s = max(slow, key=lambda s: s.timing["reroute_s"] / s.reconfiguration_delay_s)
        problems.append(f"dark window: step {s.index}'s rerouting took {s.timing['reroute_s'] * 1e6:.1f} us, longer than "
                        f"R = {s.reconfiguration_delay_s * 1e6:.1f} us (emulated), and stretched it: lower "
                        "emulation.link_mbps")
    artefacts = artefact_problem(run.drops) if run.drops else None
    if artefacts:
        problems.append(artefacts)
    return Checks(ok=not problems, bytes_conserved=conserved, max_link_utilisation=util, busbw_over_injection=ratio,
                  emulator_drops=summarise(run.drops)["artefacts"] if run.drops else 0, problems=problems)


def complete(res: RunResult, run: RunDescription | ClosedFormRun, fabric: Fabric, iteration: int,
             arrivals_s) -> RunResult:
    """Fill in what the backends' executors know beyond the measurement, and check the run:
    the plan's prediction, the iteration and its straggler delay D (the latest arrival, real
    seconds), the padding bytes, a time-slotted schedule's shape (its ``summary``)
    and the sanity checks (:func:`check_run`); a closed-form run has no plan. Both backends call
    it last; returns ``res``."""
    res.iteration = iteration
    res.straggler_delay_s = max(arrivals_s)
    if isinstance(run, ClosedFormRun):
        res.checks = check_run(res, fabric)
        return res
    res.predicted_s = run.schedule.predicted_s
    res.padding_bytes = run.padding_bytes
    if run.schedule.slotted:
        res.slots = res.slots.model_copy(update=run.schedule.summary())
    res.checks = check_run(res, fabric)
    return res


def failed_checks(result: CollectiveResult) -> list[FailedCheck]:
    """Every failed check of every run of ``result``, named by the run (``ring 25MiB``, with
    its iteration when the scenario repeats): the ``failed_checks`` of its envelope. When the
    user's apps changed the circuits during the runs, each detail ends with
    :func:`app_changes`, the likely cause."""
    from emulation.units import format_bytes

    cause = app_changes(result.circuits_changed_by or {})
    out = []
    for r in result.runs:
        where = f"{r.name} {format_bytes(r.bytes)}" + (f" iteration {r.iteration}" if result.iterations > 1 else "")
        out += [FailedCheck.of(p + cause, where) for p in (r.checks.problems if r.checks else ())]
    return out


#: Who reconfigures on the emulator's behalf (``CircuitSwitch.apply``'s ``by``; ``planner`` in the
#: flow backend's records): not a user app.
NOT_USER_APPS = ("planner", *dpn.PRIVILEGED)


def app_changes(changed: dict[str, int]) -> str:
    """``" (your app X changed the circuits N times during the runs: ...)"`` for the apps in
    ``changed`` (:func:`emulation.emulator.session.ownership`), else ``""``: what a failed step's error adds, since a step
    whose circuits change under it can stall."""
    apps = {k: n for k, n in changed.items() if k not in NOT_USER_APPS}
    if not apps:
        return ""
    who = ", ".join(f"{k} {n} time(s)" for k, n in sorted(apps.items()))
    return (f" (your apps changed the circuits during the runs: {who}; a step whose circuits change under it "
            "can stall: set circuits before a step is released, in EventStepBegin)")
