"""Shared helpers; everything here (the modules included) reaches trainer.py through
``from .utils import *``."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist

from ..tensors import clone, tensor


def is_main_process() -> bool:
    return dist.get_rank() == 0


def world_info() -> tuple[int, int]:
    return dist.get_rank(), dist.get_world_size()


def average_gradients(grads: list[Any]) -> list[Any]:
    world_size = float(dist.get_world_size())
    averaged = []
    for grad in grads:
        total = clone(grad)
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        averaged.append(total / world_size)
    return averaged


def cosine_lr(step: int, total: int, base: float) -> float:
    return base * 0.5 * (1.0 + math.cos(math.pi * step / total))


def make_batch(rank: int, step: int) -> Any:
    return tensor([rank + step * 0.5, 1.0 - rank])


def manual_seed(seed: int) -> int:
    if torch.distributed.is_available() and dist.is_initialized():
        seed += dist.get_rank()
    return seed
