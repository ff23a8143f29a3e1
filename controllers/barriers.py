"""OpenFlow barriers sent to many switches at once and waited for together.

OS-Ken's ``os_ken.app.ofctl.api.send_msg(app, OFPBarrierRequest, reply_cls=...)`` waits for one
switch's reply at a time, through the ofctl service's event queue. A reconfiguration must take
effect on every affected bridge together, and its time is measured from the moment the last
reply arrives, so :meth:`Barriers.send_with_barriers` sends every bridge's batch and barrier
first and then waits for all replies at once (one round trip for N bridges), timestamping each as
the app's ``OFPBarrierReply`` handler receives it (:meth:`Barriers.replied`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable


class BarrierTimeout(RuntimeError):
    """A switch did not answer an OpenFlow barrier in time."""


class Barriers:
    """Outstanding barriers by ``(dpid, xid)``; thread-safe (OS-Ken's native hub runs handlers
    in real threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[tuple[int, int], threading.Event] = {}

    def send_with_barriers(self, batches: Iterable[tuple[object, Iterable]], timeout: float = 5.0) -> float:
        """Send every ``(dp, msgs)`` batch followed by a barrier to its switch, all switches at
        once, then wait for every reply; return the CLOCK_MONOTONIC time (s) the last one arrived.

        :raises BarrierTimeout: some reply did not come within ``timeout`` seconds.
        """
        waits = []
        for dp, msgs in batches:
            for m in msgs:
                dp.send_msg(m)
            req = dp.ofproto_parser.OFPBarrierRequest(dp)
            dp.set_xid(req)
            ev = threading.Event()
            with self._lock:
                self._waiting[(dp.id, req.xid)] = ev
            dp.send_msg(req)
            waits.append((dp.id, req.xid, ev))
        deadline = time.monotonic() + timeout
        for dpid, xid, ev in waits:
            if not ev.wait(max(0.0, deadline - time.monotonic())):
                with self._lock:
                    for d, x, _ in waits:
                        self._waiting.pop((d, x), None)
                raise BarrierTimeout(f"no barrier reply from dpid {dpid:#x} in {timeout} s")
        return time.monotonic()

    def replied(self, dpid: int, xid: int) -> None:
        """Called by the app that receives ``OFPBarrierReply``."""
        with self._lock:
            ev = self._waiting.pop((dpid, xid), None)
        if ev is not None:
            ev.set()
