"""Fabric builders (pure data) and Mininet ``Topo`` adapters (``topologies.mininet_topos``).

Importing this package builds nothing and does not import Mininet.
"""

from topologies.builders import BUILDERS, eps_star, ocs_star, ring_pairs, static_ring

__all__ = ["BUILDERS", "eps_star", "ocs_star", "ring_pairs", "static_ring"]
