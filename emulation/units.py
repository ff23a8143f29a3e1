"""Units: byte sizes as users write them, and link rates in bytes per second.

Rates are Gbit/s (real fabrics) or Mbit/s (emulated links) in scenario files and results;
simulators and planners work in bytes per second (``bytes_per_s``). Sizes are bytes: ``25MiB``,
``1 GiB``, ``4096``: binary KiB/MiB/GiB/TiB (2^10, 2^20, ...) and decimal KB/MB/GB/TB (10^3,
10^6, ...), as IEC 80000-13 defines them, in any case (``25mib``). A bare ``64M`` could be either
and is refused, naming both.
"""

from __future__ import annotations

import re
from typing import Any

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_bytes(value: Any) -> int:
    """``25MiB`` / ``1 GiB`` / ``64MB`` / ``4096`` -> bytes (int) (module doc).

    :raises ValueError: not a size, not positive, or a bare ``64M`` (the line names both readings)."""
    if isinstance(value, bool):
        raise ValueError(f"not a byte size: {value!r}")
    if isinstance(value, int):
        n = value
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B|B)?\s*", str(value), re.I)
        if not m:
            bare = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT])i?\s*", str(value), re.I)
            if bare:  # 64M, 64Mi: say which it could mean instead of guessing
                n, u = bare.group(1), bare.group(2).upper()
                raise ValueError(f"{value!r} has no unit ocslab reads: write {n}{u}iB ({n} x 2^"
                                 f"{10 * 'KMGT'.index(u) + 10}) or {n}{u}B ({n} x 10^{3 * 'KMGT'.index(u) + 3})")
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

