"""WAN traffic engineering (Symphony, arXiv 2510.11937) as a scenario kind (its scenario model and wiring are
:mod:`emulation.kinds.wan`): slicing, the
divergence experiment, the flow-level run and the packet emulation. The tunnels
(:mod:`emulation.planners.tunnels`) and the TE formulations, as LPs and with Symphony's quadratic
regulariser (:mod:`emulation.planners.te`), are planners; topologies and traffic matrices:
:mod:`topologies.wan`."""
