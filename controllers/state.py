"""Shared controller state (an OS-Ken context): the fabric, the circuit table, connected
datapaths, barrier bookkeeping and the event log.

OS-Ken's native hub runs handlers in real threads: every field is guarded by ``lock`` and
readers take snapshots.

Barriers: OS-Ken's ``os_ken.app.ofctl.api.send_msg(app, OFPBarrierRequest, reply_cls=...)`` waits
for one switch's reply at a time, through the ofctl service's event queue. A reconfiguration
must take effect on every affected bridge together, and its dark window is measured from the
moment the last reply arrives, so :meth:`FabricState.send_with_barriers` sends every bridge's
batch and barrier first and then waits for all replies at once (one round trip for N bridges),
timestamping each as the circuit switch app's handler receives it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable

from os_ken import cfg

from emulation import dataplane as dpn
from emulation.fabric import Configuration, Fabric

LOG = logging.getLogger("ocslab.controller")

#: Options the launcher registers (group ``ocslab``): ``--ocslab-fabric``, ``--ocslab-api-port``.
OPTS = [
    cfg.StrOpt("fabric", help="fabric JSON written by the emulator (emulation.fabric.Fabric)"),
    cfg.IntOpt("api-port", default=0, help="port of the JSON API on 127.0.0.1"),
]


class BarrierTimeout(RuntimeError):
    """A switch did not answer an OpenFlow barrier in time."""


class FabricState:
    """Everything the apps share. Created once by OS-Ken from ``_CONTEXTS``."""

    def __init__(self) -> None:
        path = cfg.CONF.ocslab.fabric
        if not path:
            raise SystemExit("controllers: --ocslab-fabric FILE is required")
        with open(path) as fh:
            self.fabric = Fabric.from_json(json.load(fh))
        self.lock = threading.RLock()
        self.circuits: Configuration = self.fabric.initial
        self.datapaths: dict[int, object] = {}
        #: dpids whose initial rules (circuits or routes) are installed and barrier-acknowledged
        self.programmed: set[int] = set()
        self._barriers: dict[tuple[int, int], threading.Event] = {}
        self._events: list[dict] = []

    # ---- naming ---------------------------------------------------------------------------
    def expected_dpids(self) -> dict[int, str]:
        """``{dpid: bridge name}`` of every bridge the fabric has."""
        out = {dpn.DPID_NIC + g: dpn.nic_name(g) for g in range(self.fabric.gpus)}
        out.update({dpn.DPID_OCS + k: dpn.ocs_name(k) for k in range(len(self.fabric.ocs))})
        out.update({dpn.DPID_EPS + k: dpn.eps_name(k) for k in range(len(self.fabric.eps))})
        return out

    # ---- events ---------------------------------------------------------------------------
    def log_event(self, kind: str, **fields: object) -> dict:
        """Append ``{"seq", "t" (CLOCK_MONOTONIC s), "kind", ...}`` to the event log."""
        with self.lock:
            ev = {"seq": len(self._events), "t": time.monotonic(), "kind": kind, **fields}
            self._events.append(ev)
        LOG.info("%s %s", kind, json.dumps(fields, default=str))
        return ev

    def events(self, since: int = 0) -> list[dict]:
        """Events with ``seq >= since``."""
        with self.lock:
            return list(self._events[since:])

    # ---- barriers -------------------------------------------------------------------------
    def send_with_barrier(self, dp, msgs: Iterable, timeout: float = 5.0) -> float:
        """Send ``msgs`` to ``dp`` followed by a barrier; return the CLOCK_MONOTONIC time the
        barrier reply arrived (all earlier messages processed).

        :raises BarrierTimeout: no reply within ``timeout`` seconds.
        """
        return self.send_with_barriers([(dp, msgs)], timeout)

    def send_with_barriers(self, batches: Iterable[tuple[object, Iterable]], timeout: float = 5.0) -> float:
        """Send every ``(dp, msgs)`` batch followed by a barrier to its switch, all switches at
        once, then wait for every reply; return the time the last one arrived.

        :raises BarrierTimeout: some reply did not come within ``timeout`` seconds.
        """
        waits = []
        for dp, msgs in batches:
            for m in msgs:
                dp.send_msg(m)
            req = dp.ofproto_parser.OFPBarrierRequest(dp)
            dp.set_xid(req)
            ev = threading.Event()
            with self.lock:
                self._barriers[(dp.id, req.xid)] = ev
            dp.send_msg(req)
            waits.append((dp.id, req.xid, ev))
        deadline = time.monotonic() + timeout
        for dpid, xid, ev in waits:
            if not ev.wait(max(0.0, deadline - time.monotonic())):
                with self.lock:
                    for d, x, _ in waits:
                        self._barriers.pop((d, x), None)
                raise BarrierTimeout(f"no barrier reply from dpid {dpid:#x} in {timeout} s")
        return time.monotonic()

    def barrier_replied(self, dpid: int, xid: int) -> None:
        """Called by the app that receives ``OFPBarrierReply``."""
        with self.lock:
            ev = self._barriers.pop((dpid, xid), None)
        if ev is not None:
            ev.set()
