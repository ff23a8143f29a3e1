"""GPU agent: ``python -m emulation.emulator.agent CONTROL RANK`` inside one Mininet host.

Executes rank ``RANK``'s transfers over TCP on the fabric and synchronises steps with the
orchestrator over the Unix socket ``CONTROL`` (the control channel never crosses the fabric). The
agent reads nothing else from the orchestrator's files and keeps no clock in common with it: its
schedule comes over the control channel, and so does the offset between the two CLOCK_MONOTONICs,
measured when it connects (a server in a time namespace of its own, or another machine, has its
own clock).

Schedule (sent by :mod:`emulation.emulator.orchestrator`, also written to its run directory as
``agent-gR.json``)::

    {"rank": r, "ips": [ip of every rank], "port": 5001, "alpha_s": emulated s,
     "later": [[dst, channel], ...] connections the initial configuration cannot carry,
     "arrival_s": emulated s after the run's start before this rank sends (a straggler),
     "steps": [{"send": [[tid, dst, [[channel, bytes], ...]], ...],
                "recv": [[tid, src, bytes], ...], "drain": true if the next step reconfigures,
                "relay": [[in_tid, out_tid, dst, bytes], ...]}, ...],
     "rotor": {"cycle_s": emulated s, "rate_Bps": bytes/s, "windows": {"dst": [[on, off], ...]},
               "pooled": false, "fan_in": 1},
     "epochs": [[first step, end step], ...], "reconfigures": [bool per epoch]}

``epochs`` (dependency-driven runs, :mod:`emulation.emulator.dependency`): the steps are run an
epoch at a time, on one ``go`` per epoch. Every step then also holds ``"deps": [[tid, ...] per
send]`` and ``"live": [[channel, ...] per send]``: a transfer starts once the transfers ``deps``
have arrived here (plus alpha), its parts on the channels ``live`` once the orchestrator's
``{"live": epoch, "t_live": t}`` (sent in a reconfiguring epoch, after its ``go``) says the new
circuits are up; transfers to one destination start in schedule order (they share connections).
The epoch's ``done`` also reports ``"ready": {tid: when its dependencies had arrived}``.

``rotor`` (time-slotted OCS, :mod:`emulation.emulator.slotted`) makes sends *gated*: a transfer
to ``dst`` moves only inside the windows when a circuit to ``dst`` is up, ``[t0 + k cycle + on,
t0 + k cycle + off]`` (guard bands already applied; ``t0`` = the controller rotor's clock origin,
sent with the first ``go``). Inside a window the agent writes only what the link can drain
before the window closes: ``rate x (off - now) - unacknowledged bytes`` (``TIOCOUTQ``), so no
segment should be in flight when the circuit goes dark. Should one be lost there anyway (or the
ACK for it: the machine was late), the connection *stalls*: it has data of an earlier window
unacknowledged when its next window opens. The sender then writes new data at once (the next
piece of the transfer, or an empty frame the receiver ignores), so the receiver SACKs beyond the
loss, or cumulatively ACKs it, and TCP retransmits within that window; its retransmission timer
is longer than a rotor turn (:mod:`emulation.emulator.slotted`), so it never fires in the dark
and backs off. ``stalls`` counts such windows.

With ``"pooled": true`` (parallel OCSes, :mod:`emulation.emulator.parallel_ocs`) the windows are
keyed ``"dst:channel"`` (each connection its own OCS's windows) and every part of a transfer
draws from one pool of its bytes (:class:`Pool`): each connection writes, inside its windows,
pieces framed with their own header, until the pool is empty; ``fan_in`` sizes the receive
window for that many peers sending at once.

``relay`` (two-hop forwarding on a rotor, :mod:`emulation.planners.relay`): once all of
``in_tid`` (one of this step's ``recv``) has arrived here, send ``bytes`` to ``dst`` as
``out_tid`` on channel 0, gated and queued behind what the connection already has to send (store
and forward; the step is done when the forwarded parts are sent too).

A transfer is sent as parts, one per distinct path (:meth:`emulation.routing.Routes.subflows`),
each on the TCP connection of its channel; connection ``c`` carries IP DSCP ``c`` so the fabric
routes channels separately (parallel circuits, ECMP). Each part is framed as ``!QQ``
(transfer id, part bytes) followed by the payload.

Control protocol (newline-delimited JSON). On connecting the agent says ``{"hello": r}``; if the
agent runs on a server (another clock), the orchestrator asks ``{"sync": k}`` a few times, each
answered at once with ``{"clock": this agent's CLOCK_MONOTONIC}``; then it sends
``{"schedule": {...}, "clock_offset_s": o}``, where ``o`` is the agent's clock minus the
orchestrator's (from the exchange with the shortest round trip, whose half is the offset's
uncertainty; 0 on the orchestrator's machine). A connection whose first line is not the hello of
a rank the orchestrator still expects is closed, with one line in its log, and the run goes on.
Then, agent -> orchestrator: ``{"listening": r}``, then
``{"ready": r, "tcp_congestion": [the congestion controls its connections run]}`` after
connecting to its peers, ``{"done": step, "send": {tid: [t_start,
t_sent]}, "recv": {tid: t_end}, "retrans": segments retransmitted so far, "retrans_by_conn":
{connection (:func:`emulation.dataplane.tcp_connection`): segments retransmitted so far, those
that retransmitted}, "stalls": stalled windows so far, "t_go", "t_heard", "t_done"}`` per step; orchestrator -> agent: ``{"connect": true}``,
``{"open": [[dst, channel], ...]}`` (before the first go, untimed: open these ``later``
connections now, answered by ``{"opened": r}``), ``{"go": step}`` (with ``"t0"`` in a rotor run;
``"at"``: release the step at that instant, not on hearing it; ``"origin"``: when the run's
clock, which leaves out the time spent between steps, read 0: a straggler arrives at
``origin + arrival_s``), ``{"exit": true}``. Times are the orchestrator's CLOCK_MONOTONIC
seconds (:func:`clock`).
"""

from __future__ import annotations

import fcntl
import json
import queue
import socket
import struct
import sys
import termios
import threading
import time

from emulation import dataplane as dpn
from emulation.poll import wait_until

HEADER = struct.Struct("!QQ")
PAYLOAD = memoryview(bytes(1 << 20))
#: SO_RCVBUF of a connection (bytes; the kernel doubles it and advertises about half of that).
#: Every shaped link's queue holds 1000 frames (emulation/emulator/shaper.py) and ACKs travel in
#: their own class, so a window of many bandwidth-delay products (an emulated link's is a few kB)
#: costs no loss and keeps TCP off its window limit even when a step's traffic flows both ways.
RCV_WINDOW = 64 << 10
#: Bytes (SO_RCVBUF, before the kernel doubles it) that all the senders converging on one GPU may
#: keep in flight together: a receiver with fan-in k gives each connection 1/k of it. With at most
#: ~350 full frames in flight toward any port, no queue of the fabric (1000 frames) can overflow:
#: the emulated fabric is lossless by construction, like a credit-based RDMA fabric.
RCV_BUDGET = 512 << 10
RCV_MIN = 8 << 10


#: This agent's CLOCK_MONOTONIC minus the orchestrator's (s), set once from the control channel.
_clock_offset_s = 0.0


def clock() -> float:
    """The orchestrator's CLOCK_MONOTONIC (s), read on this agent's clock: every instant the agent
    waits for or reports is on it."""
    return time.monotonic() - _clock_offset_s


def receive_window(fan_in: int) -> int:
    """SO_RCVBUF for a GPU that receives from ``fan_in`` peers at once: ``RCV_WINDOW``, or less so
    that k concurrent senders keep at most ``RCV_BUDGET`` in flight into its port; at least
    ``RCV_MIN`` (a few times an emulated link's bandwidth-delay product)."""
    return max(RCV_MIN, min(RCV_WINDOW, RCV_BUDGET // max(1, fan_in)))
GATED_PIECE = 16 << 10  # bytes written at a time by a gated sender
GATED_MIN = 2 << 10  # a gated sender waits rather than write less than this
#: How often a gated sender whose budget is below :data:`GATED_MIN` looks again (s), at the
#: least: its budget cannot grow by ``GATED_MIN`` in less than half the time the link takes to
#: drain that many bytes (:attr:`Gate.poll_s`), so looking more often only burns the core that
#: Open vSwitch and the controller share with the agents (hundreds of gated connections at 16
#: GPUs on 4 OCSes polling every 0.5 ms starved them: circuits came up to 1.7 s late).
GATED_POLL_S = 0.0005
#: Transfer id of an empty frame a gated sender writes to resume a stalled connection, and how
#: often it writes new data while the connection stays stalled (emulated s).
NUDGE_TID = (1 << 64) - 1
NUDGE_EVERY_S = 0.002


class Gate:
    """When a circuit to one destination is up: ``windows`` ``[[on, off], ...]`` offsets (s)
    within a rotor cycle of ``cycle_s``, repeating from ``t0`` (set later); ``rate_Bps`` is
    what the circuit drains."""

    def __init__(self, windows: list[list[float]], cycle_s: float, rate_Bps: float):
        self.windows = sorted((float(a), float(b)) for a, b in windows)
        self.cycle_s = cycle_s
        self.rate = rate_Bps
        self.t0 = 0.0
        #: Seconds between two looks of a sender waiting for budget (:data:`GATED_POLL_S`).
        self.poll_s = max(GATED_POLL_S, GATED_MIN / rate_Bps / 2)

    def window(self, now: float) -> tuple[float, float]:
        """The absolute window containing ``now``, or else the next one."""
        k = (now - self.t0) // self.cycle_s
        for turn in (k, k + 1):
            base = self.t0 + turn * self.cycle_s
            for on, off in self.windows:
                if base + off > now:
                    return base + on, base + off
        raise AssertionError("unreachable: every cycle has a window")


class Pool:
    """The bytes of one transfer that several gated channels draw from (parallel OCSes): each
    takes what its windows can drain, so the transfer moves on every OCS that joins its GPUs."""

    def __init__(self, nbytes: int):
        self.left = nbytes
        self._lock = threading.Lock()
        self.empty = threading.Event()  # set when the last byte is taken: waiting channels end
        if nbytes <= 0:
            self.empty.set()

    def take(self, k: int) -> int:
        """Up to ``k`` bytes of what is left (0: nothing is)."""
        with self._lock:
            k = max(0, min(k, self.left))
            self.left -= k
            if self.left <= 0:
                self.empty.set()
            return k


class Receiver:
    """Accepts fabric connections and records when each expected transfer has fully arrived."""

    def __init__(self, ip: str, port: int, window: int = RCV_WINDOW):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Bound every connection's window (accepted sockets inherit it): flow control, not loss,
        # keeps what is in flight within the queues (RCV_BUDGET).
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, window)
        set_congestion_control(self.sock)
        self.sock.bind((ip, port))
        self.sock.listen(256)
        self.cond = threading.Condition()
        self.got: dict[int, int] = {}
        self.last: dict[int, float] = {}
        self.done_at: dict[int, float] = {}
        self.expect: dict[int, int] = {}
        self.hooks: dict[int, list] = {}
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            self.conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            self._read_parts(conn)
        except OSError:  # reset by an aborting peer at the end of the run
            return

    def _read_parts(self, conn: socket.socket) -> None:
        buf = bytearray(1 << 18)
        view = memoryview(buf)
        hdr = bytearray(HEADER.size)
        while True:
            if not _read_exact(conn, memoryview(hdr)):
                return
            tid, part = HEADER.unpack(hdr)
            if tid == NUDGE_TID:
                continue
            n = part
            while n:
                k = conn.recv_into(view, min(n, len(buf)))
                if not k:
                    return
                n -= k
            now = clock()
            hooks = []
            with self.cond:
                self.got[tid] = self.got.get(tid, 0) + part
                self.last[tid] = now
                if tid in self.expect and self.got[tid] >= self.expect[tid]:
                    self.done_at[tid] = now
                    hooks = self.hooks.pop(tid, [])
                    self.cond.notify_all()
            for fn in hooks:
                fn()

    def on_arrival(self, tid: int, fn) -> None:
        """Call ``fn()`` once transfer ``tid`` (declared by :meth:`expect_transfers`) has fully
        arrived: now if it has, else from the thread that completes it."""
        with self.cond:
            if tid not in self.done_at:
                self.hooks.setdefault(tid, []).append(fn)
                return
        fn()

    def expect_transfers(self, recv: list[list[int]]) -> None:
        """Declare the transfers of the next step (``[tid, src, bytes]``)."""
        with self.cond:
            for tid, _src, nbytes in recv:
                self.expect[tid] = nbytes
                if self.got.get(tid, 0) >= nbytes:
                    self.done_at[tid] = self.last[tid]

    def wait(self, tids: list[int], timeout: float) -> dict[int, float]:
        """Block until every transfer in ``tids`` has arrived; ``{tid: t_end}``.

        :raises TimeoutError: not all arrived within ``timeout`` seconds.
        """
        with self.cond:
            ok = self.cond.wait_for(lambda: all(t in self.done_at for t in tids), timeout)
            if not ok:
                missing = [t for t in tids if t not in self.done_at]
                raise TimeoutError(f"transfers {missing[:5]} did not arrive in {timeout} s")
            return {t: self.done_at[t] for t in tids}


class SendLog:
    """A step's (or epoch's) sends: ``sent`` ``{tid: [first byte, last byte]}`` (the
    orchestrator's clock, s: :func:`clock`), filled by :meth:`report`, which the channels call as
    each part expected (:meth:`expect`) is written; :meth:`wait` blocks until none is pending, or a launcher failed (:meth:`fail`)."""

    def __init__(self):
        self.sent: dict[int, list[float]] = {}
        self._pending = 0
        self._errors: list[BaseException] = []
        self._cond = threading.Condition()

    def expect(self, parts: int = 1) -> None:
        """``parts`` more parts will be reported."""
        with self._cond:
            self._pending += parts

    def report(self, tid: int, t0: float, t1: float) -> None:
        """Part of ``tid`` written from ``t0`` to ``t1``."""
        with self._cond:
            s = self.sent.setdefault(tid, [t0, t1])
            s[0], s[1] = min(s[0], t0), max(s[1], t1)
            self._pending -= 1
            self._cond.notify_all()

    def fail(self, err: BaseException) -> None:
        """A thread that hands out parts failed: :meth:`wait` raises ``err``."""
        with self._cond:
            self._errors.append(err)
            self._cond.notify_all()

    def wait(self, timeout: float, what: str) -> None:
        """Until every expected part is written.

        :raises TimeoutError: not within ``timeout`` s (``what`` names the step).
        :raises BaseException: the first error given to :meth:`fail`.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._pending == 0 or self._errors, timeout):
                raise TimeoutError(f"{what}: sends did not finish in {timeout} s")
            if self._errors:
                raise self._errors[0]


def _drain(used: list, timeout: float, what: str) -> None:
    """Wait until the peers acknowledged everything written on the connections ``used``: the
    fabric changes next, and a final ACK lost in the dark window would leave a connection in
    retransmission backoff (~1 s).

    :raises TimeoutError: not within ``timeout`` s (``what`` names the step).
    """
    wait_until(lambda: not any(c.unacked() for c in used), timeout, lambda: TimeoutError(
        f"{what}: data not acknowledged in {timeout} s"), interval_s=0.0005)


def _retransmissions(conns: dict) -> dict:
    """The ``done`` report's ``retrans`` and ``retrans_by_conn`` (module doc)."""
    by_conn = {c.name(): n for c in conns.values() if (n := c.retransmissions())}
    return {"retrans": sum(by_conn.values()), "retrans_by_conn": by_conn}


def set_congestion_control(sock: socket.socket, name: str | None = dpn.TCP_CONGESTION) -> None:
    """Give ``sock`` the TCP congestion control ``name`` (:data:`emulation.dataplane.TCP_CONGESTION`;
    None leaves the host's default); a kernel without it leaves the default, which
    :func:`congestion_control` then reports."""
    if name is None:
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
    except OSError:
        pass


def congestion_control(sock: socket.socket) -> str:
    """The TCP congestion control ``sock`` runs (e.g. ``"cubic"``)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0", 1)[0].decode()


def abort(sock: socket.socket) -> None:
    """Close ``sock`` with a reset (``SO_LINGER`` 0), leaving no FIN_WAIT or TIME_WAIT state
    behind: at the end of a run the fabric may no longer join the peers (an OCS in some other
    configuration), and a lingering half-closed socket would swallow the next run's SYN that
    reuses its port pair."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


def _read_exact(conn: socket.socket, view: memoryview) -> bool:
    while len(view):
        k = conn.recv_into(view)
        if not k:
            return False
        view = view[k:]
    return True


class Channel:
    """One TCP connection to a peer on one channel, with a sender thread fed by a queue."""

    def __init__(self, ip: str, port: int, channel: int, gate: Gate | None = None):
        self.gate = gate
        self.stalls = 0  # windows that opened with data of an earlier window unacknowledged
        self._last_write = 0.0
        self._written = 0  # bytes written so far
        self._stall_on = None  # the window (its opening instant) that opened on a stall
        self._stall_mark = 0  # ``_written`` when it did: the stuck bytes are acked once unacked <= _written - mark
        self._nudge_at = 0.0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # DSCP before connect: the SYN carries it, and the receiver (tcp_reflect_tos) answers
        # with it, so the connection's ACKs travel on the same channel as its data.
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, channel << 2)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        set_congestion_control(self.sock)
        self.sock.settimeout(30)
        self.sock.connect((ip, port))
        self.sock.settimeout(None)
        self.jobs: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def unacked(self) -> int:
        """Bytes written but not yet acknowledged by the peer (``TIOCOUTQ``)."""
        return struct.unpack("i", fcntl.ioctl(self.sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]

    def name(self) -> str:
        """The connection's name (:func:`emulation.dataplane.tcp_connection`)."""
        return dpn.tcp_connection(*self.sock.getsockname(), *self.sock.getpeername())

    def retransmissions(self) -> int:
        """Segments this connection has retransmitted so far (``tcpi_total_retrans``)."""
        info = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        return struct.unpack_from("I", info, 100)[0] if len(info) >= 104 else 0

    def _nudge_due(self, now: float, on: float) -> bool:
        """Inside the window that opened at ``on``: whether to write new data now although the
        budget would not, because the connection stalled. It stalled if the window opened with
        bytes of an earlier window unacknowledged: a segment or its ACK was lost in a dark window,
        and TCP would resend only when its retransmission timer fires, which on a rotor is most
        likely in the dark again (and then backs off, turn after turn). New data beyond the loss
        makes the receiver SACK it (or cumulatively ACK it) and TCP retransmits at once; it is
        repeated every :data:`NUDGE_EVERY_S` (the circuit may come up late) until the stuck bytes
        are acknowledged."""
        unacked = self.unacked()
        if self._stall_on != on:
            if not unacked or self._last_write >= on:
                return False
            self._stall_on, self._stall_mark, self._nudge_at = on, self._written, 0.0
            self.stalls += 1
        if unacked <= self._written - self._stall_mark:  # what was stuck is acknowledged
            return False
        if now - self._nudge_at < NUDGE_EVERY_S:
            return False
        self._nudge_at = now
        return True

    def _write(self, data) -> None:
        self.sock.sendall(data)
        self._written += len(data)
        self._last_write = clock()

    def _nudge_if_stalled(self) -> None:
        """Between transfers (module doc): an empty frame as the new data, which the receiver
        ignores."""
        now = clock()
        on, off = self.gate.window(now)
        if on <= now < off and self._nudge_due(now, on):
            self._write(HEADER.pack(NUDGE_TID, 0))

    def _run(self) -> None:
        while True:
            if self.gate is not None and self.unacked():
                try:
                    job = self.jobs.get(timeout=self.gate.poll_s)
                except queue.Empty:
                    self._nudge_if_stalled()
                    continue
            else:
                job = self.jobs.get()
            tid, nbytes, not_before, report = job
            delay = not_before - clock()
            if delay > 0:
                time.sleep(delay)
            t_start = clock()
            if isinstance(nbytes, Pool):
                t_start = self._send_pooled(tid, nbytes)
            elif self.gate is not None:
                t_start = self._send_gated(tid, nbytes)
            else:
                k = min(nbytes, len(PAYLOAD) - HEADER.size)
                self.sock.sendall(HEADER.pack(tid, nbytes) + PAYLOAD[:k])  # no segment of the header alone
                left = nbytes - k
                while left:
                    k = min(left, len(PAYLOAD))
                    self.sock.sendall(PAYLOAD[:k])
                    left -= k
            report(tid, t_start, clock())

    def _send_pooled(self, tid: int, pool: Pool) -> float:
        """Draw pieces of transfer ``tid`` from ``pool`` inside this channel's windows until the
        pool is empty (other channels draw too), each piece framed with its own header; returns
        when the first byte was written (or now, if another channel took everything)."""
        gate, t_first, said = self.gate, None, False
        while pool.left > 0:
            now = clock()
            on, off = gate.window(now)
            if now < on:  # a later window (or none: the pool empties through the other channels)
                if on - gate.t0 >= gate.cycle_s and not said:  # this connection's windows are over
                    print(f"transfer {tid}: {pool.left} bytes left for the other channels after this one's "
                          f"last window (channel unacked {self.unacked()})", file=sys.stderr, flush=True)
                    said = True
                pool.empty.wait(on - now)  # no polling: the pool wakes it when it empties
                continue
            budget = int(gate.rate * (off - now)) - self.unacked()
            if self._nudge_due(now, on):
                budget = max(budget, GATED_MIN)
            if budget < min(GATED_MIN, pool.left):
                time.sleep(min(gate.poll_s, max(off - now, 0.0)))
                continue
            k = pool.take(min(budget, GATED_PIECE))
            if not k:
                break
            if t_first is None:
                t_first = now
            self._write(HEADER.pack(tid, k) + PAYLOAD[:k])
        return t_first if t_first is not None else clock()

    def _send_gated(self, tid: int, nbytes: int) -> float:
        """Send one transfer inside the gate's windows (module doc); returns when the first byte
        was written."""
        gate, left, t_first = self.gate, nbytes, None
        while left:
            now = clock()
            on, off = gate.window(now)
            if now < on:
                time.sleep(on - now)
                continue
            budget = int(gate.rate * (off - now)) - self.unacked()
            if self._nudge_due(now, on):  # resume now: a little new data makes the receiver SACK the loss
                budget = max(budget, GATED_MIN)
            if budget < min(GATED_MIN, left):
                time.sleep(min(gate.poll_s, max(off - now, 0.0)))
                continue
            k = min(left, budget, GATED_PIECE)
            if t_first is None:
                t_first = now
                self._write(HEADER.pack(tid, nbytes) + PAYLOAD[:k])
            else:
                self._write(PAYLOAD[:k])
            left -= k
        return t_first if t_first is not None else clock()


def run_schedule(control: str, rank: int) -> None:
    """Connect to the orchestrator at ``control`` (a Unix socket's path) as ``rank``, take the
    schedule and the clock offset it sends (module doc) and execute the schedule; returns when
    told to exit, every connection aborted (:func:`abort`)."""
    global _clock_offset_s
    ctl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ctl.connect(control)
    rfile = ctl.makefile("r")

    def say(msg: dict) -> None:
        ctl.sendall((json.dumps(msg) + "\n").encode())

    def hear() -> dict:
        line = rfile.readline()
        if not line:
            raise SystemExit(0)  # orchestrator went away
        return json.loads(line)

    def setup() -> dict:
        line = rfile.readline()
        if not line:  # refused, or the run ended before it started: an error the run can see
            raise SystemExit(f"agent of GPU {rank}: the control channel closed before the schedule came")
        return json.loads(line)

    say({"hello": rank})
    msg = setup()
    while "sync" in msg:
        say({"clock": time.monotonic()})
        msg = setup()
    schedule, _clock_offset_s = msg["schedule"], msg["clock_offset_s"]
    # Peers sending at once; in a rotor run one at a time (a slot joins each GPU to one peer).
    fan_in = schedule["rotor"].get("fan_in", 1) if schedule.get("rotor") else max((len({src for _tid, src, _b in st["recv"]})
                                                  for st in schedule["steps"]), default=1)
    receiver = Receiver(schedule["ips"][schedule["rank"]], schedule["port"], receive_window(fan_in))
    conns: dict = {}
    try:
        _run(schedule, receiver, conns, say, hear)
    finally:
        for c in conns.values():
            abort(c.sock)
        for c in list(receiver.conns):
            abort(c)


def _run(schedule: dict, receiver: Receiver, conns: dict, say, hear) -> None:
    rank, ips, port = schedule["rank"], schedule["ips"], schedule["port"]
    alpha = schedule["alpha_s"]
    timeout = schedule.get("step_timeout_s", 600.0)
    say({"listening": rank})
    assert hear().get("connect")
    used = sorted({(dst, ch) for step in schedule["steps"] for _tid, dst, parts in step["send"]
                   for ch, _b in parts} | {(dst, 0) for step in schedule["steps"]
                                            for _i, _o, dst, _b in step.get("relay", [])})
    later = {(d, c) for d, c in schedule.get("later", [])}
    rotor = schedule.get("rotor")
    gates = _gates(rotor)
    conns.update({(d, c): Channel(ips[d], port, c, _gate(gates, d, c)) for d, c in used if (d, c) not in later})
    say({"ready": rank, "tcp_congestion": sorted({congestion_control(c.sock) for c in conns.values()})})

    if "epochs" in schedule:
        _run_epochs(schedule, receiver, conns, gates, say, hear)
        return
    arrival = schedule.get("arrival_s", 0.0)
    t_arrive = None
    for index, step in enumerate(schedule["steps"]):
        msg = hear()
        while "open" in msg:  # warm-up: connect peers the current configuration reaches
            for d, c in msg["open"]:
                conns[(d, c)] = Channel(ips[d], port, c, _gate(gates, d, c))
            say({"opened": rank})
            msg = hear()
        if msg.get("exit"):
            return
        assert msg.get("go") == index, msg
        t_heard = clock()
        # Every agent releases the step at the same instant ``at`` (a little after the broadcast)
        # so the step is not measured from whichever agent heard of it first.
        t_go = max(t_heard, msg.get("at", t_heard))
        for gate in gates.values():
            gate.t0 = msg.get("t0", gate.t0)
        if "origin" in msg:  # the run's clock without the time spent between steps
            t_arrive = msg["origin"] + arrival
        elif t_arrive is None:
            t_arrive = t_go + arrival  # a straggler joins the collective late
        t_release = max(t_go, t_arrive)  # the senders wait until then (plus alpha)
        receiver.expect_transfers(step["recv"])
        log = SendLog()
        pooled = bool(rotor and rotor.get("pooled"))
        for tid, dst, parts in step["send"]:
            pool = Pool(sum(b for _c, b in parts)) if pooled else None  # every channel draws from one pool
            for c, part in parts:
                log.expect()
                conns[(dst, c)].jobs.put((tid, pool or part, t_release + alpha, log.report))
        for in_tid, out_tid, dst, nbytes in step.get("relay", []):
            log.expect()
            receiver.on_arrival(in_tid, lambda ch=conns[(dst, 0)], o=out_tid, b=nbytes, done=log.report:
                                ch.jobs.put((o, b, clock() + alpha, done)))
        what = f"rank {rank} step {index}"
        log.wait(timeout, what)
        recv = receiver.wait([tid for tid, _s, _b in step["recv"]], timeout)
        if step.get("drain"):
            _drain([conns[(dst, c)] for _tid, dst, parts in step["send"] for c, _b in parts], timeout, what)
        stalls = sum(c.stalls for c in conns.values())
        say({"done": index, "rank": rank, "t_go": t_go, "t_heard": t_heard, "send": log.sent, "recv": recv,
             **_retransmissions(conns), "stalls": stalls, "t_done": clock()})
    hear()  # exit


def _gates(rotor: dict | None) -> dict:
    """The gates of a time-slotted run: ``{dst: Gate}``, or ``{(dst, channel): Gate}`` for the
    windows keyed ``"dst:channel"`` (parallel OCSes: each channel its own OCS)."""
    if not rotor:
        return {}
    out: dict = {}
    for key, w in rotor["windows"].items():
        d, _, c = key.partition(":")
        out[(int(d), int(c)) if c else int(d)] = Gate(w, rotor["cycle_s"], rotor["rate_Bps"])
    return out


def _gate(gates: dict, dst: int, channel: int) -> Gate | None:
    """The gate of the connection to ``dst`` on ``channel``: its own, else the destination's."""
    return gates.get((dst, channel), gates.get(dst))


def _hear_go(hear, say, conns, ips, port, gates, rank, index) -> dict | None:
    """The next ``go`` (``index``), opening the connections the warm-up asks for first; None on
    ``exit``."""
    msg = hear()
    while "open" in msg:  # warm-up: connect peers the current configuration reaches
        for d, c in msg["open"]:
            conns[(d, c)] = Channel(ips[d], port, c, _gate(gates, d, c))
        say({"opened": rank})
        msg = hear()
    if msg.get("exit"):
        return None
    assert msg.get("go") == index, msg
    return msg


def _run_epochs(schedule: dict, receiver: Receiver, conns: dict, gates: dict, say, hear) -> None:
    """Dependency-driven execution (module doc, ``epochs``): per epoch, every transfer of its
    steps starts once the transfers it depends on have arrived here (``deps``) and, on a channel
    whose circuit the epoch changes (``live``), once the orchestrator says the new circuit is up;
    transfers to one destination are started in order (they share connections)."""
    rank, ips, port, alpha = schedule["rank"], schedule["ips"], schedule["port"], schedule["alpha_s"]
    timeout = schedule.get("step_timeout_s", 600.0)
    arrival = schedule.get("arrival_s", 0.0)
    for e, (first, end) in enumerate(schedule["epochs"]):
        msg = _hear_go(hear, say, conns, ips, port, gates, rank, e)
        if msg is None:
            return
        t_heard = clock()
        t_go = max(t_heard, msg["at"])
        t_release = max(t_go, msg["origin"] + arrival)
        steps = schedule["steps"][first:end]
        receiver.expect_transfers([r for st in steps for r in st["recv"]])
        live, t_live = threading.Event(), [0.0]
        ready: dict[int, float] = {}
        log = SendLog()
        by_dst: dict[int, list] = {}
        for st in steps:
            for (tid, dst, parts), deps, wait in zip(st["send"], st["deps"], st["live"]):
                by_dst.setdefault(dst, []).append((tid, parts, deps, set(wait)))
                log.expect(len(parts))

        def launch(dst: int, items: list) -> None:
            try:
                for tid, parts, deps, wait in items:
                    got = receiver.wait(deps, timeout) if deps else {}
                    t_ready = max([t_release, *got.values()])
                    ready[tid] = t_ready
                    # Parts on kept circuits go now, through the dark window; the others once
                    # their new circuits are live.
                    for c, part in parts:
                        if c not in wait:
                            conns[(dst, c)].jobs.put((tid, part, t_ready + alpha, log.report))
                    if any(c in wait for c, _b in parts):
                        if not live.wait(timeout):
                            raise TimeoutError(f"rank {rank} epoch {e}: no word that the new circuits are live in "
                                               f"{timeout} s")
                        for c, part in parts:
                            if c in wait:
                                conns[(dst, c)].jobs.put((tid, part, max(t_ready + alpha, t_live[0]), log.report))
            except BaseException as err:  # raised again by the main thread, waiting in log.wait
                log.fail(err)

        threads = [threading.Thread(target=launch, args=(d, items), daemon=True) for d, items in by_dst.items()]
        for t in threads:
            t.start()
        if schedule["reconfigures"][e]:
            m = hear()
            assert m.get("live") == e, m
            t_live[0] = m["t_live"]
            live.set()
        what = f"rank {rank} epoch {e}"
        log.wait(timeout, what)
        recv = receiver.wait([tid for st in steps for tid, _s, _b in st["recv"]], timeout)
        if steps[-1].get("drain"):  # the next epoch reconfigures
            _drain([conns[(dst, c)] for st in steps for _tid, dst, parts in st["send"] for c, _b in parts],
                   timeout, what)
        say({"done": e, "rank": rank, "t_go": t_go, "t_heard": t_heard, "send": log.sent, "recv": recv,
             "ready": ready, **_retransmissions(conns), "stalls": 0, "t_done": clock()})
    hear()  # exit


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m emulation.emulator.agent CONTROL RANK`` (module doc)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m emulation.emulator.agent CONTROL RANK", file=sys.stderr)
        return 2
    run_schedule(argv[0], int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
