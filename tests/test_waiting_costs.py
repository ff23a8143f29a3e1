"""What the controller and the agents spend while they wait, on the core they share with Open vSwitch.

At 16 GPUs on 4 parallel OCSes, several hundred gated connections that polled every 0.5 ms, and
one controller thread that changed the OCSes one after the other (a barrier and a datapath flush
each), started circuits up to 1.7 s late (emulated) on a 2-core machine. These tests hold the
three fixes in place without Open vSwitch: flushes that fall together are one flush, a sender
waiting for budget looks no more often than its link could give it some, and a pooled sender
waiting for its next window does not poll at all.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time

import pytest

from controllers.ovs_datapath import DatapathCache, DatapathError
from emulation.emulator.agent import GATED_MIN, GATED_POLL_S, Gate, Pool


class FakeVswitchd:
    """A control socket answering every JSON-RPC call after ``delay_s``; records when each
    ``revalidator/purge`` started and ended (CLOCK_MONOTONIC s)."""

    def __init__(self, path: str, delay_s: float, fail: bool = False):
        self.delay_s, self.fail, self.calls = delay_s, fail, []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            req = json.loads(conn.recv(65536).decode())
            start = time.monotonic()
            time.sleep(self.delay_s)
            self.calls.append((req["method"], start, time.monotonic()))
            error = "purge failed" if self.fail else None
            conn.sendall(json.dumps({"id": req["id"], "result": "" if error is None else None,
                                     "error": error}).encode())


@pytest.fixture
def ctl_path():
    with tempfile.TemporaryDirectory() as d:
        yield os.path.join(d, "ovs-vswitchd.ctl")


def test_flushes_that_fall_together_are_one_flush_and_each_covers_its_caller(ctl_path):
    vswitchd = FakeVswitchd(ctl_path, delay_s=0.1)
    cache = DatapathCache(ctl_path)
    acked, ends = [], [None] * 8

    def change(i: int) -> None:
        t = time.monotonic()  # this OCS's barrier reply
        acked.append((i, t))
        ends[i] = cache.purge(t)

    threads = [threading.Thread(target=change, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    purges = [c for c in vswitchd.calls if c[0] == "revalidator/purge"]
    # One caller starts a flush; the seven that were acknowledged meanwhile share the next one.
    assert 1 <= len(purges) <= 2, purges
    for i, t in acked:
        # Every caller's change is covered: some flush started after its acknowledgement and
        # ended no later than the time it was given.
        assert any(start >= t and end <= ends[i] + 1e-3 for _m, start, end in purges), (i, t, purges)


def test_a_flush_that_started_before_the_change_does_not_cover_it(ctl_path):
    vswitchd = FakeVswitchd(ctl_path, delay_s=0.15)
    cache = DatapathCache(ctl_path)
    first = threading.Thread(target=cache.purge)
    first.start()
    time.sleep(0.05)  # the first flush is under way
    t = time.monotonic()
    end = cache.purge(t)
    first.join()
    purges = [c for c in vswitchd.calls if c[0] == "revalidator/purge"]
    assert len(purges) == 2
    assert purges[1][1] >= t and end >= purges[1][2] - 1e-3


def test_a_failed_flush_raises_for_its_caller_and_the_next_caller_tries_again(ctl_path):
    vswitchd = FakeVswitchd(ctl_path, delay_s=0.01, fail=True)
    cache = DatapathCache(ctl_path)
    with pytest.raises(DatapathError, match="purge failed"):
        cache.purge()
    with pytest.raises(DatapathError):
        cache.purge()
    assert len(vswitchd.calls) == 2


@pytest.mark.parametrize("mbps, expected_s", [(2.5, 2048 / (2.5e6 / 8 * 0.97) / 2),
                                              (1.25, 2048 / (1.25e6 / 8 * 0.97) / 2),
                                              (100.0, GATED_POLL_S)])
def test_a_sender_waiting_for_budget_looks_again_after_half_the_time_its_link_drains_2_kib(mbps, expected_s):
    gate = Gate([[0.0, 1.0]], 2.0, mbps * 1e6 / 8 * 0.97)
    assert gate.poll_s == pytest.approx(expected_s)
    assert GATED_MIN == 2048
    # At 2.5 Mbit/s a waiting sender looks 296 times a second, not 2,000.
    if mbps == 2.5:
        assert 1 / gate.poll_s == pytest.approx(296.0, abs=0.5)


def test_a_pooled_sender_waiting_for_its_window_wakes_when_the_pool_empties():
    pool = Pool(10_000)
    woke = []

    def wait() -> None:
        woke.append(pool.empty.wait(5.0))

    th = threading.Thread(target=wait)
    th.start()
    assert pool.take(6_000) == 6_000 and not pool.empty.is_set()
    t = time.monotonic()
    assert pool.take(6_000) == 4_000
    th.join(1.0)
    assert woke == [True] and time.monotonic() - t < 1.0
    assert pool.take(1) == 0
    assert Pool(0).empty.is_set()


def test_a_nic_drop_on_parallel_ocses_is_a_frame_that_met_the_next_circuit_counted_dark():
    """On parallel OCSes the NICs route channel k out of port k whatever the circuits, so a NIC
    drops only a frame an OCS handed it for another GPU (sent outside its window): ``dark``, a
    fabric effect. Where a NIC also routes through circuits (two ports on one OCS), its drops
    stay ``no_route``, an artefact."""
    from emulation.emulator.counters import DropCounters, Ports, Snapshot, nic_drops_are_dark
    from topologies import ocs_star
    from topologies.builders import parallel_ocs

    assert nic_drops_are_dark(parallel_ocs(8, 2)) and nic_drops_are_dark(ocs_star(8, 1, 400.0, 0.0, "empty"))
    assert not nic_drops_are_dark(ocs_star(8, 2, 400.0, 0.0, "ring"))
    ports = Ports((), (), {}, ("ocl-o0", "ocl-o1"), ("ocl-n3",))

    def snap(ocs: int, nic: int) -> Snapshot:
        return Snapshot(0.0, {}, 0, 0, {}, {"ocl-o0": ocs, "ocl-o1": 0, "ocl-n3": nic}, 0, 0, 0)

    dark = DropCounters(ports, misdelivered_is_dark=True).drops(snap(0, 0), snap(4, 1))
    assert (dark["dark"], dark["no_route"], dark["where"]) == (5, 0, {})
    hole = DropCounters(ports, misdelivered_is_dark=False).drops(snap(0, 0), snap(4, 1))
    assert (hole["dark"], hole["no_route"], hole["where"]) == (4, 1, {"no_route ocl-n3": 1})
