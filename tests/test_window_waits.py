"""How a shared-memory window's ranks wait for each other (compat.transport.shared_memory), on one
process: a window of two ranks over anonymous memory, the peer's arrival written by the test.
The collectives through windows are tested on real ranks in tests/ranks/shared_memory_cases.py.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
import threading
import time
from collections.abc import Callable

import pytest

from compat.transport import backoff, mailbox, shared_memory
from compat.transport.shared_memory import FLAG_BYTES, SharedWindow

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or not shared_memory.waits_in_memory(),
    reason="timer slack is Linux's (prctl), and ranks wait in memory on x86 only: not this host",
)


class _Adapter:
    def collective_timeout(self) -> float:
        return 5.0

    def group_ranks(self, group: object) -> list[int]:
        return [0, 1]


def _window() -> SharedWindow:
    slot = 4096
    maps = [mmap.mmap(-1, FLAG_BYTES + 2 * slot) for _ in range(2)]
    window = SharedWindow(_Adapter(), None, maps, 0)  # type: ignore[arg-type]
    window._yields = 0  # sleep at once
    return window


def test_timer_slack_is_set_and_the_previous_returned() -> None:
    before = backoff.timer_slack(2000)
    try:
        assert before > 0
        assert backoff.timer_slack(before) == 2000
    finally:
        backoff.timer_slack(before)


def _in_this_thread(stand_in: Callable[[float], None]) -> Callable[[float], None]:
    """``time.sleep`` for the test: ``stand_in`` in this thread, the real sleep in every other
    (backoff.time is the time module itself, and make test's background rank jobs poll from
    threads of this process: one of their sleeps, with the default 50 us slack, once reached a
    test's stand-in and failed it)."""
    sleep, mine = time.sleep, threading.get_ident()

    def sleeping(seconds: float) -> None:
        (stand_in if threading.get_ident() == mine else sleep)(seconds)

    return sleeping


def test_a_sleeping_wait_tightens_the_timer_slack_and_puts_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Linux lets a sleep overrun by the thread's timer slack (50 us by default, which made a
    10 us sleep take 63 us): the wait sleeps with 1 us of slack, and the thread has its own back
    once the wait ends."""
    window = _window()
    peer_arrivals = window._arrivals[1]
    seen: list[int] = []

    def sleep(seconds: float) -> None:
        seen.append(backoff.timer_slack(backoff.SLEEP_SLACK_NS))
        if len(seen) == 3:
            peer_arrivals[0] = 1  # the peer arrives while this rank sleeps

    monkeypatch.setattr(backoff.time, "sleep", _in_this_thread(sleep))
    own = backoff.timer_slack(40_000)
    try:
        slots = window.publish()
        assert len(slots) == 2
        assert seen == [backoff.SLEEP_SLACK_NS] * 3, seen
        assert backoff.timer_slack(own) == 40_000, "the thread's slack was not put back"
    finally:
        backoff.timer_slack(own)


def test_a_wait_that_times_out_puts_the_timer_slack_back(monkeypatch: pytest.MonkeyPatch) -> None:
    window = _window()
    window.timeout = 0.0  # the peer never arrives: the first sleep's check gives up
    monkeypatch.setattr(backoff.time, "sleep", _in_this_thread(lambda seconds: None))
    own = backoff.timer_slack(30_000)
    try:
        with pytest.raises(shared_memory.CollectiveTimeout, match="did not reach it"):
            window.publish()
        assert backoff.timer_slack(own) == 30_000
    finally:
        backoff.timer_slack(own)


def test_more_ranks_than_cores_yield_a_few_times_before_sleeping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A sleep costs 25-45 us of CPU time on this machine against 1 us for a yield: with more
    # ranks than cores the waits still yield a few times first (docs/performance.md).
    monkeypatch.setattr(shared_memory, "_cores", lambda: 2)
    assert shared_memory.yields_for(2) == shared_memory._YIELDS
    assert 0 < shared_memory.yields_for(3) == shared_memory._YIELDS_OVERSUBSCRIBED
    assert shared_memory.yields_for(3) < shared_memory._YIELDS


def test_opening_point_to_point_makes_the_mailbox_then_meets_the_peers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mailbox counts, when it is made, the peers whose large messages it reads directly: the
    window makes it, then waits for every peer (a round), so that no rank sends before its
    receivers have counted it (such a send streamed through the ring)."""
    slot, channel = 4096, shared_memory.channel_bytes(2)
    size = shared_memory.file_bytes(2, slot, channel)
    maps = [mmap.mmap(-1, size) for _ in range(2)]
    for rank, mapped in enumerate(maps):  # each "process" is this one
        mapped[mailbox.MARKER : mailbox.MARKER + 8] = bytes([rank + 1] * 8)
    processes = [(os.getpid(), ctypes.addressof(ctypes.c_char.from_buffer(m))) for m in maps]
    window = SharedWindow(_Adapter(), None, maps, 0, (), slot, channel, processes)  # type: ignore[arg-type]
    window._yields = 0  # sleep at once
    seen: list[bool] = []

    def sleep(seconds: float) -> None:
        made = window._mailbox
        seen.append(made is not None and made.reads_directly_from(1))
        if len(seen) == 2:
            window._arrivals[1][0] = 1  # the peer arrives

    monkeypatch.setattr(backoff.time, "sleep", _in_this_thread(sleep))
    window.open_point_to_point()
    assert seen == [True, True], "it did not wait for the peer with its mailbox made"
    assert window.point_to_point and window.rounds == 1
    window.close()
