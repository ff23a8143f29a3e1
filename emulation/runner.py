"""Run a scenario on a backend and write its results directory.

Spec: ``docs/architecture.md`` (data flow, results).
"""

from __future__ import annotations

import datetime as dt
import json
import platform
from collections.abc import Callable
from pathlib import Path

from emulation import __version__
from emulation.checks import check_run
from emulation.fabric import Fabric
from emulation.planners import Plan
from emulation.results import RunResult
from emulation.scenario import Scenario, format_bytes

Progress = Callable[[str, int, int], None]


class HeadroomError(RuntimeError):
    """The machine cannot sustain the scenario's emulated load (the CPU would be the bottleneck)."""


def default_out_dir(sc: Scenario) -> Path:
    """``runs/<scenario>-<UTC timestamp>``."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{sc.name}-{stamp}"


#: Runs with more transfers than this keep no per-transfer records in ``result.json``.
MAX_RECORDED_TRANSFERS = 200_000


class BackendError(ValueError):
    """The scenario asks for something the chosen backend cannot do (one line, names the field)."""


def run(sc: Scenario, backend: str, out: Path, progress: Progress | None = None, force: bool = False) -> dict:
    """Run ``sc`` on ``backend`` (``"flow"`` or ``"mininet"``); return the ``result.json`` dict.

    :raises BackendError: the backend cannot execute the scenario's semantics, or the fabric is
        larger than the packet backend can emulate here (:mod:`emulation.emulator.limits`).
    :raises HeadroomError: see :func:`run_mininet`.
    """
    if backend == "flow":
        return run_flow(sc, progress)
    if sc.semantics != "round-synchronous":
        raise BackendError(f"semantics: the mininet backend executes round-synchronous steps only, "
                           f"not {sc.semantics} (use --backend flow)")
    if sc.straggler is not None and any(r.schedule != "none" for r in sc.runs):
        raise BackendError("straggler: rotor runs on the mininet backend take no stragglers (use --backend flow)")
    from emulation.emulator.limits import check_packet_size

    too_big = check_packet_size(sc.fabric.gpus, sc.fabric.ports_per_gpu)
    if too_big:
        raise BackendError(too_big)
    return run_mininet(sc, out, progress, force)


def run_flow(sc: Scenario, progress: Progress | None = None) -> dict:
    """Run every (size, run) of ``sc`` in the flow simulator; return the ``result.json`` dict.

    Deterministic: the same scenario gives the same result.

    :raises emulation.flowsim.SimulationError: a workload cannot be simulated.
    """
    import time

    from emulation.flowsim import simulate
    from emulation.flowsim.slotted import simulate_slotted

    fabric = sc.build_fabric()
    arrivals = sc.iteration_arrivals_s()
    runs: list[RunResult] = []
    wall: dict[str, float] = {}
    for size, r, plan, slotted in _jobs(sc, fabric, progress):
        w = plan.workload
        t0 = time.perf_counter()
        for it, arr in enumerate(arrivals):
            if slotted:
                res = simulate_slotted(w, slotted.schedule, sc.fabric.port_gbps, alpha_s=sc.cost.alpha_s,
                                       arrivals_s=arr, name=r.name, relay=slotted.relay)
                res.planner = plan.planner
            else:
                res = simulate(fabric, w, plan, alpha_s=sc.cost.alpha_s, delta_s=sc.cost.delta_s,
                               semantics=sc.semantics, arrivals_s=arr, name=r.name,
                               record_transfers=w.transfer_count <= MAX_RECORDED_TRANSFERS)
            _finish(res, plan, fabric, it, arr, sc.padding_bytes(r, w), slotted)
            runs.append(res)
        wall[f"{r.name} {format_bytes(size)}"] = time.perf_counter() - t0
    return _result(sc, "flow", runs, {"simulation_wall_s": wall, "warnings": _warnings(runs)})


def _jobs(sc: Scenario, fabric: Fabric, progress: Progress | None):
    """Yield ``(size, run, plan, Slotted or None)`` for every job of ``sc``
    (:meth:`Scenario.jobs`), reporting progress, and ``done`` at the end."""
    todo = sc.jobs()
    for i, (size, r) in enumerate(todo):
        if progress:
            progress(f"{r.name} {format_bytes(size)}", i, len(todo))
        plan = sc.plan(r, fabric, size)
        yield size, r, plan, sc.slot_schedule(r, plan.workload)
    if progress:
        progress("done", len(todo), len(todo))


def _finish(res: RunResult, plan: Plan, fabric: Fabric, iteration: int, arrivals: list[float],
            padding_bytes: int = 0, slotted=None) -> None:
    """Fill in what the backends do not know: checks, the plan's prediction, the iteration and
    its straggler delay D (the latest arrival), padding bytes, and a rotor schedule's shape."""
    res.checks = check_run(res, fabric)
    res.predicted_s = plan.predicted_s
    res.iteration = iteration
    res.straggler_delay_s = max(arrivals)
    res.padding_bytes = padding_bytes
    if slotted:
        sched = slotted.schedule
        res.slots.update({"method": slotted.method, "slots_per_turn": len(sched.configs), "turn_s": sched.cycle_s,
                          "dark_s": sched.dark_s, "guard_s": sched.guard_s,
                          "forwarding": "two-hop" if slotted.relay else "direct"})
        if slotted.relay:
            res.slots["planned_turns"] = list(slotted.relay.turns)


def _warnings(runs: list[RunResult]) -> list[str]:
    return [f"{r.name} {format_bytes(r.bytes)}: {p}" for r in runs for p in r.checks.get("problems", [])]


def run_mininet(sc: Scenario, out: Path, progress: Progress | None = None, force: bool = False) -> dict:
    """Run every (size, run) of ``sc`` with real packets; return the ``result.json`` dict.

    First the link rate is calibrated (:mod:`emulation.emulator.calibration`): ``auto`` takes
    the highest rate whose headroom probe reaches the target; a given rate is probed and, if it
    misses, refused (policy ``refuse``, unless ``force``) or used with a warning (``warn``).

    :raises HeadroomError: the given rate misses the target and the policy is ``refuse``.
    :raises emulation.emulator.calibration.CalibrationError: no rate reaches the target.
    :raises emulation.emulator.net.EmulationError: the emulation could not be brought up, or a
        run failed (an agent or the controller died, a step timed out): ``out/result.json`` then
        holds the runs measured so far with ``"complete": false`` and the ``error``.
    """
    from emulation.emulator.calibration import GUARD_FLOOR_S, AUTO_START_MBPS, calibrate, slotted_rate_cap
    from emulation.emulator.capabilities import detect
    from emulation.emulator.controller_client import ControllerError
    from emulation.emulator.net import EmulatedFabric, EmulationError
    from emulation.emulator.orchestrator import run_workload
    from emulation.emulator.slotted import run_slotted

    fabric = sc.build_fabric()
    em = sc.emulation
    requested = None if em.link_mbps == "auto" else float(em.link_mbps)
    arrivals = sc.iteration_arrivals_s()
    caps = detect()
    runs: list[RunResult] = []
    meta: dict = {"capabilities": caps.to_json(), "warnings": []}
    if not caps.netem and sc.cost.delta_s > 0:
        meta["warnings"].append("netem missing: per-hop propagation delay delta was not emulated")
    guards = [r.guard_s for r in sc.runs if r.schedule != "none"]
    cap = None
    if guards:
        cap = slotted_rate_cap(max(min(guards), 1e-9), em.byte_scale, sc.fabric.port_gbps)
        meta["slotted_rate_cap_mbps"] = cap
        if requested is not None and requested > cap and em.headroom != "skip" and not force:
            raise HeadroomError(
                f"emulation.link_mbps: at {requested:g} Mbit/s the guard band of {min(guards):.3g} s lasts "
                f"{min(guards) * sc.scale(requested).tdf * 1e3:.2f} ms emulated, less than the emulated switch's "
                f"{GUARD_FLOOR_S * 1e3:g} ms precision: at most {cap:.3g} Mbit/s (or auto)")
    start = requested if requested is not None else min(AUTO_START_MBPS, cap or AUTO_START_MBPS)
    with EmulatedFabric(fabric, out / "emulation", link_mbps=start,
                        delay_s=sc.cost.delta_s * sc.scale(start).tdf, capabilities=caps) as emu:
        rate = start
        if em.headroom != "skip":
            if progress:
                progress("calibrating the link rate", 0, len(sc.jobs()))
            cal = calibrate(emu, requested, em.byte_scale, out / "emulation" / "calibration", em.headroom_target,
                            max_mbps=cap)
            meta["calibration"] = cal.to_json()
            meta["headroom"] = cal.chosen
            rate = cal.link_mbps
            if not cal.requested_ok:
                if em.headroom == "refuse" and not force:
                    raise HeadroomError(cal.refusal())
                meta["warnings"].append(cal.refusal() + " (run anyway)")
                meta["headroom"] = next(p for p in cal.probes if p["link_mbps"] == requested)
                rate = requested
                emu.set_link_mbps(rate)
        scale = sc.scale(rate)
        try:
            for size, r, plan, slotted in _jobs(sc, fabric, progress):
                w = plan.workload
                for it, arr in enumerate(arrivals):
                    tag = f"-it{it}" if len(arrivals) > 1 else ""
                    run_dir = out / "emulation" / f"{r.name}-{format_bytes(size)}{tag}"
                    if slotted:
                        res = run_slotted(emu, r.name, w, slotted.schedule, scale, sc.cost.alpha_s, run_dir,
                                          plan.planner, relay=slotted.relay)
                    else:
                        res = run_workload(emu, r.name, w, plan, scale, sc.cost.alpha_s, run_dir, arrivals_s=arr)
                    _finish(res, plan, fabric, it, arr, sc.padding_bytes(r, w), slotted)
                    runs.append(res)
        except (EmulationError, ControllerError, KeyboardInterrupt) as e:
            # what was measured so far, marked incomplete, then the teardown and the error
            error = str(e) if not isinstance(e, KeyboardInterrupt) else "interrupted"
            partial = _result(sc, "mininet", runs, {**meta, "scale": scale.to_json(), "complete": False,
                                                    "error": error})
            (out / "result.json").write_text(json.dumps(partial, indent=1))
            raise
    meta["warnings"] += _warnings(runs)
    return _result(sc, "mininet", runs, {**meta, "scale": scale.to_json(), "complete": True})


def _result(sc: Scenario, backend: str, runs: list[RunResult], extra: dict) -> dict:
    try:
        import os_ken

        osken = getattr(os_ken, "__version__", "unknown")
    except ImportError:
        osken = "absent"
    return {
        "scenario": sc.name,
        "backend": backend,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "versions": {"ocslab": __version__, "python": platform.python_version(), "os_ken": osken},
        "fabric": {"topology": sc.fabric.topology, "gpus": sc.fabric.gpus,
                   "ports_per_gpu": sc.fabric.ports_per_gpu, "port_gbps": sc.fabric.port_gbps,
                   "reconfiguration_delay_s": sc.fabric.reconfiguration_delay_s},
        "cost": sc.cost.model_dump(),
        "semantics": sc.semantics,
        "straggler": sc.straggler.model_dump() if sc.straggler else None,
        "iterations": sc.iterations,
        "arrivals_s": sc.iteration_arrivals_s(),
        **extra,
        "runs": [r.to_json() for r in runs],
    }
