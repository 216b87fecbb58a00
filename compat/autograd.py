"""Differentiable collectives: autograd (torch) or ``mindspore.grad`` (MindSpore) see through them.

Each rank's loss may depend on the result; the gradient a rank receives is the sum over ranks of
the gradients of their losses with respect to its input, which is what data-parallel training
(and CLIP's gathered-embedding loss) needs:

- ``all_gather``: forward all_gather_into_tensor (concatenated on dim 0); backward a SUM
  reduce_scatter of the gradient (each rank gets the sum over ranks of its rows' gradients).
- ``all_gather_tuple``: ``all_gather`` with ``torch.distributed.nn.functional.all_gather``'s
  result, a tuple of one tensor per rank (what ``compat port`` rewrites that call to).
- ``reduce_scatter``: forward reduce_scatter_tensor with any op; backward an all_gather of the
  gradient (divided by the group size for AVG; other ops raise).
- ``all_reduce``: forward an all_reduce of a copy with any op (the input is not modified);
  backward an all_reduce of the gradient (SUM for SUM, AVG for AVG; other ops raise).
- ``all_to_all_single``: forward all_to_all_single (part i of dim 0 to group rank i); backward
  all_to_all_single of the gradient with the split sizes swapped (each part goes back).
- ``permute_tensor``: funcol's permutation, an ``all_to_all_single`` in which each group rank
  sends its whole tensor to one rank; backward the reverse permutation of the gradient.
- ``all_to_all``: the list form, built on ``all_to_all_single`` of the flattened tensors; the
  results are written into ``output_tensor_list`` through the framework's differentiable copy.
- ``broadcast``: forward a broadcast of a copy from ``src``; backward a SUM reduce of the
  gradient to ``src`` (the other ranks' inputs get zeros: their values were not used).
- ``reduce``: forward a reduce of a copy to ``dst``; backward a broadcast of ``dst``'s gradient
  (divided by the group size for AVG); the other ranks' results carry no gradient.
- ``gather``: forward a gather to ``dst`` (zeros elsewhere); backward a scatter of ``dst``'s
  gradients. ``scatter``: forward a scatter from ``src``; backward a gather of the gradients to
  ``src`` (zeros for the other ranks' inputs).

Only SUM and AVG have these gradients: ``all_reduce`` and ``reduce_scatter`` take every op
forward and their backward raises UnsupportedError for the others (as funcol's do for every op
but sum); ``reduce`` refuses them when called. Roots
(``src``, ``dst``) are global ranks, as torch.distributed.nn.functional's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from compat import collectives, lifecycle
from compat.base.errors import UnsupportedError
from compat.base.types import Group, ReduceOp, parse_op
from compat.core import state
from compat.core.values import check_int, check_split_sizes, describe

Tensor = Any

_DIFFERENTIABLE_OPS = (ReduceOp.SUM, ReduceOp.AVG)


def _check_op(op: object) -> ReduceOp:
    reduce_op = parse_op(op)
    if reduce_op not in _DIFFERENTIABLE_OPS:
        raise UnsupportedError(
            f"op: compat.autograd differentiates SUM and AVG; got {reduce_op.name}"
        )
    return reduce_op


def _check_backward_op(reduce_op: ReduceOp, function: str) -> None:
    """Raised in the backward of a function that reduces with every op forward: on each rank,
    before any communication (every rank runs the backward of the same op)."""
    if reduce_op not in _DIFFERENTIABLE_OPS:
        name = reduce_op.name.lower()
        raise UnsupportedError(
            f"op: {function} backward only supports 'sum' and 'avg' reduction, got '{name}' "
            f"(compat.autograd.{function} takes every op forward and differentiates SUM and AVG)"
        )


def _apply(
    tensor: Tensor,
    group: Group | None,
    forward: Callable[[Tensor], Tensor],
    backward: Callable[[Tensor], Tensor],
    reduce_op: ReduceOp | None = None,
) -> Tensor:
    current = state.current()
    current.checks.tensor(tensor, "tensor")
    current.checks.group(group)
    if reduce_op is not None:  # refused before any copy or communication (float8, say)
        current.checks.reduction(reduce_op, current.adapter.dtype(tensor), "tensor")
    return current.adapter.differentiable(forward, backward)(tensor)


def _copy(x: Tensor) -> Tensor:
    adapter = state.current().adapter
    result = adapter.empty(adapter.shape(x), x)
    adapter.copy_(result, x)
    return result


def all_gather(tensor: Tensor, group: Group | None = None, *, dim: int = 0) -> Tensor:
    """Gather every rank's ``tensor`` concatenated on dim ``dim`` (default 0, negative counts
    from the end: funcol's ``gather_dim``); differentiable: the backward is a SUM
    reduce_scatter of the gradient on the same dim.

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
        lambda x: collectives.all_gather_into_tensor(x, group, dim=dim),
        lambda grad: collectives.reduce_scatter_tensor(grad, ReduceOp.SUM, group, dim=dim),
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
    tensor: Tensor, op: ReduceOp | str = "sum", group: Group | None = None, *, dim: int = 0
) -> Tensor:
    """Reduce ``tensor`` across ranks, with any op compat takes on the backend, and return this
    rank's part of dim ``dim`` (default 0, negative counts from the end: funcol's
    ``scatter_dim``); differentiable for SUM and AVG: the backward is an all_gather of the
    gradient on the same dim (divided by the group size for AVG). For the other ops the backward
    raises UnsupportedError on each rank before any communication, as funcol's
    ``reduce_scatter_tensor`` raises for every op but sum."""
    reduce_op = parse_op(op)

    def forward(x: Tensor) -> Tensor:
        return collectives.reduce_scatter_tensor(x, reduce_op, group, dim=dim)

    def backward(grad: Tensor) -> Tensor:
        _check_backward_op(reduce_op, "reduce_scatter")
        gathered = collectives.all_gather_into_tensor(grad, group, dim=dim)
        return gathered if reduce_op is ReduceOp.SUM else gathered / lifecycle.get_world_size(group)

    return _apply(tensor, group, forward, backward, reduce_op)


def all_reduce(tensor: Tensor, op: ReduceOp | str = "sum", group: Group | None = None) -> Tensor:
    """Reduce ``tensor`` across ranks into a new tensor (the input is left as it is), with any
    op compat takes on the backend; differentiable for SUM and AVG.

    The backward all-reduces the gradient with the same op (the gradient of SUM and of AVG).
    For every other op (MIN, MAX, PRODUCT, the bitwise ones) the forward runs and the backward
    raises UnsupportedError (a RuntimeError) on each rank before any communication, as funcol's
    ``all_reduce``, whose backward raises "all_reduce backward only supports 'sum' reduction"
    (AVG included: compat differentiates it, as ``torch.distributed.nn.functional.all_reduce``).

    Examples
    --------
    With 2 ranks::

        >>> peak = compat.autograd.all_reduce(loss.detach(), "max")   # every rank: the maximum
        >>> total = compat.autograd.all_reduce(x)                      # differentiable: SUM
    """
    reduce_op = parse_op(op)

    def reduced_copy(x: Tensor) -> Tensor:
        result = _copy(x)
        collectives.all_reduce(result, reduce_op, group)
        return result

    def backward(grad: Tensor) -> Tensor:
        _check_backward_op(reduce_op, "all_reduce")
        return reduced_copy(grad)

    return _apply(tensor, group, reduced_copy, backward, reduce_op)


def _exchange(x: Tensor, receive: list[int], send: list[int], group: Group | None) -> Tensor:
    adapter = state.current().adapter
    out = adapter.empty((sum(receive), *adapter.shape(x)[1:]), x)
    collectives.all_to_all_single(out, x, receive, send, group)
    return out


def _received(sizes: object, count: int, rows: int) -> list[int]:
    """The output's split sizes: as given (``count`` ints >= 0), or those of the input."""
    if sizes is None:
        return [rows // count] * count
    if not isinstance(sizes, Sequence) or isinstance(sizes, str):
        raise TypeError(
            f"output_split_sizes: expected a list of {count} ints; got {describe(sizes)}"
        )
    values = [check_int(size, f"output_split_sizes[{i}]") for i, size in enumerate(sizes)]
    return check_split_sizes(values, "output_split_sizes", count, sum(values), "the output")


def all_to_all_single(
    tensor: Tensor,
    output_split_sizes: Sequence[int] | None = None,
    input_split_sizes: Sequence[int] | None = None,
    group: Group | None = None,
) -> Tensor:
    """Send part i of ``tensor`` (dim 0) to group rank i and return the parts every rank sent
    here, concatenated on dim 0 in group-rank order; differentiable (the gradient of each part
    goes back to the rank that sent it).

    Split sizes default to equal parts of dim 0 (``output_split_sizes`` None: the output has
    the input's dim 0); funcol's ``all_to_all_single_autograd`` and
    ``torch.distributed.nn.functional.all_to_all_single`` with their arguments.

    Examples
    --------
    Ulysses' head/sequence exchange, with 2 ranks::

        >>> mixed = compat.autograd.all_to_all_single(x)   # x: (2 * rows, ...)
        >>> mixed.sum().backward()   # x.grad: the gradients of the rows sent
    """
    current = state.current()
    checks = current.checks
    checks.tensor(tensor, "tensor")
    count = checks.group(group).size()
    rows = checks.dim0(tensor, "tensor")[0]
    if (dtype := current.adapter.dtype(tensor)) not in checks.as_bytes:  # moved as bytes
        checks.dtype(dtype, "tensor")
    send = checks.splits(input_split_sizes, "input_split_sizes", count, rows, "tensor")
    receive = _received(output_split_sizes, count, rows)
    return current.adapter.differentiable(
        lambda x: _exchange(x, receive, send, group),
        lambda grad: _exchange(grad, send, receive, group),
    )(tensor)


def permute_tensor(tensor: Tensor, src_dst: Sequence[int], group: Group | None = None) -> Tensor:
    """funcol's ``permute_tensor``: group rank m sends its ``tensor`` to group rank
    ``src_dst[m]``, and each rank returns what was sent to it (the tensors of the ranks that
    name it, in group-rank order); differentiable (each gradient goes back to its sender).

    Whole tensors move along dim 0, where torch's split sizes are the tensor's element count
    (so torch takes a 1-D tensor only; compat any shape, the same result for 1-D).

    Examples
    --------
    A ring: each of ``n`` ranks passes its block to the next::

        >>> n, me = compat.get_world_size(), compat.get_rank()
        >>> mine = compat.autograd.permute_tensor(block, [(m + 1) % n for m in range(n)])
    """
    current = state.current()
    checks = current.checks
    checks.tensor(tensor, "tensor")
    resolved = checks.group(group)
    count, me = resolved.size(), resolved.own_rank(checks.rank)
    rows = checks.dim0(tensor, "tensor")[0]
    targets = _checked_targets(src_dst, count)
    send = [rows if target == targets[me] else 0 for target in range(count)]
    receive = [rows if target == me else 0 for target in targets]
    return all_to_all_single(tensor, receive, send, group)


def _checked_targets(src_dst: object, count: int) -> list[int]:
    """``src_dst``: one group rank per group rank, each in ``range(count)``."""
    if not isinstance(src_dst, Sequence) or isinstance(src_dst, str) or len(src_dst) != count:
        raise TypeError(
            f"src_dst: expected a list of {count} group ranks, the destination of each group "
            f"rank's tensor; got {describe(src_dst)}"
        )
    targets = [check_int(target, f"src_dst[{i}]") for i, target in enumerate(src_dst)]
    if any(not 0 <= target < count for target in targets):
        raise ValueError(f"src_dst: expected group ranks in [0, {count}); got {targets}")
    return targets


def _checked_list(given: object, param: str, count: int) -> list[Tensor]:
    if not isinstance(given, (list, tuple)) or len(given) != count:
        raise ValueError(
            f"{param}: expected a list of {count} tensors (one per rank of the group); "
            f"got {describe(given)}"
        )
    return list(given)


def _checked_lists(
    outputs: object, inputs: object, count: int
) -> tuple[list[Tensor], list[Tensor]]:
    """all_to_all's lists: ``count`` tensors each, of one dtype, input_tensor_list[0]'s."""
    checks = state.current().checks
    ins = _checked_list(inputs, "input_tensor_list", count)
    outs = _checked_list(outputs, "output_tensor_list", count)
    checks.tensor(ins[0], "input_tensor_list[0]")
    for param, items in (("input_tensor_list", ins), ("output_tensor_list", outs)):
        for i, item in enumerate(items):
            checks.like(item, f"{param}[{i}]", ins[0], "input_tensor_list[0]", None)
    return outs, ins


def all_to_all(
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: Group | None = None,
) -> tuple[Tensor, ...]:
    """Send ``input_tensor_list[i]`` to group rank i; ``output_tensor_list[j]`` receives what
    group rank j sent here; differentiable, as torch.distributed.nn.functional.all_to_all.

    Shapes may differ per pair (``output_tensor_list[j]`` has the shape of what rank j sends
    here). The results are written into ``output_tensor_list`` by the framework's in-place
    copy, which autograd (and mindspore.grad in PyNative mode) differentiates, and the same
    tensors are returned as a tuple: a loss on either carries the gradient back to the ranks'
    ``input_tensor_list``.
    """
    current = state.current()
    adapter = current.adapter
    count = current.checks.group(group).size()
    outputs, inputs = _checked_lists(output_tensor_list, input_tensor_list, count)
    flat = adapter.cat([item.reshape(-1) for item in inputs], 0)
    sizes = [adapter.numel(item) for item in outputs]
    received = all_to_all_single(flat, sizes, [adapter.numel(item) for item in inputs], group)
    for out, part in zip(outputs, adapter.split(received, sizes), strict=True):
        adapter.assign(out, part.reshape(adapter.shape(out)))
    return tuple(outputs)


def _rooted(
    tensor: Tensor, root: object, param: str, group: Group | None
) -> tuple[int, bool, tuple[int, ...]]:
    """A rooted call's checked arguments: the root's global rank, whether this rank is the
    root, and ``tensor``'s shape."""
    current = state.current()
    current.checks.tensor(tensor, "tensor")
    resolved = current.checks.group(group)
    global_root = current.checks.peer(root, param, resolved)
    is_root = resolved.own_global_rank(current.checks.rank) == global_root
    return global_root, is_root, current.adapter.shape(tensor)


def broadcast(tensor: Tensor, src: int, group: Group | None = None) -> Tensor:
    """Return a new tensor holding global rank ``src``'s ``tensor`` (the input is left as it
    is); differentiable: ``src`` gets the sum over ranks of the gradients of their results, the
    other ranks zeros (as torch.distributed.nn.functional.broadcast)."""
    root, is_root, shape = _rooted(tensor, src, "src", group)

    def from_root(x: Tensor) -> Tensor:
        result = _copy(x)
        collectives.broadcast(result, root, group)
        return result

    def backward(grad: Tensor) -> Tensor:
        total = _copy(grad)
        collectives.reduce(total, root, ReduceOp.SUM, group)
        return total if is_root else state.current().adapter.zeros(shape, grad)

    return state.current().adapter.differentiable(from_root, backward)(tensor)


def reduce(
    tensor: Tensor, dst: int, op: ReduceOp | str = "sum", group: Group | None = None
) -> Tensor:
    """Return the reduction of every rank's ``tensor`` on global rank ``dst`` (a new tensor;
    elsewhere a copy of ``tensor``, which carries no gradient); differentiable: every rank's
    input gets ``dst``'s gradient (divided by the group size for AVG), as
    torch.distributed.nn.functional.reduce's."""
    reduce_op = _check_op(op)
    root, _, _ = _rooted(tensor, dst, "dst", group)

    def to_root(x: Tensor) -> Tensor:
        result = _copy(x)
        collectives.reduce(result, root, reduce_op, group)
        return result

    def backward(grad: Tensor) -> Tensor:
        spread = _copy(grad)
        collectives.broadcast(spread, root, group)
        return spread if reduce_op is ReduceOp.SUM else spread / lifecycle.get_world_size(group)

    return state.current().adapter.differentiable(to_root, backward)(tensor)


def _stacked(parts: Sequence[Tensor], shape: tuple[int, ...]) -> Tensor:
    """``parts`` (one per rank, each of ``shape``) stacked on a new dim 0."""
    return state.current().adapter.cat([part.reshape((1, *shape)) for part in parts], 0)


def _gather_stacked(x: Tensor, root: int, is_root: bool, group: Group | None) -> Tensor:
    """Every rank's ``x`` stacked on a new dim 0 on ``root``; zeros of that shape elsewhere."""
    adapter = state.current().adapter
    shape, count = adapter.shape(x), lifecycle.get_world_size(group)
    parts = [adapter.empty(shape, x) for _ in range(count)] if is_root else None
    collectives.gather(_copy(x), parts, root, group)
    if parts is None:
        return adapter.zeros((count, *shape), x)
    return _stacked(parts, shape)


def _scatter_rows(stacked: Tensor, root: int, is_root: bool, group: Group | None) -> Tensor:
    """Row i of ``root``'s ``stacked`` on group rank i."""
    adapter = state.current().adapter
    shape = adapter.shape(stacked)[1:]
    out = adapter.empty(shape, stacked)
    count = adapter.shape(stacked)[0]
    split = adapter.split(stacked, [1] * count) if is_root else []
    rows = [_copy(row.reshape(shape)) for row in split]
    collectives.scatter(out, rows if is_root else None, root, group)
    return out


def gather(tensor: Tensor, dst: int = 0, group: Group | None = None) -> tuple[Tensor, ...]:
    """Return, on global rank ``dst``, a tuple of every rank's ``tensor`` (group-rank order),
    and elsewhere a tuple of as many zero tensors; differentiable: each rank's input gets
    ``dst``'s gradient for its slot, as torch.distributed.nn.functional.gather's."""
    root, is_root, _ = _rooted(tensor, dst, "dst", group)
    stacked = state.current().adapter.differentiable(
        lambda x: _gather_stacked(x, root, is_root, group),
        lambda grad: _scatter_rows(grad, root, is_root, group),
    )(tensor)
    parts: tuple[Tensor, ...] = tuple(stacked.unbind(0))
    return parts


def scatter(tensors: Sequence[Tensor], src: int = 0, group: Group | None = None) -> Tensor:
    """Return ``tensors[i]`` of global rank ``src`` on group rank i; differentiable: ``src``'s
    ``tensors[i]`` gets rank i's gradient, the other ranks' zeros, as
    torch.distributed.nn.functional.scatter's. Every rank passes a list of one tensor per rank
    (only ``src``'s values are read; the others give the shape)."""
    current = state.current()
    tensors = _checked_list(tensors, "tensors", current.checks.group(group).size())
    root, is_root, shape = _rooted(tensors[0], src, "src", group)
    for i, item in enumerate(tensors):
        current.checks.tensor(item, f"tensors[{i}]")
        current.checks.like(item, f"tensors[{i}]", tensors[0], "tensors[0]", shape)
    stacked = _stacked(tensors, shape)
    return current.adapter.differentiable(
        lambda x: _scatter_rows(x, root, is_root, group),
        lambda grad: _gather_stacked(grad, root, is_root, group),
    )(stacked)
