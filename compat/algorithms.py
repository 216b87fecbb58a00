"""Emulations: collectives a backend lacks, built from the ones it has.

Each function takes the adapter followed by the adapter method's own arguments, so the capability
table can name it in place of the native call. Each runs asynchronously when asked: the native
calls are issued with ``async_op`` and the local step (a copy, a reduction) runs in
``Work.wait()``. Results are received into buffers of their own and then copied into the caller's
tensors, which may be views. The reason each is used is written in
``mapping_tables/capabilities.toml`` beside its name.
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


def _rows(adapter: Adapter, tensor: Tensor, rows: int) -> Tensor:
    """The first ``rows`` rows of ``tensor`` (a view)."""
    total = adapter.shape(tensor)[0]
    return adapter.split(tensor, [rows, total - rows])[0]


def _padded(adapter: Adapter, tensor: Tensor, rows: int) -> Tensor:
    """A copy of ``tensor`` with dim 0 grown to ``rows`` (the extra rows are left unset)."""
    padded = adapter.empty((rows, *adapter.shape(tensor)[1:]), tensor)
    adapter.copy_(_rows(adapter, padded, adapter.shape(tensor)[0]), tensor)
    return padded


def padded_all_gather(
    adapter: Adapter, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
) -> Pending:
    """all_gather of tensors that differ in dim 0: pad each to the largest, all_gather the
    equal-sized buffers, copy each rank's rows out."""
    sizes = [adapter.shape(item)[0] for item in tensor_list]
    rows = max(sizes)
    padded = _padded(adapter, tensor, rows)
    gathered = [adapter.empty(adapter.shape(padded), tensor) for _ in sizes]
    pending = adapter.all_gather(gathered, padded, group, async_op)

    def finish() -> None:
        for out, block, size in zip(tensor_list, gathered, sizes, strict=True):
            adapter.copy_(out, _rows(adapter, block, size))

    return _complete([pending], async_op, finish)


def all_gather_concat(
    adapter: Adapter, output: Tensor, tensor: Tensor, group: GroupHandle, async_op: bool
) -> Pending:
    """all_gather_into_tensor as a list all_gather, then each part copied into ``output``."""
    count = len(adapter.group_ranks(group))
    gathered = [adapter.empty(adapter.shape(tensor), tensor) for _ in range(count)]
    pending = adapter.all_gather(gathered, tensor, group, async_op)

    def finish() -> None:
        parts = adapter.split(output, [adapter.shape(tensor)[0]] * count)
        for part, piece in zip(parts, gathered, strict=True):
            adapter.copy_(part, piece)

    return _complete([pending], async_op, finish)


def all_gather_reduce(
    adapter: Adapter, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Pending:
    """all_reduce as all_gather plus a local reduction: exact for every dtype all_gather moves."""
    count = len(adapter.group_ranks(group))
    gathered = [adapter.empty(adapter.shape(tensor), tensor) for _ in range(count)]
    pending = adapter.all_gather(gathered, tensor, group, async_op)
    return _complete(
        [pending], async_op, lambda: adapter.copy_(tensor, adapter.reduce_local(gathered, op))
    )


def all_gather_reduce_to_dst(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Pending:
    """reduce as all_gather plus a local reduction on ``dst``; the other ranks' tensors stay."""
    count = len(adapter.group_ranks(group))
    gathered = [adapter.empty(adapter.shape(tensor), tensor) for _ in range(count)]
    pending = adapter.all_gather(gathered, tensor, group, async_op)

    def finish() -> None:
        if adapter.rank() == dst:
            adapter.copy_(tensor, adapter.reduce_local(gathered, op))

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


def scatter_reduce(
    adapter: Adapter,
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Pending:
    """reduce_scatter as one scatter per source rank plus a local reduction.

    Every rank receives each rank's part for it, then reduces them. Uneven parts are padded to
    the largest, since a scatter moves equal-sized parts.
    """
    ranks = adapter.group_ranks(group)
    me = ranks.index(adapter.rank())
    sizes = [adapter.shape(item)[0] for item in input_list]
    rows = max(sizes)
    even = len(set(sizes)) == 1
    parts = input_list if even else [_padded(adapter, item, rows) for item in input_list]
    received = [adapter.empty(adapter.shape(parts[me]), output) for _ in ranks]
    pending = [
        adapter.scatter(buffer, parts if src == ranks[me] else None, src, group, async_op)
        for src, buffer in zip(ranks, received, strict=True)
    ]

    def finish() -> None:
        pieces = received if even else [_rows(adapter, item, sizes[me]) for item in received]
        adapter.copy_(output, adapter.reduce_local(pieces, op))

    return _complete(pending, async_op, finish)


def scatter_reduce_tensor(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Pending:
    """reduce_scatter_tensor as :func:`scatter_reduce` of dim 0's equal parts."""
    count = len(adapter.group_ranks(group))
    parts = adapter.split(tensor, [adapter.shape(tensor)[0] // count] * count)
    return scatter_reduce(adapter, output, parts, op, group, async_op)


def pairwise_all_to_all(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
    group: GroupHandle,
    async_op: bool,
) -> Pending:
    """all_to_all_single as blocking send/recv between each pair of ranks.

    Pairs are served in rank order, the lower rank sending first, so blocking calls never wait on
    each other in a cycle. It completes before returning: with ``async_op`` the Work is already
    complete (recorded as async = "completed" in the capability table).
    """
    ranks = adapter.group_ranks(group)
    me = ranks.index(adapter.rank())
    sent = adapter.split(tensor, input_split_sizes)
    received = adapter.split(output, output_split_sizes)
    adapter.copy_(received[me], sent[me])
    for peer in range(len(ranks)):
        if peer == me:
            continue
        incoming = adapter.empty(adapter.shape(received[peer]), output)
        # An empty part is neither sent nor received: both sides know its size.
        sends, receives = input_split_sizes[peer] > 0, output_split_sizes[peer] > 0
        if me < peer and sends:
            adapter.send(sent[peer], ranks[peer], group)
        if receives:
            adapter.recv(incoming, ranks[peer], group)
        if me > peer and sends:
            adapter.send(sent[peer], ranks[peer], group)
        if receives:
            adapter.copy_(received[peer], incoming)
    return Work() if async_op else None
