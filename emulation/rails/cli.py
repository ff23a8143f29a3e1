"""``ocslab run`` of a rail scenario: the command-line side of :mod:`emulation.rails`."""

from __future__ import annotations

from pathlib import Path

from emulation.cli import _fail, _fresh_out, packet_scenario, progress_bar
from emulation.scenario import ScenarioError


def run(path: Path, backend: str | None, out: Path | None) -> int:
    """Run the rail scenario at ``path`` on the flow backend and write its results; the exit
    status."""
    import datetime as dt

    import yaml
    from rich.console import Console

    from emulation.flowsim.simulate import SimulationError
    from emulation.rails.report import print_summary, write
    from emulation.rails.run import run_rails
    from emulation.rails.scenario import load_rails_scenario

    try:
        sc = load_rails_scenario(path)
    except ScenarioError as e:
        return _fail(str(e))
    if (backend or sc.backend) != "flow":
        return _fail(f"--backend: rail scenarios run on the flow backend (the packet backend runs them as a "
                     f"torch job: ocslab train), not {backend!r}")
    out = _fresh_out(out or Path("runs") / f"{sc.name}-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}")
    if isinstance(out, int):
        return out
    with progress_bar("rails") as progress:
        try:
            res = run_rails(sc, progress)
        except SimulationError as e:
            return _fail(f"flow backend: {e}", 1)
    write(res, out, yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False))
    print_summary(res)
    Console().print(f"results: {out}/result.json, sweep.csv, overhead.png, timeline.png")
    return 0


def train(path: Path, out: Path | None) -> int:
    """Run the rail scenario's torch job on the packet backend (:mod:`emulation.rails.packet`);
    the exit status."""
    from emulation.emulator.torchrun import torch_available
    from emulation.rails.packet import run_packet
    from emulation.rails.report import print_packet, write_packet
    from emulation.rails.scenario import load_rails_scenario

    try:
        sc = load_rails_scenario(path)
    except ScenarioError as e:
        return _fail(str(e))
    if sc.packet is None:
        return _fail(f"{path}: packet: missing (the torch job's section); ocslab run sweeps the scenario on the "
                     f"flow backend")
    if not torch_available():
        return _fail("torch: PyTorch is not installed (OCSLAB_EXTRAS=torch bash scripts/setup.sh)")
    return packet_scenario(sc, out, "train", run_packet, write_packet, print_packet, "timeline.png", len(sc.packet.modes))
