"""The ways users start a job, for ``compat bench --launch``: each runs a module as N ranks.

- ``compat``: ``compat launch`` (sets ``OMP_NUM_THREADS=1`` where it is not set);
- ``torchrun``: ``python -m torch.distributed.run`` (sets ``OMP_NUM_THREADS=1`` too, and says so);
- ``spawn``: ``torch.multiprocessing.spawn`` (MindSpore: multiprocessing's spawn), each rank
  calling ``compat.init(init_method="tcp://...", rank=r, world_size=n)``, as torch's DDP tutorial;
- ``env``: N processes with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
  ``MASTER_PORT``, as a Slurm script or a scheduler sets them.

``spawn`` and ``env`` keep this process's thread settings: what users of those launchers run with.
Every style gives the ranks ``COMPAT_FRAMEWORK``, so that the framework is the one asked for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from compat.base.environment import environment
from compat.base.net import free_port

STYLES = ("compat", "torchrun", "spawn", "env")

#: What each style is, for a report's header.
DESCRIPTIONS = {
    "compat": "compat launch",
    "torchrun": "torchrun (python -m torch.distributed.run)",
    "spawn": "spawn (torch.multiprocessing.spawn; MindSpore: multiprocessing's spawn; "
    "compat.init(init_method='tcp://...', rank=r, world_size=n))",
    "env": "plain environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as Slurm scripts set)",
}


def run(
    style: str,
    nprocs: int,
    framework: str,
    module: str,
    args: Sequence[str],
    timeout: float | None = None,
    sink: TextIO | None = None,
) -> int:
    """Run ``python -m module args...`` as ``nprocs`` ranks on ``framework``, started the
    ``style`` way; return the job's exit code (124 when stopped after ``timeout`` seconds).
    ``sink`` takes compat launch's prefixed output; the other styles' ranks write to this
    process's own stdout and stderr, as those launchers do."""
    if style == "compat":
        from compat.tools.launch import launch

        return launch(nprocs, ["-m", module, *args], framework, timeout=timeout, sink=sink)
    processes = _PROCESSES.get(style)
    if processes is None:
        raise ValueError(f"--launch: expected one of {list(STYLES)}; got {style!r}")
    env = environment()
    env["COMPAT_FRAMEWORK"] = framework
    planned = processes(nprocs, module, list(args), env, free_port())
    return _wait([_start(command, process_env) for command, process_env in planned], timeout)


_Planned = list[tuple[list[str], dict[str, str]]]


def _torchrun(
    nprocs: int, module: str, args: list[str], env: dict[str, str], port: int
) -> _Planned:
    """One torchrun process, which starts the ranks."""
    command = [
        "-m", "torch.distributed.run", f"--nproc-per-node={nprocs}",
        "--master-addr=127.0.0.1", f"--master-port={port}", "-m", module, *args,
    ]  # fmt: skip
    return [(command, env)]


def _spawner(nprocs: int, module: str, args: list[str], env: dict[str, str], port: int) -> _Planned:
    """One process that spawns the ranks (this module's ``__main__``)."""
    return [(["-m", __name__, module, str(nprocs), str(port), *args], env)]


def _plain(nprocs: int, module: str, args: list[str], env: dict[str, str], port: int) -> _Planned:
    """A process per rank, with the variables a Slurm script sets."""
    return [
        (
            ["-m", module, *args],
            {
                **env,
                "RANK": str(rank),
                "WORLD_SIZE": str(nprocs),
                "LOCAL_RANK": str(rank),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
            },
        )
        for rank in range(nprocs)
    ]


#: The processes each style but ``compat`` starts: (command line, environment) each.
_PROCESSES: dict[str, Callable[[int, str, list[str], dict[str, str], int], _Planned]] = {
    "torchrun": _torchrun,
    "spawn": _spawner,
    "env": _plain,
}


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *command], env=env, start_new_session=True)


def _wait(processes: list[subprocess.Popen[bytes]], timeout: float | None) -> int:
    """Wait for every process; when one fails, or after ``timeout``, stop the others (as
    torchrun and mp.spawn do)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    code = 0
    try:
        while any(process.poll() is None for process in processes):
            failed = [p.returncode for p in processes if p.returncode not in (None, 0)]
            if failed or (deadline is not None and time.monotonic() > deadline):
                code = failed[0] if failed else 124
                break
            time.sleep(0.05)
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return code or max((abs(p.returncode or 0) for p in processes), default=0)


def _spawned(rank: int, module: str, nprocs: int, port: int, args: list[str]) -> None:
    """One rank of the spawn style: ``module``'s ``main(args, init)`` with compat.init's
    arguments as a spawn-style script gives them."""
    import importlib

    main: Any = importlib.import_module(module).main
    init = {"init_method": f"tcp://127.0.0.1:{port}", "rank": rank, "world_size": nprocs}
    code = main(args, init)
    if code:
        raise SystemExit(code)


def _spawn(module: str, nprocs: int, port: int, args: list[str]) -> None:
    if os.environ.get("COMPAT_FRAMEWORK") == "torch":
        import importlib

        spawn: Any = importlib.import_module("torch.multiprocessing").spawn
        spawn(_spawned, (module, nprocs, port, args), nprocs=nprocs)
        return
    import multiprocessing
    import multiprocessing.connection

    context = multiprocessing.get_context("spawn")
    ranks = [
        context.Process(target=_spawned, args=(rank, module, nprocs, port, args))
        for rank in range(nprocs)
    ]
    for process in ranks:
        process.start()
    # As torch.multiprocessing.spawn: once a rank fails, the others are stopped.
    while any(process.is_alive() for process in ranks):
        multiprocessing.connection.wait([process.sentinel for process in ranks], timeout=1.0)
        if any(process.exitcode for process in ranks):
            for process in ranks:
                process.terminate()
            break
    for process in ranks:
        process.join()
    codes = [process.exitcode for process in ranks]
    if any(codes):
        raise SystemExit(f"spawned ranks exited with {codes}")


if __name__ == "__main__":
    _spawn(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
