"""Group handling in the style of torchrec's comm ops and mmengine's dist helpers: torch's
private ``_get_default_group()`` when no group is given, ``group.size()`` / ``group.rank()`` on
the result, ``_rank_not_in_group`` as the early return, and ``all_reduce_coalesced`` for a
bucket of small tensors. Framework-neutral: tensors come from ``.tensors``."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from .tensors import tensor


def pooled_sum(values: Any, group: Any = None) -> Any:
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    if group.size() <= 1:
        return values
    dist.all_reduce(values, group=group)
    return {"sum": values, "group rank": group.rank(), "group size": group.size()}


def sync_bucket(bucket: list[Any], group: Any = None) -> Any:
    if dist.distributed_c10d._rank_not_in_group(group):
        return None
    dist.all_reduce_coalesced(bucket, dist.ReduceOp.MAX, group=group)
    return bucket


def run() -> dict[str, Any]:
    rank = dist.get_rank()
    bucket = [tensor([1.0 + rank, -rank]), tensor([[2.0 * rank], [3.0]])]
    return {
        "pooled": pooled_sum(tensor([0.5 + rank, 4.0])),
        "bucket": sync_bucket(bucket),
        "not in world": dist.distributed_c10d._rank_not_in_group(None),
    }
