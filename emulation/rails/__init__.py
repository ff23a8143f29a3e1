"""Photonic rails (Opus, arXiv 2507.08119): rail scenarios, their sweep on the flow backend and
its report. The phase model is :mod:`emulation.workloads.iteration`, the replay
:mod:`emulation.flowsim.iteration`."""
