"""Workload generators (collectives as steps of transfers) and their registry.

``ALGORITHMS[collective][algorithm]`` is a generator ``f(ranks, nbytes) -> Workload`` for any
``ranks >= 2``; ``ocslab workload`` and scenario files use these names. Every generator is
verified by :func:`emulation.workloads.checker.check` (tests: every n from 2 to 33).
``stragglar`` (straggler-aware AllReduce) puts the straggler at rank n-1; scenarios move it with
:func:`emulation.workloads.stragglar.with_straggler`.
"""

from __future__ import annotations

from collections.abc import Callable

from emulation.workloads.allreduce import direct_allreduce, rd_allreduce, rhd_allreduce, ring_allreduce
from emulation.workloads.alltoall import binomial_broadcast, direct_alltoall, pairwise_alltoall
from emulation.workloads.matchings import rotor_alltoall
from emulation.workloads.model import COLLECTIVES, Step, Transfer, Workload
from emulation.workloads.stragglar import stragglar_allreduce
from emulation.workloads.scatter_gather import (
    direct_allgather,
    direct_reducescatter,
    rd_allgather,
    rhd_reducescatter,
    ring_allgather,
    ring_reducescatter,
)

Generator = Callable[[int, int], Workload]

#: ``{collective: {algorithm: generator}}``
ALGORITHMS: dict[str, dict[str, Generator]] = {
    "allreduce": {"ring": ring_allreduce, "rhd": rhd_allreduce, "rd": rd_allreduce, "direct": direct_allreduce,
                  "stragglar": stragglar_allreduce},
    "reducescatter": {"ring": ring_reducescatter, "rhd": rhd_reducescatter, "direct": direct_reducescatter},
    "allgather": {"ring": ring_allgather, "rd": rd_allgather, "direct": direct_allgather},
    "alltoall": {"pairwise": pairwise_alltoall, "direct": direct_alltoall, "rotor": rotor_alltoall},
    "broadcast": {"binomial": binomial_broadcast},
}
assert tuple(ALGORITHMS) == COLLECTIVES


def known(collective: str) -> str:
    """``"ring, rhd, ..."``: the algorithms of ``collective`` (for error messages)."""
    return ", ".join(ALGORITHMS.get(collective, {}))


def build(algorithm: str, ranks: int, nbytes: int, collective: str = "allreduce") -> Workload:
    """Generate ``collective`` by ``algorithm`` for ``ranks`` ranks and an ``nbytes`` buffer.

    :raises KeyError: unknown collective or algorithm. :raises ValueError: bad sizes.
    """
    algs = ALGORITHMS.get(collective)
    if algs is None:
        raise KeyError(f"unknown collective {collective!r} (known: {', '.join(ALGORITHMS)})")
    gen = algs.get(algorithm)
    if gen is None:
        raise KeyError(f"unknown {collective} algorithm {algorithm!r} (known: {known(collective)})")
    return gen(ranks, nbytes)


__all__ = ["ALGORITHMS", "COLLECTIVES", "Step", "Transfer", "Workload", "build", "known"]
