"""Emulations: collectives a backend lacks, built from the ones it has.

Each function takes the adapter followed by the adapter method's own arguments, so the capability
table can name it in place of the native call. Each runs asynchronously when asked: the native
calls are issued with ``async_op`` and the local step (a copy, a reduction) runs in
``Work.wait()``. Results are received into buffers of their own and then copied into the caller's
tensors, which may be views. The reason each is used is written in
``mapping_tables/capabilities.toml`` beside its name.
"""

from __future__ import annotations

import ctypes
import time
from array import array
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.errors import CollectiveTimeout, UnsupportedError
from compat.base.types import Handle, ReduceOp, Work
from compat.transport import shared_memory
from compat.transport.backoff import Backoff
from compat.transport.shared_memory import SharedWindow

if TYPE_CHECKING:
    from compat.transport.mailbox import Mailbox


def _complete(
    pending: Sequence[Handle | None], async_op: bool, finish: Callable[[], None]
) -> Handle | None:
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


def _equal_parts(adapter: Adapter, tensor: Tensor, group: GroupHandle) -> list[Tensor]:
    """Dim 0 of ``tensor`` in one equal part per rank of ``group`` (views)."""
    count = len(adapter.group_ranks(group))
    return adapter.split(tensor, [adapter.shape(tensor)[0] // count] * count)


def padded_all_gather(
    adapter: Adapter, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
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
    me = ranks.index(adapter.rank())
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
            adapter.copy_(pad, _rows(adapter, largest, rows - size))
    received = adapter.empty((rows, *adapter.shape(output)[1:]), output)
    pending = adapter.reduce_scatter_tensor(received, whole, op, group, async_op)

    def finish() -> None:
        if sizes[me]:
            adapter.copy_(output, _rows(adapter, received, sizes[me]))

    return _complete([pending], async_op, finish)


def all_gather_concat(
    adapter: Adapter, output: Tensor, tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
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
) -> Handle | None:
    """all_reduce as all_gather plus a local reduction: exact for every dtype all_gather moves."""
    return _gathered_then_reduced(adapter, tensor, op, group, async_op, adapter.all_gather)


def _gathered_then_reduced(
    adapter: Adapter,
    tensor: Tensor,
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
    all_gather: Callable[[list[Tensor], Tensor, GroupHandle, bool], Handle | None],
) -> Handle | None:
    """all_reduce as ``all_gather`` (called as the adapter's) into new tensors, then each rank
    reduces them in rank order, so every rank ends with the same bits."""
    count = len(adapter.group_ranks(group))
    gathered = [adapter.empty(adapter.shape(tensor), tensor) for _ in range(count)]
    pending = all_gather(gathered, tensor, group, async_op)
    return _complete(
        [pending], async_op, lambda: adapter.copy_(tensor, adapter.reduce_local(gathered, op))
    )


def all_gather_reduce_to_dst(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """reduce as all_gather plus a local reduction on ``dst``; the other ranks' tensors stay."""
    count = len(adapter.group_ranks(group))
    gathered = [adapter.empty(adapter.shape(tensor), tensor) for _ in range(count)]
    pending = adapter.all_gather(gathered, tensor, group, async_op)

    def finish() -> None:
        if adapter.rank() == dst:
            adapter.copy_(tensor, adapter.reduce_local(gathered, op))

    return _complete([pending], async_op, finish)


def gather_reduce_to_dst(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """reduce as a gather to ``dst`` plus a local reduction there (into buffers of the scratch
    pool); the other ranks send their tensors as they are, so they stay unchanged without a
    copy."""
    if adapter.rank() != dst:
        return adapter.gather(tensor, None, dst, group, async_op)
    shape = adapter.shape(tensor)
    taken = [adapter.scratch.take(shape, tensor) for _ in adapter.group_ranks(group)]
    gathered = [buffer for buffer, _ in taken]
    pending = adapter.gather(tensor, gathered, dst, group, async_op)

    def finish() -> None:
        adapter.copy_(tensor, adapter.reduce_local(gathered, op))
        for buffer, key in taken:
            adapter.scratch.give(buffer, key)

    return _complete([pending], async_op, finish)


def reduce_keep_input(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """reduce that leaves the other ranks' tensors unchanged: they reduce from a copy (in a
    scratch buffer reused across calls)."""
    if adapter.rank() == dst:
        return adapter.reduce(tensor, dst, op, group, async_op)
    scratch, key = adapter.scratch.take(adapter.shape(tensor), tensor)
    adapter.copy_(scratch, tensor)
    pending = adapter.reduce(scratch, dst, op, group, async_op)
    return _complete([pending], async_op, lambda: adapter.scratch.give(scratch, key))


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
) -> Handle | None:
    """reduce_scatter_tensor as :func:`scatter_reduce` of dim 0's equal parts."""
    parts = _equal_parts(adapter, tensor, group)
    return scatter_reduce(adapter, output, parts, op, group, async_op)


def _exchange(
    adapter: Adapter,
    me: int,
    peer: int,
    peer_rank: int,
    outgoing: Tensor,
    incoming: Tensor,
    group: GroupHandle,
) -> None:
    """Send ``outgoing`` to and receive ``incoming`` from one peer with blocking calls.

    ``me`` and ``peer`` are group ranks: the lower sends first, so pairs served in rank order
    never wait on each other in a cycle. An empty part is neither sent nor received: both sides
    know its size.
    """
    sends, receives = adapter.shape(outgoing)[0] > 0, adapter.shape(incoming)[0] > 0
    if me < peer and sends:
        adapter.send(outgoing, peer_rank, group)
    if receives:
        adapter.recv(incoming, peer_rank, group)
    if me > peer and sends:
        adapter.send(outgoing, peer_rank, group)


def pairwise_all_to_all(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all_single as blocking send/recv between each pair of ranks, each part received
    straight into its place in ``output``.

    Pairs are served in rank order, the lower rank sending first, so blocking calls never wait on
    each other in a cycle. It completes before returning: with ``async_op`` the Work is already
    complete (recorded as async = "completed" in the capability table). The parts come from
    ``adapter.parts``: on MCCL, views made by slicing plus a buffer per part took 1.2-2x the time
    of the same exchange on views made once, at 1 KB to 1 MB per rank (2 ranks, measured), each
    new view waiting on MindSpore's PyNative queue.
    """
    ranks = adapter.group_ranks(group)
    me = ranks.index(adapter.rank())
    sent = adapter.parts(tensor, input_split_sizes)
    received = adapter.parts(output, output_split_sizes)
    if adapter.numel(received[me]):
        adapter.copy_(received[me], sent[me])
    for peer in range(len(ranks)):
        if peer != me:
            _exchange(adapter, me, peer, ranks[peer], sent[peer], received[peer], group)
    return Work() if async_op else None


# -- reduce_scatter by size: the faster algorithms, receiving into the adapter's scratch pool
# (compat.transport.scratch: buffers reused from call to call)
# -----------------------------------------


def _members(adapter: Adapter, group: GroupHandle) -> tuple[int, int]:
    """(group size, this rank's index in the group)."""
    ranks = adapter.group_ranks(group)
    return len(ranks), ranks.index(adapter.rank())


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
    count, me = _members(adapter, group)
    if count == 1:
        adapter.copy_(output, input_list[0])
        return _complete([], async_op, lambda: None)
    sizes = [adapter.shape(item)[0] for item in input_list]
    whole = adapter.joined(input_list)
    taken = []
    if whole is None:
        shape = (sum(sizes), *adapter.shape(output)[1:])
        whole, key = adapter.scratch.take(shape, output)
        taken.append((whole, key))
        for part, item in zip(adapter.split(whole, sizes), input_list, strict=True):
            adapter.copy_(part, item)
    rows = sizes[me]
    received, key = adapter.scratch.take((rows * count, *adapter.shape(output)[1:]), output)
    taken.append((received, key))
    pending = adapter.all_to_all_single(received, whole, [rows] * count, sizes, group, async_op)

    def finish() -> None:
        adapter.reduce_into(output, adapter.split(received, [rows] * count), op)
        for buffer, buffer_key in taken:
            adapter.scratch.give(buffer, buffer_key)

    return _complete([pending], async_op, finish)


def all_to_all_reduce_tensor(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter_tensor as :func:`all_to_all_reduce` of dim 0's equal parts (no copy)."""
    count = len(adapter.group_ranks(group))
    rows = adapter.shape(tensor)[0] // count
    if count == 1:
        adapter.copy_(output, tensor)
        return _complete([], async_op, lambda: None)
    received, key = adapter.scratch.take(adapter.shape(tensor), tensor)
    pending = adapter.all_to_all_single(
        received, tensor, [rows] * count, [rows] * count, group, async_op
    )

    def finish() -> None:
        adapter.reduce_into(output, adapter.split(received, [rows] * count), op)
        adapter.scratch.give(received, key)

    return _complete([pending], async_op, finish)


def buffered_send_reduce_scatter(
    adapter: Adapter,
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter as blocking sends of every peer's part, then the receives, then a local
    reduction: every rank moves (n-1)/n of its input, and all directions move at once.

    Only for backends whose ``send`` completes before the receiver posts its ``recv``: on MCCL the
    receiver's server thread stores and acknowledges each message (measured), so no rank waits
    on another's receive. Where a send waits for its receive (Gloo, NCCL), this would deadlock;
    the capability table chooses it for MCCL only. Each rank sends to the ranks after it first and
    receives in the order the messages arrive. It completes before returning: with ``async_op``
    the Work is already complete (async = "completed" in the table).
    """
    count, me = _members(adapter, group)
    shape = adapter.shape(input_list[me])
    # Every peer's values of this rank's part; while that part is empty nothing is received.
    taken, pieces = [], [input_list[me]] * count
    if adapter.numel(input_list[me]):
        for peer in range(count):
            if peer != me:
                pieces[peer], key = adapter.scratch.take(shape, output)
                taken.append((pieces[peer], key))
    _send_then_receive(adapter, input_list, pieces, group)
    adapter.reduce_into(output, pieces, op)
    for buffer, key in taken:
        adapter.scratch.give(buffer, key)
    return Work() if async_op else None


def buffered_send_reduce_scatter_tensor(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter_tensor as :func:`buffered_send_reduce_scatter` of dim 0's equal parts."""
    parts = _equal_parts(adapter, tensor, group)
    return buffered_send_reduce_scatter(adapter, output, parts, op, group, async_op)


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
    small inputs on backends whose every call has a high fixed cost (MCCL, measured).
    """
    _, me = _members(adapter, group)
    sizes = [adapter.shape(item)[0] for item in input_list]
    whole, key = adapter.scratch.take((sum(sizes), *adapter.shape(output)[1:]), output)
    for part, item in zip(adapter.split(whole, sizes), input_list, strict=True):
        adapter.copy_(part, item)
    pending = adapter.all_reduce(whole, op, group, async_op)

    def finish() -> None:
        adapter.copy_(output, adapter.narrow(whole, sum(sizes[:me]), sizes[me]))
        adapter.scratch.give(whole, key)

    return _complete([pending], async_op, finish)


def all_reduce_slice_tensor(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter_tensor as :func:`all_reduce_slice`: one copy of the whole input."""
    count, me = _members(adapter, group)
    rows = adapter.shape(tensor)[0] // count
    whole, key = adapter.scratch.take(adapter.shape(tensor), tensor)
    adapter.copy_(whole, tensor)
    pending = adapter.all_reduce(whole, op, group, async_op)

    def finish() -> None:
        adapter.copy_(output, adapter.narrow(whole, rows * me, rows))
        adapter.scratch.give(whole, key)

    return _complete([pending], async_op, finish)


# -- buffered sends (MCCL): every rank sends first, then receives ----------------------------------
# An MCCL send completes once the receiver's server thread has stored the message, before any recv
# is posted (measured), so a rank can send to every peer before it receives: all directions move at
# once and no rank waits on another's receive. Where a send waits for its receive (Gloo, NCCL),
# these would deadlock: the capability table chooses them for MCCL only. Each completes before
# returning: with ``async_op`` the Work is already complete (async = "completed" in the table).
# Run through compat, none meets a pending deferred irecv from a peer: compat.collectives refuses
# the call first, since MCCL matches a message by its source rank alone.


def _send_then_receive(
    adapter: Adapter, outgoing: Sequence[Tensor], incoming: Sequence[Tensor], group: GroupHandle
) -> None:
    """Send ``outgoing[i]`` to group rank i with blocking sends, the ranks after this one first,
    then receive ``incoming[i]`` from group rank i, in the order the messages arrive. This rank's
    own entries are skipped; an empty part is neither sent nor received (both sides know its
    size)."""
    ranks = adapter.group_ranks(group)
    count, me = len(ranks), ranks.index(adapter.rank())
    order = [(me + step) % count for step in range(1, count)]
    for peer in order:
        if adapter.numel(outgoing[peer]):
            adapter.send(outgoing[peer], ranks[peer], group)
    for peer in reversed(order):
        if adapter.numel(incoming[peer]):
            adapter.recv(incoming[peer], ranks[peer], group)


def buffered_send_all_gather(
    adapter: Adapter, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather as blocking sends of ``tensor`` to every peer, then each peer's tensor received
    straight into its ``tensor_list`` entry (parts of any dim-0 size: the uneven form too)."""
    _, me = _members(adapter, group)
    _send_then_receive(adapter, [tensor] * len(tensor_list), tensor_list, group)
    if adapter.numel(tensor_list[me]):
        adapter.copy_(tensor_list[me], tensor)
    return Work() if async_op else None


def buffered_send_all_gather_into_tensor(
    adapter: Adapter, output: Tensor, tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather_into_tensor as :func:`buffered_send_all_gather` into ``output``'s dim-0 parts
    (views: received in place, no copy)."""
    count = len(adapter.group_ranks(group))
    parts = adapter.parts(output, [adapter.shape(output)[0] // count] * count)
    return buffered_send_all_gather(adapter, parts, tensor, group, async_op)


def buffered_send_all_reduce(
    adapter: Adapter, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_reduce as a buffered-send reduce_scatter, then a buffered-send all_gather, in place.

    The tensor's elements (a flat view where the adapter gives one, else its dim-0 rows) are cut
    into one near-equal part per rank. Each rank sends every peer that peer's part, receives its
    own part from every peer and reduces the parts in group-rank order, then sends the result to
    every peer and receives theirs into the tensor. Each part is reduced by one rank only, so
    every rank ends with the same bits, for every op and every dtype send/recv move (MCCL's
    all_reduce moves no float64 or uint8). Every rank moves 2(n-1)/n of the tensor, in all
    directions at once.
    """
    ranks = adapter.group_ranks(group)
    count, me = len(ranks), ranks.index(adapter.rank())
    if count == 1:
        return Work() if async_op else None
    flat = adapter.flat_view(tensor)
    whole = tensor if flat is None else flat
    total = adapter.shape(whole)[0]
    parts = adapter.parts(whole, [total // count + (rank < total % count) for rank in range(count)])
    mine = parts[me]
    # What this rank receives in the first step: every peer's values of its own part.
    taken, pieces = [], [mine] * count
    if adapter.numel(mine):
        for peer in range(count):
            if peer != me:
                pieces[peer], key = adapter.scratch.take(adapter.shape(mine), mine)
                taken.append((pieces[peer], key))
    _send_then_receive(adapter, parts, pieces, group)
    if adapter.numel(mine):
        # Into a buffer of its own: a reduction into one of its inputs could overwrite that input
        # before reading it (with three parts or more).
        reduced, key = adapter.scratch.take(adapter.shape(mine), mine)
        taken.append((reduced, key))
        adapter.reduce_into(reduced, pieces, op)
        adapter.copy_(mine, reduced)
    _send_then_receive(adapter, [mine] * count, parts, group)
    for buffer, key in taken:
        adapter.scratch.give(buffer, key)
    return Work() if async_op else None


def buffered_send_all_to_all(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all_single as blocking sends of every peer's part, then each peer's part received
    straight into its place in ``output`` (any split sizes)."""
    _, me = _members(adapter, group)
    sent = adapter.parts(tensor, input_split_sizes)
    received = adapter.parts(output, output_split_sizes)
    if adapter.numel(received[me]):
        adapter.copy_(received[me], sent[me])
    _send_then_receive(adapter, sent, received, group)
    return Work() if async_op else None


def buffered_send_all_to_all_list(
    adapter: Adapter,
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all as :func:`buffered_send_all_to_all` of separate tensors, each part received
    straight into its output tensor."""
    _, me = _members(adapter, group)
    if adapter.numel(output_tensor_list[me]):
        adapter.copy_(output_tensor_list[me], input_tensor_list[me])
    _send_then_receive(adapter, input_tensor_list, output_tensor_list, group)
    return Work() if async_op else None


# -- a group of one rank -------------------------------------------------------------------------
#
# A group of one rank has nothing to send: every collective's result is the rank's own tensor,
# as it is or copied into the output. The backends still run their machinery for it: at world
# size 1 and 1 KB, MCCL took 1.0-3.0 ms a call and Gloo 33-71 us, compat's whole call this way
# 9-89 us on MindSpore and 5.6-18 on torch (compat bench -n 1; mapping_tables/capabilities.toml
# has each figure). Each refuses a group of more ranks.


def _alone(adapter: Adapter, group: GroupHandle, algorithm: str) -> None:
    """Refuse ``group`` if it has more ranks than ``algorithm`` runs (:data:`MOST_RANKS`: one;
    the one-rank algorithms move nothing between ranks)."""
    too_large = group_too_large(algorithm, len(adapter.group_ranks(group)))
    if too_large is not None:
        raise UnsupportedError(too_large)


def _as_it_is(
    adapter: Adapter, group: GroupHandle, async_op: bool, algorithm: str
) -> Handle | None:
    """The one-rank result of a collective whose tensor is its own result: nothing to do."""
    _alone(adapter, group, algorithm)
    return Work() if async_op else None


def _copied(
    adapter: Adapter,
    group: GroupHandle,
    async_op: bool,
    algorithm: str,
    target: Tensor,
    source: Tensor,
) -> Handle | None:
    """The one-rank result of a collective with an output: ``source``'s values copied into
    ``target`` (same shape), unless it is empty or ``target`` itself."""
    _alone(adapter, group, algorithm)
    if target is not source and adapter.numel(target):
        adapter.copy_(target, source)
    return Work() if async_op else None


def one_rank_all_reduce(
    adapter: Adapter, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_reduce of one rank: the reduction of one tensor is that tensor, for every op (avg
    divides by one), so ``tensor`` is left as it is."""
    return _as_it_is(adapter, group, async_op, "one_rank_all_reduce")


def one_rank_reduce(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """reduce of one rank: ``tensor`` is the result on ``dst`` already (as all_reduce's)."""
    return _as_it_is(adapter, group, async_op, "one_rank_reduce")


def one_rank_broadcast(
    adapter: Adapter, tensor: Tensor, src: int, group: GroupHandle, async_op: bool
) -> Handle | None:
    """broadcast of one rank: ``tensor`` is ``src``'s own, left as it is."""
    return _as_it_is(adapter, group, async_op, "one_rank_broadcast")


def one_rank_barrier(
    adapter: Adapter, group: GroupHandle, async_op: bool, device_ids: list[int] | None = None
) -> Handle | None:
    """barrier of one rank: every rank of the group has arrived."""
    del device_ids  # compat.barrier passes them to the backend's own call instead
    return _as_it_is(adapter, group, async_op, "one_rank_barrier")


def one_rank_all_gather(
    adapter: Adapter, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather of one rank (any dim-0 size): ``tensor`` copied into ``tensor_list[0]``."""
    return _copied(adapter, group, async_op, "one_rank_all_gather", tensor_list[0], tensor)


def one_rank_all_gather_into_tensor(
    adapter: Adapter, output: Tensor, tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather_into_tensor of one rank: ``tensor`` copied into ``output``."""
    return _copied(adapter, group, async_op, "one_rank_all_gather_into_tensor", output, tensor)


def one_rank_reduce_scatter(
    adapter: Adapter,
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter of one rank (any dim-0 size): the rank's own part, reduced with no other,
    ``input_list[0]``, copied into ``output``."""
    return _copied(adapter, group, async_op, "one_rank_reduce_scatter", output, input_list[0])


def one_rank_reduce_scatter_tensor(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter_tensor of one rank: ``tensor`` copied into ``output``."""
    return _copied(adapter, group, async_op, "one_rank_reduce_scatter_tensor", output, tensor)


def one_rank_scatter(
    adapter: Adapter,
    tensor: Tensor,
    scatter_list: list[Tensor] | None,
    src: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """scatter of one rank, the root: ``scatter_list[0]`` copied into ``tensor``."""
    assert scatter_list is not None  # the root's list, checked by compat.scatter
    return _copied(adapter, group, async_op, "one_rank_scatter", tensor, scatter_list[0])


def one_rank_gather(
    adapter: Adapter,
    tensor: Tensor,
    gather_list: list[Tensor] | None,
    dst: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """gather of one rank, the root: ``tensor`` copied into ``gather_list[0]``."""
    assert gather_list is not None  # the root's list, checked by compat.gather
    return _copied(adapter, group, async_op, "one_rank_gather", gather_list[0], tensor)


def one_rank_all_to_all_single(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all_single of one rank: the rank's one part, all of ``tensor``, copied into
    ``output``."""
    return _copied(adapter, group, async_op, "one_rank_all_to_all_single", output, tensor)


def one_rank_all_to_all(
    adapter: Adapter,
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all of one rank (any dim-0 size): ``input_tensor_list[0]`` copied into
    ``output_tensor_list[0]``."""
    return _copied(
        adapter, group, async_op, "one_rank_all_to_all", output_tensor_list[0], input_tensor_list[0]
    )


#: The largest group each bounded algorithm runs (the one-rank algorithms move nothing between
#: ranks): the capability table may choose one only with a ``max_ranks`` within it, and
#: ``compat bench --algorithm`` refuses a larger run before any rank starts.
MOST_RANKS: dict[str, int] = {
    function.__name__: 1
    for function in (
        one_rank_all_reduce,
        one_rank_reduce,
        one_rank_broadcast,
        one_rank_barrier,
        one_rank_all_gather,
        one_rank_all_gather_into_tensor,
        one_rank_reduce_scatter,
        one_rank_reduce_scatter_tensor,
        one_rank_scatter,
        one_rank_gather,
        one_rank_all_to_all_single,
        one_rank_all_to_all,
    )
}


def group_too_large(algorithm: str, ranks: int) -> str | None:
    """Why ``algorithm`` cannot run a group of ``ranks`` ranks (:data:`MOST_RANKS`), or None
    if it can (every algorithm not in it runs groups of any size)."""
    most = MOST_RANKS.get(algorithm)
    if most is None or ranks <= most:
        return None
    return f"{runs_at_most(algorithm)}; this group has {ranks_text(ranks)}"


def runs_at_most(algorithm: str) -> str:
    """The sentence that says how large a group ``algorithm`` (in :data:`MOST_RANKS`) runs."""
    return f"{algorithm} runs groups of at most {ranks_text(MOST_RANKS[algorithm])}"


def ranks_text(count: int) -> str:
    """``count`` ranks in words: "1 rank", "3 ranks"."""
    return f"{count} rank" if count == 1 else f"{count} ranks"


# -- point to point into the output (Gloo) ---------------------------------------------------------

#: The tag of the messages compat's point-to-point algorithms send (the largest torch takes), so
#: that a user's pending irecv from a peer with another tag never takes one of them.
ALGORITHM_TAG = 2**31 - 1
#: The tag of monitored_barrier's arrivals (reported_barrier_in_memory): a receive a barrier
#: left pending (its peer never came) takes only a later arrival from that peer, never a user's
#: message or one of compat's algorithms.
ARRIVAL_TAG = ALGORITHM_TAG - 1


def pairwise_all_gather(
    adapter: Adapter, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather as one irecv from and one isend to each peer, all issued at once, each peer's
    tensor received straight into its ``tensor_list`` entry (parts of any dim-0 size).

    One step of messages, where Gloo's ring takes one per peer (capabilities.toml says where it
    is faster, and by how much). An output the backend cannot receive into as it is (not
    contiguous) is received into a buffer of its own and copied in once complete. The messages
    carry :data:`ALGORITHM_TAG`.
    """
    ranks = adapter.group_ranks(group)
    count, me = len(ranks), ranks.index(adapter.rank())
    order = [(me + step) % count for step in range(1, count)]
    source = tensor if adapter.is_dense(tensor) else adapter.clone(tensor)
    pending: list[Handle] = []
    staged: list[tuple[Tensor, Tensor]] = []
    # The receives first, so that each message finds its buffer posted.
    for peer in reversed(order):
        out = tensor_list[peer]
        if adapter.numel(out):
            target = out
            if not adapter.is_dense(out):
                target = adapter.empty(adapter.shape(out), out)
                staged.append((out, target))
            pending.append(adapter.irecv(target, ranks[peer], group, ALGORITHM_TAG))
    if adapter.numel(source):
        pending.extend(adapter.isend(source, ranks[peer], group, ALGORITHM_TAG) for peer in order)
        adapter.copy_(tensor_list[me], source)

    def finish() -> None:
        for out, target in staged:
            adapter.copy_(out, target)

    work = Work(pending, finish)
    if async_op:
        return work
    work.wait()
    return None


def pairwise_all_gather_into_tensor(
    adapter: Adapter, output: Tensor, tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather_into_tensor as :func:`pairwise_all_gather` into ``output``'s dim-0 parts."""
    parts = _equal_parts(adapter, output, group)
    return pairwise_all_gather(adapter, parts, tensor, group, async_op)


def pairwise_all_gather_reduce(
    adapter: Adapter, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_reduce as :func:`pairwise_all_gather` plus a local reduction, in rank order on every
    rank (so every rank ends with the same bits): one step of messages, where Gloo's ring takes
    several."""
    pairwise = partial(pairwise_all_gather, adapter)
    return _gathered_then_reduced(adapter, tensor, op, group, async_op, pairwise)


# -- shared memory (ranks of one host) ------------------------------------------------------------
# The data goes through memory every rank of the group maps (compat.transport.shared_memory); the
# ranks
# wait for each other once per round of at most a slot's bytes. The capability table chooses these
# only for a group that has a window (one_host): its ranks on this host, its tensors in host
# memory. Each completes before returning: with ``async_op`` the Work is already complete.


def _window(adapter: Adapter, group: GroupHandle, doing: str) -> SharedWindow:
    """``group``'s window, named to be ``doing`` a collective (for an error that names it)."""
    found = shared_memory.window(adapter, group)
    if found is not None:
        found.doing = doing
    if found is None:
        raise UnsupportedError(
            "a shared-memory algorithm: this group has no shared-memory window (its ranks on "
            "several hosts, one rank, /dev/shm refused a file, or COMPAT_SHARED_MEMORY=0); the "
            "capability table chooses it only where the group has one"
        )
    return found


class _FlatViews:
    """The 1-d tensors one shared-memory call reads and writes: flat views of the caller's
    tensors, else of dense copies (a view that is not contiguous). The copies live until the
    call is done (a flat view need not hold on to the memory it views: MindSpore's), and those
    of written tensors are then copied back into exactly the caller's elements."""

    def __init__(self, adapter: Adapter) -> None:
        self._adapter = adapter
        self._copies: list[tuple[Tensor, Tensor, bool]] = []  # (caller's, copy, written)

    def source(self, tensor: Tensor) -> Tensor:
        """A 1-d tensor over ``tensor``'s elements, to read."""
        return self._flat(tensor, False)

    def target(self, tensor: Tensor) -> Tensor:
        """A 1-d tensor whose elements end up in ``tensor`` once :meth:`done`."""
        return self._flat(tensor, True)

    def _flat(self, tensor: Tensor, written: bool) -> Tensor:
        flat = self._adapter.flat_view(tensor)
        if flat is not None:
            return flat
        copy = self._adapter.clone(tensor)
        self._copies.append((tensor, copy, written))
        return _flat(self._adapter, copy)

    def done(self, async_op: bool) -> Handle | None:
        """Copy the written copies back; the call's result (it has completed)."""
        for tensor, copy, written in self._copies:
            if written:
                self._adapter.copy_(tensor, copy)
        self._copies = []
        return Work() if async_op else None


def _flat(adapter: Adapter, dense: Tensor) -> Tensor:
    flat = adapter.flat_view(dense)
    if flat is None:
        raise UnsupportedError(
            f"a shared-memory algorithm: no flat view of a {adapter.dtype(dense)} tensor on "
            f"{adapter.device(dense)}"
        )
    return flat


def _flat_equal_parts(adapter: Adapter, flat: Tensor, group: GroupHandle) -> list[Tensor]:
    """1-d ``flat`` in one equal part per rank of ``group``, made by :meth:`Adapter.parts`
    (:func:`_equal_parts` cuts dim 0 by split, which on MindSpore makes a slicing view per
    part: about 1 ms each)."""
    count = len(adapter.group_ranks(group))
    return adapter.parts(flat, [adapter.numel(flat) // count] * count)


def _chunks(adapter: Adapter, flat: Tensor, step: int) -> list[Tensor]:
    """``flat`` cut into consecutive pieces of ``step`` elements (the last one shorter)."""
    total = adapter.numel(flat)
    if not total:
        return []
    return adapter.parts(flat, [min(step, total - start) for start in range(0, total, step)])


def _step(adapter: Adapter, like: Tensor, room: int) -> int:
    """The elements of ``like``'s dtype that ``room`` bytes hold."""
    if not adapter.numel(like):
        like = adapter.empty((1,), like)
    return room // (adapter.nbytes(like) // adapter.numel(like))


def shared_memory_all_reduce(
    adapter: Adapter, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_reduce through shared memory: round by round each rank writes a piece of its tensor
    into its slot and, once every rank has (a barrier), reduces every rank's piece, in group-rank
    order, into its own tensor. Every rank computes the same reduction in the same order: every
    rank ends with the same bits, for every op (AVG: the sum divided by the group's size)."""
    window = _window(adapter, group, "all_reduce")
    views = _FlatViews(adapter)
    flat = views.target(tensor)
    step = _step(adapter, flat, window.region_bytes())
    for piece in _chunks(adapter, flat, step):
        numel = adapter.numel(piece)
        adapter.copy_(window.own(numel, piece), piece)
        slots = window.publish()
        adapter.reduce_into(piece, [window.read(slot, numel, piece) for slot in slots], op)
    return views.done(async_op)


def shared_memory_all_reduce_in_shares(
    adapter: Adapter, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_reduce through shared memory in two rounds a piece, as a reduce_scatter then an
    all_gather: each rank writes a piece of its tensor into its slot; once every rank has, each
    reduces its share of the piece (1/n of it) from every rank's slot, in group-rank order, into
    its slot of the next round; once every rank has, each copies every rank's reduced share into
    its tensor. A rank reads and writes about three pieces where shared_memory_all_reduce's
    reads n + 2 (it reduces the whole piece on every rank): fewer bytes from 3 ranks up, for a
    second round each piece. Every element is reduced once, by one rank: every rank ends with
    the same bits, for every op (AVG: the sum divided by the group's size)."""
    window = _window(adapter, group, "all_reduce")
    views = _FlatViews(adapter)
    flat = views.target(tensor)
    count = window.size
    step = _step(adapter, flat, window.region_bytes())
    itemsize = adapter.nbytes(flat) // max(1, adapter.numel(flat))
    for piece in _chunks(adapter, flat, step):
        numel = adapter.numel(piece)
        adapter.copy_(window.own(numel, piece), piece)
        slots = window.publish()
        bounds = _share_bounds(numel, count, itemsize)
        start, end = bounds[window.me]
        if end > start:
            share = window.own(end - start, piece, start * itemsize)
            sources = [window.read(slot, end - start, piece, start * itemsize) for slot in slots]
            adapter.reduce_into(share, sources, op)
        shares = window.publish()
        parts = adapter.parts(piece, [end - start for start, end in bounds])
        for (start, end), part, slot in zip(bounds, parts, shares, strict=True):
            if end > start:
                adapter.copy_(part, window.read(slot, end - start, piece, start * itemsize))
    return views.done(async_op)


def _share_bounds(numel: int, count: int, itemsize: int) -> list[tuple[int, int]]:
    """``[start, end)`` of each of ``count`` ranks' shares of ``numel`` elements: consecutive,
    each starting on a 64-byte boundary (numpy's loops run at full speed there), the last
    ones possibly empty."""
    align = max(1, 64 // max(1, itemsize))
    per = -(-numel // count)
    per = -(-per // align) * align
    return [(min(numel, r * per), min(numel, (r + 1) * per)) for r in range(count)]


def shared_memory_all_gather(
    adapter: Adapter, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather through shared memory: round by round each rank writes a piece of its tensor
    into its slot and, once every rank has (a barrier), copies every rank's piece into its output
    (parts of any dim-0 size: the uneven form too; every rank knows every part's size, so all run
    the same rounds)."""
    window = _window(adapter, group, "all_gather")
    views = _FlatViews(adapter)
    source = views.source(tensor)
    targets = [views.target(out) for out in tensor_list]
    step = _step(adapter, source, window.region_bytes())
    sent = _chunks(adapter, source, step)
    received = [_chunks(adapter, target, step) for target in targets]
    for index in range(max(len(pieces) for pieces in received)):
        if index < len(sent):
            adapter.copy_(window.own(adapter.numel(sent[index]), source), sent[index])
        slots = window.publish()
        for slot, pieces in zip(slots, received, strict=True):
            if index < len(pieces):
                piece = pieces[index]
                adapter.copy_(piece, window.read(slot, adapter.numel(piece), piece))
    return views.done(async_op)


def shared_memory_all_gather_into_tensor(
    adapter: Adapter, output: Tensor, tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather_into_tensor as :func:`shared_memory_all_gather` into ``output``'s parts (1-d
    parts of a flat view: on MindSpore a view made by slicing costs about 1 ms)."""
    views = _FlatViews(adapter)
    parts = _flat_equal_parts(adapter, views.target(output), group)
    done = shared_memory_all_gather(adapter, parts, tensor, group, async_op)
    views.done(async_op)
    return done


def _shared_memory_exchange(
    adapter: Adapter, sources: list[Tensor], targets: list[Tensor], window: SharedWindow
) -> None:
    """Every rank's ``sources[p]`` (1-d) into rank p's ``targets[me]`` (1-d), through shared
    memory: a slot holds one region per rank, and round by round each rank writes a piece of each
    peer's part into that peer's region. A rank knows only its own parts' sizes, so each first
    publishes the rounds it needs, and all run the largest number."""
    count, me = window.size, window.me
    like = sources[0]
    region = window.region_bytes(count)
    step = _step(adapter, like, region)
    sent = [
        _chunks(adapter, source, step) if peer != me else [] for peer, source in enumerate(sources)
    ]
    received = [
        _chunks(adapter, target, step) if peer != me else [] for peer, target in enumerate(targets)
    ]
    needed = max(len(pieces) for pieces in (*sent, *received))
    rounds, index = 1, 0
    while index < rounds:
        for peer, pieces in enumerate(sent):
            if index < len(pieces):
                piece = pieces[index]
                adapter.copy_(window.own(adapter.numel(piece), piece, peer * region), piece)
        if index == 0:
            window.write_word(needed)
        slots = window.publish()
        if index == 0:
            rounds = max(window.word(slot) for slot in slots)
        for peer, pieces in enumerate(received):
            if index < len(pieces):
                piece = pieces[index]
                adapter.copy_(
                    piece, window.read(slots[peer], adapter.numel(piece), piece, me * region)
                )
        index += 1
    if adapter.numel(targets[me]):
        adapter.copy_(targets[me], sources[me])


def shared_memory_all_to_all(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all_single through shared memory (any split sizes): each rank writes every peer's
    part into that peer's region of its slot, round by round, and reads its own part from every
    peer's slot once all have written (a barrier per round)."""
    window = _window(adapter, group, "all_to_all_single")
    views = _FlatViews(adapter)
    sources, targets = _flat_parts(
        adapter, views, output, tensor, output_split_sizes, input_split_sizes
    )
    _shared_memory_exchange(adapter, sources, targets, window)
    return views.done(async_op)


def _flat_parts(
    adapter: Adapter,
    views: _FlatViews,
    output: Tensor,
    tensor: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
) -> tuple[list[Tensor], list[Tensor]]:
    """all_to_all_single's parts: of ``tensor``, to send, and of ``output``, to receive into,
    split by rows of dim 0, each dense (``views`` stages a view and writes it back)."""
    source, target = views.source(tensor), views.target(output)
    rows_in, rows_out = adapter.shape(tensor), adapter.shape(output)
    per_row_in = adapter.numel(tensor) // rows_in[0] if rows_in and rows_in[0] else 0
    per_row_out = adapter.numel(output) // rows_out[0] if rows_out and rows_out[0] else 0
    return (
        adapter.parts(source, [size * per_row_in for size in input_split_sizes]),
        adapter.parts(target, [size * per_row_out for size in output_split_sizes]),
    )


def shared_memory_all_to_all_list(
    adapter: Adapter,
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all through shared memory, as :func:`shared_memory_all_to_all` with each part a
    tensor of its own."""
    window = _window(adapter, group, "all_to_all")
    views = _FlatViews(adapter)
    sources = [views.source(item) for item in input_tensor_list]
    targets = [views.target(item) for item in output_tensor_list]
    _shared_memory_exchange(adapter, sources, targets, window)
    return views.done(async_op)


def shared_memory_p2p_all_to_all(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all_single through the window's point-to-point channels
    (:mod:`compat.transport.mailbox`):
    one message to each peer, each received straight into its place in ``output`` (any split
    sizes). A part larger than its channel is read by its receiver straight from the sender's
    memory where the host allows it: one copy, every rank reading at once, and no rounds (the
    rounds of :func:`shared_memory_all_to_all` pass 1 MB slots, shared by every peer, through
    all the ranks in step). A group whose window has no channels runs that function."""
    window = _window(adapter, group, "all_to_all_single")
    if not window.point_to_point:
        return shared_memory_all_to_all(
            adapter, output, tensor, output_split_sizes, input_split_sizes, group, async_op
        )
    views = _FlatViews(adapter)
    sources, targets = _flat_parts(
        adapter, views, output, tensor, output_split_sizes, input_split_sizes
    )
    _exchange_through_channels(adapter, sources, targets, window)
    return views.done(async_op)


def shared_memory_p2p_all_to_all_list(
    adapter: Adapter,
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all as :func:`shared_memory_p2p_all_to_all`, each part a tensor of its own."""
    window = _window(adapter, group, "all_to_all")
    if not window.point_to_point:
        return shared_memory_all_to_all_list(
            adapter, output_tensor_list, input_tensor_list, group, async_op
        )
    views = _FlatViews(adapter)
    sources = [views.source(item) for item in input_tensor_list]
    targets = [views.target(item) for item in output_tensor_list]
    _exchange_through_channels(adapter, sources, targets, window)
    return views.done(async_op)


def _exchange_through_channels(
    adapter: Adapter, sources: list[Tensor], targets: list[Tensor], window: SharedWindow
) -> None:
    """Send ``sources[p]`` to group rank p and receive group rank p's into ``targets[p]``, every
    receive posted before any send (a message that finds its receive is not kept aside)."""
    mailbox, me = window.mailbox(), window.me
    peers = [peer for peer in range(window.size) if peer != me]
    pending: list[Handle] = [
        mailbox.irecv(
            adapter.host_address(targets[peer]), adapter.nbytes(targets[peer]), peer,
            _COLLECTIVE_TAG, targets[peer],
        )
        for peer in peers
    ]  # fmt: skip
    pending += [
        mailbox.isend(
            adapter.host_address(sources[peer]), adapter.nbytes(sources[peer]), peer,
            _COLLECTIVE_TAG, sources[peer],
        )
        for peer in peers
    ]  # fmt: skip
    if adapter.numel(targets[me]):
        adapter.copy_(targets[me], sources[me])
    for message in pending:
        message.wait()


def _shared_memory_reduce_parts(
    adapter: Adapter,
    parts: list[Tensor],
    target: Tensor | None,
    root: int | None,
    op: ReduceOp,
    window: SharedWindow,
) -> None:
    """Reduce part p (1-d, the same size on every rank) of every rank into rank p's ``target``,
    through shared memory: round by round each rank writes a piece of each part into that part's
    region of its slot, and each rank reduces its own region of every rank's slot, in group-rank
    order. With ``root`` (reduce), the one part is the whole tensor and only ``root`` reduces."""
    count, me = window.size, window.me
    region = window.region_bytes(1 if root is not None else count)
    step = _step(adapter, parts[0], region)
    pieces = [_chunks(adapter, part, step) for part in parts]
    mine = 0 if root is not None else me
    outputs = [] if target is None else _chunks(adapter, target, step)
    for index in range(max(len(chunks) for chunks in pieces)):
        for part, chunks in enumerate(pieces):
            if index < len(chunks):
                piece = chunks[index]
                adapter.copy_(window.own(adapter.numel(piece), piece, part * region), piece)
        slots = window.publish()
        if index < len(outputs):
            out = outputs[index]
            numel = adapter.numel(out)
            sources = [window.read(slot, numel, out, mine * region) for slot in slots]
            adapter.reduce_into(out, sources, op)


def shared_memory_reduce_scatter(
    adapter: Adapter,
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter through shared memory (parts of any dim-0 size: the uneven form too):
    round by round each rank writes a piece of every part into that part's region of its slot,
    then reduces its own part's pieces from every rank's slot, in group-rank order (every op and
    dtype: a numpy reduction where numpy has the dtype)."""
    window = _window(adapter, group, "reduce_scatter")
    views = _FlatViews(adapter)
    parts = [views.source(item) for item in input_list]
    target = views.target(output)
    _shared_memory_reduce_parts(adapter, parts, target, None, op, window)
    return views.done(async_op)


def shared_memory_reduce_scatter_tensor(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter_tensor as :func:`shared_memory_reduce_scatter` of ``tensor``'s equal
    parts (1-d parts of a flat view: no view made by slicing)."""
    views = _FlatViews(adapter)
    parts = _flat_equal_parts(adapter, views.source(tensor), group)
    return shared_memory_reduce_scatter(adapter, output, parts, op, group, async_op)


def shared_memory_reduce(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """reduce through shared memory: every rank writes its tensor, round by round, and ``dst``
    reduces every rank's, in group-rank order, into its tensor; the others' are left as they
    were."""
    window = _window(adapter, group, "reduce")
    root = adapter.group_ranks(group).index(dst)
    views = _FlatViews(adapter)
    if window.me == root:
        source = target = views.target(tensor)
    else:
        source, target = views.source(tensor), None
    _shared_memory_reduce_parts(adapter, [source], target, root, op, window)
    return views.done(async_op)


def shared_memory_broadcast(
    adapter: Adapter, tensor: Tensor, src: int, group: GroupHandle, async_op: bool
) -> Handle | None:
    """broadcast through shared memory: round by round ``src`` writes a piece of its tensor into
    its slot, and every other rank copies it from there. The rounds are one-way: ``src`` waits
    for no rank (as a backend's broadcast returns on the root once its sends are out), the others
    for ``src``; ``src`` writes a slot again only once every rank has read it."""
    window = _window(adapter, group, "broadcast")
    root = adapter.group_ranks(group).index(src)
    views = _FlatViews(adapter)
    if window.me == root:
        flat = views.source(tensor)
    else:
        flat = views.target(tensor)
    for piece in _chunks(adapter, flat, _step(adapter, flat, window.region_bytes())):
        numel = adapter.numel(piece)
        if window.me == root:
            adapter.copy_(window.own(numel, piece), piece)
            window.publish(wait_for=())
        else:
            slots = window.publish(wait_for=(root,))
            adapter.copy_(piece, window.read(slots[root], numel, piece))
    return views.done(async_op)


def shared_memory_scatter(
    adapter: Adapter,
    tensor: Tensor,
    scatter_list: list[Tensor] | None,
    src: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """scatter through shared memory: ``src`` writes each rank's part into that rank's region of
    its slot, round by round, and each rank copies its own from there. Every part has
    ``tensor``'s size, so every rank counts the same rounds (as broadcast's). The rounds are
    one-way, as broadcast's: ``src`` waits for no rank, the others for ``src``."""
    window = _window(adapter, group, "scatter")
    count, root = window.size, adapter.group_ranks(group).index(src)
    views = _FlatViews(adapter)
    target = views.target(tensor)
    region = window.region_bytes(count)
    step = _step(adapter, target, region)
    pieces = _chunks(adapter, target, step)
    if window.me != root:
        for piece in pieces:
            slots = window.publish(wait_for=(root,))
            numel = adapter.numel(piece)
            adapter.copy_(piece, window.read(slots[root], numel, piece, window.me * region))
        return views.done(async_op)
    assert scatter_list is not None  # the root's list, checked by compat.scatter
    parts = [views.source(item) for item in scatter_list]
    sent = [_chunks(adapter, part, step) for part in parts]
    for index in range(len(pieces)):
        for peer, chunks in enumerate(sent):
            if peer != root:
                piece = chunks[index]
                adapter.copy_(window.own(adapter.numel(piece), piece, peer * region), piece)
        window.publish(wait_for=())
    if pieces:
        adapter.copy_(target, parts[root])
    return views.done(async_op)


def shared_memory_gather(
    adapter: Adapter,
    tensor: Tensor,
    gather_list: list[Tensor] | None,
    dst: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """gather through shared memory: every rank writes its tensor into its slot, round by round,
    and ``dst`` copies every rank's from there. Every part has ``tensor``'s size, so every rank
    counts the same rounds. The rounds are one-way: the ranks other than ``dst`` wait for no
    rank (as a backend's gather returns on them once their send is out), ``dst`` for every
    rank."""
    window = _window(adapter, group, "gather")
    root = adapter.group_ranks(group).index(dst)
    views = _FlatViews(adapter)
    source = views.source(tensor)
    step = _step(adapter, source, window.region_bytes())
    pieces = _chunks(adapter, source, step)
    if window.me != root:
        for piece in pieces:
            adapter.copy_(window.own(adapter.numel(piece), piece), piece)
            window.publish(wait_for=())
        return views.done(async_op)
    assert gather_list is not None  # the root's list, checked by compat.gather
    targets = [views.target(item) for item in gather_list]
    received = [_chunks(adapter, target, step) for target in targets]
    for index in range(len(pieces)):
        slots = window.publish()
        for peer, chunks in enumerate(received):
            if peer != root:
                piece = chunks[index]
                numel = adapter.numel(piece)
                adapter.copy_(piece, window.read(slots[peer], numel, piece))
    if pieces:
        adapter.copy_(targets[root], source)
    return views.done(async_op)


#: The tag of the messages compat's collectives send through a window's point-to-point channels:
#: users' tags are 0 or more (compat.p2p checks), so no user's receive takes these.
_COLLECTIVE_TAG = -1


def shared_memory_p2p_scatter(
    adapter: Adapter,
    tensor: Tensor,
    scatter_list: list[Tensor] | None,
    src: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """scatter through the window's point-to-point channels (:mod:`compat.transport.mailbox`):
    ``src``
    sends each rank its part, and each rank receives it into its tensor. A part larger than its
    channel is read by its rank straight from ``src``'s memory, where the host allows it: one
    copy, every rank its own at once, and no rounds. ``src`` returns once every part has been
    read or lies in its channel. A group whose window has no channels (made after the group)
    runs :func:`shared_memory_scatter`."""
    return _rooted_through_channels(adapter, tensor, scatter_list, src, group, async_op, False)


def shared_memory_p2p_gather(
    adapter: Adapter,
    tensor: Tensor,
    gather_list: list[Tensor] | None,
    dst: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """gather through the window's point-to-point channels (:mod:`compat.transport.mailbox`): every
    rank
    sends ``dst`` its tensor, and ``dst`` receives each into its part. A tensor larger than its
    channel is read by ``dst`` straight from its rank's memory, where the host allows it (one
    copy, no rounds); that rank returns once it has been read, the others once their tensor lies
    in the channel. A group whose window has no channels runs :func:`shared_memory_gather`."""
    return _rooted_through_channels(adapter, tensor, gather_list, dst, group, async_op, True)


def _rooted_through_channels(
    adapter: Adapter,
    tensor: Tensor,
    listed: list[Tensor] | None,
    root_rank: int,
    group: GroupHandle,
    async_op: bool,
    to_root: bool,
) -> Handle | None:
    """One message between the root (global rank ``root_rank``) and each other rank, through
    the channels: ``tensor`` on a rank other than the root, ``listed[p]`` (one per group rank)
    on the root; toward the root (gather) or from it (scatter). The root's own part is copied
    between ``tensor`` and ``listed[root]``."""
    window = _window(adapter, group, "gather" if to_root else "scatter")
    if not window.point_to_point:
        rounds = shared_memory_gather if to_root else shared_memory_scatter
        return rounds(adapter, tensor, listed, root_rank, group, async_op)
    mailbox = window.mailbox()
    root = mailbox.index[root_rank]
    views = _FlatViews(adapter)
    mine = views.source(tensor) if to_root else views.target(tensor)
    nbytes = adapter.nbytes(mine)
    if window.me != root:
        post = mailbox.isend if to_root else mailbox.irecv
        post(adapter.host_address(mine), nbytes, root, _COLLECTIVE_TAG, mine).wait()
        return views.done(async_op)
    assert listed is not None  # the root's list, checked by compat.scatter and compat.gather
    parts = [views.target(item) if to_root else views.source(item) for item in listed]
    post = mailbox.irecv if to_root else mailbox.isend
    pending = [
        post(adapter.host_address(part), nbytes, peer, _COLLECTIVE_TAG, part)
        for peer, part in enumerate(parts)
        if peer != root
    ]
    if nbytes and to_root:
        adapter.copy_(parts[root], mine)
    elif nbytes:
        adapter.copy_(mine, parts[root])
    for message in pending:
        message.wait()
    return views.done(async_op)


# -- all_to_all (list form) ----------------------------------------------------------------------


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
    trailing = adapter.shape(input_tensor_list[0])[1:]
    like = input_tensor_list[0]
    taken = []
    whole = adapter.joined(input_tensor_list)
    if whole is None:
        whole, key = adapter.scratch.take((sum(in_sizes), *trailing), like)
        taken.append((whole, key))
        for part, item in zip(adapter.split(whole, in_sizes), input_tensor_list, strict=True):
            adapter.copy_(part, item)
    received = adapter.joined(output_tensor_list)
    copy_out = received is None
    if received is None:
        received, key = adapter.scratch.take((sum(out_sizes), *trailing), like)
        taken.append((received, key))
    pending = adapter.all_to_all_single(received, whole, out_sizes, in_sizes, group, async_op)

    def finish() -> None:
        if copy_out:
            parts = adapter.split(received, out_sizes)
            for out, part in zip(output_tensor_list, parts, strict=True):
                adapter.copy_(out, part)
        for buffer, buffer_key in taken:
            adapter.scratch.give(buffer, buffer_key)

    return _complete([pending], async_op, finish)


def pairwise_all_to_all_list(
    adapter: Adapter,
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all as blocking send/recv between each pair of ranks (as
    :func:`pairwise_all_to_all`), each part received straight into its output tensor. It
    completes before returning: with ``async_op`` the Work is already complete."""
    ranks = adapter.group_ranks(group)
    me = ranks.index(adapter.rank())
    if adapter.shape(output_tensor_list[me])[0]:
        adapter.copy_(output_tensor_list[me], input_tensor_list[me])
    for peer in range(len(ranks)):
        if peer != me:
            _exchange(
                adapter, me, peer, ranks[peer], input_tensor_list[peer],
                output_tensor_list[peer], group,
            )  # fmt: skip
    return Work() if async_op else None


def shared_memory_barrier(
    adapter: Adapter, group: GroupHandle, async_op: bool, device_ids: list[int] | None = None
) -> Handle | None:
    """barrier through shared memory: one round of the group's window with nothing written;
    every rank counts its arrival and waits for every peer's (microseconds, against 0.1 ms for
    Gloo's barrier and milliseconds for MCCL's)."""
    del device_ids  # compat.barrier passes them to the backend's own call instead
    _window(adapter, group, "barrier").publish()
    return Work() if async_op else None


# -- monitored_barrier ---------------------------------------------------------------------------

#: Seconds a rank still waits for a peer's arrival once the deadline has passed (an arrival
#: already there is received in well under this).
_GRACE = 1.0


def reported_barrier(
    adapter: Adapter, group: GroupHandle, timeout: float, wait_all_ranks: bool
) -> None:
    """monitored_barrier from point-to-point messages, timed by compat (so MCCL's fixed 30 s
    bound does not apply): every rank first announces its arrival to every other rank of the
    group (the sends are issued at once and left to complete), then receives the peers'
    announcements in group order within ``timeout`` (:data:`_GRACE` for each one still to hear
    from after the deadline). Every rank that waited raises :class:`compat.CollectiveTimeout`
    naming the peers it did not hear from, so every waiting rank names the missing ranks,
    whichever they are; no rank relays for another, so none waits on a rank that is away.

    ``wait_all_ranks`` is taken as torch takes it; both values name every rank that had not
    arrived by the deadline (the others' announcements are already there: hearing them costs
    well under :data:`_GRACE` each).
    """
    del wait_all_ranks  # see the docstring
    _announced_barrier(adapter, group, timeout, past_silence=True)


def reported_barrier_until_silent(
    adapter: Adapter, group: GroupHandle, timeout: float, wait_all_ranks: bool
) -> None:
    """:func:`reported_barrier` for backends where a receive that waits blocks every later
    operation of the process (MindSpore's PyNative queue, MCCL): each rank stops at the first
    peer it did not hear from by the deadline and names it; the peers after it in group order
    are named as not checked (their announcements may be there, but no receive can reach them
    until MCCL gives up on the blocked one after its fixed 30 s)."""
    del wait_all_ranks  # see reported_barrier
    _announced_barrier(adapter, group, timeout, past_silence=False)


def reported_barrier_in_memory(
    adapter: Adapter, group: GroupHandle, timeout: float, wait_all_ranks: bool
) -> None:
    """:func:`reported_barrier` for backends that receive into host memory in the background
    (Gloo): every send and every receive issued at once, the received bytes watched in memory
    until they have all arrived or the deadline has passed, then each receive and send waited
    for (all complete: every peer issued its receives right after its sends). No thread per
    wait: on Gloo's transport reported_barrier took 3.3-4.2x torch's monitored_barrier at 2
    ranks and 4.1-4.3x at 3-4 (a thread's start and hand-back cost 0.1-0.2 ms on two busy
    cores), this 1.16-1.26x and 1.96-2.38x (capabilities.toml). It names the same ranks: every
    rank that waited raises naming the peers it did not hear from by the deadline. A silent
    peer's send and receive, left pending, are held by the adapter until destroy()
    (:meth:`compat.base.adapter.Adapter.keep_pending`). Where the bytes would not be in host memory
    (a GPU home device), :func:`reported_barrier` runs instead."""
    ranks = adapter.group_ranks(group)
    me = adapter.rank()
    peers = [rank for rank in ranks if rank != me]
    if not peers:
        return
    arrival, heard = adapter.bytes_tensor(b"\x01"), adapter.bytes_tensor(bytes(len(peers)))
    if not adapter.in_host_memory(heard):
        reported_barrier(adapter, group, timeout, wait_all_ranks)
        return
    started = time.monotonic()
    deadline = started + max(timeout, _GRACE)  # as reported_barrier's first receive waits
    sends = [adapter.isend(arrival, peer, group, ARRIVAL_TAG) for peer in peers]
    receives = [
        adapter.irecv(flag, peer, group, ARRIVAL_TAG)
        for flag, peer in zip(adapter.parts(heard, [1] * len(peers)), peers, strict=True)
    ]
    flags = (ctypes.c_ubyte * len(peers)).from_address(adapter.host_address(heard))
    with Backoff(shared_memory.yields_for(len(ranks))) as backoff:
        while not all(flags) and time.monotonic() < deadline:
            backoff.pause()
    heard_from = [bool(flag) for flag in flags]  # one reading: a byte arriving now is too late
    for came, receive, send in zip(heard_from, receives, sends, strict=True):
        if came:
            receive.wait()
            send.wait()
    silent = [index for index, came in enumerate(heard_from) if not came]
    if silent:
        adapter.keep_pending(
            [sends[index] for index in silent] + [receives[index] for index in silent]
        )
        raise _not_arrived([peers[index] for index in silent], timeout, started)


def shared_memory_monitored_barrier(
    adapter: Adapter, group: GroupHandle, timeout: float, wait_all_ranks: bool
) -> None:
    """monitored_barrier through shared memory: one round of the group's window with nothing
    written, as :func:`shared_memory_barrier`, in which each rank waits for the others' arrival
    at most ``timeout``. Every rank that waited longer raises :class:`compat.CollectiveTimeout`
    naming every rank it did not see arrive (whichever they are: their counts are in the
    memory, no message has to come through). The round runs after the window's asynchronous
    collectives issued before it. Only on a window whose ranks wait in memory (elsewhere they
    meet in the backend's barrier, which takes no timeout; compat.core.state chooses it only
    there)."""
    del wait_all_ranks  # see reported_barrier
    window = _window(adapter, group, "monitored_barrier")
    started = time.monotonic()
    missing: list[int] = []

    def job(async_op: bool) -> None:
        missing.extend(window.publish_within(timeout))

    window.run(job, False)
    if missing:
        ranks = adapter.group_ranks(group)
        raise _not_arrived(
            [ranks[index] for index in missing], timeout, started,
            waited=" for them in the group's shared memory",
        )  # fmt: skip


def _announced_barrier(
    adapter: Adapter, group: GroupHandle, timeout: float, past_silence: bool
) -> None:
    ranks = adapter.group_ranks(group)
    me = adapter.rank()
    peers = [rank for rank in ranks if rank != me]
    if not peers:
        return
    started = time.monotonic()
    deadline = started + timeout
    arrival = adapter.bytes_tensor(b"\x01")
    # Every send first, each issued now and left pending: on MCCL it completes once the peer's
    # server thread has stored it, on Gloo once the peer receives (below, whenever it arrives).
    for peer in peers:
        adapter.send_within(arrival, peer, group, 0.0)
    silent: list[int] = []
    unchecked: list[int] = []
    for peer in peers:
        if silent and not past_silence:
            unchecked.append(peer)
            continue
        flag = adapter.bytes_tensor(b"\x00")
        if (
            not adapter.recv_within(flag, peer, group, max(deadline - time.monotonic(), _GRACE))
            or adapter.to_bytes(flag) != b"\x01"
        ):
            silent.append(peer)
    if silent:
        after = (
            f"; not checked (this backend cannot receive past a rank that is away): "
            f"rank{'s' if len(unchecked) > 1 else ''} {', '.join(map(str, unchecked))}"
            if unchecked
            else ""
        )
        raise _not_arrived(silent, timeout, started, after=after)


def _not_arrived(
    missing: Sequence[int], timeout: float, started: float, waited: str = "", after: str = ""
) -> CollectiveTimeout:
    """monitored_barrier's error naming the ``missing`` ranks, for a rank that started waiting
    at ``started``; ``waited`` says where it waited, ``after`` what follows."""
    return CollectiveTimeout(
        f"monitored_barrier: rank{'s' if len(missing) > 1 else ''} "
        f"{', '.join(map(str, missing))} did not arrive within the timeout of {timeout:g} s "
        f"(this rank waited {time.monotonic() - started:.1f} s{waited}){after}"
    )


# -- point to point ------------------------------------------------------------------------------


class DeferredRecv:
    """A receive that runs when its Work is waited on (see :func:`deferred_recv`)."""

    __slots__ = ("_adapter", "_done", "_group", "_queue", "_src", "_tag", "_tensor")

    def __init__(
        self,
        adapter: Adapter,
        tensor: Tensor,
        src: int,
        group: GroupHandle,
        tag: int,
        queue: list[DeferredRecv],
    ) -> None:
        self._adapter, self._tensor, self._src, self._group = adapter, tensor, src, group
        self._tag, self._queue, self._done = tag, queue, False
        queue.append(self)

    def wait(self, timeout: object = None) -> bool:
        if timeout is not None:
            from compat.base.errors import UnsupportedError

            raise UnsupportedError(
                "timeout: a deferred receive is one blocking recv, which MindSpore bounds itself "
                f"(30 s on MCCL); expected None, got {timeout}"
            )
        if not self._done:
            # A peer's messages arrive in the order it sent them: the receives from it that were
            # issued earlier take theirs first.
            for earlier in [item for item in self._queue if item._same_peer(self)]:
                earlier._run()
                if earlier is self:
                    break
        return True

    def is_completed(self) -> bool:
        # Completion is known only by receiving; the message is on its way or already stored
        # by the receiver's server thread (a send completes without its receive).
        return self.wait()

    def _same_peer(self, other: DeferredRecv) -> bool:
        return self._src == other._src  # on any group: see settle_deferred_recvs

    def _run(self) -> None:
        self._queue.remove(self)
        self._done = True
        self._adapter.recv(self._tensor, self._src, self._group, self._tag)


def deferred_sources(adapter: Adapter) -> frozenset[int]:
    """The ranks this process has a deferred receive from that is not run yet."""
    queue = adapter.deferred_recvs
    return frozenset(item._src for item in queue) if queue else _NO_RANKS


_NO_RANKS: frozenset[int] = frozenset()


def settle_deferred_recvs(adapter: Adapter, src: int, group: GroupHandle) -> None:
    """Run the deferred receives from ``src`` on ``group`` (before a blocking recv from it, so
    that messages keep their order)."""
    queue = adapter.deferred_recvs
    if queue:
        # MCCL matches a message by its source rank alone, whatever the group: a receive from
        # `src` on any group runs first (a soak found a world irecv and a sub-group recv from
        # one peer swapping their data).
        for item in [item for item in queue if item._src == src]:
            item._run()


def deferred_recv(
    adapter: Adapter, tensor: Tensor, src: int, group: GroupHandle, tag: int = 0
) -> Handle:
    """irecv where the backend's receive blocks in issue order (MCCL: an irecv queued before the
    matching isend on every rank waits for ever): the receive is a blocking recv run by
    ``Work.wait()`` (or ``is_completed()``), after the receives issued earlier from the same
    peer. Never deadlocks where the backend's sends complete without their receive (MCCL's do:
    the receiver's server thread stores the message): every send a wait needs has been issued.
    """
    return DeferredRecv(adapter, tensor, src, group, tag, adapter.deferred_recvs)


def sends_then_deferred_recvs(
    adapter: Adapter, p2p_ops: list[tuple[str, Tensor, int, int]], group: GroupHandle
) -> list[Handle]:
    """batch_isend_irecv from the backend's isend and :func:`deferred_recv`: every send is
    issued now, in list order; each receive runs when its Work is waited on. No rank blocks
    before all its sends are out, so no cycle of blocking calls can form."""
    handles: list[Handle] = []
    for direction, tensor, peer, tag in p2p_ops:
        if direction == "isend":
            handles.append(adapter.isend(tensor, peer, group, tag))
        else:
            handles.append(deferred_recv(adapter, tensor, peer, group, tag))
    return handles


# -- point to point through shared memory ------------------------------------------------------
# A window's channels (compat.transport.mailbox): a send writes into the channel to its peer as far
# as there
# is room, a receive reads what has arrived, and wait() moves the rest. The table chooses these
# only for groups whose window was made with the group (SharedWindow.point_to_point), so that
# every sender and receiver take them. The tensors are dense (compat.p2p stages views).


def _mailbox(adapter: Adapter, group: GroupHandle) -> Mailbox:
    return _window(adapter, group, "a point-to-point call").mailbox()


def shared_memory_isend(
    adapter: Adapter, tensor: Tensor, dst: int, group: GroupHandle, tag: int = 0
) -> Handle:
    """isend through shared memory: what fits in the channel to ``dst`` is written now (all of
    a message that fits: the Work is then complete); the rest as waits make room."""
    mailbox = _mailbox(adapter, group)
    nbytes = adapter.nbytes(tensor)
    return mailbox.isend(adapter.host_address(tensor), nbytes, mailbox.index[dst], tag, tensor)


def shared_memory_irecv(
    adapter: Adapter, tensor: Tensor, src: int, group: GroupHandle, tag: int = 0
) -> Handle:
    """irecv through shared memory: what has arrived from ``src`` is read now, the rest in
    wait() (or is_completed())."""
    mailbox = _mailbox(adapter, group)
    nbytes = adapter.nbytes(tensor)
    return mailbox.irecv(adapter.host_address(tensor), nbytes, mailbox.index[src], tag, tensor)


def shared_memory_send(
    adapter: Adapter, tensor: Tensor, dst: int, group: GroupHandle, tag: int = 0
) -> None:
    """send through shared memory: returns once the message is in the channel (the receiver
    need not have taken it, as on MCCL)."""
    shared_memory_isend(adapter, tensor, dst, group, tag).wait()


def shared_memory_recv(
    adapter: Adapter, tensor: Tensor, src: int, group: GroupHandle, tag: int = 0
) -> None:
    """recv through shared memory."""
    shared_memory_irecv(adapter, tensor, src, group, tag).wait()


def shared_memory_batch_isend_irecv(
    adapter: Adapter, p2p_ops: list[tuple[str, Tensor, int, int]], group: GroupHandle
) -> list[Handle]:
    """batch_isend_irecv through shared memory: each op issued in list order as
    :func:`shared_memory_isend` or :func:`shared_memory_irecv`; no order of the ops deadlocks,
    since every wait moves every pending message of the rank on."""
    mailbox = _mailbox(adapter, group)
    issue = {"isend": mailbox.isend, "irecv": mailbox.irecv}
    return [
        issue[direction](
            adapter.host_address(tensor), adapter.nbytes(tensor), mailbox.index[peer], tag, tensor
        )
        for direction, tensor, peer, tag in p2p_ops
    ]


# -- built from all_gather, broadcast and all_reduce alone: the MindSpore ops primitives path ----
# MindSpore's GPU backend has NCCL kernels for its ops primitives only, and of those the CPU
# (MCCL) runs AllReduce (sum of float32/float16), AllGather and Broadcast (capabilities.toml,
# [mindspore_nccl] and [mccl_primitives]): every other collective is made of these three there.


def _gathered_parts(
    adapter: Adapter, tensor: Tensor, group: GroupHandle, async_op: bool
) -> tuple[list[Tensor], Handle | None]:
    """An all_gather of ``tensor`` into new tensors, one per rank of ``group``."""
    count = len(adapter.group_ranks(group))
    gathered = [adapter.empty(adapter.shape(tensor), tensor) for _ in range(count)]
    return gathered, adapter.all_gather(gathered, tensor, group, async_op)


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
    whole = adapter.cat(input_list, 0)
    gathered, pending = _gathered_parts(adapter, whole, group, async_op)
    mine = _members(adapter, group)[1]

    def finish() -> None:
        parts = [adapter.split(item, rows)[mine] for item in gathered]
        adapter.copy_(output, adapter.reduce_local(parts, op))

    return _complete([pending], async_op, finish)


def all_gather_reduce_scatter_tensor(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter_tensor as an all_gather of the whole input, then each rank reduces its
    own equal part of each, in group-rank order."""
    gathered, pending = _gathered_parts(adapter, tensor, group, async_op)
    mine = _members(adapter, group)[1]

    def finish() -> None:
        parts = [_equal_parts(adapter, item, group)[mine] for item in gathered]
        adapter.copy_(output, adapter.reduce_local(parts, op))

    return _complete([pending], async_op, finish)


def all_gather_to_dst(
    adapter: Adapter,
    tensor: Tensor,
    gather_list: list[Tensor] | None,
    dst: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """gather as an all_gather whose parts only ``dst`` keeps (into its list)."""
    gathered, pending = _gathered_parts(adapter, tensor, group, async_op)

    def finish() -> None:
        if adapter.rank() == dst and gather_list is not None:
            for out, part in zip(gather_list, gathered, strict=True):
                adapter.copy_(out, part)

    return _complete([pending], async_op, finish)


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
    count, mine = _members(adapter, group)
    shape = adapter.shape(tensor)
    if adapter.rank() == src and scatter_list is not None:
        whole = adapter.cat(scatter_list, 0)
    else:
        whole = adapter.empty((count * shape[0], *shape[1:]), tensor)
    pending = adapter.broadcast(whole, src, group, async_op)

    def finish() -> None:
        adapter.copy_(tensor, adapter.split(whole, [shape[0]] * count)[mine])

    return _complete([pending], async_op, finish)


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
    count, mine = _members(adapter, group)
    sizes = adapter.bytes_tensor(array("q", input_split_sizes).tobytes())
    gathered_sizes, _ = _gathered_parts(adapter, sizes, group, False)
    splits = [array("q", adapter.to_bytes(item)).tolist() for item in gathered_sizes]
    longest = max(sum(split) for split in splits)
    if longest == 0:  # every rank sends nothing (each computes the same longest)
        return Work([], lambda: None) if async_op else None
    rows = adapter.shape(tensor)[0]
    padded = tensor if rows == longest else _padded(adapter, tensor, longest)
    gathered, _ = _gathered_parts(adapter, padded, group, False)
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
    _, pending = _gathered_parts(adapter, token, group, async_op)
    return _complete([pending], async_op, _nothing)


def _nothing() -> None:
    """The local step of a collective that has none."""
