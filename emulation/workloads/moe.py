"""MoE expert-parallel traffic: token routing, capacity, dispatch and combine matrices, workloads.

Spec: ``docs/mechanisms.md`` (FlashDMoE, arXiv 2506.04667: we need its traffic model, not its kernel).

A layer on P GPUs with E experts (E/P per GPU, expert e on GPU ``e // (E/P)``): each of the S
tokens of every GPU picks its top-k experts; expert e accepts at most
``C = ceil(CF x k x S / E)`` tokens from each source GPU and drops the rest. A routed token copy
is H x b bytes (8 KiB for H = 2048 FP32).

Routing skew is parametric (no licence-clean routing trace is known): an expert-popularity
vector g, then every token draws k distinct experts with probability proportional to g (the
Gumbel-top-k trick: top-k of ``log g + Gumbel noise``), from a generator seeded with ``seed``.

- ``uniform``: g = 1/E;
- ``zipf``: g_e proportional to ``rank(e)^-a`` (``skew_param`` = a), ranks a seeded permutation;
- ``dirichlet``: g ~ Dirichlet(alpha, ..., alpha) (``skew_param`` = alpha; small = skewed).

``popularity`` says whose vector it is: ``shared`` (default) draws one g for the whole layer, so
every GPU favours the same hot experts and their GPUs' ports bound the layer; ``per-gpu`` draws
an independent g for every source GPU (token-to-expert affinity that differs by GPU, e.g. from
data locality), which skews (src, dst) pairs while port totals stay closer to balanced.

Matrices (bytes, ``[src, dst]``, diagonal = local, never on the network):

- dispatch, payload-efficient: the kept tokens only; padded collective: every (src, dst) buffer
  padded to C x (experts on dst) tokens, null tokens included;
- combine: expert outputs return to each token's home GPU (the transpose). Payload-efficient
  combine travels in tiles of ``tile_tokens`` tokens x ``tile_cols`` columns (128 x 64 FP32 =
  32 KiB), so each (expert GPU, home GPU) stream is rounded up to whole tiles of 128 tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import ConfigDict

from emulation.workloads.model import Step, Workload

Skew = Literal["uniform", "zipf", "dirichlet"]
Popularity = Literal["shared", "per-gpu"]
Mode = Literal["padded", "payload"]


@dataclass(frozen=True)
class MoELayer:
    """One MoE layer's routing problem (module doc); a scenario's ``moe:`` section (its ``gpus``
    are the fabric's). ``experts`` in total (a multiple of ``gpus``), ``top_k``,
    ``capacity_factor`` CF, ``tokens_per_gpu`` S, ``hidden`` H elements of ``element_bytes`` b
    per token, routing ``skew`` (``uniform``; ``zipf`` with exponent ``skew_param``;
    ``dirichlet`` with concentration ``skew_param``), ``popularity`` (``shared`` or ``per-gpu``),
    ``seed``, combine tiles of ``tile_tokens`` x ``tile_cols``. Each field's description is its
    ``metadata["description"]`` (pydantic reads it; :mod:`emulation.scenario.fields`).

    :raises ValueError: a bad field (the message starts with its name).
    """

    __pydantic_config__ = ConfigDict(extra="forbid", allow_inf_nan=False)

    gpus: int = field(metadata={"description": (
        "GPUs P the layer runs on, expert e on GPU e // (E/P) (in a scenario: the fabric's, ``fabric.gpus``).")})
    experts: int = field(metadata={"description": "Routed experts E in total, a multiple of ``gpus``."})
    top_k: int = field(default=2, metadata={"description": "Distinct experts k every token is routed to."})
    capacity_factor: float = field(default=1.0, metadata={"description": (
        "Capacity factor CF: an expert accepts at most C = ceil(CF x k x S / E) tokens from each source GPU and "
        "drops the rest.")})
    tokens_per_gpu: int = field(default=4096, metadata={"description": "Tokens S of every GPU."})
    hidden: int = field(default=2048, metadata={"description": "Hidden size H, elements per token."})
    element_bytes: int = field(default=4, metadata={"description": (
        "Bytes b of one element (a routed token copy is H x b bytes).")})
    skew: Skew = field(default="uniform", metadata={"description": (
        "Routing skew of the expert popularity g: ``uniform`` (g = 1/E), ``zipf`` (g_e proportional to "
        "rank(e)^-a, a = ``skew_param``) or ``dirichlet`` (g ~ Dirichlet(``skew_param``); small = skewed).")})
    skew_param: float = field(default=1.0, metadata={"description": (
        "The exponent a of ``zipf`` or the concentration alpha of ``dirichlet`` (unused by ``uniform``).")})
    popularity: Popularity = field(default="shared", metadata={"description": (
        "Whose popularity vector: ``shared`` (one for the layer: every GPU favours the same hot experts) or "
        "``per-gpu`` (an independent one per source GPU).")})
    seed: int = field(default=0, metadata={"description": "Seed of the popularity and routing draws."})
    tile_tokens: int = field(default=128, metadata={"description": (
        "Tokens per combine tile: each payload-efficient combine stream is rounded up to whole tiles.")})
    tile_cols: int = field(default=64, metadata={"description": (
        "Columns per combine tile, elements (the tile's shape; the rounding is by ``tile_tokens`` alone).")})

    def __post_init__(self) -> None:
        for name in ("gpus", "experts", "top_k", "tokens_per_gpu", "hidden", "element_bytes", "tile_tokens", "tile_cols"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be at least 1, got {getattr(self, name)}")
        if self.gpus < 2:
            raise ValueError(f"gpus: must be at least 2, got {self.gpus}")
        if self.experts % self.gpus:
            raise ValueError(f"experts: {self.experts} is not a multiple of gpus ({self.gpus})")
        if self.top_k > self.experts:
            raise ValueError(f"top_k: {self.top_k} exceeds the {self.experts} experts")
        if self.capacity_factor <= 0:
            raise ValueError(f"capacity_factor: must be positive, got {self.capacity_factor}")
        if self.skew not in ("uniform", "zipf", "dirichlet"):
            raise ValueError(f"skew: unknown {self.skew!r} (known: uniform, zipf, dirichlet)")
        if self.skew != "uniform" and self.skew_param <= 0:
            raise ValueError(f"skew_param: must be positive, got {self.skew_param}")
        if self.popularity not in ("shared", "per-gpu"):
            raise ValueError(f"popularity: unknown {self.popularity!r} (known: shared, per-gpu)")

    @property
    def experts_per_gpu(self) -> int:
        """E / P."""
        return self.experts // self.gpus

    @property
    def token_bytes(self) -> int:
        """Bytes of one token copy, H x b."""
        return self.hidden * self.element_bytes

    @property
    def capacity(self) -> int:
        """C = ceil(CF x k x S / E): tokens an expert accepts from each source GPU."""
        return math.ceil(self.capacity_factor * self.top_k * self.tokens_per_gpu / self.experts)


@dataclass(frozen=True)
class MoETraffic:
    """Routing outcome and byte matrices of one layer (module doc). Counts are tokens; matrices
    are (P, P) bytes ``[src, dst]`` with the local diagonal kept (it never crosses the fabric)."""

    layer: MoELayer
    popularity: np.ndarray  # (E,) expert popularity g (per-gpu: (P, E), one row per source)
    routed: np.ndarray  # (P, E) tokens of GPU p routed to expert e (before capacity)
    kept: np.ndarray  # (P, E) after capacity
    dispatch: np.ndarray  # payload-efficient dispatch bytes
    dispatch_padded: np.ndarray
    combine: np.ndarray  # payload-efficient combine bytes (whole tiles)
    combine_padded: np.ndarray

    @property
    def dropped(self) -> int:
        """Token copies dropped by the capacity limit."""
        return int((self.routed - self.kept).sum())

    def matrix(self, phase: str, mode: Mode) -> np.ndarray:
        """The (P, P) byte matrix of ``phase`` (``dispatch``/``combine``) in ``mode``."""
        pad = mode == "padded"
        if phase == "dispatch":
            return self.dispatch_padded if pad else self.dispatch
        if phase == "combine":
            return self.combine_padded if pad else self.combine
        raise ValueError(f"phase: unknown {phase!r} (dispatch, combine)")

    def network_bytes(self, mode: Mode) -> int:
        """Bytes that cross the fabric in both phases (diagonals excluded)."""
        off = ~np.eye(self.layer.gpus, dtype=bool)
        return int(self.matrix("dispatch", mode)[off].sum() + self.matrix("combine", mode)[off].sum())


def expert_popularity(layer: MoELayer, rng: np.random.Generator) -> np.ndarray:
    """The (E,) popularity vector g of ``layer.skew`` (module doc), summing to 1."""
    e = layer.experts
    if layer.skew == "uniform":
        return np.full(e, 1.0 / e)
    if layer.skew == "zipf":
        g = np.arange(1, e + 1, dtype=float) ** -layer.skew_param
        g = g[rng.permutation(e)]
    else:
        g = rng.dirichlet(np.full(e, layer.skew_param))
        g = np.maximum(g, 1e-300)
    return g / g.sum()


def route(layer: MoELayer) -> MoETraffic:
    """Route every token of ``layer`` (seeded) and build the byte matrices (module doc)."""
    rng = np.random.default_rng(layer.seed)
    g = expert_popularity(layer, rng)
    p, e, k, s = layer.gpus, layer.experts, layer.top_k, layer.tokens_per_gpu
    if layer.popularity == "per-gpu":
        g = np.stack([g] + [expert_popularity(layer, rng) for _ in range(p - 1)])
    routed = np.zeros((p, e), dtype=np.int64)
    logg = np.log(g)
    for src in range(p):  # Gumbel-top-k: k distinct experts per token, P(e) ~ g_e
        keys = (logg[src] if g.ndim == 2 else logg) + rng.gumbel(size=(s, e))
        top = np.argpartition(-keys, k - 1, axis=1)[:, :k]
        routed[src] = np.bincount(top.ravel(), minlength=e)
    kept = np.minimum(routed, layer.capacity)
    owner = np.arange(e) // layer.experts_per_gpu
    per_gpu = np.zeros((p, p), dtype=np.int64)  # kept tokens src -> dst
    for d in range(p):
        per_gpu[:, d] = kept[:, owner == d].sum(axis=1)
    tb = layer.token_bytes
    dispatch = per_gpu * tb
    padded = np.full((p, p), layer.capacity * layer.experts_per_gpu * tb, dtype=np.int64)
    tiles = -(-per_gpu.T // layer.tile_tokens)  # combine streams in whole tiles of tokens
    combine = tiles * layer.tile_tokens * tb
    return MoETraffic(layer, g, routed, kept, dispatch, padded, combine, padded.T.copy())


def moe_workload(traffic: MoETraffic, mode: Mode) -> Workload:
    """Dispatch then combine as two steps of direct transfers, one per (src, dst) pair with
    bytes (``alltoallv``; chunk d = src's dispatch block for d, chunk P + s = the combine block
    returning to s; op ``append``). ``bytes`` is the per-GPU routed volume S x k x H x b.

    :raises ValueError: unknown mode.
    """
    if mode not in ("padded", "payload"):
        raise ValueError(f"mode: unknown {mode!r} (padded, payload)")
    layer = traffic.layer
    p = layer.gpus
    steps = []
    for phase in ("dispatch", "combine"):
        m = np.asarray(traffic.matrix(phase, mode), dtype=np.int64)
        src, dst = np.nonzero((m > 0) & ~np.eye(p, dtype=bool))  # row-major: by source, then destination
        steps.append(Step.columns(phase, src, dst, m[src, dst], dst if phase == "dispatch" else p + dst, 1, "append"))
    per_gpu = layer.tokens_per_gpu * layer.top_k * layer.token_bytes
    return Workload("alltoallv", f"moe-{mode}", p, per_gpu, 2 * p, tuple(steps))
