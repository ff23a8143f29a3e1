"""Run a scenario on a backend and write its results directory.

Spec: ``docs/architecture.md`` (data flow, results).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from pathlib import Path

import numpy as np

from emulation import dataplane as dpn
from emulation.checks import app_changes
from emulation.envelope import ResultEnvelope, envelope, write_result
from emulation.output import Interrupted, Progress
from emulation.results import CollectiveResult, FabricRecord, RunResult
from emulation.scenario import Experiment, Scenario, resolve
from emulation.scale import FRAMES_PER_STEP
from emulation.schedule import RunDescription, reconfiguration_delay
from emulation.units import format_bytes
from emulation.emulator.session import HeadroomError, PacketSession, requested_mbps

log = logging.getLogger(__name__)



class BackendError(ValueError):
    """The scenario asks for something the chosen backend cannot do (one line, names the field)."""


def run(sc: Scenario, backend: str, out: Path, progress: Progress | None = None, force: bool = False,
        experiment: Experiment | None = None, pcap: list[str] | None = None) -> ResultEnvelope:
    """Run ``sc`` on ``backend`` (``"flow"`` or ``"packet"``); return its result (``result.json``).

    :param experiment: ``sc`` resolved (:func:`emulation.scenario.load_experiment`, whose checked
        runs are then not planned again); default: resolved here.
    :param pcap: packet backend: capture these fabric ports during the runs (``["ocs"]``: every
        OCS input; else interface names), :mod:`emulation.emulator.capture`.

    :raises BackendError: the backend cannot execute the scenario's semantics, or the fabric is
        larger than the packet backend can emulate here (:mod:`emulation.emulator.limits`).
    :raises HeadroomError: see :func:`run_packet`.
    """
    exp = experiment if experiment is not None else resolve(sc)
    if backend == "flow":
        return run_flow(exp, progress)
    if exp.semantics == "dependency-driven" and any(r.schedule != "none" for _, r in exp.jobs):
        raise BackendError("semantics: dependency-driven runs on the packet backend are per-step plans, not "
                           "time-slotted schedules (use --backend flow)")
    if exp.semantics == "dependency-driven" and exp.emulation.apps:
        raise BackendError("semantics: dependency-driven runs raise no step events for --app or emulation.apps "
                           "(use round-synchronous)")
    if exp.straggler_rank is not None and any(r.schedule != "none" for _, r in exp.jobs):
        raise BackendError("straggler: rotor runs on the packet backend take no stragglers (use --backend flow)")
    from emulation.emulator.limits import check_packet_size

    mtu = exp.emulation.mtu
    too_big = check_packet_size(exp.fabric.gpus, exp.fabric.ports_per_gpu, mtu=mtu)
    if too_big:
        raise BackendError(too_big + (f" or emulation.mtu: {dpn.MAX_MTU}" if mtu < dpn.MAX_MTU else ""))
    return run_packet(exp, out, progress, force, pcap)


def run_flow(exp: Experiment | Scenario, progress: Progress | None = None) -> ResultEnvelope:
    """Run every job of ``exp`` (a scenario is resolved first) in the flow simulator; return its
    result.

    Deterministic: the same scenario gives the same result.

    :raises emulation.flowsim.SimulationError: a workload cannot be simulated.
    """
    import time

    from emulation.flowsim import execute
    from emulation.flowsim.run import execute_closed_form
    from emulation.schedule import ClosedFormRun

    if isinstance(exp, Scenario):
        exp = resolve(exp)
    runs: list[RunResult] = []
    wall: dict[str, float] = {}
    try:
        for run in exp.runs(progress):
            t0 = time.perf_counter()
            for it, arr in enumerate(exp.arrivals_s):
                if isinstance(run, ClosedFormRun):
                    runs.append(execute_closed_form(exp.fabric, run, exp.cost, arrivals_s=arr,
                                                    straggler=exp.straggler_rank, iteration=it))
                else:
                    runs.append(execute(exp.fabric, run, exp.cost, semantics=exp.semantics, arrivals_s=arr,
                                        iteration=it))
            wall[run.label] = time.perf_counter() - t0
    except KeyboardInterrupt:  # the runs that finished, marked incomplete (written by the command)
        raise Interrupted(collective_envelope(exp, "flow", runs, {
            "simulation_wall_s": wall, "warnings": _warnings(runs), "complete": False, "error": "interrupted"})
            if runs else None) from None
    return collective_envelope(exp, "flow", runs, {"simulation_wall_s": wall, "warnings": _warnings(runs)})


def _warnings(runs: list[RunResult]) -> list[str]:
    return [f"{r.name} {format_bytes(r.bytes)}: {p}" for r in runs for p in (r.checks.problems if r.checks else [])]


#: Fewest full frames a transfer should be on the wire: a shaped link hands each frame on whole
#: when its turn comes, so a transfer ends about one frame time earlier than a fluid link would
#: end it (up to ``1 / frames`` of its time).
FRAMES_FOR_FIDELITY = 16


def frame_warning(run: RunDescription, byte_scale: float, mtu: int) -> str | None:
    """A warning when ``run``'s smallest transfer is fewer than :data:`FRAMES_FOR_FIDELITY`
    frames of a jumbo ``mtu`` on the wire, or when, even at byte scale 1, its smallest step is
    fewer than :data:`~emulation.scale.FRAMES_PER_STEP` frames; else None.

    Jumbo frames end a transfer early: a 64-GPU Ring at 9000 (4.6 frames) runs 11-16% fast
    (docs/emulator.md, How many GPUs this machine emulates faithfully)."""
    sizes = [int(st.bytes[st.bytes > 0].min()) for st in run.workload.steps if (st.bytes > 0).any()]
    if not sizes:
        return None
    label = f"{run.name} {format_bytes(run.size_bytes)}"
    frames = min(sizes) * byte_scale / dpn.mss(mtu)
    if mtu > dpn.MTU and frames < FRAMES_FOR_FIDELITY:
        return (f"{label}: its smallest transfer is {frames:.1f} frames of MTU {mtu} on the wire, and a transfer "
                f"ends about one frame time early: emulation.mtu: {dpn.MTU} or a larger byte_scale measures it more "
                "faithfully")
    step_frames = run.smallest_step_bytes * byte_scale / dpn.mss(mtu)
    if 0 < step_frames < FRAMES_PER_STEP:
        return (f"{label}: its smallest step is {step_frames:.1f} frames on the wire even at byte scale "
                f"{byte_scale:g}, under the {FRAMES_PER_STEP} that keep a step within about 2% of its fluid time")
    return None


#: Interval of the wire probes of a captured run, seconds (:mod:`emulation.emulator.probe`).
PROBE_INTERVAL_S = 0.001


def run_packet(exp: Experiment, out: Path, progress: Progress | None = None, force: bool = False,
                pcap: list[str] | None = None) -> ResultEnvelope:
    """Run every job of ``exp`` with real packets; return its result.

    First the link rate is calibrated (:func:`collective_session`), then every run executes on the
    one emulated fabric, captured if ``pcap`` says so (:func:`start_capture`).

    :raises HeadroomError: the given rate misses the target and the policy is ``refuse``; a run
        on parallel OCSes whose ``guard_s`` is too short (:func:`collective_session`, before the
        fabric starts; the calibration stays under the rate where every guard suffices).
    :raises emulation.emulator.calibration.CalibrationError: no rate reaches the target.
    :raises emulation.emulator.net.EmulationError: the emulation could not be brought up, or a
        run failed (an agent or the controller died, a step timed out): ``out/result.json`` then
        holds the runs measured so far with ``"complete": false`` and the ``error``.
    """
    from emulation.emulator.controller_client import ControllerError
    from emulation.emulator.execute import execute
    from emulation.emulator.net import EmulationError
    from emulation.emulator.sites import ClusterError

    em = exp.emulation
    runs: list[RunResult] = []
    with collective_session(exp, out, force, progress=progress) as session:
        emu, scale = session.emu, session.scale
        capture = None
        try:
            if pcap:
                capture, _probes = start_capture(emu, out, pcap)
            for run in exp.runs(progress):
                for it, arr in enumerate(exp.arrivals_s):
                    tag = f"-it{it}" if len(exp.arrivals_s) > 1 else ""
                    run_dir = out / "emulation" / f"{run.name}-{format_bytes(run.size_bytes)}{tag}"
                    log.info("run %s (logs in %s)", run_dir.name, run_dir)
                    runs.append(execute(emu, run, scale, exp.cost, run_dir, arrivals_s=arr, iteration=it,
                                        semantics=exp.semantics))
                warning = frame_warning(run, runs[-1].byte_scale, em.mtu)
                if warning:
                    session.meta["warnings"].append(warning)
        except (EmulationError, ControllerError, ClusterError, KeyboardInterrupt) as e:
            # what was measured so far, marked incomplete, then the teardown and the error
            measured = session.record()
            cause = "" if isinstance(e, KeyboardInterrupt) else app_changes(measured["circuits_changed_by"])
            error = str(e) + cause if not isinstance(e, KeyboardInterrupt) else "interrupted"
            partial = collective_envelope(exp, "packet", runs, {**measured, "complete": False, "error": error})
            write_result(out, partial)
            if cause and isinstance(e, EmulationError):
                raise EmulationError(error) from e
            raise
        finally:
            if capture is not None:
                capture.stop()
        measured = session.record()
    measured["warnings"] += _warnings(runs)
    return collective_envelope(exp, "packet", runs, {**measured, "complete": True})


def _parallel_rate_cap(exp: Experiment, requested: float | None, mtu: int, force: bool) -> float | None:
    """The highest link rate (Mbit/s) at which every run on parallel OCSes has the guard its
    packet senders need (:func:`emulation.emulator.execute.parallel_rate_cap`), or None without
    such runs. Unless ``force``: refuses a guard too short at every rate, and a given rate above
    the cap, in one line naming the guard to set.

    :raises HeadroomError: as said."""
    from emulation.emulator.calibration import AUTO_START_MBPS
    from emulation.emulator.execute import parallel_guard_refusal, parallel_rate_cap

    cap = None
    for size, r in exp.jobs:
        if not r.schedule.startswith("spectra"):
            continue
        plan = exp.resolve(r, size).schedule
        top = parallel_rate_cap(plan, exp.emulation.byte_scale, exp.port_gbps, mtu)
        rate = requested if requested is not None else AUTO_START_MBPS
        if top is None or (requested is not None and requested > top):
            if not force:
                raise HeadroomError(f"runs: {r.name}: {parallel_guard_refusal(plan, exp.scale(rate), mtu)}")
            continue
        cap = top if cap is None else min(cap, top)
    return cap


def collective_session(exp: Experiment, out: Path, force: bool = False, ofctl_rest: int | None = None,
                       progress: Progress | None = None) -> PacketSession:
    """The packet session of a collective scenario (:class:`~emulation.emulator.session.PacketSession`:
    its ``emulation:`` section, the per-hop delay delta, the scale model at the scenario's port
    rate), its rate capped where every time-slotted run's guard band and every run on parallel
    OCSes still holds (``slotted_rate_cap_mbps``). Used by ``ocslab run`` and ``ocslab up``.

    :raises HeadroomError: a time-slotted run's guard band is shorter than the emulated switch's
        precision at the given rate, or a run on parallel OCSes has a guard too short for its
        packet senders at the given rate or at any (unless ``force`` or ``headroom: skip``).
    """
    from emulation.emulator.calibration import GUARD_FLOOR_S, slotted_rate_cap

    em = exp.emulation
    requested = requested_mbps(em)
    guards = [r.guard_s for _, r in exp.jobs if r.schedule in ("rotor", "plan")]
    cap = None
    if guards:
        cap = slotted_rate_cap(max(min(guards), 1e-9), em.byte_scale, exp.port_gbps)
        if requested is not None and requested > cap and em.headroom != "skip" and not force:
            raise HeadroomError(
                f"emulation.link_mbps: at {requested:g} Mbit/s the guard band of {min(guards):.3g} s lasts "
                f"{min(guards) * exp.scale(requested).tdf * 1e3:.2f} ms emulated, less than the emulated switch's "
                f"{GUARD_FLOOR_S * 1e3:g} ms precision: at most {cap:.3g} Mbit/s (or auto)")
    parallel = _parallel_rate_cap(exp, requested, em.mtu, force or em.headroom == "skip")
    if parallel is not None:
        cap = parallel if cap is None else min(cap, parallel)
    calibrating = (lambda what, done, total: progress(what, 0, len(exp.jobs))) if progress else None
    return PacketSession(exp.fabric, out, em, port_gbps=exp.port_gbps, delta_s=exp.cost.delta_s, rate_cap_mbps=cap,
                         force=force, ofctl_rest=ofctl_rest, progress=calibrating)


def start_capture(emu, out: Path, ports: list[str]):
    """Capture ``ports`` of ``emu`` (``["ocs"]``: every OCS input) into ``out/emulation/pcap``
    with a wire probe on every GPU (:mod:`emulation.emulator.probe`). Returns ``(capture,
    probes)``: the started :class:`~emulation.emulator.capture.Capture` and the probe processes
    (children of ``emu``, ended with it, or earlier by :func:`emulation.emulator.net.stop_pid`).

    :raises emulation.emulator.net.EmulationError: a port that is not the fabric's, or tcpdump
        did not start.
    """
    from emulation.emulator.capture import Capture, CaptureError
    from emulation.emulator.net import EmulationError
    from emulation.poll import wait_until

    devices = emu.ocs_input_ports() if ports == ["ocs"] else ports
    unknown = sorted(set(devices) - set(emu.drops.ports.ovs_ports))
    if unknown:
        raise EmulationError(f"--pcap: {unknown[0]} is not a port of this fabric "
                             f"(e.g. {', '.join(emu.ocs_input_ports()[:3])})")
    pcap_dir = out / "emulation" / "pcap"
    probe_ports = [(emu.host(g).defaultIntf().name, emu.host(g).pid) for g in range(emu.fabric.gpus)]
    capture = Capture(devices, pcap_dir, probe_ports, gpu_of=emu.ocs_input_gpus())
    try:
        capture.start()
    except CaptureError as e:
        raise EmulationError(str(e)) from None
    probes = [emu.popen(g, [sys.executable, "-m", "emulation.emulator.probe", emu.host(g).defaultIntf().name,
                            str(g), str(PROBE_INTERVAL_S)], pcap_dir / f"probe-g{g}.log")
              for g in range(emu.fabric.gpus)]
    emu.drops.probes = probes  # paused by quiet snapshots, and balanced apart in the drop accounting

    def probing() -> bool:  # every probe on the wire before anything is measured
        for g, p in enumerate(probes):
            if p.poll() is not None:
                raise EmulationError(f"--pcap: the wire probe of GPU {g} exited (see {pcap_dir / f'probe-g{g}.log'})")
        return all("probing" in (pcap_dir / f"probe-g{g}.log").read_text() for g in range(len(probes)))

    wait_until(probing, 30, lambda: EmulationError("--pcap: the wire probes did not start within 30 s"))
    return capture, probes


def moe_warnings(exp: Experiment, runs: list[RunResult]) -> list[str]:
    """What a MoE scenario's defaults can hide, one line each: token copies the capacity limit
    dropped (and their share), a payload-efficient layer that sends at least as many bytes as
    the padded one (its combine streams rounded up to whole tiles of ``tile_tokens``), and
    rotor slots shorter than R (the circuits dark most of each turn, while ``slot util``, which
    counts the up time only, can read 1.00)."""
    out: list[str] = []
    moe_runs = {spec.name for _, spec in exp.jobs if spec.collective == "moe"}
    if exp.moe is not None and any(r.name in moe_runs for r in runs):
        from emulation.scenario.resolve import routed

        layer, tr = exp.moe, routed(exp.moe)
        copies = int(tr.routed.sum())
        if tr.dropped:
            out.append(f"moe: the capacity limit (C = {layer.capacity} tokens per expert from each GPU, capacity_factor "
                       f"{layer.capacity_factor:g}) dropped {tr.dropped} of {copies} routed token copies "
                       f"({tr.dropped / copies:.0%}); a larger moe.capacity_factor keeps more")
        payload, padded = tr.network_bytes("payload"), tr.network_bytes("padded")
        if payload >= padded:
            off = ~np.eye(layer.gpus, dtype=bool)
            tile_pad = int(tr.combine[off].sum() - tr.dispatch.T[off].sum())
            out.append(f"moe: payload-efficient sends {payload / 2**20:.1f} MiB over the fabric, padded "
                       f"{padded / 2**20:.1f} MiB: its combine streams are rounded up to whole tiles of "
                       f"{layer.tile_tokens} tokens ({tile_pad / max(payload, 1):.0%} of its bytes); a smaller "
                       "moe.tile_tokens sends fewer")
    for r in runs:
        sl = r.slots
        if sl and sl.slots_per_turn and sl.turn_s and sl.reconfiguration_delay_s and sl.planned_makespan_s is None:
            slot = sl.turn_s / sl.slots_per_turn - sl.reconfiguration_delay_s
            if slot < sl.reconfiguration_delay_s:
                out.append(f"{r.name}: its rotor slots average {slot * 1e6:.2f} us, shorter than R = "
                           f"{sl.reconfiguration_delay_s * 1e6:g} us: the circuits are dark most of each turn "
                           "(slot util counts only the time they are up)")
    return list(dict.fromkeys(out))


def collective_envelope(exp: Experiment, backend: str, runs: list[RunResult], extra: dict) -> ResultEnvelope:
    """The envelope of a collective result (``extra``: its packet-backend fields and the
    envelope's ``warnings``, ``complete`` and ``error``; :func:`moe_warnings` join the warnings)."""
    extra = dict(extra)
    header = {k: extra.pop(k) for k in ("warnings", "complete", "error") if k in extra}
    more = moe_warnings(exp, runs)
    if more:
        header["warnings"] = [*header.get("warnings", []), *more]
    fabric = FabricRecord(topology=exp.topology, name=exp.fabric.name, gpus=exp.fabric.gpus,
                          ports_per_gpu=exp.fabric.ports_per_gpu, port_gbps=exp.fabric.port_gbps,
                          reconfiguration_delay_s=reconfiguration_delay(exp.fabric))
    result = CollectiveResult(fabric=fabric, cost=dataclasses.asdict(exp.cost), semantics=exp.semantics,
                              **exp.header, arrivals_s=[list(a) for a in exp.arrivals_s], **extra, runs=runs)
    return envelope("collective", exp.name, backend, result, **header)
