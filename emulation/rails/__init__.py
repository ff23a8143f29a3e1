"""Photonic rails (Opus, arXiv 2507.08119), the rails kind's package (its scenario model and
wiring are :mod:`emulation.kinds.rails`): the report of its results. The phase model is
:mod:`emulation.workloads.iteration`, the replay :mod:`emulation.flowsim.iteration`, the sweep
over it with its section and result :mod:`emulation.flowsim.rail_sweep`, the torch job on
emulated rails :mod:`emulation.torchjob.rails_job`, the grant rule :mod:`emulation.planners.opus`."""
