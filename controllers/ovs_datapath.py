"""Make Open vSwitch's datapath follow its OpenFlow tables at once: a client of ovs-vswitchd's
control socket (``ovs-appctl``'s JSON-RPC over a Unix socket) that flushes the cached datapath
flows (``revalidator/purge``).

Why: an OpenFlow barrier reply means the switch's *tables* hold the new rules, but the datapath
keeps forwarding with the flows it cached from the old ones until a revalidator thread
reconsiders them. In the userspace datapath (no kernel module) this lagged the barrier by 1-15 ms
on a loaded two-core machine: wire probes showed a new circuit carrying frames only that long
after the controller saw it acknowledged, so the controller's dark window understated the one on
the wire. A purge is synchronous: when ovs-vswitchd answers, no cached flow is left and the next
packet of every flow is looked up in the current tables. It touches every bridge of the
instance, but only its cache (flows are re-created on their next packet).
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time


class DatapathError(RuntimeError):
    """ovs-vswitchd did not answer on its control socket, or answered an error."""


class DatapathCache:
    """The cached datapath flows of the ovs-vswitchd whose control socket is ``ctl_path``
    (``/var/run/openvswitch/ovs-vswitchd.<pid>.ctl``).

    Safe to share between threads: concurrent purges are coalesced (:meth:`purge`)."""

    def __init__(self, ctl_path: str, timeout: float = 5.0):
        self.ctl_path = ctl_path
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._running = False  # a purge is in progress
        self._last = (float("-inf"), float("-inf"))  # (start, end) of the last purge that succeeded

    def call(self, method: str, *params: str) -> str:
        """Run one ``ovs-appctl`` command; its text answer.

        :raises DatapathError: no answer within the timeout, or an error answer."""
        rid = next(self._ids)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout)
                s.connect(self.ctl_path)
                s.sendall(json.dumps({"id": rid, "method": method, "params": list(params)}).encode())
                buf, dec = b"", json.JSONDecoder()
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        raise DatapathError(f"{self.ctl_path}: closed before answering {method}")
                    buf += chunk
                    try:
                        reply, _ = dec.raw_decode(buf.decode())
                        break
                    except ValueError:
                        continue
        except OSError as e:
            raise DatapathError(f"{self.ctl_path}: {method}: {e}") from None
        if reply.get("error") is not None:
            raise DatapathError(f"{method}: {reply['error']}")
        return str(reply.get("result", ""))

    def purge(self, after: float | None = None) -> float:
        """Flush every cached datapath flow, so that every OpenFlow change acknowledged at or
        before ``after`` (CLOCK_MONOTONIC s; default: now) holds in the datapath; the time (s) the
        flush that did so ended.

        Group commit: one purge started at or after ``after`` serves every caller waiting for it
        (several OCSes changing at once wait for one purge together, not for one each in turn);
        a caller finding a purge already under way that started earlier waits for it to end, then
        starts the next one, or joins one another caller started meanwhile.

        :raises DatapathError: as :meth:`call`, to the caller whose flush failed; the callers
            waiting on it then flush again (one of them, the others joining it).
        """
        after = time.monotonic() if after is None else after
        with self._cond:
            while self._running and self._last[0] < after:
                self._cond.wait()
            if self._last[0] >= after:  # a purge that started after the change has ended
                return self._last[1]
            self._running = True
        start, end = time.monotonic(), None
        try:
            self.call("revalidator/purge")
            end = time.monotonic()
        finally:
            with self._cond:
                self._running = False
                if end is not None:
                    self._last = (start, end)
                self._cond.notify_all()
        return end
