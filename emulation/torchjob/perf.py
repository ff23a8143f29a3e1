"""gloo's AllReduce on the fabric (``ocslab torch allreduce-perf``): the real benchmark on the
packet backend, its flow prediction.

:func:`allreduce_perf` runs :mod:`emulation.torchjob.allreduce_perf` (a real ``torch.distributed``
gloo AllReduce over a size sweep, nccl-tests style) on n emulated GPUs whose OCS holds the ring
configuration (``ocs-star``, 2 ports per GPU, ``initial: ring``), and predicts every size with the
flow backend: gloo's ring algorithm is the ``ring`` workload (:mod:`emulation.torchjob.allreduce_perf`
documents why), simulated on the same fabric at the emulated link rate, with the per-message
latency alpha fitted from the smallest size (``t_small / (2 (n - 1))``, as the alpha of an
alpha-beta fit; the smallest size is therefore not a prediction). Times here are emulated
(wall-clock) seconds and rates emulated Gbit/s: a real program sends real bytes, so there is no
byte scale; ``port_gbps / link_mbps x 1000`` converts them to real-equivalent.

Spec: gloo busbw within 20% of the flow backend's prediction.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from emulation.results import busbw_gbps
from emulation.torchjob.predict import fit_alpha, predict_allreduce


class AllReducePerfRow(BaseModel):
    """One buffer size: gloo's measured time (emulated s) and busbw (emulated Gbit/s), the flow
    backend's prediction of both, ``deviation`` = measured busbw / predicted - 1, and whether
    every rank got the right sum."""

    bytes: int
    time_s: float
    busbw_gbps: float
    predicted_s: float
    predicted_busbw_gbps: float
    deviation: float
    correct: bool


class AllReducePerf(BaseModel):
    """``allreduce_perf.json``: the benchmark on ``gpus`` GPUs at ``link_mbps``, the fitted
    ``alpha_s``, the torch version and one row per size."""

    gpus: int
    link_mbps: float
    alpha_s: float
    torch: str
    rows: list[AllReducePerfRow]


def predict_ring(fabric, nbytes: int, alpha_s: float) -> float:
    """Flow-backend time (s) of the ring AllReduce of ``nbytes`` on all GPUs of ``fabric`` as it
    is (:func:`emulation.torchjob.predict.predict_allreduce`), with per-message latency
    ``alpha_s``. :raises ValueError: bad sizes."""
    return predict_allreduce(fabric, fabric.initial, list(range(fabric.gpus)), nbytes, alpha_s)


def allreduce_perf(gpus: int, link_mbps: float, sizes: list[int], iters: int, out: Path,
                   timeout_s: float = 1800.0) -> AllReducePerf:
    """Run gloo's AllReduce benchmark on ``gpus`` emulated GPUs in a ring of circuits and
    predict it (module doc).

    :param link_mbps: emulated port rate, Mbit/s.
    :param sizes: buffer sizes in bytes, ascending, multiples of 4; the first fits alpha.
    :returns: the :class:`AllReducePerf`, also written to ``out/allreduce_perf.json``.
    :raises emulation.emulator.net.EmulationError: the fabric or a rank failed.
    """
    from emulation.emulator.session import PacketSession
    from emulation.scenario.schema import EmulationSpec
    from emulation.torchjob.launch import run_torch
    from topologies.builders import ocs_star

    fabric = ocs_star(gpus, 2, port_gbps=link_mbps / 1000, initial="ring")
    out.mkdir(parents=True, exist_ok=True)
    raw = (out / "gloo-raw.json").resolve()
    # no scenario: the flag's rate, unprobed, and the job's real bytes (no byte scale, no dilation)
    with PacketSession(fabric, out, EmulationSpec(link_mbps=link_mbps, headroom="skip"), byte_scale=1.0) as session:
        run_torch(session.emu, "emulation.torchjob.allreduce_perf",
                  ["--sizes", ",".join(map(str, sizes)), "--iters", str(iters), "--out", str(raw)],
                  out / "torch", timeout_s)
    got = json.loads(raw.read_text())
    first = got["results"][0]
    alpha = fit_alpha(fabric, fabric.initial, list(range(gpus)), first["bytes"], first["time_s"])
    rows = []
    for r in got["results"]:
        pred = predict_ring(fabric, r["bytes"], alpha)
        bus, pbus = (busbw_gbps("allreduce", gpus, r["bytes"], t) for t in (r["time_s"], pred))
        rows.append(AllReducePerfRow(bytes=r["bytes"], time_s=r["time_s"], busbw_gbps=bus, predicted_s=pred,
                                     predicted_busbw_gbps=pbus, deviation=bus / pbus - 1, correct=r["correct"]))
    res = AllReducePerf(gpus=gpus, link_mbps=link_mbps, alpha_s=alpha, torch=str(got["torch"]), rows=rows)
    (out / "allreduce_perf.json").write_text(json.dumps(res.model_dump(), indent=1))
    return res
