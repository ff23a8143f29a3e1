"""What the packet backend raises when a fabric cannot be brought up or run, and when this
machine cannot run one at all (the orchestrator's modules share them; :mod:`emulation.output`
maps them to exit statuses by name)."""

from __future__ import annotations


class EmulationError(RuntimeError):
    """The emulated fabric could not be brought up (missing tool, controller did not start, ...)."""


class MachineUnfit(EmulationError):
    """This machine cannot run the packet backend at all (not root, no Mininet, Open vSwitch not
    running): refused before anything started (exit status 2)."""


class MachineBusy(EmulationError):
    """Another emulation holds this machine, or a killed run left state behind (the message
    names the holder, or says to run ``ocslab clean``); raised before anything is created."""
