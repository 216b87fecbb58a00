"""Calls compat has no counterpart for stay on torch, and so do their arguments: a
``dist.ReduceOp`` passed to a call left on torch must stay torch's, while the same member passed
to a rewritten call beside it becomes compat's."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def fused_grad_sum(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    # one coalesced call for many small tensors
    dist.all_reduce_coalesced(grads, dist.ReduceOp.SUM)
    return grads


def all_ranks_agree(flags: torch.Tensor) -> torch.Tensor:
    # bitwise AND over the ranks (compat's ReduceOp has no BAND)
    dist.all_reduce(flags, op=dist.ReduceOp.BAND)
    return flags


def max_norm(norm: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(norm, op=dist.ReduceOp.MAX)
    return norm


def run() -> dict[str, Any]:
    rank = dist.get_rank()
    grads = [torch.tensor([1.0 + rank]), torch.tensor([[2.0, 3.0 * rank]])]
    return {
        "coalesced": fused_grad_sum(grads),
        "band": all_ranks_agree(torch.tensor([6 + rank, 3, 12 - 4 * rank])),
        "max": max_norm(torch.tensor([1.5 * rank, 2.0])),
    }
