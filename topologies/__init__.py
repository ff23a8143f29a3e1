"""Fabric builders (pure data) and Mininet ``Topo`` adapters (``topologies.mininet_topos``).

Importing this package builds nothing and does not import Mininet. :mod:`topologies.wan` and
:mod:`topologies.rail_network` (one rail as the flow replay times it) are imported by name: they
need numpy, which ``mn --custom`` (the system Python) may not have.
"""

from topologies.builders import (
    BUILDERS,
    eps_star,
    ocs_star,
    parallel_ocs,
    rack,
    rails,
    ring_pairs,
    static_ring,
    static_torus,
    torus_dims,
    torus_pairs,
)

__all__ = ["BUILDERS", "eps_star", "ocs_star", "parallel_ocs", "rack", "rails", "ring_pairs", "static_ring", "static_torus", "torus_dims", "torus_pairs"]
