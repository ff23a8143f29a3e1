"""Photonic rails (Opus, arXiv 2507.08119), the rails kind's package (its scenario model and
wiring are :mod:`emulation.kinds.rails`): the sweep on the flow backend, the torch job on
emulated rails and their report. The phase model is :mod:`emulation.workloads.iteration`, the
replay :mod:`emulation.flowsim.iteration`, the grant rule :mod:`emulation.planners.opus`."""
