"""StragglAR AllReduce on a non-blocking switch, round-synchronous, in closed form: the run of
:func:`emulation.workloads.stragglar.stragglar_allreduce` (n a power of two) that
:func:`~emulation.flowsim.simulate.simulate` would give, without building its transfers.

Why: StragglAR's phase B is n - 2 + log2 n rounds of about n transfers each, and no two rounds
move the same pairs, so the workload holds O(n^2) transfers (2 (n-1)^2: 34 billion at 131,072
GPUs, some 740 GiB as columns) and no step can reuse another's simulation. Its structure makes
that unnecessary on a non-blocking switch (:func:`~topologies.builders.eps_star`: one port per
GPU, every port on one packet switch):

- every step is a matching (each rank sends at most one transfer and receives at most one), so
  no link carries two flows and every transfer moves alone at its path's capacity: a step lasts
  ``alpha + largest transfer / B + 2 delta`` after its release, the same for any matching;
- phase A (ring ReduceScatter of the n-1 chunks among ranks 0..n-2) sends every chunk in every
  step, so each of its n-2 steps lasts the time of the largest chunk; rank g sends every chunk
  but chunk g to rank g+1 (mod n-1);
- round r of phase B moves exactly the chunks ``max(0, r - L) .. min(r, n - 2)`` (L = log2 n;
  the pipelined-doubling construction of :mod:`emulation.workloads.stragglar`); the straggler
  sends chunk r in round r <= n - 2 and chunk n - 2 in each of the last L - 1 rounds; every rank
  receives each chunk once (s bytes).

A late rank delays only the transfers it sends (round-synchronous semantics): a step released
before every sender has arrived is simulated exactly from its transfers (phase A) or from the
straggler's transfer beside the largest one (phase B). Every step's time comes from the same
:class:`~emulation.flowsim.steps.StepSimulator` the full engine uses, on one or two
representative transfers, so the times are the full engine's, bit for bit (tests: every power
of two from 4 to 4,096 against :func:`~emulation.flowsim.simulate.simulate`).

What is not derived: which rank sends which chunk in phase B, so the uplinks of ranks 0..n-2
are left out of ``link_bytes`` (``links_omitted`` counts them); every downlink and the
straggler's uplink are listed, exact.

Spec: StragglAR (arXiv 2505.23523); ``docs/flow-backend.md`` (at cluster scale).
"""

from __future__ import annotations

import numpy as np

from emulation.bulk import gc_paused
from emulation.fabric import Fabric
from emulation.flowsim.links import LinkSpace, SimulationError
from emulation.flowsim.steps import StepOutcome, StepSimulator
from emulation.results import RunResult, StepResult
from emulation.workloads.stragglar import lower_bound_rounds


def closed_form_refusal(fabric: Fabric, semantics: str = "round-synchronous", planner: str = "none") -> str | None:
    """Why the closed form does not apply to StragglAR on every GPU of ``fabric`` (one line), or
    None: it applies to a power of two >= 4 ranks, round-synchronous, planner ``none``, on a
    fabric of one packet switch holding every GPU's one port and nothing else."""
    ranks = fabric.gpus
    if ranks < 4 or ranks & (ranks - 1):
        return f"{ranks} ranks: the closed form needs a power of two >= 4"
    if semantics != "round-synchronous":
        return f"semantics {semantics}: the closed form is round-synchronous"
    if planner != "none":
        return f"planner {planner}: the closed form runs the fabric as built (planner none)"
    if fabric.ports_per_gpu != 1 or fabric.ocs or fabric.cables or len(fabric.eps) != 1 \
            or len(fabric.eps[0].ports) != ranks:
        return f"fabric {fabric.name}: the closed form needs one packet switch holding every GPU's only port"
    return None


class _Steps:
    """The step outcomes of the closed form, from :class:`StepSimulator` on representative
    transfers (module doc); outcomes of equal content are kept."""

    def __init__(self, fabric: Fabric, alpha_s: float, delta_s: float):
        self.space = LinkSpace(fabric)
        self.sim = StepSimulator(self.space, alpha_s, delta_s)
        self.exact = StepSimulator(self.space, alpha_s, delta_s, reuse=False)  # steps with late senders
        self.config = fabric.initial
        self.one = (np.array([0]), np.array([1]))
        self.two = (np.array([fabric.gpus - 1, 0]), np.array([1, 2]))  # straggler -> 1 beside 0 -> 2
        self._done: dict[tuple, StepOutcome] = {}

    def largest(self, nbytes: int) -> StepOutcome:
        """A matching step whose largest transfer is ``nbytes`` bytes, every rank arrived."""
        got = self._done.get((nbytes,))
        if got is None:
            got = self._done[(nbytes,)] = self.sim.run(self.config, *self.one, np.array([nbytes]))
        return got

    def late_straggler(self, straggler_bytes: int, nbytes: int, late_s: float) -> StepOutcome:
        """A matching step in which the straggler sends ``straggler_bytes`` ``late_s`` seconds
        after the release, beside a largest transfer of ``nbytes`` released at once."""
        return self.exact.run(self.config, *self.two, np.array([straggler_bytes, nbytes]), np.array([late_s, 0.0]))


def simulate_stragglar_switch(fabric: Fabric, nbytes: int, *, alpha_s: float = 0.0, delta_s: float = 0.0,
                              arrivals_s: np.ndarray | list[float] | None = None, straggler: int | None = None,
                              name: str | None = None) -> RunResult:
    """StragglAR AllReduce of ``nbytes`` bytes per rank on the non-blocking switch ``fabric``,
    round-synchronous, planner ``none``, in closed form (module doc): the :class:`RunResult`
    :func:`~emulation.flowsim.simulate.simulate` gives for ``stragglar_allreduce(n, nbytes)``
    (relabelled by :func:`~emulation.workloads.stragglar.with_straggler` for another
    ``straggler``), times in seconds, with no per-transfer records and the uplinks of every rank
    but the straggler left out of ``link_bytes``. O(n + steps) time and memory.

    :param alpha_s: per-transfer latency alpha, s. :param delta_s: per-hop delay delta, s.
    :param arrivals_s: (n,) when each rank arrives, s (default: all at 0).
    :param straggler: the straggler's rank (default n-1).
    :raises SimulationError: the closed form does not apply (:func:`closed_form_refusal`), bad
        arrivals, a straggler out of range, or nbytes < 1.
    """
    n = fabric.gpus
    why = closed_form_refusal(fabric)
    if why:
        raise SimulationError(why)
    if nbytes < 1:
        raise SimulationError(f"bytes must be at least 1, got {nbytes}")
    arr = np.zeros(n) if arrivals_s is None else np.asarray(arrivals_s, dtype=float)
    if arr.shape != (n,) or (arr < 0).any():
        raise SimulationError(f"arrivals_s must be {n} non-negative times")
    s = n - 1 if straggler is None else straggler
    if not 0 <= s < n:
        raise SimulationError(f"straggler: rank {s} is not a rank of {n}")
    perm = np.arange(n)
    perm[[s, n - 1]] = perm[[n - 1, s]]  # canonical rank (straggler n-1) <-> this fabric's GPU
    with gc_paused():
        return _run(fabric, n, int(nbytes), alpha_s, delta_s, arr[perm], perm, name or "stragglar")


def _run(fabric: Fabric, n: int, s: int, alpha_s: float, delta_s: float, arr: np.ndarray, perm: np.ndarray,
         name: str) -> RunResult:
    k, levels, strag = n - 1, n.bit_length() - 1, n - 1
    chunk = np.arange(k, dtype=np.int64)
    sizes = s * (chunk + 1) // k - s * chunk // k  # Workload.chunk_bytes
    steps_out = _Steps(fabric, alpha_s, delta_s)
    records: list[StepResult] = []
    delivered, prev_end = 0.0, 0.0
    biggest = int(sizes.max())
    last_a = float(arr[:k].max())

    def record(phase: str, release: float, out: StepOutcome) -> float:
        end = release + out.end
        records.append(StepResult.model_construct(
            index=len(records), phase=phase, start_s=release, end_s=end, action="keep", reconfiguration_delay_s=None,
            dark_window_measured_s=None, max_link_bytes=out.max_link_bytes, retransmissions=None, drops=None,
            timing=None, stalls=None))
        return end

    # phase A: ring ReduceScatter among ranks 0..n-2; step t sends chunk (o + g) mod k from g
    src = np.arange(k, dtype=np.int64)
    dst = (src + 1) % k
    for t in range(k - 1):
        release = prev_end
        if release < last_a and (late := np.maximum(arr[src] - release, 0.0)).any():
            o = (k - t - 1) % k
            out = steps_out.exact.run(steps_out.config, src, dst, sizes[(o + src) % k], late)
        else:
            out = steps_out.largest(biggest)
        delivered += s  # every chunk once
        prev_end = record("A", release, out)
    # phase B: round r moves chunks max(0, r - L) .. min(r, n - 2); the straggler sends one of them
    for r in range(lower_bound_rounds(n)):
        release = prev_end
        lo, hi = max(0, r - levels), min(r, n - 2)
        top = int(sizes[lo:hi + 1].max())
        late = arr[strag] - release
        out = steps_out.late_straggler(int(sizes[hi]), top, late) if late > 0 else steps_out.largest(top)
        prev_end = record("B", release, out)
    delivered += n * s  # phase B: every rank receives every chunk once
    return _result(fabric, steps_out.space, n, s, sizes, levels, records, name, delivered, perm)


def _result(fabric: Fabric, space: LinkSpace, n: int, s: int, sizes: np.ndarray, levels: int,
            records: list[StepResult], name: str, delivered: float, perm: np.ndarray) -> RunResult:
    """The run's record: every downlink (phase A's chunks received plus s in phase B) and the
    straggler's uplink (its exchanges and its L - 1 copies of chunk n - 2); canonical rank c is
    GPU ``perm[c]`` (an involution)."""
    k = n - 1
    space.routes(fabric.initial)  # every link of the switch numbered, as the full engine numbers them
    rows = space.rows
    down = np.full(n, float(s))
    down[(np.arange(k) + 1) % k] += s - sizes  # rank g+1 receives every chunk but g in phase A
    down = down[perm]
    strag_up = float(s + (levels - 1) * int(sizes[n - 2]))
    links = []
    for (u, up, v, vp) in rows.tolist():
        if v < n:
            links.append([float(u), float(up), float(v), float(vp), float(down[v])])
        elif u == perm[n - 1]:
            links.append([float(u), float(up), float(v), float(vp), strag_up])
    return RunResult.model_construct(
        name=name, collective="allreduce", algorithm="stragglar", planner="none", ranks=n, bytes=s, backend="flow",
        time_s=max((r.end_s for r in records), default=0.0), steps=records, transfers=[],
        bytes_sent=(2 * n - 2) * s, bytes_delivered=round(delivered), semantics="round-synchronous",
        transfers_omitted=2 * k * k, link_bytes=links, links_omitted=k, checks=None, predicted_s=None, iteration=0,
        straggler_delay_s=0.0, slots=None, padding_bytes=0, drops={})
