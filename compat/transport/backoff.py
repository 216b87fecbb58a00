"""How a rank waits for its peers in shared memory (compat.transport.shared_memory's rounds,
compat.transport.mailbox's
messages): polls that yield the CPU, then sleeps ever longer with the thread's timer slack
lowered."""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import time
from collections.abc import Callable

_SHORTEST_SLEEP, _LONGEST_SLEEP = 1e-5, 1e-3
#: The timer slack (ns) of a thread while its wait sleeps: Linux lets a sleep overrun by the
#: thread's slack, by default several times the shortest sleep. Put back when the wait ends.
SLEEP_SLACK_NS = 1000


class Backoff:
    """How a rank waits for its peers between two looks at the shared memory: polls that yield
    the CPU (``yields`` of them), then sleeps ever longer (each _SHORTEST_SLEEP more, up to
    _LONGEST_SLEEP), with the thread's timer slack lowered while it sleeps (put back on leaving
    the block)."""

    __slots__ = ("_polls", "_slack", "_yields")
    _slack: int | None

    def __init__(self, yields: int) -> None:
        # the thread's own slack once lowered (0: it could not be read), None before
        self._polls, self._yields, self._slack = 0, yields, None

    def __enter__(self) -> Backoff:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._slack:
            timer_slack(self._slack)

    def pause(self) -> None:
        self._polls += 1
        if self._polls <= self._yields:
            os.sched_yield()
            return
        if self._slack is None:
            self._slack = timer_slack(SLEEP_SLACK_NS)
        time.sleep(min(_LONGEST_SLEEP, _SHORTEST_SLEEP * (self._polls - self._yields)))


def timer_slack(nanoseconds: int) -> int:
    """Set the calling thread's timer slack; return the one it had (0 where it cannot be set:
    not Linux). Linux's prctl, through ctypes."""
    prctl = _prctl()
    if prctl is None:
        return 0
    previous: int = prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0)
    prctl(_PR_SET_TIMERSLACK, nanoseconds, 0, 0, 0)
    return previous if previous > 0 else 0


_PR_SET_TIMERSLACK, _PR_GET_TIMERSLACK = 29, 30  # linux/prctl.h


@functools.cache
def _prctl() -> Callable[..., int] | None:
    if platform.system() != "Linux":
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None
    return prctl
