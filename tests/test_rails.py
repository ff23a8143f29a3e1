"""Rail-optimised fabrics (Opus, arXiv 2507.08119) on the packet backend: photonic rails built by
:func:`topologies.rails` come up under the controller and carry packets on the rails, inside a
server and across both."""

from __future__ import annotations

import pytest

from emulation import dataplane as dpn
from emulation.emulator.net import EmulatedFabric
from topologies import rails

pytestmark = pytest.mark.emulation


def test_photonic_rails_carry_packets_on_the_rails_and_inside_a_server(run_dir):
    f = rails(2, 2)  # GPUs 0, 1 in server 0; 2, 3 in server 1; rail r joins GPU r and GPU 2 + r
    with EmulatedFabric(f, run_dir, link_mbps=10) as emu:
        assert emu.client.status()["ready"]
        assert {tuple(sorted(c)) for o in emu.client.circuits().to_json().values() for c in
                ((a[0], b[0]) for a, b in o)} == {(0, 2), (1, 3)}
        for src, dst in ((0, 2), (1, 3), (0, 1), (2, 3), (0, 3)):  # rail, rail, scale-up, scale-up, both
            out = emu.host(src).cmd(f"ping -c 2 -W 1 -i 0.2 {dpn.gpu_ip(dst)}")
            assert " 0% packet loss" in out, (src, dst, out)
