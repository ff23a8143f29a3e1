"""WAN traffic engineering (Symphony, arXiv 2510.11937): tunnels (:mod:`~emulation.wan.tunnels`)
and the TE formulations, as LPs and with Symphony's quadratic regulariser
(:mod:`~emulation.wan.te`). Topologies and traffic matrices: :mod:`topologies.wan`."""
