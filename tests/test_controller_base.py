"""The controller apps' OpenFlow base (controllers/base.py): one barrier mechanism for the fabric's
apps and the WAN's TE app alike, exercised on a stand-in datapath (no switch, no controller
process)."""

from __future__ import annotations

import importlib
import inspect
import threading
from types import SimpleNamespace

import pytest

from controllers.barriers import Barriers, BarrierTimeout
from controllers.base import OcsLabApp, OpenFlowApp
from controllers.circuit_switch import CircuitSwitch
from controllers.routing import Routing
from controllers.sdn import ofp_event, ofproto_v1_3
from controllers.wan_te import WanTe


class _Datapath:
    """Enough of a datapath for building and sending OpenFlow 1.3 messages; ``reply`` answers
    every barrier it is sent."""

    def __init__(self, dpid: int, reply=None):
        self.id = dpid
        self.ofproto = ofproto_v1_3
        self.ofproto_parser = importlib.import_module(ofproto_v1_3.__name__ + "_parser")
        self.sent: list[bytes] = []
        self._xid = 0
        self._reply = reply

    def set_xid(self, msg):
        self._xid += 1
        msg.set_xid(self._xid)

    def send(self, buf: bytes):
        self.sent.append(buf)
        if self._reply is not None:  # the batch's last message is its barrier, the last xid set
            ev = SimpleNamespace(msg=SimpleNamespace(datapath=self, xid=self._xid))
            threading.Timer(0.01, self._reply, [ev]).start()


def _barrier_handlers(cls) -> list[str]:
    return [name for name, m in inspect.getmembers(cls, callable)
            if ofp_event.EventOFPBarrierReply in getattr(m, "callers", {})]


@pytest.mark.parametrize("cls", [CircuitSwitch, Routing, WanTe])
def test_every_app_has_the_one_barrier_reply_handler_of_the_base(cls):
    assert issubclass(cls, OpenFlowApp)
    assert _barrier_handlers(cls) == ["_barrier_reply"]
    assert cls._barrier_reply is OpenFlowApp._barrier_reply


def test_an_app_waits_for_its_barrier_reply_and_times_out_without_one():
    app = OpenFlowApp()
    dp = _Datapath(7, reply=app._barrier_reply)
    flow = app.add_flow(dp, 10, dp.ofproto_parser.OFPMatch(in_port=1), [dp.ofproto_parser.OFPActionOutput(2)])
    t = app.send_with_barrier(dp, [app.delete_all_flows(dp), app.delete_all_groups(dp), flow])
    assert t > 0 and len(dp.sent) == 1  # the batch and its barrier leave in one write
    with pytest.raises(BarrierTimeout, match="dpid 0x8"):
        app.send_with_barriers([(_Datapath(8), [])], timeout=0.05)


def test_the_fabric_apps_share_one_barrier_table():
    """A reply received by any app of the fabric completes the wait of the app that sent the
    barrier (an app may wait on its own event thread: another delivers)."""
    state = SimpleNamespace(barriers=Barriers())
    sender, receiver = OcsLabApp(ocslab_state=state), OcsLabApp(ocslab_state=state)
    assert sender.barriers is receiver.barriers is state.barriers
    dps = [_Datapath(k, reply=receiver._barrier_reply) for k in (1, 2, 3)]
    assert sender.send_with_barriers([(dp, []) for dp in dps], timeout=2.0) > 0
    assert OpenFlowApp().barriers is not OpenFlowApp().barriers  # elsewhere, each app its own
