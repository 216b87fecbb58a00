"""A group of one rank.

A group of one rank has nothing to send: every collective's result is the rank's own tensor, as
it is or copied into the output. The backends still run their machinery for it, which costs more
than the copy (``compat bench -n 1``; mapping_tables/capabilities.toml). Each refuses a group of
more ranks.
"""

from __future__ import annotations

from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.errors import UnsupportedError
from compat.base.types import Handle, ReduceOp, Work


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
