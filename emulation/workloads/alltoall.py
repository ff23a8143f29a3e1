"""AllToAll and Broadcast as steps of transfers.

Spec: ``docs/mechanisms.md`` (baseline algorithms). AllToAll: every rank's send buffer of s
bytes holds n blocks of s/n, block d for rank d (chunk d); a rank keeps its own block and each
other block travels once, one hop, op ``append``. busbw factor (n-1)/n (nccl-tests).

- Pairwise exchange: n-1 steps. For n a power of two rank r swaps blocks with ``r XOR k``
  (k = 1..n-1: every step a perfect matching, one circuit per GPU); otherwise rank r sends to
  ``(r + k) mod n`` and receives from ``(r - k) mod n`` (a GPU talks to two peers per step).
- Direct: one step of n(n-1) transfers (degree n-1: needs a packet switch or a decomposition
  into matchings on circuits).
- Grouped (expert parallelism): the ranks form n/g groups of g consecutive ranks and every group
  runs a direct AllToAll of its own at the same time, g(g-1) transfers per group in one step. An
  MoE layer's dispatch on a large cluster is this: tokens travel among the GPUs of one
  expert-parallel group (g = 64 or 256), never across the whole cluster at once.

Broadcast by binomial tree from ``root`` 0 (1 chunk, the whole buffer): step k = 0..ceil(log2 n)-1,
every rank r < 2^k that holds the data sends it to r + 2^k (if < n): ceil(log2 n) steps of
``alpha + s beta``. busbw factor 1.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from emulation.workloads.allreduce import check_sizes
from emulation.workloads.model import Step, Workload


def pairwise_alltoall(ranks: int, nbytes: int) -> Workload:
    """Pairwise-exchange AllToAll (module doc). :raises ValueError: sizes."""
    check_sizes(ranks, nbytes)
    n = ranks
    pow2 = n & (n - 1) == 0
    w = Workload("alltoall", "pairwise", n, nbytes, n)
    r = np.arange(n, dtype=np.int64)
    size = w.chunk_bytes(r)
    steps = []
    for k in range(1, n):
        peer = r ^ k if pow2 else (r + k) % n
        steps.append(Step.columns("exchange", r, peer, size[peer], peer, 1, "append"))
    return replace(w, steps=tuple(steps))


def direct_alltoall(ranks: int, nbytes: int) -> Workload:
    """Direct AllToAll: one step, rank r sends block d to every d != r. :raises ValueError: sizes."""
    check_sizes(ranks, nbytes)
    n = ranks
    w = Workload("alltoall", "direct", n, nbytes, n)
    src, dst = np.nonzero(~np.eye(n, dtype=bool))
    step = Step.columns("exchange", src, dst, w.chunk_bytes(dst), dst, 1, "append")
    return replace(w, steps=(step,))


def grouped_alltoall(ranks: int, nbytes: int, group: int) -> Workload:
    """Direct AllToAll inside every group of ``group`` consecutive ranks, all groups at once
    (module doc): one step of ``ranks / group x group (group - 1)`` transfers; rank r sends its
    block j (``nbytes / group`` bytes, chunk j) to member j of its group (``append``).

    :param ranks: n, a multiple of ``group``. :param nbytes: s, each rank's send buffer (bytes).
    :param group: g >= 2, ranks per expert-parallel group.
    :raises ValueError: sizes, or ``group`` < 2 or not dividing ``ranks``.
    """
    check_sizes(ranks, nbytes)
    if group < 2 or ranks % group:
        raise ValueError(f"group: must be at least 2 and divide the {ranks} ranks, got {group}")
    n, g = ranks, group
    w = Workload("alltoall", f"grouped-{g}", n, nbytes, g)
    a, b = np.nonzero(~np.eye(g, dtype=bool))  # one group's (member, peer) pairs, row-major
    base = (np.arange(n // g, dtype=np.int64) * g)[:, None]
    src, dst = (base + a).ravel(), (base + b).ravel()
    step = Step.columns("exchange", src, dst, np.tile(w.chunk_bytes(b), n // g), np.tile(b, n // g), 1, "append")
    return replace(w, steps=(step,))


def binomial_broadcast(ranks: int, nbytes: int) -> Workload:
    """Binomial-tree Broadcast of the root's (rank 0) buffer (module doc). :raises ValueError: sizes."""
    check_sizes(ranks, nbytes)
    n = ranks
    w = Workload("broadcast", "binomial", n, nbytes, 1, owner=(0,))
    steps = []
    k = 0
    while (1 << k) < n:
        d = 1 << k
        r = np.arange(min(d, n - d), dtype=np.int64)
        steps.append(Step.columns("broadcast", r, r + d, nbytes, 0, 1, "copy"))
        k += 1
    return replace(w, steps=tuple(steps))
