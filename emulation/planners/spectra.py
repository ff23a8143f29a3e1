"""Scheduling one demand matrix over s parallel OCSes: Spectra, its baseline and a lower bound.

Spectra (Liang, Qiao, Keslassy, Lin, "Scheduling Parallel Optical Circuit Switches for AI
Training", arXiv 2603.07373) schedules a demand matrix D over s parallel OCSes with
reconfiguration delay delta in three steps: *decompose* D into few weighted permutations,
*schedule* them across the switches by load, *equalize* the switches' loads by splitting
permutations. Only the paper's abstract and the opening of its introduction could be read here;
every exact rule below is this module's design, written down (``docs/papers/spectra.md``).

**Model.** n GPUs, s OCSes, every GPU with one port of rate B (bytes/s) on each. Each OCS holds a
sequence of configurations; each costs a dark window of delta (s) and is then held for its
duration. A GPU pair's bytes move at B on every OCS whose current circuit joins it. The output is
a :class:`emulation.schedule.ParallelSchedule`; its makespan is ``max_k sum(delta + duration)``.

**Circuits** (``circuits=``). ``directed``: the paper's permutations, a configuration connects
GPU i's transmitter to GPU pi(i)'s receiver (each GPU sends to one and receives from one per
OCS), and serves D. ``duplex`` (default): the OCS of this emulator joins two ports both ways (a
circuit {i, j}; TCP needs its ACKs back), so a configuration is a *matching* and a circuit held
t seconds carries t B each way; it serves S = max(D, D^T). Spectra's permutations become
matchings as in :func:`emulation.planners.bvn.bidirectional_decompose`: the permutations of S,
each cycle split into matchings (an even cycle into 2 of w/2, an odd cycle of length L into L of
w/(L-1)). Both kinds travel in the neutral form as directed pairs (a duplex circuit as both
directions).

**Step 1, decompose** (:func:`decompose`). Three candidates, between fewest bytes and fewest
configurations: ``bvn``, the bottleneck Birkhoff-von Neumann decomposition of the stuffed matrix
(:func:`emulation.planners.bvn.bvn_decompose`; total weight = the busiest line, the fewest bytes,
but up to n^2 terms); ``colouring``, the classes of an edge colouring of D's support, each held
for its heaviest demand (directed: exactly N permutations by König's theorem, N the largest
number of nonzeros in a row or column, the fewest any decomposition can have; duplex: a greedy
colouring, at most 2N - 1 matchings); ``cyclic``, n - 1 configurations (directed: the shifts
i -> i + k mod n; duplex: the round-robin matchings of K_n), each held for its largest demand.
Circuits that carry no demand are dropped, a configuration left with none is dropped, so are
terms under 1e-6 of the heaviest (decomposition leftovers, which would cost a dark window each),
and every pair's shortfall (those terms' bytes, the decomposition's tolerance) is added to the
heaviest term holding the pair (to a new one-circuit term if none does). The planner runs steps
2-3 on every candidate and keeps the shortest schedule (the choice follows delta: ``bvn`` when
dark windows are cheap, ``colouring`` or ``cyclic`` when they are not).

**Step 2, schedule** (:func:`assign`): longest processing time first: terms in decreasing
weight, each onto the OCS with the least load ``sum(delta + w / B)``.

**Step 3, equalize** (:func:`equalize`): while the most loaded OCS a and the least loaded b
differ by more than delta (gap g), move load from a to b by the best of, for each slot of a:
moving it whole (a sheds delta + d, b gains delta + d); splitting it, x = min(d, (g - delta)/2)
to b (b pays a new delta, so both end at (L_a + L_b + delta)/2); or, where b already holds the
same configuration, adding x = min(d, g/2) to b's slot (no new delta). The move that lowers
max(L_a, L_b) most is applied; ties go to whole moves. It stops when no move lowers it.

**Trim.** The fluid completion time of D under a schedule (:func:`completion_s`: each pair's
bytes served in time order by every OCS holding its circuit) can be earlier than the makespan
(stuffing's dummy circuit time, split pieces held at once on two OCSes); :func:`trim` cuts every
OCS's sequence there. Spectra and the baseline return trimmed schedules, so a schedule's makespan
is when its last byte arrives (the flow backend reproduces it, :mod:`emulation.flowsim.parallel_ocs`).

**Baseline** (:func:`baseline`): one single-switch decomposition (the same three candidates,
the one whose baseline schedule is shorter) spread over the switches: every OCS holds every term
for w / (s B), all in lockstep, as if the s OCSes were one OCS of rate s B. Makespan
``K delta + W / (s B)`` before trimming, K terms of total weight W. (The paper's baseline is
built from state-of-the-art decompositions; its exact definition was not readable here.)

**Lower bound** (:func:`lower_bound`). Any valid schedule of makespan M; OCS k holds m_k
configurations and circuits for U_k seconds in total, so ``delta m_k + U_k <= M`` (1). Let the
*lines* be the rows and columns of D (duplex: the rows of S), rho the largest line sum / B
(seconds) and N the largest number of nonzero entries in a line.

- A configuration gives a line at most one circuit, so a line with N nonzeros appears in at
  least N configurations: ``m = sum_k m_k >= N`` (2).
- A line's bytes cross its port only while one of its circuits is up, at most U_k on OCS k:
  ``rho <= sum over used OCSes of U_k <= u M - delta m`` by (1), u <= min(s, m) the OCSes used.
  If m >= s: ``M >= (rho + delta m) / s >= (rho + delta max(N, s)) / s`` by (2). If m < s:
  ``M >= rho / m + delta > rho / s + delta``, the same expression (then N <= m < s).
- The OCS with the most configurations holds at least ceil(m / s) >= ceil(N / s): ``M >= delta
  ceil(N / s)``.

Hence ``LB = max((rho + delta max(N, s)) / s, delta ceil(N / s))`` (0 for D = 0). It holds for
every schedule, split or not, trimmed or not (the checker's tests assert makespan >= LB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.optimize import linear_sum_assignment

from emulation.planners.bvn import bidirectional_decompose, bvn_decompose, stuff, weighted_round_robin
from emulation.schedule import OcsSequence, ParallelPlan, ParallelSchedule
from emulation.units import bytes_per_s
from emulation.workloads.model import Workload

Circuits = Literal["duplex", "directed"]
#: Step 1's candidate decompositions (module doc), tried in this order.
METHODS = ("bvn", "colouring", "cyclic")
#: Relative tolerance of the coverage check and of equalize's progress.
TOLERANCE = 1e-9
#: Terms lighter than this fraction of the heaviest are dropped (their bytes go to the heaviest
#: term holding each pair): a decomposition's leftovers would otherwise cost a dark window each.
TINY_TERM = 1e-6
#: Floating-point margin, relative: every term is held this fraction of the heaviest term longer,
#: and :func:`trim` cuts this fraction of the completion time after it, so that the rounding of
#: the OCS clocks (about 1e-7 bytes per slot edge at 50 GB/s) never leaves a pair short.
CLOCK_MARGIN = 1e-9
#: Bytes under which a pair counts as served (the flow backend's residue, :data:`emulation.flowsim.engine.RESIDUE_BYTES`).
RESIDUE_BYTES = 1e-6


class SpectraError(ValueError):
    """Bad input to the planner (the message starts with the field's name)."""


class ParallelScheduleError(ValueError):
    """A schedule that does not serve its demand matrix or holds an impossible configuration."""


@dataclass(frozen=True)
class Term:
    """One configuration held for ``weight`` bytes of circuit (``weight / B`` seconds):
    ``pairs`` are directed ``(src, dst)`` circuits (a partial permutation) or, duplex, GPU
    pairs ``(a, b)`` with ``a < b`` (a matching)."""

    weight: float
    pairs: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Planned:
    """A planner's answer: the ``schedule`` (seconds), which decomposition it used
    (``decomposition``: one of :data:`METHODS`), its ``terms`` before steps 2-3 and the
    configurations that equalize split (``splits``)."""

    schedule: ParallelSchedule
    decomposition: str
    terms: int
    splits: int = 0

    @property
    def makespan_s(self) -> float:
        """The schedule's makespan, seconds."""
        return self.schedule.makespan_s


def _validate(d, switches: int, rate: float, delta: float, circuits: str) -> np.ndarray:
    m = np.asarray(d, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        raise SpectraError(f"demand: must be a square matrix of at least 2 x 2, got shape {m.shape}")
    if not np.isfinite(m).all() or (m < 0).any():
        raise SpectraError("demand: must be finite and non-negative (bytes)")
    if np.any(np.diag(m) != 0):
        raise SpectraError("demand: the diagonal must be zero (a GPU sends nothing to itself over the fabric)")
    if not isinstance(switches, (int, np.integer)) or switches < 1:
        raise SpectraError(f"switches: must be an integer >= 1, got {switches!r}")
    if not (np.isfinite(rate) and rate > 0):
        raise SpectraError(f"rate: the port rate must be positive (bytes/s), got {rate!r}")
    if not (np.isfinite(delta) and delta >= 0):
        raise SpectraError(f"delta: the reconfiguration delay must be >= 0 (s), got {delta!r}")
    if circuits not in ("duplex", "directed"):
        raise SpectraError(f"circuits: 'duplex' or 'directed', got {circuits!r}")
    return m


def served_matrix(d: np.ndarray, circuits: Circuits) -> np.ndarray:
    """The matrix the circuits must cover, bytes: D (directed) or S = max(D, D^T) (duplex: one
    circuit serves both directions). (n, n), zero diagonal."""
    d = np.asarray(d, dtype=float)
    return d.copy() if circuits == "directed" else np.maximum(d, d.T)


def lower_bound(d, switches: int, rate: float, delta: float, circuits: Circuits = "duplex") -> float:
    """The makespan no schedule of ``d`` on ``switches`` parallel OCSes can beat (module doc):
    ``max((rho + delta max(N, s)) / s, delta ceil(N / s))``, seconds.

    :param d: (n, n) demand, bytes, zero diagonal. :param rate: port rate B, bytes/s.
    :param delta: reconfiguration delay, seconds.
    :raises SpectraError: bad input (the message names the field).
    """
    m = served_matrix(_validate(d, switches, rate, delta, circuits), circuits)
    if not m.any():
        return 0.0
    lines = [m, m.T] if circuits == "directed" else [m]
    rho = max(float(x.sum(axis=1).max()) for x in lines) / rate
    nnz = max(int((x > 0).sum(axis=1).max()) for x in lines)
    return max((rho + delta * max(nnz, switches)) / switches, delta * math.ceil(nnz / switches))


def _real(pairs, m: np.ndarray, circuits: Circuits) -> tuple[tuple[int, int], ...]:
    """The circuits of ``pairs`` that carry demand of ``m`` (stuffing's dummy circuits dropped)."""
    if circuits == "directed":
        return tuple((int(i), int(j)) for i, j in pairs if i != j and m[i, j] > 0)
    return tuple(sorted((min(int(a), int(b)), max(int(a), int(b))) for a, b in pairs if m[a, b] > 0))


def _colouring(s: np.ndarray, circuits: Circuits) -> list[tuple[float, tuple]]:
    """The fewest configurations (module doc): classes of an edge colouring of the demand's
    support, each held for its heaviest demand. Directed: König's theorem, N classes: the 0/1
    support stuffed to N-regular (:func:`emulation.planners.bvn.stuff` keeps it integral), then N
    perfect matchings peeled off, each the one of most remaining demand (removing a perfect
    matching from a k-regular bipartite multigraph leaves a (k-1)-regular one, so the next
    exists). Duplex: greedy colouring of the support graph, heaviest edge first, each edge the
    lowest colour free at both ends (at most 2N - 1 classes)."""
    n = s.shape[0]
    support = s > 0
    if not support.any():
        return []
    if circuits == "directed":
        rest = np.rint(stuff(support.astype(float)))
        weight = np.where(support, s, 0.0)
        big = float(weight.sum()) + 1.0
        out = []
        while rest.max() > 0.5:
            rows, cols = linear_sum_assignment(np.where(rest > 0.5, -weight, big * 10))
            if (rest[rows, cols] < 0.5).any():  # cannot happen for a regular bipartite multigraph
                raise ParallelScheduleError("colouring: the stuffed support has no perfect matching")
            rest[rows, cols] -= 1
            pairs = tuple((int(i), int(j)) for i, j in zip(rows, cols) if support[i, j])
            weight[rows, cols] = 0.0
            if pairs:
                out.append((max(float(s[i, j]) for i, j in pairs), pairs))
        return out
    edges = sorted(((float(s[i, j]), i, j) for i in range(n) for j in range(i + 1, n) if support[i, j]),
                   key=lambda e: (-e[0], e[1], e[2]))
    used: list[set[int]] = []  # colour -> GPUs it already joins
    classes: list[list[tuple[float, int, int]]] = []
    for w, i, j in edges:
        c = next((c for c, busy in enumerate(used) if i not in busy and j not in busy), len(used))
        if c == len(used):
            used.append(set())
            classes.append([])
        used[c] |= {i, j}
        classes[c].append((w, i, j))
    return [(max(w for w, _, _ in cl), tuple((i, j) for _, i, j in cl)) for cl in classes]


def decompose(d, circuits: Circuits = "duplex", method: Literal["bvn", "colouring", "cyclic"] = "bvn") -> list[Term]:
    """Step 1 (module doc): ``bvn`` (the bottleneck Birkhoff-von Neumann decomposition of the
    stuffed matrix; duplex: of S, cycles split into matchings), ``colouring`` (the classes of an
    edge colouring of the support, each held for its heaviest demand) or ``cyclic`` (n - 1
    configurations each held for its largest demand); terms in decreasing weight, circuits
    without demand dropped.

    :param d: (n, n) demand, bytes, zero diagonal. :returns: terms whose circuit time covers
        :func:`served_matrix` exactly (plus :data:`CLOCK_MARGIN`).
    :raises SpectraError: bad input.
    """
    m = _validate(d, 1, 1.0, 0.0, circuits)
    n = m.shape[0]
    s = served_matrix(m, circuits)
    raw: list[tuple[float, tuple]] = []
    if method == "bvn":
        if circuits == "directed":
            raw = [(t.weight, t.pairs()) for t in bvn_decompose(m)]
        else:
            raw = [(w.weight, w.pairs) for w in bidirectional_decompose(m)]
    elif method == "colouring":
        raw = _colouring(s, circuits)
    elif method == "cyclic":
        if circuits == "directed":
            for k in range(1, n):
                pairs = tuple((i, (i + k) % n) for i in range(n))
                raw.append((max(float(s[i, j]) for i, j in pairs), pairs))
        else:
            raw = [(w.weight, w.pairs) for w in weighted_round_robin(m)]
    else:
        raise SpectraError(f"method: one of {', '.join(METHODS)}, got {method!r}")
    out: dict[tuple, float] = {}
    floor = TINY_TERM * max((w for w, _ in raw), default=0.0)
    for w, pairs in raw:
        real = _real(pairs, s, circuits)
        if real and w > floor:
            out[real] = out.get(real, 0.0) + w  # the same configuration twice: one longer term
    # The decomposition stops at a relative tolerance (a few bytes in 1e9): the heaviest term
    # holding a short pair is lengthened by its shortfall, so that coverage is exact.
    held = np.zeros((n, n))
    for pairs, w in out.items():
        for a, b in pairs:
            held[a, b] += w
    if circuits == "duplex":
        held = held + held.T
    for i, j in zip(*np.nonzero(s > held)):
        if circuits == "duplex" and i > j:
            continue
        key = (int(i), int(j))
        holders = [p for p in out if key in p]
        short = float(s[i, j] - held[i, j])
        if holders:
            out[max(holders, key=lambda p: out[p])] += short
        else:
            out[(key,)] = out.get((key,), 0.0) + short
    pad = CLOCK_MARGIN * max(out.values(), default=0.0)
    return sorted((Term(w + pad, p) for p, w in out.items()), key=lambda t: (-t.weight, t.pairs))


def assign(terms: list[Term], switches: int, rate: float, delta: float) -> list[list[list]]:
    """Step 2 (module doc): longest processing time first. :returns: per OCS, its slots as
    ``[pairs, seconds]`` lists in the order assigned."""
    out: list[list[list]] = [[] for _ in range(switches)]
    load = [0.0] * switches
    for t in sorted(terms, key=lambda t: -t.weight):
        k = min(range(switches), key=lambda i: (load[i], i))
        out[k].append([t.pairs, t.weight / rate])
        load[k] += delta + t.weight / rate
    return out


def equalize(slots: list[list[list]], delta: float) -> int:
    """Step 3 (module doc), in place on :func:`assign`'s per-OCS slots. :returns: the
    configurations the splits added."""
    s = len(slots)
    if s < 2:
        return 0

    def load(k: int) -> float:
        return sum(delta + d for _, d in slots[k])

    splits = 0
    total = sum(load(k) for k in range(s))
    eps = TOLERANCE * max(total, 1e-30)
    for _ in range(50 * (s + sum(map(len, slots))) + 100):
        loads = [load(k) for k in range(s)]
        a = max(range(s), key=lambda k: (loads[k], -k))
        b = min(range(s), key=lambda k: (loads[k], k))
        la, lb = loads[a], loads[b]
        gap = la - lb
        if gap <= eps:
            break
        held_b = {tuple(p): i for i, (p, _) in enumerate(slots[b])}
        best = None  # (new pair max, whole-first rank, slot index, kind, x)
        for i, (pairs, d) in enumerate(slots[a]):
            opts = []
            if tuple(pairs) in held_b:
                x = min(d, gap / 2)
                whole = x >= d * (1 - TOLERANCE)
                opts.append((max(la - x - (delta if whole else 0.0), lb + x), 0 if whole else 1, i, "merge", x))
            else:
                opts.append((max(la - delta - d, lb + delta + d), 0, i, "move", d))
                x = (gap - delta) / 2
                if 0 < x < d:
                    opts.append((max(la - x, lb + delta + x), 1, i, "split", x))
            for o in opts:
                if best is None or o[:2] < best[:2]:
                    best = o
        if best is None or best[0] >= la - eps:
            break
        _, _, i, kind, x = best
        pairs, d = slots[a][i]
        if kind == "merge":
            j = held_b[tuple(pairs)]
            slots[b][j][1] += x
            if x >= d * (1 - TOLERANCE):
                del slots[a][i]
            else:
                slots[a][i][1] = d - x
        elif kind == "move":
            slots[b].append(slots[a].pop(i))
        else:
            slots[a][i][1] = d - x
            slots[b].append([pairs, x])
            splits += 1
    return splits


def _neutral(slots: list[list[list]], delta: float, circuits: Circuits) -> ParallelSchedule:
    seqs = []
    for sw in slots:
        configs = []
        for pairs, _ in sw:
            if circuits == "duplex":
                configs.append(tuple(q for a, b in pairs for q in ((a, b), (b, a))))
            else:
                configs.append(tuple(pairs))
        seqs.append(OcsSequence(tuple(configs), tuple(float(d) for _, d in sw)))
    return ParallelSchedule(tuple(seqs), delta)


def completion_s(schedule: ParallelSchedule, d, rate: float) -> float:
    """When the last byte of ``d`` arrives under ``schedule``, seconds: every directed pair (i, j)
    moves its ``d[i, j]`` bytes at B on every OCS whose current configuration holds (i, j),
    earliest first (what the flow backend does). ``inf`` if some demand is never served.

    :param d: (n, n) demand, bytes. :param rate: port rate B, bytes/s.
    """
    d = np.asarray(d, dtype=float)
    events: dict[tuple[int, int], list[tuple[float, int]]] = {}
    for k, seq in enumerate(schedule.ocs):
        for t_on, t_off, i in schedule.windows(k):
            for p in seq.configs[i]:
                ev = events.setdefault(p, [])
                ev += [(t_on, 1), (t_off, -1)]
    worst = 0.0
    for i, j in zip(*np.nonzero(d > 0)):
        need = (float(d[i, j]) - RESIDUE_BYTES) / rate
        ev = sorted(events.get((int(i), int(j)), []))
        got, mult, t_prev, done = 0.0, 0, 0.0, math.inf
        for t, step in ev:
            if mult and got + mult * (t - t_prev) >= need:
                done = t_prev + max(0.0, need - got) / mult
                break
            got += mult * (t - t_prev)
            mult += step
            t_prev = t
        worst = max(worst, done)
        if math.isinf(worst):
            return worst
    return worst


def trim(schedule: ParallelSchedule, d, rate: float) -> ParallelSchedule:
    """``schedule`` cut at :func:`completion_s` (plus :data:`CLOCK_MARGIN` of it): slots that
    would start later are dropped, the ones running then are shortened. Its makespan is then
    the completion time (within that margin).

    :raises ParallelScheduleError: the schedule never serves some demand of ``d``.
    """
    t_end = completion_s(schedule, d, rate)
    if math.isinf(t_end):
        raise ParallelScheduleError("the schedule never completes the demand (a pair without enough circuit time)")
    seqs = []
    t_cut = t_end * (1 + CLOCK_MARGIN)
    for k, seq in enumerate(schedule.ocs):
        configs, slots = [], []
        for t_on, t_off, i in schedule.windows(k):
            if t_on >= t_end:
                break
            held = min(t_off, t_cut) - t_on
            if held > 0:
                configs.append(seq.configs[i])
                slots.append(held)
        seqs.append(OcsSequence(tuple(configs), tuple(slots)))
    return ParallelSchedule(tuple(seqs), schedule.reconfiguration_delay_s)


def check_schedule(schedule: ParallelSchedule, d, switches: int, rate: float, delta: float,
          circuits: Circuits = "duplex") -> float:
    """Verify that ``schedule`` is a valid schedule of ``d`` (module doc): ``switches`` OCSes,
    dark windows of ``delta``; every slot a partial permutation (each GPU sends at most once and
    receives at most once; duplex: also symmetric, i.e. a matching); and every (i, j) gets at
    least ``d[i, j]`` bytes of circuit time over all OCSes (duplex: the circuit {i, j}, at least
    ``max(d[i, j], d[j, i])``).

    :returns: the smallest coverage slack, ``min (held - needed) / max(needed)`` (>= 0 within
        rounding). :raises ParallelScheduleError: the first violation, in one line.
        :raises SpectraError: bad input.
    """
    m = _validate(d, switches, rate, delta, circuits)
    n = m.shape[0]
    if len(schedule.ocs) != switches:
        raise ParallelScheduleError(f"the schedule has {len(schedule.ocs)} OCS(es), not {switches}")
    if not math.isclose(schedule.reconfiguration_delay_s, delta, rel_tol=TOLERANCE, abs_tol=1e-15):
        raise ParallelScheduleError(f"the schedule's dark window is {schedule.reconfiguration_delay_s} s, not {delta} s")
    held = np.zeros((n, n))
    for k, seq in enumerate(schedule.ocs):
        for c, (pairs, dur) in enumerate(zip(seq.configs, seq.slots_s)):
            where = f"OCS {k} slot {c}"
            if dur <= 0:
                raise ParallelScheduleError(f"{where}: duration {dur} s is not positive")
            src = [a for a, _ in pairs]
            dst = [b for _, b in pairs]
            if any(not (0 <= a < n and 0 <= b < n) or a == b for a, b in pairs):
                raise ParallelScheduleError(f"{where}: a circuit that is not a pair of {n} GPUs")
            if len(set(src)) != len(src) or len(set(dst)) != len(dst):
                raise ParallelScheduleError(f"{where}: not a permutation (a GPU sends or receives on two circuits)")
            if circuits == "duplex" and set(pairs) != {(b, a) for a, b in pairs}:
                raise ParallelScheduleError(f"{where}: not a matching of duplex circuits (a circuit one way only)")
            for a, b in pairs:
                held[a, b] += dur * rate
    need = served_matrix(m, circuits)
    scale = need.max()
    if scale <= 0:
        return 0.0
    gap = (held - need)[need > 0]
    slack = float(gap.min() / scale)
    if slack < -TOLERANCE:
        i, j = (int(x) for x in np.argwhere((held - need) == gap.min())[0])
        raise ParallelScheduleError(f"pair {i}->{j}: {held[i, j]:.6g} bytes of circuit time for {need[i, j]:.6g} bytes of demand")
    return slack


def _plan(m: np.ndarray, terms: list[Term], switches: int, rate: float, delta: float, circuits: Circuits,
          equalized: bool) -> tuple[ParallelSchedule, int]:
    slots = assign(terms, switches, rate, delta)
    splits = equalize(slots, delta) if equalized else 0
    return trim(_neutral(slots, delta, circuits), m, rate), splits


def spectra(d, switches: int, rate: float, delta: float, circuits: Circuits = "duplex",
            equalized: bool = True) -> Planned:
    """Spectra's schedule of ``d`` on ``switches`` parallel OCSes (module doc: decompose,
    schedule by load, equalize by splitting; every decomposition of :data:`METHODS` tried, the
    shortest schedule kept; trimmed).

    :param d: (n, n) demand, bytes, zero diagonal. :param rate: port rate B, bytes/s.
    :param delta: reconfiguration delay, seconds. :param equalized: False skips step 3 (an
        ablation).
    :returns: :class:`Planned`; its schedule passes :func:`check_schedule`.
    :raises SpectraError: bad input.
    """
    m = _validate(d, switches, rate, delta, circuits)
    best = None
    for method in METHODS:
        terms = decompose(m, circuits, method)
        sched, splits = _plan(m, terms, switches, rate, delta, circuits, equalized)
        cand = Planned(sched, method, len(terms), splits)
        if best is None or cand.makespan_s < best.makespan_s * (1 - TOLERANCE):
            best = cand
    return best


def baseline(d, switches: int, rate: float, delta: float, circuits: Circuits = "duplex") -> Planned:
    """The baseline (module doc): one single-switch decomposition (of :data:`METHODS`, the one
    whose lockstep schedule is shortest) with every term held on every OCS for
    ``weight / (s B)``, all OCSes in lockstep; trimmed.

    :param d: (n, n) demand, bytes, zero diagonal. :param rate: port rate B, bytes/s.
    :param delta: reconfiguration delay, seconds. :returns: :class:`Planned`.
    :raises SpectraError: bad input.
    """
    m = _validate(d, switches, rate, delta, circuits)
    best = None
    for method in METHODS:
        terms = decompose(m, circuits, method)
        slots = [[[t.pairs, t.weight / (switches * rate)] for t in terms] for _ in range(switches)]
        cand = Planned(trim(_neutral(slots, delta, circuits), m, rate), method, len(terms))
        if best is None or cand.makespan_s < best.makespan_s * (1 - TOLERANCE):
            best = cand
    return best


#: The scenario's ``schedule`` names of the two planners, and the plan's ``planner``.
SCHEDULES = {"spectra": "parallel-spectra", "spectra-baseline": "parallel-baseline"}


def plan_parallel(schedule: str, fabric, workload: Workload, guard_s: float = 0.0) -> ParallelPlan:
    """A scenario run's plan on parallel OCSes: every step of ``workload`` a demand matrix
    (:meth:`emulation.workloads.model.Step.demand`) scheduled by :func:`spectra` (``schedule`` ``spectra``) or
    :func:`baseline` (``spectra-baseline``) on the fabric's s OCSes with duplex circuits, delta =
    the OCSes' R and B = the fabric's port rate; every slot then lengthened by ``guard_s``
    (seconds; the packet backend's slack, :func:`emulation.emulator.parallel_ocs.packet_guard_s`).
    Steps run one after the other.

    :param fabric: a :class:`~emulation.fabric.Fabric` of :func:`topologies.builders.parallel_ocs`
        (one port of every GPU on each OCS).
    :raises SpectraError: an unknown ``schedule``, a fabric that is not parallel OCSes, a step
        that moves no bytes between two GPUs, ``guard_s`` < 0.
    """
    if schedule not in SCHEDULES:
        raise SpectraError(f"schedule: unknown {schedule!r} (known: {', '.join(SCHEDULES)})")
    if guard_s < 0:
        raise SpectraError(f"guard_s: must be >= 0, got {guard_s}")
    if not fabric.port_per_ocs or not fabric.ocs:
        raise SpectraError(f"fabric: a {schedule} schedule needs parallel OCSes, one port of every GPU on each "
                           f"(topology parallel-ocs), not {fabric.name}")
    s, rate = len(fabric.ocs), bytes_per_s(fabric.port_gbps)
    delta = max(o.reconfiguration_delay_s for o in fabric.ocs)
    plan = spectra if schedule == "spectra" else baseline
    scheds, methods, bounds = [], [], []
    for i, st in enumerate(workload.steps):
        d = st.demand(workload.ranks)
        if not d.any():
            raise SpectraError(f"step {i} ({st.phase}): moves no bytes between two GPUs; a parallel-OCS schedule "
                               f"needs a demand in every step")
        p = plan(d, s, rate, delta, "duplex")
        scheds.append(p.schedule)
        methods.append(p.decomposition)
        bounds.append(lower_bound(d, s, rate, delta, "duplex"))
    return ParallelPlan(SCHEDULES[schedule], tuple(scheds), tuple(methods), workload, guard_s, tuple(bounds))
