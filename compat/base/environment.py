"""This process's environment: a copy for a child process, and what launchers set in it."""

from __future__ import annotations

import os

from compat.base import tables


def environment() -> dict[str, str]:
    """A copy of this process's environment variables, to start a child process with.

    Never start one with none (``env=None``): the child then reads this process's live
    ``environ`` as it starts, and another thread that sets a variable meanwhile may free it
    under the child, whose ``execve`` fails with EFAULT ("Bad address"; Python 3.11 starts
    children with vfork, and most starts failed while another thread changed variables)."""
    while True:
        try:
            return dict(os.environ)
        except KeyError:
            # Another thread removed a variable between the copy's listing of the names and
            # its read of that one: copy again.
            continue


def local_rank(framework: str) -> int | None:
    """This process's rank on its node as a launcher gives it (``local_rank_env`` in
    frameworks.toml, the first one set), or None where no launcher said."""
    for name in tables.lookup("frameworks", framework).get("local_rank_env", []):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None
