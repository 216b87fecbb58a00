"""Distributed helpers in the style of timm (timm/utils/distributed.py): ``reduce_tensor`` for
logging averaged metrics and ``distribute_bn`` to make BatchNorm statistics agree across ranks.
Framework-neutral: tensors come from ``.tensors``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import distributed as dist

from .tensors import clone, tensor


def reduce_tensor(tensor: Any, n: int) -> Any:
    rt = clone(tensor)
    dist.all_reduce(rt, op=dist.ReduceOp.SUM)
    rt /= n
    return rt


class NormStats:
    """Stands in for a model with BatchNorm layers: what ``named_buffers`` yields."""

    def __init__(self, buffers: dict[str, Any]) -> None:
        self.buffers = buffers

    def named_buffers(self, recurse: bool = True) -> Iterator[tuple[str, Any]]:
        yield from self.buffers.items()


def distribute_bn(model: NormStats, world_size: int, reduce: bool = False) -> None:
    # ensure every node has the same running bn stats
    for bn_name, bn_buf in model.named_buffers(recurse=True):
        if ("running_mean" in bn_name) or ("running_var" in bn_name):
            if reduce:
                # average bn stats across whole group
                torch.distributed.all_reduce(bn_buf, op=dist.ReduceOp.SUM)
                bn_buf.copy_(bn_buf / float(world_size))
            else:
                # broadcast bn stats from rank 0 to whole group
                torch.distributed.broadcast(bn_buf, 0)


def run() -> dict[str, Any]:
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    acc1 = tensor([70.0 + rank, 90.0 - 2 * rank])
    results: dict[str, Any] = {"reduced": reduce_tensor(acc1, world_size), "acc1": acc1}
    for reduce in (False, True):
        model = NormStats(
            {
                "bn1.running_mean": tensor([0.1 * rank, 1.0]),
                "bn1.running_var": tensor([1.0 + rank, 2.0]),
                "bn1.num_batches_tracked": tensor(10 + rank, "int64"),
            }
        )
        distribute_bn(model, world_size, reduce=reduce)
        results[f"bn reduce={reduce}"] = model.buffers
    return results
