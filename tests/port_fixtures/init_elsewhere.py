"""Helpers ported on their own while the process group is created elsewhere: the job's script
(``driver.py``, never ported) calls torch's ``init_process_group`` itself and then calls these.
Written against torch; the guards are the usual ``is_available``/``is_initialized`` ones."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def get_world_size() -> int:
    if not dist.is_available() or not dist.is_initialized():
        return 1
    return dist.get_world_size()


def get_rank() -> int:
    if not dist.is_available() or not dist.is_initialized():
        return 0
    return dist.get_rank()


def all_reduce_mean(value: torch.Tensor) -> torch.Tensor:
    world_size = get_world_size()
    if world_size > 1:
        dist.all_reduce(value)
        value = value / world_size
    return value


def broadcast_parameters(params: list[torch.Tensor], src: int = 0) -> None:
    for p in params:
        dist.broadcast(p, src=src)


def gather_metrics(metrics: dict[str, float]) -> list[Any]:
    gathered: list[Any] = [None] * get_world_size()
    dist.all_gather_object(gathered, metrics)
    return gathered


def run() -> dict[str, Any]:
    rank = get_rank()
    params = [torch.full((2,), float(rank + 1)), torch.arange(3, dtype=torch.float32) * (rank + 1)]
    broadcast_parameters(params, src=1)
    dist.barrier()
    return {
        "world_size": get_world_size(),
        "rank": rank,
        "backend": dist.get_backend(),
        "mean": all_reduce_mean(torch.tensor([2.0 * rank, 1.0])),
        "params": params,
        "metrics": gather_metrics({"rank": rank, "acc": 0.5 + rank}),
    }
