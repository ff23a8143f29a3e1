"""Soak test: does the suite pass every time, and how much do the emulation tests' numbers spread?

    .venv/bin/python scripts/soak.py --full 5 --emulation 20 [--tests EXPR] [--out runs/soak]

- ``--full N``: N times, a fresh ``git clone`` of this checkout's HEAD into ``OUT/clone-i`` and
  the README's test command in it (``make test``: installs everything, then the whole suite);
- ``--emulation K``: K times, the emulation tests alone (``pytest -m emulation``, or ``-k
  EXPR`` with ``--tests``) in this checkout.

Every run writes a JUnit report; the script prints, per test, how many runs it passed and its
mean wall time, and per full run its wall time and counts. The numbers the tests print (their
measured errors, ratios and times) are kept per run in ``OUT/soak.json`` (``stdout`` of each test
and run), to set statistical bounds from their spread. Needs root (the emulation tests) and
must not run beside another emulation (one emulation holds the machine at a time; a second is
refused).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # emulation.output, when run as a file


def junit_results(path: Path) -> dict[str, dict]:
    """``{test id: {"outcome": passed|failed|skipped, "time_s", "stdout"}}`` of a JUnit report."""
    out = {}
    if not path.exists():
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome = "passed"
        for tag in ("failure", "error"):
            if case.find(tag) is not None:
                outcome = "failed"
        if case.find("skipped") is not None:
            outcome = "skipped"
        sysout = case.find("system-out")
        out[tid] = {"outcome": outcome, "time_s": float(case.get("time", 0.0)),
                    "stdout": sysout.text if sysout is not None and sysout.text else ""}
    return out


def run_full(i: int, out: Path) -> dict:
    """One fresh clone, ``make test`` in it (the README's test command)."""
    clone = out / f"clone-{i}"
    if clone.exists():
        shutil.rmtree(clone)
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    report = out / f"full-{i}.xml"
    log = out / f"full-{i}.log"
    t0 = time.monotonic()
    with open(log, "w") as fh:
        # the clone makes its own .venv: an OCSLAB_VENV of this machine (a lab VM's) would get the
        # clone installed into it, and lose it when the clone is removed
        env = {k: v for k, v in os.environ.items() if k not in ("OCSLAB_VENV", "OCSLAB_RYU_VENV")}
        rc = subprocess.run(["make", "test", f"PYTEST_ARGS=--junitxml={report.resolve()} -o junit_logging=system-out"],
                            cwd=clone, stdout=fh, stderr=subprocess.STDOUT, env=env).returncode
    wall = time.monotonic() - t0
    shutil.rmtree(clone)  # its .venv holds PyTorch: a few GB each
    return {"kind": "full", "index": i, "rc": rc, "wall_s": wall, "log": str(log), "tests": junit_results(report)}


def run_emulation(i: int, out: Path, tests: str | None) -> dict:
    """The emulation tests alone in this checkout."""
    report = out / f"emulation-{i}.xml"
    args = [sys.executable, "-m", "pytest", "-q", "-m", "emulation", "tests", f"--junitxml={report}",
            "-o", "junit_logging=system-out", "-p", "no:cacheprovider"]
    if tests:
        args += ["-k", tests]
    t0 = time.monotonic()
    with open(out / f"emulation-{i}.log", "w") as fh:
        rc = subprocess.run(args, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT).returncode
    return {"kind": "emulation", "index": i, "rc": rc, "wall_s": time.monotonic() - t0,
            "tests": junit_results(report)}


def summary(runs: list[dict], console: Console) -> None:
    """Per-test pass counts and wall times; per-run outcome."""
    for kind in ("full", "emulation"):
        rs = [r for r in runs if r["kind"] == kind]
        if not rs:
            continue
        t = Table(title=f"{kind} runs")
        for c in ("run", "exit", "wall (s)", "passed", "failed", "skipped"):
            t.add_column(c, justify="right")
        for r in rs:
            oc = [v["outcome"] for v in r["tests"].values()]
            t.add_row(str(r["index"]), str(r["rc"]), f"{r['wall_s']:.0f}", str(oc.count("passed")),
                      str(oc.count("failed")), str(oc.count("skipped")))
        console.print(t)
        per: dict[str, list[dict]] = {}
        for r in rs:
            for tid, v in r["tests"].items():
                per.setdefault(tid, []).append(v)
        t = Table(title=f"{kind} runs: per test")
        for c in ("test", "passed", "mean (s)", "max (s)"):
            t.add_column(c, justify="left" if c == "test" else "right")
        for tid, vs in sorted(per.items()):
            if kind == "full" and all(v["outcome"] == "passed" for v in vs) and max(v["time_s"] for v in vs) < 5:
                continue  # the many quick unit tests: counted in the run table
            ok = sum(v["outcome"] == "passed" for v in vs)
            t.add_row(tid, f"{ok}/{len(vs)}", f"{sum(v['time_s'] for v in vs) / len(vs):.1f}",
                      f"{max(v['time_s'] for v in vs):.1f}")
        console.print(t)


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", type=int, default=0, metavar="N", help="fresh clones running make test")
    ap.add_argument("--emulation", type=int, default=0, metavar="K", help="runs of the emulation tests alone")
    ap.add_argument("--tests", default=None, metavar="EXPR", help="pytest -k expression for the emulation runs")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "soak")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    if args.full < 0 or args.emulation < 0 or not (args.full or args.emulation):
        print("soak: give --full N and/or --emulation K (positive counts)", file=sys.stderr)
        return 2
    from emulation.output import writing

    with writing(args.out):
        args.out.mkdir(parents=True, exist_ok=True)
        # Started as a background job of a script, this process has SIGINT ignored, and so would every
        # test run it starts (an ignored signal stays ignored across exec): give them the default.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        console = Console()
        runs: list[dict] = []
        for i in range(args.full):
            r = run_full(i, args.out)
            runs.append(r)
            console.print(f"full {i}: exit {r['rc']}, {r['wall_s']:.0f} s")
            (args.out / "soak.json").write_text(json.dumps(runs, indent=1))
        for i in range(args.emulation):
            r = run_emulation(i, args.out, args.tests)
            runs.append(r)
            failed = [t for t, v in r["tests"].items() if v["outcome"] == "failed"]
            console.print(f"emulation {i}: exit {r['rc']}, {r['wall_s']:.0f} s" + (f", failed {failed}" if failed else ""))
            (args.out / "soak.json").write_text(json.dumps(runs, indent=1))
        summary(runs, console)
        return 0 if all(r["rc"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
