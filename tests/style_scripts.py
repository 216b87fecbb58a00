"""Ranks started the ways users start them, without compat launch (tests/test_launch_styles.py).

``python tests/style_scripts.py env SCENARIO``: one rank of a plain environment (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, ``LOCAL_RANK``, as a Slurm script or a
scheduler sets them), with the process's own thread settings.
``python tests/style_scripts.py spawn FRAMEWORK N SCENARIO``: N ranks started by
``torch.multiprocessing.spawn`` (torch) or multiprocessing's spawn (MindSpore), each calling
``compat.init(init_method="tcp://...", rank=r, world_size=N)``.

The script imports only the framework it runs on: compat.init() takes it from ``sys.modules``.
Scenarios: ``results`` (collectives checked against numpy in sentinel-filled buffers; prints
``RESULTS OK``) and ``killed_<call>`` (the last rank SIGKILLs itself in a loop of that call; every
other rank prints how long it took to raise, the error, and how long the next call took).
SCENARIO may name several, comma-separated, run in that order in one job (a killed one last).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from functools import partial
from typing import Any

import numpy as np

SENTINEL = -7.0
#: Elements of the large cases: above torch's intra-op grain (compat's single-threaded kernels)
#: and above a 1 MB slot (several rounds), not a multiple of either.
LARGE = 3 * 2**18 + 5


def _framework() -> str:
    return os.environ["STYLE_FRAMEWORK"]


def _tensor(values: np.ndarray, dtype: str) -> Any:
    if _framework() == "torch":
        import torch

        return torch.from_numpy(values.astype(np.float32)).to(getattr(torch, dtype))
    import mindspore

    return mindspore.Tensor(values.astype(np.float32)).astype(getattr(mindspore, dtype))


def _numpy(tensor: Any) -> np.ndarray:
    if _framework() == "torch":
        import torch

        return tensor.to(torch.float32).numpy().copy()  # type: ignore[no-any-return]
    import mindspore

    return tensor.astype(mindspore.float32).asnumpy()  # type: ignore[no-any-return]


def _inputs(rank: int, numel: int) -> np.ndarray:
    """Small integers (exact in every dtype used, summed over 4 ranks), different per rank."""
    return ((np.arange(numel) * 7 + rank * 3) % 11 + rank).astype(np.float32)


def _check(name: str, got: np.ndarray, expected: np.ndarray) -> None:
    if not np.array_equal(got, expected):
        wrong = np.flatnonzero(got != expected)
        raise AssertionError(
            f"{name}: {wrong.size} wrong elements, the first at {wrong[0]}: "
            f"got {got[wrong[0]]}, expected {expected[wrong[0]]}"
        )


def results() -> None:
    """all_reduce (sum, max, avg), reduce_scatter_tensor and all_gather_into_tensor, small and
    large, float32 and the framework's 16-bit floats, each output inside a larger buffer filled
    with a sentinel: the whole buffer is compared with numpy."""
    import compat

    rank, world = compat.get_rank(), compat.get_world_size()
    everyone = [_inputs(r, LARGE * world) for r in range(world)]
    for dtype in ("float32", "bfloat16", "float16"):
        for numel in (40 * world, LARGE * world):
            mine = everyone[rank][:numel]
            # all_reduce on a view in the middle of a sentinel-filled base
            for op, reduce in (("sum", np.sum), ("max", np.max), ("avg", np.mean)):
                base_values = np.full(numel + 16, SENTINEL, np.float32)
                base_values[8 : 8 + numel] = mine
                base = _tensor(base_values, dtype)
                compat.all_reduce(base[8 : 8 + numel], op=op)
                expected = np.full(numel + 16, SENTINEL, np.float32)
                stacked = np.stack([values[:numel] for values in everyone])
                expected[8 : 8 + numel] = reduce(stacked, axis=0)
                if op == "avg":  # the 16-bit floats round the mean: compare after their round
                    expected[8 : 8 + numel] = _numpy(_tensor(expected[8 : 8 + numel], dtype))
                _check(f"all_reduce {op} {dtype} {numel}", _numpy(base), expected)
            # reduce_scatter_tensor into a view of a sentinel-filled base
            part = numel // world
            out_base = _tensor(np.full(part + 8, SENTINEL, np.float32), dtype)
            compat.reduce_scatter_tensor(_tensor(mine, dtype), out=out_base[4 : 4 + part])
            total = np.sum(np.stack([values[:numel] for values in everyone]), axis=0)
            expected = np.full(part + 8, SENTINEL, np.float32)
            expected[4 : 4 + part] = total[rank * part : (rank + 1) * part]
            _check(f"reduce_scatter_tensor {dtype} {numel}", _numpy(out_base), expected)
            # all_gather_into_tensor into a view of a sentinel-filled base
            gathered = _tensor(np.full(numel + 8, SENTINEL, np.float32), dtype)
            compat.all_gather_into_tensor(_tensor(mine[:part], dtype), out=gathered[4 : 4 + numel])
            expected = np.full(numel + 8, SENTINEL, np.float32)
            expected[4 : 4 + numel] = np.concatenate([values[:part] for values in everyone])
            _check(f"all_gather_into_tensor {dtype} {numel}", _numpy(gathered), expected)
    compat.barrier()
    print(f"RESULTS OK rank {rank}", flush=True)


def killed(waits_in: str) -> None:
    """The last rank SIGKILLs itself between two calls of a loop of ``waits_in`` (all_reduce of
    1 MB, a 1 MB message from it to each other rank, barrier or monitored_barrier); each other
    rank reports when it raised, what, and how long the next call took to raise."""
    import compat

    rank, world = compat.get_rank(), compat.get_world_size()
    data = _tensor(np.ones(2**18, np.float32), "float32")
    last = world - 1
    calls = {
        "all_reduce": lambda: compat.all_reduce(data),
        "recv": lambda: (
            [compat.send(data, peer) for peer in range(last)]
            if rank == last
            else compat.recv(data, last)
        ),
        "barrier": lambda: compat.barrier(),
        "monitored_barrier": lambda: compat.monitored_barrier(timeout=60),
    }
    call = calls[waits_in]
    compat.barrier()
    started = time.monotonic()
    try:
        for step in range(10**6):
            if rank == last and step == 20:
                os.kill(os.getpid(), signal.SIGKILL)
            call()
            started = time.monotonic()
    except Exception as error:
        raised = time.monotonic() - started
        print(f"RAISED {type(error).__name__} after {raised:.2f} s: {error}", flush=True)
    again = time.monotonic()
    try:
        call()
        print("NEXT CALL COMPLETED", flush=True)
    except Exception as error:
        print(f"NEXT {type(error).__name__} after {time.monotonic() - again:.2f} s", flush=True)
    sys.stdout.flush()
    # The job is broken: leave without the framework's teardown, which would wait for the dead
    # rank (MCCL), as a job would be ended.
    os._exit(0)


SCENARIOS: dict[str, Any] = {
    "results": results,
    **{
        f"killed_{waits_in}": partial(killed, waits_in)
        for waits_in in ("all_reduce", "recv", "barrier", "monitored_barrier")
    },
}


def _run(scenarios: str) -> None:
    import compat

    compat.init()
    for scenario in scenarios.split(","):
        SCENARIOS[scenario]()
    compat.destroy()


def _spawned(rank: int, framework: str, world: int, port: int, scenario: str) -> None:
    os.environ["STYLE_FRAMEWORK"] = framework
    if framework == "torch":
        import torch  # noqa: F401 (the program's framework: compat.init finds it)
    else:
        import mindspore  # noqa: F401
    import compat

    options = {} if framework == "torch" else _mindspore_spawn_options(rank, world)
    compat.init(init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, **options)
    assert compat.get_backend() == {"torch": "gloo", "mindspore": "mccl"}[framework]
    SCENARIOS[scenario]()
    started = time.monotonic()
    compat.destroy()
    # rank 0 started MindSpore's scheduler: destroy() must not wait for it to end
    print(f"rank {rank} destroyed in {time.monotonic() - started:.1f} s", flush=True)


def _mindspore_spawn_options(rank: int, world: int) -> dict[str, Any]:
    """What MindSpore cannot take (torch's store, pg_options) is refused before anything starts;
    torch's other arguments are taken: the backend by MindSpore's name, a group_name (ignored),
    a device_id."""
    import compat

    for option in ("store", "pg_options"):
        try:
            compat.init(rank=rank, world_size=world, **{option: object()})
        except compat.UnsupportedError as error:
            assert str(error).startswith(f"{option}: "), error
        else:
            raise AssertionError(f"{option} was taken on MindSpore")
    return {"backend": "mccl", "group_name": "ignored", "device_id": 0}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def main(argv: list[str]) -> None:
    if argv[0] == "env":
        if _framework() == "torch":
            import torch  # noqa: F401
        else:
            import mindspore  # noqa: F401
        _run(argv[1])
        return
    framework, world, scenario = argv[1], int(argv[2]), argv[3]
    port = _free_port()
    if framework == "torch":
        import torch.multiprocessing as spawner

        spawner.spawn(_spawned, args=(framework, world, port, scenario), nprocs=world)
        return
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_spawned, args=(rank, framework, world, port, scenario))
        for rank in range(world)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    if any(process.exitcode for process in processes):
        raise SystemExit(f"exit codes {[process.exitcode for process in processes]}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main(sys.argv[1:])
