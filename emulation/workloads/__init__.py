"""Workload generators (collectives as steps of transfers) and their registry.

``ALGORITHMS`` maps ``(collective, algorithm)`` names to generators ``f(ranks, nbytes)``;
``ocslab schedule`` and scenario files use these names.
"""

from __future__ import annotations

from collections.abc import Callable

from emulation.workloads.allreduce import direct_allreduce, rhd_allreduce, ring_allreduce
from emulation.workloads.model import Step, Transfer, Workload

Generator = Callable[[int, int], Workload]

#: ``{algorithm name: (collective, generator)}``
ALGORITHMS: dict[str, tuple[str, Generator]] = {
    "ring": ("allreduce", ring_allreduce),
    "rhd": ("allreduce", rhd_allreduce),
    "direct": ("allreduce", direct_allreduce),
}


def build(algorithm: str, ranks: int, nbytes: int) -> Workload:
    """Generate the workload of ``algorithm`` for ``ranks`` ranks and an ``nbytes`` buffer.

    :raises KeyError: unknown algorithm. :raises ValueError: bad sizes.
    """
    try:
        _, gen = ALGORITHMS[algorithm]
    except KeyError:
        raise KeyError(f"unknown algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})") from None
    return gen(ranks, nbytes)


__all__ = ["ALGORITHMS", "Step", "Transfer", "Workload", "build"]
