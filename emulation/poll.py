"""Polling with a deadline: the one loop every wait of the packet backend goes through."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout_s: float, on_timeout: Callable[[], BaseException], *,
               interval_s: float = 0.05) -> T:
    """Call ``condition()`` every ``interval_s`` seconds until it returns a true value, and
    return that value. ``condition`` may raise to abort the wait (a process died, ...).

    :param timeout_s: seconds (monotonic clock) after which ``on_timeout()`` is raised; the
        condition is always checked once more after the deadline passes.
    :raises BaseException: ``on_timeout()``'s exception, or whatever ``condition`` raises.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            raise on_timeout()
        time.sleep(interval_s)
