"""Run a rail scenario's torch job on the packet backend (``ocslab train``), one fresh emulation
per control mode, and compare it with the flow backend's replay of the same trace.

For each mode of ``rails.torch_job.modes``: the rail fabric (:func:`topologies.rails`, one link rate
everywhere, the scenario's rail ports) comes up under the controller with the Opus app armed
(:mod:`controllers.opus`) on a Unix socket; even rails start with the data-parallel pairs, odd
ones with the pipeline pairs, so that every server reaches every other for the rendezvous; the
job (:mod:`emulation.torchjob.rails_train`) runs the trace's programs for ``iterations``
iterations. Its records give, per iteration, the time (the last rank's end, steady = mean over
the iterations after the first), what each rank did (compute, each op, waiting on the
controller) and the controller's rewires with their measured dark windows; the loss.

The flow backend replays the same trace (:func:`emulation.flowsim.iteration.simulate_iteration`) at the same
link rate, the same R and the job's measured round trip to the controller (mode
``speculative-deferred`` for the job's speculative requests: the Opus app never takes circuits
from a rank inside its phase). Times are real seconds: the trace was built for the emulated
links, there is no time dilation.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any, Optional

import networkx as nx
from pydantic import BaseModel, ConfigDict

from emulation.fabric import Configuration, Fabric, assign_ports
from emulation.flowsim.iteration import simulate_iteration
from emulation.rails.run import trace_for
from emulation.output import Progress
from emulation.workloads.iteration import IterationTrace, stage_layers

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
    reconfigurations: list[Rewire]
    flow_iteration_s: float
    flow_reconfigurations_per_iteration: float
    deviation: float
    timeline: dict[str, Any]


class TorchJobResult(BaseModel):
    """A rail scenario's torch job on the packet backend beside the flow backend (``ocslab
    train``; inside the envelope): the emulated link rate (Mbit/s), R (s), the fabric's size and
    one :class:`TorchJobRun` per control mode."""

    model_config = ConfigDict(extra="forbid")

    link_mbps: float
    reconfiguration_delay_s: float
    gpus: int
    servers: int
    gpus_per_server: int
    runs: dict[str, TorchJobRun]


#: The job's mode names, by the replay's.
JOB_MODE = {"on-demand": "on-demand", "speculative-deferred": "speculative"}


def packet_fabric(sc, trace: IterationTrace) -> Fabric:
    """The emulated rail fabric: even rails start with the data-parallel pairs (servers of one
    stage), odd rails with the pipeline pairs (module doc).

    :raises ValueError: that start leaves a server unreachable.
    """
    from topologies import rails

    f = sc.rails.fabric
    bare = rails(f.servers, f.gpus_per_server, rail_ports=f.ports_per_gpu, port_gbps=f.port_gbps,
                 reconfiguration_delay_s=sc.rails.torch_job.reconfiguration_delay_s, rail="ocs", initial="empty",
                 scaleup_gbps=f.scaleup_gbps)
    G = f.gpus_per_server
    dims = [("dp", "edp"), ("pp", "mp")]
    circuits = {}
    for r in range(G):
        want = dims[r % 2]
        pairs, used = [], set()
        for g in sorted(trace.groups.values(), key=lambda g: g.id):
            if g.dim in want and len(g.members) == 2 and not used & set(g.members):
                used |= set(g.members)
                pairs += [tuple(m * G + r for m in g.members)] * f.ports_per_gpu
        circuits.update(assign_ports(bare, f"rail{r}", pairs).to_json())
    fab = Fabric(bare.name, bare.gpus, bare.ports_per_gpu, bare.port_gbps, ocs=bare.ocs, eps=bare.eps,
                 initial=Configuration.from_json(circuits))
    graph = nx.Graph()
    graph.add_nodes_from(range(fab.gpus))
    graph.add_edges_from((link.u, link.v) for link in fab.links(fab.initial) if link.u < fab.gpus and link.v < fab.gpus)
    for e in fab.eps:
        gs = [p.gpu for p in e.ports]
        graph.add_edges_from((gs[0], g) for g in gs[1:])
    if not nx.is_connected(graph):
        raise ValueError("packet: the rails' starting circuits leave a server unreachable")
    return fab


def job_spec(sc, trace: IterationTrace, mode: str, socket: str) -> dict:
    """The job file of :mod:`emulation.torchjob.rails_train`."""
    m, p, pk = sc.rails.model, sc.rails.parallel, sc.rails.torch_job
    return {
        "servers": trace.ranks, "gpus_per_server": sc.rails.fabric.gpus_per_server,
        "stage_of": list(trace.stage_of), "replica_of": list(trace.replica_of), "replicas": p.dp,
        "groups": {g.id: list(g.members) for g in trace.groups.values()},
        "programs": [[{"kind": o.kind, "phase": o.phase, "seconds": o.seconds, "group": o.group, "bytes": o.bytes,
                       "message": o.message} for o in prog] for prog in trace.programs],
        "layers_per_stage": [len(r) for r in stage_layers(m.layers, p.pp)],
        "hidden": m.hidden, "ffn": m.ffn_hidden, "tokens": p.micro_batch_size * m.seq_len,
        "classes": pk.classes, "micro_batches": p.micro_batches, "iterations": pk.iterations,
        "samples": pk.samples, "lr": pk.lr, "seed": pk.seed, "mode": JOB_MODE[mode], "socket": socket,
    }


def summarise_job(run_dir: Path, gpus: int, iterations: int) -> dict:
    """Per-iteration times and per-rank intervals from the job's records (module doc);
    ``overrun_s`` is the most any compute op's real work exceeded the trace's time after the
    first iteration (which loads torch's kernels)."""
    ops = {g: [json.loads(x) for x in (run_dir / f"ops-g{g}.jsonl").read_text().splitlines()] for g in range(gpus)}
    ends = [max(o["t1"] for g in ops for o in ops[g] if o["it"] == i) for i in range(iterations)]
    starts = [min(o["t0"] for g in ops for o in ops[g] if o["it"] == i) for i in range(iterations)]
    steady = (ends[-1] - ends[0]) / (iterations - 1)
    waits = [sum(o["wait_s"] for o in ops[g] if o["it"] > 0) / (iterations - 1) for g in ops]
    overrun = max((o["overrun_s"] for g in ops for o in ops[g] if o["it"] > 0), default=0.0)
    loss_file = run_dir / "loss.jsonl"
    losses = [json.loads(x)["loss"] for x in loss_file.read_text().splitlines()] if loss_file.exists() else []
    ping = run_dir / "ping.json"
    rtts = json.loads(ping.read_text())["rtt_s"] if ping.exists() else []
    return {"iteration_s": steady, "iterations_end_s": ends, "iterations_start_s": starts,
            "control_wait_s": max(waits), "overrun_s": overrun, "loss": losses,
            "control_rtt_s": statistics.median(rtts) if rtts else 0.0, "ops": ops}


def run_packet(sc, out: Path, progress: Progress | None = None) -> TorchJobResult:
    """Every mode of ``rails.torch_job.modes`` of ``sc`` (a
    :class:`emulation.kinds.rails.RailsScenario`) on a fresh emulation, with the flow replay
    beside it; each mode's summary also in ``out/MODE/summary.json``.

    :raises EmulationError: the emulation or the job failed. :raises ValueError: bad fabric.
    """
    from emulation.emulator.net import FAST_RTO_MIN_MS, EmulatedFabric
    from emulation.torchjob.launch import TorchJob, tune_tcp

    pk = sc.rails.torch_job
    f = sc.rails.fabric
    trace = trace_for(sc, sc.rails.parallel, f.gpus_per_server)
    fabric = packet_fabric(sc, trace)
    link_mbps = f.port_gbps * 1000
    gpus = fabric.gpus
    out.mkdir(parents=True, exist_ok=True)
    res = {"link_mbps": link_mbps, "reconfiguration_delay_s": pk.reconfiguration_delay_s,
           "gpus": gpus, "servers": f.servers, "gpus_per_server": f.gpus_per_server, "runs": {}}
    for k, mode in enumerate(pk.modes):
        if progress:
            progress(f"{mode}: emulating", k, len(pk.modes))
        d = out / mode
        d.mkdir(parents=True, exist_ok=True)
        sock_dir = Path(tempfile.mkdtemp(prefix="ocl-opus-"))  # AF_UNIX paths are short
        sock = str(sock_dir / "opus.sock")
        try:
            with EmulatedFabric(fabric, d / "emulation", link_mbps=link_mbps) as emu:
                probe = _check_headroom(emu, link_mbps, d / "calibration")
                emu.client.arm_opus(sock, pk.reconfiguration_delay_s)
                seq = len(emu.client.events())
                (d / "job.json").write_text(json.dumps(job_spec(sc, trace, mode, sock)))
                tune_tcp(emu, list(range(gpus)))
                emu.set_rto_min(FAST_RTO_MIN_MS, quickack=True)  # a rank's drain before it asks waits for no delayed ACK
                job = None
                try:
                    job = TorchJob(emu, "emulation.torchjob.rails_train",
                                   ["--job", str((d / "job.json").resolve()), "--dir", str(d.resolve())], d,
                                   list(range(gpus)))
                    job.wait(pk.timeout_s)
                finally:
                    if job is not None:
                        job.kill()
                    emu.set_rto_min(None)
                events = emu.client.events(seq)
                emu.client.disarm_opus()
        finally:
            shutil.rmtree(sock_dir, ignore_errors=True)
        job_sum = summarise_job(d, gpus, pk.iterations)
        rewires = [e for e in events if e["kind"] == "reconfigured"]
        flow = simulate_iteration(trace, f.network(), mode, pk.reconfiguration_delay_s,
                      job_sum["control_rtt_s"], pk.iterations, record=False)
        ops = job_sum.pop("ops")
        res["runs"][mode] = {
            **job_sum,
            "headroom": probe,
            "reconfigurations": [{"ocs": e.get("ocs"), "t_dark": e.get("t_dark"),
                                  "requested_s": e["reconfiguration_delay_s"],
                                  "measured_s": e["dark_window_measured_s"]} for e in rewires],
            "flow_iteration_s": flow.iteration_s,
            "flow_reconfigurations_per_iteration": flow.reconfigurations_per_iteration,
            "deviation": job_sum["iteration_s"] / flow.iteration_s - 1.0,
            "timeline": _timeline(ops, trace, f.gpus_per_server, job_sum),
        }
        (d / "summary.json").write_text(json.dumps(res["runs"][mode], indent=1))
    if progress:
        progress("done", len(pk.modes), len(pk.modes))
    return TorchJobResult.model_validate(res)


def _check_headroom(emu, link_mbps: float, run_dir: Path) -> dict:
    """Probe the emulation at ``link_mbps`` under full load (:func:`emulation.emulator.calibration.
    calibrate`); refuse a rate this machine cannot carry faithfully.

    :returns: the probe (``efficiency``: link-bound time over measured time).
    :raises EmulationError: the probe misses the target (naming the rate that would pass).
    """
    from emulation.emulator.calibration import DEFAULT_TARGET, CalibrationError, calibrate
    from emulation.emulator.net import EmulationError

    try:
        cal = calibrate(emu, link_mbps, 1.0, run_dir)
    except CalibrationError as e:
        raise EmulationError(f"rails.fabric.port_gbps: {e}") from None
    if not cal.requested_ok:
        asked = cal.probes[0]
        raise EmulationError(
            f"rails.fabric.port_gbps: {link_mbps:g} Mbit/s links reached {asked['efficiency']:.0%} of link rate under "
            f"full load on this machine (target {DEFAULT_TARGET:.0%}); {cal.link_mbps:g} Mbit/s passes: set port_gbps "
            f"and scaleup_gbps to {cal.link_mbps / 1000:g}")
    return cal.chosen


def _timeline(ops: dict, trace: IterationTrace, G: int, job: dict) -> dict:
    """Intervals ``[gpu, t0, t1, kind, dim, phase]`` of the second iteration (times from its
    start): waiting on the controller, then each op."""
    it = 1 if len(job["iterations_end_s"]) > 1 else 0
    t0 = job["iterations_end_s"][it - 1] if it else job["iterations_start_s"][0]
    t1 = job["iterations_end_s"][it]
    rows = []
    for g, recs in ops.items():
        for o in recs:
            if o["t1"] < t0 or o["t0"] > t1:
                continue
            dim = trace.groups[o["group"]].dim if o["group"] else ""
            start = o["t0"]
            if o["wait_s"] > 0:
                rows.append([g, start - t0, start + o["wait_s"] - t0, "wait-controller", dim, o["phase"]])
                start += o["wait_s"]
            rows.append([g, start - t0, o["t1"] - t0, o["kind"], dim, o["phase"]])
    return {"t0": 0.0, "t1": t1 - t0, "intervals": rows}
