"""A WAN result on disk and on screen: ``result.json``, ``intervals.csv``, ``links.png`` and a table."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from emulation.wan.results import WanResult


def write(result: WanResult, out: Path, scenario_yaml: str) -> None:
    """``scenario.yaml``, ``result.json``, ``intervals.csv`` and ``links.png`` (every link's
    utilisation per interval) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.yaml").write_text(scenario_yaml)
    (out / "result.json").write_text(json.dumps(result.to_json(), indent=1))
    with open(out / "intervals.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["matrix", "offered", "carried", "delivered", "loss", "mlu", "congestion", "max_overload"])
        for i in result.intervals:
            w.writerow([i.index, i.offered, i.carried, i.delivered, i.loss, i.mlu, i.congestion, i.max_overload])
    _plot(result, out / "links.png")


def _plot(result: WanResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cap = np.array(result.topology["capacity"])
    util = np.array([i.link_load for i in result.intervals]) / cap
    fig, ax = plt.subplots(figsize=(10, 4))
    im = ax.imshow(util.T, aspect="auto", cmap="viridis", vmin=0, vmax=max(1.0, float(util.max(initial=0))))
    ax.set_xlabel("traffic matrix")
    ax.set_xticks(range(len(result.intervals)), [str(i.index) for i in result.intervals], fontsize=6)
    ax.set_ylabel("link")
    ax.set_title(f"{result.scenario}: link utilisation ({result.te['objective']}, "
                 f"lambda {result.te['regulariser']:g}, {result.slicing['count']} {result.slicing['method']} slices)")
    fig.colorbar(im, ax=ax, label="load / capacity")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def print_summary(result: WanResult, console: Console | None = None) -> None:
    """One row per interval and the summary line."""
    console = console or Console(width=max(Console().width, 110))
    t = Table(title=f"{result.scenario} ({result.backend}): {result.topology['name']}, {result.te['objective']}, "
                    f"lambda {result.te['regulariser']:g}, headroom {result.te['headroom']:g}, "
                    f"{result.slicing['count']} {result.slicing['method']} slices, deviation "
                    f"{result.divergence['distribution']} sd {result.divergence['sd']:g}")
    for c in ("matrix", "offered", "carried", "delivered", "loss", "MLU", "congestion", "max overload"):
        t.add_column(c, justify="right")
    for i in result.intervals:
        t.add_row(str(i.index), f"{i.offered:.0f}", f"{i.carried:.0f}", f"{i.delivered:.0f}", f"{i.loss:.1f}",
                  f"{i.mlu:.3f}", f"{i.congestion:.1f}", f"{i.max_overload:.1%}")
    console.print(t)
    s = result.summary()
    console.print(f"mean congestion {s['mean_congestion']:.1f}, largest overload {s['max_overload']:.1%}, "
                  f"delivered/offered {s['delivered_over_offered']:.3f}, loss/carried {s['loss_over_carried']:.4f}; "
                  f"blast radius {result.slicing['blast_radius']:.1%} of the demand")
