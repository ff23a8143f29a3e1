"""Buffer sizes of the packet sockets through which Open vSwitch's userspace datapath moves our
packets, set for the life of one emulation.

With ``datapath_type=netdev`` (no Open vSwitch kernel module) ovs-vswitchd receives from every
port on a packet socket of its own and sends on every port through **one** packet socket. Both
are created with the kernel's default buffer sizes (``net.core.rmem_default`` /
``wmem_default``, 208 KiB on Debian 12). A packet Open vSwitch sends stays charged to the send
socket while it waits in the egress queue of a shaped link (HTB), so 208 KiB is shared by the
queues of every emulated link: about 90 full-size frames for the whole fabric. When it is full,
``sendmmsg`` fails with ``ENOBUFS`` and the packet is dropped with no counter anywhere; when a
receive socket is full, the kernel drops the packet and counts it on that socket only.

:class:`SocketBuffers` raises both on entry and restores the send socket's size on exit (the
receive sockets go away with our ports). Open vSwitch offers no setting for these sizes, so the
socket is borrowed from ovs-vswitchd with ``pidfd_getfd(2)`` (Linux 5.6+, root) and resized with
``SO_SNDBUFFORCE`` / ``SO_RCVBUFFORCE``: the same socket object, a larger limit, nothing else
changes. The kernel datapath (Vagrant VMs) has no such sockets, and nothing is done there.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import socket
import subprocess
import sys
from dataclasses import dataclass

#: ``pidfd_getfd`` is 438 in the generic syscall table (x86_64 and aarch64 alike).
_SYS_PIDFD_GETFD = 438
#: ``<asm-generic/socket.h>``: set a buffer size beyond ``net.core.*mem_max`` (root).
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
#: Bytes asked for (the kernel doubles them): room for every emulated link's queue to fill.
SEND_BUFFER = 32 << 20
RECEIVE_BUFFER = 4 << 20


class SocketBufferError(RuntimeError):
    """Open vSwitch's packet sockets could not be resized (the reason names the cause)."""


@dataclass(frozen=True)
class PacketSocket:
    """One of ovs-vswitchd's packet sockets: ``device`` is None for the shared send socket;
    ``rcvbuf``/``sndbuf`` are the kernel's current limits (bytes)."""

    pid: int
    fd: int
    device: str | None
    rcvbuf: int
    sndbuf: int


def packet_sockets() -> list[PacketSocket]:
    """ovs-vswitchd's packet sockets, from ``ss -f link -m -p``."""
    out = subprocess.run(["ss", "-f", "link", "-m", "-a", "-n", "-p", "-H"], capture_output=True, text=True,
                         timeout=10).stdout
    found = []
    for line in out.splitlines():
        m = re.search(r'\s(\S+):(\S+)\s.*\("ovs-vswitchd",pid=(\d+),fd=(\d+)\).*skmem:\(([^)]*)\)', line)
        if not m:
            continue
        mem = dict(re.findall(r"([a-z]+)(\d+)", m.group(5)))
        device = None if m.group(2) == "*" else m.group(2)
        found.append(PacketSocket(int(m.group(3)), int(m.group(4)), device, int(mem.get("rb", 0)),
                                  int(mem.get("tb", 0))))
    return found


def _borrow(pid: int, fd: int) -> socket.socket:
    """A duplicate, in this process, of ``pid``'s file descriptor ``fd`` (the same socket)."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError as e:
        raise SocketBufferError(f"pidfd_open(ovs-vswitchd {pid}): {e.strerror}") from None
    try:
        new = libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
        if new < 0:
            err = ctypes.get_errno()
            raise SocketBufferError(f"pidfd_getfd(ovs-vswitchd {pid}, fd {fd}): {os.strerror(err)} "
                                    f"(needs Linux 5.6+ on {platform.machine()} and root)")
    finally:
        os.close(pidfd)
    return socket.socket(fileno=new)


def _set(sock: PacketSocket, option: int, size: int) -> int:
    """Set ``option`` (``SO_SNDBUFFORCE``/``SO_RCVBUFFORCE``) to ``size`` on ``sock``; return
    the resulting limit (bytes)."""
    s = _borrow(sock.pid, sock.fd)
    try:  # closing our duplicate leaves ovs-vswitchd's descriptor open
        s.setsockopt(socket.SOL_SOCKET, option, size)
        get = socket.SO_SNDBUF if option == SO_SNDBUFFORCE else socket.SO_RCVBUF
        return s.getsockopt(socket.SOL_SOCKET, get)
    finally:
        s.close()


class SocketBuffers:
    """Raise Open vSwitch's packet-socket buffers for ``devices`` (our ports) and its send
    socket while an emulation runs (module doc).

    :param devices: our Open vSwitch ports (root-namespace device names).
    :param send_bytes, receive_bytes: the sizes to ask for (the kernel doubles them).
    :raises SocketBufferError: on :meth:`apply`, if a socket could not be resized.
    """

    def __init__(self, devices: list[str], send_bytes: int = SEND_BUFFER, receive_bytes: int = RECEIVE_BUFFER):
        self.devices = set(devices)
        self.send_bytes = send_bytes
        self.receive_bytes = receive_bytes
        self._restore: list[tuple[PacketSocket, int]] = []
        self.applied: dict = {}

    def apply(self) -> dict:
        """Resize the sockets; returns ``{"send": bytes, "receive": min bytes, "ports": n}``
        (the limits now in force)."""
        socks = packet_sockets()
        senders = [s for s in socks if s.device is None]
        if not senders:
            raise SocketBufferError("ovs-vswitchd has no send socket yet (it makes one when it first sends a frame)")
        receivers = [s for s in socks if s.device in self.devices]
        send = []
        for s in senders:
            if s.sndbuf < 2 * self.send_bytes:
                self._restore.append((s, s.sndbuf // 2))
                send.append(_set(s, SO_SNDBUFFORCE, self.send_bytes))
            else:
                send.append(s.sndbuf)
        receive = [_set(s, SO_RCVBUFFORCE, self.receive_bytes) for s in receivers]
        self.applied = {"send": min(send, default=0), "receive": min(receive, default=0), "ports": len(receivers),
                        "send_sockets": len(senders)}
        return self.applied

    def restore_record(self) -> list[list[int]]:
        """``[[ovs-vswitchd pid, fd, bytes before], ...]`` of the sockets :meth:`restore` resets."""
        return [[s.pid, s.fd, size] for s, size in self._restore]

    def restore(self) -> None:
        """Give the shared send socket its size back (best effort: ovs-vswitchd may be gone)."""
        restore_send_buffers(self.restore_record())
        self._restore.clear()


def restore_send_buffers(record: list[list[int]]) -> list[list[int]]:
    """Set each ``[ovs-vswitchd pid, fd, bytes]`` of ``record`` (:meth:`SocketBuffers.restore_record`)
    back to its size, if that descriptor is still Open vSwitch's send socket; returns the entries
    restored (best effort: nothing is raised)."""
    live = {(s.pid, s.fd): s for s in packet_sockets() if s.device is None} if record else {}
    done = []
    for pid, fd, size in record:
        if (pid, fd) in live:
            try:
                _set(live[pid, fd], SO_SNDBUFFORCE, size)
                done.append([pid, fd, size])
            except (SocketBufferError, OSError):
                pass
    return done


def main(argv: list[str] | None = None) -> int:
    """``python -m emulation.emulator.ovs_sockets apply [--send-bytes N] DEVICE...`` (prints
    ``{"applied": ..., "restore": record}``) or ``restore RECORD_JSON``: the same sizing run on a
    server of a fabric spread over servers (:mod:`emulation.emulator.cluster`)."""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m emulation.emulator.ovs_sockets")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("apply")
    a.add_argument("--send-bytes", type=int, default=SEND_BUFFER)
    a.add_argument("devices", nargs="+")
    r = sub.add_parser("restore")
    r.add_argument("record")
    args = p.parse_args(argv)
    if args.cmd == "restore":
        print(json.dumps(restore_send_buffers(json.loads(args.record))))
        return 0
    buffers = SocketBuffers(args.devices, args.send_bytes)
    try:
        applied = buffers.apply()
    except SocketBufferError as e:
        print(f"ovs_sockets: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"applied": applied, "restore": buffers.restore_record()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
