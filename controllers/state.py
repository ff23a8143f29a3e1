"""Shared controller state (an OS-Ken context): the fabric, the circuit table, connected
datapaths, the table of outstanding barriers, who owns the circuits and the event log.

OS-Ken's native hub runs handlers in real threads: every field is guarded by ``lock`` and
readers take snapshots.

Barriers are sent and their replies received by the apps (:class:`controllers.base.OcsLabApp`);
only their table (:class:`controllers.barriers.Barriers`) is kept here, so that every app of the
fabric shares it.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from controllers import flags  # noqa: F401 - registers --ocslab-* (also for ryu-manager)
from controllers.barriers import Barriers
from controllers.events import OWNER_APP, OWNERS
from controllers.sdn import cfg
from emulation import dataplane as dpn
from emulation.fabric import Configuration, Fabric
from emulation.ocs_shards import Lanes, OcsShards

LOG = logging.getLogger("ocslab.controller")



class FabricState:
    """Everything the apps share. Created once by OS-Ken from ``_CONTEXTS`` (then from the file
    of ``--ocslab-fabric`` and the shard count of ``--ocslab-ocs-shards``), or with ``fabric``
    (and ``shards``) given (a controller-less test).

    :raises SystemExit: no fabric file, or a shard count the fabric cannot be split into."""

    def __init__(self, fabric: Fabric | None = None, events_file: str | None = None, shards: int | None = None) -> None:
        if fabric is None:
            events_file = events_file or cfg.CONF.ocslab.events
            path = cfg.CONF.ocslab.fabric
            if not path:
                raise SystemExit("controllers: --ocslab-fabric FILE is required")
            with open(path) as fh:
                fabric = Fabric.from_json(json.load(fh))
            shards = cfg.CONF.ocslab.ocs_shards
        self.fabric = fabric
        try:
            #: where each OCS's ports live (one bridge per OCS unless sharded over servers)
            self.shards = OcsShards(fabric, shards or 1)
        except ValueError as e:
            raise SystemExit(f"controllers: --ocslab-ocs-shards: {e}") from None
        #: the lane each circuit crossing two shards holds (guarded by ``lock``)
        self.lanes = Lanes(self.shards)
        self.lock = threading.RLock()
        self.circuits: Configuration = self.fabric.initial
        for k, ocs in enumerate(fabric.ocs):
            for c in sorted(self.circuits[ocs.name]):
                self.lanes.take(k, c, ocs.port_number(c.a), ocs.port_number(c.b))
        self.datapaths: dict[int, object] = {}
        #: dpids whose initial rules (circuits or routes) are installed and barrier-acknowledged
        self.programmed: set[int] = set()
        #: outstanding barriers of every app (:class:`controllers.base.OcsLabApp`)
        self.barriers = Barriers()
        self._events: list[dict] = []
        #: where every event is also appended as one JSON line (``--ocslab-events``), or None
        self.events_file = events_file
        #: who may set the circuits now (:data:`controllers.events.OWNERS`) and the run it is
        #: for (None between runs, when the user's apps own them)
        self.owner: str = OWNER_APP
        self.run: str | None = None

    # ---- ownership ------------------------------------------------------------------------
    def set_owner(self, owner: str, run: str | None) -> None:
        """Hand the circuits to ``owner`` for run ``run`` (None: between runs).

        :raises ValueError: ``owner`` is not one of :data:`controllers.events.OWNERS`.
        """
        if owner not in OWNERS:
            raise ValueError(f"owner must be one of {', '.join(OWNERS)}, got {owner!r}")
        with self.lock:
            self.owner, self.run = owner, run

    def may_reconfigure(self, by: str) -> bool:
        """Whether caller ``by`` may change the circuits now: the emulator, the rotor, failover
        and Opus always (:data:`emulation.dataplane.PRIVILEGED`); any other caller, a user app,
        only while the owner is :data:`controllers.events.OWNER_APP`."""
        with self.lock:
            return by in dpn.PRIVILEGED or self.owner == OWNER_APP

    # ---- naming ---------------------------------------------------------------------------
    def expected_dpids(self) -> dict[int, str]:
        """``{dpid: bridge name}`` of every bridge the fabric has."""
        out = {dpn.DPID_NIC + g: dpn.nic_name(g) for g in range(self.fabric.gpus)}
        out.update(self.shards.bridges())
        out.update({dpn.DPID_EPS + k: dpn.eps_name(k) for k in range(len(self.fabric.eps))})
        return out

    # ---- events ---------------------------------------------------------------------------
    def log_event(self, kind: str, level: int = logging.INFO, **fields: object) -> dict:
        """Append ``{"seq", "t" (CLOCK_MONOTONIC s), "kind", ...}`` to the event log and, with an
        events file (``--ocslab-events``), as one JSON line to it, flushed at once (so that it
        holds every event up to a crash, whichever framework's log format the controller runs
        under); the controller's log gets one line at ``level``."""
        with self.lock:
            ev = {"seq": len(self._events), "t": time.monotonic(), "kind": kind, **fields}
            self._events.append(ev)
            if self.events_file:
                with open(self.events_file, "a") as fh:
                    fh.write(json.dumps(ev, default=str) + "\n")
        LOG.log(level, "%s %s", kind, json.dumps(fields, default=str))
        return ev

    def events(self, since: int = 0) -> list[dict]:
        """Events with ``seq >= since``."""
        with self.lock:
            return list(self._events[since:])
