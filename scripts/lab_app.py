#!/usr/bin/env python3
"""Try your own controller app on a live emulated fabric: bring up the fabric of a scenario
file (its ``fabric:`` section) with the built-in controller apps and yours beside them, send
UDP from GPU to GPU for the pairs you name, print the controller's event log as it grows, and
tear everything down after ``--seconds``.

    .venv/bin/python scripts/lab_app.py experiments/lab.yaml --app controllers/examples/static_schedule.py \\
        --flood 0:2 --flood 1:3 --seconds 8

Run as root (Open vSwitch, Mininet). The floods' logs go to ``--out`` (default
``runs/lab-<time>``). Exit status 2 on bad arguments, 1 if the emulation fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


#: The flood each --flood SRC:DST runs on GPU SRC (argv: destination IP, seconds between
#: datagrams, duration, label): 1,200-byte UDP datagrams to the discard port, and one line a
#: second in its log (flood-SRC-DST.log) with what it has sent.
FLOOD = """
import socket, sys, time
dst, gap, seconds, label = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t0 = t = time.time()
end, report, sent, failed = t0 + seconds, t0 + 1.0, 0, 0
print(f"{label}: UDP to {dst}:9, 1200-byte datagrams every {gap * 1e3:.3f} ms for {seconds:g} s", flush=True)
while t < end:
    try:
        s.sendto(b"x" * 1200, (dst, 9))
        sent += 1
    except OSError:
        failed += 1
    t += gap
    if time.time() >= report:
        print(f"{label}: {time.time() - t0:.1f} s: {sent} datagrams sent ({sent * 1200} bytes), {failed} refused", flush=True)
        report += 1.0
    time.sleep(max(0.0, t - time.time()))
print(f"{label}: done: {sent} datagrams sent ({sent * 1200} bytes) in {time.time() - t0:.1f} s, {failed} refused", flush=True)
"""


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", type=Path, help="a scenario file; only its fabric is used")
    ap.add_argument("--app", action="append", default=[], help="your app's .py file (repeatable)")
    ap.add_argument("--flood", action="append", default=[], metavar="SRC:DST", help="UDP from GPU SRC to GPU DST")
    ap.add_argument("--mbps", type=float, default=5.0, help="rate of each flood, Mbit/s (default 5)")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the fabric stays up (default 10)")
    ap.add_argument("--out", type=Path, help="logs (default runs/lab-<time>)")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    a = parser().parse_args(argv)
    from emulation.scenario import ScenarioError, load_experiment

    try:
        _, exp = load_experiment(a.scenario)
    except ScenarioError as e:
        print(f"lab_app: {e}", file=sys.stderr)
        return 2
    from controllers.app_check import check_apps

    problem = check_apps(a.app)
    if problem:
        print(f"lab_app: --app: {problem}", file=sys.stderr)
        return 2
    try:
        floods = [tuple(int(x) for x in f.split(":")) for f in a.flood]
        if any(len(f) != 2 or not all(0 <= g < exp.fabric.gpus for g in f) or f[0] == f[1] for f in floods):
            raise ValueError
    except ValueError:
        print(f"lab_app: --flood: SRC:DST, two different GPUs of the {exp.fabric.gpus}", file=sys.stderr)
        return 2
    if not 0 < a.seconds <= 3600 or not 0 < a.mbps <= 100:
        print("lab_app: --seconds must be in (0, 3600] and --mbps in (0, 100]", file=sys.stderr)
        return 2
    from emulation import dataplane as dpn
    from emulation.emulator.net import EmulationError
    from emulation.emulator.session import PacketSession
    from emulation.scenario.schema import EmulationSpec

    out = a.out or ROOT / "runs" / f"lab-{dt.datetime.now():%Y%m%d-%H%M%S}"
    from emulation.output import writing

    with writing(out):
        gap = 1200 * 8 / (a.mbps * 1e6)
        try:
            with PacketSession(exp.fabric, out, EmulationSpec(link_mbps=20, apps=tuple(a.app), headroom="skip")) as s:
                emu = s.emu
                for s, d in floods:
                    emu.popen(s, [sys.executable, "-u", "-c", FLOOD, dpn.gpu_ip(d), str(gap), str(a.seconds),
                                  f"GPU {s} -> GPU {d}"], out / f"flood-{s}-{d}.log")
                seen, end = 0, time.monotonic() + a.seconds
                while time.monotonic() < end:
                    time.sleep(0.5)
                    for ev in emu.client.events(seen):
                        seen = ev["seq"] + 1
                        if ev["kind"] not in ("port-status",):
                            print(json.dumps(ev))
                print(f"circuits at the end: {json.dumps(emu.client.circuits().to_json())}")
        except EmulationError as e:
            print(f"lab_app: {e}", file=sys.stderr)
            return 1
        print(f"logs: {out}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
