"""Example app: demand-driven circuits (a Helios/c-Through-style scheduler). Every ``POLL_S``
seconds it reads, from every GPU's NIC bridge, the bytes each GPU sent to each destination (the
OpenFlow flow counters of the forwarding rules matching ``in_port = host, ipv4_dst``; exact on
fabrics with one port per GPU, whose NIC rules see only the GPU's own traffic), weighs every GPU
pair by the bytes sent between them since the last poll, picks the maximum-weight matching
(Edmonds' algorithm, networkx) of the pairs above ``MIN_BYTES``, and, when it differs from the
circuits in place, reconfigures the OCS to it with a dark window of ``DARK_S``.

    .venv/bin/ocslab run experiments/lab.yaml --app controllers/examples/demand_driven.py

Each decision is logged in the controller's event log (``demand-driven`` events, ``GET /events``).
"""

from __future__ import annotations

import networkx as nx

from controllers.base import OcsLabApp
from controllers.events import EventSwitchReady
from controllers.sdn import MAIN_DISPATCHER, app_manager, hub, ofp_event, set_ev_cls
from emulation import dataplane as dpn
from emulation.fabric import assign_ports

POLL_S = 0.5
DARK_S = 0.01
#: Pairs that exchanged fewer bytes than this in a poll are not worth a circuit.
MIN_BYTES = 50_000


class DemandDriven(OcsLabApp):
    """Matches circuits to measured demand (module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._started = False
        self._replies: dict[int, list] = {}
        self._waiting: dict[int, object] = {}
        self._last: dict[tuple[int, int], int] = {}

    @set_ev_cls(EventSwitchReady)
    def _ready(self, ev):
        if ev.ready and not self._started:
            self._started = True
            hub.spawn(self._run)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _stats(self, ev):
        dp = ev.msg.datapath
        self._replies.setdefault(dp.id, []).extend(ev.msg.body)
        if not ev.msg.flags & dp.ofproto.OFPMPF_REPLY_MORE and dp.id in self._waiting:
            self._waiting.pop(dp.id).set()

    def demand(self) -> dict[tuple[int, int], int]:
        """Bytes each GPU sent to each other GPU since the last call: ``{(src, dst): bytes}``."""
        f = self.state.fabric
        gpu_of = {dpn.gpu_ip(g): g for g in range(f.gpus)}
        with self.state.lock:
            nics = {dpid: dp for dpid, dp in self.state.datapaths.items() if dpid - dpn.DPID_NIC in range(f.gpus)}
        events = []
        for dpid, dp in nics.items():
            self._replies[dpid] = []
            self._waiting[dpid] = ev = hub.Event()
            events.append(ev)
            dp.send_msg(dp.ofproto_parser.OFPFlowStatsRequest(dp))
        for ev in events:
            ev.wait(timeout=2.0)
        now: dict[tuple[int, int], int] = {}
        for dpid, body in self._replies.items():
            src = dpid - dpn.DPID_NIC
            for stat in body:
                m = stat.match
                if m.get("in_port") == dpn.NIC_HOST_PORT and m.get("ipv4_dst") in gpu_of:
                    key = (src, gpu_of[m["ipv4_dst"]])
                    now[key] = now.get(key, 0) + stat.byte_count
        before = self._last
        # a counter that went down belongs to a rule replaced since (routes follow the circuits)
        out = {k: v - before.get(k, 0) if v >= before.get(k, 0) else v for k, v in now.items()}
        self._last = now
        return out

    def _run(self) -> None:
        try:
            self._loop()
        except Exception:  # a thread of our own: say why it stopped
            self.logger.exception("demand-driven scheduler stopped")

    def _loop(self) -> None:
        f = self.state.fabric
        ocs = f.ocs[0].name
        switch = app_manager.lookup_service_brick("CircuitSwitch")
        while True:
            hub.sleep(POLL_S)
            sent = self.demand()
            g = nx.Graph()
            for (a, b), v in sent.items():
                if a != b:
                    w = g.get_edge_data(a, b, {"weight": 0})["weight"] + v
                    g.add_edge(a, b, weight=w)
            g.remove_edges_from([(a, b) for a, b, w in g.edges(data="weight") if w < MIN_BYTES])
            pairs = sorted(tuple(sorted(e)) for e in nx.max_weight_matching(g))
            if not pairs:
                continue
            with self.state.lock:
                current = {tuple(sorted((c.a.gpu, c.b.gpu))) for c in self.state.circuits[ocs]}
            if set(pairs) <= current:
                continue
            config = assign_ports(f, ocs, pairs)
            res = switch.apply(config, DARK_S)
            self.state.log_event("demand-driven", pairs=[list(p) for p in pairs],
                                 weights=[g.edges[p]["weight"] for p in pairs],
                                 dark_window_measured_s=res["dark_window_measured_s"])
