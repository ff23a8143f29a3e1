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
