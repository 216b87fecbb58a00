"""Run a command under a hard timeout that kills its whole process group (no orphaned ranks)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence

from compat.base.environment import environment


def run_bounded(
    argv: Sequence[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Never none: a test in another thread may set a variable as the child starts (see
        # compat.base.environment; tests/test_processes.py).
        env=environment() if env is None else dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        try:
            stdout, stderr = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            # A grandchild in a session of its own (torchrun's workers) still holds the pipes.
            stdout, stderr = "", "(the output could not be read: a child process kept it open)"
        raise AssertionError(
            f"{argv[0]} did not finish within {timeout} s\n{stdout[-2000:]}\n{stderr[-2000:]}"
        ) from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@contextlib.contextmanager
def churning_environment() -> Iterator[None]:
    """While inside, another thread sets and removes variables of this process's environment
    without pause, as a test's ``monkeypatch.setenv`` does beside the background jobs."""
    stop = threading.Event()

    def churn() -> None:
        round_ = 0
        while not stop.is_set():
            names = [f"COMPAT_TEST_CHURN_{round_}_{index}" for index in range(50)]
            for name in names:
                os.environ[name] = "x" * 16
            for name in names:
                del os.environ[name]
            round_ += 1

    thread = threading.Thread(target=churn, name="compat-test-churn", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
