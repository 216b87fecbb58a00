"""The collectives at the edges of a tensor-parallel linear layer, with the gradients DTensor
gives them (Megatron's pairs): every rank of the mesh computes the same loss from replicated
values, so a replicated value's gradient is replicated, not summed over ranks.

- :func:`enter_replicated`: forward identity; backward an all_reduce (SUM) of the gradient
  (Colwise's replicated input: each rank's gradient is a partial sum).
- :func:`reduce_partial`: forward an all_reduce (SUM); backward identity (Rowwise's output).
- :func:`gather_shards`: forward an all_gather on ``dim`` (pieces of torch.chunk's sizes);
  backward this rank's piece of the gradient (Colwise's output made Replicate).
- :func:`take_shard`: forward this rank's piece of ``dim``; backward an all_gather of the
  gradient (Rowwise's replicated input made Shard(-1)).
- :func:`reduce_scatter_partial`: forward a SUM reduce_scatter on ``dim``; backward an all_gather
  (Rowwise's output made Shard(dim)).
- a sharded input made Replicate is :func:`compat.autograd.all_gather` (backward a SUM
  reduce_scatter of the partial gradients).
"""

from __future__ import annotations

from typing import Any

from compat import collectives, lifecycle
from compat.base.types import Group, ReduceOp
from compat.core import state

Tensor = Any


def _uneven(sizes: list[int]) -> list[int] | None:
    """``sizes`` for a collective's split sizes, None where they are equal (the even path)."""
    return None if len(set(sizes)) == 1 else sizes


def _piece(tensor: Tensor, sizes: list[int], dim: int, index: int) -> Tensor:
    adapter = state.current().adapter
    return adapter.clone(adapter.split(tensor, sizes, dim)[index])


def _all_gathered(tensor: Tensor, group: Group, dim: int, sizes: list[int]) -> Tensor:
    return collectives.all_gather_into_tensor(
        tensor, group, output_split_sizes=_uneven(sizes), dim=dim
    )


def enter_replicated(tensor: Tensor, group: Group) -> Tensor:
    adapter = state.current().adapter

    def summed(grad: Tensor) -> Tensor:
        total = adapter.clone(grad)
        collectives.all_reduce(total, ReduceOp.SUM, group)
        return total

    return adapter.differentiable(adapter.clone, summed)(tensor)


def reduce_partial(tensor: Tensor, group: Group) -> Tensor:
    adapter = state.current().adapter

    def summed(partial: Tensor) -> Tensor:
        total = adapter.clone(partial)
        collectives.all_reduce(total, ReduceOp.SUM, group)
        return total

    return adapter.differentiable(summed, adapter.clone)(tensor)


def gather_shards(tensor: Tensor, group: Group, dim: int, sizes: list[int]) -> Tensor:
    adapter = state.current().adapter
    me = lifecycle.get_rank(group)
    return adapter.differentiable(
        lambda shard: _all_gathered(shard, group, dim, sizes),
        lambda grad: _piece(grad, sizes, dim, me),
    )(tensor)


def take_shard(tensor: Tensor, group: Group, dim: int, sizes: list[int]) -> Tensor:
    adapter = state.current().adapter
    me = lifecycle.get_rank(group)
    return adapter.differentiable(
        lambda whole: _piece(whole, sizes, dim, me),
        lambda grad: _all_gathered(grad, group, dim, sizes),
    )(tensor)


def reduce_scatter_partial(tensor: Tensor, group: Group, dim: int, sizes: list[int]) -> Tensor:
    adapter = state.current().adapter
    return adapter.differentiable(
        lambda partial: collectives.reduce_scatter_tensor(
            partial, ReduceOp.SUM, group, input_split_sizes=_uneven(sizes), dim=dim
        ),
        lambda grad: _all_gathered(grad, group, dim, sizes),
    )(tensor)
