"""A discrete-event clock for the flow engine's replays: actions at exact times, processes as
generators.

The rail replay (:mod:`emulation.flowsim.iteration`) wakes a waiting rank at a time computed
elsewhere (an answer at ``t0 + R + RTT/2``), with a value (the group whose op ended) and, for an
answer, urgently: before the other events of that instant. SimPy's public API has no way to
trigger an event with a value at a later time (``Event.succeed`` is now, a ``Timeout`` is never
urgent), and the replay wrote SimPy's private fields to do it. This clock does that with public
methods, and a callback at a time is a heap entry rather than an event object and a closure.
Its semantics are SimPy's otherwise:

- an action runs at its time ``t``; actions of one instant run in order of ``priority``
  (:data:`URGENT` before :data:`NORMAL`), then in the order they were scheduled;
- a process is a generator started by :meth:`Clock.process` at the current time, urgently, in the
  order processes were added. It yields a delay in seconds (resumed ``delay`` later, as a SimPy
  timeout) or :data:`WAIT` (resumed by :meth:`Clock.resume`, with the value it is sent).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Generator

#: Priorities of actions at one instant (SimPy's values).
URGENT, NORMAL = 0, 1

#: What a process yields to wait for :meth:`Clock.resume`.
WAIT = object()


class Clock:
    """One replay's time (``now``, seconds of virtual time) and its queue of actions."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, int, Callable, tuple]] = []
        self._seq = itertools.count()

    def at(self, t: float, fn: Callable, *args, priority: int = NORMAL) -> None:
        """Call ``fn(*args)`` at time ``t`` (seconds, >= ``now``) exactly.

        :raises ValueError: ``t`` is before ``now``."""
        if t < self.now:
            raise ValueError(f"time {t} is before now ({self.now})")
        heapq.heappush(self._queue, (t, priority, next(self._seq), fn, args))

    def after(self, delay: float, fn: Callable, *args) -> None:
        """Call ``fn(*args)`` at ``now + delay`` (a SimPy timeout's time and order)."""
        self.at(self.now + delay, fn, *args)

    def process(self, gen: Generator) -> None:
        """Start ``gen`` (module doc) now, before the actions of this instant scheduled normally."""
        self.at(self.now, self._step, gen, None, priority=URGENT)

    def resume(self, gen: Generator, t: float, value: object = None, priority: int = NORMAL) -> None:
        """Resume ``gen``, waiting on :data:`WAIT`, at time ``t`` with ``value`` (what its
        ``yield`` returns)."""
        self.at(t, self._step, gen, value, priority=priority)

    def _step(self, gen: Generator, value: object) -> None:
        try:
            got = gen.send(value)
        except StopIteration:
            return
        if got is not WAIT:
            self.after(got, self._step, gen, None)

    def run(self) -> None:
        """Run the actions, in time order, until none is left."""
        queue = self._queue
        while queue:
            t, _, _, fn, args = heapq.heappop(queue)
            self.now = t
            fn(*args)
