"""A tenancy result on disk and on screen: ``runs.csv``, ``utilisation.png``
(accelerators held over time per allocator), ``policies.png`` (utilisation, throughput and job
completion time per scheduler) and the tables."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from emulation.envelope import ResultEnvelope
from emulation.figures import console as wide_console
from emulation.figures import figure, formatted, table, write_csv
from emulation.flowsim.rack_sweep import TenancyResult

COLUMNS = ("allocation_bandwidth", "fragmentation", "utilisation", "throughput_jobs_per_h", "bindings_per_h",
           "jct_mean_s", "jct_p95_s", "delay_mean_s", "delay_p95_s", "contiguous_share", "jobs_completed",
           "jobs_rejected", "requests")


def write(env: ResultEnvelope, out: Path) -> list[str]:
    """A trace's ``runs.csv``, ``utilisation.png`` and ``policies.png``; their names."""
    result = env.result
    write_csv(out / "runs.csv", ([r.allocator, r.scheduler, *(r.metrics[c] for c in COLUMNS)] for r in result.runs),
              ["allocator", "scheduler", *COLUMNS])
    plots(result, out, env.scenario)
    return ["runs.csv", "utilisation.png", "policies.png"]


def plots(result: TenancyResult, out: Path, name: str) -> None:
    """``utilisation.png`` and ``policies.png`` in ``out``."""
    sched = result.runs[0].scheduler
    with figure(out / "utilisation.png", size=(9, 3.6), dpi=120) as (fig, axes):
        ax = axes[0, 0]
        for r in result.runs:
            if r.scheduler == sched:
                ax.plot([t / 3600 for t in r.t_s], r.utilisation, lw=1, label=f"{r.allocator} ({sched})")
        ax.set_xlabel("time (h)")
        ax.set_ylabel("accelerators held (share)")
        ax.set_ylim(0, 1.05)
        ax.legend(loc="lower right")
        ax.set_title(f"{name}: utilisation over time")

    allocs = sorted({r.allocator for r in result.runs})
    scheds = list(dict.fromkeys(r.scheduler for r in result.runs))
    width = 0.8 / len(allocs)
    with figure(out / "policies.png", 1, 3, size=(13, 3.8), dpi=120) as (fig, axes):
        for k, a in enumerate(allocs):
            rows = {r.scheduler: r.metrics for r in result.runs if r.allocator == a}
            xs = [i + k * width for i in range(len(scheds))]
            for ax, key, label in zip(axes[0], ("utilisation", "throughput_jobs_per_h", "jct_mean_s"),
                                      ("utilisation", "jobs per hour", "mean JCT (h)")):
                vals = [rows[s][key] / (3600 if key == "jct_mean_s" else 1) if s in rows else 0 for s in scheds]
                ax.bar(xs, vals, width, label=a)
                ax.set_ylabel(label)
        for ax in axes[0]:
            ax.set_xticks([i + width * (len(allocs) - 1) / 2 for i in range(len(scheds))], scheds, rotation=30)
        axes[0, 0].legend(fontsize=8)
        fig.suptitle(f"{name}: schedulers (Propius' policies) and static partitioning")


def print_summary(env: ResultEnvelope, console: Console | None = None) -> None:
    """A trace's allocators side by side (first scheduler), their allocation bandwidth per
    tenant, then every scheduler per allocator."""
    result, name, console = env.result, env.scenario, console or wide_console()
    tr, sched = result.trace, result.runs[0].scheduler
    first = [r for r in result.runs if r.scheduler == sched]
    allocators = (("allocation_bandwidth", ".1%"), ("fragmentation", ".2%"), ("utilisation", ".1%"),
                  ("delay_mean_s", ".0f"), ("jct_mean_s", ".0f"), ("jct_p95_s", ".0f"), ("contiguous_share", ".0%"))
    console.print(table(f"{name}: allocators ({tr['jobs']} jobs, seed {tr['seed']}, scheduler {sched})",
                        ("allocator", "alloc. bandwidth", "fragmentation", "utilisation", "delay mean (s)",
                         "JCT mean (s)", "JCT p95 (s)", "contiguous"),
                        ([r.allocator, *formatted(r.metrics, allocators)] for r in first)))
    tenants = sorted({k for r in result.runs for k in r.metrics["per_tenant"]}, key=int)
    rows = [[r.allocator, *(f"{r.metrics['per_tenant'][k]:.1%}" if k in r.metrics["per_tenant"] else "-"
                            for k in tenants)] for r in first]
    console.print(table(f"{name}: allocation bandwidth per tenant (scheduler {sched})",
                        ("allocator", *(f"tenant {k}" for k in tenants)), rows))
    schedulers = (("utilisation", ".1%"), ("throughput_jobs_per_h", ".2f"), ("jct_mean_s", ".0f"), ("jct_p95_s", ".0f"),
                  ("jobs_rejected", ""))
    console.print(table(f"{name}: schedulers",
                        ("allocator", "scheduler", "utilisation", "jobs/h", "JCT mean (s)", "JCT p95 (s)", "rejected"),
                        ([r.allocator, r.scheduler, *formatted(r.metrics, schedulers)] for r in result.runs)))


def write_packet(env: ResultEnvelope, out: Path) -> list[str]:
    """A packet run's ``tenants.csv`` (:func:`emulation.tenants_packet.compare_tenants`); its name."""
    cols = ["name", "algorithm", "bytes", "start_s", "packet_alone_s", "flow_alone_s", "alone_error",
            "packet_together_s", "flow_together_s", "together_error", "retransmissions", "foreign_packets"]
    write_csv(out / "tenants.csv", ([" ".join(map(str, r.gpus)), *(getattr(r, c) for c in cols)]
                                    for r in env.result.tenants), ["gpus", *cols])
    return ["tenants.csv"]


def print_packet(env: ResultEnvelope, console: Console | None = None) -> None:
    """Each tenant alone and together, packets against the flow backend, and the isolation count."""
    res, console, rows = env.result, console or wide_console(), []
    for r in res.tenants:
        g = r.gpus
        gpus = f"{g[0]}-{g[-1]}" if g == list(range(g[0], g[-1] + 1)) else ",".join(map(str, g))
        fa, ft = r.flow_alone_s * 1e6, r.flow_together_s * 1e6
        rows.append([f"{r.name} {gpus}", f"{r.algorithm} {r.bytes / 2**20:g}MiB", f"{r.packet_alone_s * 1e6:.1f}",
                     f"{r.alone_error:+.1%}", f"{r.packet_together_s * 1e6:.1f}", f"{r.together_error:+.1%}",
                     f"{fa:.1f}" if abs(fa - ft) < 0.05 else f"{fa:.1f}/{ft:.1f}", r.foreign_packets])
    t = table(f"{env.scenario}: packets at {res.scale['link_mbps']:g} Mbit/s (TDF {res.scale['tdf']:g}) vs flow, "
              f"real-equivalent us", ("tenant", "job", "alone", "err", "shared", "err", "flow", "foreign"), rows,
              left=("tenant", "job"))
    for column in t.columns:
        column.no_wrap = True
    console.print(t)
    console.print(f"shared: all tenants at once; err: against the flow backend's time (alone, shared); foreign: "
                  f"frames of another tenant on a tenant's OCS ports; {sum(r.retransmissions for r in res.tenants)} "
                  f"retransmissions; circuits left after every tenant ended: {res.circuits_left}")
