"""Units: byte sizes as users write them, and link rates in bytes per second.

Rates are Gbit/s (real fabrics) or Mbit/s (emulated links) in scenario files and results;
simulators and planners work in bytes per second (``bytes_per_s``). Sizes are bytes: ``25MiB``,
``1 GiB``, ``4096`` (binary KiB/MiB/GiB, decimal KB/MB/GB).
"""

from __future__ import annotations

import re
from typing import Any

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_bytes(value: Any) -> int:
    """``25MiB`` / ``1 GiB`` / ``4096`` -> bytes (int). :raises ValueError: not a size."""
    if isinstance(value, bool):
        raise ValueError(f"not a byte size: {value!r}")
    if isinstance(value, int):
        n = value
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMG]i?B|B)?\s*", str(value), re.I)
        if not m:
            raise ValueError(f"not a byte size: {value!r} (e.g. 4096, 64KiB, 25MiB, 1GiB)")
        n = int(float(m.group(1)) * _UNITS[(m.group(2) or "").upper()])
    if n < 1:
        raise ValueError(f"byte size must be positive, got {value!r}")
    return n


def format_bytes(n: int) -> str:
    """Human form: ``26214400`` -> ``25MiB``."""
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= f and n % f == 0:
            return f"{n // f}{unit}"
    return f"{n}B"


def bytes_per_s(gbps: float) -> float:
    """A rate in Gbit/s as bytes per second."""
    return gbps * 1e9 / 8

