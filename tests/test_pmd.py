"""The GPUs' ports polled by a PMD thread over AF_XDP (emulation/emulator/pmd.py): used where the
machine can, the PMD core mask put back afterwards, and packet sockets kept where Open vSwitch
refuses. Real Open vSwitch, controller and Mininet hosts (root; see conftest.py)."""

from __future__ import annotations

import pytest

from emulation.emulator import pmd
from emulation.emulator.capabilities import detect
from emulation.emulator.net import EmulatedFabric
from emulation.emulator.ovs_sockets import SEND_BUFFER, packet_sockets
from topologies import ocs_star

pytestmark = pytest.mark.emulation


def test_the_pmd_mask_is_the_last_core_and_afxdp_is_detected_from_open_vswitch():
    assert pmd.pmd_mask(cores=2) == "2" and pmd.pmd_mask(cores=4) == "8"
    assert not pmd.available(cores=1)


def test_a_fabric_polls_its_gpu_ports_with_a_pmd_thread_and_gives_the_mask_back(run_dir):
    caps = detect()
    if not caps.afxdp:
        pytest.skip("this machine's Open vSwitch has no afxdp ports or it has one core")
    before = pmd.current_mask()
    with EmulatedFabric(ocs_star(4, 2, 400.0, 0.0, "ring"), run_dir / "emulation", link_mbps=10.0, datapath="pmd") as emu:
        assert emu.datapath == "pmd" and pmd.current_mask() == pmd.pmd_mask()
        assert emu.net.pingAll(timeout=2) == 0.0
        drops = pmd.xsk_drops(emu.host_link_ports())
        assert sorted(drops) == sorted(emu.host_link_ports()) and set(drops.values()) == {0}
        # the shared send socket, through which the PMD thread queues every frame on a shaped link, was enlarged
        senders = [s for s in packet_sockets() if s.device is None]
        assert senders and min(s.sndbuf for s in senders) >= SEND_BUFFER == emu.socket_buffers.send_bytes
    assert pmd.current_mask() == before


def test_sizing_refuses_when_open_vswitch_has_no_send_socket_instead_of_sizing_nothing(monkeypatch):
    """An Open vSwitch just started has no send socket until it first sends a frame; sizing
    then must fail loudly, not leave 208 KiB (which lost frames on every link of the first run)."""
    from emulation.emulator import ovs_sockets

    monkeypatch.setattr(ovs_sockets, "packet_sockets", lambda: [ovs_sockets.PacketSocket(1, 5, "ocl-n0-eth1", 1, 1)])
    with pytest.raises(ovs_sockets.SocketBufferError, match="no send socket yet"):
        ovs_sockets.SocketBuffers(["ocl-n0-eth1"]).apply()


def test_where_open_vswitch_refuses_afxdp_the_ports_stay_on_packet_sockets(run_dir, monkeypatch):
    if not detect().afxdp:
        pytest.skip("this machine's Open vSwitch has no afxdp ports or it has one core")

    def refuse(ports, timeout_s=60.0):
        raise pmd.PmdError(f"AF_XDP port {ports[0]}: refused for the test")

    monkeypatch.setattr(pmd, "poll_ports", refuse)
    before = pmd.current_mask()
    with EmulatedFabric(ocs_star(4, 2, 400.0, 0.0, "ring"), run_dir / "emulation", link_mbps=10.0, datapath="pmd") as emu:
        assert emu.datapath == "packet" and pmd.current_mask() == before and emu.drops.xsk_ports == []
        assert emu.net.pingAll(timeout=2) == 0.0


def test_a_fabric_of_sixteen_gpus_or_fewer_keeps_packet_sockets_unless_asked(run_dir):
    """The PMD thread buys no rate up to 16 GPUs and costs step-start latency
    (:data:`emulation.emulator.pmd.PMD_MIN_GPUS`): the default leaves it off there."""
    before = pmd.current_mask()
    with EmulatedFabric(ocs_star(4, 2, 400.0, 0.0, "ring"), run_dir / "emulation", link_mbps=10.0) as emu:
        assert emu.drops.xsk_ports == []
        assert emu.datapath == ("kernel" if detect().ovs_kernel_datapath else "packet")
        assert pmd.current_mask() == before
        assert emu.net.pingAll(timeout=2) == 0.0
