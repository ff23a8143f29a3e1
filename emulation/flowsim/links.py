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


def pair_counts(pairs, n: int, where: str) -> np.ndarray:
    """``(n, n)`` int64: how many of ``pairs`` (``(a, b)`` circuits of a configuration) join each
    directed GPU pair, for the executors of circuit schedules (time-slotted, parallel OCSes),
    whose links are the n x n directed pairs.

    :raises SimulationError: a circuit that is not a pair of ``n`` GPUs (``where`` names it).
    """
    m = np.zeros((n, n), dtype=np.int64)
    for a, b in pairs:
        if not (0 <= a < n and 0 <= b < n and a != b):
            raise SimulationError(f"{where}: circuit {a}-{b} is not a pair of {n} GPUs")
        m[a, b] += 1
    return m


class LinkSpace:
    """The directed links of one fabric across every configuration a run uses, numbered once
    (a *global link id*, 0, 1, ... in order of first use), and the routes of each configuration.

    The fluid engine (:class:`~emulation.flowsim.engine.FluidEngine`) takes capacities per
    global id, so flows routed over different configurations (or different tenants' flows over
    one) share a link exactly when they cross the same physical link. Used by
    :func:`~emulation.flowsim.simulate.simulate` and :func:`emulation.flowsim.tenants.simulate_tenants`.

    Attributes: ``fabric``; ``rows`` ((G, 4) int64: ``u, up, v, vp`` of every global link);
    ``count`` (G); ``links`` (global id -> :class:`~emulation.fabric.Link`, made on first use)
    and ``ids`` (``{Link: global id}``, likewise).
    """

    def __init__(self, fabric: Fabric):
        self.fabric = fabric
        self._parts: list[np.ndarray] = []  # rows of the links numbered so far, by batch
        self._rows = np.zeros((0, 4), dtype=np.int64)
        self._caps: list[np.ndarray] = []
        self._cap = np.zeros(0)
        self._links: list[Link] = []
        self.count = 0
        self._keys = np.zeros(0, dtype=np.int64)  # sorted keys of the links numbered so far
        self._gids = np.zeros(0, dtype=np.int64)  # their global ids
        self._routes: dict[Configuration, tuple[Routes, np.ndarray]] = {}
        f = fabric
        self._offset = np.concatenate([[0], np.cumsum([len(e.ports) for e in f.eps])]).astype(np.int64) \
            + f.gpus * f.ports_per_gpu
        self._eps_gbps = np.array([np.nan if e.port_gbps is None else e.port_gbps for e in f.eps] + [np.nan])

    def routes(self, config: Configuration) -> tuple[Routes, np.ndarray]:
        """``(routes, gid)``: the :class:`~emulation.routing.Routes` over ``config`` (computed
        once per configuration) and ``gid``, an int64 array of shape ``(len(routes.rows),)``:
        the global id of each of its links. ``config`` is not checked against the fabric
        (:meth:`~emulation.fabric.Fabric.check_configuration` does that)."""
        got = self._routes.get(config)
        if got is None:
            r = Routes(self.fabric, config, self.fabric.ports_per_gpu)
            got = self._routes[config] = (r, self._ids_of(r.rows))
        return got

    def _port(self, node: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Every port of the fabric numbered once: GPU ports, then each EPS's."""
        g = self.fabric.gpus
        return np.where(node < g, node * self.fabric.ports_per_gpu + p, self._offset[np.maximum(node - g, 0)] + p)

    def _ids_of(self, rows: np.ndarray) -> np.ndarray:
        """Global ids of the links ``rows`` ((L, 4)), new links numbered in their order."""
        key = self._port(rows[:, 0], rows[:, 1]) * int(self._offset[-1]) + self._port(rows[:, 2], rows[:, 3])
        gid = np.empty(key.size, dtype=np.int64)
        found = np.zeros(key.size, dtype=bool)
        if self._keys.size:
            pos = np.minimum(np.searchsorted(self._keys, key), self._keys.size - 1)
            found = self._keys[pos] == key
            gid[found] = self._gids[pos[found]]
        new = np.flatnonzero(~found)
        if new.size:
            gid[new] = self.count + np.arange(new.size)
            self.count += new.size
            self._parts.append(rows[new])
            self._caps.append(self._capacity_of(rows[new]))
            keys = np.concatenate([self._keys, key[new]])
            gids = np.concatenate([self._gids, gid[new]])
            order = np.argsort(keys, kind="stable")
            self._keys, self._gids = keys[order], gids[order]
        return gid

    def _capacity_of(self, rows: np.ndarray) -> np.ndarray:
        """Bytes/s of links ``rows``: an EPS's own rate if one end is an EPS that sets it, else
        the fabric's port rate (:meth:`~emulation.fabric.Fabric.link_gbps`)."""
        g, n_eps = self.fabric.gpus, len(self.fabric.eps)
        gbps = np.full(rows.shape[0], float(self.fabric.port_gbps))
        for col in (2, 0):  # the head's rate first, as Fabric.link_gbps looks at u then v
            node = rows[:, col]
            rate = self._eps_gbps[np.where(node >= g, node - g, n_eps)]
            gbps = np.where(np.isnan(rate), gbps, rate)
        return gbps * 1e9 / 8

    @property
    def rows(self) -> np.ndarray:
        """(G, 4) int64: ``u, up, v, vp`` of every global link."""
        if self._rows.shape[0] != self.count:
            self._rows = np.concatenate([self._rows] + self._parts)
            self._cap = np.concatenate([self._cap] + self._caps)
            self._parts, self._caps = [], []
        return self._rows

    @property
    def links(self) -> list[Link]:
        """Global id -> :class:`~emulation.fabric.Link` (made on first use)."""
        if len(self._links) != self.count:
            self._links += [Link(*r) for r in self.rows[len(self._links):].tolist()]
        return self._links

    @property
    def ids(self) -> dict[Link, int]:
        """``{Link: global id}`` (made on each use)."""
        return {l: i for i, l in enumerate(self.links)}

    def capacity(self, gid: np.ndarray) -> np.ndarray:
        """Capacity of the global links ``gid`` (an int array of any shape): a float array of
        the same shape, bytes/s (each link's Gbit/s x 1e9 / 8).

        :raises IndexError: an id not yet given out by :meth:`routes`."""
        self.rows  # noqa: B018 - gathers the capacities of the links numbered since
        return self._cap[gid]
