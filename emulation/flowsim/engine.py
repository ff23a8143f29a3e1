"""The fluid engine: flows of bytes over links of given capacity, advanced event to event.

Between two events every active flow moves at its max-min fair rate
(:func:`~emulation.flowsim.maxmin.max_min_rates`); events are a flow becoming active, a flow
finishing, and a scheduled capacity change (a dark window starting or ending). Rates are
recomputed at every event, so the allocation is exact for piecewise-constant demand.

Only live flows are kept in the working arrays (they are compacted as flows finish), so the
cost of an event is proportional to the flows in the network, not to the flows of the run.

A flow's path is given as (flow, link) pairs or, when a *lane* order of the links makes paths
contiguous (a ring of links: :class:`~emulation.routing.LinkRuns`), as runs of lanes: then an
event costs O(flows + links) whatever the paths' lengths
(:func:`~emulation.flowsim.maxmin.max_min_rates_runs`).

Spec: ``docs/architecture.md`` (flow-level backend).
"""

from __future__ import annotations

import heapq

import numpy as np

from emulation.flowsim.maxmin import max_min_rates, max_min_rates_runs

#: Relative tolerance under which flows finishing together are finished in one event.
SAME_TIME = 1e-12
#: Bytes below which a flow counts as delivered: rounding residue when a capacity change (a
#: slot's end) stops a flow that its slot carried exactly.
RESIDUE_BYTES = 1e-6


class DeadlockError(RuntimeError):
    """Flows remain but none can progress and nothing is scheduled that would change that
    (e.g. a flow crosses a link that is dark for ever)."""


class FluidEngine:
    """Flows over directed links; times in seconds, sizes in bytes, capacities in bytes/s.

    :param capacity: (L,) capacity of every link, bytes/s.
    :param now: start time, seconds.
    :param lane: (P,) link at each lane position (each link at most once), for flows added as
        runs (:meth:`add_runs`); None: the lanes are the links.
    """

    def __init__(self, capacity: np.ndarray, now: float = 0.0, lane: np.ndarray | None = None):
        self.capacity = np.asarray(capacity, dtype=float).copy()
        self.now = float(now)
        self.lane = None if lane is None else np.asarray(lane, dtype=np.int64)
        self._next_id = 0
        self._ids = np.zeros(0, dtype=np.int64)  # global id of each live flow
        self._left = np.zeros(0)  # bytes left
        self._t_act = np.zeros(0)  # activation time
        self._pf = np.zeros(0, dtype=np.int64)  # runs: live-flow position
        self._ps = np.zeros(0, dtype=np.int64)  # runs: first lane (the link, for a pair)
        self._pn = np.zeros(0, dtype=np.int64)  # runs: lanes in the run
        self._unit = True  # every run is one link and the lanes are the links: plain pairs
        self._rate = np.zeros(0)
        self._dirty = True
        self._changes: list[tuple[float, int, np.ndarray, float]] = []  # heap (t, seq, links, cap)
        self._seq = 0

    def add(self, nbytes: np.ndarray, t_active: np.ndarray, pair_flow: np.ndarray,
            pair_link: np.ndarray) -> np.ndarray:
        """Add F flows.

        :param nbytes: (F,) bytes of each flow (> 0).
        :param t_active: (F,) when each starts moving (>= now), seconds.
        :param pair_flow: (N,) flow (0..F-1) of each (flow, link) pair; every flow has >= 1.
        :param pair_link: (N,) link of each pair.
        :returns: (F,) flow ids, increasing, unique over the engine's life.
        :raises ValueError: a flow starts in the past or has no bytes.
        """
        pair_link = np.asarray(pair_link, dtype=np.int64)
        if self.lane is not None:
            where = np.full(self.capacity.size, -1, dtype=np.int64)
            where[self.lane] = np.arange(self.lane.size)
            pair_link = where[pair_link]
        return self._add(nbytes, t_active, pair_flow, pair_link, np.ones(pair_link.size, dtype=np.int64))

    def add_runs(self, nbytes: np.ndarray, t_active: np.ndarray, run_flow: np.ndarray, run_start: np.ndarray,
                 run_length: np.ndarray) -> np.ndarray:
        """Add F flows whose paths are runs of lanes: flow ``run_flow[i]`` crosses the links
        ``lane[run_start[i]:run_start[i] + run_length[i]]`` (the engine's ``lane``).

        :param nbytes: (F,) bytes. :param t_active: (F,) activation times, s.
        :returns: (F,) flow ids. :raises ValueError: as :meth:`add`.
        """
        if self.lane is None:
            raise ValueError("runs need the engine's lane order")
        return self._add(nbytes, t_active, run_flow, run_start, run_length)

    def _add(self, nbytes, t_active, run_flow, run_start, run_length) -> np.ndarray:
        nbytes = np.asarray(nbytes, dtype=float)
        t_active = np.asarray(t_active, dtype=float)
        if nbytes.size and (nbytes.min() <= 0 or t_active.min() < self.now):
            raise ValueError("flows need positive bytes and an activation time not in the past")
        ids = np.arange(self._next_id, self._next_id + nbytes.size)
        self._next_id += nbytes.size
        base = self._ids.size
        run_length = np.asarray(run_length, dtype=np.int64)
        self._unit = self._unit and self.lane is None and bool((run_length == 1).all())
        self._ids = np.concatenate([self._ids, ids])
        self._left = np.concatenate([self._left, nbytes])
        self._t_act = np.concatenate([self._t_act, t_active])
        self._pf = np.concatenate([self._pf, np.asarray(run_flow, dtype=np.int64) + base])
        self._ps = np.concatenate([self._ps, np.asarray(run_start, dtype=np.int64)])
        self._pn = np.concatenate([self._pn, run_length])
        self._rate = np.concatenate([self._rate, np.zeros(nbytes.size)])
        self._dirty = True
        return ids

    def set_capacity(self, links: np.ndarray, capacity: float, at: float) -> None:
        """Set the capacity of ``links`` to ``capacity`` bytes/s at time ``at`` (>= now)."""
        if at < self.now:
            raise ValueError(f"capacity change at {at} s is in the past (now {self.now} s)")
        heapq.heappush(self._changes, (float(at), self._seq, np.asarray(links, dtype=np.int64), float(capacity)))
        self._seq += 1

    def _apply_changes(self) -> None:
        while self._changes and self._changes[0][0] <= self.now:
            _, _, links, cap = heapq.heappop(self._changes)
            self.capacity[links] = cap
            self._dirty = True

    def _rates(self, active: np.ndarray) -> None:
        pos = np.flatnonzero(active)
        local = np.full(self._ids.size, -1, dtype=np.int64)
        local[pos] = np.arange(pos.size)
        sel = active[self._pf]
        self._rate = np.zeros(self._ids.size)
        if self._unit:
            self._rate[pos] = max_min_rates(local[self._pf[sel]], self._ps[sel], self.capacity, pos.size)
        else:
            self._rate[pos] = max_min_rates_runs(local[self._pf[sel]], self._ps[sel], self._pn[sel], self.lane,
                                                 self.capacity, pos.size)
        self._dirty = False

    def step(self) -> tuple[float, np.ndarray] | None:
        """Advance to the next event.

        :returns: ``(time, ids of the flows that finished then)`` (possibly none, for an
            activation or a capacity change), or None when no flow is live.
        :raises DeadlockError: flows are live but can never finish.
        """
        self._apply_changes()
        if not self._ids.size:
            return None
        active = self._t_act <= self.now
        if self._dirty:
            self._rates(active)
        moving = active & (self._rate > 0)
        t_done = t_next = np.inf
        ttf = None
        if moving.any():
            ttf = np.full(self._ids.size, np.inf)
            ttf[moving] = self._left[moving] / self._rate[moving]
            ttf_min = float(ttf.min())
            t_done = t_next = self.now + ttf_min
        waiting = ~active
        if waiting.any():
            t_next = min(t_next, float(self._t_act[waiting].min()))
        if self._changes:
            t_next = min(t_next, self._changes[0][0])
        if not np.isfinite(t_next):
            raise DeadlockError(f"{self._ids.size} flows are stuck at t = {self.now} s (a dark link for ever?)")
        dt = t_next - self.now
        done = np.zeros(self._ids.size, dtype=bool)
        if ttf is not None:
            # Decide completions from the times to finish, not from dt: at large t, now + ttf
            # can round back to now, and a residue of bytes must not stall the clock.
            done = ttf <= (ttf_min if t_next == t_done else dt) * (1 + SAME_TIME)
            self._left -= self._rate * dt
            done |= moving & (self._left <= RESIDUE_BYTES)
            self._left[done] = 0.0
        if (waiting & (self._t_act <= t_next)).any():
            self._dirty = True
        self.now = t_next
        finished = self._ids[done]
        if done.any():
            self._remove(done)
        self._apply_changes()
        return self.now, finished

    def _remove(self, done: np.ndarray) -> None:
        keep = ~done
        newpos = np.cumsum(keep) - 1
        pkeep = keep[self._pf]
        self._pf = newpos[self._pf[pkeep]]
        self._ps, self._pn = self._ps[pkeep], self._pn[pkeep]
        self._ids, self._left, self._t_act = self._ids[keep], self._left[keep], self._t_act[keep]
        self._rate = self._rate[keep]
        self._dirty = True
