"""The thread that runs a shared-memory window's asynchronous collectives one at a time, in the
order they were issued (compat.transport.shared_memory.SharedWindow.run)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import timedelta

from compat.base.errors import CollectiveTimeout


class _Job:
    """One collective run on a window's thread, as the pending handle of its Work."""

    __slots__ = ("_done", "_error", "_run")

    def __init__(self, run: Callable[[], object]) -> None:
        self._run = run
        self._done = threading.Event()
        self._error: BaseException | None = None

    def execute(self) -> None:
        try:
            self._run()
        except BaseException as error:  # raised to whoever waits, as a backend's Work would
            self._error = error
        finally:
            self._done.set()

    def wait(self, timeout: timedelta | None = None) -> bool:
        seconds = None if timeout is None else timeout.total_seconds()
        if not self._done.wait(seconds):
            raise CollectiveTimeout(
                f"a collective through shared memory did not complete within the {seconds:g} s "
                "given to Work.wait"
            )
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return self._done.is_set()


class IssueOrder:
    """A daemon thread that runs a window's collectives one at a time, in the order they were
    submitted: every rank submits a group's collectives in the same order, so every rank's
    thread meets its peers' in the same rounds."""

    def __init__(self, name: str) -> None:
        self._jobs: deque[_Job] = deque()  # the running job stays first until it has ended
        self._changed = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def idle(self) -> bool:
        """Nothing submitted is still to run (read by the one thread that submits)."""
        return not self._jobs

    def submit(self, run: Callable[[], object]) -> _Job:
        job = _Job(run)
        with self._changed:
            self._jobs.append(job)
            self._changed.notify_all()
        return job

    def drain(self, seconds: float) -> bool:
        """Wait at most ``seconds`` for every submitted job to end; True if they have."""
        deadline = time.monotonic() + seconds
        with self._changed:
            while self._jobs:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def stop(self) -> None:
        """End the thread once the jobs still submitted have run."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._thread.join()

    def _serve(self) -> None:
        while True:
            with self._changed:
                while not self._jobs and not self._stopping:
                    self._changed.wait()
                if not self._jobs:
                    return
                job = self._jobs[0]
            job.execute()
            with self._changed:
                self._jobs.popleft()
                self._changed.notify_all()
