"""The life cycle every emulation shares: build on ``with``, always tear down.

An emulation (:class:`emulation.emulator.net.EmulatedFabric`, :class:`emulation.emulator.wan_net.WanNet`)
creates processes, bridges and interfaces on the machine and holds its run lock
(:mod:`emulation.emulator.registry`). :class:`Lifecycle` makes the ``with`` block the only way in:
``__enter__`` turns SIGTERM into :class:`KeyboardInterrupt` (so a ``kill`` runs the teardown
too), builds, and tears down what was built if the build fails; ``__exit__`` ignores a second
Ctrl-C while it tears down, then releases the run lock and restores the signal handlers, whatever
the teardown raised.
"""

from __future__ import annotations

import signal
import sys


def raise_interrupt(signum, frame):
    """A signal handler that turns SIGTERM into KeyboardInterrupt (so teardown runs)."""
    raise KeyboardInterrupt(f"signal {signum}")


class Lifecycle:
    """Base of an emulation's context manager (module doc). Subclasses write :meth:`_start`
    (which sets ``self.registration`` when it claims the machine) and :meth:`_teardown`
    (which must cope with a partial start)."""

    registration = None  # emulation.emulator.registry.Registration, once claimed
    _old_term = None

    def __enter__(self):
        self._old_term = signal.signal(signal.SIGTERM, raise_interrupt)
        try:
            self._start()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc) -> None:
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut teardown
        try:
            self._teardown()
        finally:
            if self.registration is not None:
                self.registration.release()
                self.registration = None
            signal.signal(signal.SIGINT, old_int)
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)
                self._old_term = None

    def _start(self) -> None:
        """Build the emulation (claiming the machine first)."""
        raise NotImplementedError

    def _teardown(self) -> None:
        """Remove everything :meth:`_start` made, however far it got."""
        raise NotImplementedError
