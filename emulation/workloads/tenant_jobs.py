"""Tenant jobs and the seeded trace of their arrivals.

A job is round-based, as in Propius (arXiv 2510.19617): it checks in at ``arrival_s``, then for
each of its ``rounds`` asks for a slice of ``accelerators``, holds it for the round and gives it
back. A round takes ``compute_s`` plus ``comm_s`` (its collectives at the slice's full bandwidth)
divided by the slice's bandwidth share (:attr:`emulation.planners.allocators.Allocation.bandwidth`),
plus the photonic circuits' set-up R where the allocator sets circuits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import Field, field_validator, model_validator

from emulation.sections import StrictModel


@dataclass(frozen=True)
class Job:
    """One tenant job: ``id``, ``tenant``, ``arrival_s`` (s), ``accelerators`` per round,
    ``rounds``, and per round ``compute_s`` and ``comm_s`` (s, at full bandwidth)."""

    id: int
    tenant: int
    arrival_s: float
    accelerators: int
    rounds: int
    compute_s: float
    comm_s: float

    @property
    def round_s(self) -> float:
        """A round at full bandwidth, s (the job's own estimate, as it declares at check-in)."""
        return self.compute_s + self.comm_s

    def round_at(self, bandwidth: float) -> float:
        """A round on a slice with ``bandwidth`` (share of full, in (0, 1]), s."""
        return self.compute_s + self.comm_s / bandwidth


def make_trace(jobs: int, seed: int, interarrival_s: float, sizes: dict[int, float], rounds: tuple[int, int],
               round_s: tuple[float, float], comm_share: float, tenants: int) -> list[Job]:
    """A seeded trace: Poisson arrivals (exponential gaps of mean ``interarrival_s``), sizes drawn
    with the weights of ``sizes`` (accelerators -> weight), rounds uniform in ``rounds``
    (inclusive), a round's full-bandwidth time log-uniform in ``round_s`` of which ``comm_share``
    is communication, tenants uniform in ``0..tenants-1``.

    :returns: ``jobs`` jobs in arrival order (ids 0..jobs-1).
    """
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(interarrival_s, jobs))
    keys = sorted(sizes)
    w = np.array([sizes[k] for k in keys], dtype=float)
    size = rng.choice(keys, size=jobs, p=w / w.sum())
    n = rng.integers(rounds[0], rounds[1] + 1, size=jobs)
    r = np.exp(rng.uniform(np.log(round_s[0]), np.log(round_s[1]), size=jobs))
    who = rng.integers(0, tenants, size=jobs)
    return [Job(i, int(who[i]), float(t[i]), int(size[i]), int(n[i]), float(r[i] * (1 - comm_share)),
                float(r[i] * comm_share)) for i in range(jobs)]


class TraceSpec(StrictModel):
    """``trace:`` a seeded request trace; :meth:`draw` draws it (:func:`make_trace`)."""

    jobs: int = Field(ge=1, le=1_000_000)
    """Jobs in the trace."""
    seed: int = 0
    """Seed of the trace's draws."""
    interarrival_s: float = Field(gt=0)
    """Mean time between two jobs' arrivals (Poisson arrivals), seconds."""
    sizes: dict[int, float] = Field(min_length=1)
    """Job sizes drawn: accelerators (a legal slice size of the rack) -> relative weight (>= 0,
    not all 0)."""
    rounds: tuple[int, int] = (1, 1)
    """Range ``[min, max]`` a job's number of rounds is drawn from, uniformly (both included)."""
    round_s: tuple[float, float]
    """Range ``[min, max]`` a job's round time at full bandwidth is drawn from, log-uniformly, seconds."""
    comm_share: float = Field(default=0.5, ge=0, le=1)
    """Fraction of a round spent communicating (the rest computes)."""
    tenants: int = Field(default=4, ge=1)
    """Tenants the jobs belong to, drawn uniformly."""

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v):
        for k, w in v.items():
            if w < 0:
                raise ValueError(f"size {k}: weight {w} is negative")
        if sum(v.values()) <= 0:
            raise ValueError("the weights sum to zero")
        return v

    @model_validator(mode="after")
    def _ranges(self):
        if not 1 <= self.rounds[0] <= self.rounds[1]:
            raise ValueError(f"rounds: [{self.rounds[0]}, {self.rounds[1]}] is not a range of positive counts")
        if not 0 < self.round_s[0] <= self.round_s[1]:
            raise ValueError(f"round_s: [{self.round_s[0]:g}, {self.round_s[1]:g}] is not a range of positive seconds")
        return self

    def draw(self) -> list[Job]:
        """The trace's jobs in arrival order (:func:`make_trace` of these fields)."""
        return make_trace(self.jobs, self.seed, self.interarrival_s, self.sizes, self.rounds, self.round_s,
                          self.comm_share, self.tenants)
