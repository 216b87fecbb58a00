"""Buffered sends (MCCL): every rank sends first, then receives.

An MCCL send completes once the receiver's server thread has stored the message, before any recv
is posted, so a rank can send to every peer before it receives: all directions move at once and
no rank waits on another's receive. Where a send waits for its receive (Gloo, NCCL), these would
deadlock: the capability table chooses them for MCCL only. Each completes before returning: with
``async_op`` the Work is already complete (async = "completed" in the table). Run through compat,
none meets a pending deferred irecv from a peer: compat.collectives refuses the call first, since
MCCL matches a message by its source rank alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from compat.algorithms.common import Taken, give_back, members, tensor_form
from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.types import Handle, ReduceOp, Work
from compat.transport import scratch


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


def _peers_pieces(
    adapter: Adapter, mine: Tensor, count: int, me: int, taken: Taken
) -> list[Tensor]:
    """Where each group rank's values of this rank's part ``mine`` go: ``mine`` itself for this
    rank, a scratch buffer (added to ``taken``) for each peer; ``mine`` for every rank while it
    is empty (nothing is received then)."""
    pieces = [mine] * count
    if adapter.numel(mine):
        for peer in range(count):
            if peer != me:
                pieces[peer], key = scratch.pool(adapter).take(adapter.shape(mine), mine)
                taken.append((pieces[peer], key))
    return pieces


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
    receiver's server thread stores and acknowledges each message, so no rank waits
    on another's receive. Where a send waits for its receive (Gloo, NCCL), this would deadlock;
    the capability table chooses it for MCCL only. Each rank sends to the ranks after it first and
    receives in the order the messages arrive. It completes before returning: with ``async_op``
    the Work is already complete (async = "completed" in the table).
    """
    count, me = members(adapter, group)
    taken: Taken = []
    pieces = _peers_pieces(adapter, input_list[me], count, me, taken)
    _send_then_receive(adapter, input_list, pieces, group)
    adapter.reduce_into(output, pieces, op)
    give_back(adapter, taken)
    return Work() if async_op else None


buffered_send_reduce_scatter_tensor = tensor_form(buffered_send_reduce_scatter)


def buffered_send_all_gather(
    adapter: Adapter, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather as blocking sends of ``tensor`` to every peer, then each peer's tensor received
    straight into its ``tensor_list`` entry (parts of any dim-0 size: the uneven form too)."""
    _, me = members(adapter, group)
    _send_then_receive(adapter, [tensor] * len(tensor_list), tensor_list, group)
    if adapter.numel(tensor_list[me]):
        adapter.copy_(tensor_list[me], tensor)
    return Work() if async_op else None


buffered_send_all_gather_into_tensor = tensor_form(buffered_send_all_gather)


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
    taken: Taken = []
    pieces = _peers_pieces(adapter, mine, count, me, taken)
    _send_then_receive(adapter, parts, pieces, group)
    if adapter.numel(mine):
        # Into a buffer of its own: a reduction into one of its inputs could overwrite that input
        # before reading it (with three parts or more).
        reduced, key = scratch.pool(adapter).take(adapter.shape(mine), mine)
        taken.append((reduced, key))
        adapter.reduce_into(reduced, pieces, op)
        adapter.copy_(mine, reduced)
    _send_then_receive(adapter, [mine] * count, parts, group)
    give_back(adapter, taken)
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
    sent = adapter.parts(tensor, input_split_sizes)
    received = adapter.parts(output, output_split_sizes)
    return buffered_send_all_to_all_list(adapter, received, sent, group, async_op)


def buffered_send_all_to_all_list(
    adapter: Adapter,
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all as :func:`buffered_send_all_to_all` of separate tensors, each part received
    straight into its output tensor."""
    _, me = members(adapter, group)
    if adapter.numel(output_tensor_list[me]):
        adapter.copy_(output_tensor_list[me], input_tensor_list[me])
    _send_then_receive(adapter, input_tensor_list, output_tensor_list, group)
    return Work() if async_op else None
