"""The training job's side of the Opus protocol (:mod:`controllers.opus`): JSON lines over a Unix
stream socket. Used inside the emulated GPUs by :mod:`emulation.torchjob.rails_train`."""

from __future__ import annotations

import json
import socket
import threading
import time

#: TCP states whose ``tx_queue`` in ``/proc/net/tcp`` is data sent and not yet acknowledged.
_SENDING_STATES = {"01", "04", "05", "08"}  # ESTABLISHED, FIN_WAIT1, FIN_WAIT2, CLOSE_WAIT


class OpusError(RuntimeError):
    """The controller refused a message or timed out (its one-line reason)."""


class OpusClient:
    """One connection to the controller at ``path``; calls are answered in order.

    :raises OSError: the socket cannot be reached.
    """

    def __init__(self, path: str, timeout_s: float = 30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        while True:  # a full listen backlog refuses a Unix socket at once (EAGAIN): wait for room
            try:
                self.sock.connect(path)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
        self.rfile = self.sock.makefile("rb")

    def call(self, msg: dict) -> dict:
        """Send ``msg``, return the answer. :raises OpusError: ``{"ok": false}``."""
        self.sock.sendall((json.dumps(msg) + "\n").encode())
        line = self.rfile.readline()
        if not line:
            raise OpusError("the controller closed the connection")
        out = json.loads(line)
        if not out.get("ok"):
            raise OpusError(out.get("error", "refused"))
        return out

    def checkin(self, group: str, members: list[int], rank: int) -> dict:
        """Check rank ``rank`` of ``group`` (its members' GPUs) in."""
        return self.call({"op": "checkin", "group": group, "members": members, "rank": rank})

    def request(self, group: str, gpu: int, mode: str) -> dict:
        """Ask for ``group``'s configuration; blocks until it is in place."""
        return self.call({"op": "request", "group": group, "rank": gpu, "mode": mode})

    def close(self) -> None:
        """Close the connection."""
        self.sock.close()


class Pending:
    """A speculative request running on a connection of its own; :meth:`result` waits for it."""

    def __init__(self, path: str, group: str, gpu: int):
        self.group = group
        self._out: dict | None = None
        self._err: Exception | None = None
        self._thread = threading.Thread(target=self._run, args=(path, group, gpu), daemon=True)
        self._thread.start()

    def _run(self, path: str, group: str, gpu: int) -> None:
        try:
            c = OpusClient(path)
            try:
                self._out = c.request(group, gpu, "speculative")
            finally:
                c.close()
        except Exception as e:  # handed to the caller of result()
            self._err = e

    def result(self) -> dict:
        """The answer. :raises OpusError: refused or timed out."""
        self._thread.join()
        if self._err is not None:
            raise self._err if isinstance(self._err, OpusError) else OpusError(str(self._err))
        return self._out


def unacked_bytes() -> int:
    """Bytes this network namespace's TCP connections have sent and not had acknowledged
    (the ``tx_queue`` column of ``/proc/net/tcp`` and ``/proc/net/tcp6``)."""
    total = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(name).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 4 and f[3] in _SENDING_STATES:
                total += int(f[4].split(":")[0], 16)
    return total


def drain(timeout_s: float = 2.0, poll_s: float = 0.001) -> float:
    """Wait until every byte this rank sent has been acknowledged (:func:`unacked_bytes` is 0),
    at most ``timeout_s``; the seconds waited.

    A rank does this before it gives its circuits up: a segment, or its acknowledgement, still in
    flight when a circuit is rewired is lost, and the sender's retransmission timer backs off
    while the circuit is gone, stalling the next phase on that peer for seconds. An RDMA
    collective library has the same rule for free: an operation completes when the peer has
    acknowledged it.
    """
    t0 = time.monotonic()
    while unacked_bytes() and time.monotonic() - t0 < timeout_s:
        time.sleep(poll_s)
    return time.monotonic() - t0
