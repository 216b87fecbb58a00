"""Calls compat has no counterpart for stay on torch, and so do their arguments: a call whose op
is computed, in a file that names a ReduceOp member compat lacks (PREMUL_SUM, in an op map),
stays on torch; the file's ``dist.ReduceOp`` members then stay torch's (compat takes them as
they are), also where a rewritten call beside it passes one (BAND, MAX: members compat has)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def fused_grad_sum(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    # one coalesced call for many small tensors
    dist.all_reduce_coalesced(grads, dist.ReduceOp.SUM)
    return grads


def all_ranks_agree(flags: torch.Tensor) -> torch.Tensor:
    # bitwise AND over the ranks: compat.ReduceOp has BAND, so this call is rewritten
    dist.all_reduce(flags, op=dist.ReduceOp.BAND)
    return flags


#: ops by the names a config gives (as ignite's and mmengine's op maps), NCCL's pre-multiplied
#: sum among them: compat's ReduceOp has no PREMUL_SUM, so the call whose op comes from this map
#: stays on torch, with torch's members
_OPS = {"sum": dist.ReduceOp.SUM, "premul_sum": dist.ReduceOp.PREMUL_SUM}


def reduce_by_name(tensor: torch.Tensor, name: str) -> torch.Tensor:
    dist.all_reduce(tensor, op=_OPS[name])
    return tensor


def max_norm(norm: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(norm, op=dist.ReduceOp.MAX)
    return norm


def run() -> dict[str, Any]:
    rank = dist.get_rank()
    grads = [torch.tensor([1.0 + rank]), torch.tensor([[2.0, 3.0 * rank]])]
    return {
        "coalesced": fused_grad_sum(grads),
        "band": all_ranks_agree(torch.tensor([6 + rank, 3, 12 - 4 * rank])),
        "by_name": reduce_by_name(torch.tensor([2 * rank + 1, 7]), "sum"),
        "max": max_norm(torch.tensor([1.5 * rank, 2.0])),
    }
