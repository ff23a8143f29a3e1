"""Size limits decided before anything is built: the flow backend's memory model (transfers fitted
from small builds) and the packet backend's headroom model."""

from __future__ import annotations

import pytest

from emulation.emulator.limits import packet_gpu_limit
from emulation.flowsim.limits import BYTES_PER_TRANSFER, check_memory, transfer_estimate
from emulation.workloads import ALGORITHMS, build


@pytest.mark.parametrize("collective,algorithm", [(c, a) for c, algs in ALGORITHMS.items() for a in algs])
def test_the_transfer_fit_from_8_to_64_gpus_predicts_256(collective, algorithm):
    def count_at(k: int) -> int:
        return build(algorithm, k, 1 << 20, collective).transfer_count

    actual = count_at(256)
    assert transfer_estimate(count_at, 256) == pytest.approx(actual, rel=0.01, abs=1.0)


def test_memory_refusal_names_the_field_and_the_largest_size_that_fits():
    ring = lambda k: build("ring", k, 1 << 20).transfer_count  # noqa: E731 - 2k(k-1)
    memory = int(2 * 1000 * 999 * BYTES_PER_TRANSFER / 0.75) + 1  # room for exactly 1000 GPUs
    assert check_memory([ring], 1000, memory=memory) is None
    msg = check_memory([ring], 4096, memory=memory)
    assert msg.startswith("fabric.gpus: 4096 GPUs need about") and msg.endswith("at most about 1000 GPUs")


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

    from emulation.runner import frame_warning
    from emulation.scenario.load import load_experiment

    exp = load_experiment(Path(__file__).resolve().parents[1] / "experiments" / "demo.yaml")[1]
    runs = {(r.name, r.size_bytes): r for r in exp.runs()}
    ring = runs[("ring", 25 << 20)]  # 8 GPUs: 25 MiB / 8 x 0.1 = 328 kB per step
    assert frame_warning(ring, 0.1, 1500) is None  # the default MTU never warns
    assert frame_warning(ring, 0.1, 9000) is None  # 36.6 frames of 8948 bytes
    small = frame_warning(runs[("ring", 1 << 20)], 0.1, 9000)  # 13 kB: 1.5 frames
    assert small.startswith("ring 1MiB: its smallest transfer is 1.5 frames of MTU 9000")
