"""Run the points of a sweep one after another, on a pool of local processes, or on a Dask
cluster, with the same code and the same results.

A sweep is a function and a list of points (R values, sizes, seeds, traffic matrices, ...):
``map_points(fn, points, engine=...)`` returns ``[fn(p) for p in points]`` in order on every
engine. The points must be independent and ``fn`` deterministic (the flow backend is), so the
engine changes the wall time only.

Engines:

- ``serial``: in this process.
- ``processes``: :class:`concurrent.futures.ProcessPoolExecutor` with ``workers`` processes
  (default: the machine's cores). ``fn`` and the points must pickle (a module-level function).
- ``dask``: Dask's distributed scheduler (install ``.[cluster]``). With ``address`` (e.g.
  ``tcp://10.0.0.5:8786``, a scheduler started with ``dask scheduler`` and workers with ``dask
  worker tcp://10.0.0.5:8786``, each able to ``import emulation``) the points run on that
  cluster; without, on a local cluster of ``workers`` single-threaded processes started and
  stopped here. Functions defined in a script are shipped by value (cloudpickle).

Why Dask rather than Ray: both would do; Dask's scheduler is a pure-Python package that starts a
local cluster in about a second on a 2-core machine and needs no daemon, which fits a test.
"""

from __future__ import annotations

import sys
import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

P = TypeVar("P")
R = TypeVar("R")

ENGINES = ("serial", "processes", "dask")


def map_points(fn: Callable[[P], R], points: Sequence[P], *, engine: str = "serial", workers: int | None = None,
               address: str | None = None) -> list[R]:
    """``[fn(p) for p in points]`` on ``engine`` (module doc), in the points' order.

    :param workers: processes for ``processes`` and a local ``dask`` cluster (default: cores).
    :param address: a Dask scheduler's address (``dask`` only; None starts a local cluster).
    :raises ValueError: an unknown engine, ``workers`` < 1, or ``address`` without ``dask``.
    :raises ImportError: ``dask`` without the distributed package (``pip install -e .[cluster]``).
    Whatever ``fn`` raises for a point is raised here.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine: unknown {engine!r} (known: {', '.join(ENGINES)})")
    if workers is not None and workers < 1:
        raise ValueError(f"workers: {workers} (at least 1)")
    if address is not None and engine != "dask":
        raise ValueError("address: only the dask engine takes a cluster address")
    points = list(points)
    if engine == "serial" or not points:
        return [fn(p) for p in points]
    n = workers or os.cpu_count() or 1
    if engine == "processes":
        with ProcessPoolExecutor(max_workers=min(n, len(points))) as pool:
            return list(pool.map(fn, points))
    return _dask(fn, points, n, address)


def _dask(fn: Callable[[Any], Any], points: list, workers: int, address: str | None) -> list:
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise ImportError(f"engine dask: the distributed package is not installed ({sys.executable} -m pip install -e .[cluster])") from None
    if address is not None:
        with Client(address) as client:
            return client.gather(client.map(fn, points, pure=False))
    with tempfile.TemporaryDirectory(prefix="ocslab-dask-") as scratch, \
            dask.config.set({"temporary-directory": scratch}), LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                         local_directory=scratch) as cluster, Client(cluster) as client:
        return client.gather(client.map(fn, points, pure=False))


def add_engine_arguments(parser) -> None:
    """``--engine``, ``--workers`` and ``--address`` on an argparse parser (for the scripts)."""
    parser.add_argument("--engine", choices=ENGINES, default="serial",
                        help="run the sweep's points serially, on local processes or on a Dask cluster")
    parser.add_argument("--workers", type=int, default=None, help="processes (default: the machine's cores)")
    parser.add_argument("--address", default=None, help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 "
                                                        "(--engine dask; default: a local cluster)")
