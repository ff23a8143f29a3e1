"""What the emulation tests poll for while a run goes on (shared by tests/test_lifecycle.py and
tests/test_cluster.py)."""

from __future__ import annotations

from pathlib import Path

from emulation.emulator.registry import marked_processes


def agents_running() -> bool:
    """A GPU agent of some run is alive (on this machine, or on a lab server of it, whose
    processes are this machine's)."""
    for pid in marked_processes():
        try:
            if b"emulation.emulator.agent" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            pass
    return False
