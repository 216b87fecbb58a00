"""The collectives, in both styles: each checks its arguments on the calling rank before any
communication (a bad argument raises TypeError/ValueError naming the parameter, with output
buffers untouched), then hands :class:`Call` what to run.

Where each concern lives: the checks in :mod:`compat.core.checks` (``Call.checks``); the choice of
native call or algorithm in :mod:`compat.core.capabilities` (``State.implementation``); the views'
stand-ins in :mod:`compat.core.layout` (``Call`` is a ``Staging``); the translation to the
framework in
``adapters/``; the emulations in :mod:`compat.algorithms`; the pre-flight agreement check in
:mod:`compat.core.preflight`. :meth:`Call.issue` runs the pre-flight check, skips a call with
nothing
to move, issues the work, and ``if async_op: return work`` else waits.

Every collective runs after :func:`compat.init`, or, without it, in a process whose framework
process group was initialised elsewhere (``torch.distributed.init_process_group``,
``mindspore.communication.init()``): the first call adopts that group as ``compat.init()`` would
(:func:`compat.core.state.current`). With neither, it raises :class:`compat.NotInitializedError`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from itertools import pairwise
from typing import Any

from compat.base.adapter import Adapter, Tensor
from compat.base.errors import UnsupportedError
from compat.base.types import Group, ReduceOp, Work, with_result
from compat.core import coalescing, common, specs, state
from compat.core.call import Call
from compat.core.common import FALL_THROUGH
from compat.core.dispatch import framework_of
from compat.core.preflight import Description
from compat.core.specs import DEFAULT_ROOT
from compat.core.values import check_bool, check_dtype, check_int, describe, even_split

_AG, _RS = coalescing.ALL_GATHER_INTO_TENSOR, coalescing.REDUCE_SCATTER_TENSOR

# Each collective's common case (compat.core.common), made once from its spec.
_ALL_GATHER = common.compile_spec(specs.ALL_GATHER)
_ALL_GATHER_INTO_TENSOR = common.compile_spec(specs.ALL_GATHER_INTO_TENSOR)
_ALL_REDUCE = common.compile_spec(specs.ALL_REDUCE)
_ALL_TO_ALL = common.compile_spec(specs.ALL_TO_ALL)
_ALL_TO_ALL_SINGLE = common.compile_spec(specs.ALL_TO_ALL_SINGLE)
_BROADCAST = common.compile_spec(specs.BROADCAST)
_GATHER = common.compile_spec(specs.GATHER)
_REDUCE = common.compile_spec(specs.REDUCE)
_REDUCE_SCATTER = common.compile_spec(specs.REDUCE_SCATTER)
_REDUCE_SCATTER_TENSOR = common.compile_spec(specs.REDUCE_SCATTER_TENSOR)
_SCATTER = common.compile_spec(specs.SCATTER)
_SCATTER_TENSOR = common.compile_spec(specs.SCATTER_TENSOR)


def _tensor_form(out: object, split_sizes: object, dim: object, out_required: bool) -> bool:
    """Whether a tensor form of all_gather or reduce_scatter may be the common case: no split
    sizes, dim the int 0 (not False, not 0.0), and an ``out`` where the form requires one."""
    if split_sizes is not None or type(dim) is not int or dim != 0:
        return False
    return out is not None or not out_required


def _moved(call: Call, tensor: Tensor, dim: int) -> Tensor:
    """``tensor`` with ``dim`` moved to the front (a view; compat.core.layout stages it)."""
    return call.adapter.movedim(tensor, dim, 0) if dim else tensor


def _with_dim(shape: tuple[int, ...], dim: int, size: int) -> tuple[int, ...]:
    return (*shape[:dim], size, *shape[dim + 1 :])


def _front(shape: tuple[int, ...], dim: int) -> tuple[int, ...]:
    """``shape`` with ``dim`` moved to the front (what the pre-flight check compares)."""
    return (shape[dim], *shape[:dim], *shape[dim + 1 :])


def _gather_sizes(call: Call, sizes: object, rows: int, dim: int = 0) -> list[int]:
    """output_split_sizes: dim ``dim`` of each rank's tensor, this rank's equal to ``rows``."""
    count, me = call.group.size(), call.group.own_rank(call.state.rank)
    if sizes is None:
        return [rows] * count
    if not isinstance(sizes, Sequence) or isinstance(sizes, str):
        raise TypeError(
            f"output_split_sizes: expected a list of {count} ints; got {describe(sizes)}"
        )
    values = [check_int(size, f"output_split_sizes[{i}]") for i, size in enumerate(sizes)]
    if len(values) != count:
        raise ValueError(
            f"output_split_sizes: expected {count} sizes (one per rank of the group); "
            f"got {len(values)}: {values}"
        )
    if any(size < 0 for size in values):
        raise ValueError(f"output_split_sizes: expected sizes >= 0; got {values}")
    if values[me] != rows:
        raise ValueError(
            f"output_split_sizes: expected entry {me} (this rank) to equal dim {dim} of tensor "
            f"({rows}); got {values}"
        )
    return values


def reduce_scatter(
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp | str = ReduceOp.SUM,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Reduce ``input_list`` element-wise across ranks; rank i receives the reduction of every
    rank's ``input_list[i]`` in ``output`` (PyTorch's output-buffer style).

    Parameters
    ----------
    output
        This rank's result; its shape is ``input_list[rank]``'s.
    input_list
        One tensor per rank of the group. Sizes may differ in dim 0 (uneven).
    op
        A :class:`ReduceOp`, one of its strings, or a framework's own op.
    group
        A group from :func:`new_group`; default the world.
    async_op
        Return a :class:`Work` instead of waiting.

    Returns
    -------
    Work or None

    Examples
    --------
    With 2 ranks::

        >>> out = torch.empty(2)
        >>> inputs = [torch.tensor([1., 2.]) * (rank + 1), torch.tensor([3., 4.]) * (rank + 1)]
        >>> compat.reduce_scatter(out, inputs)
        >>> out
        tensor([3., 6.])   # rank 0
        tensor([9., 12.])  # rank 1
    """
    if _REDUCE_SCATTER(output, group, async_op, items=input_list, op=op) is not FALL_THROUGH:
        return None
    call = Call(group, async_op)
    checks, adapter = call.checks, call.adapter
    checks.tensor(output, "output")
    dtype, shape = adapter.dtype(output), adapter.shape(output)
    inputs, even = checks.tensor_list(
        input_list, "input_list", call.group, output, "output", dtype, shape
    )
    reduce_op = call.reduction(op, dtype, "output")
    agree = lambda: Description(  # noqa: E731
        "reduce_scatter", dtype, shape, reduce_op.value,
        sizes=[adapter.shape(item)[0] for item in inputs],
    )  # fmt: skip
    target = call.write(output)
    whole = adapter.joined(inputs) if even else None
    if whole is not None:
        whole = call.read(whole)  # dense already (a complex one: its real view)
        # Equal parts of one buffer (x.chunk(n)): the tensor form, without concatenating.
        return call.issue(
            "reduce_scatter_tensor", whole, target, whole, reduce_op, agree=agree, outputs=[output],
            empty=0 in shape, dtype=dtype,
        )  # fmt: skip
    return _reduce_scatter_parts(call, target, inputs, even, reduce_op, agree, output, dtype)


def _reduce_scatter_parts(
    call: Call,
    target: Tensor,
    inputs: list[Tensor],
    even: bool,
    reduce_op: ReduceOp,
    agree: Callable[[], Description],
    output: Tensor,
    dtype: str,
) -> Work | None:
    """reduce_scatter of parts that are not one buffer: equal parts, or parts of different
    sizes, which have a capability entry of their own (HCCL's kernel takes equal parts only)."""
    adapter = call.adapter
    if even:
        nbytes, empty = adapter.nbytes(output) * len(inputs), 0 in adapter.shape(output)
    else:
        nbytes = sum(adapter.nbytes(item) for item in inputs)
        empty = all(adapter.numel(item) == 0 for item in inputs)
    return call.issue(
        "reduce_scatter" if even else "reduce_scatter_uneven", output, target,
        call.read_all(inputs), reduce_op, nbytes=nbytes, agree=agree,
        outputs=[output], empty=empty, dtype=dtype,
    )  # fmt: skip


def reduce_scatter_tensor(
    tensor: Tensor,
    op: ReduceOp | str = ReduceOp.SUM,
    group: Group | None = None,
    async_op: bool = False,
    *,
    out: Tensor | None = None,
    input_split_sizes: Sequence[int] | None = None,
    dim: int = 0,
) -> Any:
    """Reduce ``tensor`` across ranks and return this rank's part of dim ``dim`` (MindSpore's
    functional style, ``comm_func.reduce_scatter_tensor``; ``dim`` is funcol's
    ``scatter_dim``).

    Parameters
    ----------
    tensor
        The same shape on every rank; dim ``dim`` splits into the group's size equal parts, or
        into ``input_split_sizes``.
    op, group
        As in :func:`reduce_scatter`.
    async_op
        Return ``(result, Work)``; ``result`` is valid after ``Work.wait()``.
    out
        Write the result here (``tensor``'s shape with dim ``dim`` this rank's part) instead of
        a new tensor.
    input_split_sizes
        Sizes of dim ``dim`` for each rank (uneven split).
    dim
        The dim to split (keyword-only; negative counts from the end). A dim other than 0 is
        moved to the front through a staged copy; dim 0 is passed as it is (no copy).

    Returns
    -------
    tensor, or (tensor, Work) if async_op

    Examples
    --------
    With 2 ranks::

        >>> x = torch.tensor([1., 2., 3., 4.]) * (rank + 1)
        >>> compat.reduce_scatter_tensor(x)
        tensor([3., 6.])   # rank 0
        tensor([9., 12.])  # rank 1
        >>> compat.reduce_scatter_tensor(x, input_split_sizes=[1, 3])
        tensor([3.])             # rank 0
        tensor([6., 9., 12.])    # rank 1
    """
    if not isinstance(op, (ReduceOp, str)) and framework_of(op) is not None:
        expected = "a compat.ReduceOp or a string"
        _refuse_torch_order("reduce_scatter_tensor", "reduce_scatter_into", "op", expected, op)
    return _reduce_scatter_tensor(
        tensor, op, group, async_op, out, input_split_sizes, dim, ("tensor", "out")
    )


def _refuse_torch_order(function: str, into: str, param: str, expected: str, given: object) -> None:
    """A tensor where ``function`` takes ``param`` second: a call written in torch's order,
    ``function(output, input)``, which compat's ``into`` takes."""
    raise TypeError(
        f"{param}: expected {expected}; got {describe(given)}. compat.{function} takes the input "
        f"first and returns the result (MindSpore's order); for torch's order {function}(output, "
        f"input) call compat.{into}(output, input), or compat.{function}(input, out=output)"
    )


def reduce_scatter_into(
    output: Tensor,
    input: Tensor,  # torch's name, so that calls by keyword port unchanged
    op: ReduceOp | str = ReduceOp.SUM,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Reduce ``input`` across ranks and write this rank's part of dim 0 into ``output``:
    ``torch.distributed.reduce_scatter_tensor``'s form, signature and result (and
    ``mint.distributed.reduce_scatter_tensor``'s).

    :func:`reduce_scatter_tensor` with ``out=output`` does the same and returns the tensor;
    this form returns what torch returns (``None``, or a ``Work`` with ``async_op``), so that
    code which keeps the result, or stores the function, keeps working (``compat port`` uses
    it there).

    Examples
    --------
    With 2 ranks::

        >>> output = torch.empty(2)
        >>> compat.reduce_scatter_into(output, torch.tensor([1., 2., 3., 4.]) * (rank + 1))
        >>> output
        tensor([3., 6.])   # rank 0
        tensor([9., 12.])  # rank 1
    """
    result = _reduce_scatter_tensor(
        input, op, group, async_op, output, None, 0, ("input", "output"), out_required=True
    )
    return result[1] if async_op else None


def _reduce_scatter_tensor(
    tensor: Tensor,
    op: ReduceOp | str,
    group: Group | None,
    async_op: bool,
    out: Tensor | None,
    input_split_sizes: Sequence[int] | None,
    dim: int,
    names: tuple[str, str],
    out_required: bool = False,
) -> Any:
    """reduce_scatter_tensor, its messages naming the input and the output ``names``; with
    ``out_required`` (torch's form) the output must be a tensor, checked first."""
    if _tensor_form(out, input_split_sizes, dim, out_required):
        ran = _REDUCE_SCATTER_TENSOR(tensor, group, async_op, out=out, op=op)
        if ran is not FALL_THROUGH:
            return ran
    tensor_param, out_param = names
    call = Call(group, async_op)
    checks, adapter = call.checks, call.adapter
    if out_required:
        checks.tensor(out, out_param)
    checks.tensor(tensor, tensor_param)
    if out is not None and input_split_sizes is None and type(dim) is int and dim == 0:
        checks.tensor(out, out_param)
        stacked = _stack(call, tensor, tensor_param, adapter.shape(out))
        tensor = tensor if stacked is None else stacked
    shape = checks.dim0(tensor, tensor_param)
    axis = 0 if type(dim) is int and dim == 0 else checks.dim(dim, shape, tensor_param)
    sizes = checks.splits(
        input_split_sizes, "input_split_sizes", call.group.size(), shape[axis], tensor_param, axis
    )
    dtype = adapter.dtype(tensor)
    reduce_op = call.reduction(op, dtype, tensor_param)
    me = call.group.own_rank(call.state.rank)
    result = checks.out(
        out, _with_dim(shape, axis, sizes[me]), tensor, dtype, tensor_param, out_param
    )
    agree = lambda: Description(  # noqa: E731
        "reduce_scatter_tensor", dtype, _front(shape, axis), reduce_op.value, sizes=sizes,
        dim=axis,
    )  # fmt: skip
    source, target = call.read(_moved(call, tensor, axis)), call.write(_moved(call, result, axis))
    if input_split_sizes is None or len(set(sizes)) == 1:
        args: tuple[Any, ...] = ("reduce_scatter_tensor", source, target, source, reduce_op)
    else:
        args = ("reduce_scatter_uneven", source, target, adapter.parts(source, sizes), reduce_op)
    issue: dict[str, Any] = {"agree": agree, "outputs": [result], "empty": 0 in shape}
    issue["dtype"] = dtype
    if out is not None and (block := coalescing.block_on(call.group)) is not None:
        later = _issued_later(call, args, issue, _RS)
        ticket = block.record(_RS, later, call.async_op, [result], reduce_op)
        return call.result(result, ticket)
    return call.result(result, call.issue(*args, **issue))


def all_reduce(
    tensor: Tensor,
    op: ReduceOp | str = ReduceOp.SUM,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Reduce ``tensor`` across ranks, in place, on every rank.

    Examples
    --------
    With 2 ranks::

        >>> t = torch.tensor([1., 2.]) * (rank + 1)
        >>> compat.all_reduce(t)
        >>> t
        tensor([3., 6.])   # ranks 0 and 1
    """
    if _ALL_REDUCE(tensor, group, async_op, op=op) is not FALL_THROUGH:
        return None
    call = Call(group, async_op)
    call.checks.tensor(tensor, "tensor")
    adapter = call.adapter
    dtype = adapter.dtype(tensor)
    reduce_op = call.reduction(op, dtype, "tensor")
    if (block := coalescing.block_on(call.group)) is not None:
        # what the table chooses, resolved now: a collective it refuses raises before recording
        call.state.implementation("all_reduce", tensor, None, call.group.handle, dtype)
        return block.record_reduction(tensor, dtype, reduce_op, call.async_op)
    agree = lambda: Description(  # noqa: E731
        "all_reduce", dtype, adapter.shape(tensor), reduce_op.value
    )
    staged = call.update(tensor)
    return call.issue(
        "all_reduce", staged, staged, reduce_op, agree=agree,
        outputs=[tensor], empty=adapter.numel(tensor) == 0,
        dtype=dtype,
    )  # fmt: skip


def all_reduce_coalesced(
    tensors: list[Tensor],
    op: ReduceOp | str = ReduceOp.SUM,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Reduce each tensor of ``tensors`` across ranks, in place, on every rank (as
    ``torch.distributed.all_reduce_coalesced``).

    Every tensor is checked (a tensor of one dtype, which ``op`` applies to, on this rank's
    device) before anything is sent. Where the capability table's ``coalesce`` rule for the
    backend says (Gloo: up to 4 MB in all on its own transport, through shared memory from 3
    tensors of up to 64 KB each on average; MCCL: up to 8 MB, and from 2 such tensors), the
    tensors go as one buffer, in one :func:`all_reduce`, as torch's Gloo flattens them: over
    their own memory where they tile one buffer in list order (``x.chunk(n)``), else copied in
    and out. Otherwise (larger tensors, NCCL and HCCL, which have no rule) compat issues one
    :func:`all_reduce` per tensor, all at once (one after another when the call is synchronous,
    on the world, of dense tensors). The results are the same (each element is reduced alone
    either way), and every rank issues the same calls whatever its tensors' layout. A tensor
    given twice, or tensors that share memory, are reduced once, as on Gloo: compat reduces
    copies of them and copies the results back in list order.

    Examples
    --------
    With 2 ranks::

        >>> a, b = torch.tensor([1.]) * (rank + 1), torch.tensor([[1., 2.]]) * (rank + 1)
        >>> compat.all_reduce_coalesced([a, b])
        >>> a, b
        (tensor([3.]), tensor([[3., 6.]]))   # ranks 0 and 1
    """
    if _ran_coalesced_common(tensors, op, group, async_op):
        return None
    current = state.current()
    group_handle = _checked_coalesced(current, tensors, op, group, async_op)
    tensors, copy_back = _apart(current.adapter, tensors)
    reduced, finish = tensors, copy_back  # what the all_reduces take; what runs after them
    if _coalesces(current, tensors, group_handle):
        whole, copy_out = _one_buffer(current.adapter, tensors)
        if whole is not None:
            reduced, finish = [whole], _in_turn(copy_out, copy_back)
    with coalescing.suspended(group_handle):  # torch's manager runs this call at once
        works = [all_reduce(tensor, op, group, async_op=True) for tensor in reduced]
    pending = [work for work in works if work is not None]
    if async_op:
        work = Work(pending, finish)
        current.track(group_handle, work)  # its copies back, too, before a barrier
        return work
    for work in pending:
        work.wait()
    if finish is not None:
        finish()
    return None


def _ran_coalesced_common(tensors: object, op: object, group: object, async_op: object) -> bool:
    """all_reduce_coalesced's common case, all_reduce's (:mod:`compat.core.common`) for a list
    of tensors of one dtype and any shapes that share no memory: one all_reduce of their one
    buffer, or one synchronous all_reduce after another (the results are those of the calls
    issued at once, and no Work is made per tensor). False: the general path."""
    if not isinstance(tensors, (list, tuple)) or not tensors:
        return False
    current = state.current()
    facts = common.tensor_facts(current, tensors[0], group, async_op)
    if facts is None:
        return False
    dtype = facts[0]
    known = current.checks.known_reduction(op, dtype)
    each = None if known is None else current.checks.plain_tensors(tensors, dtype, tensors[0])
    if each is None or _may_share_memory(current.adapter, each):
        return False
    world = current.world.handle
    whole, finish = None, _nothing
    if _coalesces(current, each, world):
        whole, finish = _one_buffer(current.adapter, each)
    for tensor in each if whole is None else [whole]:
        current.world_implementation("all_reduce", tensor, dtype)(tensor, known, world, False)
    finish()
    return True


def _checked_coalesced(
    current: state.State, tensors: object, op: object, group: object, async_op: object
) -> Any:
    """all_reduce_coalesced's arguments checked; the group's handle."""
    checks, adapter = current.checks, current.adapter
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise TypeError(f"tensors: expected a non-empty list of tensors; got {describe(tensors)}")
    for index, tensor in enumerate(tensors):
        checks.tensor(tensor, f"tensors[{index}]")
    dtype = adapter.dtype(tensors[0])
    for index, tensor in enumerate(tensors):
        check_dtype(adapter.dtype(tensor), dtype, f"tensors[{index}]", "as tensors[0]'s")
    checks.reduction(op, dtype, "tensors")
    group_handle = checks.group(group).handle
    check_bool(async_op, "async_op")
    return group_handle


def _apart(
    adapter: Adapter, tensors: list[Tensor]
) -> tuple[list[Tensor], Callable[[], None] | None]:
    """``tensors``, or copies of them where two may share memory, with what copies the results
    back: torch's Gloo reduces a tensor given twice, or elements two tensors share, once (it
    flattens them into one buffer), where an all_reduce per tensor in place would reduce them
    once per tensor."""
    if not _may_share_memory(adapter, tensors):
        return tensors, None
    copies = [adapter.clone(tensor) for tensor in tensors]

    def copy_back() -> None:
        for original, reduced in zip(tensors, copies, strict=True):
            adapter.copy_(original, reduced)

    return copies, copy_back


def _coalesces(current: state.State, tensors: Sequence[Tensor], group: Any) -> bool:
    """Whether all_reduce_coalesced reduces ``tensors`` as one buffer, in one all_reduce on
    ``group`` (a handle), as torch's Gloo does: over their own memory where they tile one buffer
    in list order (``x.chunk(n)``), else through a copy in and out. The backend's ``coalesce``
    rule in the capability table says where, for more than one tensor holding elements: up to
    ``max_bytes`` in all on the backend's own transport (above it the copies cost more than
    the calls they save); through shared memory, where a round costs less, from
    ``one_host_min_tensors`` tensors of up to ``one_host_max_mean_bytes`` each on average. Only
    sizes and the group decide, which every rank shares, so every rank issues the same calls
    whatever its tensors' layout."""
    rule = current.coalesce
    if len(tensors) < 2 or rule is None:
        return False
    adapter = current.adapter
    sizes = [adapter.nbytes(tensor) for tensor in tensors]
    holding, total = sum(1 for size in sizes if size), sum(sizes)
    if holding < 2:
        return False
    if current.through_shared_memory("all_reduce", tensors[0], group):
        at_least: int | None = rule.get("one_host_min_tensors")
        if at_least is None or holding < at_least:
            return False
        mean_bytes: int = rule["one_host_max_mean_bytes"]
        return total <= holding * mean_bytes
    max_bytes: int = rule["max_bytes"]
    return total <= max_bytes


def _one_buffer(
    adapter: Adapter, tensors: Sequence[Tensor]
) -> tuple[Tensor | None, Callable[[], None]]:
    """The non-empty ``tensors``' elements as one 1-d tensor, in list order
    (:meth:`compat.base.adapter.Adapter.one_buffer`: the buffer they tile, else a copy), and what to
    run once its all_reduce has completed, which copies the results back where needed and holds
    the buffer until then (an asynchronous MindSpore call does not hold memory compat made from
    numpy). (None, ...) where the adapter cannot make one (off CPU on MindSpore): one all_reduce
    per tensor then, on every rank alike, since that depends on the device alone."""
    made = adapter.one_buffer([tensor for tensor in tensors if adapter.numel(tensor)])
    if made is None:
        return None, _nothing
    whole, copy_back = made

    def copy_out() -> None:
        copy_back()
        del held[:]

    held = [whole]
    return whole, copy_out


def _nothing() -> None:
    pass


def _in_turn(*steps: Callable[[], None] | None) -> Callable[[], None]:
    """One callable that runs ``steps`` (None skipped) in their order."""

    def run() -> None:
        for step in steps:
            if step is not None:
                step()

    return run


def _may_share_memory(adapter: Adapter, tensors: Sequence[Tensor]) -> bool:
    """True if two of ``tensors`` may share memory: their spans overlap (interleaved views
    count too), or the adapter cannot tell."""
    if len(tensors) < 2:
        return False
    spans = []
    for tensor in tensors:
        span = adapter.memory_span(tensor)
        if span is None:
            return True
        spans.append(span)
    spans.sort()
    return any(later[0] < earlier[1] for earlier, later in pairwise(spans))


class CoalescingManager:
    """What :func:`coalescing_manager` yields (torch's ``_CoalescingManager``): ``works``, the
    block's Work once the block has ended with ``async_ops=True``, and :meth:`wait`."""

    __slots__ = ("works",)

    def __init__(self) -> None:
        self.works: list[Work] = []

    def append(self, work: Work | None = None) -> None:
        if work:
            self.works.append(work)

    def wait(self) -> None:
        """Wait for the block's calls (after a block with ``async_ops=True``)."""
        for work in self.works:
            work.wait()


@contextmanager
def coalescing_manager(
    group: Group | None = None, device: object = None, async_ops: bool = False
) -> Iterator[CoalescingManager]:
    """Collect the collectives of a ``with`` block and issue them together at its end, as
    ``torch.distributed._coalescing_manager`` does.

    Inside the block, on ``group``, each :func:`all_reduce`, :func:`all_gather_into` and
    :func:`reduce_scatter_into` (and :func:`all_gather_into_tensor` /
    :func:`reduce_scatter_tensor` given ``out``) is checked at once and recorded; their
    results are valid after the block, or with ``async_ops=True`` after the manager's
    ``wait()`` (the block's end then does not wait). A block collects one kind, with one
    ``op``: another raises ValueError at that call, before anything is sent; an error inside
    the block drops its calls. The all_reduces are reduced by :func:`all_reduce_coalesced`
    (one call per dtype, in order of first use); the other kinds run one after another, in
    issue order (``capabilities.toml``, ``coalesced_in_order``). Other collectives and calls
    on other groups run at once. ``device`` (torch's, for NCCL's coalescing) is accepted and
    not needed. MindSpore has no such manager; the block runs there the same way.

    Examples
    --------
    With 2 ranks::

        >>> grads = [torch.ones(3) * (rank + 1), torch.ones(2, 2)]
        >>> with compat.coalescing_manager(async_ops=True) as cm:
        ...     for grad in grads:
        ...         compat.all_reduce(grad)
        >>> cm.wait()
        >>> grads[0]
        tensor([3., 3., 3.])   # ranks 0 and 1
    """
    current = state.current()
    resolved = current.checks.group(group)
    check_bool(async_ops, "async_ops")
    if device is not None and current.adapter.canonical_device(device) is None:
        raise TypeError(
            f"device: expected None or a device (torch.device('cpu'), 'cpu', ...); "
            f"got {describe(device)}"
        )
    block = coalescing.open_block(resolved, async_ops)
    manager = CoalescingManager()
    try:
        yield manager
    finally:
        coalescing.close(block)  # an error inside the block drops its calls
    block.work = _issue_block(block)
    if async_ops:
        manager.append(block.work)
    elif block.work is not None:
        block.work.wait()


def _issue_block(block: coalescing.Block) -> Work | None:
    """Issue a block's calls, asynchronously; their Work (None for an empty block)."""
    if block.kind is None:
        return None
    if block.kind == coalescing.ALL_REDUCE:
        by_dtype: dict[str, list[Tensor]] = {}
        for tensor, dtype in block.reductions:
            by_dtype.setdefault(dtype, []).append(tensor)
        works = [
            all_reduce_coalesced(tensors, block.op or ReduceOp.SUM, block.group, async_op=True)
            for tensors in by_dtype.values()
        ]
    else:
        works = [issue() for issue in block.issues]
    return Work([work for work in works if work is not None])


def _issued_later(
    call: Call, args: tuple[Any, ...], issue: dict[str, Any], kind: str
) -> Callable[[], Work | None]:
    """What issues a recorded call of ``kind`` at its block's end, asynchronously (the block
    waits), one after another: the emulation of torch's one coalesced call that the backend's
    ``coalesced_in_order`` entry in ``capabilities.toml`` records (a kind it does not list is
    refused, before anything is sent)."""
    rule = call.state.backend_entry.get("coalesced_in_order")
    if rule is None or kind not in rule["collectives"]:
        raise UnsupportedError(
            f"{kind}: a coalescing_manager block on {call.state.capability_key} cannot collect "
            f"it: capabilities.toml records no coalesced_in_order for {kind} there; expected "
            "the call outside the block"
        )
    if not issue["empty"]:  # what the table chooses, resolved now: a refusal raises here
        call.state.implementation(args[0], args[1], None, call.group.handle, issue["dtype"])

    def later() -> Work | None:
        call.async_op = True
        return call.issue(*args, **issue)

    return later


def all_gather(
    tensor_list: list[Tensor],
    tensor: Tensor,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Gather every rank's ``tensor`` into ``tensor_list`` on every rank (output-buffer style).

    ``tensor_list[i]`` receives rank i's tensor, which may have any shape (as torch's): parts
    that differ in dim 0 only go as they are; parts that differ in other dims (e.g. (1, tokens,
    hidden) with different tokens per rank) go as their elements, through one buffer of them
    copied into the parts once the call has completed.

    Examples
    --------
    With 2 ranks::

        >>> out = [torch.empty(2), torch.empty(2)]
        >>> compat.all_gather(out, torch.tensor([1., 2.]) + 10 * rank)
        >>> out
        [tensor([1., 2.]), tensor([11., 12.])]   # ranks 0 and 1
    """
    if _ALL_GATHER(tensor, group, async_op, out=tensor_list) is not FALL_THROUGH:
        return None
    call = Call(group, async_op)
    checks, adapter = call.checks, call.adapter
    checks.tensor(tensor, "tensor")
    dtype, shape = adapter.dtype(tensor), adapter.shape(tensor)
    outputs, even = checks.tensor_list(
        tensor_list, "tensor_list", call.group, tensor, "tensor", dtype, shape, any_shape=True
    )
    call.moved(dtype, "tensor")
    if not even and any(
        len(adapter.shape(o)) != len(shape) or adapter.shape(o)[1:] != shape[1:] for o in outputs
    ):
        return _all_gather_any_shape(call, outputs, tensor, dtype, shape)
    agree = lambda: Description(  # noqa: E731
        "all_gather", dtype, shape, sizes=[adapter.shape(o)[0] for o in outputs]
    )
    # Parts of tensor's shape are all empty exactly when tensor is.
    empty = 0 in shape if even else all(not adapter.numel(o) for o in outputs)
    targets, source = call.write_all(outputs), call.read(tensor)
    return call.issue(
        "all_gather" if even else "all_gather_uneven", source, targets, source,
        agree=agree, outputs=outputs, empty=empty, dtype=dtype,
    )  # fmt: skip


def _all_gather_any_shape(
    call: Call, outputs: list[Tensor], tensor: Tensor, dtype: str, shape: tuple[int, ...]
) -> Work | None:
    """all_gather whose parts differ in a dim other than dim 0: every part as its elements, the
    uneven all_gather of 1-d parts of one buffer, copied into ``outputs`` once complete."""
    adapter = call.adapter
    whole, source = adapter.one_buffer(outputs), adapter.one_buffer([tensor])
    if whole is None or source is None:
        raise UnsupportedError(
            f"all_gather: tensor_list's parts differ in a dim other than dim 0 "
            f"({[adapter.shape(o) for o in outputs]}), which needs a flat view of each tensor; "
            f"{adapter.framework} gives none here: pass parts that differ in dim 0 only"
        )
    # flat, then staged: float8 as its bytes, complex as its real view (elements, 2)
    (buffer, copy_back), flat = whole, call.read(source[0])
    sizes = [adapter.numel(o) for o in outputs]
    # The parts' trailing dims differ by design: the ranks agree on their elements instead.
    flat_shape = (adapter.numel(tensor),)
    agree = lambda: Description("all_gather", dtype, flat_shape, sizes=sizes)  # noqa: E731
    work = call.issue(
        "all_gather_uneven", flat, call.write_all(adapter.parts(buffer, sizes)), flat, agree=agree,
        empty=not any(sizes), dtype=dtype,
    )  # fmt: skip
    if call.async_op:
        gathered = Work([] if work is None else [work], copy_back)
        call.state.track(call.group.handle, gathered)  # its copy back, too, before a barrier
        return with_result(gathered, outputs)
    copy_back()
    return None


def all_gather_into_tensor(
    tensor: Tensor,
    group: Group | None = None,
    async_op: bool = False,
    *,
    out: Tensor | None = None,
    output_split_sizes: Sequence[int] | None = None,
    dim: int = 0,
) -> Any:
    """Gather every rank's ``tensor`` and return them concatenated on dim ``dim`` (functional
    style; ``dim`` is funcol's ``gather_dim``, keyword-only, negative counts from the end).

    ``output_split_sizes[i]`` is rank i's size of dim ``dim`` when the sizes differ (uneven).
    A dim other than 0 is gathered through a staged copy; dim 0 straight into the result.

    Examples
    --------
    With 2 ranks::

        >>> compat.all_gather_into_tensor(torch.tensor([1., 2.]) + 10 * rank)
        tensor([ 1.,  2., 11., 12.])   # ranks 0 and 1
    """
    if group is not None and not isinstance(group, Group) and framework_of(group) is not None:
        _refuse_torch_order(
            "all_gather_into_tensor",
            "all_gather_into",
            "group",
            "None, a compat.Group or the framework's group",
            group,
        )
    return _all_gather_into_tensor(
        tensor, group, async_op, out, output_split_sizes, dim, ("tensor", "out")
    )


def all_gather_into(
    output_tensor: Tensor,
    input_tensor: Tensor,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Gather every rank's ``input_tensor`` into ``output_tensor``, concatenated on dim 0:
    ``torch.distributed.all_gather_into_tensor``'s form, signature and result (and
    ``mint.distributed.all_gather_into_tensor``'s).

    :func:`all_gather_into_tensor` with ``out=output_tensor`` does the same and returns the
    tensor; this form returns what torch returns (``None``, or a ``Work`` with ``async_op``), so
    that code which keeps the result, or stores the function, keeps working (``compat port``
    uses it there).

    Examples
    --------
    With 2 ranks::

        >>> output = torch.empty(4)
        >>> compat.all_gather_into(output, torch.tensor([1., 2.]) + 10 * rank)
        >>> output
        tensor([ 1.,  2., 11., 12.])   # ranks 0 and 1
    """
    result = _all_gather_into_tensor(
        input_tensor,
        group,
        async_op,
        output_tensor,
        None,
        0,
        ("input_tensor", "output_tensor"),
        out_required=True,
    )
    return result[1] if async_op else None


def _all_gather_into_tensor(
    tensor: Tensor,
    group: Group | None,
    async_op: bool,
    out: Tensor | None,
    output_split_sizes: Sequence[int] | None,
    dim: int,
    names: tuple[str, str],
    out_required: bool = False,
) -> Any:
    """all_gather_into_tensor, its messages naming the input and the output ``names``; with
    ``out_required`` (torch's form) the output must be a tensor, checked first."""
    if _tensor_form(out, output_split_sizes, dim, out_required):
        ran = _ALL_GATHER_INTO_TENSOR(tensor, group, async_op, out=out)
        if ran is not FALL_THROUGH:
            return ran
    tensor_param, out_param = names
    call = Call(group, async_op)
    checks, adapter = call.checks, call.adapter
    if out_required:
        checks.tensor(out, out_param)
    checks.tensor(tensor, tensor_param)
    if _zero_d_into(call, tensor, out, output_split_sizes, dim):
        tensor = adapter.shaped_view(tensor, (1,))  # torch's form on NCCL: one element each
    shape = checks.dim0(tensor, tensor_param)
    axis = 0 if type(dim) is int and dim == 0 else checks.dim(dim, shape, tensor_param)
    sizes = _gather_sizes(call, output_split_sizes, shape[axis], axis)
    dtype = adapter.dtype(tensor)
    call.moved(dtype, tensor_param)
    out_shape = _with_dim(shape, axis, sum(sizes))
    uneven = axis or output_split_sizes is not None
    stacked = None if uneven else _stack(call, out, out_param, shape)
    result = checks.out(
        out if stacked is None else stacked, out_shape, tensor, dtype, tensor_param, out_param,
        f"every rank's {tensor_param} concatenated on dim {axis}",
    )  # fmt: skip
    agree = lambda: Description(  # noqa: E731
        "all_gather_into_tensor", dtype, _front(shape, axis), sizes=sizes, dim=axis
    )
    source, target = call.read(_moved(call, tensor, axis)), call.write(_moved(call, result, axis))
    if output_split_sizes is None or len(set(sizes)) == 1:
        args: tuple[Any, ...] = ("all_gather_into_tensor", source, target, source)
    else:
        args = ("all_gather_uneven", source, adapter.parts(target, sizes), source)
    issue: dict[str, Any] = {"agree": agree, "outputs": [result], "empty": 0 in out_shape}
    issue["dtype"] = dtype
    shown = result if stacked is None else out  # the stack itself, as given
    if out is not None and (block := coalescing.block_on(call.group)) is not None:
        later = _issued_later(call, args, issue, _AG)
        return call.result(shown, block.record(_AG, later, call.async_op, [result]))
    return call.result(shown, call.issue(*args, **issue))


def _zero_d_into(call: Call, tensor: Tensor, out: object, split_sizes: object, dim: object) -> bool:
    """Whether a dim-0 gather writes a 0-d ``tensor`` into an ``out`` of one element per rank
    (NCCL counts elements; any other ``out`` leaves the 0-d input refused)."""
    if out is None or split_sizes is not None or not (type(dim) is int and dim == 0):
        return False
    if call.adapter.shape(tensor) or framework_of(out) is None:
        return False
    return math.prod(call.adapter.shape(out)) == call.group.size()


def _stack(call: Call, given: object, param: str, shape: tuple[int, ...]) -> Tensor | None:
    """torch's other forms of the whole of a dim-0 all_gather (the output) or reduce_scatter
    (the input), which NCCL takes: any contiguous tensor with the group's parts' elements, such
    as their stack ``(size, *shape)``, as a view shaped as their concatenation on dim 0 (same
    memory); None where ``given`` is the concatenation, has another number of elements or no
    such view (the concatenation is then checked, and refused with its expected shape)."""
    count = call.group.size()
    if given is None or not shape:
        return None
    call.checks.tensor(given, param)
    concatenation = (count * shape[0], *shape[1:])
    given_shape = call.adapter.shape(given)
    if given_shape == concatenation or math.prod(given_shape) != math.prod(concatenation):
        return None
    return call.adapter.shaped_view(given, concatenation)


def broadcast(
    tensor: Tensor,
    src: int | None = None,
    group: Group | None = None,
    async_op: bool = False,
    *,
    group_src: int | None = None,
) -> Work | None:
    """Copy ``tensor`` of global rank ``src`` (or of group rank ``group_src``; exactly one of
    the two) into ``tensor`` on every rank of the group."""
    if _BROADCAST(tensor, group, async_op, root=src, group_root=group_src) is not FALL_THROUGH:
        return None
    call = Call(group, async_op)
    call.checks.tensor(tensor, "tensor")
    root = call.checks.root(src, "src", group_src, "group_src", call.group)
    adapter = call.adapter
    dtype = adapter.dtype(tensor)
    call.moved(dtype, "tensor")
    agree = lambda: Description(  # noqa: E731
        "broadcast", dtype, adapter.shape(tensor), root=root
    )
    staged = call.update(tensor)
    return call.issue(
        "broadcast", staged, staged, root, agree=agree,
        outputs=[tensor], empty=adapter.numel(tensor) == 0,
        dtype=dtype,
    )  # fmt: skip


def scatter(
    tensor: Tensor,
    scatter_list: list[Tensor] | None = None,
    src: int = DEFAULT_ROOT,
    group: Group | None = None,
    async_op: bool = False,
    *,
    group_src: int | None = None,
) -> Work | None:
    """Rank ``src`` sends ``scatter_list[i]`` to group rank i, which receives it in ``tensor``.

    ``scatter_list`` is given on ``src`` only (one tensor per rank, each like ``tensor``). The
    root is global rank ``src`` (default 0) or group rank ``group_src``, not both.

    Examples
    --------
    With 2 ranks::

        >>> out = torch.empty(2)
        >>> parts = [torch.tensor([1., 2.]), torch.tensor([3., 4.])] if rank == 0 else None
        >>> compat.scatter(out, parts, src=0)
        >>> out
        tensor([1., 2.])   # rank 0
        tensor([3., 4.])   # rank 1
    """
    if (
        _SCATTER(tensor, group, async_op, items=scatter_list, root=src, group_root=group_src)
        is not FALL_THROUGH
    ):
        return None
    call = Call(group, async_op)
    checks, adapter = call.checks, call.adapter
    checks.tensor(tensor, "tensor")
    root = checks.root(src, "src", group_src, "group_src", call.group, DEFAULT_ROOT)
    dtype, shape = adapter.dtype(tensor), adapter.shape(tensor)
    parts = checks.root_list(
        scatter_list, "scatter_list", root, "src", call.group, tensor, dtype, shape
    )
    call.moved(dtype, "tensor")
    agree = lambda: Description("scatter", dtype, shape, root=root)  # noqa: E731
    target = call.write(tensor)
    sources = None if parts is None else call.read_all(parts)
    return call.issue(
        "scatter", target, target, sources, root, agree=agree,
        outputs=[tensor], empty=0 in shape, dtype=dtype,
    )  # fmt: skip


def scatter_tensor(
    tensor: Tensor,
    src: int = DEFAULT_ROOT,
    group: Group | None = None,
    async_op: bool = False,
    *,
    out: Tensor | None = None,
    group_src: int | None = None,
) -> Any:
    """Split ``tensor`` of rank ``src`` on dim 0 into equal parts and return group rank i's
    part on rank i (functional style, ``comm_func.scatter_tensor``). Every rank passes a tensor
    of the same shape and dtype; only ``src``'s values are read. The root is global rank
    ``src`` (default 0) or group rank ``group_src``, not both.

    Examples
    --------
    With 2 ranks::

        >>> compat.scatter_tensor(torch.tensor([1., 2., 3., 4.]) * (rank + 1), src=0)
        tensor([1., 2.])   # rank 0
        tensor([3., 4.])   # rank 1
    """
    ran = _SCATTER_TENSOR(tensor, group, async_op, out=out, root=src, group_root=group_src)
    if ran is not FALL_THROUGH:
        return ran
    call = Call(group, async_op)
    checks, adapter = call.checks, call.adapter
    checks.tensor(tensor, "tensor")
    root = checks.root(src, "src", group_src, "group_src", call.group, DEFAULT_ROOT)
    shape = checks.dim0(tensor, "tensor")
    sizes = even_split(shape[0], call.group.size(), "tensor")
    dtype = adapter.dtype(tensor)
    call.moved(dtype, "tensor")
    result = checks.out(out, (sizes[0], *shape[1:]), tensor, dtype, "tensor")
    agree = lambda: Description("scatter_tensor", dtype, shape, root=root)  # noqa: E731
    target = call.write(result)
    # Only the root's values are read.
    is_root = call.group.own_global_rank(call.state.rank) == root
    parts = adapter.parts(call.read(tensor), sizes) if is_root else None
    work = call.issue(
        "scatter", target, target, parts, root, agree=agree,
        outputs=[result], empty=adapter.numel(result) == 0, dtype=dtype,
    )  # fmt: skip
    return call.result(result, work)


def gather(
    tensor: Tensor,
    gather_list: list[Tensor] | None = None,
    dst: int = DEFAULT_ROOT,
    group: Group | None = None,
    async_op: bool = False,
    *,
    group_dst: int | None = None,
) -> Work | None:
    """Rank ``dst`` receives group rank i's ``tensor`` in ``gather_list[i]``.

    ``gather_list`` is given on ``dst`` only (one tensor per rank, each like ``tensor``). The
    root is global rank ``dst`` (default 0) or group rank ``group_dst``, not both.
    """
    if (
        _GATHER(tensor, group, async_op, items=gather_list, root=dst, group_root=group_dst)
        is not FALL_THROUGH
    ):
        return None
    call = Call(group, async_op)
    checks, adapter = call.checks, call.adapter
    checks.tensor(tensor, "tensor")
    root = checks.root(dst, "dst", group_dst, "group_dst", call.group, DEFAULT_ROOT)
    dtype, shape = adapter.dtype(tensor), adapter.shape(tensor)
    parts = checks.root_list(
        gather_list, "gather_list", root, "dst", call.group, tensor, dtype, shape
    )
    call.moved(dtype, "tensor")
    agree = lambda: Description("gather", dtype, shape, root=root)  # noqa: E731
    source = call.read(tensor)
    targets = None if parts is None else call.write_all(parts)
    return call.issue(
        "gather", source, source, targets, root, agree=agree,
        outputs=parts or (), empty=0 in shape, dtype=dtype,
    )  # fmt: skip


def reduce(
    tensor: Tensor,
    dst: int | None = None,
    op: ReduceOp | str = ReduceOp.SUM,
    group: Group | None = None,
    async_op: bool = False,
    *,
    group_dst: int | None = None,
) -> Work | None:
    """Reduce ``tensor`` across ranks into ``tensor`` on global rank ``dst`` (or group rank
    ``group_dst``; exactly one of the two). Other ranks' tensors are left as they were."""
    if _REDUCE(tensor, group, async_op, op=op, root=dst, group_root=group_dst) is not FALL_THROUGH:
        return None
    call = Call(group, async_op)
    call.checks.tensor(tensor, "tensor")
    root = call.checks.root(dst, "dst", group_dst, "group_dst", call.group)
    adapter = call.adapter
    dtype = adapter.dtype(tensor)
    reduce_op = call.reduction(op, dtype, "tensor")
    agree = lambda: Description(  # noqa: E731
        "reduce", dtype, adapter.shape(tensor), reduce_op.value, root=root
    )
    staged = call.update(tensor)
    return call.issue(
        "reduce", staged, staged, root, reduce_op, agree=agree, outputs=[tensor],
        empty=adapter.numel(tensor) == 0, dtype=dtype,
    )  # fmt: skip


def all_to_all_single(
    output: Tensor,
    input: Tensor,
    output_split_sizes: Sequence[int] | None = None,
    input_split_sizes: Sequence[int] | None = None,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Split ``input`` on dim 0 and send part i to group rank i; ``output`` receives, in rank
    order, the part each rank sent here. Split sizes default to equal parts.

    Examples
    --------
    With 2 ranks::

        >>> out = torch.empty(2)
        >>> compat.all_to_all_single(out, torch.tensor([1., 2.]) + 10 * rank)
        >>> out
        tensor([ 1., 11.])   # rank 0
        tensor([ 2., 12.])   # rank 1
    """
    # A missing output is the general path's to refuse.
    if output is not None and output_split_sizes is None and input_split_sizes is None:
        if _ALL_TO_ALL_SINGLE(input, group, async_op, out=output) is not FALL_THROUGH:
            return None
    call = Call(group, async_op)
    dtype, in_shape, in_sizes, out_sizes = _checked_single(
        call, output, input, output_split_sizes, input_split_sizes
    )
    agree = lambda: Description(  # noqa: E731
        "all_to_all_single", dtype, in_shape, send=in_sizes, receive=out_sizes
    )
    source, target = call.read(input), call.write(output)
    return call.issue(
        "all_to_all_single", source, target, source, out_sizes, in_sizes, agree=agree,
        outputs=[output],
        # The trailing dims agree on every rank: with a 0 among them, every part is empty.
        empty=0 in in_shape[1:], dtype=dtype,
    )  # fmt: skip


def _checked_single(
    call: Call,
    output: Tensor,
    input: Tensor,
    output_split_sizes: object,
    input_split_sizes: object,
) -> tuple[str, tuple[int, ...], list[int], list[int]]:
    """all_to_all_single's arguments checked: the dtype, the input's shape, and the split sizes
    of the input and of the output."""
    checks, adapter = call.checks, call.adapter
    checks.tensor(output, "output")
    checks.tensor(input, "input")
    dtype = adapter.dtype(input)
    check_dtype(dtype, adapter.dtype(output), "input", "the dtype of output")
    out_shape, in_shape = checks.dim0(output, "output"), checks.dim0(input, "input")
    if in_shape[1:] != out_shape[1:] or len(in_shape) != len(out_shape):
        checks.trailing(input, "input", output, "output")
    count = call.group.size()
    in_sizes = checks.splits(input_split_sizes, "input_split_sizes", count, in_shape[0], "input")
    out_sizes = checks.splits(
        output_split_sizes, "output_split_sizes", count, out_shape[0], "output"
    )
    call.moved(dtype, "input")
    return dtype, in_shape, in_sizes, out_sizes


def all_to_all(
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Send ``input_tensor_list[i]`` to group rank i; ``output_tensor_list[j]`` receives what
    group rank j sent here (torch's list form).

    Sizes may differ per pair in dim 0 (uneven); every tensor has the dtype and the dims after
    dim 0 of ``input_tensor_list[0]``, and ``output_tensor_list[j]`` has the dim 0 that rank j
    sends here.

    Examples
    --------
    With 2 ranks, rank r sending r + i + 1 rows to rank i::

        >>> inputs = [torch.full((rank + i + 1,), 10. * rank + i) for i in range(2)]
        >>> outputs = [torch.empty(r + rank + 1) for r in range(2)]
        >>> compat.all_to_all(outputs, inputs)
        >>> outputs
        [tensor([0.]), tensor([10., 10.])]             # rank 0
        [tensor([1., 1.]), tensor([11., 11., 11.])]    # rank 1
    """
    listed = isinstance(input_tensor_list, (list, tuple)) and len(input_tensor_list) > 0
    first = input_tensor_list[0] if listed else None
    ran = _ALL_TO_ALL(first, group, async_op, out=output_tensor_list, items=input_tensor_list)
    if ran is not FALL_THROUGH:
        return None
    call = Call(group, async_op)
    checks, adapter = call.checks, call.adapter
    outputs, inputs, dtype, shape, even = checks.exchange_lists(
        output_tensor_list, input_tensor_list, call.group
    )
    call.moved(dtype, "input_tensor_list[0]")
    first = inputs[0]
    agree = lambda: Description(  # noqa: E731
        "all_to_all", dtype, shape,
        send=[adapter.shape(item)[0] for item in inputs],
        receive=[adapter.shape(item)[0] for item in outputs],
    )  # fmt: skip
    targets, sources = call.write_all(outputs), call.read_all(inputs)
    # Tensors of different shapes have a capability entry of their own (Gloo's alltoall takes
    # equal ones only).
    return call.issue(
        "all_to_all" if even else "all_to_all_uneven", sources[0], targets, sources,
        nbytes=adapter.nbytes(first) * len(inputs) if even else sum(map(adapter.nbytes, inputs)),
        agree=agree, outputs=outputs,
        # The trailing dims agree on every rank: with a 0 among them, every part is empty.
        empty=0 in shape[1:], dtype=dtype,
    )  # fmt: skip


def barrier(
    group: Group | None = None, async_op: bool = False, device_ids: list[int] | None = None
) -> Work | None:
    """Block until every rank of the group has reached the barrier (torch's signature, without
    its ``timeout``: :func:`monitored_barrier` bounds a barrier on every backend). This rank's
    async collectives on the group, waited for or not, have completed by then, as on torch.

    Parameters
    ----------
    group
        A group from :func:`new_group`, the framework's own group, or None / WORLD.
    async_op
        Return a :class:`Work` instead of waiting: every rank has arrived once ``wait()``
        returns.
    device_ids
        torch: passed to ``torch.distributed.barrier``, which runs the barrier on device
        ``device_ids[0]`` (NCCL; Gloo runs it on the CPU). MindSpore: checked, then ignored
        (a reserved parameter of ``mint.distributed.barrier``). A non-empty list of device
        indices (ints >= 0), or None.

    Returns
    -------
    Work or None
        A Work if ``async_op``, else None once every rank has arrived.
    """
    call = Call(group, async_op)
    devices = _device_ids(device_ids)
    call.state.complete_unwaited(call.group.handle)
    call.agree(lambda: Description("barrier"))
    handle = call.group.handle
    if devices is None:
        # No tensor: what the table chooses for the group alone (on one host, a round of its
        # shared-memory window).
        run = call.state.implementation("barrier", None, 0, handle, BARRIER_DTYPE)
        pending = run(handle, call.async_op)
    else:  # device_ids name NCCL's device (torch reads device_ids[0]): the backend's own call
        pending = call.adapter.barrier(handle, call.async_op, devices)
    return call.done(pending, call.async_op)


#: What barrier's capability entry is looked up with: it carries no tensor, so no dtype.
BARRIER_DTYPE = "uint8"


def _device_ids(device_ids: object) -> list[int] | None:
    """barrier's device_ids: None or a non-empty list of ints >= 0 (torch reads device_ids[0])."""
    if device_ids is None:
        return None
    if not isinstance(device_ids, list):
        raise TypeError(
            f"device_ids: expected None or a list of device indices (ints); got "
            f"{describe(device_ids)}"
        )
    ids = [check_int(index, f"device_ids[{i}]") for i, index in enumerate(device_ids)]
    if not ids or any(index < 0 for index in ids):
        raise ValueError(f"device_ids: expected a non-empty list of device indices >= 0; got {ids}")
    return ids


#: monitored_barrier's timeout when none is given: torch's default process-group timeout.
DEFAULT_BARRIER_TIMEOUT = 1800.0


def monitored_barrier(
    group: Group | None = None,
    timeout: float | timedelta | None = None,
    wait_all_ranks: bool = False,
) -> None:
    """A barrier that fails instead of hanging: if a rank of the group has not arrived within
    ``timeout`` (seconds or a ``timedelta``; default 30 minutes, torch's), every rank that
    waited raises :class:`compat.CollectiveTimeout` naming the ranks that did not arrive (torch
    raises on rank 0 only, and only on Gloo).

    Where the group's ranks share a host (its shared-memory window, made with the group), one
    round of that window in which each rank waits for the others' arrival at most ``timeout``
    (``compat.algorithms.shared_memory_monitored_barrier``); every rank missing at the deadline
    is named. Otherwise built from point-to-point messages timed by compat: every rank sends its
    arrival to every peer, then receives theirs within the time left
    (``compat.algorithms.reported_barrier``), so it keeps ``timeout`` on every backend, also on
    MCCL, whose own calls give up after a fixed 30 s. ``wait_all_ranks`` is accepted as torch
    takes it; every rank missing at the deadline is named, except through MindSpore's messages,
    where a pending receive blocks every later operation, so a rank names the first silent peer
    and lists those after it as not checked (on MCCL the process then takes up to 30 s to exit,
    while MindSpore finishes the pending receive). After the error the communicator is spent:
    end the job. No pre-flight check runs (it would wait for the missing rank itself).

    Examples
    --------
    With 3 ranks, rank 2 not calling it::

        >>> compat.monitored_barrier(timeout=5)
        CollectiveTimeout: monitored_barrier: rank 2 did not arrive within the timeout of 5 s ...
    """
    call = Call(group)
    seconds = call.checks.seconds(timeout, "timeout", DEFAULT_BARRIER_TIMEOUT)
    check_bool(wait_all_ranks, "wait_all_ranks")
    # No tensor: what the table chooses for the group alone (on one host, a round of its
    # shared-memory window).
    handle = call.group.handle
    run = call.state.implementation("monitored_barrier", None, 0, handle, BARRIER_DTYPE)
    run(handle, seconds, wait_all_ranks)
