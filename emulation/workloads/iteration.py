"""The phase model of one training iteration: what every GPU computes and sends, in order, under
tensor (TP), pipeline (PP), data (DP) and expert (EP) parallelism.

Both backends consume its output, an :class:`IterationTrace`: the flow backend replays it in
virtual time (:mod:`emulation.flowsim.iteration`), the packet backend's torch job follows the same
schedule. It is built for the rail-optimised fabric of Opus (arXiv 2507.08119): TP fills a server
(``tp == gpus_per_server``, Megatron-LM's placement: its all-reduces stay on the server's scale-up
domain), so every DP, PP and EP group has one GPU per server, all with the same local index: a
group lies on one rail. The rails are identical, so the trace describes one rail: its *ranks* are
the servers, ``server = dp + DP x pp`` (Megatron-LM's rank order tp-dp-pp).

**Schedule** (Megatron-LM's 1F1B without interleaving, Narayanan et al., arXiv 2104.04473): stage
``s`` of ``P`` runs ``min(P - s - 1, M)`` warm-up forwards, then alternates one forward and one
backward, then drains the remaining backwards; ``M`` micro-batches. A stage receives its input
activation before a forward (``s > 0``) and sends its output after it (``s < P - 1``); backwards
send gradients the other way. After the last backward the stage synchronises its gradients over
its DP group in buckets of ``bucket_params`` parameters (Megatron-LM's default 40 M; no overlap
with the backward), the experts' over the expert-data-parallel group (ranks holding the same
experts: ``dp / ep`` of them). With ``optimizer: distributed`` (Megatron-LM's distributed
optimizer) each bucket is reduce-scattered, every rank updates its shard and the parameters are
all-gathered back; with ``ddp`` each bucket is all-reduced. With ``clip_grad`` the gradient norm
is all-reduced over the model-parallel group (the pipeline's stages on the rail) in between. A
rank's rail phases are therefore: pipeline, DP reduce-scatter, norm, DP all-gather.

**Sizes** (bytes; ``T = micro_batch_size x seq_len`` tokens, ``h`` hidden, ``e`` bytes per
element, ``G`` = TP degree):

- PP activation or its gradient, per rail: ``T h e / G`` (Megatron-LM scatters the tensor over
  the TP ranks before sending, each rail carries its share);
- EP all-to-all (dispatch, then combine, in every MoE layer, forward and backward): each GPU sends
  ``T k h e / G`` (``k`` = top-k experts per token; the server's tokens split over its G GPUs);
- DP gradient bucket: ``bucket_params x grad_bytes``; a stage holds ``params(stage) / G`` dense
  parameters per GPU and ``expert_params(stage) / (G ep)`` expert ones.

**Compute** (seconds, per micro-batch, per GPU): forward FLOPs per token of a layer =
``2 x (matmul parameters used by the token) + 4 x seq_len x h`` (attention scores and values,
Kaplan et al. arXiv 2001.08361 and Narayanan et al.); the last stage adds the LM head
``2 h V``. Divided by ``G`` (TP) and by the achieved rate ``gpu_tflops x mfu``; a backward costs
twice its forward (no recomputation). TP's 2 all-reduces per layer in each direction (``T h e``
bytes each, on the scale-up domain) are added to the compute by the caller's ``tp_allreduce_s``.

Model sizes are the published configurations: Llama-3-8B (``config.json`` of
meta-llama/Meta-Llama-3-8B: 32 layers, hidden 4096, FFN 14336, 32 heads, 8 KV heads, vocabulary
128256; 8.03 B parameters), Llama-3-70B (80 layers, hidden 8192, FFN 28672, 64 heads, 8 KV heads;
70.6 B) and DeepSeekMoE-16B (arXiv 2401.06066: 28 layers, hidden 2048, 16
heads, the first layer dense with FFN 10944, then 64 routed experts of FFN 1408 with top-6 routing
and 2 shared experts, vocabulary 102400; 16.4 B parameters, 2.8 B active).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Literal, Union

from pydantic import AfterValidator, ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

Dimension = Literal["dp", "pp", "ep", "edp", "mp"]


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid", use_attribute_docstrings=True))
class TransformerSpec:
    """A decoder-only transformer's published shape.

    :param ffn_hidden: inner size of a dense layer's gated MLP (3 matrices, SwiGLU).
    :param experts: routed experts per MoE layer (0: a dense model); ``top_k`` of them per token,
        plus ``shared_experts`` every token uses; ``expert_ffn_hidden`` is one expert's inner size.
    :param dense_layers: leading layers that stay dense in an MoE model.
    """

    name: str
    """The model's name (it labels the results)."""
    layers: int
    """Transformer layers."""
    hidden: int
    """Hidden size h, elements."""
    ffn_hidden: int
    """Inner size of a dense layer's gated MLP (3 matrices, SwiGLU), elements."""
    heads: int
    """Attention heads (they split ``hidden``)."""
    kv_heads: int
    """Key-value heads of grouped-query attention (they split ``heads``)."""
    vocab: int
    """Vocabulary size V: rows of the input embedding and of the untied LM head."""
    seq_len: int = 4096
    """Tokens per sequence."""
    experts: int = 0
    """Routed experts per MoE layer; 0: a dense model."""
    top_k: int = 0
    """Routed experts every token uses in an MoE layer."""
    shared_experts: int = 0
    """Experts every token uses in an MoE layer besides its ``top_k``."""
    expert_ffn_hidden: int = 0
    """Inner size of one expert's gated MLP, elements."""
    dense_layers: int = 0
    """Leading layers that stay dense in an MoE model."""

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab", "seq_len"):
            if getattr(self, f) < 1:
                raise ValueError(f"{f}: must be >= 1, got {getattr(self, f)}")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"heads: hidden {self.hidden} must split into {self.heads} heads and those into "
                             f"{self.kv_heads} KV heads")
        if self.experts and not (1 <= self.top_k <= self.experts and self.expert_ffn_hidden >= 1):
            raise ValueError(f"top_k, expert_ffn_hidden: an MoE model needs 1 <= top_k <= experts "
                             f"({self.experts}) and expert_ffn_hidden >= 1")
        if not 0 <= self.dense_layers <= self.layers:
            raise ValueError(f"dense_layers: must be in 0..{self.layers}, got {self.dense_layers}")

    @property
    def moe(self) -> bool:
        """True for a mixture-of-experts model."""
        return self.experts > 0

    def is_moe_layer(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) has experts."""
        return self.moe and layer >= self.dense_layers

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections of one layer (grouped-query attention)."""
        kv = self.hidden // self.heads * self.kv_heads
        return self.hidden * (self.hidden + 2 * kv) + self.hidden * self.hidden

    def mlp_params(self, layer: int) -> tuple[int, int]:
        """``(dense, expert)`` MLP parameters of ``layer``: a dense layer's gated MLP, or an MoE
        layer's shared experts and router (dense) and its routed experts."""
        if not self.is_moe_layer(layer):
            return 3 * self.hidden * self.ffn_hidden, 0
        one = 3 * self.hidden * self.expert_ffn_hidden
        return self.shared_experts * one + self.hidden * self.experts, self.experts * one

    def active_mlp_params(self, layer: int) -> int:
        """MLP parameters one token passes through in ``layer``."""
        if not self.is_moe_layer(layer):
            return 3 * self.hidden * self.ffn_hidden
        return (self.shared_experts + self.top_k) * 3 * self.hidden * self.expert_ffn_hidden + self.hidden * self.experts

    @property
    def embedding_params(self) -> int:
        """Input embedding (also the size of the untied LM head)."""
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        """All parameters: embeddings, untied LM head, attention and MLPs (norms left out)."""
        return 2 * self.embedding_params + sum(self.attention_params + sum(self.mlp_params(i))
                                               for i in range(self.layers))

    def layer_flops(self, layer: int) -> float:
        """Forward FLOPs per token of ``layer`` (module doc)."""
        return 2.0 * (self.attention_params + self.active_mlp_params(layer)) + 4.0 * self.seq_len * self.hidden


#: The published configurations (module doc).
MODELS: dict[str, TransformerSpec] = {
    "llama3-8b": TransformerSpec("llama3-8b", layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8,
                                 vocab=128256, seq_len=8192),
    "llama3-70b": TransformerSpec("llama3-70b", layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8,
                                  vocab=128256, seq_len=8192),
    "deepseek-moe-16b": TransformerSpec("deepseek-moe-16b", layers=28, hidden=2048, ffn_hidden=10944, heads=16,
                                        kv_heads=16, vocab=102400, seq_len=4096, experts=64, top_k=6,
                                        shared_experts=2, expert_ffn_hidden=1408, dense_layers=1),
}


def _known_model(v):
    if isinstance(v, str) and v not in MODELS:
        raise ValueError(f"unknown model {v!r} (known: {', '.join(MODELS)}; or give its fields)")
    return v


#: A model in a scenario file: a name of :data:`MODELS`, or its fields (:class:`TransformerSpec`).
ModelRef = Annotated[Union[str, TransformerSpec], AfterValidator(_known_model)]


def transformer_of(ref: str | TransformerSpec) -> TransformerSpec:
    """The :class:`TransformerSpec` of a :data:`ModelRef`."""
    return MODELS[ref] if isinstance(ref, str) else ref


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid", use_attribute_docstrings=True))
class ParallelSpec:
    """Parallelism degrees and the batch: ``tp x pp x dp`` GPUs; ``ep`` divides ``dp`` (experts
    are sharded over ``ep`` of the DP replicas); ``micro_batches`` per iteration of
    ``micro_batch_size`` sequences per DP replica.

    :raises ValueError: a degree below 1, ``ep`` not dividing ``dp``, EP on a dense model's trace.
    """

    tp: int = Field(ge=1)
    """Tensor-parallel degree G: GPUs of a server that split every layer."""
    pp: int = Field(ge=1)
    """Pipeline-parallel degree: stages P."""
    dp: int = Field(ge=1)
    """Data-parallel degree: replicas D."""
    ep: int = Field(default=1, ge=1)
    """Expert-parallel degree: DP replicas the experts are sharded over (it divides ``dp``)."""
    micro_batches: int = Field(default=8, ge=1, le=4096)
    """Micro-batches M per iteration."""
    micro_batch_size: int = Field(default=1, ge=1)
    """Sequences per micro-batch of every DP replica."""
    bucket_params: int = Field(default=40_000_000, ge=1)
    """Parameters per gradient bucket of the DP synchronisation (Megatron-LM's default 40 M)."""
    optimizer: Literal["ddp", "distributed"] = "distributed"
    """``distributed`` (Megatron-LM's distributed optimizer: every gradient bucket is
    reduce-scattered, the parameters all-gathered back) or ``ddp`` (every bucket all-reduced)."""
    clip_grad: bool = True
    """Whether the gradient norm is all-reduced over the model-parallel group (the pipeline's
    stages) between the gradient and the parameter phases."""

    def __post_init__(self) -> None:
        for f in ("tp", "pp", "dp", "ep", "micro_batches", "micro_batch_size", "bucket_params"):
            if getattr(self, f) < 1:
                raise ValueError(f"{f}: must be >= 1, got {getattr(self, f)}")
        if self.dp % self.ep:
            raise ValueError(f"ep: must divide dp ({self.dp}), got {self.ep}")
        if self.optimizer not in ("ddp", "distributed"):
            raise ValueError(f"optimizer: 'ddp' or 'distributed', got {self.optimizer!r}")

    @property
    def gpus(self) -> int:
        """GPUs of the job."""
        return self.tp * self.pp * self.dp


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid", use_attribute_docstrings=True))
class ComputeSpec:
    """The GPUs' achieved compute: ``gpu_tflops`` peak (dense BF16, e.g. 312 for an A100) times
    ``mfu``; ``bytes_per_element`` of activations, ``grad_bytes`` per gradient element."""

    gpu_tflops: float = Field(default=312.0, gt=0)
    """Peak dense (BF16) rate of one GPU, TFLOP/s (312 for an A100)."""
    mfu: float = Field(default=0.45, gt=0, le=1)
    """Model FLOPs utilisation: the fraction of the peak rate achieved."""
    bytes_per_element: int = Field(default=2, ge=1)
    """Bytes of one activation (and parameter) element."""
    grad_bytes: int = Field(default=2, ge=1)
    """Bytes of one gradient element."""

    def __post_init__(self) -> None:
        if not self.gpu_tflops > 0 or not 0 < self.mfu <= 1:
            raise ValueError(f"gpu_tflops, mfu: need gpu_tflops > 0 and 0 < mfu <= 1, got {self.gpu_tflops}, {self.mfu}")
        if self.bytes_per_element < 1 or self.grad_bytes < 1:
            raise ValueError("bytes_per_element, grad_bytes: must be >= 1")

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s of one GPU."""
        return self.gpu_tflops * 1e12 * self.mfu


@dataclass(frozen=True)
class Group:
    """A process group whose traffic crosses the rails: ``members`` are ranks of the trace
    (servers), in the collective's rank order; ``dim`` its parallelism dimension."""

    id: str
    dim: Dimension
    members: tuple[int, ...]


@dataclass(frozen=True)
class Op:
    """One step of a rank's program.

    ``compute``: ``seconds`` of computation (TP all-reduces on the scale-up domain included).
    ``allreduce``, ``reducescatter``, ``allgather``, ``alltoall``: a collective of ``group`` with
    ``bytes`` per rank (the whole buffer: a gradient bucket, the parameters it gathers back).
    ``send`` / ``recv``: ``bytes`` from or to the other member of the pair ``group``; ``message``
    pairs a send with its receive. ``phase`` labels it (``F3``: forward of micro-batch 3, ``B3``,
    ``grad``).
    """

    kind: Literal["compute", "allreduce", "reducescatter", "allgather", "alltoall", "send", "recv"]
    phase: str
    seconds: float = 0.0
    group: str = ""
    bytes: int = 0
    message: str = ""

    @property
    def is_comm(self) -> bool:
        """True for an op that moves bytes over the rails."""
        return self.kind != "compute"


@dataclass(frozen=True)
class IterationTrace:
    """One iteration of every rank on one rail (module doc): ``programs[r]`` is rank r's ops in
    order; ``groups`` by id; ``stage_of[r]``, ``replica_of[r]`` its PP stage and DP replica."""

    model: TransformerSpec
    parallel: ParallelSpec
    compute: ComputeSpec
    groups: dict[str, Group]
    programs: tuple[tuple[Op, ...], ...]
    stage_of: tuple[int, ...]
    replica_of: tuple[int, ...]
    compute_s: float = 0.0
    notes: dict = field(default_factory=dict)

    @property
    def ranks(self) -> int:
        """Ranks (servers) on the rail."""
        return len(self.programs)

    def phases(self, rank: int) -> list[tuple[str, int]]:
        """Rank ``rank``'s communication phases: ``(dimension, ops)`` for each maximal run of its
        comm ops of one dimension (compute between them does not end a phase)."""
        out: list[tuple[str, int]] = []
        for op in self.programs[rank]:
            if not op.is_comm:
                continue
            d = self.groups[op.group].dim
            if out and out[-1][0] == d:
                out[-1] = (d, out[-1][1] + 1)
            else:
                out.append((d, 1))
        return out

    def all_rails(self, rails: int) -> IterationTrace:
        """The same iteration with every rail's ranks explicit: rank ``server x rails + r`` runs
        its server's program on rail ``r`` (groups ``<id>@r<r>``). The rails do not interact, so
        a replay gives the one-rail trace's times; it is ``rails`` times the work.

        :raises ValueError: ``rails`` < 1."""
        if rails < 1:
            raise ValueError(f"rails: must be >= 1, got {rails}")
        groups, programs = {}, []
        for gid, g in self.groups.items():
            for r in range(rails):
                groups[f"{gid}@r{r}"] = Group(f"{gid}@r{r}", g.dim, tuple(m * rails + r for m in g.members))
        for s, prog in enumerate(self.programs):
            for r in range(rails):
                programs.append(tuple(op if not op.group else Op(op.kind, op.phase, op.seconds, f"{op.group}@r{r}",
                                                                  op.bytes, f"{op.message}@r{r}" if op.message else "")
                                      for op in prog))
        rep = lambda xs: tuple(x for x in xs for _ in range(rails))  # noqa: E731
        return IterationTrace(self.model, self.parallel, self.compute, groups, tuple(programs), rep(self.stage_of),
                              rep(self.replica_of), self.compute_s, dict(self.notes))

    def bytes_by_dimension(self) -> dict[str, int]:
        """Bytes each rank sends per iteration summed over ranks, by dimension (sends and
        collective buffers)."""
        out: dict[str, int] = {}
        for prog in self.programs:
            for op in prog:
                if op.kind not in ("compute", "recv"):
                    d = self.groups[op.group].dim
                    out[d] = out.get(d, 0) + op.bytes
        return out


def stage_layers(layers: int, pp: int) -> list[range]:
    """Layers of each pipeline stage: an even split, earlier stages taking the remainder."""
    base, extra = divmod(layers, pp)
    out, lo = [], 0
    for s in range(pp):
        n = base + (1 if s < extra else 0)
        out.append(range(lo, lo + n))
        lo += n
    return out


def one_f_one_b(stage: int, stages: int, micro_batches: int) -> list[tuple[str, int]]:
    """Megatron-LM's 1F1B order of stage ``stage``: ``[("F", m) | ("B", m), ...]``."""
    warm = min(stages - stage - 1, micro_batches)
    order = [("F", m) for m in range(warm)]
    for i in range(micro_batches - warm):
        order += [("F", warm + i), ("B", i)]
    order += [("B", m) for m in range(micro_batches - warm, micro_batches)]
    return order


def build_trace(model: TransformerSpec, par: ParallelSpec, comp: ComputeSpec,
                tp_allreduce_s: Callable[[int], float] = lambda nbytes: 0.0) -> IterationTrace:
    """The iteration's programs (module doc).

    :param tp_allreduce_s: seconds of one TP all-reduce of ``nbytes`` bytes on the scale-up domain
        (default: free, e.g. with TP = 1).
    :raises ValueError: more stages than layers, EP on a dense model.
    """
    P, D, G, E, M = par.pp, par.dp, par.tp, par.ep, par.micro_batches
    if P > model.layers:
        raise ValueError(f"pp: {P} stages for {model.layers} layers")
    if E > 1 and not model.moe:
        raise ValueError(f"ep: {model.name} has no experts, ep must be 1, got {E}")
    e = comp.bytes_per_element
    T = par.micro_batch_size * model.seq_len
    act = T * model.hidden * e
    pp_bytes = max(1, act // G)
    a2a_bytes = max(1, T * model.top_k * model.hidden * e // G)
    tp_ar = tp_allreduce_s(act) if G > 1 else 0.0
    layers = stage_layers(model.layers, P)
    rank = lambda d, s: d + D * s  # noqa: E731 - server of replica d, stage s
    groups: dict[str, Group] = {}
    for s in range(P):
        if D > 1:
            groups[f"dp/s{s}"] = Group(f"dp/s{s}", "dp", tuple(rank(d, s) for d in range(D)))
        if E > 1:
            for k in range(D // E):
                groups[f"ep/s{s}/{k}"] = Group(f"ep/s{s}/{k}", "ep", tuple(rank(k * E + j, s) for j in range(E)))
            if D // E > 1:
                for j in range(E):
                    groups[f"edp/s{s}/{j}"] = Group(f"edp/s{s}/{j}", "edp",
                                                     tuple(rank(k * E + j, s) for k in range(D // E)))
    for d in range(D):
        for s in range(P - 1):
            groups[f"pp/d{d}/s{s}"] = Group(f"pp/d{d}/s{s}", "pp", (rank(d, s), rank(d, s + 1)))
        if P > 1 and par.clip_grad:
            groups[f"mp/d{d}"] = Group(f"mp/d{d}", "mp", tuple(rank(d, s) for s in range(P)))

    programs: list[tuple[Op, ...]] = [()] * (P * D)
    stage_of = [0] * (P * D)
    replica_of = [0] * (P * D)
    compute_total = 0.0
    for s in range(P):
        lay = layers[s]
        head = 2.0 * model.hidden * model.vocab if s == P - 1 else 0.0
        dense_params = sum(model.attention_params + model.mlp_params(i)[0] for i in lay)
        expert_params = sum(model.mlp_params(i)[1] for i in lay)
        if s == 0:
            dense_params += model.embedding_params
        if s == P - 1:
            dense_params += model.embedding_params
        for d in range(D):
            r = rank(d, s)
            stage_of[r], replica_of[r] = s, d
            ep_group = f"ep/s{s}/{d // E}" if E > 1 else ""
            prog: list[Op] = []
            busy = 0.0

            def compute(phase: str, seconds: float) -> None:
                nonlocal busy
                busy += seconds
                if prog and prog[-1].kind == "compute" and prog[-1].phase == phase:
                    prog[-1] = Op("compute", phase, seconds=prog[-1].seconds + seconds)
                else:
                    prog.append(Op("compute", phase, seconds=seconds))

            for kind, m in one_f_one_b(s, P, M):
                ph = f"{kind}{m}"
                mult = 1.0 if kind == "F" else 2.0
                seq = list(lay) if kind == "F" else list(reversed(lay))
                if kind == "F" and s > 0:
                    prog.append(Op("recv", ph, group=f"pp/d{d}/s{s - 1}", bytes=pp_bytes, message=f"act/d{d}/s{s - 1}/{m}"))
                if kind == "B" and s < P - 1:
                    prog.append(Op("recv", ph, group=f"pp/d{d}/s{s}", bytes=pp_bytes, message=f"grad/d{d}/s{s + 1}/{m}"))
                if kind == "B" and head:
                    compute(ph, mult * T * head / G / comp.flops_per_s)
                for i in seq:
                    f = mult * T * model.layer_flops(i) / G / comp.flops_per_s
                    if ep_group and model.is_moe_layer(i):
                        # attention, dispatch, experts, combine (the reverse order backward)
                        att = mult * T * (2.0 * model.attention_params + 4.0 * model.seq_len * model.hidden) / G / comp.flops_per_s
                        compute(ph, att + 2 * tp_ar)
                        prog.append(Op("alltoall", ph, group=ep_group, bytes=a2a_bytes))
                        compute(ph, f - att)
                        prog.append(Op("alltoall", ph, group=ep_group, bytes=a2a_bytes))
                    else:
                        compute(ph, f + 2 * tp_ar)
                if kind == "F" and head:
                    compute(ph, mult * T * head / G / comp.flops_per_s)
                if kind == "F" and s < P - 1:
                    prog.append(Op("send", ph, group=f"pp/d{d}/s{s}", bytes=pp_bytes, message=f"act/d{d}/s{s}/{m}"))
                if kind == "B" and s > 0:
                    prog.append(Op("send", ph, group=f"pp/d{d}/s{s - 1}", bytes=pp_bytes, message=f"grad/d{d}/s{s}/{m}"))
            dist = par.optimizer == "distributed"
            syncs = []  # (group, bytes of each bucket)
            if D > 1:
                syncs.append((f"dp/s{s}", _buckets(dense_params // G, par.bucket_params, comp.grad_bytes)))
            if E > 1 and D // E > 1 and expert_params:
                syncs.append((f"edp/s{s}/{d % E}", _buckets(expert_params // (G * E), par.bucket_params,
                                                             comp.grad_bytes)))
            for g, sizes in syncs:
                for nbytes in sizes:
                    prog.append(Op("reducescatter" if dist else "allreduce", "grad", group=g, bytes=nbytes))
            if P > 1 and par.clip_grad:  # the gradient norm over the model-parallel group
                prog.append(Op("allreduce", "norm", group=f"mp/d{d}", bytes=4))
            if dist:  # each rank updates its shard, then gathers the parameters
                for g, sizes in syncs:
                    for nbytes in sizes:
                        prog.append(Op("allgather", "params", group=g, bytes=nbytes * comp.bytes_per_element
                                       // comp.grad_bytes))
            programs[r] = tuple(prog)
            compute_total = max(compute_total, busy)
    return IterationTrace(model, par, comp, groups, tuple(programs), tuple(stage_of), tuple(replica_of),
                          compute_s=compute_total,
                          notes={"pp_bytes": pp_bytes, "alltoall_bytes": a2a_bytes, "activation_bytes": act,
                                 "tp_allreduce_s": tp_ar, "params": model.params})


def _buckets(params: int, bucket: int, grad_bytes: int) -> list[int]:
    """Byte sizes of the gradient buckets of ``params`` parameters (the last one smaller)."""
    if params <= 0:
        return []
    n = math.ceil(params / bucket)
    return [min(bucket, params - i * bucket) * grad_bytes for i in range(n)]
