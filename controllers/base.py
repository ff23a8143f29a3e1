"""The base of ocslab's controller apps: an OS-Ken (Ryu API) app on OpenFlow 1.3 that shares the
fabric's state (:class:`controllers.state.FabricState`, an OS-Ken context) and builds its flow
entries with :meth:`OcsLabApp.add_flow` and :meth:`OcsLabApp.delete_flow`, as Ryu's
``simple_switch_13`` does.

Unlike ``simple_switch_13``, the helpers return the FlowMod instead of sending it: an app sends a
batch followed by an OpenFlow barrier (:meth:`controllers.state.FabricState.send_with_barrier`)
and timestamps the barrier's reply, which is when the batch took effect in the switch (a dark
window is measured from these acknowledgements, never assumed).
"""

from __future__ import annotations

from controllers.sdn import App, ofproto_v1_3
from controllers.state import FabricState


class OcsLabApp(App):
    """An ocslab controller app (module doc). Subclasses handle OpenFlow events with
    ``@set_ev_cls`` and reach the shared state as ``self.state``."""

    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = {"ocslab_state": FabricState}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.state: FabricState = kwargs["ocslab_state"]

    @staticmethod
    def add_flow(dp, priority: int, match, actions: list, cookie: int = 0):
        """The FlowMod adding a flow to ``dp``'s table 0: ``match`` -> apply ``actions``."""
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
