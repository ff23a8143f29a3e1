"""OS-Ken app emulating optical circuit switches on Open vSwitch bridges.

Each OCS bridge holds only port-to-port flows (``in_port=a -> output:b`` and back, where the
output is port b's outgoing fibre, see :mod:`emulation.dataplane`) derived from the circuit
table. A reconfiguration removes the circuits that change, keeps them dark for
the requested window R, and installs the new ones; every phase is acknowledged by an OpenFlow
barrier and timestamped with CLOCK_MONOTONIC, so the dark window is measured, not assumed.
Unchanged circuits keep carrying traffic throughout.

Who may reconfigure is arbitrated here (``by=`` of :meth:`CircuitSwitch.apply` and
:meth:`CircuitSwitch.rewire`, :meth:`controllers.state.FabricState.may_reconfigure`): a user
app's request while the run's planner (or the emulator) owns the circuits is refused, logged
(``ownership-refused``) and raised as :class:`controllers.events.EventOwnershipRefused`. The
emulator's collective and step events come in through :meth:`CircuitSwitch.post`.

Spec: ``docs/architecture.md`` (packet-level backend), ``docs/mechanisms.md`` (OCS).
"""

from __future__ import annotations

import logging
import threading
import time

from controllers.sdn import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, app_manager, cfg, hub, ofp_event, set_ev_cls
from controllers.base import OcsLabApp
from controllers.ovs_datapath import DatapathCache
from controllers.events import (OWNER_APP, ROUTING_APP, EventCircuitsChanged, EventCollectiveBegin, EventCollectiveEnd,
                                EventHandled, EventOwnershipRefused, EventStepBegin, EventStepEnd,
                                EventSwitchReady, PrepareRoutes, ProgramRoutes, parse_posted)
from emulation import dataplane as dpn
from emulation.fabric import Circuit, Configuration, FabricError

PRIO_CIRCUIT = 100
PRIO_DROP = 0
PRIO_PROBE = 150  # NIC: above the routes (which match IPv4 and ARP only)
PRIO_PROBE_DROP = 1  # OCS: below the circuits, above the counted catch-all
#: Seconds a step waits for the apps handling its :class:`EventStepBegin` before it is released.
HANDLER_TIMEOUT_S = 10.0


class CircuitSwitch(OcsLabApp):
    """Holds the circuit table and applies configurations with a measured dark window; sends
    :mod:`controllers.events`' observable events to every app that handles them."""

    _EVENTS = [EventSwitchReady, EventCircuitsChanged, EventCollectiveBegin, EventCollectiveEnd,
               EventStepBegin, EventStepEnd, EventOwnershipRefused]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._apply_lock = threading.Lock()
        ctl = cfg.CONF.ocslab.ovs_ctl
        # one control socket per ovs-vswitchd holding our bridges (several on a fabric spread over servers)
        self._datapaths = [DatapathCache(c) for c in ctl.split(",") if c] if ctl else []
        self._run_dark = 0.0  # R of the run in progress, emulated s (EventCollectiveBegin)

    def in_datapath(self, t_ack: float) -> float:
        """Make a change acknowledged (barrier) at ``t_ack`` hold in the datapath too: with
        ``--ocslab-ovs-ctl``, flush the cached flows (:mod:`controllers.ovs_datapath`) and return
        when that was done; otherwise return ``t_ack``. Several instances (a fabric spread over
        servers, one ovs-vswitchd each) are flushed at once, not one after another: the flush
        after a removal is part of the dark window, and two in turn made it 8 ms longer on two
        lab servers.

        :raises DatapathError: an instance did not flush (the first such error)."""
        if len(self._datapaths) < 2:
            return max((d.purge(t_ack) for d in self._datapaths), default=t_ack)
        got: list = [None] * len(self._datapaths)

        def flush(i: int) -> None:
            try:
                got[i] = self._datapaths[i].purge(t_ack)
            except Exception as e:  # noqa: BLE001 - handed to the caller below
                got[i] = e

        threads = [threading.Thread(target=flush, args=(i,), daemon=True) for i in range(len(got))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for x in got:
            if isinstance(x, Exception):
                raise x
        return max(got)

    # ---- switch life cycle -----------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev):
        # Programming waits for barrier replies, which this app's event thread delivers:
        # do it in a thread of its own.
        hub.spawn(self._connect, ev.msg.datapath)

    def _connect(self, dp):
        names = self.state.expected_dpids()
        if dp.id not in names:
            self.logger.warning("ignoring unknown datapath %#x", dp.id)
            return
        parser, ofp = dp.ofproto_parser, dp.ofproto
        where = self.state.shards.of_dpid(dp.id)
        k = where[0] if where is not None else None
        # Lowest priority: what no other rule takes (an OCS port without a circuit is dark; a NIC
        # or EPS without a route is a hole) goes to the bridge's own port, which is down, so Open
        # vSwitch drops it there and counts it exactly (emulation/drops.py). Secure
        # fail mode would drop these packets anyway, without saying where.
        cookie = dpn.COOKIE_DARK if k is not None else dpn.COOKIE_NO_ROUTE
        catch_all = self.add_flow(dp, PRIO_DROP, parser.OFPMatch(), [parser.OFPActionOutput(ofp.OFPP_LOCAL)], cookie)
        msgs = [self.delete_all_flows(dp), catch_all, *self._probe_rules(dp, k)]
        if k is not None:
            ocs = self.state.fabric.ocs[k]
            with self.state.lock:
                current = self.state.circuits[ocs.name]
                lanes = {c: self.state.lanes.held(k, c) for c in current}
            rules = [r for c in sorted(current) for r in self.state.shards.rules(
                k, ocs.port_number(c.a), ocs.port_number(c.b), lanes[c]).get(dp.id, [])]
            msgs += self._rule_mods(dp, rules, add=True)
        self.send_with_barrier(dp, msgs)
        with self.state.lock:
            self.state.datapaths[dp.id] = dp
        if k is None:
            self._program_routes(dp)
        with self.state.lock:  # ready (GET /status) only once its rules are in (barrier)
            self.state.programmed.add(dp.id)
            ready = set(names) <= self.state.programmed
        self.state.log_event("switch-connected", dpid=dp.id, name=names[dp.id])
        self.send_event_to_observers(EventSwitchReady(dp.id, names[dp.id], ready))

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _dead(self, ev):
        dp = ev.datapath
        if dp is not None and dp.id is not None:
            with self.state.lock:
                gone = self.state.datapaths.pop(dp.id, None)
                self.state.programmed.discard(dp.id)
            if gone is not None:
                self.state.log_event("switch-disconnected", dpid=dp.id)

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        msg = ev.msg
        ofp = msg.datapath.ofproto
        reason = {ofp.OFPPR_ADD: "add", ofp.OFPPR_DELETE: "delete", ofp.OFPPR_MODIFY: "modify"}
        self.state.log_event(
            "port-status", dpid=msg.datapath.id, port=msg.desc.port_no,
            reason=reason.get(msg.reason, str(msg.reason)),
            link_down=bool(msg.desc.state & ofp.OFPPS_LINK_DOWN),
        )

    def _probe_rules(self, dp, k: int | None) -> list:
        """Rules for wire probes (:data:`emulation.dataplane.PROBE_ETHERTYPE`, sent by the GPUs
        of a captured run): a NIC sends a copy of its GPU's probe out of every fabric port, each
        addressed to :func:`emulation.dataplane.probe_mac` of its port, and hands probes from the
        fabric to its GPU; an OCS drops, uncounted, the probes of a port without a circuit (its
        circuit rules carry the others like any frame)."""
        parser = dp.ofproto_parser
        probe = {"eth_type": dpn.PROBE_ETHERTYPE}
        if k is not None:
            return [self.add_flow(dp, PRIO_PROBE_DROP, parser.OFPMatch(**probe), [])]
        if dp.id - dpn.DPID_NIC not in range(self.state.fabric.gpus):
            return []
        out = [a for j in range(self.state.fabric.ports_per_gpu)
               for a in (parser.OFPActionSetField(eth_dst=dpn.probe_mac(j)), parser.OFPActionOutput(dpn.nic_port(j)))]
        return [self.add_flow(dp, PRIO_PROBE, parser.OFPMatch(in_port=dpn.NIC_HOST_PORT, **probe), out),
                self.add_flow(dp, PRIO_PROBE - 1, parser.OFPMatch(**probe), [parser.OFPActionOutput(dpn.NIC_HOST_PORT)])]

    # ---- circuits --------------------------------------------------------------------------
    def _program_routes(self, dp=None) -> None:
        """Have the routing app reprogram forwarding (:mod:`controllers.events`) and wait for it."""
        if app_manager.lookup_service_brick(ROUTING_APP) is not None:
            self.send_request(ProgramRoutes(dp))

    def prepare(self, configs: list[Configuration]) -> dict:
        """Have the routing app compute and serialise the forwarding rules of ``configs`` ahead
        of time (:meth:`controllers.routing.Routing.prepare`), so that a later reconfiguration
        to any of them reroutes quickly inside its dark window. Untimed; changes nothing.

        :returns: ``{"configurations", "flow_mods" (kept), "seconds" (taken)}``.
        :raises FabricError: a configuration is not valid for this fabric.
        """
        for c in configs:
            self.state.fabric.check_configuration(c)
        t = time.monotonic()
        kept = 0
        if app_manager.lookup_service_brick(ROUTING_APP) is not None:
            kept = self.send_request(PrepareRoutes(configs)).flow_mods
        out = {"configurations": len(configs), "flow_mods": kept, "seconds": time.monotonic() - t}
        self.state.log_event("prepared", **out)
        return out

    def _crossing(self, k: int, circuits) -> int:
        """How many of ``circuits`` on OCS ``k`` join two shards (:mod:`emulation.ocs_shards`)."""
        ocs = self.state.fabric.ocs[k]
        return sum(self.state.shards.crossing(k, ocs.port_number(c.a), ocs.port_number(c.b)) for c in circuits)

    def _rule_mods(self, dp, rules: list[tuple[int, int]], add: bool) -> list:
        """FlowMods adding (``add``) or deleting circuit rules ``[(in_port, out_port), ...]`` on ``dp``."""
        parser = dp.ofproto_parser
        return [self.add_flow(dp, PRIO_CIRCUIT, parser.OFPMatch(in_port=i), [parser.OFPActionOutput(o)])
                if add else self.delete_flow(dp, PRIO_CIRCUIT, parser.OFPMatch(in_port=i)) for i, o in rules]

    def circuit_batches(self, k: int, circuits, add: bool) -> list[tuple[object, list]]:
        """``[(bridge, FlowMods), ...]`` adding (``add``) or deleting ``circuits`` on OCS ``k``,
        for :meth:`send_with_barriers`: two rules per circuit on one bridge, or on each of the
        two shards it joins through a lane (:mod:`emulation.ocs_shards`), which it takes when
        added and gives back when deleted.

        :raises RuntimeError: a bridge of the OCS is not connected.
        :raises ValueError: no lane is free between two shards."""
        ocs, shards = self.state.fabric.ocs[k], self.state.shards
        ends = [(c, ocs.port_number(c.a), ocs.port_number(c.b)) for c in sorted(circuits)]
        need = {dpn.ocs_shard_dpid(k, shards.shard(k, p)) for _c, a, b in ends for p in (a, b)}
        with self.state.lock:
            dps = {dpid: self.state.datapaths.get(dpid) for dpid in need}
            missing = sorted(dpid for dpid, dp in dps.items() if dp is None)
            if missing:
                raise RuntimeError(f"OCS {ocs.name}: bridge {self.state.expected_dpids().get(missing[0], missing[0])} "
                                   f"is not connected")
            lanes = [self.state.lanes.take(k, c, a, b) if add else self.state.lanes.give(k, c, a, b) for c, a, b in ends]
        per: dict[int, list[tuple[int, int]]] = {}
        for (_c, a, b), lane in zip(ends, lanes):
            for dpid, rules in shards.rules(k, a, b, lane).items():
                per.setdefault(dpid, []).extend(rules)
        return [(dps[dpid], self._rule_mods(dps[dpid], rules, add)) for dpid, rules in sorted(per.items())]

    def _refused(self, by: str, what: str, t_request: float) -> dict:
        """Refuse ``by``'s request (:meth:`apply`, :meth:`rewire`): one log line and event
        ``ownership-refused``, :class:`EventOwnershipRefused` to the apps; the result says so."""
        with self.state.lock:
            owner, run = self.state.owner, self.state.run
        self.state.log_event("ownership-refused", logging.WARNING, by=by, owner=owner, run=run, what=what,
                             why=f"{by} may not set circuits while the {owner} owns them"
                                 f"{f' (run {run})' if run else ''}; nothing changed")
        self.send_event_to_observers(EventOwnershipRefused(by, owner, run, what))
        return {"changed": False, "refused": True, "owner": owner, "t_request": t_request, "t_live": time.monotonic(),
                "reconfiguration_delay_s": 0.0, "dark_window_measured_s": 0.0, "removed": 0, "added": 0}

    def apply(self, config: Configuration, reconfiguration_delay_s: float, live_at: float | None = None,
              by: str = OWNER_APP) -> dict:
        """Reconfigure every OCS to ``config``, on behalf of ``by``: ``"emulator"``, ``"rotor"``,
        ``"failover"``, ``"opus"`` (:data:`emulation.dataplane.PRIVILEGED`) or a user app (any
        other name, such as the app's ``self.name``), which may reconfigure only while the user's
        apps own the circuits (``docs/controllers.md``, Who owns the OCS when); otherwise nothing
        changes and the result is ``{"changed": False, "refused": True, "owner", ...}``.

        Phases (CLOCK_MONOTONIC seconds): ``t_request``; ``t_dark`` when the removal of the
        changed circuits is acknowledged (barrier), ``t_dark_flushed`` when the datapath's cached
        flows are flushed after it (:meth:`_in_datapath`); routes are recomputed while dark;
        ``reconfiguration_delay_s`` after the flush the new circuits are installed
        (``t_install``), ``t_live`` is their barrier ack and ``t_live_flushed`` the flush after it
        (the dark window measured is R plus the flush and the switch's commit time, never less than
        R). ``dark_window_measured_s = t_live - t_dark``; the data plane's window lies between
        ``t_install - t_dark_flushed`` and ``t_live_flushed - t_request``, which wire probes check
        (:mod:`emulation.pcap`). Unchanged circuits stay up. With
        ``live_at`` (CLOCK_MONOTONIC) the new circuits are installed no earlier than then.

        :returns: the timestamps, the requested and measured dark window, circuits removed/added
            and ``rewired``, the GPU ports ``[gpu, port]`` that lost a circuit and got another.
        :raises FabricError: ``config`` is not a valid configuration of this fabric.
        """
        self.state.fabric.check_configuration(config)
        with self._apply_lock:
            t_request = time.monotonic()
            if not self.state.may_reconfigure(by):
                return self._refused(by, "apply", t_request)
            with self.state.lock:
                old = self.state.circuits
            removed = {o.name: old[o.name] - config[o.name] for o in self.state.fabric.ocs}
            added = {o.name: config[o.name] - old[o.name] for o in self.state.fabric.ocs}
            n_rm = sum(map(len, removed.values()))
            n_add = sum(map(len, added.values()))
            if not n_rm and not n_add:
                return {"changed": False, "t_request": t_request, "t_live": time.monotonic(),
                        "reconfiguration_delay_s": 0.0, "dark_window_measured_s": 0.0,
                        "removed": 0, "added": 0}
            t_dark = t_request
            batches = [b for k, ocs in enumerate(self.state.fabric.ocs)
                       for b in self.circuit_batches(k, removed[ocs.name], add=False)]
            if batches:  # every bridge at once: one round trip, each side of a crossing circuit dark together
                t_dark = max(t_dark, self.send_with_barriers(batches))
            t_dark_flushed = self.in_datapath(t_dark)
            with self.state.lock:
                self.state.circuits = config
            self._program_routes()
            t_routed = time.monotonic()
            wait = max(t_dark_flushed + reconfiguration_delay_s, live_at or 0.0) - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            t_install = time.monotonic()
            t_live = t_install
            batches = [b for k, ocs in enumerate(self.state.fabric.ocs)
                       for b in self.circuit_batches(k, added[ocs.name], add=True)]
            if batches:
                t_live = max(t_live, self.send_with_barriers(batches))
            t_live_flushed = self.in_datapath(t_live)
            ends = [{e for cs in circuits.values() for c in cs for e in (c.a, c.b)} for circuits in (removed, added)]
            crossing = sum(self._crossing(k, added[ocs.name]) for k, ocs in enumerate(self.state.fabric.ocs))
            out = {
                "changed": True, "t_request": t_request, "t_dark": t_dark, "t_routed": t_routed,
                "t_install": t_install, "t_live": t_live, "t_dark_flushed": t_dark_flushed,
                "t_live_flushed": t_live_flushed,
                "reconfiguration_delay_s": reconfiguration_delay_s,
                "dark_window_measured_s": t_live - t_dark,
                "removed": n_rm, "added": n_add, "added_crossing": crossing,
                "rewired": [[e.gpu, e.port] for e in sorted(ends[0] & ends[1])], "by": by,
            }
            self.state.log_event("reconfigured", **out)
            self.send_event_to_observers(EventCircuitsChanged(out, config))
            return out

    def rewire(self, ocs_name: str, remove: frozenset[Circuit] | set[Circuit], add: frozenset[Circuit] | set[Circuit],
               reconfiguration_delay_s: float, on_dark=None, by: str = OWNER_APP) -> dict:
        """Change only some circuits of one OCS: take ``remove`` down, keep their ports dark for
        ``reconfiguration_delay_s`` (after the removal's barrier and datapath flush, as
        :meth:`apply`), bring ``add`` up. Rewires of disjoint ports run concurrently (each reads
        and updates the circuit table under its lock, the routing app reprograms for the table
        as it is then); they must not overlap an :meth:`apply`. Used by a control plane that
        reconfigures per group of GPUs (Opus, :mod:`controllers.opus`). ``on_dark()``, if given, is
        called once ``remove`` is gone from the switch and from the circuit table (before R).
        ``by`` as in :meth:`apply` (a refused rewire changes nothing and calls no ``on_dark``).

        :returns: as :meth:`apply`, plus ``"ocs"``.
        :raises FabricError: ``remove`` is not in place, or the result is not a valid configuration.
        """
        k = next((i for i, o in enumerate(self.state.fabric.ocs) if o.name == ocs_name), None)
        if k is None:
            raise FabricError(f"no OCS {ocs_name!r}")
        remove, add = frozenset(remove) - frozenset(add), frozenset(add) - frozenset(remove)
        t_request = time.monotonic()
        if not self.state.may_reconfigure(by):
            return {**self._refused(by, "rewire", t_request), "ocs": ocs_name}
        with self.state.lock:
            cur = self.state.circuits
            if not remove <= cur[ocs_name]:
                raise FabricError(f"{ocs_name}: circuits to remove are not in place: "
                                  f"{sorted(map(str, remove - cur[ocs_name]))}")
            add = add - cur[ocs_name]
            new = Configuration({**cur, ocs_name: (cur[ocs_name] - remove) | add})
        self.state.fabric.check_configuration(new)
        if not remove and not add:
            return {"changed": False, "ocs": ocs_name, "t_request": t_request, "t_live": time.monotonic(),
                    "reconfiguration_delay_s": 0.0, "dark_window_measured_s": 0.0, "removed": 0, "added": 0}
        t_dark = t_request
        if remove:
            t_dark = self.send_with_barriers(self.circuit_batches(k, remove, add=False))
        t_dark_flushed = self.in_datapath(t_dark)
        with self.state.lock:
            cur = self.state.circuits
            self.state.circuits = Configuration({**cur, ocs_name: (cur[ocs_name] - remove) | add})
        if on_dark is not None:
            on_dark()
        self._program_routes()
        t_routed = time.monotonic()
        wait = t_dark_flushed + reconfiguration_delay_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        t_install = t_live = time.monotonic()
        if add:
            t_live = self.send_with_barriers(self.circuit_batches(k, add, add=True))
        t_live_flushed = self.in_datapath(t_live)
        ends = [{e for c in cs for e in (c.a, c.b)} for cs in (remove, add)]
        out = {
            "changed": True, "ocs": ocs_name, "t_request": t_request, "t_dark": t_dark, "t_routed": t_routed,
            "t_install": t_install, "t_live": t_live, "t_dark_flushed": t_dark_flushed,
            "t_live_flushed": t_live_flushed, "reconfiguration_delay_s": reconfiguration_delay_s,
            "dark_window_measured_s": t_live - t_dark, "removed": len(remove), "added": len(add),
            "added_crossing": self._crossing(k, add), "rewired": [[e.gpu, e.port] for e in sorted(ends[0] & ends[1])], "by": by,
        }
        self.state.log_event("reconfigured", **out)
        with self.state.lock:
            now = self.state.circuits
        self.send_event_to_observers(EventCircuitsChanged(out, now))
        return out

    # ---- the emulator's events: collectives and steps, for demand-aware apps -----------------
    def post(self, records: list) -> dict:
        """Raise the emulator's events (``POST /demand``): ``records`` as
        :func:`controllers.events.parse_posted` reads them, all checked before any is raised.

        ``collective-begin`` hands the circuits to its ``owner`` for the run
        (:meth:`controllers.state.FabricState.set_owner`), ``collective-end`` back to the user's
        apps. A ``step-begin`` is sent to every app that handles :class:`EventStepBegin`; while
        the user's apps own the circuits this waits until each has returned from its handler
        (:class:`EventHandled`, at most :data:`HANDLER_TIMEOUT_S` s) and then applies the
        configurations they asked for (:meth:`EventStepBegin.set_circuits`), in order.

        :returns: ``{"events": records raised, "reconfigurations": [apply results],
            "dark_window_measured_s": their sum (s), "refused": requests refused,
            "handlers_s": seconds waiting for handlers, "circuits": the configuration in place
            (JSON) after them}``.
        :raises ValueError: ``records`` is not a list of valid records (nothing is raised).
        """
        if not isinstance(records, list):
            raise ValueError(f"events must be a list of event objects, got {records!r}"[:200])
        events = [parse_posted(r) for r in records]
        out = {"events": len(events), "reconfigurations": [], "dark_window_measured_s": 0.0, "refused": 0,
               "handlers_s": 0.0}
        for ev in events:
            if isinstance(ev, EventCollectiveBegin):
                self.state.set_owner(ev.owner, ev.name)
                self.state.log_event("collective-begin", name=ev.name, collective=ev.collective, algorithm=ev.algorithm,
                                     bytes=ev.bytes, gpus=len(ev.gpus), steps=ev.steps, planner=ev.planner,
                                     owner=ev.owner)
                self._run_dark = ev.reconfiguration_delay_s
                self.send_event_to_observers(ev)
            elif isinstance(ev, EventCollectiveEnd):
                self.send_event_to_observers(ev)
                self.state.set_owner(OWNER_APP, None)
                self.state.log_event("collective-end", name=ev.name, time_s=ev.time_s)
            elif isinstance(ev, EventStepEnd):
                self.send_event_to_observers(ev)
            else:
                self._step_begin(ev, out)
        with self.state.lock:
            out["circuits"] = self.state.circuits.to_json()
        return out

    def _step_begin(self, ev: EventStepBegin, out: dict) -> None:
        """Send ``ev`` to its observers; while the user's apps own the circuits, wait for their
        handlers and apply what they asked for (:meth:`post`)."""
        with self.state.lock:
            ev.owner, run = self.state.owner, self.state.run

        def refused(app: str, why: str) -> None:
            out["refused"] += 1
            if why == "owner":
                self._refused(app, "step", time.monotonic())
            else:
                self.state.log_event("step-request-late", logging.WARNING, by=app, run=run, step=ev.step,
                                     why="asked for circuits after the step was released; nothing changed")

        ev.on_refused = refused
        marks = []
        for name in self.get_observers(ev, None):
            self.send_event(name, ev)
            app = app_manager.lookup_service_brick(name)
            if ev.owner == OWNER_APP and app is not None and app.get_handlers(EventHandled()):
                marks.append((name, EventHandled()))
                self.send_event(name, marks[-1][1])
        t0 = time.monotonic()
        for name, mark in marks:
            if not mark.done.wait(max(0.0, t0 + HANDLER_TIMEOUT_S - time.monotonic())):
                self.state.log_event("step-handler-late", logging.WARNING, app=name, run=run, step=ev.step,
                                     why=f"still handling the step after {HANDLER_TIMEOUT_S:g} s; released without it")
        out["handlers_s"] += time.monotonic() - t0
        for app, config, dark in ev.take_requests():
            try:
                res = self.apply(config, self._run_dark if dark is None else dark, by=app)
            except (FabricError, RuntimeError, TypeError, AttributeError) as e:
                self.state.log_event("step-request-failed", logging.WARNING, by=app, run=run, step=ev.step, error=str(e))
                continue
            out["reconfigurations"].append(res)
            out["dark_window_measured_s"] += res["dark_window_measured_s"]


__all__ = ["CircuitSwitch", "FabricError"]
