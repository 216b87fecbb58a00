"""``compat launch``: start N local ranks of a script with the environment its framework expects.

torch: the variables torchrun sets (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ...). MindSpore: a scheduler process plus N workers with ``MS_ROLE``,
``MS_NODE_ID``, ``MS_SCHED_HOST``, ``MS_SCHED_PORT`` and ``MS_WORKER_NUM``, as msrun sets them.
Each rank's output is prefixed with ``[rank i]``. When a rank fails, the others are stopped and
the launch returns that rank's exit code; ``timeout`` stops a job that hangs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from compat import tables
from compat._net import free_port
from compat.dispatch import choose_framework, frameworks

__all__ = ["FAILURE_GRACE_SECONDS", "TIMEOUT_EXIT_CODE", "free_port", "launch", "rank_environments"]

TIMEOUT_EXIT_CODE = 124
# After a rank fails, how long the others may take to fail too before they are stopped.
FAILURE_GRACE_SECONDS = 3.0


def _fill(templates: Mapping[str, str], **fields: object) -> dict[str, str]:
    return {name: value.format(**fields) for name, value in templates.items()}


def rank_environments(framework: str, nprocs: int, port: int) -> list[dict[str, str]]:
    """The environment of each rank (and, for a framework with a scheduler, of the scheduler,
    last), from ``[<framework>.launch]`` in ``mapping_tables/frameworks.toml``."""
    known = frameworks()
    if framework not in known:
        raise ValueError(f"framework: expected one of {known}; got {framework!r}")
    spec = tables.lookup("frameworks", framework, "launch")
    common = _fill(spec["env"], world=nprocs, port=port)
    envs = [
        {**common, **_fill(spec["rank_env"], rank=rank, local_rank=rank, world=nprocs, port=port)}
        for rank in range(nprocs)
    ]
    if "scheduler" in spec:
        envs.append({**common, **_fill(spec["scheduler"]["env"], world=nprocs, port=port)})
    return envs


def _scheduler_code(framework: str) -> str | None:
    """The ``python -c`` code of the framework's scheduler process, if it has one."""
    scheduler = tables.lookup("frameworks", framework, "launch").get("scheduler")
    return None if scheduler is None else str(scheduler["code"])


@dataclass
class _Process:
    label: str
    popen: subprocess.Popen[str]
    is_rank: bool
    pump: threading.Thread = field(init=False)
    # When it last wrote (its traceback, if it failed), or when its output closed if it never
    # wrote: tells which rank failed first when several have failed by the time the launcher
    # looks. Exit times do not: a failing rank's teardown (e.g. destroying its process group)
    # can make the others fail and exit before it does.
    last_words: float = float("inf")


def _pump(process: _Process, sink: TextIO, lock: threading.Lock, quiet: bool) -> None:
    assert process.popen.stdout is not None
    for line in process.popen.stdout:
        process.last_words = time.monotonic()
        if quiet:
            continue
        with lock:
            sink.write(
                f"[{process.label}] {line}"
                if line.endswith("\n")
                else f"[{process.label}] {line}\n"
            )
            sink.flush()
    if process.last_words == float("inf"):
        process.last_words = time.monotonic()


def _stop(processes: Sequence[_Process], grace: float = 3.0) -> None:
    for process in processes:
        if process.popen.poll() is None:
            try:
                os.killpg(process.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for process in processes:
        remaining = max(0.0, deadline - time.monotonic())
        try:
            process.popen.wait(remaining)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.popen.wait()


def launch(
    nprocs: int,
    command: Sequence[str],
    framework: str | None = None,
    *,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    sink: TextIO | None = None,
    python: str = sys.executable,
) -> int:
    """Run ``python command...`` as ``nprocs`` ranks and return the job's exit code.

    Parameters
    ----------
    nprocs
        Number of ranks (>= 1).
    command
        A script and its arguments, or ``["-m", module, *args]``.
    framework
        Whose launcher environment to set (a key of ``mapping_tables/frameworks.toml``). Default:
        as ``compat launch`` chooses (:func:`compat.dispatch.choose_framework` with
        ``first_if_several=True``).
    timeout
        Seconds after which a job still running is stopped (exit code 124).
    env
        Extra environment for every rank.
    sink
        Where the prefixed output goes (default ``sys.stdout``).

    Returns
    -------
    int
        0 if every rank exited 0; else the exit code of the first rank that failed, or 124 on
        timeout.
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs: expected an int >= 1; got {nprocs!r}")
    if not command:
        raise ValueError("command: expected a script (and its arguments); got nothing")
    framework = choose_framework(framework, first_if_several=True)
    out = sink if sink is not None else sys.stdout
    lock = threading.Lock()
    port = free_port()
    base_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    if nprocs > 1:
        base_env.setdefault("OMP_NUM_THREADS", "1")
    processes: list[_Process] = []
    scheduler = _scheduler_code(framework)
    for index, rank_env in enumerate(rank_environments(framework, nprocs, port)):
        is_rank = index < nprocs
        argv = [python, *command] if is_rank or scheduler is None else [python, "-c", scheduler]
        popen = subprocess.Popen(
            argv,
            env={**base_env, **rank_env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        process = _Process(f"rank {index}" if is_rank else "scheduler", popen, is_rank)
        process.pump = threading.Thread(
            target=_pump, args=(process, out, lock, not is_rank), daemon=True
        )
        process.pump.start()
        processes.append(process)
    ranks = [process for process in processes if process.is_rank]
    deadline = None if timeout is None else time.monotonic() + timeout
    code = 0
    try:
        while True:
            failed = [p for p in ranks if p.popen.poll() not in (None, 0)]
            if failed:
                # The rank that failed first may still be tearing down while the ones its
                # failure broke have exited: let them all finish failing, briefly.
                settle = time.monotonic() + FAILURE_GRACE_SECONDS
                while time.monotonic() < settle and any(p.popen.poll() is None for p in ranks):
                    time.sleep(0.05)
                failed = [p for p in ranks if p.popen.poll() not in (None, 0)]
                for process in failed:
                    process.pump.join(1)  # its output is complete
                first = min(failed, key=lambda p: p.last_words)
                returned = first.popen.returncode
                code = returned if returned > 0 else 128 - returned
                how = (
                    f"exited with code {returned}"
                    if returned > 0
                    else f"was killed by signal {signal.Signals(-returned).name}"
                )
                with lock:
                    out.write(f"compat launch: {first.label} {how}; stopping the other ranks\n")
                break
            if all(p.popen.poll() == 0 for p in ranks):
                break
            if deadline is not None and time.monotonic() > deadline:
                running = [p.label for p in ranks if p.popen.poll() is None]
                with lock:
                    out.write(
                        f"compat launch: timed out after {timeout:g} s; still running: "
                        f"{', '.join(running)}; stopping the job\n"
                    )
                code = TIMEOUT_EXIT_CODE
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        code = 130
    finally:
        # A scheduler (MindSpore's) ends by itself once the workers have; give it a moment.
        if code == 0:
            for process in processes:
                try:
                    process.popen.wait(10)
                except subprocess.TimeoutExpired:
                    break
        _stop(processes)
        for process in processes:
            process.pump.join(5)
    return code
