"""OS-Ken app: Opus, the control plane of photonic rails (arXiv 2507.08119). A training job's
ranks tell it which parallelism phase they enter; it sets each rail's circuits for that phase.

The job talks to it over a Unix stream socket (a path every Mininet host reaches: the channel
does not cross the emulated fabric), one JSON object per line each way:

- ``{"op": "checkin", "group": G, "members": [gpu, ...], "rank": k}``: rank ``k`` of process
  group ``G`` (its members' GPUs in group-rank order) checks in. A group whose members share one
  OCS (a rail) gets a *segment*: its circuits on that rail (two members: every rail port of each
  joined to the other; more: a ring, half the ports to each neighbour), numbered by a bit of the
  rail's configuration mask (groups with the same circuits share the bit). A group whose members
  sit on one server (no common rail; the scale-up domain carries it) is ``ignored``. Answer
  ``{"ok", "group", "ignored", "rail", "bit"}``.
- ``{"op": "request", "group": G, "rank": k, "mode": "on-demand" | "speculative"}``: rank ``k``
  asks for G's configuration. When it is granted is the Opus rule (:mod:`emulation.planners.opus`,
  never preempting): at once if G's circuits are in place; otherwise once every member has asked
  (or holds the configuration already), and never while a rank is still inside a phase on the
  circuits G's ports carry (cutting them would strand that rank's collective in flight, and the
  rank, blocked in it, could not ask for them back). A granted change rewires the ports that
  differ (their other circuits go: the segments they belonged to lose their holders) with the
  armed dark window R, after any earlier rewire of the same ports; every asking member is
  answered when the new circuits carry traffic. A speculative request obeys the same rules; it
  differs in when the rank sends it: as soon as its previous phase ends, so that R passes during
  its compute. Answer ``{"ok", "group", "changed", "rail", "mask", "t_asked", "t_answered",
  "reconfiguration"}`` (the rewire's timestamps, :meth:`CircuitSwitch.rewire`), or
  ``{"ok": false, "error"}`` after the armed timeout (default 10 s) without an answer.
- ``{"op": "ping"}``: ``{"ok": true, "t"}`` (the job measures its round trip with it).

Arm with ``POST /opus {"socket", "reconfiguration_delay_s", "timeout_s"}`` (the API app);
``{"disarm": true}`` closes the socket. Every rewire is logged as ``opus-reconfigured`` with
the group, rail, mask, whether a speculative request caused it, the ranks it answers and its
dark window. Every request of a checked-in member is sent to the apps that observe it as
:class:`controllers.events.EventPhaseRequest` before the rule decides.

Spec: ``docs/mechanisms.md`` (Opus, arXiv 2507.08119).
"""

from __future__ import annotations

import json
import os
import socketserver
import threading
import time
from dataclasses import dataclass

from controllers.base import OcsLabApp
from controllers.events import EventPhaseRequest
from controllers.sdn import app_manager
from emulation.fabric import FabricError, assign_ports
from emulation.planners.opus import Grant, OpusRule

#: Seconds a request waits for the other members before it is answered with an error.
TIMEOUT_S = 10.0


class _Group:
    __slots__ = ("id", "members", "rail", "segment", "ports", "bit")

    def __init__(self, gid: str, members: tuple[int, ...], rail: str | None, segment: frozenset, bit: int | None):
        self.id = gid
        self.members = members
        self.rail = rail
        self.segment = segment
        self.ports = frozenset(e for c in segment for e in (c.a, c.b))
        self.bit = bit


@dataclass(eq=False)
class _Rewire:
    """A granted configuration on its way to the ranks it answers: ``result`` is the rewire's
    (:meth:`CircuitSwitch.rewire`; None: nothing to change) or ``error`` why it failed, ``done``
    once either is known."""

    group: _Group
    ranks: tuple[int, ...]
    speculative: bool
    done: bool
    result: dict | None = None
    error: str = ""


class OpusApp(OcsLabApp):
    """Serves the Opus protocol (module doc) and rewires rails per process group; raises
    :class:`controllers.events.EventPhaseRequest` for every request."""

    _EVENTS = [EventPhaseRequest]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._cv = threading.Condition()
        self._groups: dict[str, _Group] = {}
        self._bits: dict[str, list[frozenset]] = {}  # rail -> segments in bit order
        self._rule = OpusRule(self._granted)
        self._answers: dict[tuple[str, int], _Rewire] = {}  # (group, rank) -> the grant answering it
        self._queued: list[_Rewire] = []  # granted rewires not started yet, in grant order
        self._busy: set = set()  # ports being rewired
        self._server = None
        self._socket = ""
        self._dark = 0.0
        self._timeout = TIMEOUT_S

    # ---- arming ------------------------------------------------------------------------------
    def arm(self, socket_path: str, reconfiguration_delay_s: float, timeout_s: float = TIMEOUT_S) -> dict:
        """Serve the protocol on the Unix socket ``socket_path`` (replacing a stale file) with
        dark window ``reconfiguration_delay_s`` (seconds) and request timeout ``timeout_s``.

        :returns: ``{"socket", "reconfiguration_delay_s", "timeout_s"}``.
        :raises FabricError: a negative delay or timeout, or the socket cannot be made.
        """
        if reconfiguration_delay_s < 0 or not timeout_s > 0:
            raise FabricError(f"reconfiguration_delay_s >= 0 and timeout_s > 0 needed, got "
                              f"{reconfiguration_delay_s}, {timeout_s}")
        self.disarm()
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        app = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                for line in self.rfile:
                    try:
                        msg = json.loads(line)
                        out = app.handle(msg if isinstance(msg, dict) else {})
                    except ValueError as e:
                        out = {"ok": False, "error": f"bad message: {e}"}
                    self.wfile.write((json.dumps(out) + "\n").encode())
                    self.wfile.flush()

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True
            request_queue_size = 1024  # every rank of a job connects at once (socketserver's default: 5)

        try:
            server = Server(socket_path, Handler)
        except OSError as e:
            raise FabricError(f"socket {socket_path}: {e.strerror}") from None
        os.chmod(socket_path, 0o666)
        with self._cv:
            self._groups.clear()
            self._bits.clear()
            self._rule = OpusRule(self._granted)
            self._answers.clear()
            self._queued.clear()
            self._busy.clear()
            self._server, self._socket = server, socket_path
            self._dark, self._timeout = reconfiguration_delay_s, timeout_s
        threading.Thread(target=server.serve_forever, name="opus", daemon=True).start()
        self.state.log_event("opus-armed", socket=socket_path, reconfiguration_delay_s=reconfiguration_delay_s,
                             timeout_s=timeout_s)
        return {"socket": socket_path, "reconfiguration_delay_s": reconfiguration_delay_s, "timeout_s": timeout_s}

    def disarm(self) -> dict:
        """Stop serving and remove the socket. :returns: ``{"disarmed": True}``."""
        with self._cv:
            server, path = self._server, self._socket
            self._server, self._socket = None, ""
            self._cv.notify_all()
        if server is not None:
            server.shutdown()
            server.server_close()
            if os.path.exists(path):
                os.unlink(path)
            self.state.log_event("opus-disarmed")
        return {"disarmed": True}

    # ---- protocol ----------------------------------------------------------------------------
    def handle(self, msg: dict) -> dict:
        """One message of the protocol (module doc) and its answer."""
        op = msg.get("op")
        try:
            if op == "ping":
                return {"ok": True, "t": time.monotonic()}
            if op == "checkin":
                members = msg.get("members")
                if not isinstance(members, list) or not all(isinstance(g, int) for g in members) or not members:
                    raise ValueError("members must be a non-empty list of GPU numbers")
                return self.checkin(str(msg["group"]), tuple(members), int(msg["rank"]))
            if op == "request":
                mode = msg.get("mode", "on-demand")
                if mode not in ("on-demand", "speculative"):
                    raise ValueError(f"mode must be on-demand or speculative, got {mode!r}")
                return self.request(str(msg["group"]), int(msg["rank"]), mode == "speculative")
        except (KeyError, TypeError, ValueError, FabricError) as e:
            return {"ok": False, "error": str(e) or type(e).__name__}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def checkin(self, gid: str, members: tuple[int, ...], rank: int) -> dict:
        """Register group ``gid`` (module doc). :raises ValueError: members span rails without
        sharing one, or a group checks in again with other members."""
        fabric = self.state.fabric
        if not 0 <= rank < len(members):
            raise ValueError(f"rank {rank} of a group of {len(members)}")
        with self._cv:
            g = self._groups.get(gid)
            if g is not None:
                if g.members != members:
                    raise ValueError(f"group {gid} checked in before with members {list(g.members)}")
                return self._checked(g)
            rails = [{o.name for o in fabric.ocs for p in o.ports if p.gpu == m} for m in members]
            common = set.intersection(*rails) if len(members) > 1 else set()
            if len(members) < 2 or not common:
                if len(members) > 1 and len({m // self._per_server() for m in members}) > 1:
                    raise ValueError(f"group {gid}: members {list(members)} share no rail")
                g = _Group(gid, members, None, frozenset(), None)
            else:
                rail = sorted(common)[0]
                ocs = fabric.ocs_by_name(rail)
                ports = sum(1 for p in ocs.ports if p.gpu == members[0])
                if len(members) == 2:
                    pairs = [members] * ports
                else:
                    pairs = [(members[i], members[(i + 1) % len(members)]) for i in range(len(members))
                             for _ in range(ports // 2)]
                segment = frozenset(assign_ports(fabric, rail, pairs)[rail])
                bits = self._bits.setdefault(rail, [])
                if segment not in bits:
                    bits.append(segment)
                g = _Group(gid, members, rail, segment, bits.index(segment))
                with self.state.lock:
                    in_place = segment <= self.state.circuits[rail]
                self._rule.add_group(gid, members, sorted(g.ports), segment, in_place)
            self._groups[gid] = g
            return self._checked(g)

    def _per_server(self) -> int:
        """GPUs per server: the size of a scale-up switch (``nvl*``), or 1."""
        nvl = [e for e in self.state.fabric.eps if e.name.startswith("nvl")]
        return len(nvl[0].ports) if nvl else 1

    @staticmethod
    def _checked(g: _Group) -> dict:
        return {"ok": True, "group": g.id, "ignored": g.rail is None, "rail": g.rail, "bit": g.bit}

    def _mask(self, rail: str) -> int:
        """The rail's configuration as a bitmask of the segments wholly in place."""
        with self.state.lock:
            cur = self.state.circuits[rail]
        return sum(1 << i for i, seg in enumerate(self._bits.get(rail, [])) if seg <= cur)

    def _live(self, g: _Group) -> bool:
        """Under the lock: ``g``'s circuits are in place and none of its ports is being rewired."""
        if g.ports & self._busy:
            return False
        with self.state.lock:
            return g.segment <= self.state.circuits[g.rail]

    def request(self, gid: str, rank: int, speculative: bool) -> dict:
        """Rank ``rank`` (a GPU) asks for group ``gid``'s configuration (module doc); blocks
        until it is in place or the timeout passes.

        :raises ValueError: an unknown group or a GPU not in it, Opus disarmed.
        """
        t_asked = time.monotonic()
        with self._cv:
            g = self._groups.get(gid)
        if g is not None and rank in g.members:  # for the apps that observe it; outside the lock
            self.send_event_to_observers(EventPhaseRequest(gid, rank, list(g.members), g.rail,
                                                           "speculative" if speculative else "on-demand", t_asked))
        with self._cv:
            g = self._groups.get(gid)
            if g is None:
                raise ValueError(f"group {gid} has not checked in")
            if rank not in g.members:
                raise ValueError(f"GPU {rank} is not a member of group {gid}")
            if g.rail is None:
                return {"ok": True, "group": gid, "changed": False, "rail": None, "mask": 0, "ignored": True,
                        "t_asked": t_asked, "t_answered": time.monotonic(), "reconfiguration": None}
            self._rule.ask(rank, gid)
            self._rule.request(rank, gid, speculative)
            self._cv.notify_all()
            deadline = t_asked + self._timeout
            while True:
                if self._server is None:
                    raise ValueError("Opus is disarmed")
                rw = self._answers.get((gid, rank))
                if rw is not None and rw.done and (rw.error or self._live(g)):
                    del self._answers[(gid, rank)]
                    if rw.error:
                        self._rule.withdraw(rank, gid)
                        return {"ok": False, "error": f"rewiring {gid} failed: {rw.error}"}
                    self._rule.answer(rank, gid)
                    self._cv.notify_all()
                    return {"ok": True, "group": gid, "changed": bool(rw.result and rw.result.get("changed")),
                            "rail": g.rail, "mask": self._mask(g.rail), "t_asked": t_asked,
                            "t_answered": time.monotonic(), "reconfiguration": rw.result}
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [m for m in self._rule.missing(gid) if m != rank]
                    self._answers.pop((gid, rank), None)
                    self._rule.withdraw(rank, gid)
                    why = f"waits for GPUs {missing} to ask" if missing and rw is None else "waits for its circuits"
                    return {"ok": False, "error": f"timeout after {self._timeout:g} s: group {gid} {why}"}
                self._cv.wait(left)

    def _granted(self, grant: Grant) -> None:
        """The rule granted ``grant`` (under the lock): its ranks are answered once its circuits
        are in place, after a rewire if it changed ports."""
        rw = _Rewire(self._groups[grant.group], grant.ranks, grant.speculative, done=not grant.changed)
        for r in grant.ranks:
            self._answers[(grant.group, r)] = rw
        if grant.changed:
            self._queued.append(rw)
            self._start_rewires()

    def _start_rewires(self) -> None:
        """Under the lock: start the queued rewires, in grant order, whose ports (and the far ends
        of the circuits they take down) no rewire in progress touches; a rewire also waits for an
        earlier queued one on its ports."""
        waiting: list[_Rewire] = []
        for rw in self._queued:
            g = rw.group
            with self.state.lock:
                cur = self.state.circuits[g.rail]
            remove = {c for c in cur if c.a in g.ports or c.b in g.ports} - g.segment
            gone = {e for c in remove for e in (c.a, c.b)}
            if (g.ports | gone) & self._busy or any(w.group.ports & g.ports for w in waiting):
                waiting.append(rw)
                continue
            freed = frozenset(gone - g.ports)  # other ends of the circuits taken down: free once they are
            self._busy |= g.ports | freed
            threading.Thread(target=self._switch, args=(rw, frozenset(remove), frozenset(g.segment - cur), freed),
                             name=f"opus-{g.id}", daemon=True).start()
        self._queued = waiting

    def _switch(self, rw: _Rewire, remove: frozenset, add: frozenset, freed: frozenset) -> None:
        g = rw.group
        cs = app_manager.lookup_service_brick("CircuitSwitch")
        released = []

        def dark() -> None:  # another group may rewire the freed ports while these stay dark
            with self._cv:
                self._busy -= freed
                released.append(True)
                self._start_rewires()
                self._cv.notify_all()

        res, err = {}, ""
        try:
            res = cs.rewire(g.rail, remove, add, self._dark, on_dark=dark, by="opus")
        except Exception as e:  # a switch that fails: answer the waiters with the error
            err = f"{type(e).__name__}: {e}"
        with self._cv:
            self._busy -= g.ports if released else g.ports | freed
            rw.result, rw.error, rw.done = res or None, err, True
            mask = self._mask(g.rail)
            self._start_rewires()
            self._cv.notify_all()
        self.state.log_event("opus-reconfigured", group=g.id, rail=g.rail, mask=mask, speculative=rw.speculative,
                             pending=sorted(rw.ranks), error=rw.error or None,
                             dark_window_measured_s=res.get("dark_window_measured_s"),
                             reconfiguration_delay_s=self._dark, t_dark=res.get("t_dark"), t_live=res.get("t_live"))
