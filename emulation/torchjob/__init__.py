"""Real ``torch.distributed`` programs that run on the emulated GPUs (the ``torch`` driver).

Each program is started once per GPU host (``python -m emulation.torchjob.<program>``) by
:func:`emulation.emulator.torchrun.run_torch`, with the usual ``torchrun`` environment
(``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``) and ``GLOO_SOCKET_IFNAME`` set to
the host's fabric interface, so every byte of the gloo backend crosses the emulated fabric.
PyTorch is an optional extra (``pip install torch==2.13.0``); nothing here imports it at
module import time.

Spec: ``docs/mechanisms.md``, LUMION.
"""
