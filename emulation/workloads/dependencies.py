"""Data dependencies between the transfers of a workload (dependency-driven semantics).

A transfer may start once the chunks it sends have arrived at its source: it depends on every
transfer of an *earlier* step that delivered any of those chunks to that rank (read after
write, per chunk). Transfers of one step never depend on each other.

Spec: ``docs/mechanisms.md`` (execution semantics: "dependency-driven: a transfer starts when
the chunk it sends has arrived").
"""

from __future__ import annotations

from emulation.workloads.model import Workload


def chunk_dependencies(workload: Workload) -> list[list[int]]:
    """For every transfer (ids in step-major order, as :meth:`Workload.transfer_count`
    enumerates them), the sorted ids of the transfers it depends on."""
    writers: dict[tuple[int, int], list[int]] = {}
    deps: list[list[int]] = []
    tid = 0
    for step in workload.steps:
        first = tid
        for t in step.transfers:
            found: set[int] = set()
            for c in range(t.chunk, t.chunk + t.nchunks):
                w = writers.get((t.src, c))
                if w:
                    found.update(w)
            deps.append(sorted(found))
            tid += 1
        for k, t in enumerate(step.transfers):
            for c in range(t.chunk, t.chunk + t.nchunks):
                writers.setdefault((t.dst, c), []).append(first + k)
    return deps
