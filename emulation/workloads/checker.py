"""Data-movement checker: replays a workload on symbolic data and verifies the collective.

Every (rank, chunk) holds a vector of contribution counts per origin rank. Within a step every
transfer reads the state from before the step (transfers of a step run together); ``reduce``
adds the sender's counts to the receiver's, ``copy`` replaces them. A correct AllReduce ends
with every rank holding every chunk with each origin counted exactly once, which catches lost,
missing and double-counted contributions.
"""

from __future__ import annotations

import numpy as np

from emulation.workloads.model import Workload


class ScheduleError(AssertionError):
    """A workload does not compute its collective."""


def replay(w: Workload) -> np.ndarray:
    """Final contribution counts, shape ``(ranks, chunks, ranks)`` (int64).

    :raises ScheduleError: a transfer names a rank or chunk out of range.
    """
    n, c = w.ranks, w.chunks
    state = np.zeros((n, c, n), dtype=np.int64)
    for r in range(n):
        state[r, :, r] = 1
    for i, step in enumerate(w.steps):
        before = state.copy()
        for t in step.transfers:
            if not (0 <= t.src < n and 0 <= t.dst < n and t.src != t.dst):
                raise ScheduleError(f"step {i}: bad ranks {t.src}->{t.dst}")
            if not (0 <= t.chunk and t.nchunks >= 1 and t.chunk + t.nchunks <= c):
                raise ScheduleError(f"step {i}: chunks {t.chunk}+{t.nchunks} out of 0..{c - 1}")
            sl = slice(t.chunk, t.chunk + t.nchunks)
            if t.op == "reduce":
                state[t.dst, sl] += before[t.src, sl]
            else:
                state[t.dst, sl] = before[t.src, sl]
    return state


def check_allreduce(w: Workload) -> None:
    """Raise :class:`ScheduleError` unless every rank ends with every chunk fully reduced."""
    state = replay(w)
    bad = np.argwhere((state != 1).any(axis=2))
    if len(bad):
        r, c = bad[0]
        raise ScheduleError(
            f"{w.algorithm} n={w.ranks}: rank {r} chunk {c} has counts {state[r, c].tolist()}"
        )
