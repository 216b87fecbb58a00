"""Point to point between each pair of ranks, each part received straight into its place in
the output (Gloo)."""

from __future__ import annotations

from functools import partial

from compat.algorithms.common import ALGORITHM_TAG, gathered_then_reduced, tensor_form
from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.types import Handle, ReduceOp, Work


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
    ``adapter.parts``, made once: on MindSpore each view made by slicing waits on the PyNative
    queue.
    """
    sent = adapter.parts(tensor, input_split_sizes)
    received = adapter.parts(output, output_split_sizes)
    return pairwise_all_to_all_list(adapter, received, sent, group, async_op)


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
    if adapter.numel(output_tensor_list[me]):
        adapter.copy_(output_tensor_list[me], input_tensor_list[me])
    for peer in range(len(ranks)):
        if peer != me:
            _exchange(
                adapter, me, peer, ranks[peer], input_tensor_list[peer],
                output_tensor_list[peer], group,
            )  # fmt: skip
    return Work() if async_op else None


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


pairwise_all_gather_into_tensor = tensor_form(pairwise_all_gather)


def pairwise_all_gather_reduce(
    adapter: Adapter, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_reduce as :func:`pairwise_all_gather` plus a local reduction, in rank order on every
    rank (so every rank ends with the same bits): one step of messages, where Gloo's ring takes
    several."""
    pairwise = partial(pairwise_all_gather, adapter)
    return gathered_then_reduced(adapter, tensor, op, group, async_op, pairwise)
