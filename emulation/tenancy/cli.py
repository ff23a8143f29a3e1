"""``ocslab run`` of a tenancy scenario: the command-line side of :mod:`emulation.tenancy`."""

from __future__ import annotations

from pathlib import Path

from emulation.cli import _fail, _fresh_out
from emulation.scenario import ScenarioError


def run(path: Path, backend: str | None, out: Path | None) -> int:
    """Replay the tenancy scenario at ``path`` on the flow backend and write its results; the
    exit status."""
    import datetime as dt

    import yaml
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from emulation.tenancy.report import print_summary, write
    from emulation.tenancy.run import run_tenancy
    from emulation.tenancy.scenario import load_tenancy_scenario

    try:
        sc = load_tenancy_scenario(path)
    except ScenarioError as e:
        return _fail(str(e))
    if (backend or sc.backend) != "flow":
        return _fail(f"--backend: tenancy traces replay on the flow backend, not {backend!r}")
    out = _fresh_out(out or Path("runs") / f"{sc.name}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}")
    if isinstance(out, int):
        return out
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("tenancy", total=1)

        def progress(label: str, done: int, total: int) -> None:
            bar.update(task, description=f"tenancy: {label}", completed=done, total=total)

        res = run_tenancy(sc, progress)
    write(res, out, yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False))
    print_summary(res)
    Console().print(f"results: {out}/result.json, runs.csv, utilisation.png, policies.png")
    return 0
