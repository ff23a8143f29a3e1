"""Collective scenarios (``ocslab run``): the schema of the YAML files
(:mod:`~emulation.scenario.schema`), loading with one-line errors
(:mod:`~emulation.scenario.load`) and resolution into what the backends run
(:mod:`~emulation.scenario.resolve`). Data flows one way: file -> :class:`Scenario` ->
:class:`Experiment` -> :class:`RunDescription` per job -> backend.
"""

from emulation.scenario.load import check_experiment, load_experiment, load_scenario, read_yaml, validate
from emulation.scenario.resolve import Experiment, RunDescription, resolve
from emulation.scenario.schema import (
    MAX_GPUS,
    EmulationSpec,
    FabricSpec,
    RunSpec,
    Scenario,
    ScenarioError,
    StragglerSpec,
)

__all__ = ["MAX_GPUS", "EmulationSpec", "Experiment", "FabricSpec", "RunDescription", "RunSpec", "Scenario",
           "ScenarioError", "StragglerSpec", "check_experiment", "load_experiment", "load_scenario", "read_yaml", "resolve", "validate"]
