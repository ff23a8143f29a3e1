"""WAN traffic engineering (Symphony, arXiv 2510.11937) as a scenario kind: what is the kind's own
besides its scenario model and wiring (:mod:`emulation.kinds.wan`): its report
(:mod:`emulation.wan.report`).

Its mechanisms live in their layers: tunnels, TE formulations, slicing and the divergence
experiment are planners (:mod:`emulation.planners.tunnels`, :mod:`emulation.planners.te`,
:mod:`emulation.planners.slicing`, :mod:`emulation.planners.divergence`); the ``wan:`` section, the set-up,
the interval records both backends share and the result are :mod:`emulation.te_intervals`; the flow model is
:mod:`emulation.flowsim.wan`; the packet replay is :mod:`emulation.emulator.wan_replay` (routers:
:mod:`emulation.emulator.wan_net`, traffic generators: :mod:`emulation.emulator.wan_traffic`);
topologies and traffic matrices: :mod:`topologies.wan`."""
