"""What the fabric does over time: the one contract between the planners and both backends.

A run's fabric schedule takes one of three forms, each carrying the workload it is for
(``.workload``; a planner may split steps, so backends execute the schedule's workload) and the
planner that made it (``.planner``):

- :class:`Plan` (*per-step*): for every step of the workload, the configuration it runs on and
  whether reaching it needs a reconfiguration (``reconfigure``: the changed circuits go dark for
  the reconfiguration delay R first) or not (``keep``). Made by :mod:`emulation.planners`
  (``none``, ``always``, ``greedy``, ``dp``; PCCL, arXiv 2509.15450).
- :class:`ParallelPlan` (*parallel OCSes*): every step a :class:`ParallelSchedule` of its own,
  run one after the other: s OCSes, each GPU with one port on every one, each OCS running its
  own one-shot sequence of configurations on its own clock (a dark window of R before each),
  never waiting for traffic; a GPU pair's bytes move on every OCS whose current circuit joins
  them (Spectra, arXiv 2603.07373; :mod:`emulation.planners.spectra`).
- :class:`SlottedPlan` (*time-slotted*): the OCS cycles on its own clock through the
  configurations of a :class:`SlotSchedule` (a dark window of R before every slot) and never
  waits for traffic; hosts send while a circuit to their destination is up, directly or, with a
  :class:`RelayPlan`, through an intermediate GPU (rotor / Birkhoff-von Neumann schedules;
  PipSwitch, arXiv 2501.18136; RotorNet's RotorLB).

:data:`FabricSchedule` is their union. The flow backend (:mod:`emulation.flowsim`) and the
packet backend (:mod:`emulation.emulator`) both consume it and neither imports the other.

Vocabulary: a *matching* is a set of undirected GPU pairs ``(a, b)``, ``a < b``, each GPU at most
once (what an OCS of duplex circuits holds); a :class:`WeightedMatching` is a matching held for
``weight`` bytes of every circuit; R is ``reconfiguration_delay_s`` everywhere, and the *dark
window* is the time the changed circuits actually carried nothing (measured by the packet
backend).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal, Union

from emulation.fabric import Configuration, Fabric
from emulation.units import bytes_per_s, format_bytes
from emulation.workloads.matchings import Matching
from emulation.workloads.model import Workload

Action = Literal["keep", "reconfigure"]

#: Directed circuits ``(src, dst)`` of one slot; a pair repeated m times is m parallel circuits.
Pairs = tuple[tuple[int, int], ...]
#: One transfer's parts: ``(via, bytes)``, ``via`` the relaying GPU or None for the direct part.
Parts = tuple[tuple[Union[int, None], int], ...]


class PlanError(ValueError):
    """A plan cannot be made for this fabric and workload (e.g. a step's degree exceeds ports)."""


# ---- per-step plans ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StepPlan:
    """The configuration step ``i`` runs on, and whether reaching it needs a reconfiguration."""

    action: Action
    configuration: Configuration


@dataclass(frozen=True)
class Plan:
    """Per-step configurations of one run, starting from ``initial``.

    :param planner: name of the planner that made it.
    :param reconfiguration_delay_s: R (real seconds) of each reconfiguration.
    :param workload: the workload whose steps ``steps`` follow (module doc).
    :param predicted_s: the planner's cost-model time of the plan (seconds), if it computed one.
    """

    planner: str
    initial: Configuration
    steps: tuple[StepPlan, ...]
    reconfiguration_delay_s: float
    workload: Workload
    predicted_s: float | None = None

    #: Its slots run on the switch's clock (time-slotted, parallel OCSes), not step by step: it
    #: keeps the scenario's byte scale, its result carries ``slots``, and it has no step table.
    slotted: ClassVar[bool] = False

    def describe(self) -> list[str]:
        """Lines that say what the plan does, for ``ocslab plan`` (none: its step table says it)."""
        return []

    @property
    def reconfigurations(self) -> int:
        """Number of steps marked ``reconfigure``."""
        return sum(s.action == "reconfigure" for s in self.steps)

    def to_json(self) -> dict:
        """``{"planner", "reconfiguration_delay_s", "predicted_s", "initial", "steps": [{"action",
        "configuration"}]}``."""
        return {
            "planner": self.planner,
            "reconfiguration_delay_s": self.reconfiguration_delay_s,
            "predicted_s": self.predicted_s,
            "initial": self.initial.to_json(),
            "steps": [{"action": s.action, "configuration": s.configuration.to_json()} for s in self.steps],
        }


def plan_from_configurations(
    planner: str, initial: Configuration, configs: list[Configuration], reconfiguration_delay_s: float,
    workload: Workload, predicted_s: float | None = None,
) -> Plan:
    """Mark each step ``reconfigure`` exactly when its configuration differs from the previous.

    :raises PlanError: ``configs`` and ``workload.steps`` differ in length.
    """
    if len(configs) != len(workload.steps):
        raise PlanError(f"{len(configs)} configurations for {len(workload.steps)} steps")
    steps, current = [], initial
    for c in configs:
        steps.append(StepPlan("keep" if c == current else "reconfigure", c))
        current = c
    return Plan(planner, initial, tuple(steps), reconfiguration_delay_s, workload, predicted_s)


def reconfiguration_delay(fabric: Fabric) -> float:
    """R of the fabric: the largest OCS reconfiguration delay, seconds (0 without an OCS)."""
    return max((o.reconfiguration_delay_s for o in fabric.ocs), default=0.0)


# ---- time-slotted schedules --------------------------------------------------------------------
@dataclass(frozen=True)
class WeightedMatching:
    """A matching of duplex circuits (:data:`Matching`) held for ``weight`` bytes of every
    circuit (``weight / B`` seconds at port rate B); each circuit carries both ways."""

    weight: float
    pairs: Matching


@dataclass(frozen=True)
class SlotSchedule:
    """Configurations held cyclically: ``configs[k]`` (:data:`Pairs`, directed circuits) for
    ``slots_s[k]`` seconds after a dark window of ``reconfiguration_delay_s`` (R); hosts keep a
    guard band of ``guard_s`` at both ends of every slot. All times are real seconds. The clock
    starts at t = 0: dark window, slot 0, dark window, slot 1, ... and again from slot 0.

    Directed circuits model an OCS that switches each GPU's transmit fibre on its own (a
    permutation such as i->j->k->i); :meth:`from_matchings` and :meth:`from_weighted` give
    duplex ones (both directions), the only kind the packet backend emulates.

    :raises ValueError: no configuration, lengths differ, a slot not positive, R < 0, a guard
        band of half the shortest slot or more.
    """

    configs: tuple[Pairs, ...]
    slots_s: tuple[float, ...]
    reconfiguration_delay_s: float = 0.0
    guard_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.configs or len(self.configs) != len(self.slots_s):
            raise ValueError("slots_s: one slot length per configuration")
        if min(self.slots_s) <= 0 or self.reconfiguration_delay_s < 0:
            raise ValueError("slots_s: must be positive; reconfiguration_delay_s: must be >= 0")
        if self.guard_s < 0 or 2 * self.guard_s >= min(self.slots_s):
            raise ValueError(f"guard_s: must be >= 0 and under half the shortest slot "
                             f"({min(self.slots_s) / 2:.3g} s), got {self.guard_s:.3g}")

    @staticmethod
    def from_matchings(matchings, slots_s, reconfiguration_delay_s: float = 0.0) -> SlotSchedule:
        """Duplex circuits: every pair of each :data:`Matching`, both directions, held ``slots_s``."""
        return SlotSchedule(tuple(tuple(p for a, b in m for p in ((a, b), (b, a))) for m in matchings),
                            tuple(slots_s), reconfiguration_delay_s)

    @staticmethod
    def from_weighted(slots: list[WeightedMatching], port_gbps: float, reconfiguration_delay_s: float = 0.0,
                      guard_s: float = 0.0, headroom: float = 0.0) -> SlotSchedule:
        """One slot per :class:`WeightedMatching` (duplex circuits), held
        ``(1 + headroom) x weight / B`` seconds (B = ``port_gbps``) plus the two guard bands, so
        that the slot still carries ``weight`` bytes with ``headroom`` to spare."""
        rate = bytes_per_s(port_gbps)
        return SlotSchedule(tuple(tuple(p for a, b in s.pairs for p in ((a, b), (b, a))) for s in slots),
                            tuple((1 + headroom) * s.weight / rate + 2 * guard_s for s in slots),
                            reconfiguration_delay_s, guard_s)

    @staticmethod
    def from_permutations(terms, port_gbps: float, reconfiguration_delay_s: float = 0.0) -> SlotSchedule:
        """One slot per Birkhoff-von Neumann term (:class:`emulation.planners.bvn.BvnTerm`): its
        permutation as directed circuits, held ``weight / B`` seconds (B = ``port_gbps``)."""
        rate = bytes_per_s(port_gbps)
        return SlotSchedule(tuple(tuple(t.pairs()) for t in terms), tuple(t.weight / rate for t in terms),
                            reconfiguration_delay_s)

    @property
    def cycle_s(self) -> float:
        """One turn of the rotor: ``sum(slots_s) + len(configs) x R``."""
        return float(sum(self.slots_s)) + len(self.configs) * self.reconfiguration_delay_s

    def windows(self, until: float):
        """Yield ``(t_on, t_off, k)`` for every slot that starts before ``until`` (the slot's
        planned start and end; hosts send in ``[t_on + guard_s, t_off - guard_s]``)."""
        t, i = 0.0, 0
        while True:
            k = i % len(self.configs)
            t_on = t + self.reconfiguration_delay_s
            if t_on >= until:
                return
            yield t_on, t_on + self.slots_s[k], k
            t = t_on + self.slots_s[k]
            i += 1

    def circuit_bytes(self, until: float, port_gbps: float) -> float:
        """Bytes the directed circuits of the slots that start before ``until`` could carry
        until then at ``port_gbps`` (the denominator of slot utilisation)."""
        rate = bytes_per_s(port_gbps)
        return sum(len(self.configs[k]) * rate * (min(t_off, until) - t_on) for t_on, t_off, k in self.windows(until))


# ---- parallel OCSes ---------------------------------------------------------------------------
@dataclass(frozen=True)
class OcsSequence:
    """One OCS's configurations in the order it holds them: ``configs[k]`` (:data:`Pairs`,
    directed circuits; a duplex circuit {a, b} appears as both ``(a, b)`` and ``(b, a)``) held
    ``slots_s[k]`` seconds, each after a dark window of R. Empty: the OCS is never used.

    :raises ValueError: lengths differ, a slot not positive.
    """

    configs: tuple[Pairs, ...]
    slots_s: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.configs) != len(self.slots_s):
            raise ValueError(f"slots_s: one slot length per configuration ({len(self.configs)} configurations, "
                             f"{len(self.slots_s)} slots)")
        if self.slots_s and min(self.slots_s) <= 0:
            raise ValueError(f"slots_s: every slot must be positive, got {min(self.slots_s):.3g} s")


@dataclass(frozen=True)
class ParallelSchedule:
    """Independent one-shot slot sequences of s parallel OCSes (Spectra, arXiv 2603.07373).

    ``ocs[k]`` is OCS k's :class:`OcsSequence` (OCS k of :func:`topologies.builders.parallel_ocs`,
    the one every GPU's port k is cabled to). Each OCS runs on its own clock from t = 0: a dark
    window of ``reconfiguration_delay_s`` (R), ``configs[0]`` for ``slots_s[0]``, a dark window,
    ``configs[1]``, ... and after its last slot it holds no circuit. A directed GPU pair (i, j)
    carries up to B bytes/s on every OCS whose current configuration holds (i, j), so its
    capacity at time t is B times the number of such OCSes. The makespan is
    ``max_k sum(R + slots_s)`` (seconds). The packet backend's controller runs each OCS's
    sequence on that OCS's own timeline (:mod:`emulation.emulator.parallel_ocs`).

    :raises ValueError: no OCS, R < 0.
    """

    ocs: tuple[OcsSequence, ...]
    reconfiguration_delay_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.ocs:
            raise ValueError("ocs: a parallel schedule needs at least one OCS")
        if self.reconfiguration_delay_s < 0:
            raise ValueError(f"reconfiguration_delay_s: must be >= 0, got {self.reconfiguration_delay_s}")

    def guarded(self, guard_s: float) -> ParallelSchedule:
        """The same schedule with every slot ``guard_s`` seconds longer: slack for a packet
        sender, which drains a little under the line rate and stops before each window closes
        (:mod:`emulation.emulator.parallel_ocs`). :raises ValueError: ``guard_s`` < 0."""
        if guard_s < 0:
            raise ValueError(f"guard_s: must be >= 0, got {guard_s}")
        return ParallelSchedule(tuple(OcsSequence(seq.configs, tuple(d + guard_s for d in seq.slots_s))
                                      for seq in self.ocs), self.reconfiguration_delay_s)

    def end_s(self, k: int) -> float:
        """When OCS ``k`` finishes its last slot, seconds: ``sum(R + slots_s)``."""
        seq = self.ocs[k]
        return float(sum(seq.slots_s)) + len(seq.configs) * self.reconfiguration_delay_s

    @property
    def makespan_s(self) -> float:
        """``max_k`` :meth:`end_s`, seconds."""
        return max(self.end_s(k) for k in range(len(self.ocs)))

    @property
    def reconfigurations(self) -> int:
        """Configurations over all OCSes (each paid one dark window of R)."""
        return sum(len(seq.configs) for seq in self.ocs)

    def windows(self, k: int):
        """Yield ``(t_on, t_off, index)`` for every slot of OCS ``k`` (seconds)."""
        t = 0.0
        seq = self.ocs[k]
        for i, d in enumerate(seq.slots_s):
            t_on = t + self.reconfiguration_delay_s
            yield t_on, t_on + d, i
            t = t_on + d

    def to_json(self) -> dict:
        """``{"reconfiguration_delay_s", "makespan_s", "ocs": [[{"circuits": [[src, dst], ...],
        "slot_s"}, ...], ...]}`` (one list per OCS, directed circuits)."""
        return {"reconfiguration_delay_s": self.reconfiguration_delay_s, "makespan_s": self.makespan_s,
                "ocs": [[{"circuits": [list(p) for p in c], "slot_s": d} for c, d in zip(seq.configs, seq.slots_s)]
                        for seq in self.ocs]}


@dataclass(frozen=True)
class RelayPlan:
    """How every transfer of a workload travels on a rotor with two-hop forwarding
    (:func:`emulation.planners.relay.two_hop`): ``parts[step][transfer]`` (:data:`Parts`, in
    the workload's order, bytes summing to the transfer's), and ``turns[step]``, the rotor
    turns the plan needs for the step (an estimate)."""

    parts: tuple[tuple[Parts, ...], ...]
    turns: tuple[int, ...]

    @property
    def relayed_bytes(self) -> int:
        """Bytes that go through an intermediate GPU (counted once, not per hop)."""
        return sum(b for step in self.parts for parts in step for via, b in parts if via is not None)


def transfer_parts(relay: RelayPlan | None, step: int, j: int, nbytes: int) -> Parts:
    """How transfer ``j`` of ``step`` (``nbytes`` long) travels: the relay plan's parts, or
    (no relay plan) one direct part. Both backends' rotor runs send exactly these."""
    return relay.parts[step][j] if relay else ((None, nbytes),)


@dataclass(frozen=True)
class SlottedPlan:
    """A run on a time-slotted OCS (module doc): the rotor ``schedule`` (real seconds), how it was
    made (``method``: ``round-robin``, ``bvn`` or ``weighted-round-robin``), the ``workload`` it
    carries and, with two-hop forwarding, the ``relay`` plan (None: every byte goes direct).

    :param planner: ``slotted-rotor`` or ``slotted-plan`` (the scenario's ``schedule``).
    """

    planner: str
    schedule: SlotSchedule
    method: str
    workload: Workload
    relay: RelayPlan | None = None
    predicted_s: float | None = None

    slotted: ClassVar[bool] = True

    def describe(self) -> list[str]:
        """The rotor's shape and, with two-hop forwarding, what it relays (``ocslab plan``)."""
        s = self.schedule
        out = [f"rotor schedule ({self.method}), {len(s.configs)} slots per turn of {s.cycle_s * 1e6:.2f} us (slots "
               f"{min(s.slots_s) * 1e6:.2f}-{max(s.slots_s) * 1e6:.2f} us, R {s.reconfiguration_delay_s * 1e6:g} us, "
               f"guard {s.guard_s * 1e6:g} us)"]
        if self.relay:
            out.append(f"two-hop forwarding relays {self.relay.relayed_bytes / 2**20:.1f} MiB; planned turns per step "
                       f"{list(self.relay.turns)}")
        return out

    def summary(self) -> dict:
        """The schedule's shape for a result's ``slots``: ``method``, ``slots_per_turn``, ``turn_s``,
        ``reconfiguration_delay_s``, ``guard_s``, ``forwarding`` and (two-hop) ``planned_turns``."""
        s = self.schedule
        out = {"method": self.method, "slots_per_turn": len(s.configs), "turn_s": s.cycle_s,
               "reconfiguration_delay_s": s.reconfiguration_delay_s, "guard_s": s.guard_s,
               "forwarding": "two-hop" if self.relay else "direct"}
        if self.relay:
            out["planned_turns"] = list(self.relay.turns)
        return out


@dataclass(frozen=True)
class ParallelPlan:
    """A run on parallel OCSes (Spectra, arXiv 2603.07373): every step of ``workload`` is one
    demand matrix with a :class:`ParallelSchedule` of its own, ``planned[i]`` for step i (real
    seconds, as planned); both backends run :attr:`schedules`, every slot ``guard_s`` longer,
    step i + 1's schedule starting when step i's last byte has arrived. ``method`` names the
    decomposition each step kept; ``lower_bound_s[i]`` is step i's makespan lower bound
    (seconds).

    :param planner: ``parallel-spectra`` or ``parallel-baseline`` (the scenario's ``schedule``).
    """

    planner: str
    planned: tuple[ParallelSchedule, ...]
    method: tuple[str, ...]
    workload: Workload
    guard_s: float = 0.0
    lower_bound_s: tuple[float, ...] = ()

    slotted: ClassVar[bool] = True

    def describe(self) -> list[str]:
        """Every step's OCSes, decomposition and makespan against its lower bound (``ocslab plan``)."""
        return [f"step {i} ({st.phase}) on {len(seq.ocs)} parallel OCSes, {self.planner} ({self.method[i]}): "
                f"{seq.reconfigurations} configurations, makespan {seq.makespan_s * 1e6:.2f} us (lower bound "
                f"{self.lower_bound_s[i] * 1e6:.2f} us, x{seq.makespan_s / self.lower_bound_s[i]:.3f}); slots "
                f"{self.guard_s * 1e6:g} us longer on both backends, R {seq.reconfiguration_delay_s * 1e6:g} us"
                for i, (st, seq) in enumerate(zip(self.workload.steps, self.planned))]

    @functools.cached_property
    def schedules(self) -> tuple[ParallelSchedule, ...]:
        """What both backends run: every step's schedule with its slots ``guard_s`` longer."""
        return tuple(p.guarded(self.guard_s) for p in self.planned)

    def parts(self) -> list[tuple[Workload, ParallelSchedule]]:
        """What each backend runs, step by step: a one-step workload and its guarded schedule."""
        return [(dataclasses.replace(self.workload, steps=(st,)), sched)
                for st, sched in zip(self.workload.steps, self.schedules)]

    @property
    def predicted_s(self) -> float:
        """The guarded makespans summed, seconds: the run's time if every byte moves at once."""
        return sum(s.makespan_s for s in self.schedules)

    def summary(self) -> dict:
        """The schedules' shape for a result's ``slots``: ``method``, ``slots_per_turn`` (the
        configurations of every OCS over all steps), ``turn_s`` (the guarded makespans summed),
        ``reconfiguration_delay_s``, ``guard_s``, ``planned_makespan_s`` (per step, unguarded) and
        ``lower_bound_s``."""
        return {"method": "+".join(dict.fromkeys(self.method)), "guard_s": self.guard_s,
                "slots_per_turn": sum(s.reconfigurations for s in self.planned), "turn_s": self.predicted_s,
                "reconfiguration_delay_s": self.planned[0].reconfiguration_delay_s if self.planned else None,
                "planned_makespan_s": [s.makespan_s for s in self.planned],
                "lower_bound_s": list(self.lower_bound_s)}


#: What the fabric does over a run: per-step configurations, a time-slotted schedule or parallel
#: OCSes' schedules.
FabricSchedule = Union[Plan, SlottedPlan, ParallelPlan]


def executor(table: dict[type, Callable], plan: FabricSchedule) -> Callable:
    """The entry of a backend's executor ``table`` (plan type -> executor) for ``plan``'s type:
    the one place a backend chooses by plan type, so a new plan type is a new row in each table.

    :raises TypeError: the table has no executor for that type."""
    for cls in type(plan).__mro__:
        if cls in table:
            return table[cls]
    raise TypeError(f"no executor for a {type(plan).__name__}")


@dataclass(frozen=True)
class ClosedFormRun:
    """One job of a scenario that the flow backend runs in closed form, its workload never built:
    StragglAR on a non-blocking switch beyond what memory holds as transfers
    (:mod:`emulation.flowsim.stragglar`). ``name``, ``size_bytes`` and ``label`` as
    :class:`RunDescription`'s."""

    name: str
    size_bytes: int

    @property
    def label(self) -> str:
        """``name size``, e.g. ``stragglar 1GiB``."""
        return f"{self.name} {format_bytes(self.size_bytes)}"


@dataclass(frozen=True)
class RunDescription:
    """One job of a scenario, resolved (:mod:`emulation.scenario.resolve`): run ``name`` on a ``size_bytes`` buffer (a moe run: the
    per-GPU routed bytes), executed as ``schedule`` says (its ``.workload`` is what runs), with
    ``padding_bytes`` of the bytes sent carrying no payload (MoE null tokens, tile rounding)."""

    name: str
    size_bytes: int
    schedule: FabricSchedule
    padding_bytes: int = 0

    @property
    def workload(self) -> Workload:
        """The workload the backends execute (a planner may have split steps)."""
        return self.schedule.workload

    @property
    def smallest_step_bytes(self) -> int:
        """Real bytes of the largest transfer of the step whose largest transfer is smallest (0:
        no step moves bytes) of :attr:`workload` (:attr:`Workload.smallest_step_bytes`)."""
        return self.workload.smallest_step_bytes

    @property
    def label(self) -> str:
        """``name size``, e.g. ``ring 25MiB``."""
        return f"{self.name} {format_bytes(self.size_bytes)}"
