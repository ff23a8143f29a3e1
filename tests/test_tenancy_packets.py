"""Several tenants at once on the packet backend (experiments/tenancy_packets.yaml): each alone and
together agrees with the flow backend, none of their frames is ever on another tenant's OCS
ports, and their circuits are gone when they have ended."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from emulation.emulator.tenants import foreign_filter
from emulation.tenants_packet import compare_tenants
from emulation import kinds

ROOT = Path(__file__).resolve().parents[1]


def test_the_foreign_filter_keeps_exactly_the_other_tenants_frames(run_dir):
    """The isolation count can fail: of frames between a tenant's GPUs, from it to another tenant,
    between two others and a non-IP frame, the filter keeps all but the first."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import ARP, Ether
    from scapy.utils import rdpcap, wrpcap

    from emulation.dataplane import gpu_ip

    frames = [Ether() / IP(src=gpu_ip(0), dst=gpu_ip(3)) / TCP(),   # own
              Ether() / IP(src=gpu_ip(3), dst=gpu_ip(1)) / TCP(),   # own
              Ether() / IP(src=gpu_ip(0), dst=gpu_ip(4)) / TCP(),   # to another tenant
              Ether() / IP(src=gpu_ip(5), dst=gpu_ip(6)) / TCP(),   # another tenant's
              Ether() / ARP(psrc=gpu_ip(0), pdst=gpu_ip(1))]        # not IP
    wrpcap(str(run_dir / "in.pcap"), frames)
    tcpdump = shutil.which("tcpdump")
    assert tcpdump, "tcpdump is installed by make setup"
    subprocess.run([tcpdump, "-r", str(run_dir / "in.pcap"), "-w", str(run_dir / "out.pcap"),
                    foreign_filter([0, 1, 2, 3])], check=True, capture_output=True)
    kept = rdpcap(str(run_dir / "out.pcap"))
    assert [bytes(f) for f in kept] == [bytes(f) for f in frames[2:]]


@pytest.mark.emulation
def test_three_tenants_alone_and_together_match_the_flow_backend_and_stay_isolated(run_dir):
    sc = kinds.load_as(ROOT / "experiments" / "tenancy_packets.yaml", "tenancy")
    t = sc.tenancy
    res = compare_tenants(t.rack, t.tenants, t.fabric, sc.emulation, run_dir).model_dump()
    for r in res["tenants"]:
        print(f"{r['name']} {r['algorithm']} on {r['gpus']}: alone {r['packet_alone_s'] * 1e6:.1f} us "
              f"({r['alone_error']:+.2%}), together {r['packet_together_s'] * 1e6:.1f} us ({r['together_error']:+.2%}), "
              f"flow {r['flow_alone_s'] * 1e6:.1f} us, foreign frames {r['foreign_packets']}")
    assert [len(r["gpus"]) for r in res["tenants"]] == [4, 4, 8]
    assert len({g for r in res["tenants"] for g in r["gpus"]}) == 16
    for r in res["tenants"]:
        # measured -0.7..+1.2% (2026-11, one run each alone and together); the bound is the
        # acceptance's 15%
        assert abs(r["alone_error"]) < 0.15 and abs(r["together_error"]) < 0.15, r
        assert r["foreign_packets"] == 0, r
    assert res["circuits_left"] == 0
    assert len(res["circuits"]["ocs0"]) == 16  # every GPU's two ports: a ring per tenant
