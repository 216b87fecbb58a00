"""Emulations: collectives a backend lacks, built from the ones it has.

Each function takes the adapter followed by the adapter method's own arguments, so the capability
table can name it in place of the native call. Each runs asynchronously when asked: the native
calls are issued with ``async_op`` and the local step (a copy, a sum) runs in ``Work.wait()``.
The reason each exists is written in ``mapping_tables/capabilities.toml`` beside its name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compat.adapter import Adapter, GroupHandle, Pending, Tensor
from compat.types import ReduceOp, Work


def _complete(pending: Sequence[Pending], async_op: bool, finish: Callable[[], None]) -> Pending:
    """Run ``finish`` now (sync) or when the returned Work is waited on (async)."""
    if async_op:
        return Work([handle for handle in pending if handle is not None], finish)
    finish()
    return None


def padded_all_gather(
    adapter: Adapter, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
) -> Pending:
    """all_gather of tensors that differ in dim 0: pad each to the largest, gather into one
    buffer, copy each rank's rows out."""
    sizes = [adapter.shape(item)[0] for item in tensor_list]
    rows = max(sizes)
    trailing = adapter.shape(tensor)[1:]
    padded = adapter.empty((rows, *trailing), tensor)
    own = adapter.shape(tensor)[0]
    adapter.copy_(adapter.split(padded, [own, rows - own])[0], tensor)
    gathered = adapter.empty((rows * len(sizes), *trailing), tensor)
    pending = adapter.all_gather_into_tensor(gathered, padded, group, async_op)

    def finish() -> None:
        blocks = adapter.split(gathered, [rows] * len(sizes))
        for out, block, size in zip(tensor_list, blocks, sizes, strict=True):
            adapter.copy_(out, adapter.split(block, [size, rows - size])[0])

    return _complete([pending], async_op, finish)


def reduce_keep_input(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Pending:
    """reduce that leaves the other ranks' tensors unchanged: they reduce from a copy."""
    if adapter.rank() == dst:
        return adapter.reduce(tensor, dst, op, group, async_op)
    scratch = adapter.empty(adapter.shape(tensor), tensor)
    adapter.copy_(scratch, tensor)
    return adapter.reduce(scratch, dst, op, group, async_op)
