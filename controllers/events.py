"""Events between ocslab's controller apps (OS-Ken/Ryu events and synchronous requests).

Observable by any app, your own included (``@set_ev_cls(EventCircuitsChanged)``; the circuit
switch sends them to every app that declares a handler):

- :class:`EventSwitchReady`: a bridge connected and its initial rules are acknowledged;
- :class:`EventCircuitsChanged`: a reconfiguration took effect (its phase timestamps);
- :class:`EventRotorSlot`: a slot of a rotor (time-slotted schedule) started;
- :class:`EventCollectiveBegin`, :class:`EventCollectiveEnd`: the emulator starts or finished a
  collective run (its name, algorithm, size, GPUs, and who owns the circuits meanwhile);
- :class:`EventStepBegin`, :class:`EventStepEnd`: a step of that run is about to be released, or
  has ended, with its demand, the bytes of its transfers per GPU pair; a handler of
  :class:`EventStepBegin` may ask for the step's circuits with :meth:`EventStepBegin.set_circuits`;
- :class:`EventPhaseRequest`: a rank of an Opus job asked for its phase's configuration;
- :class:`EventOwnershipRefused`: a circuit request was refused because someone else owns the
  circuits (:data:`OWNER_APP`, ``docs/controllers.md``, "Who owns the OCS when").

The collective and step events are posted by the emulator (``POST /demand``) when it runs
collectives with user apps loaded; the circuit switch sends them to every app that declares a
handler, and for a step it waits until every such app has handled it (:class:`EventHandled`)
before it answers, so circuits asked for in a handler are in place when the step is released.

The circuit switch asks the routing app to bring the packet-forwarding bridges in line with the
circuits, and waits for the answer, because a reconfiguration reroutes while its circuits are
dark: ``CircuitSwitch`` sends :class:`ProgramRoutes` with ``send_request`` and blocks until
``Routing`` replies :class:`RoutesProgrammed` (its flow mods barrier-acknowledged). Without a
routing app loaded nothing is sent.
"""

from __future__ import annotations

import threading

from controllers.sdn import event

#: The app that answers :class:`ProgramRoutes` (``Routing``'s OS-Ken name).
ROUTING_APP = "Routing"

#: Who owns the circuits (``FabricState.owner``): the user's apps (no run, or a run whose scenario
#: says ``planner: none``), the run's planner or schedule, or the emulator itself (a headroom probe,
#: any run it makes on its own behalf).
OWNER_APP, OWNER_PLANNER, OWNER_EMULATOR = "app", "planner", "emulator"
OWNERS = (OWNER_APP, OWNER_PLANNER, OWNER_EMULATOR)


class ProgramRoutes(event.EventRequestBase):
    """Reprogram forwarding for the current circuits: one bridge just connected and wiped
    (``dp``), or every connected NIC and EPS bridge (``dp`` None)."""

    def __init__(self, dp=None):
        super().__init__()
        self.dst = ROUTING_APP
        self.dp = dp


class RoutesProgrammed(event.EventReplyBase):
    """The reply: the changed rules are installed and acknowledged by barrier at ``t_ack``
    (CLOCK_MONOTONIC seconds; None if nothing changed)."""

    def __init__(self, dst, t_ack: float | None):
        super().__init__(dst)
        self.t_ack = t_ack


class PrepareRoutes(event.EventRequestBase):
    """Compute the forwarding rules of ``configs`` (configurations a schedule will visit) ahead of
    time, so that rerouting to them inside a dark window is quick; nothing is sent."""

    def __init__(self, configs):
        super().__init__()
        self.dst = ROUTING_APP
        self.configs = list(configs)


class RoutesPrepared(event.EventReplyBase):
    """The reply to :class:`PrepareRoutes`: ``flow_mods`` serialised FlowMods are kept."""

    def __init__(self, dst, flow_mods: int):
        super().__init__(dst)
        self.flow_mods = flow_mods


class EventSwitchReady(event.EventBase):
    """Bridge ``name`` (datapath id ``dpid``) connected and its initial rules (circuits or
    routes) are barrier-acknowledged; ``ready`` is True once every bridge of the fabric is."""

    def __init__(self, dpid: int, name: str, ready: bool):
        super().__init__()
        self.dpid, self.name, self.ready = dpid, name, ready


class EventCircuitsChanged(event.EventBase):
    """A reconfiguration took effect: ``result`` is the dict
    :meth:`controllers.circuit_switch.CircuitSwitch.apply` returns (``t_dark``, ``t_live``,
    ``dark_window_measured_s``, circuits ``removed``/``added``; CLOCK_MONOTONIC s) and
    ``circuits`` the configuration now in place (:class:`emulation.fabric.Configuration`)."""

    def __init__(self, result: dict, circuits):
        super().__init__()
        self.result, self.circuits = result, circuits


class EventRotorSlot(event.EventBase):
    """Slot ``slot`` of a rotor started: configuration ``config`` (index into the rotor's list)
    live at ``t_live`` (CLOCK_MONOTONIC s), for ``slot_s`` seconds."""

    def __init__(self, slot: int, config: int, t_live: float, slot_s: float):
        super().__init__()
        self.slot, self.config, self.t_live, self.slot_s = slot, config, t_live, slot_s


class EventCollectiveBegin(event.EventBase):
    """The emulator starts collective run ``name``: ``collective`` (``"allreduce"``, ...) by
    ``algorithm`` on a buffer of ``bytes`` bytes per rank, rank r on GPU ``gpus[r]``, in
    ``steps`` round-synchronous steps (0 for a time-slotted run, whose rotor sets the circuits);
    ``planner`` is the scenario's (``"none"``, ``"always"``, ``"dp"``, ...); ``owner`` who may
    set the circuits until :class:`EventCollectiveEnd` (:data:`OWNERS`); ``reconfiguration_delay_s``
    the fabric's R as the emulation runs it (real R x time dilation, seconds)."""

    def __init__(self, name: str, collective: str, algorithm: str, bytes: int, gpus: list[int], steps: int,
                 planner: str, owner: str, reconfiguration_delay_s: float):
        super().__init__()
        self.name, self.collective, self.algorithm, self.bytes = name, collective, algorithm, bytes
        self.gpus, self.steps, self.planner, self.owner = list(gpus), steps, planner, owner
        self.reconfiguration_delay_s = reconfiguration_delay_s


class EventCollectiveEnd(event.EventBase):
    """Collective run ``name`` (as in :class:`EventCollectiveBegin`) ended after ``time_s``
    real-equivalent seconds (None: it failed); the circuits belong to the user's apps again."""

    def __init__(self, name: str, collective: str, algorithm: str, bytes: int, gpus: list[int],
                 time_s: float | None):
        super().__init__()
        self.name, self.collective, self.algorithm, self.bytes = name, collective, algorithm, bytes
        self.gpus, self.time_s = list(gpus), time_s


def demand_of(pairs) -> dict[tuple[int, int], int]:
    """``{(src, dst): bytes}`` from ``[[src, dst, bytes], ...]`` (pairs repeated are summed).

    :raises ValueError: an entry is not three non-negative integers.
    """
    out: dict[tuple[int, int], int] = {}
    for p in pairs:
        if (not isinstance(p, (list, tuple)) or len(p) != 3
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in p)):
            raise ValueError(f"demand entries must be [src, dst, bytes] of non-negative integers, got {p!r}"[:200])
        out[(p[0], p[1])] = out.get((p[0], p[1]), 0) + p[2]
    return out


class EventStepBegin(event.EventBase):
    """Step ``step`` (0-based, of ``steps``) of collective run ``name`` is about to be released;
    ``phase`` is its label (``"reduce-scatter"``, ``"exchange"``, ...) and ``demand``
    ``{(src GPU, dst GPU): bytes}`` the bytes its transfers carry (the workload's real bytes,
    summed per ordered pair). ``owner`` as in :class:`EventCollectiveBegin`.

    While the run's owner is :data:`OWNER_APP`, the step waits until every app that handles this
    event has returned from its handler; a handler that wants other circuits for the step calls
    :meth:`set_circuits` (not ``apply``, which would block its event thread), and the circuit
    switch applies them before the step is released, the dark window counted in the run's time.
    """

    def __init__(self, name: str, step: int, steps: int, phase: str, demand: dict[tuple[int, int], int], owner: str):
        super().__init__()
        self.name, self.step, self.steps, self.phase = name, step, steps, phase
        self.demand, self.owner = dict(demand), owner
        self._lock = threading.Lock()
        self._open = True
        #: called with ``(app, why)`` for a request that is not taken: ``"owner"`` (the app does
        #: not own the circuits) or ``"late"`` (the step was released already); set by the sender
        self.on_refused = None
        #: ``(app name, configuration, reconfiguration_delay_s)`` asked for, in order
        self.requests: list[tuple[str, object, float | None]] = []

    def set_circuits(self, app: str, configuration, reconfiguration_delay_s: float | None = None) -> bool:
        """Ask for ``configuration`` (a whole :class:`emulation.fabric.Configuration`) for this
        step, on behalf of app ``app`` (its name, for the log), with dark window
        ``reconfiguration_delay_s`` seconds (None: the run's, :class:`EventCollectiveBegin`).
        Applied once every handler returned, if the user's apps own the circuits
        (:data:`OWNER_APP`); several requests are applied in order.

        :returns: True if taken; False if refused (not the owner, or asked after the step was
            released), which the controller logs (``ownership-refused``, ``step-request-late``).
        """
        with self._lock:
            taken = self._open and self.owner == OWNER_APP
            if taken:
                self.requests.append((app, configuration, reconfiguration_delay_s))
        if not taken and self.on_refused is not None:
            self.on_refused(app, "owner" if self.owner != OWNER_APP else "late")
        return taken

    def take_requests(self) -> list[tuple[str, object, float | None]]:
        """The requests made so far; later ones are refused as late (the circuit switch's side
        of :meth:`set_circuits`, once the step's handlers returned)."""
        with self._lock:
            self._open = False
            out, self.requests = self.requests, []
        return out


class EventStepEnd(event.EventBase):
    """Step ``step`` of run ``name`` ended: every transfer arrived; ``demand`` as in
    :class:`EventStepBegin`, ``time_s`` the step's real-equivalent duration (seconds, from its
    release to its last byte, dark window included) and ``end_s`` the run's clock at its end."""

    def __init__(self, name: str, step: int, phase: str, demand: dict[tuple[int, int], int], time_s: float,
                 end_s: float):
        super().__init__()
        self.name, self.step, self.phase, self.demand = name, step, phase, dict(demand)
        self.time_s, self.end_s = time_s, end_s


class EventPhaseRequest(event.EventBase):
    """GPU ``rank`` of Opus process group ``group`` (members ``members``, on rail ``rail``; None
    for a group the scale-up domain carries) asked for the group's phase configuration, ``mode``
    ``"on-demand"`` or ``"speculative"``, at ``t_asked`` (CLOCK_MONOTONIC s). Sent by
    :class:`controllers.opus.OpusApp` before it decides; observing it changes nothing."""

    def __init__(self, group: str, rank: int, members: list[int], rail: str | None, mode: str, t_asked: float):
        super().__init__()
        self.group, self.rank, self.members, self.rail = group, rank, list(members), rail
        self.mode, self.t_asked = mode, t_asked


class EventOwnershipRefused(event.EventBase):
    """``by`` (an app's name) asked for circuits while ``owner`` owns them (run ``run``, None
    between runs); nothing was changed. ``what`` is ``"apply"``, ``"rewire"`` or ``"step"``."""

    def __init__(self, by: str, owner: str, run: str | None, what: str):
        super().__init__()
        self.by, self.owner, self.run, self.what = by, owner, run, what


class EventHandled(event.EventBase):
    """Sent to an app right after an event it handles: when it arrives, that event's handler has
    returned (an app handles its events in order). :class:`controllers.base.OcsLabApp` sets
    ``done`` on receipt."""

    def __init__(self):
        super().__init__()
        self.done = threading.Event()


def _field(d: dict, key: str, kind, what: str):
    x = d.get(key)
    ok = isinstance(x, kind) and not isinstance(x, bool) if kind is not bool else isinstance(x, bool)
    if not ok:
        raise ValueError(f"{d.get('kind')}: {key} must be {what}, got {x!r}"[:200])
    return x


def _count(d: dict, key: str) -> int:
    x = _field(d, key, int, "an integer >= 0")
    if x < 0:
        raise ValueError(f"{d.get('kind')}: {key} must be an integer >= 0, got {x}")
    return x


def _seconds_or_none(d: dict, key: str) -> float | None:
    x = d.get(key)
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not x >= 0 or x == float("inf"):
        raise ValueError(f"{d.get('kind')}: {key} must be a number of seconds >= 0, got {x!r}"[:200])
    return float(x)


#: The kinds ``POST /demand`` takes, in the order a run posts them.
POSTED_KINDS = ("collective-begin", "step-begin", "step-end", "collective-end")


def parse_posted(d: object) -> event.EventBase:
    """The event of one posted record (``POST /demand``): ``{"kind": one of POSTED_KINDS, ...}``
    with the fields of :class:`EventCollectiveBegin`, :class:`EventStepBegin` (``demand`` as
    ``[[src, dst, bytes], ...]``, no ``owner``: the controller's), :class:`EventStepEnd` or
    :class:`EventCollectiveEnd`.

    :raises ValueError: not an object, an unknown kind, or a field missing or mistyped (one
        line naming it).
    """
    if not isinstance(d, dict):
        raise ValueError(f"an event must be an object, got {d!r}"[:200])
    kind = d.get("kind")
    if kind not in POSTED_KINDS:
        raise ValueError(f"kind must be one of {', '.join(POSTED_KINDS)}, got {kind!r}"[:200])
    name = _field(d, "name", str, "a run name")
    if kind in ("collective-begin", "collective-end"):
        gpus = _field(d, "gpus", list, "a list of GPU numbers")
        if not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in gpus):
            raise ValueError(f"{kind}: gpus must be a list of GPU numbers, got {gpus!r}"[:200])
        common = (name, _field(d, "collective", str, "a collective's name"), _field(d, "algorithm", str, "an algorithm"),
                  _count(d, "bytes"), gpus)
        if kind == "collective-end":
            return EventCollectiveEnd(*common, _seconds_or_none(d, "time_s"))
        owner = d.get("owner")
        if owner not in OWNERS:
            raise ValueError(f"collective-begin: owner must be one of {', '.join(OWNERS)}, got {owner!r}"[:200])
        return EventCollectiveBegin(*common, _count(d, "steps"), _field(d, "planner", str, "a planner's name"), owner,
                                    _seconds_or_none(d, "reconfiguration_delay_s") or 0.0)
    step, phase = _count(d, "step"), _field(d, "phase", str, "a phase label")
    demand = demand_of(_field(d, "demand", list, "a list of [src, dst, bytes]"))
    if kind == "step-begin":
        return EventStepBegin(name, step, _count(d, "steps"), phase, demand, OWNER_APP)
    time_s, end_s = _seconds_or_none(d, "time_s"), _seconds_or_none(d, "end_s")
    if time_s is None or end_s is None:
        raise ValueError("step-end: time_s and end_s must be numbers of seconds >= 0")
    return EventStepEnd(name, step, phase, demand, time_s, end_s)
