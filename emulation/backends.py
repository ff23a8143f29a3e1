"""The two backends' names, written once: ``packet`` (real packets through Open vSwitch in
Mininet's namespaces, :mod:`emulation.emulator`) and ``flow`` (the flow-level simulator,
:mod:`emulation.flowsim`).

``mininet``, the packet backend's earlier name, is still accepted: as ``--backend``'s
value silently, in a scenario file with a one-line deprecation warning, and in a result written
before the rename as it was meant.
"""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from pydantic import BeforeValidator

PACKET = "packet"
FLOW = "flow"
#: Every backend, as ``--backend`` lists them.
BACKENDS = (PACKET, FLOW)
#: Old names of a backend: ``{old: name}``.
ALIASES = {"mininet": PACKET}

log = logging.getLogger("ocslab")


def canonical(name: str) -> str:
    """``name`` with an old spelling (:data:`ALIASES`) replaced; any other value as given (the
    field's own check refuses what is unknown)."""
    return ALIASES.get(name, name) if isinstance(name, str) else name


def _from_scenario(name):
    if isinstance(name, str) and name in ALIASES:
        log.warning(f"backend: {name} is deprecated: it is read as {ALIASES[name]} (write that)")
    return canonical(name)


#: A scenario file's ``backend:`` (an old spelling loads with a one-line warning).
ScenarioBackend = Annotated[Literal["packet", "flow"], BeforeValidator(_from_scenario)]
#: A result's ``backend`` (one written before the rename reads as it was meant).
ResultBackend = Annotated[Literal["packet", "flow"], BeforeValidator(canonical)]
#: An envelope's ``backend``: a result's, or ``both`` for a kind that runs the two side by side.
EnvelopeBackend = Annotated[Literal["packet", "flow", "both"], BeforeValidator(canonical)]
