"""OS-Ken app programming multi-hop forwarding on the GPUs' NIC bridges (and EPS bridges).

Next hops come from :class:`emulation.routing.Routes` over the current circuit graph, the same
function the flow simulator uses. A NIC bridge forwards on (IPv4 destination, DSCP = channel);
packets for its own GPU go to the host port; transit packets leave by the next fabric port
without entering the host. On every circuit change the rules are diffed and only the changed
ones are sent, followed by a barrier.

Rerouting happens while the changed circuits are dark, so its time must stay well inside the
dark window R. Building and serialising OpenFlow messages in Python costs tens of microseconds
each (a full reroute of an 8-GPU fabric is ~200 FlowMods, 10-30 ms), which would make the dark
window depend on the machine's speed. So every configuration's rules and each rule's serialised
FlowMod are kept (:meth:`Routing.prepare` computes them ahead for a schedule's configurations,
untimed), and a reroute only diffs two dicts and writes cached bytes.

Spec: ``docs/architecture.md`` (packet-level backend: hop-by-hop through intermediate GPUs).
"""

from __future__ import annotations

import threading

from controllers.sdn import set_ev_cls
from controllers.barriers import wire_bytes
from controllers.base import OcsLabApp
from controllers.events import PrepareRoutes, ProgramRoutes, RoutesPrepared, RoutesProgrammed
from emulation import dataplane as dpn
from emulation.fabric import Configuration
from emulation.routing import Routes

PRIO_LOCAL = 200
PRIO_CHANNEL = 100
PRIO_DEFAULT = 90

RuleKey = tuple  # ("ip", dst, channel | None) or ("arp", dst), with "host" appended: from the GPU only
#: Configurations whose routes and rules are kept (a schedule revisits them); beyond, forget all.
MAX_CONFIGS = 64
#: Serialised FlowMods kept; beyond, forget all (only a fabric far larger than the packet
#: backend emulates reaches it).
MAX_WIRE = 500_000


class Routing(OcsLabApp):
    """Keeps every NIC and EPS bridge's forwarding rules equal to the routes of the circuits;
    answers :class:`controllers.events.ProgramRoutes`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._installed: dict[int, dict[RuleKey, tuple[int, int]]] = {}
        self._routes: dict[Configuration, Routes] = {}  # a rotor revisits its configurations
        self._rules: dict[tuple[int, Configuration], dict[RuleKey, tuple[int, int]]] = {}
        self._wire: dict[tuple, bytes] = {}  # (dpid, key, priority, out port | None: delete) -> FlowMod

    def _routes_of(self, config: Configuration) -> Routes:
        routes = self._routes.get(config)
        if routes is None:
            if len(self._routes) >= MAX_CONFIGS:
                self._routes.clear()
                self._rules.clear()
            routes = self._routes[config] = Routes(self.state.fabric, config, self.state.fabric.ports_per_gpu)
        return routes

    def _desired(self, dpid: int, config: Configuration) -> dict[RuleKey, tuple[int, int]]:
        """:meth:`rules_for`, kept per (bridge, configuration)."""
        rules = self._rules.get((dpid, config))
        if rules is None:
            rules = self._rules[(dpid, config)] = self.rules_for(dpid, config)
        return rules

    def rules_for(self, dpid: int, config: Configuration) -> dict[RuleKey, tuple[int, int]]:
        """Desired rules of bridge ``dpid`` under ``config``: ``{key: (priority, out port)}``."""
        fabric = self.state.fabric
        routes = self._routes_of(config)
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
        if fabric.port_per_ocs and fabric.ports_per_gpu > 1 and port_of is dpn.nic_port:
            # Parallel OCSes: channel k leaves by port k, to OCS k, whatever the circuits; a packet
            # for a GPU OCS k does not join it dies there (no circuit), as light would. The rules
            # never change with the circuits, and nothing transits a NIC (see below).
            for dst in range(fabric.gpus):
                if dst == node:
                    rules[("ip", dst, None)] = rules[("arp", dst)] = (PRIO_LOCAL, dpn.NIC_HOST_PORT)
                    continue
                rules[("ip", dst, None, "host")] = rules[("arp", dst, "host")] = (PRIO_DEFAULT, port_of(0))
                for ch in range(fabric.ports_per_gpu):
                    rules[("ip", dst, ch, "host")] = (PRIO_CHANNEL, port_of(ch))
            return rules
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

    def _flow_mod(self, dp, key: RuleKey, prio: int, port: int | None) -> bytes:
        """The serialised FlowMod adding rule ``key`` -> output ``port`` on bridge ``dp``, or
        (``port`` None) deleting it, built once."""
        wkey = (dp.id, key, prio, port)
        wire = self._wire.get(wkey)
        if wire is None:
            if len(self._wire) >= MAX_WIRE:
                self._wire.clear()
            parser = dp.ofproto_parser
            match = self._match(parser, key)
            msg = (self.delete_flow(dp, prio, match) if port is None
                   else self.add_flow(dp, prio, match, [parser.OFPActionOutput(port)]))
            wire = self._wire[wkey] = wire_bytes(dp, msg)
        return wire

    def _updates(self, dp, fresh: bool) -> list[bytes]:
        """Serialised flow mods bringing bridge ``dp`` from its installed rules to those of the
        current circuits (``fresh``: the bridge was just wiped); records them as installed."""
        with self.state.lock:
            config = self.state.circuits
        want = self._desired(dp.id, config)
        have = {} if fresh else self._installed.get(dp.id, {})
        msgs = [self._flow_mod(dp, key, prio, None) for key, (prio, _) in have.items()
                if key not in want or want[key][0] != prio]
        msgs += [self._flow_mod(dp, key, prio, port) for key, (prio, port) in want.items()
                 if have.get(key) != (prio, port)]
        self._installed[dp.id] = want
        return msgs

    def _forwarding_dps(self) -> list:
        with self.state.lock:
            dps = [dp for dpid, dp in self.state.datapaths.items() if dpid < dpn.DPID_OCS or dpid >= dpn.DPID_EPS]
        return sorted(dps, key=lambda d: d.id)

    def prepare(self, configs: list[Configuration]) -> int:
        """Compute, ahead of time, every connected NIC and EPS bridge's rules under each of
        ``configs`` and serialise their FlowMods (additions and deletions), so that rerouting to
        any of them later costs only a diff and a write; returns the number of FlowMods now kept.
        Sends nothing."""
        with self._lock:
            for config in dict.fromkeys(configs):
                for dp in self._forwarding_dps():
                    for key, (prio, port) in self._desired(dp.id, config).items():
                        self._flow_mod(dp, key, prio, port)
                        self._flow_mod(dp, key, prio, None)
            return len(self._wire)

    def program_switch(self, dp, fresh: bool = False) -> float | None:
        """Bring bridge ``dp`` to its desired rules (only the differences; ``fresh``: the bridge
        was just wiped); return the barrier ack time, or None if nothing changed."""
        with self._lock:
            msgs = self._updates(dp, fresh)
            return self.send_with_barrier(dp, msgs) if msgs else None

    def program_all(self) -> float | None:
        """Reprogram every connected NIC and EPS bridge for the current circuits: all bridges'
        changes are sent at once and their barriers awaited together; the last ack time, or
        None if nothing changed."""
        dps = self._forwarding_dps()
        with self._lock:
            batches = [(dp, msgs) for dp in dps if (msgs := self._updates(dp, False))]
            return self.send_with_barriers(batches) if batches else None

    @set_ev_cls(ProgramRoutes)
    def _program_routes(self, req: ProgramRoutes) -> None:
        """Reprogram one fresh bridge or all of them; reply when the rules are acknowledged."""
        t_ack = self.program_switch(req.dp, fresh=True) if req.dp is not None else self.program_all()
        self.reply_to_request(req, RoutesProgrammed(req.src, t_ack))

    @set_ev_cls(PrepareRoutes)
    def _prepare_routes(self, req: PrepareRoutes) -> None:
        """:meth:`prepare` ``req.configs``; reply with the count of FlowMods kept."""
        self.reply_to_request(req, RoutesPrepared(req.src, self.prepare(req.configs)))
