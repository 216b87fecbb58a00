"""Collectives built from all_gather, broadcast and all_reduce alone: the MindSpore ops primitives
path.

MindSpore's GPU backend has NCCL kernels for its ops primitives only, and of those the CPU (MCCL)
runs AllReduce (sum of float32/float16), AllGather and Broadcast (capabilities.toml,
[mindspore_nccl] and [mccl_primitives]): every other collective is made of these three there.
"""

from __future__ import annotations

from array import array

from compat.algorithms.common import (
    complete,
    gathered_parts,
    members,
    nothing,
    padded_to,
    tensor_form,
    whole_of,
)
from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.types import Handle, ReduceOp, Work


def all_gather_reduce_scatter(
    adapter: Adapter,
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter as an all_gather of every rank's parts (joined), then each rank reduces
    its own part of each, in group-rank order; parts of any dim-0 size."""
    rows = [adapter.shape(item)[0] for item in input_list]
    whole = whole_of(input_list)
    if whole is None:
        whole = adapter.cat(input_list, 0)
    gathered, pending = gathered_parts(adapter, whole, group, async_op)
    mine = members(adapter, group)[1]

    def finish() -> None:
        parts = [adapter.split(item, rows)[mine] for item in gathered]
        adapter.copy_(output, adapter.reduce_local(parts, op))

    return complete([pending], async_op, finish)


all_gather_reduce_scatter_tensor = tensor_form(all_gather_reduce_scatter)


def all_gather_to_dst(
    adapter: Adapter,
    tensor: Tensor,
    gather_list: list[Tensor] | None,
    dst: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """gather as an all_gather whose parts only ``dst`` keeps (into its list)."""
    gathered, pending = gathered_parts(adapter, tensor, group, async_op)

    def finish() -> None:
        if adapter.own_global_rank(group) == dst and gather_list is not None:
            for out, part in zip(gather_list, gathered, strict=True):
                adapter.copy_(out, part)

    return complete([pending], async_op, finish)


def broadcast_scatter(
    adapter: Adapter,
    tensor: Tensor,
    scatter_list: list[Tensor] | None,
    src: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """scatter as a broadcast of every part (joined on ``src``), of which each rank keeps its
    own: every rank receives the whole list."""
    count, mine = members(adapter, group)
    shape = adapter.shape(tensor)
    if adapter.own_global_rank(group) == src and scatter_list is not None:
        whole = adapter.cat(scatter_list, 0)
    else:
        whole = adapter.empty((count * shape[0], *shape[1:]), tensor)
    pending = adapter.broadcast(whole, src, group, async_op)

    def finish() -> None:
        adapter.copy_(tensor, adapter.split(whole, [shape[0]] * count)[mine])

    return complete([pending], async_op, finish)


def all_gather_all_to_all(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all_single as two all_gathers: every rank's split sizes (as bytes), then every
    rank's input padded to the longest, of which each rank keeps the rows sent to it. Runs to
    its end before returning: the second all_gather is sized by the first."""
    count, mine = members(adapter, group)
    sizes = adapter.bytes_tensor(array("q", input_split_sizes).tobytes())
    gathered_sizes, _ = gathered_parts(adapter, sizes, group, False)
    splits = [array("q", adapter.to_bytes(item)).tolist() for item in gathered_sizes]
    longest = max(sum(split) for split in splits)
    if longest == 0:  # every rank sends nothing (each computes the same longest)
        return Work([], lambda: None) if async_op else None
    rows = adapter.shape(tensor)[0]
    padded = tensor if rows == longest else padded_to(adapter, tensor, longest)
    gathered, _ = gathered_parts(adapter, padded, group, False)
    outputs = adapter.split(output, output_split_sizes)
    for source in range(count):
        split = splits[source]
        start = sum(split[:mine])
        part = adapter.split(gathered[source], [start, split[mine], longest - start - split[mine]])
        adapter.copy_(outputs[source], part[1])
    return Work([], lambda: None) if async_op else None


def all_gather_all_to_all_list(
    adapter: Adapter,
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all as :func:`all_gather_all_to_all` of the joined inputs, into a new tensor whose
    parts are copied into the outputs; any dim-0 size per pair. Runs to its end before
    returning, as that does."""
    in_sizes = [adapter.shape(item)[0] for item in input_tensor_list]
    out_sizes = [adapter.shape(item)[0] for item in output_tensor_list]
    trailing = adapter.shape(input_tensor_list[0])[1:]
    whole = adapter.cat(input_tensor_list, 0)
    received = adapter.empty((sum(out_sizes), *trailing), input_tensor_list[0])
    all_gather_all_to_all(adapter, received, whole, out_sizes, in_sizes, group, False)
    for out, part in zip(output_tensor_list, adapter.split(received, out_sizes), strict=True):
        adapter.copy_(out, part)
    return Work([], lambda: None) if async_op else None


def all_gather_barrier(
    adapter: Adapter, group: GroupHandle, async_op: bool, device_ids: list[int] | None = None
) -> Handle | None:
    """barrier as an all_gather of a few bytes: no rank's all_gather ends before every rank of
    ``group`` has issued its own."""
    del device_ids  # checked by compat; nothing to choose with it here
    token = adapter.bytes_tensor(bytes(4))
    _, pending = gathered_parts(adapter, token, group, async_op)
    return complete([pending], async_op, nothing)
