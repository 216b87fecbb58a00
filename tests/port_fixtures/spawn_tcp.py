"""A ``torch.multiprocessing.spawn`` program that joins its ranks over ``tcp://`` with explicit
rank and world size (no launcher environment), through a wrapper that passes ``**kwargs`` on as
mmengine's does. Ported badly (the rendezvous dropped), each process would form a world of its
own and average only its own value.

    python spawn_tcp.py PORT
"""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD_SIZE = 2


def average(value: float) -> float:
    t = torch.tensor([value])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.item() / dist.get_world_size()


def init_dist(backend: str, **kwargs: object) -> None:
    """mmengine's way: the backend by position, the rest passed through as keywords."""
    dist.init_process_group(backend, **kwargs)


def main(rank: int, world_size: int, port: int) -> None:
    init_dist(
        dist.Backend.GLOO,
        init_method=f"tcp://127.0.0.1:{port}",
        world_size=world_size,
        rank=rank,
    )
    result = {
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "average": average(10.0 * (rank + 1)),
        "on_gloo": dist.get_backend() == dist.Backend.GLOO,
    }
    # one write: both processes share the pipe
    sys.stdout.write(f"RESULT spawn_tcp {json.dumps(result, sort_keys=True)}\n")
    sys.stdout.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(main, args=(WORLD_SIZE, int(sys.argv[1])), nprocs=WORLD_SIZE)
