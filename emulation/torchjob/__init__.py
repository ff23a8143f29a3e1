"""Everything of PyTorch: real ``torch.distributed`` programs, the launcher that runs them on the
emulated GPUs, and the gloo AllReduce benchmark with its flow prediction.

What runs inside the emulated GPUs (``python -m emulation.torchjob.<program>``, one process per
GPU host):

- :mod:`emulation.torchjob.allreduce_perf`: nccl-tests' ``all_reduce_perf`` for gloo;
- :mod:`emulation.torchjob.train`: data-parallel training with checkpoints, resume and warm
  standbys (the LUMION recovery runs);
- :mod:`emulation.torchjob.rails_train`: a TP/PP/DP job on photonic rails asking Opus for each
  phase's circuits, through :mod:`emulation.torchjob.opus_client`.

What drives them from the machine:

- :mod:`emulation.torchjob.launch`: :class:`~emulation.torchjob.launch.TorchJob` and
  :func:`~emulation.torchjob.launch.run_torch` start a program once per GPU host with the usual
  ``torchrun`` environment (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``) and
  ``GLOO_SOCKET_IFNAME`` set to the host's fabric interface, so every byte of the gloo backend
  crosses the emulated fabric; :func:`~emulation.torchjob.launch.tune_tcp` tunes TCP for it and
  :func:`~emulation.torchjob.launch.torch_available` says whether PyTorch is installed;
- :mod:`emulation.torchjob.rails_job`: the rails torch job on emulated photonic rails, one
  emulation per Opus control mode, beside the flow backend's replay of its trace;
- :mod:`emulation.torchjob.perf`: ``ocslab torch allreduce-perf``, the benchmark on a ring of
  circuits against the flow backend's prediction;
- :mod:`emulation.torchjob.predict`: the flow backend's time of gloo's ring AllReduce on a
  fabric, a configuration and a placement, and the per-message latency fitted to a measurement.
- :mod:`emulation.torchjob.recoveries`: the training job's GPU-failure recoveries (LUMION), one
  supervised run each (:mod:`emulation.torchjob.recovery`), summarised into typed records with
  the flow prediction of every configuration's AllReduce.

This package is core: scenario kinds (training, rails) import it, it imports no kind.
PyTorch is an optional extra (``pip install torch==2.13.0``); nothing here imports it at module
import time.

Spec: ``docs/mechanisms.md`` (LUMION, Opus), ``docs/architecture.md`` (packet-level backend).
"""
