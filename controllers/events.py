"""Events between ocslab's controller apps (OS-Ken/Ryu events and synchronous requests).

Observable by any app, your own included (``@set_ev_cls(EventCircuitsChanged)``; the circuit
switch sends them to every app that declares a handler):

- :class:`EventSwitchReady`: a bridge connected and its initial rules are acknowledged;
- :class:`EventCircuitsChanged`: a reconfiguration took effect (its phase timestamps);
- :class:`EventRotorSlot`: a slot of a rotor (time-slotted schedule) started.

The circuit switch asks the routing app to bring the packet-forwarding bridges in line with the
circuits, and waits for the answer, because a reconfiguration reroutes while its circuits are
dark: ``CircuitSwitch`` sends :class:`ProgramRoutes` with ``send_request`` and blocks until
``Routing`` replies :class:`RoutesProgrammed` (its flow mods barrier-acknowledged). Without a
routing app loaded nothing is sent.
"""

from __future__ import annotations

from controllers.sdn import event

#: The app that answers :class:`ProgramRoutes` (``Routing``'s OS-Ken name).
ROUTING_APP = "Routing"


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
