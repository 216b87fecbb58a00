"""reduce_scatter by size: the algorithms the capability table chooses by input size, receiving
into the adapter's scratch pool (compat.transport.scratch: buffers reused from call to call)."""

from __future__ import annotations

from compat.algorithms.common import (
    Taken,
    complete,
    give_back,
    joined_or_copied,
    members,
    nothing,
    tensor_form,
    whole_of,
)
from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.types import Handle, ReduceOp
from compat.transport import scratch


def all_to_all_reduce(
    adapter: Adapter,
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter as one all_to_all_single plus a local reduction.

    Each rank sends ``input_list[i]`` to rank i and receives every rank's part for it: every rank
    moves (n-1)/n of its input, the least any reduce_scatter can, in one exchange. Uneven parts
    go as all_to_all_single's split sizes. Inputs that tile one buffer (``x.chunk(n)``) are sent
    from it without a copy; others are concatenated into a scratch buffer first.
    """
    count, me = members(adapter, group)
    if count == 1:
        adapter.copy_(output, input_list[0])
        return complete([], async_op, nothing)
    sizes = [adapter.shape(item)[0] for item in input_list]
    taken: Taken = []
    whole = joined_or_copied(adapter, input_list, taken)
    rows = sizes[me]
    received, key = scratch.pool(adapter).take((rows * count, *adapter.shape(output)[1:]), output)
    taken.append((received, key))
    pending = adapter.all_to_all_single(received, whole, [rows] * count, sizes, group, async_op)

    def finish() -> None:
        adapter.reduce_into(output, adapter.split(received, [rows] * count), op)
        give_back(adapter, taken)

    return complete([pending], async_op, finish)


all_to_all_reduce_tensor = tensor_form(all_to_all_reduce)


def all_reduce_slice(
    adapter: Adapter,
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter as an all_reduce of the whole input (a copy of it) and this rank's slice.

    It moves about twice the data of the other algorithms, but in one native call: the fastest for
    small inputs on backends whose every call has a high fixed cost (MCCL).
    """
    _, me = members(adapter, group)
    pool = scratch.pool(adapter)
    sizes = [adapter.shape(item)[0] for item in input_list]
    whole, key = pool.take((sum(sizes), *adapter.shape(output)[1:]), output)
    source = whole_of(input_list)
    if source is not None:  # the parts of one tensor: one copy
        adapter.copy_(whole, source)
    else:
        for part, item in zip(adapter.split(whole, sizes), input_list, strict=True):
            adapter.copy_(part, item)
    pending = adapter.all_reduce(whole, op, group, async_op)

    def finish() -> None:
        adapter.copy_(output, adapter.narrow(whole, sum(sizes[:me]), sizes[me]))
        pool.give(whole, key)

    return complete([pending], async_op, finish)


all_reduce_slice_tensor = tensor_form(all_reduce_slice)
