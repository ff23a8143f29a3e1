"""How an emulated fabric's frames are forwarded on this machine, and the machine state that
takes: the datapath of an :class:`~emulation.emulator.net.EmulatedFabric`.

Open vSwitch forwards every frame of the fabric on the CPU (its userspace datapath, where the
kernel module is missing). What it costs per frame depends on how the GPUs' ports reach it:

- ``packet``: packet sockets, polled by ovs-vswitchd's main thread (every machine);
- ``pmd``: the GPUs' own links as AF_XDP ports polled by a PMD thread on a core of its own
  (:mod:`emulation.emulator.pmd`);
- ``steer``: packet sockets, ovs-vswitchd pinned to one core and the GPUs' receive steered to
  the others (:mod:`emulation.emulator.steering`);
- ``kernel``: Open vSwitch's kernel module (where a machine has it).

:class:`Datapath` chooses (unless told), applies and undoes: the PMD core mask, ovs-vswitchd's
affinity and the buffers of its packet sockets (:mod:`emulation.emulator.ovs_sockets`), each
recorded in the run's registry entry first, so that ``ocslab clean`` puts it back after a
SIGKILL.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

from emulation import dataplane as dpn
from emulation.emulator import pmd as pmd_ports
from emulation.emulator import steering
from emulation.emulator.errors import EmulationError
from emulation.emulator.ovs_sockets import SEND_BUFFER, SocketBufferError, SocketBuffers, packet_sockets
from emulation.poll import wait_until

log = logging.getLogger(__name__)


#: The datapaths a fabric of the userspace datapath can be asked for (module doc).
MODES = ("packet", "pmd", "steer")


class Datapath:
    """The datapath of one emulated fabric (module doc): :attr:`mode`, one of :data:`MODES`.

    :param mode: what to use; None: chosen at :meth:`start`, ``pmd`` wherever this machine can
        (``afxdp`` ports), the MTU is 1500 and the fabric has at least
        :data:`~emulation.emulator.pmd.PMD_MIN_GPUS` GPUs, else ``steer`` where
        :func:`~emulation.emulator.steering.steer_by_default` says, else ``packet``.
    :param on_servers: the fabric is spread over servers (``packet`` then; the servers' sockets
        are sized by :class:`~emulation.emulator.net.EmulatedFabric`).
    :raises ValueError: an unknown mode, or ``steer`` on servers (one line).
    """

    def __init__(self, mode: str | None = None, on_servers: bool = False):
        if mode is not None and mode not in MODES:
            raise ValueError(f"datapath: {mode!r} is not one of {', '.join(MODES)}")
        if mode == "steer" and on_servers:
            raise ValueError("datapath: steer only on one machine, not on a fabric spread over servers")
        self.mode = "packet" if on_servers else mode
        self.socket_buffers: SocketBuffers | None = None
        self._pmd_mask_set = False
        self._registration = None

    def name(self, kernel: bool) -> str:
        """``kernel``, ``pmd``, ``steer`` or ``packet`` (module doc); ``kernel``: Open vSwitch's
        kernel module forwards here."""
        return "kernel" if kernel else self.mode or "packet"

    def start(self, emu) -> None:
        """Choose what was left to choose and apply it to the running fabric ``emu`` (one
        machine). Where the kernel or Open vSwitch refuses the PMD thread or the steering, a
        warning, and that datapath is off.

        :raises EmulationError: Open vSwitch's packet sockets cannot be sized.
        """
        caps, fabric = emu.caps, emu.fabric
        self._registration = emu.registration
        if self.mode is None and caps.afxdp and emu.mtu <= pmd_ports.MAX_MTU and fabric.gpus >= pmd_ports.PMD_MIN_GPUS:
            self.mode = "pmd"
        if not caps.ovs_kernel_datapath:
            _make_send_socket()  # before the GPU ports leave packet sockets
        if self.mode == "pmd":
            self._poll_with_pmd(emu)  # where refused, the mode is chosen again
        if self.mode is None:
            self.mode = "steer" if steering.steer_by_default(fabric.gpus, caps.ovs_kernel_datapath) else "packet"
        if self.mode == "steer":
            self._steer(emu)
        if not caps.ovs_kernel_datapath:
            self._size_ovs_sockets(emu)

    def stop(self) -> None:
        """Put back what :meth:`start` changed: ovs-vswitchd's cores, the PMD core mask, the
        sockets' buffers. Raises nothing it can help (a failure is logged)."""
        entry = self._registration.entry if self._registration is not None else None
        if entry is not None and entry.ovs_affinity:
            self._unpin()
        if self._pmd_mask_set:  # our ports are gone: give Open vSwitch its PMD core mask back
            pmd_ports.set_mask(entry.pmd_mask[0])
            self._pmd_mask_set = False
        if self.socket_buffers is not None:
            self.socket_buffers.restore()
            self.socket_buffers = None

    def _poll_with_pmd(self, emu) -> None:
        """Pin Open vSwitch's PMD thread to a core of its own (the previous mask recorded, put
        back at :meth:`stop`) and make every GPU's own link an AF_XDP port. Where Open vSwitch
        refuses, the ports go back to packet sockets, with a warning, and :attr:`mode` is chosen
        again without it."""
        ports = emu.host_link_ports()
        entry = self._registration.entry
        entry.pmd_mask = [pmd_ports.current_mask()]
        self._registration.save()
        self._pmd_mask_set = True
        pmd_ports.set_mask(pmd_ports.pmd_mask())
        log.info("AF_XDP on %d GPU ports, polled by a PMD thread on core mask 0x%s", len(ports), pmd_ports.pmd_mask())
        try:
            pmd_ports.poll_ports(ports)
        except pmd_ports.PmdError as e:
            log.warning("%s: the GPUs' ports stay on packet sockets", e)
            pmd_ports.unpoll_ports(ports)
            pmd_ports.set_mask(entry.pmd_mask[0])
            self._pmd_mask_set = False
            self.mode = None
        else:
            emu.drops.xsk_ports = ports
        emu.client.wait_ready(timeout=60)

    def _steer(self, emu) -> None:
        """Pin ovs-vswitchd to one core (its previous cores recorded, put back at :meth:`stop`)
        and steer every GPU's receive to the other cores. Where the kernel refuses, a warning,
        everything put back, and :attr:`mode` is ``packet``.

        :raises EmulationError: the userspace datapath without a running
            ovs-vswitchd.
        """
        pid = ovs_vswitchd_pid()
        if pid is None or emu.caps.ovs_kernel_datapath:
            raise EmulationError("steer: needs Open vSwitch's userspace datapath (ovs-vswitchd running)")
        try:
            ovs_core, receive = steering.split()
            self._registration.entry.ovs_affinity = [pid, steering.affinity(pid)]
            self._registration.save()
            steering.pin(pid, [ovs_core])
            steering.steer_receive(emu.net.hosts, receive)
        except steering.SteeringError as e:
            log.warning("%s: Open vSwitch and the GPUs' receive share the cores as before", e)
            if self._registration.entry.ovs_affinity:
                self._unpin()
            self.mode = "packet"
            return
        log.info("ovs-vswitchd on core %d, the GPUs' receive steered to cores %s", ovs_core, sorted(receive))

    def _unpin(self) -> None:
        """Give ovs-vswitchd back the cores recorded by :meth:`_steer` (the record then empty)."""
        entry = self._registration.entry
        pid, cores = entry.ovs_affinity
        try:
            steering.pin(pid, cores)
        except steering.SteeringError as e:
            log.warning("%s", e)
        entry.ovs_affinity = []

    def _size_ovs_sockets(self, emu) -> None:
        """Raise the buffers of Open vSwitch's packet sockets for our ports and of its shared
        send socket (made by :func:`_make_send_socket`) to what can be in flight."""
        self.socket_buffers = SocketBuffers(emu.drops.ports.ovs_ports, max(SEND_BUFFER, emu.in_flight_bytes))
        try:
            self.socket_buffers.apply()
        except SocketBufferError as e:
            raise EmulationError(f"cannot size Open vSwitch's packet sockets: {e}") from None
        finally:  # recorded, so that `ocslab clean` can give the size back after a SIGKILL
            self._registration.entry.send_socket = self.socket_buffers.restore_record()
            self._registration.save()


def ovs_vswitchd_pid() -> int | None:
    """The pid ovs-vswitchd wrote in its pid file, or None (not running, or not readable)."""
    try:
        return int(Path("/var/run/openvswitch/ovs-vswitchd.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _make_send_socket() -> None:
    """Have ovs-vswitchd open its shared send socket now, so that the sockets' sizing finds it:
    it makes it when it first sends a frame on a packet-socket port, so a frame of the local
    experimental EtherType is sent to GPU 0 (which ignores it) while its port is still one.
    ovs-ofctl returns once Open vSwitch has the message, not once it has sent the frame: the
    socket is waited for until ``ss`` lists it (on an Open vSwitch just started, the first run
    otherwise kept the default 208 KiB and lost frames on every link).

    :raises EmulationError: the socket did not appear within 10 s.
    """
    def send_socket() -> bool:
        return any(s.device is None for s in packet_sockets())

    if send_socket():
        return
    frame = dpn.gpu_mac(0).replace(":", "") + "020000000000" + "88b5" + "00" * 46
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "packet-out", dpn.nic_name(0), "LOCAL",
                    f"output:{dpn.NIC_HOST_PORT}", frame], capture_output=True, timeout=10)
    wait_until(send_socket, 10.0, lambda: EmulationError(
        "cannot size Open vSwitch's packet sockets: its send socket did not appear within 10 s of a packet-out "
        "(ss -f link -p lists none of ovs-vswitchd's)"))
