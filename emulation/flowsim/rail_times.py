"""How long one op of a training iteration takes alone on its segment of a rail, by the flow
engine (Opus, arXiv 2507.08119): the durations the rail replay (:mod:`emulation.flowsim.iteration`)
and the iteration traces' TP all-reduces use.

A segment is data (:meth:`topologies.rail_network.RailNetwork.segment`: a small fabric and its
circuits); its time model lives here, with the engine it runs
(:func:`emulation.flowsim.simulate.simulate`).
"""

from __future__ import annotations

from functools import lru_cache

from emulation.flowsim.simulate import simulate
from emulation.schedule import plan_from_configurations
from emulation.workloads import build
from emulation.workloads.model import Step, Transfer, Workload
from topologies.rail_network import RailNetwork


def op_seconds(net: RailNetwork, kind: str, n: int, nbytes: int, segment: str) -> float:
    """Seconds one op takes alone on its segment of ``net``: ``kind`` ``allreduce`` (ring),
    ``alltoall`` (pairwise) or ``send`` (one message from GPU 0 to 1) of ``nbytes`` bytes among
    ``n`` GPUs, on segment ``ring``, ``link``, ``eps`` or ``scaleup``. Memoised.

    :raises ValueError: an unknown segment kind.
    """
    return _op_seconds(net, kind, n, int(nbytes), segment)


def tp_allreduce_s(net: RailNetwork, gpus: int, nbytes: int) -> float:
    """Seconds of a ring all-reduce of ``nbytes`` bytes over the ``gpus`` GPUs of a server's
    scale-up switch (0 for one GPU)."""
    return _op_seconds(net, "allreduce", gpus, int(nbytes), "scaleup") if gpus > 1 else 0.0


@lru_cache(maxsize=4096)
def _op_seconds(net: RailNetwork, kind: str, n: int, nbytes: int, segment: str) -> float:
    fab, config = net.segment(n, segment)
    if kind == "send":
        w = Workload("broadcast", "p2p", n, nbytes, 1, (Step("p2p", (Transfer(0, 1, nbytes, 0, 1, "copy"),)),), (0,))
    else:
        w = build("pairwise" if kind == "alltoall" else "ring", n, max(nbytes, n), kind)
    plan = plan_from_configurations("opus", config, [config] * len(w.steps), 0.0, w)
    return simulate(fab, w, plan, alpha_s=net.alpha_s, record_transfers=False).time_s
