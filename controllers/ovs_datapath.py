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

import json
import socket
import time


class DatapathError(RuntimeError):
    """ovs-vswitchd did not answer on its control socket, or answered an error."""


class DatapathCache:
    """The cached datapath flows of the ovs-vswitchd whose control socket is ``ctl_path``
    (``/var/run/openvswitch/ovs-vswitchd.<pid>.ctl``)."""

    def __init__(self, ctl_path: str, timeout: float = 5.0):
        self.ctl_path = ctl_path
        self.timeout = timeout
        self._id = 0

    def call(self, method: str, *params: str) -> str:
        """Run one ``ovs-appctl`` command; its text answer.

        :raises DatapathError: no answer within the timeout, or an error answer."""
        self._id += 1
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout)
                s.connect(self.ctl_path)
                s.sendall(json.dumps({"id": self._id, "method": method, "params": list(params)}).encode())
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

    def purge(self) -> float:
        """Flush every cached datapath flow; the CLOCK_MONOTONIC time (s) it was done."""
        self.call("revalidator/purge")
        return time.monotonic()
