"""``ocslab reproduce``: every paper reproduction at once, one verdict table.

Runs each ``scripts/reproduce_*.py`` (:data:`SCRIPTS`) in a process of its own, on the flow
backend (``--packet`` adds each script's packet parts: root, Open vSwitch, and one emulation at
a time), each into ``OUT/<script>/`` with its log; ``--quick`` passes each script its quick form
(smaller sweeps that still measure every headline). Then prints one table of every script's
:class:`~emulation.reproduce.Verdict` rows, writes them to ``OUT/verdicts.json`` and
``OUT/verdicts.md`` (the Markdown table of ``docs/papers/index.md``), and exits 0 when every
judged headline held, 1 when one missed or a script failed.

Flow-only scripts run side by side, one per core; with ``--packet`` they run one after another
(two emulations on one machine would measure each other).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from emulation.reproduce import CLAIMS, Verdict, Verdicts, counts, print_table, read_verdicts, verdict_status, write_verdicts

@dataclass(frozen=True)
class Form:
    """How ``ocslab reproduce`` runs one script: the flags of its flow-backend form, those that
    add its packet parts, and those of its quick form (smaller sweeps that still measure every
    headline the full form judges)."""

    flow: tuple[str, ...] = ()
    packet: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()


#: The reproductions, in the table's order (``scripts/reproduce_<name>.py``).
SCRIPTS: dict[str, Form] = {
    "pccl": Form(quick=("--sizes", "64KiB", "--r-us", "0.1", "1000000")),  # the sweep's smallest size, R at its ends
    "shortcircuit": Form(),
    "stragglar": Form(flow=("--no-packet",)),
    "moe": Form(packet=("--packet",)),
    "swot": Form(flow=("--no-packet",)),
    "spectra": Form(packet=("--packet",), quick=("--circuits", "directed")),
    "symphony": Form(packet=("--packet",), quick=("--wans", "geant", "--methods", "oracle", "per-router", "Symphony")),
    "lumion": Form(flow=("--no-packet",)),
    "morphlux": Form(flow=("--no-packet",), quick=("--schedulers", "fifo")),
    "opus": Form(flow=("--no-packet",), quick=("--quick",)),
}


class SuiteError(ValueError):
    """``ocslab reproduce`` cannot run here (one line)."""


def scripts_dir() -> Path:
    """The checkout's ``scripts/`` (the reproductions live beside the package, not in it).

    :raises SuiteError: ocslab was installed without its checkout."""
    d = Path(__file__).resolve().parents[2] / "scripts"
    if not (d / "reproduce_pccl.py").is_file():
        raise SuiteError(f"reproduce: the reproduction scripts are not in {d}: run ocslab from its checkout "
                         "(pip install -e .)")
    return d


def command(name: str, out: Path, packet: bool, quick: bool) -> list[str]:
    """The command line of one reproduction (module doc)."""
    form = SCRIPTS[name]
    return [sys.executable, str(scripts_dir() / f"reproduce_{name}.py"), *(form.packet if packet else form.flow),
            *(form.quick if quick else ()), "--out", str(out / name)]


def run_one(name: str, out: Path, packet: bool, quick: bool) -> tuple[str, list[Verdict], float, int]:
    """Run one reproduction, its output into ``out/name.log``; its name, its verdict rows (its
    ``verdicts.json``; a script that failed or wrote none gets every claim as ``error``), its wall
    time (s) and exit status."""
    log = out / f"{name}.log"
    t0 = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.run(command(name, out, packet, quick), stdout=f, stderr=subprocess.STDOUT,
                            env={**os.environ, "COLUMNS": "160"}).returncode
    wall = time.monotonic() - t0
    try:
        rows = read_verdicts(out / name / "verdicts.json") if rc in (0, 1) else []
    except (OSError, ValueError):
        rows = []
    return name, rows or errors(name, f"the script exited with {rc} (see {log})"), wall, rc


def errors(name: str, note: str) -> list[Verdict]:
    """Every claim of the script ``name`` as an ``error`` with ``note``."""
    return [Verdict(id=c.id, paper=c.paper, arxiv=c.arxiv, headline=c.headline, paper_text=c.paper_text, ours=None,
                    ours_text="-", tolerance=c.tolerance_text(), verdict="error", part=c.part, note=note)
            for c in Verdicts(name).claims()]


def markdown(rows: list[Verdict]) -> str:
    """The verdict table as Markdown (``docs/papers/index.md``): claim, paper, the paper's figure,
    ours, the tolerance and the verdict."""
    lines = ["| claim | paper | headline | paper's | ours | tolerance | verdict |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        paper = r.paper if r.arxiv == "-" else f"{r.paper} ({r.arxiv})"
        cells = [f"`{r.id}`", paper, r.headline + (" (packets)" if r.part == "packet" else ""), r.paper_text,
                 r.ours_text, r.tolerance, f"**{r.verdict}**" if r.verdict in ("missed", "error") else r.verdict]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def claims_markdown() -> str:
    """Every claim of :data:`emulation.reproduce.claims.CLAIMS` as a Markdown table: its id, the
    paper, the paper's figure, how ours is judged and why (``docs/papers/index.md`` holds it;
    a test checks it is this)."""
    lines = ["| claim | paper | paper's figure | tolerance | why |", "|---|---|---|---|---|"]
    for c in CLAIMS:
        paper = c.paper if c.arxiv == "-" else f"{c.paper} ({c.arxiv})"
        cells = [f"`{c.id}`", paper, c.paper_text, c.tolerance_text(), c.reason]
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
    return "\n".join(lines) + "\n"


def reproduce(out: Path, packet: bool = False, quick: bool = False, only: list[str] | None = None,
              jobs: int | None = None) -> int:
    """Run the reproductions (module doc) into ``out``; the exit status.

    :param only: the scripts to run (names of :data:`SCRIPTS`); None: all.
    :param jobs: scripts run at once without ``packet`` (default: the machine's cores).
    :raises SuiteError: the scripts are not beside the package.
    """
    names = list(only or SCRIPTS)
    scripts_dir()
    out.mkdir(parents=True, exist_ok=True)
    workers = 1 if packet else max(1, min(jobs or os.cpu_count() or 1, len(names)))
    t0 = time.monotonic()
    done: dict[str, list[Verdict]] = {}
    with ThreadPoolExecutor(workers) as pool:
        for name, rows, wall, rc in pool.map(lambda n: run_one(n, out, packet, quick), names):
            done[name] = rows
            print(f"reproduce {name}: {wall:.0f} s, {counts(rows)} (exit {rc}; {out / (name + '.log')})", flush=True)
    rows = [r for n in names for r in done[n]]
    write_verdicts(out / "verdicts.json", rows)
    (out / "verdicts.md").write_text(markdown(rows))
    wall = time.monotonic() - t0
    print_table(rows, f"ocslab reproduce{' --packet' if packet else ''}{' --quick' if quick else ''}: "
                      f"{len(names)} papers' reproductions in {wall:.0f} s")
    print(f"results: {out}/verdicts.json, verdicts.md and each script's directory and log")
    return verdict_status(rows)
