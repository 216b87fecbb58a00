"""Scripts the flight-recorder tests launch as real ranks: python tests/trace_scripts.py SCENARIO.
Each writes its dumps into COMPAT_TRACE_DIR, which the test reads with `compat trace`. SCENARIO
``agree,comms_log`` runs those two, in that order, in one job."""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import time

import numpy as np

import compat
import compat.core.recorder


def tensor(values: np.ndarray):  # type: ignore[no-untyped-def]
    if compat.get_framework() == "torch":
        import torch

        return torch.from_numpy(values)
    import mindspore

    return mindspore.Tensor(values)


def ones(count: int) -> object:
    return tensor(np.ones(count, dtype=np.float32))


def agree(rank: int, data: object) -> None:
    """Collectives and a send/recv, then a dump on SIGUSR1 and one on demand."""
    out = [ones(4) for _ in range(compat.get_world_size())]
    compat.all_gather(out, data)
    compat.all_reduce(data, async_op=True).wait()
    if rank == 0:
        compat.send(data, 1)
    elif rank == 1:
        compat.recv(data, 0)
    compat.barrier()
    # On demand through the signal the user opted into (COMPAT_TRACE_SIGNAL=USR1).
    os.kill(os.getpid(), signal.SIGUSR1)
    path = os.path.join(os.environ["COMPAT_TRACE_DIR"], f"rank_{rank}")
    for _ in range(100):
        if os.path.exists(path):
            break
        time.sleep(0.05)
    with open(path, "rb") as file:
        print(f"signal dump: {pickle.load(file)['compat']['reason']}", flush=True)
    compat.barrier()
    print(f"dumped {compat.trace.dump_trace()}", flush=True)
    compat.barrier()


def comms_log() -> None:
    """A known sequence, on top of the calls before it (#1 and #2, and agree's where the job ran
    it first): the log counts from here on, and its counts and bytes are exact."""
    compat.trace.comms_log()
    for _ in range(3):
        compat.all_reduce(ones(1024))
    for _ in range(2):
        compat.broadcast(ones(256), 0)
    compat.all_reduce(ones(1024), async_op=True).wait()
    out = [ones(100) for _ in range(compat.get_world_size())]
    compat.all_gather(out, ones(100))
    compat.barrier()
    rows = compat.trace.comms_log_rows()
    print("rows " + json.dumps([[r["op"], r["bytes"], r["count"]] for r in rows]), flush=True)
    csv_lines = compat.trace.comms_log_text("csv").splitlines()
    print(f"csv header {csv_lines[0]} rows {len(csv_lines) - 1}", flush=True)
    print(f"json rows {len(json.loads(compat.trace.comms_log_text('json')))}", flush=True)
    compat.destroy()  # prints the table


def main(scenario: str) -> None:
    framework = os.environ["COMPAT_FRAMEWORK"]
    compat.init(timeout=5 if framework == "torch" else None)
    rank = compat.get_rank()
    data = ones(4)
    compat.all_reduce(data)  # call #1 on every rank
    compat.broadcast(data, 0)  # call #2
    if scenario == "skip":
        # Rank 1 never makes call #3: rank 0 times out in it (and dumps), the launcher then
        # stops rank 1 (which dumps on SIGTERM).
        if rank == 1:
            time.sleep(120)
        compat.all_reduce(data)
        raise AssertionError("the all_reduce completed without rank 1")
    if scenario == "killed":
        # Rank 1 is killed while rank 0 waits for it in call #3 (rank 1 leaves no dump).
        if rank == 1:
            time.sleep(1.0)
            os.kill(os.getpid(), signal.SIGKILL)
        compat.all_reduce(data)
        raise AssertionError("the all_reduce completed without rank 1")
    if scenario == "mismatch":
        # COMPAT_CHECK=1: rank 2's call #3 has another shape; every rank raises.
        try:
            compat.all_reduce(ones(8 if rank == 2 else 4))
        except compat.CollectiveMismatchError as error:
            print(f"CollectiveMismatchError: {str(error)[:80]}", flush=True)
            return
        raise AssertionError("the check let the calls through")
    parts = {"agree": lambda: agree(rank, data), "comms_log": comms_log}
    if set(scenario.split(",")) <= set(parts):
        # "agree,comms_log": both in one job, one start of the ranks for the two tests
        for part in scenario.split(","):
            parts[part]()
        return
    raise ValueError(f"unknown scenario {scenario!r}")


if __name__ == "__main__":
    main(sys.argv[1])
