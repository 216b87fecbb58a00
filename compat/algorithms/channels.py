"""Collectives and point to point through a window's point-to-point channels
(compat.transport.mailbox).

A send writes into the channel to its peer as far as there is room, a receive reads what has
arrived, and wait() moves the rest. The table chooses these only for groups whose window was made
with the group (SharedWindow.point_to_point), so that every sender and receiver take them. The
tensors are dense (compat.p2p stages views).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compat.algorithms.shared_memory import (
    FlatViews,
    flat_parts,
    group_window,
    shared_memory_all_to_all,
    shared_memory_all_to_all_list,
    shared_memory_gather,
    shared_memory_scatter,
)
from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.types import Handle
from compat.transport.shared_memory import SharedWindow

if TYPE_CHECKING:
    from compat.transport.mailbox import Mailbox


#: The tag of the messages compat's collectives send through a window's point-to-point channels:
#: users' tags are 0 or more (compat.p2p checks), so no user's receive takes these.
_COLLECTIVE_TAG = -1


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
    window = group_window(adapter, group, "all_to_all_single")
    if not window.point_to_point:
        return shared_memory_all_to_all(
            adapter, output, tensor, output_split_sizes, input_split_sizes, group, async_op
        )
    views = FlatViews(adapter)
    sources, targets = flat_parts(
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
    window = group_window(adapter, group, "all_to_all")
    if not window.point_to_point:
        return shared_memory_all_to_all_list(
            adapter, output_tensor_list, input_tensor_list, group, async_op
        )
    views = FlatViews(adapter)
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
    window = group_window(adapter, group, "gather" if to_root else "scatter")
    if not window.point_to_point:
        rounds = shared_memory_gather if to_root else shared_memory_scatter
        return rounds(adapter, tensor, listed, root_rank, group, async_op)
    mailbox = window.mailbox()
    root = mailbox.index[root_rank]
    views = FlatViews(adapter)
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


def _mailbox(adapter: Adapter, group: GroupHandle) -> Mailbox:
    return group_window(adapter, group, "a point-to-point call").mailbox()


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
