"""``all_reduce_perf`` for the gloo backend: AllReduce time, algbw and busbw over a size sweep.

Run by :func:`emulation.torchjob.launch.run_torch` on every GPU host::

    python -m emulation.torchjob.allreduce_perf --sizes 65536,1048576 --iters 5 --warmup 1 --out R.json

Mirrors nccl-tests' ``all_reduce_perf`` (float32 sum, in place): per size, ``warmup``
untimed iterations, a barrier, then ``iters`` timed ones; time = the mean per iteration of the
slowest rank (ranks exchange their times with one small ``all_reduce(MAX)`` after timing);
``algbw = size / time`` and ``busbw = algbw x 2 (n - 1) / n``. Rank 0 writes ``--out`` as JSON
``{"world": n, "backend": "gloo", "torch": version, "results": [{"bytes", "time_s",
"algbw_gbps", "busbw_gbps", "correct"}]}``; ``correct`` checks that every element equals the
sum of the ranks' contributions.

gloo's algorithm (PyTorch's ``ProcessGroupGloo`` on CPU tensors calls ``gloo::allreduce`` with
its default ring algorithm, ``gloo/allreduce.cc``): a ring reduce-scatter followed by a ring
allgather in rank order, each rank sending to rank - 1 and receiving from rank + 1, n - 1 chunk
steps each of ``size / n`` bytes (cut into at least two segments per chunk, two in flight,
pipelined with the reductions) -- the ``ring`` workload of
:mod:`emulation.workloads.allreduce`, against which the flow backend predicts it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc); exit status 0 on success."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", required=True, help="comma-separated buffer sizes in bytes (multiples of 4)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        x = torch.empty(size // 4, dtype=torch.float32)
        for _ in range(args.warmup):
            x.fill_(rank + 1)
            dist.all_reduce(x)
        dist.barrier()
        elapsed = 0.0
        correct = True
        for _ in range(args.iters):
            x.fill_(rank + 1)
            t0 = time.perf_counter()
            dist.all_reduce(x)
            elapsed += time.perf_counter() - t0
            correct &= bool(torch.all(x == n * (n + 1) / 2))
        worst = torch.tensor([elapsed / args.iters])
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        t = float(worst)
        algbw = size * 8 / t / 1e9
        results.append({"bytes": size, "time_s": t, "algbw_gbps": algbw,
                        "busbw_gbps": algbw * 2 * (n - 1) / n, "correct": correct})
    if rank == 0:
        with open(args.out, "w") as fh:
            json.dump({"world": n, "backend": "gloo", "torch": torch.__version__, "results": results}, fh)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
