"""Rank-side programs of tests/test_shutdown.py.

``python tests/shutdown_scripts.py SCENARIO`` under ``compat launch``:
- ``collective``: rank 1 sleeps, rank 0 waits in an all_reduce for it; both print READY first,
  and the test signals the launcher once it has seen them.
- ``<op>:<death>``: rank 1 dies (``exit``: os._exit(3); ``kill``: SIGKILL) inside ``<op>``
  (``batch_isend_irecv``, ``all_gather_object``, ``broadcast_object_list``), which rank 0 joins
  after rank 1 is gone: the job must end, naming rank 1.

``python tests/shutdown_scripts.py spawn PORT`` (no launcher): the ``collective`` scenario in
a spawn-style program that starts its ranks with ``multiprocessing`` and joins through
``compat.init(init_method="tcp://...")``; on MindSpore rank 0 starts the scheduler.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import numpy as np

import compat

#: How long after starting an operation rank 1 dies in it, and how long rank 0 waits before it
#: joins the operation (so that rank 1 is inside it, waiting for rank 0, when it dies).
DIES_AFTER = 0.5
JOINS_AFTER = 1.5


def tensor(values: np.ndarray):  # type: ignore[no-untyped-def]
    if compat.get_framework() == "torch":
        import torch

        return torch.from_numpy(values)
    import mindspore

    return mindspore.Tensor(values)


def die_later(death: str) -> None:
    def die() -> None:
        time.sleep(DIES_AFTER)
        print(f"dying ({death}) inside the operation\n", end="", flush=True)
        if death == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(3)

    threading.Thread(target=die, daemon=True).start()


def in_a_collective(rank: int) -> None:
    """Rank 0 waits in an all_reduce for rank 1, which sleeps: the job is stuck in a collective
    when the test signals it (on MCCL, within the all_reduce's fixed 30 s bound)."""
    data = tensor(np.ones(4, dtype=np.float32))
    # One write with its newline: the spawn-style ranks share one pipe, and print's separate
    # write of the newline (unbuffered, PYTHONUNBUFFERED=1) let "READY rank 1" land before rank
    # 0's newline ("...pid 3849READY rank 1 ...": a make test-long failure).
    print(f"READY rank {rank} pid {os.getpid()}\n", end="", flush=True)
    if rank == 1:
        time.sleep(120)
    compat.all_reduce(data)
    raise AssertionError("the all_reduce completed: the job was not stopped")


def dies_inside(rank: int, op: str, death: str) -> None:
    peer = 1 - rank
    if rank == 0:
        time.sleep(JOINS_AFTER)
    else:
        die_later(death)
    if op == "batch_isend_irecv":
        out = tensor(np.full(4, rank, dtype=np.float32))
        into = tensor(np.zeros(4, dtype=np.float32))
        works = compat.batch_isend_irecv(
            [compat.P2POp(compat.isend, out, peer), compat.P2POp(compat.irecv, into, peer)]
        )
        for work in works:
            work.wait()
    elif op == "all_gather_object":
        gathered: list[object] = [None, None]
        compat.all_gather_object(gathered, {"rank": rank})
    elif op == "broadcast_object_list":
        objects: list[object] = [{"from": 0}] if rank == 0 else [None]
        compat.broadcast_object_list(objects, src=0)
    else:
        raise ValueError(f"unknown operation {op!r}")
    if rank == 1:
        raise AssertionError(f"{op} completed on rank 1, which should have died in it")
    # Rank 0's operation may complete (its sends were buffered) or fail; either way the job must
    # end with rank 1 named, not hang: wait here as a rank stuck in its next step would.
    time.sleep(120)


def spawned(rank: int, port: int, framework: str) -> None:
    compat.init(framework, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    in_a_collective(rank)


def main() -> None:
    scenario = sys.argv[1]
    if scenario == "spawn":
        # torch.multiprocessing.spawn's way, without importing torch into MindSpore ranks.
        import multiprocessing

        port, framework = int(sys.argv[2]), sys.argv[3]
        context = multiprocessing.get_context("spawn")
        ranks = [context.Process(target=spawned, args=(r, port, framework)) for r in range(2)]
        for process in ranks:
            process.start()
        for process in ranks:
            process.join()
        return
    compat.init()
    rank = compat.get_rank()
    if scenario == "collective":
        in_a_collective(rank)
    else:
        op, death = scenario.split(":")
        dies_inside(rank, op, death)


if __name__ == "__main__":
    main()
