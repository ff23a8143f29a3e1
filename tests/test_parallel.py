"""One sweep API on three engines (emulation.parallel): a PCCL sweep's points give the same
numbers serially, on a local process pool and on a local Dask cluster."""

from __future__ import annotations

import pytest

from emulation.parallel import map_points
from emulation.planners import CostModel
from emulation.sweep import static_and_dp

MODEL = CostModel(alpha_s=1e-6, delta_s=0.5e-6)
POINTS = [(base, ports, 16, size, alg, [1e-7, 1e-5, 1e-3], MODEL, 400.0)
          for base, ports in (("ring", 2), ("torus", 4)) for size in (64 << 10, 16 << 20) for alg in ("ring", "rhd")]


def _numbers(results) -> list[tuple]:
    return [(s.time_s, s.method, *[(p.time_s, p.reconfigurations, p.steps) for p in dp]) for s, dp in results]


def test_serial_processes_and_dask_give_the_same_numbers_in_order():
    serial = _numbers(map_points(static_and_dp, POINTS))
    assert len(serial) == 8 and len({t[0] for t in serial}) > 4  # the points differ
    # the dp plan at the smallest R beats the static algorithm somewhere (a sweep with content)
    assert any(t[2][0] < t[0] for t in serial)
    assert _numbers(map_points(static_and_dp, POINTS, engine="processes", workers=2)) == serial
    assert _numbers(map_points(static_and_dp, POINTS, engine="dask", workers=2)) == serial


def test_bad_engine_arguments_name_the_field():
    with pytest.raises(ValueError, match="engine: unknown 'spark'"):
        map_points(abs, [1], engine="spark")
    with pytest.raises(ValueError, match="workers: 0"):
        map_points(abs, [1], engine="processes", workers=0)
    with pytest.raises(ValueError, match="address"):
        map_points(abs, [1], engine="processes", address="tcp://127.0.0.1:8786")
    assert map_points(abs, [-3, 2, -1], engine="processes", workers=2) == [3, 2, 1]
