"""Real training jobs on the rack fabric, and GPU-failure recovery (LUMION, arXiv 2505.23105):
the training kind's package (its scenario model and wiring are :mod:`emulation.kinds.training`).

- :mod:`emulation.training.predict`: the flow backend's AllReduce time of the job's gradients
  on every configuration the job runs on;
- :mod:`emulation.training.run`: run every recovery of a scenario and summarise it;
- :mod:`emulation.training.report`: the recovery timeline table and plot.

The packet-level supervisor lives in :mod:`emulation.emulator.recovery`, the training program
in :mod:`emulation.torchjob.train`, the controller's failover app in ``controllers/failover.py``.
"""
