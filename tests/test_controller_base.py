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


# ---- ownership and the emulator's step events (controllers/circuit_switch.py) ------------------

from controllers import events as cev  # noqa: E402
from controllers.sdn import app_manager, set_ev_cls  # noqa: E402
from controllers.state import FabricState  # noqa: E402
from emulation import dataplane as dpn  # noqa: E402
from emulation.fabric import Configuration, assign_ports  # noqa: E402
from topologies import ocs_star  # noqa: E402


def _switch():
    """A circuit switch on 4 GPUs x 2 ports (a ring), its OCS a stand-in datapath that answers
    every barrier; no controller process."""
    state = FabricState(ocs_star(4, 2, 400, 0.0, "ring"))
    cs = CircuitSwitch(ocslab_state=state)
    dp = _Datapath(dpn.DPID_OCS, reply=cs._barrier_reply)
    state.datapaths[dp.id] = dp
    return state, cs, dp


def _pairs(config) -> list[tuple[int, int]]:
    return sorted((c.a.gpu, c.b.gpu) for c in config["ocs0"])


def test_a_user_apps_request_during_a_planned_run_is_refused_and_nothing_changes(caplog):
    state, cs, dp = _switch()
    f = state.fabric
    skip = Configuration({"ocs0": assign_ports(f, "ocs0", [(0, 2), (1, 3)] * 2)["ocs0"]})
    ring = state.circuits
    state.set_owner(cev.OWNER_PLANNER, "rhd-circuits")
    with caplog.at_level("WARNING", logger="ocslab.controller"):
        res = cs.apply(skip, 0.01, by="MyScheduler")
    assert res["refused"] is True and res["changed"] is False and res["owner"] == "planner"
    assert state.circuits == ring and dp.sent == []  # no message reached the switch
    refused = [e for e in state.events() if e["kind"] == "ownership-refused"]
    assert len(refused) == 1 and refused[0]["by"] == "MyScheduler" and refused[0]["run"] == "rhd-circuits"
    lines = [r for r in caplog.records if "ownership-refused" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelname == "WARNING" and "MyScheduler" in lines[0].getMessage()
    # the same call from a privileged caller goes through; a rewire by the app is refused too
    assert cs.rewire("ocs0", set(), set(), 0.0, by="MyScheduler")["refused"] is True
    res = cs.apply(skip, 0.01, by="emulator")
    assert res["changed"] is True and res["dark_window_measured_s"] >= 0.01 and _pairs(state.circuits) == [(0, 2), (0, 2), (1, 3), (1, 3)]
    # between runs the user's apps own the circuits again
    state.set_owner(cev.OWNER_APP, None)
    assert cs.apply(ring, 0.0, by="MyScheduler")["changed"] is True and state.circuits == ring
    with pytest.raises(ValueError, match="owner must be one of"):
        state.set_owner("me", None)


class _StepApp(OcsLabApp):
    """Asks for the skip-one circuits at every step it is told of, 0.05 s into its handler."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen: list[tuple[int, str, bool]] = []

    @set_ev_cls(cev.EventStepBegin)
    def _step(self, ev):
        import time

        time.sleep(0.05)  # the step must wait for this handler
        f = self.state.fabric
        want = Configuration({"ocs0": assign_ports(f, "ocs0", [(0, 2), (1, 3)] * 2)["ocs0"]})
        self.seen.append((ev.step, ev.owner, ev.set_circuits(self.name, want, 0.02)))


@pytest.fixture
def step_app():
    """A circuit switch and a :class:`_StepApp` registered as its observer, event loops running."""
    state, cs, _dp = _switch()
    app = _StepApp(ocslab_state=state)
    app_manager.register_app(app)  # its handlers, as the app manager registers them
    cs.register_observer(cev.EventStepBegin, app.name)
    app.start()
    try:
        yield state, cs, app
    finally:
        app.stop()
        app_manager.unregister_app(app)


def _records(owner: str) -> list[dict]:
    begin = {"kind": "collective-begin", "name": "a2a", "collective": "alltoall", "algorithm": "pairwise",
             "bytes": 1 << 20, "gpus": [0, 1, 2, 3], "steps": 3, "planner": "none", "owner": owner,
             "reconfiguration_delay_s": 0.02}
    step = {"kind": "step-begin", "name": "a2a", "step": 1, "steps": 3, "phase": "exchange",
            "demand": [[0, 2, 262144], [2, 0, 262144], [1, 3, 262144], [3, 1, 262144]]}
    return [begin, step]


def test_a_step_waits_for_the_apps_handler_and_applies_the_circuits_it_asked_for(step_app):
    state, cs, app = step_app
    out = cs.post(_records("app"))
    assert app.seen == [(1, "app", True)]
    assert out["handlers_s"] >= 0.05 and len(out["reconfigurations"]) == 1
    assert 0.02 <= out["dark_window_measured_s"] < 0.5
    assert _pairs(Configuration.from_json(out["circuits"])) == [(0, 2), (0, 2), (1, 3), (1, 3)]
    assert state.owner == "app" and state.run == "a2a"
    cs.post([{"kind": "collective-end", "name": "a2a", "collective": "alltoall", "algorithm": "pairwise",
              "bytes": 1 << 20, "gpus": [0, 1, 2, 3], "time_s": 0.001}])
    assert (state.owner, state.run) == ("app", None)


def test_a_step_request_in_a_planned_run_is_refused_with_an_event(step_app):
    state, cs, app = step_app
    ring = state.circuits
    out = cs.post(_records("planner"))
    from emulation.poll import wait_until

    wait_until(lambda: app.seen, 2.0, lambda: AssertionError("the handler never ran"))
    assert app.seen == [(1, "planner", False)] and out["reconfigurations"] == []
    assert state.circuits == ring
    wait_until(lambda: [e for e in state.events() if e["kind"] == "ownership-refused"], 2.0,
               lambda: AssertionError("no ownership-refused event"))
    ev = [e for e in state.events() if e["kind"] == "ownership-refused"][0]
    assert (ev["by"], ev["owner"], ev["run"], ev["what"]) == ("_StepApp", "planner", "a2a", "step")


@pytest.mark.parametrize("record, message", [
    ({"kind": "step-begin", "name": "a", "step": 0, "steps": 1, "phase": "x", "demand": [[0, 1, -5]]}, "demand entries"),
    ({"kind": "collective-begin", "name": "a", "collective": "c", "algorithm": "x", "bytes": 1, "gpus": [0],
      "steps": 1, "planner": "none", "owner": "me"}, "owner must be one of"),
    ({"kind": "step-end", "name": "a", "step": 0, "phase": "x", "demand": []}, "time_s and end_s"),
    ({"kind": "rotate"}, "kind must be one of"),
])
def test_a_malformed_posted_event_is_refused_before_anything_is_raised(record, message):
    state, cs, _dp = _switch()
    good = _records("planner")[0]
    with pytest.raises(ValueError, match=message):
        cs.post([good, record])
    assert (state.owner, state.run) == ("app", None)  # the valid first record was not raised either


class _PhaseWatcher(OcsLabApp):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen: list = []

    @set_ev_cls(cev.EventPhaseRequest)
    def _phase(self, ev):
        self.seen.append((ev.group, ev.rank, ev.members, ev.rail, ev.mode))


def test_an_opus_phase_request_is_an_event_apps_observe():
    from controllers.opus import OpusApp
    from emulation.poll import wait_until

    state = FabricState(ocs_star(4, 2, 400, 0.0, "ring"))
    opus, watcher = OpusApp(ocslab_state=state), _PhaseWatcher(ocslab_state=state)
    app_manager.register_app(watcher)
    opus.register_observer(cev.EventPhaseRequest, watcher.name)
    watcher.start()
    try:
        assert opus.checkin("tp0", (0, 2), 0)["rail"] == "ocs0"
        with pytest.raises(ValueError, match="disarmed"):  # not armed: raised once the request is seen
            opus.request("tp0", 2, True)
        with pytest.raises(ValueError, match="has not checked in"):
            opus.request("dp9", 1, False)  # an unknown group is no phase request
        wait_until(lambda: watcher.seen, 2.0, lambda: AssertionError("no EventPhaseRequest"))
        assert watcher.seen == [("tp0", 2, [0, 2], "ocs0", "speculative")]
    finally:
        watcher.stop()
        app_manager.unregister_app(watcher)


class _Vswitchd:
    """A stand-in ovs-vswitchd control socket at ``path``: answers every call ``delay_s`` after
    it arrives (an error with ``fail``) and records when each started and ended."""

    def __init__(self, path: str, delay_s: float, fail: bool = False):
        import json
        import socket
        import time

        self.calls: list[tuple[float, float]] = []
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(4)

        def answer(conn) -> None:
            with conn:
                req = json.loads(conn.recv(65536).decode())
                start = time.monotonic()
                time.sleep(delay_s)  # the stand-in's own answer time
                self.calls.append((start, time.monotonic()))
                conn.sendall(json.dumps({"id": req["id"], "result": None if fail else "",
                                         "error": "purge failed" if fail else None}).encode())

        def serve() -> None:
            while True:
                conn, _ = srv.accept()
                threading.Thread(target=answer, args=(conn,), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()


def test_every_open_vswitch_of_a_spread_fabric_is_flushed_at_once_and_a_failed_flush_fails(tmp_path):
    """A fabric spread over servers has one ovs-vswitchd each. The flush after a circuit change
    is part of the dark window, so the controller flushes them all at once: their flushes
    overlap in time. One that fails fails the change."""
    import time

    from controllers.ovs_datapath import DatapathCache, DatapathError

    _, cs, _ = _switch()
    fakes = [_Vswitchd(str(tmp_path / f"v{i}.ctl"), 0.2) for i in range(2)]
    cs._datapaths = [DatapathCache(str(tmp_path / f"v{i}.ctl")) for i in range(2)]
    t = time.monotonic()
    end = cs.in_datapath(t)
    (s0, e0), (s1, e1) = fakes[0].calls[0], fakes[1].calls[0]
    assert s0 >= t and s1 >= t and s1 < e0 and s0 < e1  # both under way at once
    assert end >= max(e0, e1) - 1e-3  # the change holds once the later one ended
    _Vswitchd(str(tmp_path / "bad.ctl"), 0.01, fail=True)
    cs._datapaths.append(DatapathCache(str(tmp_path / "bad.ctl")))
    with pytest.raises(DatapathError, match="purge failed"):
        cs.in_datapath(time.monotonic())
