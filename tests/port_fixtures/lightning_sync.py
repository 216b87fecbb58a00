"""Synchronisation helpers in the style of PyTorch Lightning (lightning/fabric/utilities/
distributed.py): ``sync_ddp`` with reduce-op strings ("mean" on Gloo becomes a sum divided by the
world size) and ``gather_all_tensors`` for tensors whose sizes differ between ranks (gather the
sizes, pad, gather, trim). Framework-neutral: tensors come from ``.tensors``."""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed import ReduceOp

from .tensors import pad_to, tensor, zeros_like


def _distributed_is_initialized() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _sync_ddp_if_available(result: Any, group: Any = None, reduce_op: Any = None) -> Any:
    if _distributed_is_initialized():
        return _sync_ddp(result, group=group, reduce_op=reduce_op)
    return result


def _sync_ddp(result: Any, group: Any = None, reduce_op: Any = None) -> Any:
    """Reduces a tensor across several distributed processes. This operation is performed
    in-place, meaning the result will be placed back into the input tensor on all processes."""
    divide_by_world_size = False
    group = torch.distributed.group.WORLD if group is None else group

    op: Any
    if isinstance(reduce_op, str):
        reduce_op = "avg" if reduce_op == "mean" else reduce_op
        if reduce_op.lower() == "avg" and torch.distributed.get_backend(group) == "gloo":
            # The GLOO backend does not support the `ReduceOp.AVG` operation
            op = ReduceOp.SUM
            divide_by_world_size = True
        else:
            op = getattr(ReduceOp, reduce_op.upper())
    else:
        op = reduce_op

    # Sync all processes before reduction
    torch.distributed.barrier(group=group)
    torch.distributed.all_reduce(result, op=op, group=group, async_op=False)
    world_size = torch.distributed.get_world_size(group)

    if not divide_by_world_size:
        return result
    # `torch.distributed.all_reduce` is in-place, so we should do the division in-place too
    result.copy_(result / world_size)
    return result


def _simple_gather_all_tensors(result: Any, group: Any, world_size: int) -> list[Any]:
    gathered_result = [zeros_like(result) for _ in range(world_size)]
    torch.distributed.all_gather(gathered_result, result, group)
    return gathered_result


def gather_all_tensors(result: Any, group: Any = None) -> list[Any]:
    """Gather all tensors from several ddp processes onto a list that is broadcasted to all
    processes. Works on tensors that have the same number of dimensions, but where each
    dimension may differ. In this case tensors are padded, gathered and then trimmed."""
    if group is None:
        group = torch.distributed.group.WORLD

    # Convert tensors to contiguous format
    result = result.contiguous()

    world_size = torch.distributed.get_world_size(group)

    torch.distributed.barrier(group=group)

    # If the tensor is scalar, things are easy
    if result.ndim == 0:
        return _simple_gather_all_tensors(result, group, world_size)

    # 1. Gather sizes of all tensors
    local_size = tensor(list(result.shape), "int64")
    local_sizes = [zeros_like(local_size) for _ in range(world_size)]
    torch.distributed.all_gather(local_sizes, local_size, group=group)
    sizes = [size.tolist() for size in local_sizes]
    max_size = [max(dims) for dims in zip(*sizes, strict=True)]
    all_sizes_equal = all(size == max_size for size in sizes)

    # 2. If shapes are all the same, then do a simple gather:
    if all_sizes_equal:
        return _simple_gather_all_tensors(result, group, world_size)

    # 3. If not, we need to pad each local tensor to maximum size, gather and then truncate
    result_padded = pad_to(result, max_size)
    gathered_result = [zeros_like(result_padded) for _ in range(world_size)]
    torch.distributed.all_gather(gathered_result, result_padded, group)
    for idx, item_size in enumerate(sizes):
        slice_param = tuple(slice(dim_size) for dim_size in item_size)
        gathered_result[idx] = gathered_result[idx][slice_param]
    return gathered_result


def run() -> dict[str, Any]:
    rank = torch.distributed.get_rank()
    results: dict[str, Any] = {}
    ops = ["mean", "sum", "max", "min", "avg", ReduceOp.SUM, ReduceOp.MAX]
    for label, reduce_op in zip(
        ["mean", "sum", "max", "min", "avg", "SUM", "MAX"], ops, strict=True
    ):
        value = tensor([1.0 + rank, 4.0 * rank - 1.0])
        synced = _sync_ddp_if_available(value, reduce_op=reduce_op)
        results[f"sync {label}"] = [synced, value]
    rows = [[float(10 * rank + i), float(i)] for i in range(rank + 1)]
    results["uneven"] = gather_all_tensors(tensor(rows))
    results["even"] = gather_all_tensors(tensor([[rank, 1.0]]))
    results["scalar"] = gather_all_tensors(tensor(2.0 + rank))
    return results
