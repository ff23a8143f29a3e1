"""Real training jobs on the rack fabric, and GPU-failure recovery (LUMION, arXiv 2505.23105):
the training kind's package (its scenario model and wiring are :mod:`emulation.kinds.training`).

- :mod:`emulation.training.report`: the recovery timeline table and plot.

Elsewhere: the recovery runs, their figures and the result :mod:`emulation.torchjob.recoveries`, the
packet-level supervisor :mod:`emulation.torchjob.recovery`, the training program
:mod:`emulation.torchjob.train`, the flow backend's AllReduce prediction
:mod:`emulation.torchjob.predict`, the controller's failover app ``controllers/failover.py``.
"""
