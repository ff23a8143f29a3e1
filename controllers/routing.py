"""OS-Ken app programming multi-hop forwarding on the GPUs' NIC bridges (and EPS bridges).

Next hops come from :class:`emulation.routing.Routes` over the current circuit graph, the same
function the flow simulator uses. A NIC bridge forwards on (IPv4 destination, DSCP = channel);
packets for its own GPU go to the host port; transit packets leave by the next fabric port
without entering the host. On every circuit change the rules are diffed and only the changed
ones are sent, followed by a barrier.

Spec: ``docs/architecture.md`` (packet-level backend: hop-by-hop through intermediate GPUs).
"""

from __future__ import annotations

import threading

from controllers.sdn import set_ev_cls
from controllers.base import OcsLabApp
from controllers.events import ProgramRoutes, RoutesProgrammed
from emulation import dataplane as dpn
from emulation.fabric import Configuration
from emulation.routing import Routes

PRIO_LOCAL = 200
PRIO_CHANNEL = 100
PRIO_DEFAULT = 90

RuleKey = tuple  # ("ip", dst, channel | None) or ("arp", dst), with "host" appended: from the GPU only


class Routing(OcsLabApp):
    """Keeps every NIC and EPS bridge's forwarding rules equal to the routes of the circuits;
    answers :class:`controllers.events.ProgramRoutes`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._installed: dict[int, dict[RuleKey, tuple[int, int]]] = {}
        self._routes: dict[Configuration, Routes] = {}  # a rotor revisits its configurations

    def _current_routes(self) -> Routes:
        with self.state.lock:
            config = self.state.circuits
        routes = self._routes.get(config)
        if routes is None:
            if len(self._routes) >= 64:
                self._routes.clear()
            routes = self._routes[config] = Routes(self.state.fabric, config, self.state.fabric.ports_per_gpu)
        return routes

    def rules_for(self, dpid: int) -> dict[RuleKey, tuple[int, int]]:
        """Desired rules of bridge ``dpid``: ``{key: (priority, out port)}``."""
        fabric = self.state.fabric
        routes = self._current_routes()
        if dpid - dpn.DPID_NIC in range(fabric.gpus):
            node = dpid - dpn.DPID_NIC
            port_of = dpn.nic_port
        elif dpid - dpn.DPID_EPS in range(len(fabric.eps)):
            node = fabric.eps_node(dpid - dpn.DPID_EPS)
            port_of = lambda p: p + 1  # noqa: E731 - EPS ports are 1-based
        else:
            return {}
        rules: dict[RuleKey, tuple[int, int]] = {}
        # One fabric port: every peer is a direct neighbour, so nothing transits a NIC. Only the
        # GPU's own packets may leave by the port; one that arrives from the fabric for another GPU
        # crossed a reconfiguration into the wrong circuit, and bouncing it back into the fabric
        # would ping-pong it between two GPUs for the whole slot. It falls to the drop rule.
        host_only = fabric.ports_per_gpu == 1 and port_of is dpn.nic_port
        for dst in range(fabric.gpus):
            if dst == node:
                rules[("ip", dst, None)] = (PRIO_LOCAL, dpn.NIC_HOST_PORT)
                rules[("arp", dst)] = (PRIO_LOCAL, dpn.NIC_HOST_PORT)
                continue
            first = routes.next_hop(node, dst, 0)
            if first is None:
                if fabric.ports_per_gpu == 1 and port_of is dpn.nic_port:
                    # One fabric port: every destination leaves by it. An unreachable one keeps its
                    # rule and its packets die at the OCS (no circuit), as light would; so the
                    # bridge's rules never change with the circuits (a rotor reprograms no NIC).
                    for key in (("ip", dst, None), ("arp", dst), ("ip", dst, 0)):
                        rules[key] = (PRIO_CHANNEL if key[0] == "ip" and key[2] == 0 else PRIO_DEFAULT, port_of(0))
                continue
            rules[("ip", dst, None)] = (PRIO_DEFAULT, port_of(first.up))
            rules[("arp", dst)] = (PRIO_DEFAULT, port_of(first.up))
            for ch in range(routes.channels):
                hop = routes.next_hop(node, dst, ch)
                rules[("ip", dst, ch)] = (PRIO_CHANNEL, port_of(hop.up))
        if host_only:
            rules = {(k if k[1] == node else (*k, "host")): v for k, v in rules.items()}
        return rules

    @staticmethod
    def _match(parser, key: RuleKey):
        extra = {"in_port": dpn.NIC_HOST_PORT} if key[-1] == "host" else {}
        if key[0] == "arp":
            return parser.OFPMatch(**extra, eth_type=0x0806, arp_tpa=dpn.gpu_ip(key[1]))
        if key[2] is None:
            return parser.OFPMatch(**extra, eth_type=0x0800, ipv4_dst=dpn.gpu_ip(key[1]))
        return parser.OFPMatch(**extra, eth_type=0x0800, ipv4_dst=dpn.gpu_ip(key[1]), ip_dscp=key[2])

    def _updates(self, dp, fresh: bool) -> list:
        """Flow mods bringing bridge ``dp`` from its installed rules to the desired ones
        (``fresh``: the bridge was just wiped); records the desired rules as installed."""
        want = self.rules_for(dp.id)
        have = {} if fresh else self._installed.get(dp.id, {})
        parser = dp.ofproto_parser
        msgs = []
        for key, (prio, _) in have.items():
            if key not in want or want[key][0] != prio:
                msgs.append(self.delete_flow(dp, prio, self._match(parser, key)))
        for key, (prio, port) in want.items():
            if have.get(key) != (prio, port):
                msgs.append(self.add_flow(dp, prio, self._match(parser, key), [parser.OFPActionOutput(port)]))
        self._installed[dp.id] = want
        return msgs

    def program_switch(self, dp, fresh: bool = False) -> float | None:
        """Bring bridge ``dp`` to its desired rules (only the differences; ``fresh``: the bridge
        was just wiped); return the barrier ack time, or None if nothing changed."""
        with self._lock:
            msgs = self._updates(dp, fresh)
            return self.state.send_with_barrier(dp, msgs) if msgs else None

    def program_all(self) -> float | None:
        """Reprogram every connected NIC and EPS bridge for the current circuits: all bridges'
        changes are sent at once and their barriers awaited together; the last ack time, or
        None if nothing changed."""
        with self.state.lock:
            dps = [dp for dpid, dp in self.state.datapaths.items() if dpid < dpn.DPID_OCS or dpid >= dpn.DPID_EPS]
        with self._lock:
            batches = [(dp, msgs) for dp in sorted(dps, key=lambda d: d.id) if (msgs := self._updates(dp, False))]
            return self.state.send_with_barriers(batches) if batches else None

    @set_ev_cls(ProgramRoutes)
    def _program_routes(self, req: ProgramRoutes) -> None:
        """Reprogram one fresh bridge or all of them; reply when the rules are acknowledged."""
        t_ack = self.program_switch(req.dp, fresh=True) if req.dp is not None else self.program_all()
        self.reply_to_request(req, RoutesProgrammed(req.src, t_ack))
