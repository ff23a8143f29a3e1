"""Flow backend: an event-driven fluid simulator of (Workload, Plan) on a fabric.

:func:`execute` runs one resolved run (:func:`simulate`: per-step plans, round-synchronous in
:mod:`emulation.flowsim.rounds` or dependency-driven in :mod:`emulation.flowsim.dependency`, each
step through :mod:`emulation.flowsim.steps`; :mod:`emulation.flowsim.slotted`: time-slotted
ones; :mod:`emulation.flowsim.parallel_ocs`: a schedule of parallel OCSes, each on its own clock);
:mod:`emulation.flowsim.engine` holds the fluid engine and :mod:`emulation.flowsim.maxmin` the
max-min fair allocation; :mod:`emulation.flowsim.limits` the memory model.

Spec: ``docs/architecture.md`` (flow-level backend), ``docs/flow-backend.md`` (at cluster scale).
"""

from emulation.flowsim.run import execute
from emulation.flowsim.simulate import SEMANTICS, SimulationError, simulate

__all__ = ["SEMANTICS", "SimulationError", "execute", "simulate"]
