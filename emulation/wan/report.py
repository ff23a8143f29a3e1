"""A WAN result on disk and on screen: ``result.json``, ``intervals.csv``, ``links.png`` (and for
the packet backend ``links_measured.png``) and a table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console

from emulation import figures
from emulation.envelope import ResultEnvelope


def write(env: ResultEnvelope, out: Path) -> list[str]:
    """``intervals.csv`` and ``links.png`` (every link's utilisation per interval; for the packet
    backend also ``links_measured.png``) into ``out``; their names."""
    result = env.result
    skip = {"index", "link_load", "measured"}
    figures.write_csv(out / "intervals.csv", ({"matrix": i.index, **i.model_dump(exclude=skip)} for i in result.intervals))
    _plot(env, out / "links.png")
    if env.backend == "packet":
        _plot_measured(env, out / "links_measured.png")
        return ["intervals.csv", "links.png", "links_measured.png"]
    return ["intervals.csv", "links.png"]


def _plot(env: ResultEnvelope, path: Path) -> None:
    """Every link's utilisation (load / capacity) per interval, a heat map."""
    result = env.result
    cap = np.array(result.topology["capacity"])
    util = np.array([i.link_load for i in result.intervals]) / cap
    with figures.figure(path, size=(10, 4)) as (fig, axes):
        ax = axes[0][0]
        im = ax.imshow(util.T, aspect="auto", cmap="viridis", vmin=0, vmax=max(1.0, float(util.max(initial=0))))
        ax.set_xlabel("traffic matrix")
        ax.set_xticks(range(len(result.intervals)), [str(i.index) for i in result.intervals], fontsize=6)
        ax.set_ylabel("link")
        ax.set_title(f"{env.scenario}: link utilisation ({result.te['objective']}, "
                     f"lambda {result.te['regulariser']:g}, {result.slicing['count']} {result.slicing['method']} slices)")
        fig.colorbar(im, ax=ax, label="load / capacity")


def _plot_measured(env: ResultEnvelope, path: Path) -> None:
    """Every link of every interval: measured utilisation (port counters) against computed."""
    result = env.result
    cap = np.array(result.topology["capacity"])
    c = np.concatenate([np.array(i.link_load) / cap for i in result.intervals])
    m = np.concatenate([np.array(i.measured.link_load) / cap for i in result.intervals])
    top = max(1.05, float(max(c.max(initial=0), m.max(initial=0))) * 1.05)
    with figures.figure(path, size=(5, 5)) as (fig, axes):
        ax = axes[0][0]
        ax.plot([0, top], [0, top], color="grey", lw=0.8)
        ax.fill_between([0, top], [0, top * 0.9], [0, top * 1.1], color="grey", alpha=0.15, label="within 10%")
        ax.scatter(c, m, s=8, alpha=0.6)
        ax.set_xlabel("computed utilisation (TE splits x demand)")
        ax.set_ylabel("measured utilisation (switch port counters)")
        ag = result.agreement or {}
        ax.set_title(f"{env.scenario}: {len(result.intervals)} intervals x {len(cap)} links\n"
                     f"relative error median {ag.get('rel_error_median', 0):.1%}, "
                     f"p95 {ag.get('rel_error_p95', 0):.1%}", fontsize=9)
        ax.legend(fontsize="small")


def print_summary(env: ResultEnvelope, console: Console | None = None) -> None:
    """One row per interval and the summary line."""
    result = env.result
    console = console or figures.console()
    console.print(figures.table(
        f"{env.scenario} ({env.backend}): {result.topology['name']}, {result.te['objective']}, "
        f"lambda {result.te['regulariser']:g}, capacity headroom {result.te['capacity_headroom']:g}, "
        f"{result.slicing['count']} {result.slicing['method']} slices, deviation "
        f"{result.divergence['distribution']} sd {result.divergence['sd']:g}",
        ("matrix", "offered", "carried", "delivered", "loss", "MLU", "congestion", "max overload"),
        ((i.index, f"{i.offered:.0f}", f"{i.carried:.0f}", f"{i.delivered:.0f}", f"{i.loss:.1f}", f"{i.mlu:.3f}",
          f"{i.congestion:.1f}", f"{i.max_overload:.1%}") for i in result.intervals)))
    s = result.summary
    console.print(f"mean congestion {s['mean_congestion']:.1f}, largest overload {s['max_overload']:.1%}, "
                  f"delivered/offered {s['delivered_over_offered']:.3f}, loss/carried {s['loss_over_carried']:.4f}; "
                  f"blast radius {result.slicing['blast_radius']:.1%} of the demand")
    ag = result.agreement
    if ag is None:
        return
    console.print(f"packets: link load measured vs computed on {ag['links']} busy link-intervals: relative error "
                  f"median {ag['rel_error_median']:.1%}, p95 {ag['rel_error_p95']:.1%} (utilisation points: median "
                  f"{ag['util_error_median']:.3f}, p95 {ag['util_error_p95']:.3f}); datagrams lost {ag['loss']:.3%}; "
                  f"longest reinstall {ag['reinstall_max_s'] * 1e3:.0f} ms")
    names, killed = result.topology["routers"], result.killed_slice()
    for i in result.intervals:
        m = i.measured
        src, dst, share = m.worst_demand()
        line = (f"  matrix {i.index}: sent {m.sent}, lost {m.lost} ({m.lost_during_reinstall} while reinstalling), "
                f"reordered {m.reordered}, reinstall {max(m.reinstall_s.values(), default=0) * 1e3:.0f} ms, worst demand "
                f"{names[src]}->{names[dst]} {share:.1%} lost")
        if m.stale_demand_share > 0:
            line += (f", stale splits on {m.stale_demand_share:.1%} of the demand (measured blast radius"
                     + (f"; computed: slice {killed[0]} sources {killed[1]:.1%})" if killed else ")"))
        console.print(line + "".join(f"; {e}" for e in m.events))
