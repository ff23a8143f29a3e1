"""``ocslab``: the command line.

- ``ocslab run FILE [--backend mininet|flow] [--out DIR] [--force] [--controller os-ken|ryu]
  [--app PATH ...] [--pcap [PORTS]]``: run a scenario, write ``DIR/result.json``, ``steps.csv``,
  ``timeline.png``, print a summary table (with ``--pcap``, also ``pcap.json``, ``pcap.png``).
- ``ocslab pcap DIR``: analyse the packets a ``--pcap`` run captured (:mod:`emulation.pcap`).
- ``ocslab compare FILE [--out DIR] [--packet-result JSON] [--max-error F]``: run the scenario on
  both backends (or reuse a packet result), print flow vs packet per run and per step, write
  ``DIR/compare.json`` and ``compare.png``.
- ``ocslab schedule ALGORITHM [--collective C] --ranks N --bytes B [--json]`` (or
  ``COLLECTIVE-ALGORITHM``, e.g. ``alltoall-rotor``): show a workload's
  steps.
- ``ocslab plan FILE [--size B] [--json]``: show each run's plan (keep / reconfigure per step,
  circuits changed, cost-model time per step) without running anything.
- ``ocslab torch allreduce-perf [...]``: gloo's AllReduce on emulated GPUs against the flow backend.
- ``ocslab train FILE [--out DIR] [--recovery R,...]``: a training scenario (``job:``): real
  data-parallel training, a GPU failure and each recovery (LUMION); ``result.json``,
  ``timeline.png`` and tables.

Bad input (scenario file, flag) prints one line and exits with status 2; a failure of the
emulation itself exits with status 1. Nothing is left half-created.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from emulation.scenario import MAX_GPUS, ScenarioError, load_experiment
from emulation.units import format_bytes, parse_bytes
from emulation.workloads import ALGORITHMS, build, known
from emulation.workloads.stragglar import describe_step, lower_bound_rounds

BACKENDS = ("mininet", "flow")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"{self.prog}: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ocslab", description="Emulate reconfigurable (optical circuit switched) ML fabrics.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="run a scenario file")
    r.add_argument("file", type=Path, help="scenario YAML (e.g. experiments/demo.yaml)")
    r.add_argument("--backend", choices=BACKENDS, help="override the scenario's backend")
    r.add_argument("--out", type=Path, help="results directory (default runs/<scenario>-<time>)")
    r.add_argument("--force", action="store_true", help="run even if the headroom probe says the CPU is the bottleneck")
    r.add_argument("--controller", choices=("os-ken", "ryu"),
                   help="the framework the controller apps run on (default: the scenario's emulation.controller)")
    r.add_argument("--app", action="append", default=[], metavar="PATH",
                   help="your own controller app (.py), loaded beside the built-in ones (repeatable)")
    r.add_argument("--pcap", nargs="?", const="ocs", metavar="PORTS",
                   help="capture packets during the runs: every OCS input port, or these comma-separated "
                        "interfaces; analysed into pcap.json and pcap.png (ocslab pcap DIR)")
    c = sub.add_parser("compare", help="run a scenario on both backends and compare them")
    c.add_argument("file", type=Path, help="scenario YAML")
    c.add_argument("--out", type=Path, help="results directory (default runs/<scenario>-compare-<time>)")
    c.add_argument("--packet-result", type=Path, help="reuse this mininet result.json instead of running the emulator")
    c.add_argument("--max-error", type=float, help="exit 1 if any completion-time error exceeds this fraction")
    c.add_argument("--force", action="store_true", help="run even if the headroom probe says the CPU is the bottleneck")
    c.add_argument("--quiet-steps", action="store_true", help="print the per-run table only")
    s = sub.add_parser("schedule", help="print a workload's steps")
    s.add_argument("algorithm", help="an algorithm of the collective (allreduce: "
                   f"{known('allreduce')}), or COLLECTIVE-ALGORITHM (e.g. alltoall-rotor)")
    s.add_argument("--collective", default="allreduce", help=f"one of: {', '.join(ALGORITHMS)} (default allreduce)")
    s.add_argument("--ranks", type=int, required=True, help="number of ranks n")
    s.add_argument("--bytes", required=True, help="buffer size (e.g. 4096, 1MiB)")
    s.add_argument("--json", action="store_true", help="print JSON")
    pl = sub.add_parser("plan", help="print each run's plan (keep/reconfigure per step) without running")
    pl.add_argument("file", type=Path, help="scenario YAML")
    pl.add_argument("--size", help="buffer size (default: the scenario's first size)")
    pl.add_argument("--json", action="store_true", help="print the plans as JSON")
    t = sub.add_parser("torch", help="run a real torch.distributed (gloo) program on emulated GPUs")
    t.add_argument("program", choices=("allreduce-perf",), help="allreduce-perf: gloo AllReduce busbw vs the flow backend")
    t.add_argument("--gpus", type=int, default=8, help="emulated GPUs in a ring of circuits (default 8)")
    t.add_argument("--link-mbps", type=float, default=20.0, help="emulated port rate, Mbit/s (default 20)")
    t.add_argument("--sizes", default="8KiB,256KiB,1MiB,4MiB",
                   help="ascending buffer sizes; the first fits alpha (default 8KiB,256KiB,1MiB,4MiB)")
    t.add_argument("--iters", type=int, default=3, help="timed iterations per size (default 3)")
    t.add_argument("--out", type=Path, help="results directory (default runs/torch-allreduce-perf-<time>)")
    tr = sub.add_parser("train", help="train on a rack, fail a GPU and recover (a training scenario, LUMION)")
    tr.add_argument("file", type=Path, help="training scenario YAML (e.g. experiments/lumion.yaml)")
    tr.add_argument("--out", type=Path, help="results directory (default runs/<scenario>-<time>)")
    tr.add_argument("--recovery", help="comma-separated subset of the scenario's recoveries to run")
    te = sub.add_parser("te", help="solve the TE of one traffic matrix of a WAN scenario (nothing runs)")
    te.add_argument("file", type=Path, help="WAN scenario YAML (e.g. experiments/wan_b4.yaml)")
    te.add_argument("--tm", type=int, default=0, help="traffic matrix index (default 0)")
    te.add_argument("--json", action="store_true", help="print tunnels, splits and link utilisations as JSON")
    pc = sub.add_parser("pcap", help="analyse the packets captured by ocslab run --pcap (dark windows, TCP)")
    pc.add_argument("dir", type=Path, help="the run's results directory")
    sub.add_parser("clean", help="remove what killed ocslab runs left behind (only ours: ocl- bridges and "
                   "interfaces, marked processes, run records) and say what was removed")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.cmd == "schedule":
        return _schedule(args)
    if args.cmd == "compare":
        return _compare(args)
    if args.cmd == "plan":
        return _plan(args)
    if args.cmd == "torch":
        return _torch(args)
    if args.cmd == "train":
        return _train(args)
    if args.cmd == "clean":
        return _clean()
    if args.cmd == "pcap":
        return _pcap_report(args.dir)
    if args.cmd == "te":
        from emulation.wan import cli as wan_cli

        return wan_cli.te(args.file, args.tm, args.json)
    return _run(args)


def _clean() -> int:
    from emulation.emulator import registry

    if os.geteuid() != 0:
        return _fail("clean: needs root (run with sudo)")
    try:
        removed = registry.clean()
    except registry.Busy as e:
        return _fail(f"clean: {e}")
    for line in removed:
        print(f"removed {line}")
    print(f"clean: {len(removed)} thing(s) removed" if removed else "clean: nothing of ocslab's was left behind")
    return 0


def _train(args) -> int:
    import datetime as dt

    if _has_section(args.file, "rails"):
        from emulation.rails import cli as rails_cli

        if args.recovery is not None:
            return _fail("--recovery applies to LUMION training scenarios, not rail ones")
        return rails_cli.train(args.file, args.out)

    from emulation.emulator.controller_client import ControllerError
    from emulation.emulator.net import EmulationError, MachineBusy
    from emulation.emulator.torchrun import torch_available
    from emulation.training import report
    from emulation.training.run import run_training
    from emulation.training.scenario import load_training

    try:
        sc = load_training(args.file)
    except ScenarioError as e:
        return _fail(str(e))
    if args.recovery is not None:
        wanted = [x.strip() for x in args.recovery.split(",") if x.strip()]
        bad = [x for x in wanted if x not in sc.recovery]
        if not wanted or bad:
            return _fail(f"--recovery: {bad[0] if bad else args.recovery!r} is not a recovery of the scenario "
                         f"(it has: {', '.join(sc.recovery)})")
        sc = sc.model_copy(update={"recovery": wanted})
    if not torch_available():
        return _fail("torch: PyTorch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh, "
                     "or .venv/bin/pip install torch==2.13.0)")
    out = _fresh_out(args.out or Path("runs") / f"{sc.name}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}")
    if isinstance(out, int):
        return out
    console = Console(stderr=True)
    created = not out.exists()
    try:
        with progress_bar("train", len(sc.recovery)) as progress:
            res = run_training(sc, out, progress)
    except MachineBusy as e:  # refused before anything was created
        _cleanup(out, created)
        return _fail(str(e))
    except (EmulationError, ControllerError, ValueError) as e:
        return _fail(f"{e} (logs in {out})", 1)
    except KeyboardInterrupt:
        console.print(f"interrupted: emulation torn down (logs in {out})")
        return 130
    report.timeline_plot(res, out / "timeline.png")
    report.print_summary(res)
    Console().print(f"results: {out}/result.json, timeline.png")
    return 0


def _torch(args) -> int:
    import datetime as dt

    from emulation.emulator.limits import check_packet_size
    from emulation.emulator.net import EmulationError, MachineBusy
    from emulation.emulator.torchrun import torch_available
    from emulation.training.gloo import allreduce_perf

    if args.gpus < 3:
        return _fail(f"--gpus: a ring of circuits needs at least 3 GPUs, got {args.gpus}")
    too_big = check_packet_size(args.gpus, 2, "--gpus")
    if too_big:
        return _fail(too_big)
    if not 0 < args.link_mbps <= 1000:
        return _fail(f"--link-mbps: must be in (0, 1000], got {args.link_mbps:g}")
    if args.iters < 1:
        return _fail(f"--iters: must be at least 1, got {args.iters}")
    try:
        sizes = [parse_bytes(x) for x in args.sizes.split(",")]
    except ValueError as e:
        return _fail(f"--sizes: {e}")
    if len(sizes) < 2 or sizes != sorted(set(sizes)) or any(x % 4 or x < 4 * args.gpus for x in sizes):
        return _fail(f"--sizes: need at least two ascending sizes, multiples of 4 bytes and of at least "
                     f"{4 * args.gpus} bytes, got {args.sizes}")
    if not torch_available():
        return _fail("torch: PyTorch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh, "
                     "or .venv/bin/pip install torch==2.13.0)")
    out = args.out or Path("runs") / f"torch-allreduce-perf-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}"
    created = not out.exists()
    try:
        res = allreduce_perf(args.gpus, args.link_mbps, sizes, args.iters, out)
    except MachineBusy as e:  # refused before anything was created
        _cleanup(out, created)
        return _fail(str(e))
    except EmulationError as e:
        return _fail(str(e), 1)
    t = Table(title=f"gloo AllReduce (torch {res.torch}) on {args.gpus} emulated GPUs, ring of circuits, "
                    f"{args.link_mbps:g} Mbit/s; alpha {res.alpha_s * 1e3:.2f} ms fitted from the smallest size")
    for c in ("bytes", "time (ms)", "busbw (Mbit/s)", "flow time (ms)", "flow busbw (Mbit/s)", "deviation", "correct"):
        t.add_column(c, justify="right")
    for r in res.rows:
        t.add_row(format_bytes(r.bytes), f"{r.time_s * 1e3:.1f}", f"{r.busbw_gbps * 1e3:.2f}",
                  f"{r.predicted_s * 1e3:.1f}", f"{r.predicted_busbw_gbps * 1e3:.2f}", f"{r.deviation:+.1%}",
                  "yes" if r.correct else "NO")
    Console().print(t)
    print(f"results: {out}/allreduce_perf.json")
    return 0 if all(r.correct for r in res.rows) else 1


def _fail(msg: str, code: int = 2) -> int:
    print(f"ocslab: {msg}", file=sys.stderr)
    return code


def _schedule(args) -> int:
    head, _, tail = args.algorithm.partition("-")
    if tail and head in ALGORITHMS:  # ``alltoall-rotor`` = ``rotor --collective alltoall``
        args.collective, args.algorithm = head, tail
    if args.collective not in ALGORITHMS:
        return _fail(f"--collective: unknown {args.collective!r} (known: {', '.join(ALGORITHMS)})")
    if args.algorithm not in ALGORITHMS[args.collective]:
        return _fail(f"algorithm: unknown {args.collective} algorithm {args.algorithm!r} "
                     f"(known: {known(args.collective)})")
    if not 2 <= args.ranks <= MAX_GPUS:
        return _fail(f"--ranks: must be in [2, {MAX_GPUS}] (the largest fabric a scenario takes), got {args.ranks}")
    try:
        nbytes = parse_bytes(args.bytes)
        w = build(args.algorithm, args.ranks, nbytes, args.collective)
    except ValueError as e:
        return _fail(f"--ranks/--bytes: {e}")
    if args.json:
        d = w.to_json()
        print(json.dumps({"algorithm": d["algorithm"], "ranks": d["ranks"], "bytes": d["bytes"],
                          "collective": d["collective"], "chunks": d["chunks"], "owner": d["owner"],
                          "steps": d["steps"]}))
        return 0
    t = Table(title=f"{w.collective} {w.algorithm}: {w.ranks} ranks, {format_bytes(w.bytes)}, {len(w.steps)} steps")
    stragglar = w.algorithm == "stragglar"
    for c in ("step", "phase", "transfers (a<=>S exchange, a->b forward, a<->b swap; chunk c)" if stragglar
              else "transfers (src->dst chunk+n: bytes)"):
        t.add_column(c)
    for i, st in enumerate(w.steps):
        if stragglar:
            txt = describe_step(st, w.ranks - 1)
        else:
            txt = ", ".join(f"{x.src}->{x.dst} c{x.chunk}+{x.nchunks}: {x.bytes}" for x in st.transfers[:6])
            if len(st.transfers) > 6:
                txt += f", ... ({len(st.transfers)} in all)"
        t.add_row(str(i), st.phase, txt)
    console = Console(width=max(Console().width, 160))
    console.print(t)
    if stragglar:
        rounds = sum(st.phase == "B" for st in w.steps)
        console.print(f"phase A: {len(w.steps) - rounds} ring ReduceScatter steps among ranks 0..{w.ranks - 2}; "
                      f"phase B: {rounds} rounds (n - 2 + ceil(log2 n) = {lower_bound_rounds(w.ranks)}); "
                      f"straggler S = rank {w.ranks - 1}; {w.chunks} chunks of {format_bytes(w.chunk_bytes(0))}")
    return 0


def _plan(args) -> int:
    from emulation.planners import StepCoster
    from emulation.scenario import resolve
    from emulation.schedule import SlottedPlan

    sc = _load(args.file)
    if isinstance(sc, int):
        return sc
    exp = resolve(sc)
    try:
        size = parse_bytes(args.size) if args.size else exp.jobs[0][0]
    except ValueError as e:
        return _fail(f"--size: {e}")
    fabric = exp.fabric
    plans = [(r, exp.resolve(r, size).schedule) for r in sc.runs]
    for r, p in plans:
        if isinstance(p, SlottedPlan):
            s = p.schedule
            print(f"{r.name}: rotor schedule ({p.method}), {len(s.configs)} slots per turn of "
                  f"{s.cycle_s * 1e6:.2f} us (slots {min(s.slots_s) * 1e6:.2f}-{max(s.slots_s) * 1e6:.2f} us, "
                  f"R {s.reconfiguration_delay_s * 1e6:g} us, guard {s.guard_s * 1e6:g} us)")
            if p.relay:
                print(f"{r.name}: two-hop forwarding relays {p.relay.relayed_bytes / 2**20:.1f} MiB; "
                      f"planned turns per step {list(p.relay.turns)}")
    plans = [(r, p) for r, p in plans if not isinstance(p, SlottedPlan)]
    if args.json:
        print(json.dumps({r.name: {"workload": p.workload.to_json(), "plan": p.to_json()} for r, p in plans}))
        return 0
    coster = StepCoster(fabric, exp.cost)
    for r, p in plans:
        t = Table(title=f"{r.name}: {r.collective} {r.algorithm}, planner {p.planner}, {format_bytes(size)}, "
                        f"R = {p.reconfiguration_delay_s * 1e6:g} us")
        for c in ("step", "phase", "action", "changed", "hops", "congestion", "cost (us)"):
            t.add_column(c, justify="right" if c not in ("phase", "action") else "left")
        prev, total = p.initial, 0.0
        for i, (st, sp) in enumerate(zip(p.workload.steps, p.steps)):
            sc_ = coster.cost(st, sp.configuration)
            changed = sum(len(sp.configuration[o] - prev[o]) for o in {*sp.configuration, *prev})
            reconfiguration_delay_s = p.reconfiguration_delay_s if sp.action == "reconfigure" else 0.0
            total += sc_.time_s + reconfiguration_delay_s
            t.add_row(str(i), st.phase, sp.action, str(changed), str(sc_.dilation),
                      format_bytes(int(sc_.congestion_bytes)) if sc_.congestion_bytes < float("inf") else "unroutable",
                      f"{(sc_.time_s + reconfiguration_delay_s) * 1e6:.2f}")
            prev = sp.configuration
        Console().print(t)
        print(f"{r.name}: {p.reconfigurations} reconfigurations, cost-model time {total * 1e3:.4f} ms")
    return 0


def _run(args) -> int:
    from emulation import report, runner

    if _is_wan(args.file):
        from emulation.wan import cli as wan_cli

        if args.app or args.pcap:
            return _fail("--app and --pcap apply to fabric scenarios, not WAN ones")
        return wan_cli.run(args.file, args.backend, args.out, args.controller)
    if _has_section(args.file, "tenancy"):
        from emulation.tenancy import cli as tenancy_cli

        if args.app or args.pcap or args.controller:
            return _fail("--app, --pcap and --controller apply to packet-backend scenarios, not tenancy traces")
        return tenancy_cli.run(args.file, args.backend, args.out)
    if _has_section(args.file, "rails"):
        from emulation.rails import cli as rails_cli

        if args.app or args.pcap or args.controller:
            return _fail("--app, --pcap and --controller apply to packet-backend scenarios, not rail sweeps")
        return rails_cli.run(args.file, args.backend, args.out)
    loaded = _load_experiment(args.file)
    if isinstance(loaded, int):
        return loaded
    sc, exp = loaded
    backend = args.backend or sc.backend
    bad = [a for a in args.app if not (a.endswith(".py") and Path(a).is_file())]
    if bad:
        return _fail(f"--app: {bad[0]!r} is not a .py file")
    if args.controller or args.app:
        em = sc.emulation.model_copy(update={"controller": args.controller or sc.emulation.controller,
                                             "apps": tuple(sc.emulation.apps) + tuple(args.app)})
        sc, exp = sc.model_copy(update={"emulation": em}), dataclasses.replace(exp, emulation=em)
    if backend == "mininet" and sc.emulation.controller == "ryu":
        from emulation.emulator.net import ryu_unavailable

        why = ryu_unavailable()
        if why:
            return _fail(f"--controller: ryu is unavailable here: {why}")
    out = _fresh_out(args.out or runner.default_out_dir(sc))
    if isinstance(out, int):
        return out
    if args.pcap and backend != "mininet":
        return _fail("--pcap: packets are captured on the mininet backend only")
    pcap = None if not args.pcap else (["ocs"] if args.pcap == "ocs" else [p for p in args.pcap.split(",") if p])
    got = _execute(sc, backend, out, args.force, exp, pcap)
    if isinstance(got, int):
        return got
    report.write(got, out, sc.to_yaml())
    report.print_summary(got)
    Console().print(f"results: {out}/result.json, steps.csv, timeline.png")
    if pcap:
        return _pcap_report(out)
    return 0


def _pcap_report(run_dir: Path) -> int:
    """Analyse the capture of ``run_dir`` (:mod:`emulation.pcap`): ``pcap.json``, ``pcap.png``
    and a summary; the exit status."""
    from emulation import pcap

    try:
        rep = pcap.analyse(run_dir, run_dir / "pcap.png")
    except pcap.PcapError as e:
        return _fail(str(e))
    (run_dir / "pcap.json").write_text(json.dumps(rep, indent=1))
    con = Console()
    for w, p in zip(rep["dark_windows"], rep["probe_windows"]):
        wire = "-" if p["wire_s"] is None else (f"{p['wire_s'] * 1e3:.2f} ms ({p['wire_min_s'] * 1e3:.2f}-"
                                               f"{p['wire_max_s'] * 1e3:.2f} over {p['ports']} rewired ports, "
                                               f"+-{p['resolution_s'] * 1e3 / 2:.2f} ms)")
        con.print(f"dark window at {w['t_dark']:.3f}: requested {w['requested_s'] * 1e3:.2f} ms, controller "
                  f"{w['measured_s'] * 1e3:.2f} ms, wire (probes) {wire}"
                  f"{', agrees' if p['agrees'] else ', DISAGREES'} (frame time {rep['frame_s'] * 1e3:.2f} ms + 1 ms); "
                  f"{w['frames_in_dark']} data frames sent into it")
    t = rep["tcp"]
    con.print(f"TCP: {t['connections']} connections, {t['retransmissions']} retransmitted segments on the wire "
              f"(agents' TCP_INFO: {t['retransmissions_tcp_info']}), {t['dup_acks']} duplicate ACKs, largest "
              f"silence {t['largest_gap_s'] * 1e3:.1f} ms; per connection, the wire and TCP_INFO agree on "
              f"{t['connections'] - len(t['connections_disagreeing'])} of {t['connections']}"
              + (f" (not on {', '.join(t['connections_disagreeing'][:4])})" if t["connections_disagreeing"] else ""))
    con.print(f"capture: {run_dir}/pcap.json, pcap.png")
    return 0


def _execute(sc, backend: str, out: Path, force: bool, experiment=None, pcap: list[str] | None = None):
    """Run ``sc`` (resolved as ``experiment``, if given) on ``backend`` with a progress bar; the
    :class:`~emulation.results.ScenarioResult`, or an exit status after printing one line (the results directory is removed if this call created it and failed
    before anything was measured)."""
    from emulation import runner
    from emulation.emulator.controller_client import ControllerError
    from emulation.emulator.net import EmulationError, MachineBusy
    from emulation.flowsim import SimulationError

    created = not out.exists()
    console = Console(stderr=True)
    try:
        with progress_bar(backend) as progress:
            return runner.run(sc, backend, out, progress, force=force, experiment=experiment, pcap=pcap)
    except runner.BackendError as e:
        _cleanup(out, created)
        return _fail(str(e))
    except runner.HeadroomError as e:  # the rate the scenario names is wrong for this machine
        _cleanup(out, created)
        return _fail(str(e), 2)
    except SimulationError as e:
        _cleanup(out, created)
        return _fail(f"flow backend: {e}", 1)
    except MachineBusy as e:  # refused before anything was created
        _cleanup(out, created)
        return _fail(str(e))
    except (EmulationError, ControllerError) as e:
        partial = " and partial results (result.json, complete: false)" if (out / "result.json").exists() else ""
        return _fail(f"{e} (logs{partial} in {out})", 1)
    except KeyboardInterrupt:
        console.print(f"interrupted: emulation torn down (logs in {out})")
        return 130


def _compare(args) -> int:
    import datetime as dt

    from emulation import compare, report
    from emulation.results import ScenarioResult

    loaded = _load_experiment(args.file)
    if isinstance(loaded, int):
        return loaded
    sc, exp = loaded
    if args.max_error is not None and not 0 < args.max_error < float("inf"):  # NaN fails too
        return _fail(f"--max-error: must be a positive fraction, got {args.max_error}")
    packet = None
    if args.packet_result is not None:
        try:
            packet = ScenarioResult.from_json(json.loads(args.packet_result.read_text()))
        except (OSError, ValueError) as e:  # pydantic's ValidationError is a ValueError
            first = str(e).splitlines()
            return _fail(f"--packet-result: cannot read {args.packet_result}: {' '.join(first[:3])}")
        if packet.backend != "mininet" or packet.scenario != sc.name:
            return _fail(f"--packet-result: {args.packet_result} is not a mininet result of scenario {sc.name}")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = _fresh_out(args.out or Path("runs") / f"{sc.name}-compare-{stamp}")
    if isinstance(out, int):
        return out
    created = not out.exists()
    flow = _execute(sc, "flow", out / "flow", False, exp)
    if isinstance(flow, int):
        _cleanup(out, created)
        return flow
    if packet is None:
        packet = _execute(sc, "mininet", out / "mininet", args.force)
        if isinstance(packet, int):
            if not (out / "mininet").exists():
                _cleanup(out, created)
            return packet
        report.write(packet, out / "mininet", sc.to_yaml())
    report.write(flow, out / "flow", sc.to_yaml())
    try:
        cmp = compare.compare(packet, flow)
    except compare.CompareError as e:
        _cleanup(out, created)
        return _fail(f"--packet-result: {e}")
    compare.write(cmp, out)
    compare.print_compare(cmp, steps=not args.quiet_steps)
    Console().print(f"results: {out}/compare.json, compare.png, flow/, mininet/")
    if args.max_error is not None and cmp.max_abs_error > args.max_error:
        print(f"ocslab: completion-time error {cmp.max_abs_error:.1%} exceeds --max-error {args.max_error:.1%}",
              file=sys.stderr)
        return 1
    return 0


def _is_wan(path: Path) -> bool:
    """True if ``path`` is a readable YAML mapping with a ``wan:`` section (a WAN scenario)."""
    return _has_section(path, "wan")


def _has_section(path: Path, section: str) -> bool:
    """True if ``path`` is a readable YAML mapping with a top-level ``section``."""
    from emulation.scenario import read_yaml

    try:
        return section in read_yaml(path)
    except ScenarioError:
        return False  # the collective loader reports what is wrong with the file


def _load(path: Path):
    """The scenario at ``path``, or exit status 2 after one line naming the bad field."""
    got = _load_experiment(path)
    return got if isinstance(got, int) else got[0]


def _load_experiment(path: Path):
    """``(scenario, experiment)`` of ``path`` (:func:`emulation.scenario.load_experiment`), or
    exit status 2 after one line naming the bad field."""
    try:
        return load_experiment(path)
    except ScenarioError as e:
        return _fail(str(e))


@contextlib.contextmanager
def progress_bar(label: str, total: int = 1):
    """A transient progress bar on stderr; yields ``progress(text, done, total)`` that shows
    ``label: text`` at ``done`` of ``total``."""
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)

        def progress(text: str, done: int, total: int) -> None:
            bar.update(task, description=f"{label}: {text}", completed=done, total=total)

        yield progress


def packet_job(out: Path, label: str, work, total: int = 1):
    """Run ``work(progress)`` (an emulation writing into ``out``) under :func:`progress_bar`.

    :returns: ``(result, None)``, or ``(None, exit status)`` after one line: 2 when the run was
        refused before anything was measured (another emulation holds the machine, or a
        ``ValueError`` about the input; ``out`` is removed if this call created it), 1 when the
        emulation failed (its logs stay in ``out``), 130 on Ctrl-C.
    """
    from emulation.emulator.net import EmulationError, MachineBusy

    created = not out.exists()
    try:
        with progress_bar(label, total) as progress:
            return work(progress), None
    except (MachineBusy, ValueError) as e:
        _cleanup(out, created)
        return None, _fail(str(e))
    except EmulationError as e:
        return None, _fail(f"{e} (logs in {out})", 1)
    except KeyboardInterrupt:
        Console(stderr=True).print(f"interrupted: emulation torn down (logs in {out})")
        return None, 130


def packet_scenario(sc, out: Path | None, label: str, run, write, show, files: str, total: int = 1) -> int:
    """A scenario's packet job from the command line: a fresh results directory (``out``, or
    ``runs/NAME-UTC time``), ``run(sc, out, progress)`` under :func:`packet_job`, then
    ``write(result, out, scenario YAML)``, ``show(result)`` and a line naming ``files``.

    :returns: the exit status (0, or :func:`packet_job`'s 1, 2 or 130).
    """
    import datetime as dt

    import yaml

    out = _fresh_out(out or Path("runs") / f"{sc.name}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}")
    if isinstance(out, int):
        return out
    res, status = packet_job(out, label, lambda progress: run(sc, out, progress), total)
    if status is not None:
        return status
    write(res, out, yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False))
    show(res)
    Console().print(f"results: {out}/result.json, {files}")
    return 0


def _fresh_out(out: Path) -> Path | int:
    """``out`` if it is absent or empty, else exit status 2 after one line."""
    if out.exists() and any(out.iterdir()):
        return _fail(f"--out: {out} exists and is not empty")
    return out


def _cleanup(out: Path, created: bool) -> None:
    """Remove a results directory this invocation created and did not finish."""
    if created and out.exists():
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
