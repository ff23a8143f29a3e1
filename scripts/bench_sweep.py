#!/usr/bin/env python3
"""The PCCL reproduction's sweep (scripts/reproduce_pccl.py) on 1 and on N local workers
(emulation.parallel, engine ``processes`` or ``dask``): the same rows, and the wall-time ratio.

Usage: ``.venv/bin/python scripts/bench_sweep.py [--gpus 32] [--workers 2] [--engine processes|dask]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from reproduce_pccl import R_US, SIZES, sweep  # noqa: E402

from emulation.planners import CostModel  # noqa: E402
from emulation.sweep import parse_sizes  # noqa: E402


def parser() -> argparse.ArgumentParser:
    """This script's argument parser (the docs' command lines are checked against it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--engine", choices=("processes", "dask"), default="processes")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    args = parser().parse_args(argv)
    sizes, rs = parse_sizes(SIZES), [r * 1e-6 for r in R_US]
    algorithms, model = ["ring", "rhd", "rd", "direct"], CostModel(alpha_s=1e-6, delta_s=0.5e-6)
    walls, rows = {}, {}
    for workers in (1, args.workers):
        t0 = time.monotonic()
        rows[workers] = sweep(args.gpus, sizes, rs, algorithms, model, 400.0, args.engine, workers)
        walls[workers] = time.monotonic() - t0
        print(f"{args.engine}, {workers} worker(s): {len(rows[workers])} rows of {2 * len(sizes) * len(algorithms)} "
              f"points at {args.gpus} GPUs in {walls[workers]:.1f} s", flush=True)
    same = rows[1] == rows[args.workers]
    print(f"same rows: {same}; wall time 1 / {args.workers} workers: {walls[1] / walls[args.workers]:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
