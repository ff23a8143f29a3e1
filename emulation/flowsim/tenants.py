"""Several tenants' workloads at once on one fabric, in virtual time (the fluid model).

Each tenant runs its own :class:`~emulation.workloads.model.Workload` round-synchronously on its
own GPUs (``gpus[rank]``), from its own start time, and knows nothing of the others; their flows
share one :class:`~emulation.flowsim.engine.FluidEngine`, so where their paths meet (an
electrical switch's port, a shared circuit) every flow gets its max-min fair share, and where
they do not (each tenant on circuits of its own) they run as if alone. The fabric holds one
configuration for the whole run: circuits are set when tenants are placed (Morphlux sets them at
allocation), not per step.

Cost model as :mod:`emulation.flowsim.simulate`: a transfer is split over its channel paths,
released at its step's start, moves from ``release + alpha``; a piece is delivered ``hops x
delta`` after its fluid ends; a step ends with its last delivery and the tenant's next step
starts then.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from emulation.fabric import Configuration, Fabric
from emulation.flowsim.engine import DeadlockError, FluidEngine
from emulation.flowsim.simulate import LinkSpace, SimulationError
from emulation.routing import RoutingError
from emulation.workloads.model import Tenant


@dataclass
class TenantRun:
    """What one tenant did: its step end times (s) and completion time (last end minus start)."""

    name: str
    start_s: float
    step_end_s: list[float] = field(default_factory=list)

    @property
    def time_s(self) -> float:
        """Completion time, s."""
        return (self.step_end_s[-1] if self.step_end_s else self.start_s) - self.start_s


def simulate_tenants(fabric: Fabric, configuration: Configuration, tenants: list[Tenant], *,
                     alpha_s: float = 0.0, delta_s: float = 0.0) -> list[TenantRun]:
    """Run every tenant at once (module doc); one :class:`TenantRun` per tenant, in order.

    :raises SimulationError: a tenant's ranks do not match its GPUs, GPUs are shared between
        tenants or out of range, a transfer cannot be routed, or the flows deadlock.
    """
    seen: set[int] = set()
    for t in tenants:
        if len(t.gpus) != t.workload.ranks:
            raise SimulationError(f"tenant {t.name}: {t.workload.ranks} ranks on {len(t.gpus)} GPUs")
        if set(t.gpus) & seen or not all(0 <= g < fabric.gpus for g in t.gpus) or len(set(t.gpus)) != len(t.gpus):
            raise SimulationError(f"tenant {t.name}: GPUs {list(t.gpus)} overlap another tenant's or the fabric's range")
        seen |= set(t.gpus)
    space = LinkSpace(fabric)
    routes, gid = space.routes(configuration)
    eng = FluidEngine(space.capacity(gid))
    runs = [TenantRun(t.name, t.start_s) for t in tenants]
    step_of = [0] * len(tenants)
    # per live step: (tenant, fin array, hops array, transfer-of-piece, pieces left)
    live: dict[int, list] = {}
    owner = {}  # engine flow id -> (tenant, piece index)

    def release(k: int, at: float) -> None:
        """Release tenant k's next non-empty step at ``at`` (steps without transfers end at once)."""
        t = tenants[k]
        steps = t.workload.steps
        while step_of[k] < len(steps) and not steps[step_of[k]].transfers:
            runs[k].step_end_s.append(at)
            step_of[k] += 1
        if step_of[k] == len(steps):
            return
        st = steps[step_of[k]]
        g = np.asarray(t.gpus, dtype=np.int64)
        src = g[[x.src for x in st.transfers]]
        dst = g[[x.dst for x in st.transfers]]
        nb = np.array([x.bytes for x in st.transfers], dtype=float)
        try:
            sf = routes.subflow_arrays(src, dst)
        except RoutingError as e:
            raise SimulationError(f"tenant {t.name}: {e}") from None
        fbytes = sf.flow_bytes(nb)
        fin = np.full(fbytes.size, at + alpha_s)
        moving = np.flatnonzero(fbytes > 0)
        live[k] = [fin, sf.hops, moving.size, sf.transfer]
        if moving.size:
            sel = np.isin(sf.pair_flow, moving)
            local = np.full(fbytes.size, -1, dtype=np.int64)
            local[moving] = np.arange(moving.size)
            ids = eng.add(fbytes[moving], fin[moving], local[sf.pair_flow[sel]], sf.pair_link[sel])
            for i, piece in zip(ids.tolist(), moving.tolist()):
                owner[i] = (k, piece)
        else:
            finish(k)

    def finish(k: int) -> None:
        fin, hops, _, _ = live.pop(k)
        end = float((fin + hops * delta_s).max())
        runs[k].step_end_s.append(end)
        step_of[k] += 1
        release(k, end)

    try:
        for k, t in enumerate(tenants):  # a later start is a later activation: the engine waits for it
            release(k, t.start_s)
        while (ev := eng.step()) is not None:
            t_ev, done = ev
            for i in done.tolist():
                k, piece = owner.pop(i)
                rec = live[k]
                rec[0][piece] = t_ev
                rec[2] -= 1
                if rec[2] == 0:
                    finish(k)
    except DeadlockError as e:
        raise SimulationError(str(e)) from None
    return runs
