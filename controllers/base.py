"""The bases of ocslab's controller apps: OS-Ken (or Ryu, :mod:`controllers.sdn`) apps on
OpenFlow 1.3.

:class:`OpenFlowApp` is what every app that programs switches stands on: it builds flow entries
with :meth:`~OpenFlowApp.add_flow` and :meth:`~OpenFlowApp.delete_flow`, as Ryu's
``simple_switch_13`` does, and empties a switch with :meth:`~OpenFlowApp.delete_all_flows` and
:meth:`~OpenFlowApp.delete_all_groups`. Unlike ``simple_switch_13``, these return the message
instead of sending it: an app sends a batch followed by an OpenFlow barrier
(:meth:`~OpenFlowApp.send_with_barrier`, :meth:`~OpenFlowApp.send_with_barriers`, over
:class:`controllers.barriers.Barriers`) and timestamps the barrier's reply, which is when the
batch took effect in the switch (a dark window is measured from these acknowledgements, never
assumed). The replies come in through the app's one ``OFPBarrierReply`` handler.

:class:`OcsLabApp` is the base of the ML fabric's apps (circuit switch, routing, JSON API,
failover, Opus, and your own): an :class:`OpenFlowApp` that shares the fabric's state
(:class:`controllers.state.FabricState`, an OS-Ken context), whose barrier table is shared too,
so the reply a switch sends completes the wait of whichever app sent the barrier; it also
acknowledges :class:`controllers.events.EventHandled`, which tells the circuit switch that the app
has handled the step event sent before it (``docs/controllers.md``, Events). The WAN's TE
app (:class:`controllers.wan_te.WanTe`) stands on :class:`OpenFlowApp` alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from controllers.barriers import Barriers
from controllers.events import EventHandled
from controllers.sdn import CONFIG_DISPATCHER, MAIN_DISPATCHER, App, ofp_event, ofproto_v1_3, set_ev_cls
from controllers.state import FabricState


class OpenFlowApp(App):
    """An app that programs OpenFlow 1.3 switches (module doc). Subclasses handle OpenFlow
    events with ``@set_ev_cls``.

    :param barriers: the table of outstanding barriers to use (shared with other apps of the
        same process); by default one of its own.
    """

    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, barriers: Barriers | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        #: Outstanding barriers by ``(dpid, xid)``, completed by :meth:`_barrier_reply`.
        self.barriers: Barriers = barriers if barriers is not None else Barriers()

    # ---- messages --------------------------------------------------------------------------
    @staticmethod
    def add_flow(dp, priority: int, match, actions: list, cookie: int = 0):
        """The FlowMod adding a flow to ``dp``'s table 0: ``match`` -> apply ``actions``
        (``OFPMatch`` and a list of ``OFPAction*`` of ``dp``'s parser; ``priority`` and ``cookie``
        as OpenFlow's 16- and 64-bit fields)."""
        parser, ofp = dp.ofproto_parser, dp.ofproto
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        return parser.OFPFlowMod(dp, cookie=cookie, priority=priority, match=match, instructions=inst)

    @staticmethod
    def delete_flow(dp, priority: int, match):
        """The FlowMod deleting exactly the flow of ``priority`` and ``match`` (DELETE_STRICT)."""
        parser, ofp = dp.ofproto_parser, dp.ofproto
        return parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE_STRICT, priority=priority,
                                 out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY, match=match)

    @staticmethod
    def delete_all_flows(dp):
        """The FlowMod emptying every table of ``dp``."""
        parser, ofp = dp.ofproto_parser, dp.ofproto
        return parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                 out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY, match=parser.OFPMatch())

    @staticmethod
    def delete_all_groups(dp):
        """The GroupMod deleting every group of ``dp``."""
        parser, ofp = dp.ofproto_parser, dp.ofproto
        return parser.OFPGroupMod(dp, command=ofp.OFPGC_DELETE, group_id=ofp.OFPG_ALL)

    # ---- barriers --------------------------------------------------------------------------
    def send_with_barrier(self, dp, msgs: Iterable, timeout: float = 5.0) -> float:
        """Send ``msgs`` to ``dp`` followed by a barrier; return the CLOCK_MONOTONIC time (s)
        the barrier's reply arrived (all earlier messages processed). ``msgs``: OpenFlow
        messages of ``dp``'s parser or their serialised ``bytes``.

        Do not call it from this app's event thread (a handler) unless another app of the
        process receives barrier replies too (:class:`OcsLabApp`): the reply is delivered there.

        :raises controllers.barriers.BarrierTimeout: no reply within ``timeout`` seconds.
        """
        return self.barriers.send_with_barriers([(dp, msgs)], timeout)

    def send_with_barriers(self, batches: Iterable[tuple[object, Iterable]], timeout: float = 5.0) -> float:
        """Send every ``(dp, msgs)`` batch followed by a barrier, all switches at once, and wait
        for every reply; return the CLOCK_MONOTONIC time (s) the last one arrived
        (:meth:`controllers.barriers.Barriers.send_with_barriers`; threads as in
        :meth:`send_with_barrier`).

        :raises controllers.barriers.BarrierTimeout: some reply did not come within ``timeout`` s.
        """
        return self.barriers.send_with_barriers(batches, timeout)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _barrier_reply(self, ev):
        self.barriers.replied(ev.msg.datapath.id, ev.msg.xid)


class OcsLabApp(OpenFlowApp):
    """An app of the ML fabric (module doc): reaches the shared state as ``self.state`` and
    shares its barrier table (``self.state.barriers``) with the fabric's other apps."""

    _CONTEXTS = {"ocslab_state": FabricState}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, barriers=kwargs["ocslab_state"].barriers, **kwargs)
        self.state: FabricState = kwargs["ocslab_state"]

    @set_ev_cls(EventHandled)
    def _handled(self, ev):
        ev.done.set()
