"""Collectives a backend lacks, built from the native ones it has: padded to equal sizes, as
list all_gathers, through a gather or a scatter, or as one all_to_all_single."""

from __future__ import annotations

from compat.algorithms.common import (
    Taken,
    complete,
    first_rows,
    gathered_parts,
    gathered_then_reduced,
    give_back,
    joined_or_copied,
    padded_to,
    tensor_form,
)
from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.types import Handle, ReduceOp
from compat.transport import scratch


def padded_all_gather(
    adapter: Adapter, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather of tensors that differ in dim 0: pad each to the largest, all_gather the
    equal-sized buffers, copy each rank's rows out."""
    sizes = [adapter.shape(item)[0] for item in tensor_list]
    rows = max(sizes)
    padded = padded_to(adapter, tensor, rows)
    gathered = [adapter.empty(adapter.shape(padded), tensor) for _ in sizes]
    pending = adapter.all_gather(gathered, padded, group, async_op)

    def finish() -> None:
        for out, block, size in zip(tensor_list, gathered, sizes, strict=True):
            adapter.copy_(out, first_rows(adapter, block, size))

    return complete([pending], async_op, finish)


def padded_reduce_scatter(
    adapter: Adapter,
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter of parts that differ in dim 0: each part padded to the largest in one
    buffer, the backend's reduce_scatter_tensor of the equal parts, this rank's rows copied out.

    For backends whose reduce_scatter_tensor is native and whose list form is unsafe for parts
    of different sizes (HCCL; capabilities.toml says why). What the pad rows hold cannot change a
    result, for any op: the reduction is element-wise, so a pad row of part j is reduced only with
    the other ranks' same pad row, into a row of rank j's block past rank j's size, which is
    discarded. So they need no neutral value (zeros would be one for SUM and AVG only). They are
    not left uninitialised either, since those bits can be NaN or infinity: they repeat the first
    rows of the largest part, which this call reduces for real in that part's block, so the
    reduction meets no value it does not meet anyway. The sizes are the same on every rank
    (``input_list[i]`` has rank i's output shape), so every rank pads alike.
    """
    ranks = adapter.group_ranks(group)
    me = ranks.index(adapter.own_global_rank(group))
    sizes = [adapter.shape(item)[0] for item in input_list]
    rows = max(sizes)
    largest = input_list[sizes.index(rows)]
    whole = adapter.empty((rows * len(ranks), *adapter.shape(output)[1:]), output)
    for block, item, size in zip(
        adapter.split(whole, [rows] * len(ranks)), input_list, sizes, strict=True
    ):
        part, pad = adapter.split(block, [size, rows - size])
        if size:
            adapter.copy_(part, item)
        if size < rows:
            adapter.copy_(pad, first_rows(adapter, largest, rows - size))
    received = adapter.empty((rows, *adapter.shape(output)[1:]), output)
    pending = adapter.reduce_scatter_tensor(received, whole, op, group, async_op)

    def finish() -> None:
        if sizes[me]:
            adapter.copy_(output, first_rows(adapter, received, sizes[me]))

    return complete([pending], async_op, finish)


def all_gather_concat(
    adapter: Adapter, output: Tensor, tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather_into_tensor as a list all_gather, then each part copied into ``output``."""
    gathered, pending = gathered_parts(adapter, tensor, group, async_op)

    def finish() -> None:
        parts = adapter.split(output, [adapter.shape(tensor)[0]] * len(gathered))
        for part, piece in zip(parts, gathered, strict=True):
            adapter.copy_(part, piece)

    return complete([pending], async_op, finish)


def all_gather_reduce(
    adapter: Adapter, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_reduce as all_gather plus a local reduction: exact for every dtype all_gather moves."""
    return gathered_then_reduced(adapter, tensor, op, group, async_op, adapter.all_gather)


def all_gather_reduce_to_dst(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """reduce as all_gather plus a local reduction on ``dst``; the other ranks' tensors stay."""
    gathered, pending = gathered_parts(adapter, tensor, group, async_op)

    def finish() -> None:
        if adapter.own_global_rank(group) == dst:
            adapter.copy_(tensor, adapter.reduce_local(gathered, op))

    return complete([pending], async_op, finish)


def gather_reduce_to_dst(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """reduce as a gather to ``dst`` plus a local reduction there (into buffers of the scratch
    pool); the other ranks send their tensors as they are, so they stay unchanged without a
    copy."""
    if adapter.own_global_rank(group) != dst:
        return adapter.gather(tensor, None, dst, group, async_op)
    shape = adapter.shape(tensor)
    taken = [scratch.pool(adapter).take(shape, tensor) for _ in adapter.group_ranks(group)]
    gathered = [buffer for buffer, _ in taken]
    pending = adapter.gather(tensor, gathered, dst, group, async_op)

    def finish() -> None:
        adapter.copy_(tensor, adapter.reduce_local(gathered, op))
        give_back(adapter, taken)

    return complete([pending], async_op, finish)


def reduce_keep_input(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """reduce that leaves the other ranks' tensors unchanged: they reduce from a copy (in a
    scratch buffer reused across calls)."""
    if adapter.own_global_rank(group) == dst:
        return adapter.reduce(tensor, dst, op, group, async_op)
    pool = scratch.pool(adapter)
    copy, key = pool.take(adapter.shape(tensor), tensor)
    adapter.copy_(copy, tensor)
    pending = adapter.reduce(copy, dst, op, group, async_op)
    return complete([pending], async_op, lambda: pool.give(copy, key))


def scatter_reduce(
    adapter: Adapter,
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter as one scatter per source rank plus a local reduction.

    Every rank receives each rank's part for it, then reduces them. Uneven parts are padded to
    the largest, since a scatter moves equal-sized parts.
    """
    ranks = adapter.group_ranks(group)
    me = ranks.index(adapter.own_global_rank(group))
    sizes = [adapter.shape(item)[0] for item in input_list]
    rows = max(sizes)
    even = len(set(sizes)) == 1
    parts = list(input_list) if even else [padded_to(adapter, item, rows) for item in input_list]
    received = [adapter.empty(adapter.shape(parts[me]), output) for _ in ranks]
    pending = [
        adapter.scatter(buffer, parts if src == ranks[me] else None, src, group, async_op)
        for src, buffer in zip(ranks, received, strict=True)
    ]

    def finish() -> None:
        pieces = received if even else [first_rows(adapter, item, sizes[me]) for item in received]
        adapter.copy_(output, adapter.reduce_local(pieces, op))

    return complete(pending, async_op, finish)


scatter_reduce_tensor = tensor_form(scatter_reduce)


def concat_all_to_all(
    adapter: Adapter,
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all as one all_to_all_single with split sizes: the inputs go from one buffer (the
    one they tile, else a scratch copy), the outputs are received into one buffer (the one they
    tile, else a scratch buffer copied out). Any dim-0 size per pair."""
    in_sizes = [adapter.shape(item)[0] for item in input_tensor_list]
    out_sizes = [adapter.shape(item)[0] for item in output_tensor_list]
    like = input_tensor_list[0]
    taken: Taken = []
    whole = joined_or_copied(adapter, input_tensor_list, taken)
    received = adapter.joined(output_tensor_list)
    copy_out = received is None
    if received is None:
        shape = (sum(out_sizes), *adapter.shape(like)[1:])
        received, key = scratch.pool(adapter).take(shape, like)
        taken.append((received, key))
    pending = adapter.all_to_all_single(received, whole, out_sizes, in_sizes, group, async_op)

    def finish() -> None:
        if copy_out:
            parts = adapter.split(received, out_sizes)
            for out, part in zip(output_tensor_list, parts, strict=True):
                adapter.copy_(out, part)
        give_back(adapter, taken)

    return complete([pending], async_op, finish)
