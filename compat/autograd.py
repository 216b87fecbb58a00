"""Differentiable collectives: autograd (torch) or ``mindspore.grad`` (MindSpore) see through them.

Each rank's loss may depend on the result; the gradient a rank receives is the sum over ranks of
the gradients of their losses with respect to its input, which is what data-parallel training
(and CLIP's gathered-embedding loss) needs:

- ``all_gather``: forward all_gather_into_tensor (concatenated on dim 0); backward a SUM
  reduce_scatter of the gradient (each rank gets the sum over ranks of its rows' gradients).
- ``all_gather_tuple``: ``all_gather`` with ``torch.distributed.nn.functional.all_gather``'s
  result, a tuple of one tensor per rank (what ``compat port`` rewrites that call to).
- ``reduce_scatter``: forward reduce_scatter_tensor; backward an all_gather of the gradient
  (divided by the group size for AVG).
- ``all_reduce``: forward an all_reduce of a copy (the input is not modified); backward an
  all_reduce of the gradient (SUM for SUM, AVG for AVG).

Only SUM and AVG have these gradients; MIN, MAX and PRODUCT raise UnsupportedError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compat import collectives, lifecycle
from compat.base.errors import UnsupportedError
from compat.base.types import Group, ReduceOp, parse_op
from compat.core import state

Tensor = Any

_DIFFERENTIABLE_OPS = (ReduceOp.SUM, ReduceOp.AVG)


def _check_op(op: object) -> ReduceOp:
    reduce_op = parse_op(op)
    if reduce_op not in _DIFFERENTIABLE_OPS:
        raise UnsupportedError(
            f"op: compat.autograd differentiates SUM and AVG; got {reduce_op.name}"
        )
    return reduce_op


def _apply(
    tensor: Tensor,
    group: Group | None,
    forward: Callable[[Tensor], Tensor],
    backward: Callable[[Tensor], Tensor],
) -> Tensor:
    current = state.current()
    current.checks.tensor(tensor, "tensor")
    current.checks.group(group)
    return current.adapter.differentiable(forward, backward)(tensor)


def all_gather(tensor: Tensor, group: Group | None = None) -> Tensor:
    """Gather every rank's ``tensor`` concatenated on dim 0; differentiable.

    Examples
    --------
    CLIP's pattern, with 2 ranks::

        >>> everyone = compat.autograd.all_gather(features)    # (2 * batch, dim)
        >>> loss = clip_loss(features @ everyone.T)
        >>> loss.backward()   # features.grad sums every rank's gradient for these rows
    """
    return _apply(
        tensor,
        group,
        lambda x: collectives.all_gather_into_tensor(x, group),
        lambda grad: collectives.reduce_scatter_tensor(grad, ReduceOp.SUM, group),
    )


def all_gather_tuple(tensor: Tensor, group: Group | None = None) -> tuple[Tensor, ...]:
    """Gather every rank's ``tensor`` as a tuple of one tensor per rank; differentiable.

    The result type of ``torch.distributed.nn.functional.all_gather``: element ``i`` is group
    rank ``i``'s tensor, shaped like ``tensor`` (a 0-d tensor gives 0-d elements), so indexing,
    unpacking, ``len()`` and ``torch.stack``/``torch.cat`` of the result mean what they mean in
    torch. The gradient this rank's ``tensor`` receives is the sum over ranks of the gradients of
    their outputs' slot for this rank, as torch's. Built on :func:`all_gather`: ``tensor``
    reshaped to ``(1, *tensor.shape)``, gathered, and unbound on dim 0 (on both frameworks).

    Parameters
    ----------
    tensor
        This rank's contribution; every rank's has the same shape and dtype.
    group
        A group from :func:`compat.new_group`, the framework's own group, or None / WORLD.

    Returns
    -------
    tuple of Tensor
        One tensor per rank of the group, in group-rank order.

    Examples
    --------
    With 2 ranks::

        >>> mine, theirs = compat.autograd.all_gather_tuple(x)   # rank 0: mine is x
        >>> torch.stack(compat.autograd.all_gather_tuple(x)).shape == (2, *x.shape)
        True
    """
    current = state.current()
    current.checks.tensor(tensor, "tensor")
    current.checks.group(group)
    shape = current.adapter.shape(tensor)
    # reshape and unbind(0) are the same tensor methods, differentiable, on torch and MindSpore.
    gathered = all_gather(tensor.reshape((1, *shape)), group)
    parts: tuple[Tensor, ...] = tuple(gathered.unbind(0))
    return parts


def reduce_scatter(
    tensor: Tensor, op: ReduceOp | str = "sum", group: Group | None = None
) -> Tensor:
    """Reduce ``tensor`` across ranks and return this rank's part of dim 0; differentiable."""
    reduce_op = _check_op(op)

    def backward(grad: Tensor) -> Tensor:
        gathered = collectives.all_gather_into_tensor(grad, group)
        return gathered if reduce_op is ReduceOp.SUM else gathered / lifecycle.get_world_size(group)

    return _apply(
        tensor, group, lambda x: collectives.reduce_scatter_tensor(x, reduce_op, group), backward
    )


def all_reduce(tensor: Tensor, op: ReduceOp | str = "sum", group: Group | None = None) -> Tensor:
    """Reduce ``tensor`` across ranks into a new tensor (the input is left as it is);
    differentiable."""
    reduce_op = _check_op(op)

    def reduced_copy(x: Tensor) -> Tensor:
        adapter = state.current().adapter
        result = adapter.empty(adapter.shape(x), x)
        adapter.copy_(result, x)
        collectives.all_reduce(result, reduce_op, group)
        return result

    return _apply(tensor, group, reduced_copy, reduced_copy)
