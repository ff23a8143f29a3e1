"""Demand matrices for scheduling parallel OCSes (Spectra, arXiv 2603.07373): one GPT-like
training iteration, an MoE layer's all-to-all and synthetic benchmark matrices, and the workload
that carries a matrix to the flow backend.

Every matrix is (n, n) bytes, ``[src, dst]``, zero diagonal.

- :func:`gpt_matrix`: the rail traffic of one iteration of a dense decoder under data and pipeline
  parallelism, from the phase model (:func:`emulation.workloads.iteration.build_trace`): TP fills
  a server, so the n ranks are the servers on one rail, ``rank = dp + DP x pp``. A pipeline send
  of b bytes adds b to ``[src, dst]``; a DP reduce-scatter or all-gather of a b-byte bucket over
  d ranks runs as a ring (each rank sends ``(d - 1) / d x b`` to its successor), an all-reduce as
  two. The gradient-norm all-reduce (4 bytes) is left out (``clip_grad`` off): a circuit held for
  4 bytes costs a whole dark window, such messages take another path.
- :func:`moe_matrix`: one MoE layer's dispatch (payload-efficient: the kept tokens only) from the
  routing generator (:func:`emulation.workloads.moe.route`), with its skew and capacity factor;
  defaults follow Qwen3-30B-A3B's routing shape (128 experts, top-8, hidden 2048, BF16).
- :func:`uniform_matrix`, :func:`skewed_matrix`, :func:`sparse_matrix`: synthetic benchmarks
  (dense random; a few large and more small flows per source, most bytes in the large ones; a sum
  of k random permutations). The paper's exact benchmark matrices could not be read here; these
  are the kinds the OCS-scheduling literature evaluates on (``docs/papers/spectra.md``).
"""

from __future__ import annotations

import numpy as np

from emulation.workloads.iteration import MODELS, ComputeSpec, ParallelSpec, build_trace
from emulation.workloads.model import Step, Workload
from emulation.workloads.moe import MoELayer, route


def _check_n(n: int) -> None:
    if n < 2:
        raise ValueError(f"gpus: must be at least 2, got {n}")


def gpt_matrix(pp: int = 4, dp: int = 4, model: str = "llama3-70b", micro_batches: int = 8,
               tp: int = 8) -> np.ndarray:
    """One training iteration's rail traffic (module doc), ``pp x dp`` ranks.

    :param model: a name of :data:`emulation.workloads.iteration.MODELS` (default Llama-3-70B's
        published shape, a dense GPT-style decoder). :param tp: TP degree inside a server (the
        rail carries 1/tp of each activation).
    :returns: (pp dp, pp dp) bytes. :raises ValueError: bad degrees or an unknown model.
    """
    if model not in MODELS:
        raise ValueError(f"model: unknown {model!r} (known: {', '.join(MODELS)})")
    par = ParallelSpec(tp=tp, pp=pp, dp=dp, micro_batches=micro_batches, clip_grad=False)
    trace = build_trace(MODELS[model], par, ComputeSpec())
    n = trace.ranks
    _check_n(n)
    out = np.zeros((n, n))
    for r, prog in enumerate(trace.programs):
        for op in prog:
            if op.kind == "send":
                peer = [m for m in trace.groups[op.group].members if m != r][0]
                out[r, peer] += op.bytes
            elif op.kind in ("reducescatter", "allgather", "allreduce"):
                members = trace.groups[op.group].members
                d = len(members)
                succ = members[(members.index(r) + 1) % d]
                rounds = 2 if op.kind == "allreduce" else 1
                out[r, succ] += rounds * (d - 1) * op.bytes / d
            elif op.kind == "alltoall":
                members = trace.groups[op.group].members
                for m in members:
                    if m != r:
                        out[r, m] += op.bytes / len(members)
    return np.round(out)


def moe_matrix(gpus: int = 16, experts: int = 128, top_k: int = 8, skew: str = "zipf", skew_param: float = 1.2,
               capacity_factor: float = 1.25, tokens_per_gpu: int = 4096, hidden: int = 2048, element_bytes: int = 2,
               popularity: str = "shared", seed: int = 0) -> np.ndarray:
    """One MoE layer's payload-efficient dispatch matrix (module doc; fields as
    :class:`emulation.workloads.moe.MoELayer`).

    :returns: (gpus, gpus) bytes, zero diagonal. :raises ValueError: a bad layer field.
    """
    layer = MoELayer(gpus=gpus, experts=experts, top_k=top_k, capacity_factor=capacity_factor,
                     tokens_per_gpu=tokens_per_gpu, hidden=hidden, element_bytes=element_bytes, skew=skew,
                     skew_param=skew_param, popularity=popularity, seed=seed)
    m = route(layer).matrix("dispatch", "payload").astype(float)
    np.fill_diagonal(m, 0.0)
    return m


def uniform_matrix(n: int, row_bytes: float = 2**28, seed: int = 0) -> np.ndarray:
    """Dense random demand: every off-diagonal entry uniform in [0, 1), scaled so that the mean
    row sum is ``row_bytes``. :returns: (n, n) bytes. :raises ValueError: n < 2."""
    _check_n(n)
    rng = np.random.default_rng(seed)
    m = rng.random((n, n))
    np.fill_diagonal(m, 0.0)
    return np.round(m * row_bytes * n / m.sum())


def skewed_matrix(n: int, large: int = 4, small: int = 8, large_share: float = 0.7, row_bytes: float = 2**28,
                  seed: int = 0) -> np.ndarray:
    """Sparse skewed demand: every source sends ``large_share`` of its ``row_bytes`` in ``large``
    flows and the rest in ``small`` flows, to distinct random destinations, each class split
    evenly with +-30 % noise. :returns: (n, n) bytes.
    :raises ValueError: n < 2, or more flows per source than destinations."""
    _check_n(n)
    if large < 1 or small < 0 or large + small > n - 1:
        raise ValueError(f"large, small: need 1 <= large and large + small <= n - 1 = {n - 1}, got {large} + {small}")
    rng = np.random.default_rng(seed)
    m = np.zeros((n, n))
    for i in range(n):
        dst = rng.permutation([j for j in range(n) if j != i])[: large + small]
        for cls, count, share in ((dst[:large], large, large_share), (dst[large:], small, 1 - large_share)):
            if count:
                w = share * row_bytes / count * rng.uniform(0.7, 1.3, count)
                m[i, cls] = w
    return np.round(m)


def sparse_matrix(n: int, k: int = 4, row_bytes: float = 2**28, seed: int = 0) -> np.ndarray:
    """The sum of ``k`` random derangements (permutations without a fixed point), weights drawn
    uniformly and scaled to a total of ``row_bytes`` per row. :returns: (n, n) bytes.
    :raises ValueError: n < 2 or k < 1."""
    _check_n(n)
    if k < 1:
        raise ValueError(f"k: must be at least 1, got {k}")
    rng = np.random.default_rng(seed)
    m = np.zeros((n, n))
    w = rng.uniform(0.2, 1.0, k)
    w *= row_bytes / w.sum()
    for q in range(k):
        while True:
            p = rng.permutation(n)
            if not (p == np.arange(n)).any():
                break
        m[np.arange(n), p] += w[q]
    return np.round(m)


def demand_workload(d, name: str = "demand") -> Workload:
    """One step carrying ``d``: a transfer per nonzero ``(src, dst)`` of ``d[src, dst]`` bytes
    (``alltoallv``, chunk = dst, op ``append``), as :func:`emulation.workloads.moe.moe_workload`
    builds its phases. ``bytes`` is the largest row sum.

    :param d: (n, n) bytes, rounded to integers. :raises ValueError: not square, negative.
    """
    m = np.rint(np.asarray(d, dtype=float)).astype(np.int64)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2 or (m < 0).any():
        raise ValueError(f"demand: must be a non-negative square matrix of at least 2 x 2, got shape {m.shape}")
    n = m.shape[0]
    src, dst = np.nonzero((m > 0) & ~np.eye(n, dtype=bool))
    step = Step.columns("demand", src, dst, m[src, dst], dst, 1, "append")
    return Workload("alltoallv", name, n, int(m.sum(axis=1).max()), n, (step,))
