"""``ocslab``: the command line.

Commands on a scenario file (every kind: ``ocslab kinds`` lists them, :mod:`emulation.kinds`):

- ``ocslab run FILE [--backend packet|flow] [--out DIR] [--force] [--controller os-ken|ryu]
  [--ofctl-rest [PORT]] [--app PATH ...] [--pcap [PORTS]]``: run the scenario, write
  ``DIR/result.json`` (the result envelope, :mod:`emulation.envelope`), ``scenario.yaml`` and the
  kind's tables and plots, print its summary.
- ``ocslab compare FILE`` (collective): both backends side by side; ``ocslab plan FILE``
  (collective): each run's plan; ``ocslab te FILE`` (wan): one matrix's TE solution;
  ``ocslab train FILE`` (training, rails): the scenario's torch job on the packet backend;
  ``ocslab up FILE`` (collective): the fabric at Mininet's prompt (:mod:`emulation.collective.console`).

Other commands: ``ocslab workload`` (a workload's steps), ``ocslab torch allreduce-perf``
(gloo's AllReduce on emulated GPUs), ``ocslab pcap DIR`` (analyse a ``--pcap`` run),
``ocslab reproduce`` (every paper reproduction, one verdict table, :mod:`emulation.reproduce`),
``ocslab schema KIND`` (the JSON Schema of a kind's ``result.json``, or of its scenario file),
``ocslab kinds``, ``ocslab clean``.

A file is read once; its kind decides the path. Exit statuses are the same for every command
that runs something (:mod:`emulation.output`): 0 every check held, 1 it ran but a check failed
(named in ``result.json``'s ``failed_checks`` and on one line of stderr) or a reproduction
missed its paper, or the run failed (its logs kept), 2 bad input or refused before anything was
measured (one line, nothing left half-created), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from emulation import __version__, kinds
from emulation.backends import BACKENDS, canonical
from emulation.output import EXIT_INTERRUPTED, Refused, configure_logging, fail, guarded, phase, results_dir
from emulation.reproduce.suite import SCRIPTS
from emulation.scenario import MAX_GPUS, ScenarioError
from emulation.units import format_bytes, parse_bytes
from emulation.workloads import ALGORITHMS, build, known
from emulation.workloads.stragglar import describe_step, lower_bound_rounds

#: The paper reproductions ``ocslab reproduce`` runs (``scripts/reproduce_<name>.py``).
REPRODUCTIONS = tuple(SCRIPTS)
#: ``ocslab run``'s packet options, by the name a kind declares in :attr:`emulation.kinds.Kind.options`.
RUN_OPTIONS = {"controller": "--controller", "apps": "--app", "pcap": "--pcap", "force": "--force"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"{self.prog}: {message}\n")


def _controller_flags(p: argparse.ArgumentParser) -> None:
    """The packet backend's flags of a command that starts a fabric's controller: ``--force``,
    ``--controller``, ``--ofctl-rest [PORT]``, ``--app PATH``."""
    p.add_argument("--force", action="store_true", help="go on even if the headroom probe says the CPU is the bottleneck")
    p.add_argument("--controller", choices=("os-ken", "ryu"),
                   help="the framework the controller apps run on (default: the scenario's emulation.controller)")
    p.add_argument("--ofctl-rest", nargs="?", const=8080, type=int, metavar="PORT",
                   help="load Ryu's stock ofctl_rest beside the controller apps, its REST API on 127.0.0.1:PORT "
                        "(default 8080; 0: any free port); needs --controller ryu")
    p.add_argument("--app", action="append", default=[], metavar="PATH",
                   help="your own controller app (.py), loaded beside the built-in ones (repeatable)")


def _override_flags(p: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE`` and ``--sizes``: fields of the scenario file changed for this command."""
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="set_fields",
                   help="change a field of the scenario for this command, by its dotted name "
                        "(e.g. fabric.reconfiguration_delay_s=1e-5; repeatable); checked as in the file")
    p.add_argument("--sizes", metavar="SIZES", help="collective scenarios: these comma-separated buffer sizes instead "
                   "of the file's (e.g. 1MiB,25MiB)")


def overrides(set_fields: list[str], sizes: str | None) -> dict:
    """The changes ``--set KEY=VALUE ...`` and ``--sizes A,B`` ask for: ``{dotted key: value}``,
    each VALUE read as a number when it is one, else as YAML (``true``, ``[1, 2]``, ``ring``).

    :raises ScenarioError: ``--set X`` without ``=`` or without a key, or an empty ``--sizes``."""
    import yaml

    changes: dict = {}
    for item in set_fields:
        key, eq, text = item.partition("=")
        if not eq or not key.strip() or not all(p.isidentifier() for p in key.strip().split(".")):
            raise ScenarioError(f"--set {item}: KEY=VALUE, KEY a field's dotted name (e.g. fabric.gpus=16)")
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                value = yaml.safe_load(text) if text.strip() else ""
        changes[key.strip()] = value
    if sizes is not None:
        listed = [x.strip() for x in sizes.split(",") if x.strip()]
        if not listed:
            raise ScenarioError(f"--sizes {sizes!r}: give sizes separated by commas (e.g. 1MiB,25MiB)")
        changes["sizes"] = listed
    return changes


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``ocslab`` (every command and flag; the CLI reference is made from it)."""
    p = _Parser(prog="ocslab", description="Emulate reconfigurable (optical circuit switched) ML fabrics.")
    p.add_argument("--version", action="version", version=f"ocslab {__version__}")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="say what the backends do (-v: each phase; -vv: every detail), on stderr")
    p.add_argument("-q", "--quiet", action="store_true", help="errors only: no tables, progress bars, warnings or phases (the results line stays)")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    # -q and -v also after the command (`ocslab run x.yaml -q`), without overriding them when absent
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    after.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    def command(name: str, **kwargs) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[after], **kwargs)

    r = command("run", help="run a scenario file (any kind)")
    r.add_argument("file", type=Path, help="scenario YAML (e.g. experiments/demo.yaml)")
    r.add_argument("--backend", type=canonical, choices=BACKENDS, help="override the scenario's backend")
    r.add_argument("--out", type=Path, help="results directory (default runs/<scenario>-<time>)")
    _override_flags(r)
    _controller_flags(r)
    r.add_argument("--pcap", nargs="?", const="ocs", metavar="PORTS",
                   help="capture packets during the runs: every OCS input port, or these comma-separated "
                        "interfaces; analysed into pcap.json and pcap.png (ocslab pcap DIR)")
    c = command("compare", help="run a collective scenario on both backends and compare them")
    c.add_argument("file", type=Path, help="scenario YAML")
    c.add_argument("--out", type=Path, help="results directory (default runs/<scenario>-compare-<time>)")
    c.add_argument("--packet-result", type=Path, help="reuse this packet result.json instead of running the emulator")
    c.add_argument("--max-error", type=float, help="exit 1 if any completion-time error exceeds this fraction")
    c.add_argument("--force", action="store_true", help="run even if the headroom probe says the CPU is the bottleneck")
    c.add_argument("--quiet-steps", action="store_true", help="print the per-run table only")
    _override_flags(c)
    pl = command("plan", help="print each run's plan of a collective scenario (keep/reconfigure per step)")
    pl.add_argument("file", type=Path, help="scenario YAML")
    pl.add_argument("--size", help="buffer size (default: the scenario's first size)")
    pl.add_argument("--json", action="store_true", help="print the plans as JSON")
    _override_flags(pl)
    te = command("te", help="solve the TE of one traffic matrix of a WAN scenario (nothing runs)")
    te.add_argument("file", type=Path, help="WAN scenario YAML (e.g. experiments/wan_b4.yaml)")
    te.add_argument("--tm", type=int, default=0, help="traffic matrix index (default 0)")
    te.add_argument("--json", action="store_true", help="print tunnels, splits and link utilisations as JSON")
    _override_flags(te)
    tr = command("train", help="run a training or rails scenario's torch job on the packet backend")
    tr.add_argument("file", type=Path, help="scenario YAML (e.g. experiments/lumion.yaml, experiments/rails_torch.yaml)")
    tr.add_argument("--out", type=Path, help="results directory (default runs/<scenario>-<time>)")
    tr.add_argument("--recovery", help="training scenarios: comma-separated subset of the recoveries to run")
    _override_flags(tr)
    u = command("up", help="build a collective scenario's fabric and open Mininet's prompt on it, with ocslab's "
                       "commands (circuits, reconfigure, allreduce, capture); exit tears it down")
    u.add_argument("file", type=Path, help="scenario YAML (e.g. experiments/demo.yaml)")
    u.add_argument("--out", type=Path, help="session directory: logs, captures, result.json of its collectives "
                   "(default runs/<scenario>-up-<time>)")
    _controller_flags(u)
    _override_flags(u)
    s = command("workload", help="print a workload's steps (a collective's transfers, step by step)")
    s.add_argument("algorithm", help="an algorithm of the collective (allreduce: "
                   f"{known('allreduce')}), or COLLECTIVE-ALGORITHM (e.g. alltoall-rotor)")
    s.add_argument("--collective", default="allreduce", help=f"one of: {', '.join(ALGORITHMS)} (default allreduce)")
    s.add_argument("--ranks", type=int, required=True, help="number of ranks n")
    s.add_argument("--bytes", required=True, help="buffer size (e.g. 4096, 1MiB)")
    s.add_argument("--json", action="store_true", help="print JSON")
    t = command("torch", help="run a real torch.distributed (gloo) program on emulated GPUs")
    t.add_argument("program", choices=("allreduce-perf",), help="allreduce-perf: gloo AllReduce busbw vs the flow backend")
    t.add_argument("--gpus", type=int, default=8, help="emulated GPUs in a ring of circuits (default 8)")
    t.add_argument("--link-mbps", type=float, default=20.0, help="emulated port rate, Mbit/s (default 20)")
    t.add_argument("--sizes", default="8KiB,256KiB,1MiB,4MiB",
                   help="ascending buffer sizes; the first fits alpha (default 8KiB,256KiB,1MiB,4MiB)")
    t.add_argument("--iters", type=int, default=3, help="timed iterations per size (default 3)")
    t.add_argument("--out", type=Path, help="results directory (default runs/torch-allreduce-perf-<time>)")
    pc = command("pcap", help="analyse the packets captured by ocslab run --pcap (dark windows, TCP)")
    pc.add_argument("dir", type=Path, help="the run's results directory")
    fb = command("fabric", help="write a collective scenario's fabric and initial circuits as the "
                        "controller's --ocslab-fabric JSON, and print the controller and mn commands (nothing runs)")
    fb.add_argument("file", type=Path, help="scenario YAML (e.g. experiments/demo.yaml)")
    fb.add_argument("-o", "--out", type=Path, metavar="FILE",
                    help="the fabric JSON to write (default runs/<scenario>-fabric.json); overwritten if it exists")
    _override_flags(fb)
    sc = command("schema", help="print the JSON Schema of a kind's result.json (or of its scenario file)")
    sc.add_argument("kind", choices=kinds.NAMES, help="the scenario kind")
    sc.add_argument("--scenario", action="store_true", help="the scenario file's schema instead of the result's")
    rp = command("reproduce", help="run every paper reproduction (flow backend; --packet adds the packet "
                        "parts) and print one table: each headline, the paper's figure, ours, the tolerance, held or "
                        "missed")
    rp.add_argument("--packet", action="store_true",
                    help="add the packet parts (root, Open vSwitch, torch; one emulation at a time, about an hour)")
    rp.add_argument("--quick", action="store_true",
                    help="each reproduction's quick form: smaller sweeps that still measure every headline")
    rp.add_argument("--only", nargs="+", metavar="NAME", help=f"these reproductions only (of: {', '.join(REPRODUCTIONS)})")
    rp.add_argument("--jobs", type=int, help="reproductions run at once without --packet (default: the cores)")
    rp.add_argument("--out", type=Path, help="results directory (default runs/reproduce-<time>)")
    command("kinds", help="list the scenario kinds, their backends and the commands each answers")
    command("clean", help="remove what killed ocslab runs left behind (only ours: ocl- bridges and "
                   "interfaces, marked processes, run records) and say what was removed")
    dr = command("doctor", help="what this machine (or each lab server) can emulate with packets: Open vSwitch, "
                        "its datapaths, shaping, controllers, and a short calibration into GPU counts; every problem "
                        "with its fix")
    dr.add_argument("--server", nargs="+", default=[], metavar="NAME", help="also check these lab servers over ssh "
                    "(ocslab servers up)")
    dr.add_argument("--no-probe", action="store_true", help="skip the calibration (about 20 s)")
    dr.add_argument("--out", type=Path, help="the calibration's logs (default runs/doctor-<time>)")
    sv = command("servers", help="lab servers on this machine for a fabric spread over servers "
                        "(emulation.servers; docs/cluster.md): up NAME..., down, status")
    sv.add_argument("action", choices=["up", "down", "status"])
    sv.add_argument("names", nargs="*", help="server names for up (1-8 lowercase letters and digits)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (130 and one line on Ctrl-C, wherever it falls)."""
    args = parser().parse_args(argv)
    configure_logging(args.verbose, args.quiet)
    try:
        if args.cmd in kinds.FILE_COMMANDS:
            return _file_command(args)
        return {"workload": _workload, "torch": _torch, "clean": lambda a: _clean(), "schema": _schema,
                "kinds": _kinds, "pcap": _pcap, "servers": _servers, "doctor": _doctor,
                "reproduce": _reproduce}[args.cmd](args)
    except KeyboardInterrupt:  # before a job's own handler (loading, validating) or after it
        return fail("interrupted", EXIT_INTERRUPTED)


def _load(args):
    """``(kind, scenario)`` of ``args.file`` with its ``--set`` and ``--sizes`` changes.

    :raises ScenarioError: the file, or a change, is refused (one line)."""
    with phase(f"loading and checking {args.file}"):
        kind, sc = kinds.load(args.file)
        changes = overrides(args.set_fields, args.sizes)
        if changes:
            if "sizes" in changes and "sizes" not in type(sc).model_fields:
                raise ScenarioError(f"--sizes: a {kind.name} scenario has no sizes (collective scenarios do)")
            sc = kinds.with_changes(sc, changes, f"{args.file} with {', '.join(f'--set {k}' if k != 'sizes' else '--sizes' for k in changes)}")
    return kind, sc


def _file_command(args) -> int:
    """A command on a scenario file: read it once, find its kind, go down its one path."""
    try:
        kind, sc = _load(args)
    except ScenarioError as e:
        return fail(str(e))
    if args.cmd == "run":
        return _run(kind, sc, args)
    handler = kind.commands.get(args.cmd)
    if handler is None:
        return fail(kinds.refuse_command(kind, args.cmd))
    return guarded(None, lambda: handler(sc, args, args.file))


def _run(kind: kinds.Kind, sc, args) -> int:
    """``ocslab run`` of a scenario of any kind (module doc)."""
    given = {"controller": args.controller, "apps": args.app, "pcap": args.pcap, "force": args.force}
    for opt, value in given.items():
        if value and opt not in kind.options:
            takers = [n for n in kinds.NAMES if opt in kinds.get(n).options]
            return fail(f"{RUN_OPTIONS[opt]}: a {kind.name} scenario takes no {RUN_OPTIONS[opt]} "
                        f"(it applies to {', '.join(takers)} scenarios)")
    backend = args.backend or kind.backend_of(sc)
    if kind.backend_refusal(backend):
        return fail(kind.backend_refusal(backend))
    from controllers.app_check import check_apps

    problem = check_apps(args.app)
    if problem:
        return fail(f"--app: {problem}")
    if args.ofctl_rest is not None:  # reaches the controller's launch (emulation.emulator.net.OFCTL_REST_ENV)
        if "apps" not in kind.options or backend != "packet":
            return fail("--ofctl-rest: only a collective scenario on the packet backend starts the fabric's controller")
        os.environ["OCSLAB_OFCTL_REST"] = str(args.ofctl_rest)
    pcap = None if not args.pcap else (["ocs"] if args.pcap == "ocs" else [p for p in args.pcap.split(",") if p])
    return kinds.command_job(
        kind, sc, args.out, f"{kind.name} on {backend}", 1,
        lambda out, progress: kind.run_envelope(kinds.RunRequest(
            sc, backend, out, progress, force=args.force, controller=args.controller, apps=tuple(args.app), pcap=pcap)),
        after=_run_capture_checks if pcap else None)


def _reproduce(args) -> int:
    """``ocslab reproduce``: every paper reproduction and one verdict table
    (:mod:`emulation.reproduce.suite`); exit 1 when a headline missed."""
    from emulation.reproduce.suite import SuiteError, reproduce

    bad = [n for n in args.only or () if n not in REPRODUCTIONS]
    if bad:
        return fail(f"--only: unknown reproduction {bad[0]!r} (known: {', '.join(REPRODUCTIONS)})")
    if args.jobs is not None and args.jobs < 1:
        return fail(f"--jobs: must be at least 1, got {args.jobs}")
    if args.packet and os.geteuid() != 0:
        return fail("--packet: the packet parts need root (run with sudo)")
    try:
        out = results_dir(args.out, "reproduce")
        return guarded(out, lambda: reproduce(out, args.packet, args.quick, args.only, args.jobs))
    except (Refused, SuiteError) as e:
        return fail(str(e))


def _schema(args) -> int:
    """``ocslab schema KIND [--scenario]``: a JSON Schema on stdout."""
    from emulation.envelope import ResultEnvelope

    kind = kinds.get(args.kind)
    schema = (kind.scenario.model_json_schema() if args.scenario
              else ResultEnvelope.json_schema(kind.result, kind.name))
    print(json.dumps(schema, indent=1))
    return 0


def _kinds(args) -> int:
    """``ocslab kinds``: one row per kind."""
    t = Table(title="scenario kinds")
    for c in ("kind", "marked by", "backends", "commands", "run options"):
        t.add_column(c)
    for name, sections, _ in kinds.REGISTRY:
        k = kinds.get(name)
        t.add_row(name, ", ".join(f"{s}:" for s in sections) or "(default)", ", ".join(k.backends),
                  ", ".join(["run", *k.commands]), ", ".join(RUN_OPTIONS[o] for o in RUN_OPTIONS if o in k.options) or "-")
    Console().print(t)
    Console().print(_experiments_table())
    return 0


def _experiments_table() -> Table:
    """The shipped scenarios (``experiments/*.yaml``): each one's kind, and whether it runs
    without root (on the flow backend; the packet backend needs root)."""
    from emulation.scenario.load import read_yaml

    t = Table(title="experiments/ (the packet backend needs root; the flow backend does not)")
    t.add_column("file", no_wrap=True)
    t.add_column("kind")
    t.add_column("without root")
    root = Path(__file__).resolve().parents[1] / "experiments"
    for path in sorted(root.glob("*.yaml")):
        try:
            name = kinds.kind_of(read_yaml(path), path)
        except ScenarioError:
            continue
        flow = "flow" in kinds.get(name).backends
        t.add_row(f"experiments/{path.name}", name, "yes: --backend flow" if flow else "no: packets only")
    return t


def _clean() -> int:
    from emulation.emulator import registry

    if os.geteuid() != 0:
        return fail("clean: needs root (run with sudo)")
    try:
        removed = registry.clean()
    except registry.Busy as e:
        return fail(f"clean: {e}")
    for line in removed:
        print(f"removed {line}")
    print(f"clean: {len(removed)} thing(s) removed" if removed else "clean: nothing of ocslab's was left behind")
    return 0


def _doctor(args) -> int:
    """``ocslab doctor`` (:mod:`emulation.emulator.doctor`): the findings, one line each, then
    the calibration's GPU counts; exit 1 when a finding blocks packet runs or no rate passes."""
    from emulation.emulator import doctor, server_lab

    known = {s.name for s in server_lab.lab_servers()}
    for name in args.server:
        if name not in known:
            return fail(f"--server {name}: not a lab server ({', '.join(sorted(known)) or 'none is up'}; "
                        f"ocslab servers up {name})")
    out = None
    if not args.no_probe:
        try:
            out = results_dir(args.out, "doctor")
        except Refused as e:
            return fail(str(e))
    findings = doctor.machine_findings() + [f for name in args.server for f in doctor.server_findings(name)]
    for f in findings:
        print(("PROBLEM " if f.fix else "        ") + f.line())
    blocked = [f.topic for f in findings if f.blocking]
    if blocked:
        print(f"doctor: the packet backend cannot run here ({', '.join(blocked)}); the flow backend can")
        return 1
    if out is None:
        print("doctor: nothing blocks the packet backend (calibration skipped)")
        return 0
    phase(f"calibrating a {doctor.PROBE_GPUS}-GPU x {doctor.PROBE_PORTS}-port OCS star (about 20 s)")
    return guarded(out, lambda: _show_capacity(doctor.capacity(out)))


def _show_capacity(cap: dict) -> int:
    probes = ", ".join(f"{p['link_mbps']:g} Mbit/s {p['efficiency']:.1%}" for p in cap["probes"])
    print(f"        calibration: {probes} of link rate (target {cap['target']:.0%}); this machine forwards "
          f"{cap['faithful_mbps']:g} Mbit/s of link load faithfully"
          f"{'' if cap['ceiling'] else ' (at least: the first rate passed)'}")
    counts = ", ".join(f"{n} at {r:g}" + (" (memory)" if cap["bound"][r] == "memory" else "")
                       for r, n in cap["gpus"].items())
    print(f"        capacity: GPUs with {cap['ports']} ports each, at Mbit/s per link: {counts}")
    print("doctor: nothing blocks the packet backend")
    return 0


def _servers(args) -> int:
    """``ocslab servers up NAME... | down | status`` (:mod:`emulation.emulator.server_lab`)."""
    from emulation.emulator import server_lab

    if os.geteuid() != 0:
        return fail("servers: needs root (run with sudo)")
    if args.action == "up":
        if not args.names:
            return fail("servers up: name at least one server (e.g. ocslab servers up a b)")
        try:
            made = server_lab.lab_up(args.names)
        except server_lab.LabError as e:
            return fail(str(e))
        for s in made:
            print(f"server {s.name}: {s.ip} (namespace {s.netns}; ocslab at {server_lab.server_root(s)}, clock "
                  f"+{server_lab.clock_offset_s(s)} s), ssh -F {server_lab.ssh_config()} {s.name}")
        print(f"servers: {len(made)} up; name them in a scenario: emulation: {{servers: [{', '.join(args.names)}]}}")
        return 0
    if args.names:
        return fail(f"servers {args.action}: takes no names")
    if args.action == "down":
        for line in server_lab.lab_down():
            print(f"removed {line}")
        print("servers: the lab is down")
        return 0
    servers = server_lab.lab_servers()
    for s in servers:
        print(f"server {s.name}: {s.ip} {'up' if s.alive() else 'DOWN (ocslab servers up ' + s.name + ')'}")
    print(f"servers: {len(servers)} in the lab" if servers else "servers: no lab (ocslab servers up a b)")
    return 0


def _torch(args) -> int:
    from emulation.emulator.limits import check_packet_size
    from emulation.torchjob.launch import torch_missing
    from emulation.torchjob.perf import allreduce_perf

    if args.gpus < 3:
        return fail(f"--gpus: a ring of circuits needs at least 3 GPUs, got {args.gpus}")
    too_big = check_packet_size(args.gpus, 2, "--gpus")
    if too_big:
        return fail(too_big)
    if not 0 < args.link_mbps <= 1000:
        return fail(f"--link-mbps: must be in (0, 1000], got {args.link_mbps:g}")
    if args.iters < 1:
        return fail(f"--iters: must be at least 1, got {args.iters}")
    try:
        sizes = [parse_bytes(x) for x in args.sizes.split(",")]
    except ValueError as e:
        return fail(f"--sizes: {e}")
    if len(sizes) < 2 or sizes != sorted(set(sizes)) or any(x % 4 or x < 4 * args.gpus for x in sizes):
        return fail(f"--sizes: need at least two ascending sizes, multiples of 4 bytes and of at least "
                     f"{4 * args.gpus} bytes, got {args.sizes}")
    try:
        out = results_dir(args.out, "torch-allreduce-perf")
    except Refused as e:
        return fail(str(e))
    if why := torch_missing():
        return fail(why)
    return guarded(out, lambda: _show_allreduce_perf(args, out, allreduce_perf(args.gpus, args.link_mbps, sizes,
                                                                                 args.iters, out)))


def _show_allreduce_perf(args, out: Path, res) -> int:
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
    from emulation.envelope import FailedCheck
    from emulation.output import verdict

    return verdict([FailedCheck(check="sum", where=format_bytes(r.bytes),
                                detail="gloo's AllReduce did not give every rank the sum of the ranks' buffers")
                    for r in res.rows if not r.correct])


def _workload(args) -> int:
    head, _, tail = args.algorithm.partition("-")
    if tail and head in ALGORITHMS:  # ``alltoall-rotor`` = ``rotor --collective alltoall``
        args.collective, args.algorithm = head, tail
    if args.collective not in ALGORITHMS:
        return fail(f"--collective: unknown {args.collective!r} (known: {', '.join(ALGORITHMS)})")
    if args.algorithm not in ALGORITHMS[args.collective]:
        return fail(f"algorithm: unknown {args.collective} algorithm {args.algorithm!r} "
                     f"(known: {known(args.collective)})")
    if not 2 <= args.ranks <= MAX_GPUS:
        return fail(f"--ranks: must be in [2, {MAX_GPUS}] (the largest fabric a scenario takes), got {args.ranks}")
    try:
        nbytes = parse_bytes(args.bytes)
        w = build(args.algorithm, args.ranks, nbytes, args.collective)
    except ValueError as e:
        return fail(f"--ranks/--bytes: {e}")
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


def _pcap(args) -> int:
    """``ocslab pcap DIR``: :func:`_pcap_report`; exit 0 when every check of the capture held,
    1 when one failed (:func:`emulation.pcap.capture_checks`), 2 for a directory without a
    readable capture, or a failure to write into ``DIR``."""
    from emulation import pcap
    from emulation.output import verdict

    def job() -> int:
        try:
            return verdict(_pcap_report(args.dir))
        except pcap.PcapError as e:
            return fail(str(e))

    return guarded(args.dir, job, flag="pcap DIR")


def _pcap_report(run_dir: Path) -> list:
    """Analyse the capture of ``run_dir`` (:mod:`emulation.pcap`): ``pcap.json``, ``pcap.png``
    and a summary; the checks that failed (:class:`~emulation.envelope.FailedCheck`).

    :raises emulation.pcap.PcapError: no capture, or one that cannot be read."""
    from emulation import pcap

    rep = pcap.analyse(run_dir, run_dir / "pcap.png")
    (run_dir / "pcap.json").write_text(json.dumps(rep.model_dump(), indent=1))
    con = Console()
    for line in pcap.summary_lines(rep):
        con.print(line, highlight=False)
    con.print(f"capture: {run_dir}/pcap.json, pcap.png")
    return rep.failed_checks


def _run_capture_checks(run_dir: Path) -> list:
    """After ``ocslab run --pcap``: :func:`_pcap_report`, an unreadable capture a failed check."""
    from emulation import pcap
    from emulation.envelope import FailedCheck

    try:
        return _pcap_report(run_dir)
    except pcap.PcapError as e:
        return [FailedCheck(check="capture", detail=str(e))]



if __name__ == "__main__":
    sys.exit(main())
