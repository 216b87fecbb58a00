"""What the algorithm families share: completing a Work, cutting a tensor into parts, and the
tensor form of a list-form algorithm (:func:`tensor_form`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.types import Handle, ReduceOp, Work
from compat.transport import scratch


def complete(
    pending: Sequence[Handle | None], async_op: bool, finish: Callable[[], None]
) -> Handle | None:
    """Run ``finish`` now (sync) or when the returned Work is waited on (async)."""
    if async_op:
        return Work([handle for handle in pending if handle is not None], finish)
    finish()
    return None


def first_rows(adapter: Adapter, tensor: Tensor, rows: int) -> Tensor:
    """The first ``rows`` rows of ``tensor`` (a view)."""
    total = adapter.shape(tensor)[0]
    return adapter.split(tensor, [rows, total - rows])[0]


def padded_to(adapter: Adapter, tensor: Tensor, rows: int) -> Tensor:
    """A copy of ``tensor`` with dim 0 grown to ``rows`` (the extra rows are left unset)."""
    padded = adapter.empty((rows, *adapter.shape(tensor)[1:]), tensor)
    adapter.copy_(first_rows(adapter, padded, adapter.shape(tensor)[0]), tensor)
    return padded


def members(adapter: Adapter, group: GroupHandle) -> tuple[int, int]:
    """(group size, this rank's index in the group)."""
    ranks = adapter.group_ranks(group)
    return len(ranks), ranks.index(adapter.own_global_rank(group))


#: An all_gather called as the adapter's: (tensor_list, tensor, group, async_op).
AllGather = Callable[[list[Tensor], Tensor, GroupHandle, bool], Handle | None]


def gathered_parts(
    adapter: Adapter,
    tensor: Tensor,
    group: GroupHandle,
    async_op: bool,
    all_gather: AllGather | None = None,
) -> tuple[list[Tensor], Handle | None]:
    """An all_gather of ``tensor`` into new tensors, one per rank of ``group``, and its handle:
    the adapter's, or ``all_gather``."""
    count = len(adapter.group_ranks(group))
    gathered = [adapter.empty(adapter.shape(tensor), tensor) for _ in range(count)]
    gather = adapter.all_gather if all_gather is None else all_gather
    return gathered, gather(gathered, tensor, group, async_op)


def gathered_then_reduced(
    adapter: Adapter,
    tensor: Tensor,
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
    all_gather: AllGather,
) -> Handle | None:
    """all_reduce as ``all_gather`` (called as the adapter's) into new tensors, then each rank
    reduces them in rank order, so every rank ends with the same bits."""
    gathered, pending = gathered_parts(adapter, tensor, group, async_op, all_gather)
    return complete(
        [pending], async_op, lambda: adapter.copy_(tensor, adapter.reduce_local(gathered, op))
    )


def nothing() -> None:
    """The local step of a collective that has none."""


#: The tag of the messages compat's point-to-point algorithms send (the largest torch takes), so
#: that a user's pending irecv from a peer with another tag never takes one of them.
ALGORITHM_TAG = 2**31 - 1


#: The tag of monitored_barrier's arrivals (reported_barrier_in_memory): a receive a barrier
#: left pending (its peer never came) takes only a later arrival from that peer, never a user's
#: message or one of compat's algorithms.
ARRIVAL_TAG = ALGORITHM_TAG - 1


class Parts(list[Tensor]):
    """Consecutive dim-0 parts of one tensor, ``whole``, as a tensor form hands them to its list
    form (:func:`tensor_form`): a list form that can use the whole tensor at once (one copy or
    none, where the parts would take one each) reads it with :func:`whole_of`."""

    __slots__ = ("whole",)

    def __init__(self, parts: list[Tensor], whole: Tensor) -> None:
        super().__init__(parts)
        self.whole = whole


def whole_of(tensors: Sequence[Tensor]) -> Tensor | None:
    """The tensor that ``tensors`` are the parts of, where a tensor form cut them, else None."""
    return tensors.whole if isinstance(tensors, Parts) else None


def tensor_form(list_form: Callable[..., Handle | None]) -> Callable[..., Handle | None]:
    """The tensor form of a list-form algorithm: all_gather_into_tensor's of an all_gather
    (which takes ``tensor_list``), reduce_scatter_tensor's of a reduce_scatter. It cuts the
    tensor that holds every rank's part (all_gather's output, reduce_scatter's input) into one
    equal dim-0 part per rank (:meth:`Adapter.parts`: views, no copy) and calls ``list_form``
    with them. Named as the capability table names it: ``<list form>_into_tensor`` or
    ``<list form>_tensor``."""
    gathers = "tensor_list" in inspect.signature(list_form).parameters
    form = _gather_form(list_form) if gathers else _reduce_scatter_form(list_form)
    form.__name__ = form.__qualname__ = list_form.__name__ + (
        "_into_tensor" if gathers else "_tensor"
    )
    form.__module__ = list_form.__module__
    holder = "``output``" if gathers else "``tensor``"
    form.__doc__ = f":func:`{list_form.__name__}` of {holder}'s equal dim-0 parts (views)."
    return form


def _gather_form(list_form: Callable[..., Handle | None]) -> Callable[..., Handle | None]:
    def form(
        adapter: Adapter, output: Tensor, tensor: Tensor, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        return list_form(adapter, _cut(adapter, output, group), tensor, group, async_op)

    return form


def _reduce_scatter_form(list_form: Callable[..., Handle | None]) -> Callable[..., Handle | None]:
    def form(
        adapter: Adapter,
        output: Tensor,
        tensor: Tensor,
        op: ReduceOp,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        return list_form(adapter, output, _cut(adapter, tensor, group), op, group, async_op)

    return form


def _cut(adapter: Adapter, tensor: Tensor, group: GroupHandle) -> Parts:
    """``tensor`` in one equal dim-0 part per rank of ``group``."""
    count = len(adapter.group_ranks(group))
    return Parts(adapter.parts(tensor, [adapter.shape(tensor)[0] // count] * count), tensor)


#: The scratch buffers one call has taken, with their keys (compat.transport.scratch).
Taken = list[tuple[Tensor, scratch.Key]]


def joined_or_copied(adapter: Adapter, tensors: Sequence[Tensor], taken: Taken) -> Tensor:
    """One buffer holding ``tensors`` (dim-0 parts of one dtype and trailing shape) back to
    back: the tensor a tensor form cut them from or the buffer they tile, without a copy; else
    a scratch buffer they are copied into (added to ``taken``)."""
    whole = whole_of(tensors)
    if whole is None:
        whole = adapter.joined(tensors)
    if whole is None:
        sizes = [adapter.shape(item)[0] for item in tensors]
        shape = (sum(sizes), *adapter.shape(tensors[0])[1:])
        whole, key = scratch.pool(adapter).take(shape, tensors[0])
        taken.append((whole, key))
        for part, item in zip(adapter.split(whole, sizes), tensors, strict=True):
            adapter.copy_(part, item)
    return whole


def give_back(adapter: Adapter, taken: Taken) -> None:
    """Give the scratch buffers of ``taken`` back to ``adapter``'s pool."""
    pool = scratch.pool(adapter)
    for buffer, key in taken:
        pool.give(buffer, key)
