"""The layering the architecture promises (docs/architecture.md): the two backends consume the
same contract (emulation/schedule.py) and neither imports the other; planners and the flow
backend never import Mininet, OS-Ken or the controllers."""

import subprocess
import sys

import pytest


def _loaded(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """Modules under ``prefixes`` that importing ``modules`` loads (in a fresh interpreter)."""
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + f"print('\\n'.join(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return got.stdout.split()


@pytest.mark.parametrize("modules, forbidden", [
    (["emulation.flowsim", "emulation.flowsim.run", "emulation.planners", "emulation.planners.slotted",
      "emulation.scenario", "emulation.schedule", "emulation.results"],
     ("emulation.emulator", "mininet", "os_ken", "controllers")),
    (["emulation.emulator.execute", "emulation.emulator.calibration", "emulation.emulator.recovery",
      "emulation.emulator.tenants"],
     ("emulation.flowsim", "emulation.scenario")),
])
def test_backends_and_planners_do_not_import_each_other(modules, forbidden):
    assert _loaded(modules, forbidden) == []


def test_the_rack_model_and_the_allocators_import_no_scenario_kind():
    """The multi-tenant rack model (topologies) and its slice allocators (planners) are core: the
    tenancy kind imports them, never the other way round."""
    assert _loaded(["topologies.torus_rack", "emulation.planners.allocators", "emulation.flowsim.tenants"],
                   ("emulation.tenancy", "emulation.wan", "emulation.rails", "emulation.training", "mininet",
                    "os_ken", "controllers")) == []


KINDS = ("emulation.wan", "emulation.rails", "emulation.tenancy", "emulation.training")


@pytest.mark.parametrize("modules, forbidden", [
    (["emulation.planners.te", "emulation.planners.tunnels"], KINDS + ("emulation.emulator", "controllers")),
    (["controllers.base", "controllers.wan_te"], KINDS + ("emulation.emulator",)),
])
def test_the_wan_te_solvers_and_its_controller_stand_on_the_core(modules, forbidden):
    """The TE solvers are planners (core); the WAN's TE controller imports neither a scenario
    kind nor the orchestrator."""
    assert _loaded(modules, forbidden) == []


def test_the_wan_kind_imports_no_controller_app():
    """The WAN kind starts its controllers as processes; it imports none of their modules."""
    import ast
    from pathlib import Path

    wan = Path(__file__).resolve().parents[1] / "emulation" / "wan"
    found = []
    for path in sorted(wan.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {n}" for n in names if n == "controllers" or n.startswith("controllers.")]
    assert found == []
