"""Events between ocslab's controller apps (OS-Ken synchronous requests, as Ryu apps use them).

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
