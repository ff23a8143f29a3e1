"""Drive the torch job of :mod:`emulation.torchjob.rails_train` on emulated photonic rails (Opus,
arXiv 2507.08119), one fresh emulation per control mode, and compare it with the flow backend's
replay of the same trace.

For each mode of :attr:`TorchJobSpec.modes`: the rail fabric (:func:`topologies.rails`, one link
rate everywhere, the rail ports of the :class:`~topologies.rail_network.RailNetwork`) comes up
under the controller with the Opus app armed (:mod:`controllers.opus`) on a Unix socket; even
rails start with the data-parallel pairs, odd ones with the pipeline pairs, so that every server
reaches every other for the rendezvous (:func:`packet_fabric`); the job runs the trace's programs
for ``iterations`` iterations (:func:`job_spec`). Its records give, per iteration, the time (the
last rank's end, steady = mean over the iterations after the first), what each rank did (compute,
each op, waiting on the controller) and the controller's rewires with their measured dark
windows; the loss (:func:`summarise_job`).

The flow backend replays the same trace (:func:`emulation.flowsim.iteration.simulate_iteration`)
at the same link rate, the same R and the job's measured round trip to the controller (mode
``speculative-deferred`` for the job's speculative requests: the Opus app never takes circuits
from a rank inside its phase). Times are real seconds: the trace was built for links at the
fabric's ``port_gbps``.

**Time dilation.** A machine that cannot carry ``port_gbps`` on every link at once (the headroom
probe of :mod:`emulation.emulator.calibration` misses its target) refuses the run, unless
the scenario's ``emulation.link_mbps`` is ``auto`` (or a lower rate): then the links run at the rate the probe
passes, ``B_e``, and the whole job runs ``TDF = port rate / B_e`` times slower: every compute op,
the dark window R, the link delay and the job's time-out are stretched by TDF, and every measured
time is divided by it before it is recorded. The controller's round trip is not stretched (it is
the real controller's), so it weighs 1/TDF as much as at TDF = 1; the flow replay is given the
same divided round trip.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any, Literal, Optional

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field

from emulation.envelope import FailedCheck
from emulation.fabric import Configuration, Fabric, assign_ports
from emulation.flowsim.iteration import simulate_iteration
from emulation.output import Progress
from emulation.sections import StrictModel
from emulation.workloads.iteration import IterationTrace, stage_layers
from topologies.rail_network import RailNetwork

#: The job's mode names, by the replay's.
JOB_MODE = {"on-demand": "on-demand", "speculative-deferred": "speculative"}


class TorchJobSpec(StrictModel):
    """``rails.torch_job:`` the torch job on the packet backend (``ocslab train``): every emulated link runs
    at the fabric's ``port_gbps`` (at most 1 Gbit/s; no time dilation: the trace's seconds are
    real) unless the scenario's ``emulation.link_mbps`` says otherwise; the controller's dark
    window ``reconfiguration_delay_s``; the control ``modes`` compared; ``iterations`` per run
    (the first one warms up); the job's data and SGD."""

    reconfiguration_delay_s: float = Field(default=0.1, ge=0, le=5)
    """The controller's dark window R of every rewire, seconds (real: no time dilation)."""
    modes: list[Literal["on-demand", "speculative-deferred"]] = Field(
        default_factory=lambda: ["on-demand", "speculative-deferred"], min_length=1)
    """Control modes compared, a fresh emulation each: ``on-demand`` or
    ``speculative-deferred``."""
    iterations: int = Field(default=4, ge=2, le=100)
    """Iterations per run (the first warms up)."""
    samples: int = Field(default=1024, ge=1)
    """Samples of the job's generated dataset."""
    classes: int = Field(default=10, ge=2, le=1000)
    """Classes of the last stage's classifier."""
    lr: float = Field(default=0.05, gt=0)
    """SGD learning rate."""
    seed: int = 0
    """Seed of the data and the initial weights."""
    timeout_s: float = Field(default=600.0, gt=0, le=7200)
    """Wall-clock bound of every mode's job, seconds (at time dilation 1; stretched by it)."""
def packet_fabric(trace: IterationTrace, net: RailNetwork, gpus_per_server: int,
                  reconfiguration_delay_s: float) -> Fabric:
    """The emulated rail fabric of ``trace``'s servers (``trace.ranks``) of ``gpus_per_server``
    GPUs, ``net``'s rail ports and rates, OCSes of dark window ``reconfiguration_delay_s`` (s):
    even rails start with the data-parallel pairs (servers of one stage), odd rails with the
    pipeline pairs (module doc).

    :raises ValueError: that start leaves a server unreachable.
    """
    from topologies import rails

    G = gpus_per_server
    bare = rails(trace.ranks, G, rail_ports=net.ports_per_gpu, port_gbps=net.port_gbps,
                 reconfiguration_delay_s=reconfiguration_delay_s, rail="ocs", initial="empty",
                 scaleup_gbps=net.scaleup_gbps)
    dims = [("dp", "edp"), ("pp", "mp")]
    circuits = {}
    for r in range(G):
        want = dims[r % 2]
        pairs, used = [], set()
        for g in sorted(trace.groups.values(), key=lambda g: g.id):
            if g.dim in want and len(g.members) == 2 and not used & set(g.members):
                used |= set(g.members)
                pairs += [tuple(m * G + r for m in g.members)] * net.ports_per_gpu
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


def job_spec(trace: IterationTrace, gpus_per_server: int, job: TorchJobSpec, mode: str, socket: str,
             tdf: float = 1.0) -> dict:
    """The job file of :mod:`emulation.torchjob.rails_train`: ``trace``'s programs and groups
    (every op's seconds stretched by the time dilation ``tdf``), its model's shape
    (``trace.model``, ``trace.parallel``), ``job``'s data and SGD, the job's name of ``mode``
    (:data:`JOB_MODE`) and the Opus app's Unix ``socket``."""
    m, p = trace.model, trace.parallel
    return {
        "servers": trace.ranks, "gpus_per_server": gpus_per_server,
        "stage_of": list(trace.stage_of), "replica_of": list(trace.replica_of), "replicas": p.dp,
        "groups": {g.id: list(g.members) for g in trace.groups.values()},
        "programs": [[{"kind": o.kind, "phase": o.phase, "seconds": o.seconds * tdf, "group": o.group, "bytes": o.bytes,
                       "message": o.message} for o in prog] for prog in trace.programs],
        "layers_per_stage": [len(r) for r in stage_layers(m.layers, p.pp)],
        "hidden": m.hidden, "ffn": m.ffn_hidden, "tokens": p.micro_batch_size * m.seq_len,
        "classes": job.classes, "micro_batches": p.micro_batches, "iterations": job.iterations,
        "samples": job.samples, "lr": job.lr, "seed": job.seed, "mode": JOB_MODE[mode], "socket": socket,
    }


def summarise_job(run_dir: Path, gpus: int, iterations: int, tdf: float = 1.0) -> dict:
    """Per-iteration times and per-rank intervals from the job's records (module doc), every
    time divided by the time dilation ``tdf``; ``overrun_s`` is the most any compute op's real
    work exceeded the trace's time after the first iteration (which loads torch's kernels)."""
    ops = {g: [json.loads(x) for x in (run_dir / f"ops-g{g}.jsonl").read_text().splitlines()] for g in range(gpus)}
    for recs in ops.values():
        for o in recs:
            for key in ("t0", "t1", "wait_s", "overrun_s"):
                o[key] /= tdf
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
            "control_rtt_s": statistics.median(rtts) / tdf if rtts else 0.0, "ops": ops}


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
    headroom: Optional[dict[str, Any]] = None
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

    def failed_checks(self) -> list[FailedCheck]:
        """The ``dark window`` check of every mode, failed: each rewire kept the changed circuits
        dark for at least the R it asked for (a shorter window is an emulator that reconfigured
        faster than the modelled switch)."""
        out = []
        for mode, run in self.runs.items():
            short = [w for w in run.reconfigurations if w.measured_s < w.requested_s]
            if short:
                w = min(short, key=lambda w: w.measured_s / w.requested_s)
                out.append(FailedCheck(check="dark window", where=mode,
                                       detail=f"{len(short)} of {len(run.reconfigurations)} rewires shorter than R, the "
                                              f"shortest {w.measured_s * 1e3:.2f} ms for R {w.requested_s * 1e3:.2f} ms"))
        return out


def run_rail_job(trace: IterationTrace, net: RailNetwork, gpus_per_server: int, job: TorchJobSpec, out: Path,
                 spec, progress: Progress | None = None) -> TorchJobResult:
    """Every mode of ``job.modes`` on a fresh emulation of ``trace``'s rails (:func:`packet_fabric`),
    with the flow replay beside it (module doc); each mode's record also in
    ``out/MODE/summary.json``.

    :param spec: the scenario's ``emulation:`` section, each mode's packet session
        (:class:`~emulation.emulator.session.PacketSession`; byte scale 1, the job's bytes are
        real): its ``link_mbps`` (the port rate unless given; ``auto``: the highest rate up to it
        that the headroom probe passes, the first mode's rate capping the next's) and the time
        dilation ``port rate / link rate``.

    :returns: the :class:`TorchJobResult` (real seconds; the timelines as :func:`job_timeline`).
    :raises EmulationError: the emulation or the job failed. :raises ValueError: bad fabric.
    :raises emulation.emulator.session.HeadroomError: the given rate misses the headroom target.
    """
    from emulation.emulator.net import FAST_RTO_MIN_MS
    from emulation.emulator.session import PacketSession
    from emulation.torchjob.launch import TorchJob, tune_tcp

    fabric = packet_fabric(trace, net, gpus_per_server, job.reconfiguration_delay_s)
    port_mbps = net.port_gbps * 1000
    gpus = fabric.gpus
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, TorchJobRun] = {}
    ceiling = port_mbps  # auto: later modes probe from the first mode's rate down
    for k, mode in enumerate(job.modes):
        if progress:
            progress(f"{mode}: emulating", k, len(job.modes))
        d = out / mode
        d.mkdir(parents=True, exist_ok=True)
        sock_dir = Path(tempfile.mkdtemp(prefix="ocl-opus-"))  # AF_UNIX paths are short
        sock = str(sock_dir / "opus.sock")
        try:
            with PacketSession(fabric, d, spec, port_gbps=net.port_gbps, byte_scale=1.0,
                               rate_cap_mbps=ceiling) as session:
                emu = session.emu
                probe = session.meta.get("headroom")
                ceiling = session.rate
                tdf = port_mbps / session.rate
                emu.client.arm_opus(sock, job.reconfiguration_delay_s * tdf)
                seq = len(emu.client.events())
                (d / "job.json").write_text(json.dumps(job_spec(trace, gpus_per_server, job, mode, sock, tdf)))
                tune_tcp(emu, list(range(gpus)))
                emu.set_rto_min(FAST_RTO_MIN_MS, quickack=True)  # a rank's drain before it asks waits for no delayed ACK
                torch_job = None
                try:
                    torch_job = TorchJob(emu, "emulation.torchjob.rails_train",
                                         ["--job", str((d / "job.json").resolve()), "--dir", str(d.resolve())], d,
                                         list(range(gpus)))
                    torch_job.wait(job.timeout_s * tdf)
                finally:
                    if torch_job is not None:
                        torch_job.kill()
                    emu.set_rto_min(None)
                events = emu.client.events(seq)
                emu.client.disarm_opus()
        finally:
            shutil.rmtree(sock_dir, ignore_errors=True)
        job_sum = summarise_job(d, gpus, job.iterations, tdf)
        rewires = [e for e in events if e["kind"] == "reconfigured"]
        flow = simulate_iteration(trace, net, mode, job.reconfiguration_delay_s, job_sum["control_rtt_s"],
                                  job.iterations, record=False)
        ops = job_sum.pop("ops")
        runs[mode] = TorchJobRun(
            **job_sum, headroom=probe, time_dilation=tdf,
            reconfigurations=[Rewire(ocs=e.get("ocs"), t_dark=e.get("t_dark"), requested_s=e["reconfiguration_delay_s"] / tdf,
                                     measured_s=e["dark_window_measured_s"] / tdf) for e in rewires],
            flow_iteration_s=flow.iteration_s, flow_reconfigurations_per_iteration=flow.reconfigurations_per_iteration,
            deviation=job_sum["iteration_s"] / flow.iteration_s - 1.0, timeline=job_timeline(ops, trace, job_sum))
        (d / "summary.json").write_text(runs[mode].model_dump_json(indent=1))
    if progress:
        progress("done", len(job.modes), len(job.modes))
    return TorchJobResult(link_mbps=port_mbps, reconfiguration_delay_s=job.reconfiguration_delay_s, gpus=gpus,
                          servers=trace.ranks, gpus_per_server=gpus_per_server, runs=runs)


def job_timeline(ops: dict, trace: IterationTrace, job: dict) -> dict:
    """Intervals ``[gpu, t0, t1, kind, dim, phase]`` of the second iteration of a job's records
    ``ops`` (:func:`summarise_job`'s, per GPU; ``job`` its iteration ends and starts), times
    from that iteration's start (real s): waiting on the controller, then each op.
    ``{"t0": 0, "t1", "intervals"}``."""
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
