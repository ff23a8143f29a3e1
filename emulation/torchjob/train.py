"""Data-parallel training of a small MLP with ``torch.distributed`` (gloo), with checkpoints.

Run by the recovery supervisor (:mod:`emulation.torchjob.recovery`) on every GPU host::

    python -m emulation.torchjob.train --job JOB.json --dir RUN_DIR --launch L

``JOB.json`` holds the job (:class:`emulation.torchjob.recoveries.JobSpec` as JSON). The dataset
is generated, the same on every rank: ``samples`` points x ~ N(0, I) in ``features``
dimensions, labelled by a fixed random teacher network (seeded), so there is something to
learn. Step s takes global batch s of a seeded permutation per epoch; rank r trains on rows
``r::world`` of it (data parallelism). After the backward pass every rank's gradients and its
loss sum are flattened into one float32 vector and summed with **one** ``all_reduce`` (gloo's
ring, like :mod:`emulation.torchjob.allreduce_perf`), then averaged: every rank applies the
same SGD (momentum) update. Rank 0 saves a checkpoint (model, optimiser, step) every
``checkpoint_every`` steps into ``RUN_DIR/checkpoint.pt`` (written aside, then renamed), and
a launch that finds one resumes from it.

**Pause** (``--pause-after STEP --pause-fifo FIFO``): rank 0 blocks after logging step ``STEP``
until a line arrives on the FIFO, so that the supervisor injects a failure at that exact step
however long it takes to get there (the other ranks wait in the next all-reduce).

**Warm standby** (``--standby DIR``): the process imports torch and generates the dataset, writes
``DIR/ready-gG`` (G = ``OCSLAB_GPU``) and blocks on the FIFO ``DIR/assign-gG`` until the
supervisor writes ``{"rank", "world", "master_addr", "master_port", "launch"}`` into it; then it joins that launch like a process
started with those values. A restart then costs the rendezvous, not Python's and torch's start
(seconds on these machines). ``t_start`` is then when the assignment was seen.

Timestamps are CLOCK_MONOTONIC seconds (``time.monotonic``; shared by every namespace). Each
rank writes ``RUN_DIR/launch-L/rank-R.json``: ``{"rank", "gpu", "t_start" (process started),
"t_init" (process group formed), "t_group" (first barrier passed: the collective group is
re-formed), "resumed_from" (checkpoint step or -1)}``; rank 0 appends one JSON line per step
to ``RUN_DIR/steps.jsonl``: ``{"launch", "step", "t_start", "t_compute", "t_end", "loss",
"allreduce_s"}`` and ``{"checkpoint": step, "t"}`` lines.

Spec: data-parallel training of a small real model with per-step timing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def build_model(job: dict):
    """The MLP: ``features -> hidden (ReLU) x layers -> classes``, seeded with ``seed``."""
    import torch

    torch.manual_seed(job["seed"])
    dims = [job["features"]] + [job["hidden"]] * job["layers"]
    mods = []
    for a, b in zip(dims, dims[1:]):
        mods += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    mods.append(torch.nn.Linear(dims[-1], job["classes"]))
    return torch.nn.Sequential(*mods)


def dataset(job: dict):
    """``(x, y)``: ``(samples, features)`` float32 and ``(samples,)`` int64 class labels from a
    random teacher MLP (seed ``seed + 1``), the same on every rank."""
    import torch

    g = torch.Generator().manual_seed(job["seed"] + 1)
    x = torch.randn(job["samples"], job["features"], generator=g)
    w1 = torch.randn(job["features"], 64, generator=g) / job["features"] ** 0.5
    w2 = torch.randn(64, job["classes"], generator=g) / 8
    y = torch.tanh(x @ w1) @ w2
    return x, y.argmax(dim=1)


def batch_rows(job: dict, step: int, rank: int, world: int):
    """Indices of ``rank``'s rows of global batch ``step`` (a seeded permutation per epoch)."""
    import torch

    per_epoch = job["samples"] // job["batch"]
    epoch, i = divmod(step, per_epoch)
    perm = torch.randperm(job["samples"], generator=torch.Generator().manual_seed(job["seed"] * 1000 + epoch))
    return perm[i * job["batch"]:(i + 1) * job["batch"]][rank::world]


def wait_for_assignment(directory: str) -> tuple[float, int]:
    """Standby: make the FIFO ``directory/assign-gG``, announce ``ready-gG``, block (no CPU) until
    the supervisor writes the assignment into the FIFO, export it as the torchrun environment;
    return ``(CLOCK_MONOTONIC time it arrived, launch)``."""
    gpu = os.environ["OCSLAB_GPU"]
    fifo = os.path.join(directory, f"assign-g{gpu}")
    os.mkfifo(fifo)
    open(os.path.join(directory, f"ready-g{gpu}"), "w").close()
    with open(fifo) as fh:
        a = json.loads(fh.read())
    t = time.monotonic()
    os.environ.update(RANK=str(a["rank"]), WORLD_SIZE=str(a["world"]), MASTER_ADDR=a["master_addr"],
                      MASTER_PORT=str(a["master_port"]))
    return t, int(a["launch"])


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc); exit status 0 when every step is done."""
    t_start = time.monotonic()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--launch", type=int, default=0)
    ap.add_argument("--standby", help="wait in this directory for a rank assignment (module doc)")
    ap.add_argument("--pause-after", type=int, default=-1,
                    help="rank 0 blocks after logging this step until a line is written to --pause-fifo")
    ap.add_argument("--pause-fifo", help="the FIFO of --pause-after")
    args = ap.parse_args(argv)
    with open(args.job) as fh:
        job = json.load(fh)

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    x, y = dataset(job)
    # Everything that does not depend on the rank comes before the wait: a standby then pays
    # only the rendezvous (building the first model imports half of torch.nn: about 1.5 s here).
    model = build_model(job)
    opt = torch.optim.SGD(model.parameters(), lr=job["lr"], momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    loss_fn(model(x[:2]), y[:2]).backward()  # first autograd pass: lazy initialisation
    opt.zero_grad()
    if args.standby:
        t_start, args.launch = wait_for_assignment(args.standby)
    dist.init_process_group("gloo")
    t_init = time.monotonic()
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.barrier()
    t_group = time.monotonic()

    ckpt = os.path.join(args.dir, "checkpoint.pt")
    first = 0
    resumed = -1
    if os.path.exists(ckpt):
        state = torch.load(ckpt, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        resumed = int(state["step"])
        first = resumed + 1
    launch_dir = os.path.join(args.dir, f"launch-{args.launch}")
    os.makedirs(launch_dir, exist_ok=True)
    with open(os.path.join(launch_dir, f"rank-{rank}.json"), "w") as fh:
        json.dump({"rank": rank, "gpu": int(os.environ.get("OCSLAB_GPU", -1)), "t_start": t_start,
                   "t_init": t_init, "t_group": t_group, "resumed_from": resumed}, fh)

    params = [p for p in model.parameters()]
    log = open(os.path.join(args.dir, "steps.jsonl"), "a") if rank == 0 else None
    for step in range(first, job["steps"]):
        t0 = time.monotonic()
        rows = batch_rows(job, step, rank, world)
        opt.zero_grad()
        loss = loss_fn(model(x[rows]), y[rows])
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in params] + [loss.detach().reshape(1)])
        t1 = time.monotonic()
        dist.all_reduce(flat)
        t2 = time.monotonic()
        flat /= job["batch"]  # mean over the global batch (the loss is a sum)
        off = 0
        for p in params:
            p.grad.copy_(flat[off:off + p.numel()].view_as(p))
            off += p.numel()
        opt.step()
        t3 = time.monotonic()
        if log is not None:
            log.write(json.dumps({"launch": args.launch, "step": step, "t_start": t0, "t_compute": t1, "t_end": t3,
                                  "loss": float(flat[-1]), "allreduce_s": t2 - t1}) + "\n")
            log.flush()
            if (step + 1) % job["checkpoint_every"] == 0:
                tmp = ckpt + ".tmp"
                torch.save({"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}, tmp)
                os.replace(tmp, ckpt)
                log.write(json.dumps({"launch": args.launch, "checkpoint": step, "t": time.monotonic()}) + "\n")
                log.flush()
            if step == args.pause_after and args.pause_fifo:
                with open(args.pause_fifo) as fh:  # blocks (no CPU) until the supervisor writes
                    fh.readline()
    if log is not None:
        log.close()
    dist.barrier()
    # Every step is logged and every rank is through the barrier: leave without tearing gloo
    # down. Its destructors race with the peers closing their pairs and now and then abort
    # ("terminate called without an active exception", seen once in ~20 runs).
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
