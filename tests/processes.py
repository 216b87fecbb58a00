"""Run a command under a hard timeout that kills its whole process group (no orphaned ranks)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence


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
        env=dict(env) if env is not None else None,
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
