"""The event-driven replay of a tenant trace on one rack, in virtual time.

The engine is SimPy (a discrete-event library): the events here are whole-job ones (arrivals,
rounds ending), for which a process-based scheduler is the natural fit; the project's fluid
engine (:mod:`emulation.flowsim.engine`) shares links between transfers, which no event here
needs.

The job manager (Propius, arXiv 2510.19617, adapted from federated clients to accelerator
slices): a job is admitted at check-in unless it asks for more accelerators than its pool has
(rejected); each of its rounds is a *request* for a slice. Whenever a request arrives or a round
ends, the waiting requests are ordered by the policy's score and each in turn gets a slice if
the allocator finds one (later requests may pass one that does not fit: backfilling). Policies:

- ``fifo``: earliest check-in first;
- ``random``: a fresh seeded random order at every pass;
- ``srtf``: shortest estimated remaining time first (``elapsed / rounds done x rounds left``;
  before its first round, the job's declared rounds x round time);
- ``srdf``: smallest remaining demand first (accelerators x rounds left);
- ``las``: least attained service first (accelerator-seconds held so far);
- ``irs``: requests grouped by their constraint (here: the slice size), the group whose free
  placements are scarcest first, within a group ascending total demand.

``static`` partitioning (Propius' baseline): the rack is cut into equal contiguous partitions,
tenant t's jobs use only partition ``t mod P``, FIFO inside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import simpy

from emulation.planners.allocators import Allocation, ClusterState, TorusContiguous
from emulation.workloads.tenant_jobs import Job
from topologies.torus_rack import TorusRack

POLICIES = ("fifo", "random", "srtf", "srdf", "las", "irs")


@dataclass
class Request:
    """One round's request for a slice and what became of it (times in s of virtual time)."""

    job: Job
    round: int
    t_request: float
    t_start: float | None = None
    t_end: float | None = None
    bandwidth: float | None = None
    contiguous: bool | None = None
    servers: tuple[int, ...] = ()
    fragmented: bool = False  # refused at least once while enough accelerators were free


@dataclass
class Replay:
    """What a replay produced: every request, the jobs rejected at admission, each job's end."""

    requests: list[Request] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)
    job_end: dict[int, float] = field(default_factory=dict)
    usable_accelerators: int = 0


class _JobState:
    __slots__ = ("job", "done", "attained", "first_start")

    def __init__(self, job: Job):
        self.job = job
        self.done = 0
        self.attained = 0.0
        self.first_start: float | None = None


def static_partitions(rack: TorusRack, count: int) -> list[frozenset[int]]:
    """``count`` disjoint contiguous partitions of equal size covering the rack's servers.

    :raises ValueError: the rack does not split into ``count`` legal blocks."""
    if count < 1 or rack.servers % count:
        raise ValueError(f"static_partitions: {rack.servers} servers do not split into {count} equal partitions")
    size = rack.accelerators // count
    try:
        shape = rack.shape_for(size)
    except ValueError:
        raise ValueError(f"static_partitions: {count} partitions of {size} accelerators are not a legal shape") from None
    out, used = [], set()
    for b in rack.blocks(shape):
        servers = frozenset(rack.server_of(a) for a in rack.members(b))
        if not servers & used:
            out.append(servers)
            used |= servers
    if len(out) != count:
        raise ValueError(f"static_partitions: the rack does not tile into {count} blocks of {size}")
    return out


def simulate_job_manager(rack: TorusRack, jobs: list[Job], allocator: TorusContiguous, policy: str, *,
                         spares: int = 0, partitions: int | None = None, seed: int = 0,
                         reconfiguration_delay_s: float = 0.0) -> Replay:
    """Simulate Propius' job manager (arXiv 2510.19617, module doc) on ``rack`` over the trace
    ``jobs`` (in arrival order), in virtual time: ``allocator`` (a
    :class:`~emulation.planners.allocators.TorusContiguous` or
    :class:`~emulation.planners.allocators.Photonic`) places the slices, ``policy`` (one of
    :data:`POLICIES`) orders the waiting requests; with ``partitions``, static partitioning
    instead (FIFO inside each partition).

    :param spares: servers held back from tenants (:class:`~emulation.planners.allocators.ClusterState`).
    :param partitions: static partitions (``None``: one shared pool).
    :param seed: the ``random`` policy's seed.
    :param reconfiguration_delay_s: R, added to a round whose slice has circuits to set (s).
    :returns: every request with its times (s), the rejected jobs, each completed job's end (s).
    :raises ValueError: an unknown policy, partitions that do not tile the rack, partitions with
        spares, or spares not fewer than the rack's servers.
    :raises RackError: a job asks for a size no legal shape has.
    """
    if policy not in POLICIES:
        raise ValueError(f"scheduler: {policy!r} is not one of {', '.join(POLICIES)}")
    env = simpy.Environment()
    state = ClusterState(rack, spares)
    parts = static_partitions(rack, partitions) if partitions else None
    if parts and spares:
        raise ValueError("spares: static partitioning covers the whole rack; use spares: 0")
    rng = np.random.default_rng(seed)
    out = Replay(usable_accelerators=state.usable_accelerators)
    jobs_state: dict[int, _JobState] = {}
    waiting: list[Request] = []

    def pool_of(job: Job) -> frozenset[int] | None:
        return parts[job.tenant % len(parts)] if parts else None

    def free_in(pool) -> int:
        return len(state.free if pool is None else state.free & pool) * rack.per_server

    def score_order() -> list[Request]:
        if parts or policy == "fifo":
            return sorted(waiting, key=lambda r: (r.job.arrival_s, r.job.id))
        if policy == "random":
            return [waiting[i] for i in rng.permutation(len(waiting))]
        now = env.now

        def left(r):
            return r.job.rounds - jobs_state[r.job.id].done

        if policy == "srtf":
            def remaining(r):
                js = jobs_state[r.job.id]
                if js.done == 0:
                    return r.job.rounds * r.job.round_s
                return (now - js.first_start) / js.done * left(r)
            return sorted(waiting, key=lambda r: (remaining(r), r.job.id))
        if policy == "srdf":
            return sorted(waiting, key=lambda r: (r.job.accelerators * left(r), r.job.id))
        if policy == "las":
            return sorted(waiting, key=lambda r: (jobs_state[r.job.id].attained, r.job.id))
        # irs: scarcest size first, then ascending total demand
        scarcity = {n: allocator.placements(state, n) for n in {r.job.accelerators for r in waiting}}
        return sorted(waiting, key=lambda r: (scarcity[r.job.accelerators], r.job.accelerators * left(r), r.job.id))

    def schedule() -> None:
        refused: set[tuple[int, frozenset | None]] = set()
        for req in score_order():
            n, pool = req.job.accelerators, pool_of(req.job)
            if not state.free:
                break
            a = None if (n, pool) in refused else allocator.allocate(state, n, pool)
            if a is None:
                refused.add((n, pool))  # the state only shrinks in this pass: the same size fails again
                if free_in(pool) >= n:
                    req.fragmented = True
                continue
            state.take(a)
            waiting.remove(req)
            env.process(run_round(req, a))

    def run_round(req: Request, a: Allocation):
        req.t_start, req.bandwidth, req.contiguous, req.servers = env.now, a.bandwidth, a.contiguous, a.servers
        js = jobs_state[req.job.id]
        if js.first_start is None:
            js.first_start = env.now
        yield env.timeout(req.job.round_at(a.bandwidth) + (reconfiguration_delay_s if a.circuits else 0.0))
        req.t_end = env.now
        state.release(a)
        js.done += 1
        js.attained += req.job.accelerators * (req.t_end - req.t_start)
        if js.done < req.job.rounds:
            ask(req.job, js.done)
        else:
            out.job_end[req.job.id] = env.now
        schedule()

    def ask(job: Job, k: int) -> None:
        r = Request(job, k, env.now)
        out.requests.append(r)
        waiting.append(r)

    def arrivals():
        for job in jobs:
            if job.arrival_s > env.now:
                yield env.timeout(job.arrival_s - env.now)
            pool = pool_of(job)
            capacity = len(pool) * rack.per_server if pool is not None else state.usable_accelerators
            if job.accelerators > capacity:
                out.rejected.append(job.id)
                continue
            jobs_state[job.id] = _JobState(job)
            ask(job, 0)
            schedule()

    env.process(arrivals())
    env.run()
    return out
