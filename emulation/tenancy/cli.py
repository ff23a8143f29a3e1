"""``ocslab run`` of a tenancy scenario: the command-line side of :mod:`emulation.tenancy`."""

from __future__ import annotations

from pathlib import Path

from emulation.cli import _fail, _fresh_out, packet_scenario, progress_bar
from emulation.scenario import ScenarioError


def run(path: Path, backend: str | None, out: Path | None) -> int:
    """Replay the tenancy scenario at ``path`` on the flow backend (a ``trace``) or run its
    ``tenants`` on the packet backend, and write its results; the exit status."""
    import datetime as dt

    import yaml
    from rich.console import Console

    from emulation.tenancy.report import print_summary, write
    from emulation.tenancy.run import run_tenancy
    from emulation.tenancy.scenario import load_tenancy_scenario

    try:
        sc = load_tenancy_scenario(path)
    except ScenarioError as e:
        return _fail(str(e))
    if sc.tenancy.tenants:
        return _run_packet(sc, backend, out)
    if (backend or sc.backend) != "flow":
        return _fail(f"--backend: tenancy traces replay on the flow backend, not {backend!r}")
    out = _fresh_out(out or Path("runs") / f"{sc.name}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}")
    if isinstance(out, int):
        return out
    with progress_bar("tenancy") as progress:
        res = run_tenancy(sc, progress)
    write(res, out, yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False))
    print_summary(res)
    Console().print(f"results: {out}/result.json, runs.csv, utilisation.png, policies.png")
    return 0


def _run_packet(sc, backend: str | None, out: Path | None) -> int:
    """The tenants of ``sc`` alone and together on the packet backend beside the flow backend
    (:func:`emulation.tenancy.packet.run_packet`); the exit status."""
    from emulation.tenancy.packet import run_packet
    from emulation.tenancy.report import print_packet, write_packet

    if (backend or sc.backend) != "mininet":
        return _fail(f"--backend: tenants run on the packet backend (mininet), not {backend!r}")
    return packet_scenario(sc, out, "tenants", run_packet, write_packet, print_packet, "tenants.csv")
