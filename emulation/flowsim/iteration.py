"""Replay a training iteration's phase trace on rails in virtual time, with the Opus control
protocol (arXiv 2507.08119) deciding when each rail's circuits change.

Input: an :class:`~emulation.workloads.iteration.IterationTrace` (one rail: its ranks are the
servers) and a :class:`~topologies.rail_network.RailNetwork` (port rate, ports per GPU on the
rail, electrical or photonic).
Every rank runs its program; an op starts when its inputs allow:

- ``compute``: at once, for its seconds;
- a collective (``allreduce``, ``alltoall``): when every member of its group has reached it and
  the group's circuits are live; it lasts what the flow engine gives for that collective on that
  segment alone (:meth:`~topologies.rail_network.RailNetwork.seconds`: a ring of circuits through
  the members, or the electrical rail);
- ``send``: when the pair's circuits are live (eager: the receiver need not be there);
  ``recv``: when the message has arrived. A receive whose message is in, or on its way, needs
  no circuit and asks for none: its sender may have left the phase, and the check-in would wait
  for it forever.

**Segments.** A group's circuits occupy rail ports (``(rank, port)``): a DP, EP or expert-DP
ring uses every rail port of its members (a pair of ranks gets ``ports_per_gpu`` parallel circuits,
a ring ``ports_per_gpu / 2`` to each neighbour); a pipeline pair uses every port with 2 stages,
otherwise the lower half of the downstream stage's ports and the upper half of the upstream's,
so both links of a middle stage coexist. Two groups *conflict* when they share a port.

**Control** (``mode``):

- ``eps``: electrical rails, every pair reachable, no controller (the baseline);
- ``on-demand``: a rank asks for its group's configuration before its first op of every phase (a
  run of its ops on one group not broken by an op on a conflicting group). An unchanged
  configuration (the group's circuits are in place) is answered at once; otherwise the controller
  waits until every member has asked (or holds it already), reconfigures the ports that differ
  (after the ops in flight on them end; dark for R) and answers. A request and its answer each
  take ``control_rtt_s / 2``.
- ``speculative``: as on-demand, and when a rank's next comm op is on a conflicting group it asks
  for that group's configuration as soon as its current op ends, without blocking; the
  controller acts on that first request at once (waiting for the others would lose the point),
  so R runs during the rank's compute. A member still inside its previous phase loses the
  circuits it was using and asks for them again, on demand: where phases are short and
  interleaved this costs extra reconfigurations (the reversal the paper reports for MoE).
- ``speculative-deferred``: ranks ask as early as in ``speculative``, but the controller keeps
  the on-demand rule (every member has asked) and never takes ports from a rank still inside its
  phase (it holds or awaits their configuration and has asked for nothing else since): safe on a
  real fabric, where cutting a circuit under a collective in flight would strand it, and what the
  packet backend's Opus app does. R is hidden when every member's previous phase ends before the
  compute gap does.

In every mode but ``speculative``, a configuration that would take circuits from a rank still
inside its phase waits until that rank asks for something else.

When circuits are granted is the Opus rule, :mod:`emulation.planners.opus` (``speculative``
preempts, the other modes do not); the controller app :mod:`controllers.opus` decides with the
same rule.

**Engine.** One :class:`~emulation.flowsim.events.Clock` (SimPy's semantics, with actions at
exact times): every rank is a process running its program. At a comm op it waits to be
woken: the op's start wakes every member for the op's end (in
the group's member order), an answer or a delivery triggers it *urgently*, processed before any
other event of that instant, so the rank goes on exactly when the answer arrives. Messages to
and from the controller, a send's delivery and the check when circuits go live are timed events
whose callbacks handle them. Events of one instant run in the order they were scheduled, each at
exactly the time computed for it: the replay is deterministic.

Rails are identical (every rank of a server runs the same program on its own rail), so one rail
gives the iteration time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Literal

from emulation.flowsim.events import URGENT, WAIT, Clock
from emulation.flowsim.rail_times import op_seconds
from emulation.flowsim.simulate import SimulationError
from emulation.planners.opus import Grant, OpusRule
from emulation.workloads.iteration import Group, IterationTrace, Op
from topologies.rail_network import RailNetwork

Mode = Literal["eps", "on-demand", "speculative", "speculative-deferred"]
MODES: tuple[str, ...] = ("eps", "on-demand", "speculative", "speculative-deferred")


@dataclass
class Reconfiguration:
    """One reconfiguration of a rail: the group it served, when it started (``t_start``, seconds
    of virtual time, after the ops in flight on its ports), how long the changed ports were dark
    (``dark_s``), how many changed, and whether a speculative request caused it."""

    group: str
    t_start: float
    dark_s: float
    ports: int
    speculative: bool


@dataclass
class PhaseInterval:
    """What rank ``rank`` did in iteration ``iteration`` from ``t0`` to ``t1`` (seconds of
    virtual time): ``kind`` ``compute``, its comm op's kind (``allreduce``, ``alltoall``,
    ``send``) or ``wait-<why>`` (``members``, ``controller``, ``message``), in phase ``phase``
    on group ``group`` of dimension ``dim``."""

    rank: int
    iteration: int
    t0: float
    t1: float
    kind: str
    phase: str
    group: str = ""
    dim: str = ""


@dataclass
class IterationResult:
    """A replay, in seconds of virtual time: ``iteration_s`` is the steady iteration time (mean
    over the iterations after the first: the first starts from an unconfigured rail);
    ``iterations_end_s[i]`` when the last rank finished iteration i; ``control_wait_s`` the most
    any rank was blocked on the controller per steady iteration (asking, waiting for all members
    to ask, dark windows); reconfigurations per steady iteration (those a speculative request
    caused apart); ``reconfigurations`` and ``intervals`` (if recorded) over the whole replay."""

    mode: str
    reconfiguration_delay_s: float
    control_rtt_s: float
    iteration_s: float
    iterations_end_s: list[float]
    control_wait_s: float
    reconfigurations_per_iteration: float
    speculative_reconfigurations_per_iteration: float
    reconfigurations: list[Reconfiguration] = field(default_factory=list)
    intervals: list[PhaseInterval] = field(default_factory=list)


class _Rank:
    __slots__ = ("proc", "armed", "pc", "coll_seq", "waiting", "wait_t0", "control_wait")

    def __init__(self, iterations: int) -> None:
        self.proc: Generator | None = None  # the rank's process
        self.armed = False  # its process waits at a comm op and has not been woken yet
        self.pc = 0
        self.coll_seq: dict[str, int] = {}
        self.waiting = ""  # what the rank waits for at its current op (members, controller, message)
        self.wait_t0 = 0.0
        self.control_wait = [0.0] * iterations


class _Replay:
    """One replay (module doc)."""

    def __init__(self, trace: IterationTrace, net: RailNetwork, mode: str, R: float, rtt: float, iterations: int,
                 record: bool):
        self.tr, self.net, self.mode, self.R, self.rtt = trace, net, mode, R, rtt
        self.iters = iterations
        self.record = record
        self.n = trace.ranks
        self.prog = trace.programs
        self.len = [len(p) for p in self.prog]
        self.total = [k * iterations for k in self.len]
        self.ranks = [_Rank(iterations) for _ in range(self.n)]
        self.env = Clock()
        self.ports = {g: self._segment(trace.groups[g]) for g in trace.groups}
        # groups with the same circuits share a configuration (e.g. a 2-stage pipeline's link and
        # its model-parallel group)
        self.key = {g: self._key(trace.groups[g]) for g in trace.groups}
        self.rule = OpusRule(self._granted, preempt=mode == "speculative")
        for g, grp in trace.groups.items():
            self.rule.add_group(g, grp.members, self.ports[g], self.key[g])
        self.live_at: dict[tuple[int, int], float] = {}
        self.busy: dict[tuple[int, int], float] = {}
        self.arrived: dict[tuple[str, int], set[int]] = {}
        self.delivered: dict[tuple[int, str], float] = {}
        self.recv_wait: dict[tuple[int, str], int] = {}
        self.in_flight: set[tuple[int, str]] = set()  # messages sent and not yet delivered
        self.reconfigs: list[Reconfiguration] = []
        self.intervals: list[PhaseInterval] = []
        self.done_at = [[0.0] * iterations for _ in range(self.n)]
        self.asks_left = 200 * sum(self.len) * iterations + 10_000  # more: groups livelock

    def _segment(self, g: Group) -> tuple[tuple[int, int], ...]:
        P = self.net.ports_per_gpu
        if g.dim == "pp" and self.tr.parallel.pp > 2:
            up, down = g.members
            return tuple((up, p) for p in range(P // 2, P)) + tuple((down, p) for p in range(P // 2))
        return tuple((m, p) for m in g.members for p in range(P))

    def _key(self, g: Group) -> tuple:
        if g.dim in ("pp", "mp") and self.tr.parallel.pp > 2 and len(g.members) == 2:
            return ("link",) + g.members
        return ("ring",) + (g.members if len(g.members) > 2 else tuple(sorted(g.members)))

    # -- engine -----------------------------------------------------------------------------
    def _after(self, delay: float, fn: Callable, *args) -> None:
        """Call ``fn(*args)`` ``delay`` seconds from now (a message, a delivery)."""
        self.env.after(delay, fn, *args)

    def _call_at(self, t: float, fn: Callable, *args) -> None:
        """Call ``fn(*args)`` at time ``t`` (an answer, a check when circuits go live)."""
        self.env.at(t, fn, *args)

    def _wake(self, r: int, t: float | None = None, done: str = "") -> None:
        """Wake rank ``r`` at ``t`` after the end of its op on group ``done``, or now, before
        anything else, to go on from its op.

        :raises RuntimeError: the rank was woken already at this op."""
        rk = self.ranks[r]
        if not rk.armed:
            raise RuntimeError(f"rank {r} was woken twice at one op")
        rk.armed = False
        if t is None:
            self.env.resume(rk.proc, self.env.now, "", URGENT)
        else:
            self.env.resume(rk.proc, t, done)

    def run(self) -> None:
        """Run every rank's program to its end.

        :raises SimulationError: the ranks livelock or deadlock.
        """
        for r in range(self.n):
            self.ranks[r].proc = self._program(r)
            self.env.process(self.ranks[r].proc)
        self.env.run()
        stuck = [r for r in range(self.n) if self.ranks[r].pc < self.total[r]]
        if stuck:
            r = stuck[0]
            op = self._op(r)
            raise SimulationError(f"iteration replay deadlocked: rank {r} waits at {op.kind} {op.phase} "
                                  f"on {op.group or '-'} ({self.ranks[r].waiting})")

    def _op(self, r: int) -> Op:
        return self.prog[r][self.ranks[r].pc % self.len[r]]

    def _iteration(self, r: int) -> int:
        return self.ranks[r].pc // self.len[r]

    # -- ranks ------------------------------------------------------------------------------
    def _program(self, r: int) -> Generator:
        """Rank ``r`` (a process): each op in turn, waiting where its inputs are not there."""
        rk = self.ranks[r]
        env = self.env
        while rk.pc < self.total[r]:
            op = self._op(r)
            t = env.now
            if op.kind == "compute":
                self._log(r, t, t + op.seconds, "compute", op)
                rk.pc += 1
                self._maybe_done(r, t + op.seconds)
                yield op.seconds
                continue
            g = op.group
            rk.armed = True
            key = (self._iteration(r), op.message) if op.kind == "recv" else None
            if key is not None and key in self.delivered:  # a receive needs no circuit once the data is in
                rk.pc += 1
                self._maybe_done(r, t)
                self._speculate(r, g)
                continue
            if self.mode != "eps" and not self.rule.holds(r, g) and key not in self.in_flight:
                if not self.rule.has_asked(r, g):
                    self._ask(r, g, speculative=False)
                self._wait(r, "controller")
            elif key is not None:
                self.recv_wait[key] = r
                self._wait(r, "message")
            else:
                self._try_start(r, op)  # if it starts, every member is woken at its end
            done = yield WAIT
            if done:
                self._speculate(r, done)
            elif rk.waiting:
                self._stop_wait(r, env.now)

    def _wait(self, r: int, why: str) -> None:
        rk = self.ranks[r]
        rk.waiting, rk.wait_t0 = why, self.env.now

    def _stop_wait(self, r: int, t: float) -> None:
        rk = self.ranks[r]
        if rk.waiting == "controller":
            rk.control_wait[min(self._iteration(r), self.iters - 1)] += t - rk.wait_t0
        if self.record and t > rk.wait_t0:
            op = self._op(r)
            self.intervals.append(PhaseInterval(r, self._iteration(r), rk.wait_t0, t, "wait-" + rk.waiting,
                                                op.phase, op.group, self.tr.groups[op.group].dim if op.group else ""))
        rk.waiting = ""

    def _maybe_done(self, r: int, t: float) -> None:
        rk = self.ranks[r]
        if rk.pc % self.len[r] == 0 and rk.pc:
            self.done_at[r][rk.pc // self.len[r] - 1] = t

    def _log(self, r: int, t0: float, t1: float, kind: str, op: Op) -> None:
        if self.record:
            self.intervals.append(PhaseInterval(r, self._iteration(r), t0, t1, kind, op.phase, op.group,
                                                self.tr.groups[op.group].dim if op.group else ""))

    def _live(self, g: str, t: float) -> float | None:
        """When ``g``'s circuits are (or become) live, or None if it does not own its ports."""
        if self.mode == "eps":
            return t
        if not self.rule.in_place(g):
            return None
        return max([t] + [self.live_at[p] for p in self.ports[g]])

    def _try_start(self, r: int, op: Op) -> None:
        """Start ``op`` of rank ``r`` if it can (every member is woken at its end); otherwise leave
        the rank waiting."""
        t = self.env.now
        rk = self.ranks[r]
        g = op.group
        grp = self.tr.groups[g]
        if op.kind == "send":
            members = [r]
        else:
            key = (g, rk.coll_seq.get(g, 0))
            self.arrived.setdefault(key, set()).add(r)
            if len(self.arrived[key]) < len(grp.members):
                self._wait(r, "members")
                return
            members = list(grp.members)
        live = self._live(g, t)
        if live is None:  # lost its circuits since the answer: ask again, on demand
            for m in members:
                self.rule.drop(m, g)
                self._wait(m, "controller")
                if not self.rule.has_asked(m, g):
                    self._ask(m, g, speculative=False)
            return
        if live > t:
            for m in members:
                self._wait(m, "controller")
            self._call_at(live, self._retry, r)
            return
        if self.mode == "eps":
            seg = "eps"
        elif self.key[g][0] == "link":
            seg = "link"
        else:
            seg = "ring"
        n = 2 if op.kind == "send" else len(grp.members)
        dur = op_seconds(self.net, op.kind, n, op.bytes, seg)
        end = t + dur
        for p in self.ports.get(g, ()):
            self.busy[p] = max(self.busy.get(p, 0.0), end)
        if op.kind == "send":
            self._log(r, t, end, op.kind, op)
            self.in_flight.add((self._iteration(r), op.message))
            self._after(dur, self._deliver, (self._iteration(r), op.message))
        else:
            del self.arrived[key]
        for m in members:
            mk = self.ranks[m]
            if mk.waiting:
                self._stop_wait(m, t)
            if op.kind != "send":
                self._log(m, t, end, op.kind, self._op(m))
                mk.coll_seq[g] = mk.coll_seq.get(g, 0) + 1
            mk.pc += 1
            self._maybe_done(m, end)
            self._wake(m, end, g)

    def _retry(self, r: int) -> None:
        """``r``'s group's circuits went live: start its op if it still waits for them."""
        rk = self.ranks[r]
        if rk.pc >= self.total[r]:
            return
        op = self._op(r)
        if op.is_comm and op.kind != "recv" and rk.waiting == "controller" and self.rule.holds(r, op.group):
            if op.kind != "send":
                self.arrived.get((op.group, rk.coll_seq.get(op.group, 0)), set()).discard(r)
            self._try_start(r, op)

    def _speculate(self, r: int, g: str) -> None:
        """In the speculative modes, after an op on ``g``: ask for the next comm op's group at once
        if it starts a new phase."""
        if self.mode.startswith("speculative"):
            nxt = self._next_comm_group(r)
            if self.rule.asks_ahead(r, g, nxt):
                self._ask(r, nxt, speculative=True)

    def _next_comm_group(self, r: int) -> str:
        rk = self.ranks[r]
        for pc in range(rk.pc, min(self.total[r], rk.pc + self.len[r])):
            op = self.prog[r][pc % self.len[r]]
            if op.is_comm:
                return op.group
        return ""

    def _deliver(self, key: tuple[int, str]) -> None:
        self.in_flight.discard(key)
        self.delivered[key] = self.env.now
        r = self.recv_wait.pop(key, None)
        if r is not None:
            self._wake(r)

    # -- controller -------------------------------------------------------------------------
    def _ask(self, r: int, g: str, speculative: bool) -> None:
        self.asks_left -= 1
        if self.asks_left < 0:
            raise SimulationError("iteration replay does not converge (livelock between groups)")
        self.rule.ask(r, g)
        self._after(self.rtt / 2, self.rule.request, r, g, speculative)

    def _granted(self, grant: Grant) -> None:
        """The rule granted a configuration now: its changed ports go dark after the ops in flight
        on them; the pending ranks are answered once its circuits are live."""
        t, g = self.env.now, grant.group
        if grant.changed:
            t0 = max([t] + [self.busy.get(p, 0.0) for p in grant.changed])
            for p in grant.changed:
                self.live_at[p] = t0 + self.R
            for h in grant.lost:
                for m in self.tr.groups[h].members:
                    mk = self.ranks[m]
                    # a member blocked on h (a receive, the other members) asks for it again
                    if mk.waiting and mk.pc < self.total[m] and self._op(m).group == h \
                            and not self.rule.has_asked(m, h):
                        self._ask(m, h, speculative=False)
            self.reconfigs.append(Reconfiguration(g, t0, self.R, len(grant.changed), grant.speculative))
            ready = t0 + self.R
        else:
            ready = max([t] + [self.live_at[p] for p in self.ports[g]])
        for m in grant.ranks:
            self._call_at(ready + self.rtt / 2, self._answer, m, g)

    def _answer(self, r: int, g: str) -> None:
        self.rule.answer(r, g)
        rk = self.ranks[r]
        if rk.waiting == "controller" and rk.pc < self.total[r]:
            op = self._op(r)
            if op.group == g:
                if op.kind not in ("send", "recv"):
                    self.arrived.get((g, rk.coll_seq.get(g, 0)), set()).discard(r)
                self._wake(r)


def simulate_iteration(trace: IterationTrace, net: RailNetwork, mode: str, reconfiguration_delay_s: float = 0.0,
                       control_rtt_s: float = 0.0, iterations: int = 3, record: bool = False) -> IterationResult:
    """Replay ``iterations`` iterations of ``trace`` (one rail, module doc) on ``net`` under the
    Opus control ``mode`` (arXiv 2507.08119).

    :param mode: one of :data:`MODES`.
    :param reconfiguration_delay_s: R, seconds a changed port stays dark.
    :param control_rtt_s: a request's round trip to the controller, seconds.
    :param iterations: at least 2 (the steady time is the mean over all but the first).
    :param record: keep every interval of every rank (for timelines; costs memory).
    :returns: the :class:`IterationResult`, times in seconds.
    :raises ValueError: unknown mode, negative or infinite R, negative RTT, fewer than 2
        iterations, a ring of circuits on 1 rail port.
    :raises SimulationError: the replay livelocks or deadlocks (programs that cannot all finish).
    """
    if mode not in MODES:
        raise ValueError(f"mode: one of {', '.join(MODES)}, got {mode!r}")
    if not (reconfiguration_delay_s >= 0 and control_rtt_s >= 0 and math.isfinite(reconfiguration_delay_s)):
        raise ValueError("reconfiguration_delay_s, control_rtt_s: must be finite and >= 0")
    if iterations < 2:
        raise ValueError(f"iterations: at least 2 (the first starts unconfigured), got {iterations}")
    if net.ports_per_gpu < 2 and mode != "eps":
        ring = next((g for g in trace.groups.values() if len(g.members) > 2), None)
        if ring is not None:
            raise ValueError(f"ports_per_gpu: group {ring.id} of {len(ring.members)} ranks needs a ring of circuits, "
                             f"which takes 2 ports per GPU; the rail has 1")
    rp = _Replay(trace, net, mode, reconfiguration_delay_s, control_rtt_s, iterations, record)
    rp.run()
    ends = [max(rp.done_at[r][i] for r in range(rp.n)) for i in range(iterations)]
    steady = (ends[-1] - ends[0]) / (iterations - 1)
    t_first = ends[0]
    later = [c for c in rp.reconfigs if c.t_start >= t_first]
    waits = [sum(rk.control_wait[1:]) / (iterations - 1) for rk in rp.ranks]
    return IterationResult(mode, reconfiguration_delay_s, control_rtt_s, steady, ends,
                           max(waits) if waits else 0.0, len(later) / (iterations - 1),
                           sum(c.speculative for c in later) / (iterations - 1), rp.reconfigs, rp.intervals)
