"""A training loop whose distributed names all come from ``from .utils import *``."""

# ruff: noqa: F405
from __future__ import annotations

from .utils import *  # noqa: F403


def train(steps: int) -> dict[str, Any]:
    rank, world_size = world_info()
    history = []
    for step in range(steps):
        batch = make_batch(rank, step)
        (grad,) = average_gradients([batch * 2.0])
        loss = clone(batch)
        dist.all_reduce(loss, op=dist.ReduceOp.MAX)
        history.append({"lr": cosine_lr(step, steps, 0.1), "grad": grad, "loss": loss})
    ranks = [None] * world_size
    dist.all_gather_object(ranks, {"rank": torch.distributed.get_rank(), "main": is_main_process()})
    return {
        "history": history,
        "ranks": ranks,
        "world_size": torch.distributed.get_world_size(),
        "seed": manual_seed(10),
    }


def run() -> dict[str, Any]:
    torch.distributed.barrier()
    return train(3)
