"""The directed links a simulation uses, numbered once across every configuration of a run
(:class:`LinkSpace`), and the error every simulator of this package raises
(:class:`SimulationError`).

Spec: ``docs/architecture.md`` (flow-level backend).
"""

from __future__ import annotations

import numpy as np

from emulation.fabric import Configuration, Fabric, Link
from emulation.routing import Routes


class SimulationError(RuntimeError):
    """The workload cannot be simulated (unroutable transfer, deadlock, bad inputs)."""


class LinkSpace:
    """The directed links of one fabric across every configuration a run uses, numbered once
    (a *global link id*, 0, 1, ... in order of first use), and the routes of each configuration.

    The fluid engine (:class:`~emulation.flowsim.engine.FluidEngine`) takes capacities per
    global id, so flows routed over different configurations (or different tenants' flows over
    one) share a link exactly when they cross the same physical link. Used by :func:`~emulation.flowsim.simulate.simulate`
    and :func:`emulation.flowsim.tenants.simulate_tenants`.

    Attributes: ``fabric``; ``ids`` (``{Link: global id}``); ``links`` (global id -> Link).
    """

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self.ids: dict[Link, int] = {}
        self.links: list[Link] = []
        self._cap: list[float] = []  # bytes/s of each global link
        self._cap_array = np.zeros(0)
        self._routes: dict[Configuration, tuple[Routes, np.ndarray]] = {}

    def routes(self, config: Configuration) -> tuple[Routes, np.ndarray]:
        """``(routes, gid)``: the :class:`~emulation.routing.Routes` over ``config`` (computed
        once per configuration) and ``gid``, an int64 array of shape ``(len(routes.links),)``:
        the global id of each of its links. ``config`` is not checked against the fabric
        (:meth:`~emulation.fabric.Fabric.check_configuration` does that)."""
        got = self._routes.get(config)
        if got is None:
            r = Routes(self.fabric, config, self.fabric.ports_per_gpu)
            gid = np.array([self._id(l) for l in r.links], dtype=np.int64)
            got = self._routes[config] = (r, gid)
        return got

    def _id(self, link: Link) -> int:
        i = self.ids.get(link)
        if i is None:
            i = self.ids[link] = len(self.links)
            self.links.append(link)
            self._cap.append(self.fabric.link_gbps(link) * 1e9 / 8)
        return i

    def capacity(self, gid: np.ndarray) -> np.ndarray:
        """Capacity of the global links ``gid`` (an int array of any shape): a float array of
        the same shape, bytes/s (each link's Gbit/s x 1e9 / 8).

        :raises IndexError: an id not yet given out by :meth:`routes`."""
        if self._cap_array.size != len(self._cap):
            self._cap_array = np.asarray(self._cap, dtype=float)
        return self._cap_array[gid]
