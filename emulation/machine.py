"""Facts about this machine that bound what ocslab can run on it (read on demand, never cached)."""

from __future__ import annotations


def available_memory() -> int:
    """``MemAvailable`` from ``/proc/meminfo`` (bytes), 0 if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
