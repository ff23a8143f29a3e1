"""OpenFlow barriers sent to many switches at once and waited for together.

OS-Ken's ``os_ken.app.ofctl.api.send_msg(app, OFPBarrierRequest, reply_cls=...)`` waits for one
switch's reply at a time, through the ofctl service's event queue. A reconfiguration must take
effect on every affected bridge together, and its time is measured from the moment the last
reply arrives, so :meth:`Barriers.send_with_barriers` sends every bridge's batch and barrier
first and then waits for all replies at once (one round trip for N bridges), timestamping each as
the app's ``OFPBarrierReply`` handler receives it (:meth:`Barriers.replied`). A bridge's batch and
its barrier leave in one write: messages may be parser objects or their serialised bytes (an app
that sends the same rules again and again keeps the bytes, see :mod:`controllers.routing`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable


class BarrierTimeout(RuntimeError):
    """A switch did not answer an OpenFlow barrier in time."""


def wire_bytes(dp, msg) -> bytes:
    """OpenFlow message ``msg`` of ``dp``'s parser serialised (given an xid if it has none), as
    ``Datapath.send_msg`` would send it."""
    if msg.xid is None:
        dp.set_xid(msg)
    msg.serialize()
    return bytes(msg.buf)


class Barriers:
    """Outstanding barriers by ``(dpid, xid)``; thread-safe (OS-Ken's native hub runs handlers
    in real threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[tuple[int, int], threading.Event] = {}
        #: CLOCK_MONOTONIC time each outstanding barrier's reply reached :meth:`replied`
        self._arrived: dict[tuple[int, int], float] = {}

    def send_with_barriers(self, batches: Iterable[tuple[object, Iterable]], timeout: float = 5.0) -> float:
        """Send every ``(dp, msgs)`` batch followed by a barrier to its switch, all switches at
        once, then wait for every reply; return the CLOCK_MONOTONIC time (s) the last one arrived.
        ``msgs`` are OpenFlow messages of ``dp``'s parser or their serialised ``bytes``.

        :raises BarrierTimeout: some reply did not come within ``timeout`` seconds.
        """
        waits = []
        for dp, msgs in batches:
            req = dp.ofproto_parser.OFPBarrierRequest(dp)
            wire = b"".join(m if isinstance(m, bytes) else wire_bytes(dp, m) for m in (*msgs, req))
            ev = threading.Event()
            with self._lock:
                self._waiting[(dp.id, req.xid)] = ev
            dp.send(wire)
            waits.append((dp.id, req.xid, ev))
        deadline = time.monotonic() + timeout
        for dpid, xid, ev in waits:
            if not ev.wait(max(0.0, deadline - time.monotonic())):
                with self._lock:
                    for d, x, _ in waits:
                        self._waiting.pop((d, x), None)
                        self._arrived.pop((d, x), None)
                raise BarrierTimeout(f"no barrier reply from dpid {dpid:#x} in {timeout} s")
        # the replies' own arrival, not this thread's wake-up after them: under Ryu's eventlet
        # the waiter woke up to 3 ms later, which the dark window measured took for darkness
        with self._lock:
            return max(self._arrived.pop((d, x)) for d, x, _ in waits)

    def replied(self, dpid: int, xid: int) -> None:
        """Called by the app that receives ``OFPBarrierReply``."""
        now = time.monotonic()
        with self._lock:
            ev = self._waiting.pop((dpid, xid), None)
            if ev is not None:
                self._arrived[(dpid, xid)] = now
        if ev is not None:
            ev.set()
