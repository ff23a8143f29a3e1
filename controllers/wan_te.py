"""A WAN slice's TE controller (OS-Ken app): Symphony's decentralised TE, arXiv 2510.11937.

One process of this app per slice, connected only to its slice's routers (Open vSwitch bridges).
It reads its slice from ``--ocslab-wan FILE`` (JSON written by :mod:`emulation.emulator.wan_net`)
and, when a router connects, installs:

- label switching for every tunnel through the router: ``vlan_vid = label`` -> the tunnel's next
  port, or at the tunnel's last router pop the label and deliver to the site's host (tunnel t has
  label t + 1; labels are fixed for the topology, as RSVP-TE or SR tunnels are);
- for every demand sourced at the router, a select group (id = demand + 1) and the flow
  ``in_port = host, ipv4_dst = destination site`` -> that group. Until the first TE solution the
  group has one bucket that drops.

``POST /interval`` ``{"index": i, "view": n x n demands, "failed": [link, ...]}``: solve TE on this
controller's view of the demand (tunnels over failed links left out) with the slice's objective
(:func:`emulation.planners.te.solve`), then rewrite the groups of the demands its routers source:
bucket t pushes tunnel t's label and sends on its first link, weighted by the split in 64ths
(:func:`emulation.planners.te.bucket_weights`); a bucket without actions takes what the TE does
not admit (max-flow, mcf), so the switches' hashing splits and drops the flows in the solution's
proportions. Answers
``{"splits": [[tunnel, split], ...], "solve_s", "install_s", "t_installed"}`` once the
switches acknowledged the groups with a barrier (``t_installed``: CLOCK_MONOTONIC s).
``GET /status`` ``{"slice": k, "switches": {router: programmed}, "ready": bool}``. A bad request gets 400 and
``{"error": ...}``; the server keeps serving.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import ThreadingHTTPServer

import numpy as np

from controllers import flags  # noqa: F401 - registers --ocslab-*
from controllers.base import OpenFlowApp
from controllers.http_api import JsonHandler, serve
from controllers.sdn import CONFIG_DISPATCHER, cfg, hub, ofp_event, set_ev_cls
from emulation.planners.te import bucket_weights, solve
from emulation.planners.tunnels import Tunnels

LOG = logging.getLogger("ocslab.wan_te")
TRANSIT_PRIORITY, INGRESS_PRIORITY = 100, 200
VID_PRESENT = 0x1000


class SliceConfig:
    """The slice this controller owns and the topology it solves over (the JSON of
    :meth:`emulation.emulator.wan_net.WanNet.slice_config`).

    :raises KeyError: a field is missing. :raises ValueError: more tunnels than 12-bit VLAN
        labels hold.
    """

    def __init__(self, data: dict):
        self.slice = int(data["slice"])
        self.names: list[str] = list(data["routers"])
        self.mine: set[int] = set(data["mine"])
        self.dpid: list[int] = list(data["dpid"])
        self.links = [tuple(l) for l in data["links"]]
        self.capacity = np.array(data["capacity"], dtype=float)
        self.port = [tuple(p) for p in data["port"]]  # (port on u, port on v) of link (u, v)
        self.host_port = int(data["host_port"])
        self.host_ip: list[str] = list(data["host_ip"])
        self.tunnels = Tunnels.from_paths(len(self.links), data["demands"], data["paths"], data["demand_of"])
        self.te = data["te"]
        if len(self.tunnels.paths) >= VID_PRESENT - 1:
            raise ValueError(f"{len(self.tunnels.paths)} tunnels do not fit in 12-bit VLAN labels")

    def router_of(self, dpid: int) -> int | None:
        return self.dpid.index(dpid) if dpid in self.dpid else None

    def route(self, t: int) -> list[int]:
        """Routers tunnel t visits, source first."""
        p = self.tunnels.paths[t]
        return [self.links[p[0]][0]] + [self.links[e][1] for e in p]


class WanTe(OpenFlowApp):
    """The slice TE controller (module doc): an :class:`controllers.base.OpenFlowApp` with
    barriers of its own, alone in its process."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with open(cfg.CONF.ocslab.wan) as fh:
            self.conf = SliceConfig(json.load(fh))
        self.lock = threading.Lock()
        self.datapaths: dict[int, object] = {}  # router -> datapath
        self.programmed: set[int] = set()
        self.splits = np.zeros(len(self.conf.tunnels.paths))
        self.server: ThreadingHTTPServer | None = None

    # ---- OpenFlow ------------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev):
        dp = ev.msg.datapath
        r = self.conf.router_of(dp.id)
        if r is None or r not in self.conf.mine:
            LOG.warning("router dpid %#x is not in slice %d: ignored", dp.id, self.conf.slice)
            return
        with self.lock:
            self.datapaths[r] = dp
            self.programmed.discard(r)
        hub.spawn(self._program, r, dp)  # the barrier reply arrives on this handler's thread

    def _program(self, r: int, dp) -> None:
        parser, ofp = dp.ofproto_parser, dp.ofproto
        c = self.conf
        msgs = [self.delete_all_flows(dp), self.delete_all_groups(dp)]
        for t in range(len(c.tunnels.paths)):
            route = c.route(t)
            if r not in route[1:]:
                continue
            i = route.index(r)
            match = parser.OFPMatch(vlan_vid=(t + 1) | VID_PRESENT)
            if i == len(route) - 1:
                actions = [parser.OFPActionPopVlan(), parser.OFPActionOutput(c.host_port)]
            else:
                actions = [parser.OFPActionOutput(c.port[c.tunnels.paths[t][i]][0])]
            msgs.append(self.add_flow(dp, TRANSIT_PRIORITY, match, actions))
        for d, (s, dst) in enumerate(c.tunnels.demands):
            if s != r:
                continue
            msgs.append(parser.OFPGroupMod(dp, command=ofp.OFPGC_ADD, type_=ofp.OFPGT_SELECT, group_id=d + 1,
                                           buckets=self._buckets(dp, d)))
            match = parser.OFPMatch(in_port=c.host_port, eth_type=0x0800, ipv4_dst=c.host_ip[dst])
            msgs.append(self.add_flow(dp, INGRESS_PRIORITY, match, [parser.OFPActionGroup(d + 1)]))
        try:
            self.send_with_barrier(dp, msgs, timeout=10.0)
        except Exception:
            LOG.exception("programming router %s failed", c.names[r])
            return
        with self.lock:
            self.programmed.add(r)
        LOG.info("router %s programmed (%d messages)", c.names[r], len(msgs))

    def _buckets(self, dp, d: int) -> list:
        parser, ofp = dp.ofproto_parser, dp.ofproto
        c = self.conf
        tunnels = c.tunnels.of(d)
        weights, drop = bucket_weights(self.splits[tunnels])
        out = []
        for t, w in zip(tunnels, weights):
            if w > 0:
                actions = [parser.OFPActionPushVlan(0x8100),
                           parser.OFPActionSetField(vlan_vid=(int(t) + 1) | VID_PRESENT),
                           parser.OFPActionOutput(c.port[c.tunnels.paths[t][0]][0])]
                out.append(parser.OFPBucket(weight=w, watch_port=ofp.OFPP_ANY, watch_group=ofp.OFPG_ANY,
                                            actions=actions))
        if drop > 0:  # what the TE does not admit: a bucket without actions drops it
            out.append(parser.OFPBucket(weight=drop, watch_port=ofp.OFPP_ANY, watch_group=ofp.OFPG_ANY, actions=[]))
        return out

    # ---- TE ------------------------------------------------------------------------------
    def solve_and_install(self, view: np.ndarray, failed: list[int]) -> dict:
        """Solve on ``view`` avoiding ``failed`` links, install this slice's groups (module doc).

        :param view: ``(routers, routers)`` this controller's view of the demands (the traffic
            matrix's units, those of the slice's capacities). :param failed: indices of links down.
        :returns: ``{"splits": [[tunnel, split], ...] of the demands this slice sources,
            "solve_s", "install_s" (s), "t_installed" (CLOCK_MONOTONIC s)}``.
        :raises ValueError: a bad view. :raises emulation.planners.te.TeError: the solver failed.
        :raises controllers.barriers.BarrierTimeout: a router did not acknowledge its groups.
        """
        c = self.conf
        n = len(c.names)
        if view.shape != (n, n) or not np.isfinite(view).all() or (view < 0).any():
            raise ValueError(f"view must be {n} x {n} finite demands >= 0")
        t0 = time.monotonic()
        alive, keep = c.tunnels.avoiding(failed)
        view = view.copy()
        for d, (s, t) in enumerate(c.tunnels.demands):  # a demand with no tunnel left cannot be carried
            if not (alive.demand_of == d).any():
                view[s, t] = 0.0
        cap = c.capacity.copy()
        cap[list(failed)] = 1.0  # no tunnel uses it; any positive value keeps the solver's scaling finite
        sol = solve(alive, view, cap, c.te["objective"], float(c.te["regulariser"]), float(c.te["capacity_headroom"]))
        splits = np.zeros(len(c.tunnels.paths))
        splits[keep] = sol.splits
        t1 = time.monotonic()
        mine = [d for d, (s, _) in enumerate(c.tunnels.demands) if s in c.mine]
        with self.lock:
            for d in mine:
                self.splits[c.tunnels.of(d)] = splits[c.tunnels.of(d)]
            dps = dict(self.datapaths)
        batches = []
        for r, dp in dps.items():
            ofp, parser = dp.ofproto, dp.ofproto_parser
            mods = [parser.OFPGroupMod(dp, command=ofp.OFPGC_MODIFY, type_=ofp.OFPGT_SELECT, group_id=d + 1,
                                       buckets=self._buckets(dp, d))
                    for d in mine if c.tunnels.demands[d][0] == r]
            if mods:
                batches.append((dp, mods))
        t_done = self.send_with_barriers(batches, timeout=10.0) if batches else time.monotonic()
        return {"splits": [[int(t), float(splits[t])] for d in mine for t in c.tunnels.of(d)],
                "solve_s": t1 - t0, "install_s": t_done - t1, "t_installed": t_done}

    # ---- API -----------------------------------------------------------------------------
    def start(self):
        thread = super().start()
        self.server = serve(cfg.CONF.ocslab.api_port, _handler(self))
        return thread

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
        super().stop()

    def status(self) -> dict:
        with self.lock:
            sw = {self.conf.names[r]: r in self.programmed for r in sorted(self.conf.mine)}
        return {"slice": self.conf.slice, "switches": sw, "ready": all(sw.values())}


def _handler(app: WanTe):
    class Handler(JsonHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            if self.path == "/status":
                self.send_json(200, app.status())
            else:
                self.send_json(404, {"error": f"no endpoint {self.path}"})

        def do_POST(self):  # noqa: N802
            if self.path != "/interval":
                self.send_json(404, {"error": f"no endpoint {self.path}"})
                return
            try:
                body = self.read_json()
                view = np.array(body["view"], dtype=float)
                failed = [int(e) for e in body.get("failed", [])]
                if any(not 0 <= e < len(app.conf.links) for e in failed):
                    raise ValueError(f"failed links must be in [0, {len(app.conf.links)})")
                self.send_json(200, app.solve_and_install(view, failed))
            except (KeyError, TypeError, ValueError) as e:
                self.send_json(400, {"error": f"bad request: {e}"})
            except Exception as e:  # the solver or a switch failed: report, keep serving
                LOG.exception("interval failed")
                self.send_json(500, {"error": f"{type(e).__name__}: {e}"})

    return Handler
