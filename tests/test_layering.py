"""The layering the architecture promises (docs/architecture.md): the two backends consume the
same contract (emulation/schedule.py) and neither imports the other; planners and the flow
backend never import Mininet, OS-Ken or the controllers; controller apps import core modules
(the Opus rule is :mod:`emulation.planners.opus`) but no scenario kind nor the packet backend's
orchestrator; the topologies package loads without numpy (``mn --custom`` runs it on the system
Python)."""

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
    (["emulation.flowsim", "emulation.flowsim.run", "emulation.flowsim.iteration", "emulation.planners",
      "emulation.planners.slotted", "emulation.planners.opus", "emulation.scenario", "emulation.schedule",
      "emulation.results", "topologies.rail_network"],
     ("emulation.emulator", "mininet", "os_ken", "controllers")),
    (["emulation.emulator.execute", "emulation.emulator.calibration", "emulation.emulator.recovery",
      "emulation.emulator.tenants"],
     ("emulation.flowsim", "emulation.scenario")),
])
def test_backends_and_planners_do_not_import_each_other(modules, forbidden):
    assert _loaded(modules, forbidden) == []


def test_controllers_import_core_modules_but_no_scenario_kind_nor_the_orchestrator():
    assert "emulation.planners.opus" in _loaded(["controllers.opus"], ("emulation.planners",))
    assert _loaded(["controllers.opus", "controllers.api"], ("emulation.rails", "emulation.wan", "emulation.tenancy",
                                                             "emulation.training", "emulation.emulator")) == []


def test_the_topologies_package_needs_no_numpy():
    assert _loaded(["topologies", "topologies.builders"], ("numpy", "emulation.flowsim")) == []
