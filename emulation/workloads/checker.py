"""Data-movement checker: replays a workload on symbolic data and verifies its collective.

Every (rank, chunk) holds a vector of contribution counts per origin rank. Within a step every
transfer reads the state from before the step (transfers of a step run together); ``reduce``
adds the sender's counts to the receiver's, ``copy`` replaces them, ``append`` adds them but
must not overlap what the receiver holds. Sending a chunk one does not hold (all counts zero)
is an error. Start and end states per collective (``Workload.owner`` names shards):

- allreduce: every rank holds its own data; at the end every chunk at every rank counts every
  origin exactly once (catches lost, missing and double-counted contributions);
- reducescatter: same start; at the end chunk c at rank ``owner[c]`` counts every origin once;
- allgather, broadcast: rank r starts with only the chunks it owns; at the end every rank holds
  chunk c as contributed by ``owner[c]`` alone;
- alltoall: chunk d of rank r is r's block for rank d; at the end rank d holds chunk d with every
  origin once;
- alltoallv (MoE dispatch/combine, variable blocks, pairs without data omitted): every
  transfer's block is at its destination, from its source, exactly once.
"""

from __future__ import annotations

import numpy as np

from emulation.workloads.model import Step, Workload


class ScheduleError(AssertionError):
    """A workload does not compute its collective."""


def initial_state(w: Workload) -> np.ndarray:
    """Contribution counts before the first step, shape ``(ranks, chunks, ranks)`` (int64)."""
    n, c = w.ranks, w.chunks
    state = np.zeros((n, c, n), dtype=np.int64)
    if w.collective in ("allgather", "broadcast"):
        for chunk, r in enumerate(w.owner):
            state[r, chunk, r] = 1
    else:
        for r in range(n):
            state[r, :, r] = 1
    return state


def replay(w: Workload) -> np.ndarray:
    """Final contribution counts, shape ``(ranks, chunks, ranks)`` (int64).

    :raises ScheduleError: a transfer names a rank or chunk out of range, sends a chunk its
        source does not hold, or appends data the receiver already has.
    """
    n, c = w.ranks, w.chunks
    if w.collective in ("reducescatter", "allgather", "broadcast") and (
            len(w.owner) != c or not all(0 <= r < n for r in w.owner)):
        raise ScheduleError(f"{w.collective} needs an owner rank for each of its {c} chunks")
    state = initial_state(w)
    for i, step in enumerate(w.steps):
        state = apply_step(state, step, i)
    return state


def apply_step(state: np.ndarray, step: Step, index: int) -> np.ndarray:
    """The contribution counts after ``step`` (index ``index``) from ``state`` (module doc);
    ``state`` has shape ``(ranks, chunks, ranks)`` and is not modified.

    :raises ScheduleError: as :func:`replay`.
    """
    n, c, i = state.shape[0], state.shape[1], index
    before = state
    state = state.copy()
    for t in step.transfers:
        if not (0 <= t.src < n and 0 <= t.dst < n and t.src != t.dst):
            raise ScheduleError(f"step {i}: bad ranks {t.src}->{t.dst}")
        if not (0 <= t.chunk and t.nchunks >= 1 and t.chunk + t.nchunks <= c):
            raise ScheduleError(f"step {i}: chunks {t.chunk}+{t.nchunks} out of 0..{c - 1}")
        sl = slice(t.chunk, t.chunk + t.nchunks)
        sent = before[t.src, sl]
        if (sent.sum(axis=1) == 0).any():
            raise ScheduleError(f"step {i}: rank {t.src} sends chunks {t.chunk}+{t.nchunks} it does not hold")
        if t.op == "reduce":
            state[t.dst, sl] += sent
        elif t.op == "append":
            if ((state[t.dst, sl] > 0) & (sent > 0)).any():
                raise ScheduleError(f"step {i}: rank {t.dst} receives data it already holds")
            state[t.dst, sl] += sent
        else:
            state[t.dst, sl] = sent
    return state


def check(w: Workload) -> None:
    """Raise :class:`ScheduleError` unless ``w`` computes its collective (module doc)."""
    state = replay(w)
    n = w.ranks
    ones = np.ones(n, dtype=np.int64)
    if w.collective == "allreduce":
        want = [(r, c, ones) for r in range(n) for c in range(w.chunks)]
    elif w.collective == "reducescatter":
        want = [(w.owner[c], c, ones) for c in range(w.chunks)]
    elif w.collective in ("allgather", "broadcast"):
        want = [(r, c, np.eye(n, dtype=np.int64)[w.owner[c]]) for r in range(n) for c in range(w.chunks)]
    elif w.collective == "alltoall":
        want = [(d, d, ones) for d in range(n)]
    elif w.collective == "alltoallv":  # every block arrived, once (append forbids twice)
        for st in w.steps:
            for t in st.transfers:
                if state[t.dst, t.chunk, t.src] != 1:
                    raise ScheduleError(f"alltoallv {w.algorithm}: block {t.src}->{t.dst} (chunk {t.chunk}) "
                                        f"did not arrive")
        return
    else:
        raise ScheduleError(f"no checker for collective {w.collective!r}")
    for r, c, vec in want:
        if not np.array_equal(state[r, c], vec):
            raise ScheduleError(
                f"{w.collective} {w.algorithm} n={n}: rank {r} chunk {c} has counts "
                f"{state[r, c].tolist()}, expected {vec.tolist()}")

