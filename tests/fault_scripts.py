"""Scripts the fault tests launch as real ranks: python tests/fault_scripts.py SCENARIO."""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

import compat

#: Tensors that live until the interpreter exits.
KEPT: list[object] = []


def tensor(values: np.ndarray):  # type: ignore[no-untyped-def]
    if compat.get_framework() == "torch":
        import torch

        return torch.from_numpy(values)
    import mindspore

    return mindspore.Tensor(values)


def raised(rank: int) -> None:
    """Say that this rank has raised (a file in FAULT_SCRIPTS_FLAGS, a folder the test made)."""
    open(os.path.join(os.environ["FAULT_SCRIPTS_FLAGS"], f"raised-{rank}"), "w").close()


def stay_away(others: list[int], bound: float) -> None:
    """Stay away until every rank of ``others`` has raised, ``bound`` seconds at most: the job
    then ends once they have, not after a fixed sleep."""
    deadline = time.monotonic() + bound
    flags = [os.path.join(os.environ["FAULT_SCRIPTS_FLAGS"], f"raised-{r}") for r in others]
    while time.monotonic() < deadline and not all(os.path.exists(flag) for flag in flags):
        time.sleep(0.1)


def main(scenario: str) -> None:
    framework = os.environ["COMPAT_FRAMEWORK"]
    # monitored_barrier keeps its own timeout; the group's must be longer (Gloo closes every
    # connection of a group whose timeout passes).
    short = framework == "torch" and not scenario.startswith("monitored_barrier")
    compat.init(timeout=5 if short else None)
    rank = compat.get_rank()
    data = tensor(np.ones(4, dtype=np.float32))
    if scenario in ("skip", "skip_shared_memory"):
        # Rank 1 skips a collective; rank 0 must get CollectiveTimeout, not hang. "skip": the
        # first, in which rank 0 times out setting up shared memory and must leave no file of
        # its own in /dev/shm; "skip_shared_memory": the second, rank 0 waiting in memory.
        print(f"PID {os.getpid()}", flush=True)
        if scenario == "skip_shared_memory":
            compat.all_reduce(data)
        if rank == 1:
            stay_away([0], 45 if framework == "mindspore" else 12)
            return
        started = time.monotonic()
        try:
            compat.all_reduce(data)
        except compat.CollectiveTimeout as error:
            print(
                f"CollectiveTimeout after {time.monotonic() - started:.0f} s: {error}", flush=True
            )
            raised(rank)
            return
        raise AssertionError("the all_reduce completed without rank 1")
    if scenario == "killed":
        # Rank 1 dies mid-job; the launcher must stop the job and name it.
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        compat.all_reduce(data)
        time.sleep(60)
    if scenario == "last_send":
        # The job's last operation is a 32 MB send: the receiver leaves as soon as it has the
        # data, and the sender must still finish cleanly (MCCL: see MindSporeAdapter.destroy).
        payload = tensor(np.full(8 * 2**20, rank + 1, dtype=np.float32))
        # Kept to the end, like a script's module-level tensors: rank 0 leaves at once.
        KEPT.append(payload)
        if rank == 1:
            compat.send(payload, 0)
        else:
            compat.recv(payload, 1)
        print("finished", flush=True)
        return
    if scenario.startswith("monitored_barrier_skip_"):
        # One rank skips a monitored_barrier(timeout=5): every rank that waited must raise
        # CollectiveTimeout naming it within about 5 s (MCCL's own bound is a fixed 30 s).
        skipper = int(scenario.rsplit("_", 1)[1])
        # Every rank has started before the timed part: a rank that started seconds late (three
        # ranks importing torch beside other jobs on two cores) would be named too, rightly.
        compat.barrier()
        if rank == skipper:
            # Away until the others have raised (5 s, and up to 1 s of grace on torch).
            others = [r for r in range(compat.get_world_size()) if r != skipper]
            stay_away(others, 20 if framework == "mindspore" else 9)
            return
        started = time.monotonic()
        try:
            compat.monitored_barrier(timeout=5)
        except compat.CollectiveTimeout as error:
            print(
                f"CollectiveTimeout after {time.monotonic() - started:.1f} s: {error}", flush=True
            )
            raised(rank)
            return
        raise AssertionError(f"monitored_barrier passed without rank {skipper}")
    if scenario == "raises":
        if rank == 1:
            raise ValueError("rank 1 failed on purpose")
        compat.all_reduce(data)
        time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1])
