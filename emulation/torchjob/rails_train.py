"""A training job with tensor, pipeline and data parallelism on photonic rails, asking Opus for
each phase's circuits (``torch.distributed``, gloo). It runs the phase trace of
:func:`emulation.workloads.iteration.build_trace` literally: every op of the server's program,
with the trace's bytes, on the trace's groups, in the trace's order.

Run on every GPU host by :mod:`emulation.torchjob.rails_job`::

    python -m emulation.torchjob.rails_train --job JOB.json --dir RUN_DIR

Rank = GPU = ``server x G + t`` (``G`` GPUs per server, ``t`` its TP index, which is its rail).
The model: per pipeline stage, ``layers`` layers of two residual blocks, each a TP-sharded MLP
``x + g(relu(f(x) W1_t) W2_t)`` (Megatron-LM's column then row parallel split; ``f`` all-reduces
the gradient backward, ``g`` the output forward, over the server's GPUs: the scale-up domain), and
on the last stage a classifier over ``classes``. It learns a fixed random teacher's labels of
Gaussian inputs (seeded, the same on every rank).

The trace's ops:

- ``compute`` ``F<m>``/``B<m>``: the real forward/backward of micro-batch m (with its TP
  all-reduces and, for a received tensor, the all-gather of its TP shards), then a sleep to the
  op's seconds (``overrun_s`` records real work that took longer);
- ``send``/``recv``: this rank's TP shard of the activation (forward) or its gradient (backward),
  ``isend``/``irecv`` to the same TP index of the neighbouring stage, over the rail;
- ``allreduce`` ``grad``: the gradients, flattened into the trace's buckets (zero-padded to its
  sizes), summed over the DP group; ``allreduce`` ``norm``: the squared gradient norm over the
  model-parallel group (after the server's own), then clipping and an SGD step.

**Opus** (``mode``): every rail group is checked in (its GPUs; TP groups too, which the
controller ignores: one server). Before its first op of a phase (an op on a group it does not
hold) a rank asks for the group's configuration and waits for the answer (``on-demand``); with
``speculative`` it asks as soon as the op before ends if the next comm op is on a group whose
circuits share its ports, and waits for that answer when it gets there. Before either request
it waits until everything it sent has been acknowledged (:func:`~emulation.torchjob.opus_client.
drain`): nothing of its may be in flight on circuits the answer can rewire. ``none``: no
controller (electrical rails).

Each rank writes ``RUN_DIR/ops-g<G>.jsonl``: one line per op ``{"it", "i", "kind", "phase",
"group", "t0", "t1", "wait_s" (controller), "changed", "dark_s", "overrun_s"}``; the last stage's
first GPU of replica 0 writes ``RUN_DIR/loss.jsonl`` (``{"it", "loss"}``, the mean micro-batch
loss), rank 0 ``RUN_DIR/ping.json`` (round trips to the controller). Times are CLOCK_MONOTONIC seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from emulation.torchjob.opus_client import OpusClient, Pending, drain


def _key(members: list[int]) -> tuple:
    """Groups with the same circuits: a pair regardless of order, a ring in order."""
    return tuple(sorted(members)) if len(members) == 2 else tuple(members)


def main(argv: list[str] | None = None) -> int:
    """Entry point (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args(argv)
    job = json.loads(open(args.job).read())

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    G, S = job["gpus_per_server"], job["servers"]
    assert world == G * S, (world, G, S)
    server, t = divmod(rank, G)
    stage, replica = job["stage_of"][server], job["replica_of"][server]
    stages = max(job["stage_of"]) + 1
    groups = job["groups"]
    rail_group = {}  # trace group id -> (torch group, GPU members)
    for gid in sorted(groups):
        for r in range(G):
            gpus = [m * G + r for m in groups[gid]]
            pg = dist.new_group(gpus)
            if r == t:
                rail_group[gid] = (pg, gpus)
    tp_group = None
    for s in range(S):
        pg = dist.new_group([s * G + r for r in range(G)])
        if s == server:
            tp_group = pg
    program = job["programs"][server]
    h, f, T, classes, M = job["hidden"], job["ffn"], job["tokens"], job["classes"], job["micro_batches"]
    for op in program:  # the trace's sizes are this model's
        if op["kind"] in ("send", "recv"):
            assert op["bytes"] == T * h * 4 // G, (op, T, h, G)

    # ---- the model -----------------------------------------------------------------------------
    class F(torch.autograd.Function):  # identity forward, all-reduce backward (column parallel input)
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            g = g.contiguous()
            dist.all_reduce(g, group=tp_group)
            return g

    class Gr(torch.autograd.Function):  # all-reduce forward, identity backward (row parallel output)
        @staticmethod
        def forward(ctx, x):
            x = x.contiguous()
            dist.all_reduce(x, group=tp_group)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    gen = torch.Generator().manual_seed(job["seed"] * 7919 + stage)
    blocks = []
    for _ in range(2 * job["layers_per_stage"][stage]):
        w1 = torch.randn(h, f, generator=gen) * (2.0 / h) ** 0.5
        w2 = torch.randn(f, h, generator=gen) * (0.5 / f) ** 0.5
        sl = slice(t * f // G, (t + 1) * f // G)
        blocks.append((w1[:, sl].clone().requires_grad_(), w2[sl, :].clone().requires_grad_()))
    params = [w for b in blocks for w in b]
    head = None
    if stage == stages - 1:
        head = (torch.randn(h, classes, generator=gen) * 0.1 / h ** 0.5).requires_grad_()
        params.append(head)

    def forward(x):
        for w1, w2 in blocks:
            x = x + Gr.apply(torch.relu(F.apply(x) @ w1) @ w2)
        return x

    data = torch.Generator().manual_seed(job["seed"])
    n = job["samples"]
    X = torch.randn(n, h, generator=data)
    teacher = torch.randn(h, classes, generator=data)
    Y = (X @ teacher).argmax(dim=1)

    def batch(it: int, m: int):
        i = ((it * M + m) * job["replicas"] + replica) % (n // T) * T  # epochs over n // T blocks
        return X[i:i + T], Y[i:i + T]

    def gather(shard):
        parts = [torch.empty_like(shard) for _ in range(G)]
        dist.all_gather(parts, shard, group=tp_group)
        return torch.cat(parts, dim=1)

    def shard_of(full):
        return full[:, t * h // G:(t + 1) * h // G].contiguous()

    def peer(other_stage: int) -> int:
        s2 = next(s for s in range(S) if job["stage_of"][s] == other_stage and job["replica_of"][s] == replica)
        return s2 * G + t

    # ---- Opus -----------------------------------------------------------------------------------
    mode = job["mode"]
    client = OpusClient(job["socket"]) if mode != "none" else None
    mine = {gid: gpus for gid, (_pg, gpus) in rail_group.items() if rank in gpus}
    if client is not None:
        for gid, gpus in sorted(mine.items()):
            client.checkin(f"{gid}@r{t}", gpus, gpus.index(rank))
        client.checkin(f"tp/s{server}", [server * G + r for r in range(G)], t)
        pings = []
        for _ in range(20):
            t0 = time.monotonic()
            client.call({"op": "ping"})
            pings.append(time.monotonic() - t0)
        if rank == 0:
            with open(os.path.join(args.dir, "ping.json"), "w") as fh:
                json.dump({"rtt_s": sorted(pings)}, fh)
    conflicts = {g: {o for o in mine if _key(mine[o]) != _key(mine[g])} for g in mine}
    holds: set[str] = set()
    spec: dict[str, Pending] = {}

    def obtain(gid: str) -> tuple[float, bool, float | None]:
        """Hold ``gid`` (ask or collect the speculative answer); (waited s, changed, dark s)."""
        if client is None or gid in holds:
            return 0.0, False, None
        t0 = time.monotonic()
        p = spec.pop(gid, None)
        if p is None:
            drain()  # nothing of this rank's may be in flight on circuits the answer can rewire
        ans = p.result() if p is not None else client.request(f"{gid}@r{t}", rank, mode)
        holds.difference_update(conflicts[gid])
        holds.add(gid)
        rec = ans.get("reconfiguration") or {}
        return time.monotonic() - t0, bool(ans.get("changed")), rec.get("dark_window_measured_s")

    comm_at = [i for i, op in enumerate(program) if op["kind"] != "compute"]

    def speculate(i: int) -> None:
        """After comm op ``i``: ask ahead for the next comm op's group if it is a new phase."""
        if mode != "speculative":
            return
        nxt = next((j for j in comm_at if j > i), comm_at[0] if comm_at else None)
        if nxt is None:
            return
        g, cur = program[nxt]["group"], program[i]["group"]
        if g in conflicts[cur] and g not in holds and g not in spec:
            drain()
            spec[g] = Pending(job["socket"], f"{g}@r{t}", rank)

    # ---- the iterations ---------------------------------------------------------------------------
    ops_log = open(os.path.join(args.dir, f"ops-g{rank}.jsonl"), "w")
    dist.barrier()
    for it in range(job["iterations"]):
        xs, ys, losses, got, sends, flat, norm_sq = {}, {}, {}, {}, [], None, None
        bucket_off = 0
        for i, op in enumerate(program):
            kind, phase, gid = op["kind"], op["phase"], op["group"]
            t0 = time.monotonic()
            wait, changed, dark, over = 0.0, False, None, 0.0
            if kind == "compute":
                m = int(phase[1:])
                if phase[0] == "F":
                    if stage == 0:
                        x, y = batch(it, m)
                        x = x.clone()
                    else:
                        x = gather(got.pop(("F", m))).requires_grad_()
                        y = batch(it, m)[1]
                    out = forward(x)
                    xs[m] = x
                    if head is not None:
                        losses[m] = torch.nn.functional.cross_entropy(out @ head, y) / M
                    else:
                        ys[m] = out
                else:
                    if head is not None:
                        losses[m].backward()
                    else:
                        ys.pop(m).backward(gather(got.pop(("B", m))))
                real = time.monotonic() - t0
                over = max(0.0, real - op["seconds"])
                if op["seconds"] > real:
                    time.sleep(op["seconds"] - real)
            else:
                wait, changed, dark = obtain(gid)
                pg, gpus = rail_group[gid]
                t1 = time.monotonic()
                if kind == "send":
                    m = int(phase[1:])
                    if phase[0] == "F":
                        buf = shard_of(ys[m].detach())
                        dst = peer(stage + 1)
                    else:
                        buf = shard_of(xs[m].grad)
                        dst = peer(stage - 1)
                    sends.append((dist.isend(buf, dst), buf))
                elif kind == "recv":
                    m = int(phase[1:])
                    buf = torch.empty(T, h // G)
                    src = peer(stage - 1) if phase[0] == "F" else peer(stage + 1)
                    dist.irecv(buf, src).wait()
                    got[(phase[0], m)] = buf
                elif phase == "grad":
                    if flat is None:
                        sizes = [o["bytes"] // 4 for o in program if o["phase"] == "grad"]
                        real = torch.cat([p.grad.reshape(-1) for p in params])
                        flat = torch.zeros(max(sum(sizes), real.numel()))
                        flat[:real.numel()] = real
                    k = op["bytes"] // 4
                    dist.all_reduce(flat[bucket_off:bucket_off + k], group=pg)
                    bucket_off += k
                elif phase == "norm":
                    sq = torch.tensor([sum(float((p.grad ** 2).sum()) for p in params)])
                    dist.all_reduce(sq, group=tp_group)
                    dist.all_reduce(sq, group=pg)
                    norm_sq = float(sq[0])
                else:
                    raise ValueError(f"op {kind} {phase} is not in this job's trace")
                t0 = t1 - wait  # the op's record starts when the rank reached it
                speculate(i)
            ops_log.write(json.dumps({"it": it, "i": i, "kind": kind, "phase": phase, "group": gid, "t0": t0,
                                      "t1": time.monotonic(), "wait_s": wait, "changed": changed, "dark_s": dark,
                                      "overrun_s": over}) + "\n")
        for w, _buf in sends:
            w.wait()
        # the update: averaged gradients, clipped to norm 1, plain SGD
        if flat is not None:
            off = 0
            for p in params:
                p.grad.copy_(flat[off:off + p.numel()].view_as(p) / job["replicas"])
                off += p.numel()
        scale = min(1.0, 1.0 / max(norm_sq, 1e-12) ** 0.5) if norm_sq is not None else 1.0
        with torch.no_grad():
            for p in params:
                p -= job["lr"] * scale * p.grad
                p.grad = None
        if head is not None and replica == 0 and t == 0:
            with open(os.path.join(args.dir, "loss.jsonl"), "a") as fh:
                fh.write(json.dumps({"it": it, "loss": float(sum(v.detach() for v in losses.values()))}) + "\n")
    ops_log.close()
    # The rails now join only the last phase's groups: leave through barriers on those (a
    # barrier of every rank would need circuits that are not there).
    dist.barrier(group=tp_group)
    if comm_at:
        dist.barrier(group=rail_group[program[comm_at[-1]]["group"]][0])
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
