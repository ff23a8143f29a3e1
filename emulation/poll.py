"""Polling with a deadline: the one loop every wait of the packet backend goes through."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_until(condition: Callable[[], T], timeout_s: float, *, interval_s: float = 0.05) -> T | None:
    """Call ``condition()`` every ``interval_s`` seconds until it returns a true value, and
    return that value; None once ``timeout_s`` seconds (monotonic clock) have passed. The
    condition is always checked once more after the deadline; it may raise to abort the wait."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            return None
        time.sleep(interval_s)


def wait_until(condition: Callable[[], T], timeout_s: float, on_timeout: Callable[[], BaseException], *,
               interval_s: float = 0.05) -> T:
    """:func:`poll_until`, raising ``on_timeout()`` if the time runs out.

    :raises BaseException: ``on_timeout()``'s exception, or whatever ``condition`` raises.
    """
    got = poll_until(condition, timeout_s, interval_s=interval_s)
    if not got:
        raise on_timeout()
    return got
