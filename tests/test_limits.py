"""Size limits decided before anything is built: the flow backend's memory model (column bytes,
steps, largest step and configurations fitted from small builds) and the packet backend's
headroom model."""

from __future__ import annotations

import pytest

from emulation.emulator.limits import packet_gpu_limit
from emulation.flowsim.limits import check_memory, fitted_shape, need, shape_of, transfer_estimate
from emulation.workloads import ALGORITHMS, build


@pytest.mark.parametrize("collective,algorithm", [(c, a) for c, algs in ALGORITHMS.items() for a in algs])
def test_the_shape_fit_from_8_to_128_gpus_predicts_512(collective, algorithm):
    """Every quantity the memory model uses (column bytes, steps, largest step, transfers,
    chunks), fitted from 8-128 GPUs, at 512 GPUs: within 1% of the workload built there."""
    def shape_at(k: int):
        return shape_of(build(algorithm, k, 1 << 20, collective))

    got, want = fitted_shape(shape_at, 512), shape_at(512)
    for name in ("stored", "steps", "largest", "transfers", "chunks"):
        assert getattr(got, name) == pytest.approx(getattr(want, name), rel=0.01, abs=1.0), name
    ring = lambda k: build("ring", k, 1 << 20).transfer_count  # noqa: E731
    assert transfer_estimate(ring, 4096) == pytest.approx(2 * 4096 * 4095)


def test_a_ring_holds_columns_of_n_entries_not_its_transfers():
    """131,072-GPU Ring AllReduce: 34 G transfers, but its steps are windows of arrays of 2n
    entries, so the model asks for steps and GPUs, not transfers (about 1 GiB here)."""
    shape = fitted_shape(lambda k: shape_of(build("ring", k, 1 << 30)), 131072)
    assert shape.transfers == pytest.approx(2 * 131072 * 131071)
    assert shape.stored < 8 << 20 and shape.steps == pytest.approx(2 * 131071)
    assert need(shape, 131072) < 2 << 30


def test_memory_refusal_names_the_field_and_the_largest_size_that_fits():
    direct = lambda k: shape_of(build("direct", k, 1 << 20, "alltoall"))  # noqa: E731 - n(n-1) transfers
    memory = int(need(fitted_shape(direct, 1000), 1000) / 0.75) + 1  # room for exactly 1000 GPUs
    assert check_memory([direct], 1000, memory=memory) is None
    msg = check_memory([direct], 4096, memory=memory)
    assert msg.startswith("fabric.gpus: 4096 GPUs need about") and msg.endswith("at most about 1000 GPUs")
    assert "\n" not in msg


def test_packet_limit_is_set_by_cpu_or_memory():
    # 80 Mbit/s per core at >= 0.5 Mbit/s per port: 2 cores, 2 ports per GPU -> 160 GPUs
    assert packet_gpu_limit(2, cores=2, memory=64 << 30) == (160, "CPU")
    assert packet_gpu_limit(1, cores=4, memory=64 << 30) == (640, "CPU")
    assert packet_gpu_limit(2, cores=2, memory=1 << 30) == (16, "memory")  # 64 MiB per GPU
    # the cost is per frame: jumbo frames carry 9014/1514 times the rate
    assert packet_gpu_limit(2, cores=2, memory=64 << 30, mtu=9000) == (952, "CPU")


@pytest.mark.parametrize("mtu,frame,mss", [(1500, 1514, 1448), (9000, 9014, 8948)])
def test_the_shaper_counts_the_wire_bytes_of_the_frames_it_carries(mtu, frame, mss):
    import re

    from emulation.emulator.shaper import Shaped, tc_commands

    lines = tc_commands(Shaped("ocl-x", 10.0, mtu=mtu))
    payload = next(line for line in lines if "classid 1:10" in line)
    rate = float(re.search(r" rate ([\d.]+)mbit", payload).group(1))
    assert rate == pytest.approx(10.0 * frame / mss, rel=1e-6)  # payload rate B_e on the wire
    assert f"burst {frame} " in payload and f"quantum {frame} " in payload  # one whole frame at a time


def test_jumbo_frames_warn_when_a_transfer_is_a_few_frames():
    from pathlib import Path

    from emulation.emulator.execute import run_scale
    from emulation.collective.runner import frame_warning
    from emulation.scenario.load import load_experiment

    exp = load_experiment(Path(__file__).resolve().parents[1] / "experiments" / "demo.yaml")[1]
    runs = {(r.name, r.size_bytes): r for r in exp.runs()}
    ring = runs[("ring", 25 << 20)]  # 8 GPUs: 25 MiB / 8 x 0.1 = 328 kB per step
    assert frame_warning(ring, 0.1, 1500) is None  # 226 frames of 1448 bytes
    # 36.6 frames of 8948 bytes at 0.1: the run is emulated at a byte scale that makes them 64
    at = run_scale(ring, exp.scale(10.0), 9000).byte_scale
    assert 0.17 < at < 0.18 and frame_warning(ring, at, 9000) is None
    small = frame_warning(runs[("ring", 1 << 20)], 0.1, 9000)  # 13 kB: 1.5 frames
    assert small.startswith("ring 1MiB: its smallest transfer is 1.5 frames of MTU 9000")


def test_the_capacity_model_recovers_the_measured_ceilings_from_one_measured_load():
    """One measured probe (32 GPUs x 2 ports at 10 Mbit/s reached 90.9% with the PMD datapath:
    582 Mbit/s carried) predicts the other measured ceilings (docs/emulator.md): 8 GPUs at 40
    Mbit/s and 16 at 20 (measured there: 88%, the edge)."""
    from emulation.emulator.limits import carried_mbps, gpus_per_machine

    cap = carried_mbps(32, 2, 10.0, 0.909)
    assert cap == pytest.approx(581.76)
    assert [gpus_per_machine(cap, r) for r in (5, 10, 20, 40)] == [64, 32, 16, 8]
    assert gpus_per_machine(cap, 10.0, reserve_links=4) == 30  # a machine that also ends tunnels
    with pytest.raises(ValueError):
        gpus_per_machine(cap, 0.0)


def test_a_lab_scales_with_machines_only_when_the_ocs_is_sharded():
    from emulation.emulator.limits import gpus_per_machine, lab_gpus

    cap = 582.0
    one = gpus_per_machine(cap, 10.0)
    assert lab_gpus(1, cap, 10.0) == one == lab_gpus(1, cap, 10.0, ocs="central")
    assert lab_gpus(16, cap, 10.0) == 16 * 30 == 480
    assert lab_gpus(16, cap, 10.0, ocs="central") == 21 < one  # every frame crosses the one OCS machine
    assert lab_gpus(4, cap, 10.0, ports_per_gpu=4) == 4 * 14
    with pytest.raises(ValueError):
        lab_gpus(0, cap, 10.0)
    with pytest.raises(ValueError):
        lab_gpus(2, cap, 10.0, ocs="split")


def test_the_ceiling_table_gives_each_after_datapath_its_gain_over_packet_sockets():
    """``bench_packet_ceiling.py --datapath all``: one column per datapath and a gain for each
    after one; a count none of whose rates passed is "none" with the rates tried."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from bench_packet_ceiling import markdown, parser

    def row(n, d, rate, ok):
        return {"gpus": n, "datapath": d, "mtu": 1500, "link_mbps": rate, "probe_efficiency": 0.95 if ok else 0.5,
                "ring_error": 0.03, "ok": ok}

    rows = [row(32, "packet", 5.0, False), row(32, "packet", 2.5, True), row(32, "pmd", 5.0, True),
            row(32, "steer", 5.0, True), row(64, "packet", 1.25, True), row(64, "pmd", 2.5, False),
            row(64, "steer", 2.5, True)]
    rows[-1]["byte_scale"] = 0.7
    table = markdown(rows, [32, 64], "here").splitlines()
    assert table[2].endswith("| gain (pmd) | gain (steer) |") and "steered" in table[2]
    assert table[4] == ("| 32 | 2.5 Mbit/s, probe 95.0%, Ring +3.0% | 5 Mbit/s, probe 95.0%, Ring +3.0% | "
                        "5 Mbit/s, probe 95.0%, Ring +3.0% | 2x | 2x |")
    assert table[5].startswith("| 64 | 1.25 Mbit/s") and "none (tried 2.5)" in table[5] and table[5].endswith(" - | 2x |")
    assert "2.5 Mbit/s, probe 95.0%, Ring +3.0% (byte scale 0.7) |" in table[5]
    args = parser().parse_args(["--datapath", "all", "--mtu", "9000"])
    assert args.datapath == "all" and args.byte_scale_rule == "run"
