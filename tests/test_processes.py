"""The suite's own way of running a command (tests/processes.py), which the background jobs use
from a thread of their own while the other tests run."""

from __future__ import annotations

import shutil
import sys

from compat.base.environment import environment
from tests.processes import churning_environment, run_bounded


def test_a_command_started_while_another_thread_changes_variables_starts() -> None:
    """A background job's command starts with an environment of its own. Given none, it read
    this process's environ while it started, and a test in another thread that set a variable
    then could free it under it: 860 of 914 starts failed with OSError "Bad address" in 20 s
    (measured, Python 3.11), and a job of the suite failed so once."""
    true = shutil.which("true")
    command = [true] if true else [sys.executable, "-c", ""]
    with churning_environment():  # the other thread
        for _ in range(40):
            assert run_bounded(command, 30).returncode == 0


def test_the_environment_is_copied_whole_while_another_thread_removes_variables() -> None:
    """compat.base.environment.environment() copies again where a variable was removed between the
    copy's listing of the names and its read of one: ``dict(os.environ)`` raised KeyError in
    1.2 % of copies while a thread changed variables without pause (measured)."""
    with churning_environment():
        copies = [environment() for _ in range(3000)]
    assert all("PATH" in copy for copy in copies)
