"""The Opus rule (arXiv 2507.08119, :mod:`emulation.planners.opus`) on its own, and the controller
app (:mod:`controllers.opus`) deciding with it: in-process, with a circuit switch that rewires
the circuit table at once (no OpenFlow)."""

from __future__ import annotations

import threading

import pytest

from emulation.fabric import Configuration
from emulation.planners.opus import OpusRule
from topologies import rails


def _rule(preempt: bool = False) -> tuple[OpusRule, list]:
    """Ranks 0, 1, 2 on one rail of 2 ports: ring ``dp`` over all three, pairs ``pp`` (0, 1) and
    ``p12`` (1, 2) on every port of each member (both conflict with the ring and each other)."""
    grants = []
    rule = OpusRule(grants.append, preempt)
    for gid, members, key in (("dp", (0, 1, 2), "ring"), ("pp", (0, 1), "pp"), ("p12", (1, 2), "p12")):
        rule.add_group(gid, members, [(m, p) for m in members for p in (0, 1)], key)
    return rule, grants


def _ask(rule: OpusRule, rank: int, gid: str, speculative: bool = False) -> None:
    rule.ask(rank, gid)
    rule.request(rank, gid, speculative)


def test_a_phase_is_granted_when_every_member_has_checked_in_then_at_once_while_in_place():
    rule, grants = _rule()
    assert rule.conflicts("dp") == {"pp", "p12"}
    _ask(rule, 0, "dp")
    _ask(rule, 1, "dp")
    assert grants == [] and rule.missing("dp") == [2]
    _ask(rule, 2, "dp")
    (g,) = grants
    assert (g.group, g.lost, sorted(g.ranks), len(g.changed)) == ("dp", (), [0, 1, 2], 6)
    for r in (0, 1, 2):
        rule.answer(r, "dp")
    assert rule.in_place("dp") and rule.holds(2, "dp")
    rule.drop(2, "dp")  # rank 2 found the circuits gone: it asks again, alone, and is granted at once
    _ask(rule, 2, "dp")
    assert grants[-1].group == "dp" and grants[-1].changed == () and grants[-1].ranks == (2,)


@pytest.mark.parametrize("preempt", [False, True])
def test_a_grant_waits_while_a_rank_is_inside_the_phase_on_those_ports_unless_it_preempts(preempt):
    rule, grants = _rule(preempt)
    for r in (0, 1, 2):
        _ask(rule, r, "dp")
    for r in (0, 1, 2):
        rule.answer(r, "dp")
    assert rule.asks_ahead(0, "dp", "pp") and not rule.asks_ahead(0, "dp", "dp")
    _ask(rule, 0, "pp", speculative=True)
    if preempt:  # the first speculative request takes the ports from ranks 1 and 2, inside dp
        assert (grants[-1].group, grants[-1].lost, grants[-1].speculative) == ("pp", ("dp",), True)
        assert not rule.holds(2, "dp")
        return
    _ask(rule, 1, "pp")  # every member asked, but rank 2 is still inside dp: deferred
    assert [g.group for g in grants] == ["dp"]
    _ask(rule, 2, "p12")  # rank 2 leaves dp: the deferred grant goes ahead; p12 waits for rank 1
    assert [g.group for g in grants] == ["dp", "pp"] and rule.missing("p12") == [1]
    assert grants[-1].lost == ("dp",) and sorted(grants[-1].ranks) == [0, 1] and not grants[-1].speculative


class _State:
    """The controller state the Opus app reads: the fabric, its circuit table, the event log, the
    table of outstanding barriers its base app shares."""

    def __init__(self, fabric):
        from controllers.barriers import Barriers

        self.barriers = Barriers()
        self.fabric = fabric
        self.lock = threading.RLock()
        self.circuits = fabric.initial
        self.log: list[tuple[str, dict]] = []

    def log_event(self, kind: str, **fields) -> None:
        self.log.append((kind, fields))


class _Switch:
    """A circuit switch that rewires the table at once."""

    def __init__(self, state: _State):
        self.state = state

    def rewire(self, rail, remove, add, reconfiguration_delay_s, on_dark=None, by="app"):
        assert by == "opus"  # privileged: Opus rewires whoever owns the circuits
        with self.state.lock:
            cur = self.state.circuits
            assert remove <= cur[rail]
            self.state.circuits = Configuration({**cur, rail: (cur[rail] - remove) | add})
        if on_dark:
            on_dark()
        return {"changed": True, "dark_window_measured_s": reconfiguration_delay_s}


@pytest.fixture
def app(tmp_path, monkeypatch):
    from controllers import opus

    state = _State(rails(3, 1, initial="empty"))  # rail0: GPUs 0, 1, 2
    monkeypatch.setattr(opus.app_manager, "lookup_service_brick", lambda name: _Switch(state))
    a = opus.OpusApp(ocslab_state=state)
    a.arm(str(tmp_path / "opus.sock"), 0.0, timeout_s=2.0)
    yield a, state
    a.disarm()


def _request(app, out: dict, gid: str, ranks, speculative: bool = False) -> list[threading.Thread]:
    """Each rank of ``ranks`` asks in a thread of its own; its answer lands in ``out[rank]``."""
    threads = [threading.Thread(target=lambda r=r: out.__setitem__(r, app.request(gid, r, speculative)))
               for r in ranks]
    for t in threads:
        t.start()
    return threads


def test_the_controller_rewires_once_every_member_asked_and_defers_while_a_rank_is_inside(app):
    a, state = app
    for gid, members in (("dp", (0, 1, 2)), ("pp", (0, 1)), ("p12", (1, 2))):
        a.checkin(gid, members, 0)
    out: dict[int, dict] = {}
    for t in _request(a, out, "dp", (0, 1, 2)):
        t.join(5)
    assert all(out[r]["ok"] and out[r]["changed"] for r in (0, 1, 2)) and out[0]["mask"] == 0b001
    out.clear()
    pp = _request(a, out, "pp", (0, 1))  # rank 2 is still inside dp: deferred
    pp[0].join(0.3)
    assert not out and [k for k, _ in state.log] == ["opus-armed", "opus-reconfigured"]
    (p12,) = _request(a, out, "p12", (2,), speculative=True)  # rank 2 leaves dp: pp goes ahead
    for t in pp + [p12]:
        t.join(5)
    assert out[0]["ok"] and out[1]["changed"] and out[0]["mask"] == 0b010
    assert out[2] == {"ok": False, "error": "timeout after 2 s: group p12 waits for GPUs [1] to ask"}
    assert [f["group"] for k, f in state.log if k == "opus-reconfigured"] == ["dp", "pp"]
