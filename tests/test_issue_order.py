"""compat.transport.issue_order: the thread that runs a window's asynchronous collectives in issue
order (IssueOrder), on its own: order, results, errors, draining and stopping. The collectives on it
are tested on real ranks in tests/ranks/shared_memory_cases.py (background-*)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from compat.base.errors import CollectiveTimeout
from compat.transport.issue_order import IssueOrder


def test_jobs_run_one_at_a_time_in_submission_order() -> None:
    order = IssueOrder("test-order")
    ran: list[int] = []
    running = threading.Lock()

    def job(index: int) -> None:
        assert running.acquire(blocking=False), "two jobs ran at once"
        time.sleep(0.002)
        ran.append(index)
        running.release()

    jobs = [order.submit(lambda index=index: job(index)) for index in range(20)]
    for pending in reversed(jobs):
        assert pending.wait() is True
    assert ran == list(range(20))
    assert all(pending.is_completed() for pending in jobs)
    assert order.idle()
    order.stop()


def test_a_job_that_raises_raises_in_wait_and_the_next_job_still_runs() -> None:
    order = IssueOrder("test-errors")

    def fails() -> None:
        raise CollectiveTimeout("rank 1 never came")

    failed, after = order.submit(fails), order.submit(lambda: None)
    with pytest.raises(CollectiveTimeout, match="rank 1 never came"):
        failed.wait()
    with pytest.raises(CollectiveTimeout):  # each wait raises it again, as torch's Work does
        failed.wait()
    assert after.wait() is True
    order.stop()


def test_wait_with_a_timeout_raises_while_the_job_runs_then_returns() -> None:
    order = IssueOrder("test-timeout")
    release = threading.Event()
    pending = order.submit(release.wait)
    assert not pending.is_completed()
    with pytest.raises(CollectiveTimeout, match=r"within the 0\.05 s given to Work\.wait"):
        pending.wait(timedelta(seconds=0.05))
    assert not order.idle()
    release.set()
    assert pending.wait(timedelta(seconds=10)) is True
    assert order.drain(10.0)
    order.stop()


def test_drain_gives_up_after_its_seconds_and_stop_ends_the_thread() -> None:
    order = IssueOrder("test-drain")
    release = threading.Event()
    order.submit(release.wait)
    assert not order.drain(0.05)
    release.set()
    order.stop()
    assert not [t for t in threading.enumerate() if t.name == "test-drain"]
