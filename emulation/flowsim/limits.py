"""How large a scenario the flow backend can hold in memory, decided before any workload of the
real size is built.

Memory goes to transfers: a workload of ``T`` transfers, its plan and the simulator's per-transfer
state take about :data:`BYTES_PER_TRANSFER` each (measured on the demo scenario, where Ring's
2n(n-1) transfers dominate: ``ocslab run --backend flow`` peaked at 0.77 GB at 1,024 GPUs and
2.8 GB at 2,048, 330-370 bytes per transfer; ``ocslab plan --json``, which holds every run's plan
and prints it, at 2.2 GB at 1,024 GPUs, 1,050 bytes per transfer; at 4,096 GPUs it exhausted a
24 GB machine).
Every collective of ocslab moves ``T(n) = a n^2 + b n log2 n + c n + d`` transfers (Ring and
direct exchanges are quadratic, halving-doubling ``n log n``, trees ``n - 1``), so ``T`` is fitted
exactly from the workload built at 8, 16, 32 and 64 GPUs and evaluated at the scenario's size.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from emulation.machine import available_memory

#: Memory per transfer (bytes): the hungriest command's 1,050 measured, with a margin.
BYTES_PER_TRANSFER = 1100
#: Share of the available memory a scenario may plan for.
MEMORY_SHARE = 0.75
_FIT_AT = (8, 16, 32, 64)


def transfer_estimate(count_at: Callable[[int], int], n: int) -> float:
    """Transfers of a workload on ``n`` GPUs, from ``count_at(k)`` (its transfer count when
    built on ``k`` GPUs) at 8, 16, 32 and 64 GPUs, fitted to ``a n^2 + b n log2 n + c n + d``.

    :raises ValueError: from ``count_at`` (the workload cannot be built at those sizes).
    """
    if n <= max(_FIT_AT):
        return float(count_at(n))
    a = np.array([[k * k, k * math.log2(k), k, 1] for k in _FIT_AT], dtype=float)
    t = np.array([count_at(k) for k in _FIT_AT], dtype=float)
    coef = np.linalg.solve(a, t)
    return max(0.0, float(coef @ [n * n, n * math.log2(n), n, 1]))


def check_memory(counters: list[Callable[[int], int]], n: int, field: str = "fabric.gpus",
                 memory: int | None = None) -> str | None:
    """One line naming ``field`` if the largest of the workloads (one ``count_at`` per run and
    size; they are planned and simulated one at a time) on ``n`` GPUs needs more than
    :data:`MEMORY_SHARE` of the available memory, with the largest ``n`` that fits; else None."""
    memory = available_memory() if memory is None else memory
    if memory <= 0 or n <= max(_FIT_AT):
        return None
    budget = MEMORY_SHARE * memory

    def need(k: int) -> float:
        return BYTES_PER_TRANSFER * max(transfer_estimate(c, k) for c in counters)

    if need(n) <= budget:
        return None
    lo, hi = max(_FIT_AT), n  # largest k with need(k) <= budget
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if need(mid) <= budget else (lo, mid)
    return (f"{field}: {n} GPUs need about {need(n) / 2**30:.1f} GiB for the largest run's transfers "
            f"({BYTES_PER_TRANSFER} bytes each) and {budget / 2**30:.1f} GiB may be used here: at most "
            f"about {lo} GPUs")
