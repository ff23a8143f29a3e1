"""``ocslab``: the command line.

- ``ocslab run FILE [--backend mininet] [--out DIR] [--force]``: run a scenario, write
  ``DIR/result.json``, ``steps.csv``, ``timeline.png``, print a summary table.
- ``ocslab schedule ALGORITHM --ranks N --bytes B [--json]``: show a workload's steps.

Bad input (scenario file, flag) prints one line and exits with status 2; a failure of the
emulation itself exits with status 1. Nothing is left half-created.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from emulation.scenario import ScenarioError, format_bytes, load_scenario, parse_bytes
from emulation.workloads import ALGORITHMS, build

BACKENDS = ("mininet",)


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
    s = sub.add_parser("schedule", help="print a workload's steps")
    s.add_argument("algorithm", help=f"one of: {', '.join(ALGORITHMS)}")
    s.add_argument("--ranks", type=int, required=True, help="number of ranks n")
    s.add_argument("--bytes", required=True, help="buffer size (e.g. 4096, 1MiB)")
    s.add_argument("--json", action="store_true", help="print JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.cmd == "schedule":
        return _schedule(args)
    return _run(args)


def _fail(msg: str, code: int = 2) -> int:
    print(f"ocslab: {msg}", file=sys.stderr)
    return code


def _schedule(args) -> int:
    if args.algorithm not in ALGORITHMS:
        return _fail(f"algorithm: unknown {args.algorithm!r} (known: {', '.join(ALGORITHMS)})")
    try:
        nbytes = parse_bytes(args.bytes)
        w = build(args.algorithm, args.ranks, nbytes)
    except ValueError as e:
        return _fail(f"--ranks/--bytes: {e}")
    if args.json:
        d = w.to_json()
        print(json.dumps({"algorithm": d["algorithm"], "ranks": d["ranks"], "bytes": d["bytes"],
                          "collective": d["collective"], "chunks": d["chunks"], "steps": d["steps"]}))
        return 0
    t = Table(title=f"{w.collective} {w.algorithm}: {w.ranks} ranks, {format_bytes(w.bytes)}, {len(w.steps)} steps")
    for c in ("step", "phase", "transfers (src->dst chunk+n: bytes)"):
        t.add_column(c)
    for i, st in enumerate(w.steps):
        txt = ", ".join(f"{x.src}->{x.dst} c{x.chunk}+{x.nchunks}: {x.bytes}" for x in st.transfers[:6])
        if len(st.transfers) > 6:
            txt += f", ... ({len(st.transfers)} in all)"
        t.add_row(str(i), st.phase, txt)
    Console().print(t)
    return 0


def _run(args) -> int:
    from emulation import report, runner

    try:
        sc = load_scenario(args.file)
    except ScenarioError as e:
        return _fail(str(e))
    backend = args.backend or sc.backend
    if backend not in BACKENDS:
        return _fail(f"{args.file}: backend: {backend!r} is not available (available: {', '.join(BACKENDS)})")
    out = args.out or runner.default_out_dir(sc)
    if out.exists() and any(out.iterdir()):
        return _fail(f"--out: {out} exists and is not empty")
    created = not out.exists()
    console = Console(stderr=True)
    from emulation.emulator.controller_client import ControllerError
    from emulation.emulator.net import EmulationError

    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                      TimeElapsedColumn(), console=console, transient=True) as bar:
            task = bar.add_task("starting", total=1)

            def progress(label: str, done: int, total: int) -> None:
                bar.update(task, description=label, completed=done, total=total)

            result = runner.run_mininet(sc, out, progress, force=args.force)
    except runner.HeadroomError as e:
        _cleanup(out, created)
        return _fail(str(e), 1)
    except (EmulationError, ControllerError) as e:
        return _fail(f"{e} (logs in {out})", 1)
    except KeyboardInterrupt:
        console.print(f"interrupted: emulation torn down (logs in {out})")
        return 130
    report.write(result, out, sc.to_yaml())
    report.print_summary(result)
    Console().print(f"results: {out}/result.json, steps.csv, timeline.png")
    return 0


def _cleanup(out: Path, created: bool) -> None:
    """Remove a results directory this invocation created and did not finish."""
    if created and out.exists():
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
