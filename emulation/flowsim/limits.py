"""How large a run the flow backend can hold in memory, decided before the workload of the real
size is built.

What a run holds grows with four quantities of its workload and plan (:class:`Shape`), not with
its transfer count alone: steps share columns (a Ring AllReduce's 2(n-1) steps are windows of a
few arrays of n entries), and the simulator keeps one step's working arrays at a time.

- the bytes of the distinct arrays its steps' columns are views of (``stored``): O(n) for Ring,
  O(n log n) for RHD, O(n^2) for a direct exchange or StragglAR's rounds;
- its steps (a record each, :data:`BYTES_PER_STEP`);
- its largest step's transfers (routed and simulated at once, :data:`BYTES_PER_STEP_TRANSFER`);
- its GPUs times the configurations its plan holds (the fabric, its links and routes, one set per
  configuration, :data:`BYTES_PER_GPU_CONFIGURATION`).

Dependency-driven runs add their engine's state (:mod:`emulation.flowsim.dependency`): the waves
engine's (rank, chunk) table or, if the steps overlap, the event-driven engine's per-transfer
state, whichever is smaller. Each quantity is fitted exactly from the workload built (and
planned) at 8, 16, 32, 64 and 128 GPUs to ``a n^2 + b n log2 n + c n + d log2 n + e`` (every
collective of ocslab is of that form) and evaluated at the scenario's size. The constants are
measured: peak resident memory of ``scripts/bench_flowsim.py``'s cases at 16,384 and 131,072 GPUs
(docs/flow-backend.md, the scale model).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from emulation.machine import available_memory

#: Peak memory of an empty run: the interpreter, numpy, scipy, pydantic (about 90 MiB measured)
#: and the step simulator's caches (at most :data:`~emulation.flowsim.steps.CACHE_BYTES`).
BASE_BYTES = 160 << 20
#: Memory per byte of the arrays the workload's columns are views of (the arrays and what is
#: derived from them per step).
BYTES_PER_STORED_BYTE = 1.4
#: Memory per step: its Step, column views, StepResult, plan entry (bytes).
BYTES_PER_STEP = 1600
#: Working memory per transfer of the largest step: routes, subflows, the fluid engine's arrays.
BYTES_PER_STEP_TRANSFER = 380
#: Memory per GPU and configuration held: ports, circuits, directed links, routes (bytes).
BYTES_PER_GPU_CONFIGURATION = 1200
#: Share of the available memory a scenario may plan for.
MEMORY_SHARE = 0.75
_FIT_AT = (8, 16, 32, 64, 128)


@dataclass(frozen=True)
class Shape:
    """What one run holds (module doc), at one GPU count: ``stored`` bytes of distinct column
    arrays, ``steps``, ``largest`` (transfers of the largest step), ``configurations`` its plan
    holds, ``transfers`` in all and ``chunks`` (for the dependency-driven engines)."""

    stored: float
    steps: float
    largest: float
    configurations: float
    transfers: float
    chunks: float


def stored_bytes(workload) -> int:
    """Bytes of the distinct arrays the columns of ``workload``'s steps are views of."""
    seen: dict[int, int] = {}
    keep = []
    for st in workload.steps:
        for col in (st.src, st.dst, st.bytes, st.chunk, st.nchunks, st.op):
            root = col
            while isinstance(root.base, np.ndarray):
                root = root.base
            if id(root) not in seen:
                seen[id(root)] = root.nbytes
                keep.append(root)
    return sum(seen.values())


def held_bytes(workload) -> float:
    """Bytes ``workload`` holds once built: its column arrays and its steps."""
    return BYTES_PER_STORED_BYTE * stored_bytes(workload) + BYTES_PER_STEP * len(workload.steps)


def shape_of(workload, configurations: int = 1) -> Shape:
    """The :class:`Shape` of ``workload`` run under a plan holding ``configurations``."""
    return Shape(stored=float(stored_bytes(workload)), steps=float(len(workload.steps)),
                 largest=float(max((len(s) for s in workload.steps), default=0)),
                 configurations=float(configurations), transfers=float(workload.transfer_count),
                 chunks=float(workload.chunks))


def fit(value_at: Callable[[int], float], n: int, at: tuple[int, ...] = _FIT_AT) -> float:
    """``value_at(n)`` fitted from ``value_at`` at the five GPU counts ``at`` (default 8, 16, 32,
    64 and 128) to ``a n^2 + b n log2 n + c n + d log2 n + e`` (exact where the quantity is of that
    form over those counts; never below 0).

    :raises ValueError: from ``value_at``.
    """
    if n <= max(at):
        return float(value_at(n))
    a = np.array([[k * k, k * math.log2(k), k, math.log2(k), 1] for k in at], dtype=float)
    coef = np.linalg.solve(a, np.array([value_at(k) for k in at], dtype=float))
    return max(0.0, float(coef @ [n * n, n * math.log2(n), n, math.log2(n), 1]))


def transfer_estimate(count_at: Callable[[int], int], n: int) -> float:
    """Transfers of a workload on ``n`` GPUs, from ``count_at(k)`` (its transfer count built on
    k GPUs) at 8 to 128 GPUs (:func:`fit`). :raises ValueError: from ``count_at``."""
    return fit(count_at, n)


def need(shape: Shape, gpus: int, semantics: str = "round-synchronous") -> float:
    """Bytes a run of ``shape`` on ``gpus`` GPUs needs (module doc)."""
    b = (BASE_BYTES + BYTES_PER_STORED_BYTE * shape.stored + BYTES_PER_STEP * shape.steps
         + BYTES_PER_STEP_TRANSFER * shape.largest + BYTES_PER_GPU_CONFIGURATION * gpus * shape.configurations)
    if semantics == "dependency-driven":
        from emulation.flowsim.dependency import event_memory, waves_memory

        b += min(waves_memory(gpus, shape.chunks, shape.transfers), event_memory(shape.transfers, 2.0))
    return b


def fitted_shape(shape_at: Callable[[int], Shape], n: int, at: tuple[int, ...] = _FIT_AT) -> Shape:
    """The :class:`Shape` on ``n`` GPUs, every field fitted from ``shape_at`` at the GPU counts
    ``at`` (:func:`fit`; the shapes are computed once). :raises ValueError: from ``shape_at``."""
    if n <= max(at):
        return shape_at(n)
    got = {k: shape_at(k) for k in at}
    return Shape(**{f.name: fit(lambda k, f=f: getattr(got[k], f.name), n, at) for f in fields(Shape)})


def check_memory(shapes_at: list[Callable[[int], Shape]], n: int, field: str = "fabric.gpus",
                 memory: int | None = None, semantics: str = "round-synchronous",
                 at: tuple[int, ...] = _FIT_AT) -> str | None:
    """One line naming ``field`` if the largest of the runs (one ``shape_at`` per run and size,
    giving its :class:`Shape` on k GPUs; they are planned and simulated one at a time) on ``n``
    GPUs needs more than :data:`MEMORY_SHARE` of the available memory, with the largest ``n``
    that fits; else None. A run that cannot be built at a fitting size (``at``) is left out."""
    memory = available_memory() if memory is None else memory
    if memory <= 0 or n <= max(at):
        return None
    budget = MEMORY_SHARE * memory
    samples = []  # each run built at the fitting sizes once
    for s in shapes_at:
        try:
            samples.append({k: s(k) for k in at})
        except ValueError:
            continue  # not buildable at the fitting sizes: planning itself will say what is wrong
    if not samples:
        return None

    def needed(k: int) -> float:
        return max(need(fitted_shape(got.__getitem__, k, at), k, semantics) for got in samples)

    if needed(n) <= budget:
        return None
    lo, hi = max(at), n  # largest k with needed(k) <= budget
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if needed(mid) <= budget else (lo, mid)
    return (f"{field}: {n} GPUs need about {needed(n) / 2**30:.1f} GiB for the largest run and "
            f"{budget / 2**30:.1f} GiB may be used here: at most about {lo} GPUs")
