"""The ``collective`` kind: collectives on an OCS fabric (``experiments/demo.yaml``).

Scenario: :class:`emulation.scenario.Scenario` (fabric, cost, sizes, runs, moe, emulation,
backend, semantics, straggler, iterations). Result: :class:`emulation.results.CollectiveResult`.
Runs on both backends (:mod:`emulation.collective.runner`); also answers ``ocslab compare`` (both backends
side by side, :mod:`emulation.collective.compare`), ``ocslab plan`` (each run's plan, nothing runs) and
``ocslab up`` (the fabric at Mininet's prompt, :mod:`emulation.collective.console`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from emulation.collective import report
from emulation.checks import failed_checks
from emulation.envelope import EnvelopeError, read_result, write_result
from emulation.kinds import Kind, RunRequest, with_controller
from emulation.output import Refused, fail, guarded, progress_bar, results_dir, verdict
from emulation.results import CollectiveResult
from emulation.scenario import Scenario, ScenarioError
from emulation.scenario.load import check_experiment
from emulation.units import format_bytes, parse_bytes


def _experiment(sc: Scenario):
    """The :class:`~emulation.scenario.Experiment` of ``sc`` (resolved at load, or now)."""
    from emulation.scenario import resolve

    return sc.experiment if sc.experiment is not None else resolve(sc)


def _with_controller(sc: Scenario, controller: str | None, apps: tuple[str, ...], packets: bool):
    """The experiment of ``sc`` with ``--controller`` and ``--app`` applied
    (:func:`emulation.kinds.with_controller`). :raises Refused: Ryu is unavailable."""
    exp = _experiment(sc)
    em = with_controller(exp.emulation, controller, apps, packets)
    return exp if em is exp.emulation else dataclasses.replace(exp, emulation=em)


def _run(req: RunRequest):
    """Run the scenario on ``req.backend`` (:func:`emulation.collective.runner.run`), with ``req``'s
    controller framework, apps and capture."""
    from emulation.collective import runner

    sc = req.scenario
    exp = _with_controller(sc, req.controller, req.apps, req.backend == "packet")
    if req.pcap and req.backend != "packet":
        raise Refused("--pcap: packets are captured on the packet backend only")
    if req.pcap and exp.emulation.servers:
        raise Refused("--pcap: captures are taken on one machine; not with emulation.servers")
    return runner.run(sc, req.backend, req.out, req.progress, force=req.force, experiment=exp, pcap=req.pcap)


def _compare(sc: Scenario, args, path: Path) -> int:
    """``ocslab compare``: the scenario on both backends (or a saved packet result), flow against
    packet per run and per step; ``compare.json``, ``compare.png``, ``flow/``, ``packet/``. Exit
    status 1 when either backend's run failed a check or (``--max-error``) a completion time is
    further off than the bound."""
    from emulation.collective import compare as cmp_

    if args.max_error is not None and not 0 < args.max_error < float("inf"):  # NaN fails too
        return fail(f"--max-error: must be a positive fraction, got {args.max_error}")
    packet = None
    if args.packet_result is not None:
        try:
            packet = read_result(args.packet_result, CollectiveResult, kind="collective")
        except EnvelopeError as e:
            return fail(f"--packet-result: {e}")
        if packet.backend != "packet" or packet.scenario != sc.name:
            return fail(f"--packet-result: {args.packet_result} is not a packet result of scenario {sc.name}")
    out = results_dir(args.out, sc.name, "compare")

    def job() -> int:
        flow = _run_one(sc, "flow", out / "flow", False)
        packet_ = KIND.judge(packet) if packet is not None else _run_one(sc, "packet", out / "packet", args.force)
        got = cmp_.compare(packet_, flow).judge(packet_, flow, args.max_error)
        cmp_.write(got, out)
        cmp_.print_compare(got, steps=not args.quiet_steps)
        Console().print(f"results: {out}/compare.json, compare.png, flow/, packet/")
        return verdict(got.failed_checks)

    return guarded(out, job)


def _run_one(sc: Scenario, backend: str, out: Path, force: bool):
    with progress_bar(backend) as progress:
        env = KIND.judge(_run(RunRequest(sc, backend, out, progress, force=force)))
    write_result(out, env, sc.to_yaml())
    report.write(env, out)
    return env


def _plan(sc: Scenario, args, path: Path) -> int:
    """``ocslab plan``: each run's plan at one size (keep / reconfigure per step, circuits
    changed, cost-model time per step), a rotor's schedule, or the parallel OCSes' schedules
    per step; nothing runs."""
    from emulation.planners import StepCoster

    exp = _experiment(sc)
    try:
        size = parse_bytes(args.size) if args.size else exp.jobs[0][0]
    except ValueError as e:
        return fail(f"--size: {e}")
    closed = [r.name for r in sc.runs if exp.in_closed_form(r, size)]
    if closed:
        return fail(f"runs: {', '.join(closed)} at {format_bytes(size)} run in closed form on {exp.fabric.gpus} GPUs "
                    "(their transfers do not fit in memory), with no per-step plan to print: use ocslab run")
    from emulation.output import phase

    with phase(f"planning {len(sc.runs)} runs at {format_bytes(size)}"):
        plans = [(r, exp.resolve(r, size).schedule) for r in sc.runs]
    for r, p in plans:
        for line in p.describe():
            print(f"{r.name}: {line}")
    plans = [(r, p) for r, p in plans if not p.slotted]
    if args.json:
        print(json.dumps({r.name: {"workload": p.workload.to_json(), "plan": p.to_json()} for r, p in plans}))
        return 0
    coster = StepCoster(exp.fabric, exp.cost)
    for r, p in plans:
        t = Table(title=f"{r.name}: {r.collective} {r.algorithm}, planner {p.planner}, {format_bytes(size)}, "
                        f"R = {p.reconfiguration_delay_s * 1e6:g} us")
        for c in ("step", "phase", "action", "changed", "hops", "max link bytes", "cost (us)"):
            t.add_column(c, justify="right" if c not in ("phase", "action") else "left")
        prev, total = p.initial, 0.0
        for i, (st, sp) in enumerate(zip(p.workload.steps, p.steps)):
            cost = coster.cost(st, sp.configuration)
            changed = sum(len(sp.configuration[o] - prev[o]) for o in {*sp.configuration, *prev})
            dark = p.reconfiguration_delay_s if sp.action == "reconfigure" else 0.0
            total += cost.time_s + dark
            t.add_row(str(i), st.phase, sp.action, str(changed), str(cost.dilation),
                      format_bytes(int(cost.max_link_bytes)) if cost.max_link_bytes < float("inf") else "unroutable",
                      f"{(cost.time_s + dark) * 1e6:.2f}")
            prev = sp.configuration
        Console().print(t)
        print(f"{r.name}: {p.reconfigurations} reconfigurations, cost-model time {total * 1e3:.4f} ms")
    return 0


def _up(sc: Scenario, args, path: Path) -> int:
    """``ocslab up``: the scenario's fabric at Mininet's prompt with ocslab's commands
    (:func:`emulation.collective.console.up`); on leaving, the session's collectives are its
    ``result.json`` (with ``steps.csv`` and ``timeline.png`` when it ran any). Exit status 1 when
    one of them failed a check (commands fed on stdin: a batch session decides like a run)."""
    from emulation.emulator.limits import check_packet_size

    from controllers.app_check import check_apps

    problem = check_apps(args.app)
    if problem:
        return fail(f"--app: {problem}")
    exp = _with_controller(sc, args.controller, tuple(args.app), True)
    too_big = check_packet_size(exp.fabric.gpus, exp.fabric.ports_per_gpu, mtu=exp.emulation.mtu)
    if too_big:
        return fail(too_big)
    if not exp.fabric.ocs:
        return fail(f"fabric.topology: {sc.fabric.topology} has no OCS to reconfigure (ocslab up needs one: ocs-star "
                    f"or rack)")
    out = results_dir(args.out, sc.name, "up")

    def job() -> int:
        from emulation.collective.console import up

        env = KIND.judge(up(exp, out, force=args.force, ofctl_rest=args.ofctl_rest))
        write_result(out, env, sc.to_yaml())
        files = report.write(env, out) if env.result.runs else []
        Console().print(f"session: {len(env.result.runs)} collective(s) in {out}/result.json"
                        f"{''.join(', ' + f for f in files)}", highlight=False)
        return verdict(env.failed_checks)

    return guarded(out, job)


def _fabric(sc: Scenario, args, path: Path) -> int:
    """``ocslab fabric``: the scenario's fabric for its controller, and the commands that run it
    by hand (:func:`emulation.collective.fabric_export.export`)."""
    from emulation.collective.fabric_export import export

    return export(sc, args, path)


KIND = Kind(
    name="collective", scenario=Scenario, result=CollectiveResult, backends=("packet", "flow"), run=_run,
    show=report.print_summary, write=report.write, deep=check_experiment, checks=failed_checks,
    options=frozenset({"controller", "apps", "pcap", "force"}), commands={"compare": _compare, "plan": _plan, "up": _up, "fabric": _fabric})

__all__ = ["KIND", "ScenarioError"]
