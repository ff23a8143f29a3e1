"""The metrics of a tenancy replay (:class:`emulation.flowsim.job_manager.Replay`), each as
``docs/tenancy.md`` defines it. Times in s of virtual time.

- ``allocation_bandwidth``: mean over allocations of the share of each accelerator's ports the
  tenant's collective can drive (Morphlux's allocation bandwidth); ``per_tenant``: the same per
  tenant.
- ``fragmentation``: share of requests refused at least once while at least as many accelerators
  as they asked for were free (in their pool).
- ``utilisation``: accelerator-seconds held by rounds / (accelerators tenants may use x the
  makespan); the makespan runs from the first arrival to the last round's end.
- ``throughput_jobs_per_h``: jobs completed per hour of makespan; ``bindings_per_h``: slices
  granted (rounds) per hour.
- ``jct_mean_s``, ``jct_p95_s``: job completion time, check-in to last round's end, over
  completed jobs; ``delay_mean_s``, ``delay_p95_s``: a request's wait for its slice.
"""

from __future__ import annotations

import numpy as np

from emulation.flowsim.job_manager import Replay


def metrics(r: Replay) -> dict:
    """The metrics above, plus counts: ``requests``, ``jobs_completed``, ``jobs_rejected``,
    ``contiguous_share`` (of allocations), ``makespan_s``.

    :raises ValueError: nothing was allocated."""
    done = [q for q in r.requests if q.t_end is not None]
    if not done:
        raise ValueError("no request was granted a slice")
    t0 = min(q.job.arrival_s for q in r.requests)
    t1 = max(q.t_end for q in done)
    span = t1 - t0
    held = sum(q.job.accelerators * (q.t_end - q.t_start) for q in done)
    jct = np.array([r.job_end[j] - q.job.arrival_s for q in r.requests if q.round == 0
                    for j in [q.job.id] if j in r.job_end])
    delay = np.array([q.t_start - q.t_request for q in done])
    tenants: dict[int, list[float]] = {}
    for q in done:
        tenants.setdefault(q.job.tenant, []).append(q.bandwidth)
    return {
        "requests": len(r.requests),
        "jobs_completed": len(r.job_end),
        "jobs_rejected": len(r.rejected),
        "makespan_s": span,
        "allocation_bandwidth": float(np.mean([q.bandwidth for q in done])),
        "per_tenant": {str(t): float(np.mean(v)) for t, v in sorted(tenants.items())},
        "fragmentation": sum(q.fragmented for q in r.requests) / len(r.requests),
        "contiguous_share": sum(bool(q.contiguous) for q in done) / len(done),
        "utilisation": held / (r.usable_accelerators * span),
        "throughput_jobs_per_h": len(r.job_end) / span * 3600,
        "bindings_per_h": len(done) / span * 3600,
        "jct_mean_s": float(jct.mean()) if jct.size else float("nan"),
        "jct_p95_s": float(np.percentile(jct, 95)) if jct.size else float("nan"),
        "delay_mean_s": float(delay.mean()),
        "delay_p95_s": float(np.percentile(delay, 95)),
    }


def utilisation_series(r: Replay, points: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """``(t, share)``: accelerators held over those tenants may use, sampled at ``points`` times
    from the first arrival to the last end."""
    done = [q for q in r.requests if q.t_end is not None]
    t0 = min(q.job.arrival_s for q in r.requests)
    t1 = max(q.t_end for q in done)
    ts = np.linspace(t0, t1, points)
    starts = np.array([q.t_start for q in done])
    ends = np.array([q.t_end for q in done])
    n = np.array([q.job.accelerators for q in done], dtype=float)
    busy = np.array([n[(starts <= t) & (ends > t)].sum() for t in ts])
    return ts - t0, busy / r.usable_accelerators
