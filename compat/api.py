"""compat's public API: lifecycle, queries and the collective family, in both styles.

Every function checks its arguments on the calling rank before any communication (a bad argument
raises TypeError/ValueError naming the parameter, with output buffers untouched), resolves the
group, issues the work through the adapter (or the emulation the capability table names), and
``if async_op: return work`` else waits.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from compat import _runtime, tables
from compat._checks import (
    check_bool,
    check_dtype,
    check_int,
    check_list,
    check_shape,
    check_split_sizes,
    describe,
    even_split,
)
from compat._runtime import Runtime
from compat.adapter import Pending, Tensor
from compat.dispatch import frameworks, installed, is_available, load_adapter
from compat.preflight import Call
from compat.preflight import check as preflight
from compat.types import Group, ReduceOp, Work

# -- lifecycle --------------------------------------------------------------------------------


def _choose_framework(framework: str | None) -> str:
    known = frameworks()
    if framework is None:
        framework = os.environ.get("COMPAT_FRAMEWORK") or None
        param = "COMPAT_FRAMEWORK"
    else:
        param = "framework"
    if framework is None:
        for name in known:
            if any(var in os.environ for var in tables.lookup("frameworks", name, "launcher_env")):
                framework, param = name, "the launcher's environment"
                break
    if framework is None:
        present = installed()
        if len(present) != 1:
            raise ValueError(
                "framework: expected one of "
                f"{known} (or COMPAT_FRAMEWORK, or a launcher's environment) because "
                f"{'several are' if present else 'none is'} installed ({present}); got None"
            )
        return present[0]
    if framework not in known:
        raise ValueError(f"{param}: expected one of {known}; got {framework!r}")
    if not is_available(framework):
        raise ValueError(f"{param}: {framework!r} is not installed; installed: {installed()}")
    return framework


def init(
    framework: str | None = None,
    backend: str | None = None,
    *,
    timeout: float | timedelta | None = None,
    check: bool | None = None,
) -> None:
    """Join the job and set up communication.

    Parameters
    ----------
    framework
        ``"torch"`` or ``"mindspore"``. Default: ``COMPAT_FRAMEWORK``, else the launcher's
        environment (torchrun's ``MASTER_ADDR``/``TORCHELASTIC_RUN_ID``, msrun's ``MS_ROLE``),
        else the one installed framework.
    backend
        torch: ``"gloo"`` or ``"nccl"`` (default nccl if CUDA is available, else gloo).
        MindSpore: ``"hccl"``, ``"nccl"`` or ``"mccl"`` (default by device).
    timeout
        Seconds (or a ``timedelta``) that bound the set-up and every collective (torch); a
        collective that cannot complete raises :class:`compat.CollectiveTimeout`.
    check
        Run the pre-flight check before each collective (default: ``COMPAT_CHECK=1``): the
        ranks compare their calls and raise :class:`compat.CollectiveMismatchError` on every
        rank, naming the ranks and the difference, instead of hanging or corrupting data.

    Without a launcher's environment a torch process forms a world of one.
    """
    if _runtime.get_current() is not None:
        current = _runtime.current()
        raise RuntimeError(
            f"compat is already initialised ({current.framework}/{current.backend}); "
            "call compat.destroy() first"
        )
    chosen = _choose_framework(framework)
    backends = list(_runtime.backends(chosen))
    if backend is not None and backend not in backends:
        raise ValueError(f"backend: expected one of {backends} for {chosen}; got {backend!r}")
    if timeout is not None:
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
            timeout = timedelta(seconds=timeout)
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
            raise ValueError(
                f"timeout: expected a positive number of seconds or timedelta; got {timeout!r}"
            )
    adapter = load_adapter(chosen)
    chosen_backend = adapter.init(backend, timeout)
    if check is None:
        check = os.environ.get("COMPAT_CHECK", "") not in ("", "0")
    _runtime.set_current(Runtime(adapter, chosen_backend, check_bool(check, "check")))
    # A torch process that exits with its process group alive aborts ("terminate called without
    # an active exception", measured): leave the job at exit if the script did not.
    atexit.register(destroy)


def is_initialized() -> bool:
    """True between :func:`init` and :func:`destroy`."""
    return _runtime.get_current() is not None


def destroy() -> None:
    """Leave the job; :func:`init` may be called again afterwards."""
    runtime = _runtime.get_current()
    if runtime is not None:
        _runtime.set_current(None)
        runtime.adapter.destroy()
        from compat.algorithms import clear_scratch

        clear_scratch()  # the reduce_scatter algorithms' reused buffers


def get_framework() -> str:
    """The framework compat was initialised for: ``"torch"`` or ``"mindspore"``."""
    return _runtime.current().framework


def get_backend(group: Group | None = None) -> str:
    """The backend in use (``"gloo"``, ``"nccl"``, ``"mccl"``, ``"hccl"``)."""
    runtime = _runtime.current()
    if group is not None and not isinstance(group, Group):
        raise TypeError(f"group: expected a compat.Group or None; got {describe(group)}")
    return runtime.backend


def get_rank(group: Group | None = None) -> int:
    """This process's rank in the world, or in ``group`` (-1 if it is not a member)."""
    runtime = _runtime.current()
    if group is None:
        return runtime.rank
    if not isinstance(group, Group):
        raise TypeError(f"group: expected a compat.Group or None; got {describe(group)}")
    return group.group_rank(runtime.rank)


def get_world_size(group: Group | None = None) -> int:
    """The number of ranks in the world, or in ``group``."""
    runtime = _runtime.current()
    if group is None:
        return runtime.world_size
    if not isinstance(group, Group):
        raise TypeError(f"group: expected a compat.Group or None; got {describe(group)}")
    return group.size


def new_group(ranks: Sequence[int]) -> Group:
    """Create a group of the given global ranks. Every rank of the world must call it, in the
    same order relative to other new_group calls, like ``torch.distributed.new_group``.

    Ranks are sorted: group rank i is the i-th smallest global rank.
    """
    runtime = _runtime.current()
    if not isinstance(ranks, Sequence) or isinstance(ranks, str):
        raise TypeError(f"ranks: expected a list of global ranks; got {describe(ranks)}")
    members = [check_int(rank, f"ranks[{i}]") for i, rank in enumerate(ranks)]
    bad = [rank for rank in members if not 0 <= rank < runtime.world_size]
    if bad or not members or len(set(members)) != len(members):
        raise ValueError(
            f"ranks: expected distinct global ranks in [0, {runtime.world_size}), at least one; "
            f"got {members}"
        )
    members.sort()
    runtime.group_count += 1
    name = f"compat_group_{runtime.group_count}"
    handle = runtime.adapter.new_group(members, name)
    return Group(members, handle, name)


# -- helpers ----------------------------------------------------------------------------------


def _done(pending: Pending, async_op: bool) -> Work | None:
    if async_op:
        return Work([pending] if pending is not None else [])
    return None


def _check_reduction(runtime: Runtime, op: object, dtype: str, param: str) -> ReduceOp:
    return runtime.check_reduction(op, dtype, param)


def _check_like(
    runtime: Runtime,
    tensor: object,
    param: str,
    like: Tensor,
    like_param: str,
    shape: tuple[int, ...] | None,
) -> None:
    """``tensor`` is a tensor with ``like``'s dtype and, unless ``shape`` is None, that shape."""
    runtime.check_tensor(tensor, param)
    adapter = runtime.adapter
    # The error's words are built only when it is raised (this runs once per list item).
    if adapter.dtype(tensor) != adapter.dtype(like):
        check_dtype(adapter.dtype(tensor), adapter.dtype(like), param, f"the dtype of {like_param}")
    if shape is not None and adapter.shape(tensor) != shape:
        check_shape(adapter.shape(tensor), shape, param, f"must match {like_param}")


def _check_trailing(
    runtime: Runtime, tensor: Tensor, param: str, like: Tensor, like_param: str
) -> None:
    """``tensor`` has the dims of ``like`` after dim 0 (it may differ in dim 0 only)."""
    shape, reference = runtime.adapter.shape(tensor), runtime.adapter.shape(like)
    if shape[1:] != reference[1:] or len(shape) != len(reference):
        raise ValueError(
            f"{param}: expected shape (*, {', '.join(map(str, reference[1:]))}) (only dim 0 may "
            f"differ from {like_param}); got {shape}"
        )


def _check_dim0(runtime: Runtime, tensor: Tensor, param: str) -> tuple[int, ...]:
    shape = runtime.adapter.shape(tensor)
    if not shape:
        raise ValueError(
            f"{param}: expected a tensor with at least one dimension; got a 0-d tensor"
        )
    return shape


def _check_out(
    runtime: Runtime, out: object, shape: tuple[int, ...], like: Tensor, like_param: str
) -> Tensor:
    if out is None:
        return runtime.adapter.empty(shape, like)
    runtime.check_tensor(out, "out")
    adapter = runtime.adapter
    if adapter.dtype(out) != adapter.dtype(like):
        check_dtype(adapter.dtype(out), adapter.dtype(like), "out", f"the dtype of {like_param}")
    check_shape(adapter.shape(out), shape, "out", "this rank's part of the result")
    return out


def _check_root_list(
    runtime: Runtime,
    value: object,
    param: str,
    root: int,
    root_param: str,
    group: Group,
    tensor: Tensor,
) -> list[Tensor] | None:
    """scatter_list / gather_list: a list of tensors like ``tensor`` on the root, else absent."""
    if runtime.rank != root:
        if value:
            raise ValueError(
                f"{param}: expected None on ranks other than {root_param}={root}; got "
                f"{describe(value)} on rank {runtime.rank}"
            )
        return None
    items = check_list(value, param, group.size)
    shape = runtime.adapter.shape(tensor)
    for i, item in enumerate(items):
        _check_like(runtime, item, f"{param}[{i}]", tensor, "tensor", shape)
    return items


# -- the reduce_scatter family ----------------------------------------------------------------


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
    runtime = _runtime.current()
    runtime.check_tensor(output, "output")
    grp = runtime.resolve_group(group)
    inputs = check_list(input_list, "input_list", grp.size)
    adapter = runtime.adapter
    dtype, shape = adapter.dtype(output), adapter.shape(output)
    for i, item in enumerate(inputs):
        # The checks' words are built only when one fails (this runs once per rank).
        if (
            not runtime.is_known_tensor(item)
            or adapter.dtype(item) != dtype
            or len(adapter.shape(item)) != len(shape)
            or adapter.shape(item)[1:] != shape[1:]
        ):
            _check_like(runtime, item, f"input_list[{i}]", output, "output", None)
            _check_trailing(runtime, item, f"input_list[{i}]", output, "output")
    me = grp.group_rank(runtime.rank)
    check_shape(
        runtime.adapter.shape(inputs[me]),
        runtime.adapter.shape(output),
        f"input_list[{me}]",
        "this rank's entry must have output's shape",
    )
    reduce_op = _check_reduction(runtime, op, runtime.adapter.dtype(output), "output")
    async_op = check_bool(async_op, "async_op")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call(
                "reduce_scatter",
                runtime.adapter.dtype(output),
                runtime.adapter.shape(output),
                reduce_op.value,
                sizes=[runtime.adapter.shape(item)[0] for item in inputs],
            ),
        )
    whole = adapter.joined(inputs)
    rows = shape[0] if whole is not None else -1
    if whole is not None and all(adapter.shape(item)[0] == rows for item in inputs):
        # Equal parts of one buffer (x.chunk(n)): the tensor form, without concatenating.
        pending = runtime.implementation("reduce_scatter_tensor", whole)(
            output, whole, reduce_op, grp.handle, async_op
        )
    else:
        nbytes = sum(adapter.nbytes(item) for item in inputs)
        pending = runtime.implementation("reduce_scatter", output, nbytes)(
            output, inputs, reduce_op, grp.handle, async_op
        )
    return _done(pending, async_op)


def reduce_scatter_tensor(
    tensor: Tensor,
    op: ReduceOp | str = ReduceOp.SUM,
    group: Group | None = None,
    async_op: bool = False,
    *,
    out: Tensor | None = None,
    input_split_sizes: Sequence[int] | None = None,
) -> Any:
    """Reduce ``tensor`` across ranks and return this rank's part of dim 0 (MindSpore's
    functional style, ``comm_func.reduce_scatter_tensor``).

    Parameters
    ----------
    tensor
        The same shape on every rank; dim 0 splits into the group's size equal parts, or into
        ``input_split_sizes``.
    op, group
        As in :func:`reduce_scatter`.
    async_op
        Return ``(result, Work)``; ``result`` is valid after ``Work.wait()``.
    out
        Write the result here (shape ``(part, *tensor.shape[1:])``) instead of a new tensor.
    input_split_sizes
        Rows of dim 0 for each rank (uneven split).

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
    runtime = _runtime.current()
    runtime.check_tensor(tensor, "tensor")
    grp = runtime.resolve_group(group)
    shape = _check_dim0(runtime, tensor, "tensor")
    if input_split_sizes is None:
        sizes = even_split(shape[0], grp.size, "tensor")
    else:
        sizes = check_split_sizes(
            input_split_sizes, "input_split_sizes", grp.size, shape[0], "tensor"
        )
    reduce_op = _check_reduction(runtime, op, runtime.adapter.dtype(tensor), "tensor")
    async_op = check_bool(async_op, "async_op")
    me = grp.group_rank(runtime.rank)
    result = _check_out(runtime, out, (sizes[me], *shape[1:]), tensor, "tensor")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call(
                "reduce_scatter_tensor",
                runtime.adapter.dtype(tensor),
                shape,
                reduce_op.value,
                sizes=sizes,
            ),
        )
    if len(set(sizes)) == 1:
        pending = runtime.implementation("reduce_scatter_tensor", tensor)(
            result, tensor, reduce_op, grp.handle, async_op
        )
    else:
        pending = runtime.implementation("reduce_scatter", tensor)(
            result, runtime.adapter.split(tensor, sizes), reduce_op, grp.handle, async_op
        )
    work = _done(pending, async_op)
    return (result, work) if async_op else result


# -- the rest of the family -------------------------------------------------------------------


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
    runtime = _runtime.current()
    runtime.check_tensor(tensor, "tensor")
    grp = runtime.resolve_group(group)
    reduce_op = _check_reduction(runtime, op, runtime.adapter.dtype(tensor), "tensor")
    async_op = check_bool(async_op, "async_op")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call(
                "all_reduce",
                runtime.adapter.dtype(tensor),
                runtime.adapter.shape(tensor),
                reduce_op.value,
            ),
        )
    pending = runtime.implementation("all_reduce", tensor)(tensor, reduce_op, grp.handle, async_op)
    return _done(pending, async_op)


def all_gather(
    tensor_list: list[Tensor],
    tensor: Tensor,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Gather every rank's ``tensor`` into ``tensor_list`` on every rank (output-buffer style).

    ``tensor_list[i]`` receives rank i's tensor; sizes may differ in dim 0 (uneven).

    Examples
    --------
    With 2 ranks::

        >>> out = [torch.empty(2), torch.empty(2)]
        >>> compat.all_gather(out, torch.tensor([1., 2.]) + 10 * rank)
        >>> out
        [tensor([1., 2.]), tensor([11., 12.])]   # ranks 0 and 1
    """
    runtime = _runtime.current()
    runtime.check_tensor(tensor, "tensor")
    grp = runtime.resolve_group(group)
    outputs = check_list(tensor_list, "tensor_list", grp.size)
    for i, item in enumerate(outputs):
        _check_like(runtime, item, f"tensor_list[{i}]", tensor, "tensor", None)
        _check_trailing(runtime, item, f"tensor_list[{i}]", tensor, "tensor")
    me = grp.group_rank(runtime.rank)
    shape = runtime.adapter.shape(tensor)
    check_shape(
        runtime.adapter.shape(outputs[me]),
        shape,
        f"tensor_list[{me}]",
        "this rank's entry must have tensor's shape",
    )
    runtime.check_dtype(runtime.adapter.dtype(tensor), "tensor")
    async_op = check_bool(async_op, "async_op")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call(
                "all_gather",
                runtime.adapter.dtype(tensor),
                shape,
                sizes=[runtime.adapter.shape(item)[0] for item in outputs],
            ),
        )
    even = all(runtime.adapter.shape(item) == shape for item in outputs)
    collective = "all_gather" if even else "all_gather_uneven"
    pending = runtime.implementation(collective, tensor)(outputs, tensor, grp.handle, async_op)
    return _done(pending, async_op)


def all_gather_into_tensor(
    tensor: Tensor,
    group: Group | None = None,
    async_op: bool = False,
    *,
    out: Tensor | None = None,
    output_split_sizes: Sequence[int] | None = None,
) -> Any:
    """Gather every rank's ``tensor`` and return them concatenated on dim 0 (functional style).

    ``output_split_sizes[i]`` is rank i's dim 0 when the sizes differ (uneven).

    Examples
    --------
    With 2 ranks::

        >>> compat.all_gather_into_tensor(torch.tensor([1., 2.]) + 10 * rank)
        tensor([ 1.,  2., 11., 12.])   # ranks 0 and 1
    """
    runtime = _runtime.current()
    runtime.check_tensor(tensor, "tensor")
    grp = runtime.resolve_group(group)
    shape = _check_dim0(runtime, tensor, "tensor")
    me = grp.group_rank(runtime.rank)
    if output_split_sizes is None:
        sizes = [shape[0]] * grp.size
    else:
        if not isinstance(output_split_sizes, Sequence) or isinstance(output_split_sizes, str):
            raise TypeError(
                f"output_split_sizes: expected a list of {grp.size} ints; "
                f"got {describe(output_split_sizes)}"
            )
        total = sum(size for size in output_split_sizes if isinstance(size, int))
        sizes = check_split_sizes(
            output_split_sizes, "output_split_sizes", grp.size, total, "the result"
        )
        if sizes[me] != shape[0]:
            raise ValueError(
                f"output_split_sizes: expected entry {me} (this rank) to equal dim 0 of tensor "
                f"({shape[0]}); got {sizes}"
            )
    runtime.check_dtype(runtime.adapter.dtype(tensor), "tensor")
    async_op = check_bool(async_op, "async_op")
    result = _check_out(runtime, out, (sum(sizes), *shape[1:]), tensor, "tensor")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call("all_gather_into_tensor", runtime.adapter.dtype(tensor), shape, sizes=sizes),
        )
    if len(set(sizes)) == 1:
        pending = runtime.implementation("all_gather_into_tensor", tensor)(
            result, tensor, grp.handle, async_op
        )
    else:
        pending = runtime.implementation("all_gather_uneven", tensor)(
            runtime.adapter.split(result, sizes), tensor, grp.handle, async_op
        )
    work = _done(pending, async_op)
    return (result, work) if async_op else result


def broadcast(
    tensor: Tensor, src: int, group: Group | None = None, async_op: bool = False
) -> Work | None:
    """Copy ``tensor`` of global rank ``src`` into ``tensor`` on every rank of the group."""
    runtime = _runtime.current()
    runtime.check_tensor(tensor, "tensor")
    grp = runtime.resolve_group(group)
    root = runtime.check_peer(src, "src", grp)
    runtime.check_dtype(runtime.adapter.dtype(tensor), "tensor")
    async_op = check_bool(async_op, "async_op")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call(
                "broadcast", runtime.adapter.dtype(tensor), runtime.adapter.shape(tensor), root=root
            ),
        )
    pending = runtime.implementation("broadcast", tensor)(tensor, root, grp.handle, async_op)
    return _done(pending, async_op)


def scatter(
    tensor: Tensor,
    scatter_list: list[Tensor] | None = None,
    src: int = 0,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Rank ``src`` sends ``scatter_list[i]`` to group rank i, which receives it in ``tensor``.

    ``scatter_list`` is given on ``src`` only (one tensor per rank, each like ``tensor``).

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
    runtime = _runtime.current()
    runtime.check_tensor(tensor, "tensor")
    grp = runtime.resolve_group(group)
    root = runtime.check_peer(src, "src", grp)
    parts = _check_root_list(runtime, scatter_list, "scatter_list", root, "src", grp, tensor)
    runtime.check_dtype(runtime.adapter.dtype(tensor), "tensor")
    async_op = check_bool(async_op, "async_op")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call(
                "scatter", runtime.adapter.dtype(tensor), runtime.adapter.shape(tensor), root=root
            ),
        )
    pending = runtime.implementation("scatter", tensor)(tensor, parts, root, grp.handle, async_op)
    return _done(pending, async_op)


def scatter_tensor(
    tensor: Tensor,
    src: int = 0,
    group: Group | None = None,
    async_op: bool = False,
    *,
    out: Tensor | None = None,
) -> Any:
    """Split ``tensor`` of rank ``src`` on dim 0 into equal parts and return group rank i's
    part on rank i (functional style, ``comm_func.scatter_tensor``). Every rank passes a tensor
    of the same shape and dtype; only ``src``'s values are read.

    Examples
    --------
    With 2 ranks::

        >>> compat.scatter_tensor(torch.tensor([1., 2., 3., 4.]) * (rank + 1), src=0)
        tensor([1., 2.])   # rank 0
        tensor([3., 4.])   # rank 1
    """
    runtime = _runtime.current()
    runtime.check_tensor(tensor, "tensor")
    grp = runtime.resolve_group(group)
    root = runtime.check_peer(src, "src", grp)
    shape = _check_dim0(runtime, tensor, "tensor")
    sizes = even_split(shape[0], grp.size, "tensor")
    runtime.check_dtype(runtime.adapter.dtype(tensor), "tensor")
    async_op = check_bool(async_op, "async_op")
    result = _check_out(runtime, out, (sizes[0], *shape[1:]), tensor, "tensor")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call("scatter_tensor", runtime.adapter.dtype(tensor), shape, root=root),
        )
    parts = runtime.adapter.split(tensor, sizes) if runtime.rank == root else None
    pending = runtime.implementation("scatter", result)(result, parts, root, grp.handle, async_op)
    work = _done(pending, async_op)
    return (result, work) if async_op else result


def gather(
    tensor: Tensor,
    gather_list: list[Tensor] | None = None,
    dst: int = 0,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Rank ``dst`` receives group rank i's ``tensor`` in ``gather_list[i]``.

    ``gather_list`` is given on ``dst`` only (one tensor per rank, each like ``tensor``).
    """
    runtime = _runtime.current()
    runtime.check_tensor(tensor, "tensor")
    grp = runtime.resolve_group(group)
    root = runtime.check_peer(dst, "dst", grp)
    parts = _check_root_list(runtime, gather_list, "gather_list", root, "dst", grp, tensor)
    runtime.check_dtype(runtime.adapter.dtype(tensor), "tensor")
    async_op = check_bool(async_op, "async_op")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call("gather", runtime.adapter.dtype(tensor), runtime.adapter.shape(tensor), root=root),
        )
    pending = runtime.implementation("gather", tensor)(tensor, parts, root, grp.handle, async_op)
    return _done(pending, async_op)


def reduce(
    tensor: Tensor,
    dst: int,
    op: ReduceOp | str = ReduceOp.SUM,
    group: Group | None = None,
    async_op: bool = False,
) -> Work | None:
    """Reduce ``tensor`` across ranks into ``tensor`` on rank ``dst`` (other ranks' tensors are
    left as they were)."""
    runtime = _runtime.current()
    runtime.check_tensor(tensor, "tensor")
    grp = runtime.resolve_group(group)
    root = runtime.check_peer(dst, "dst", grp)
    reduce_op = _check_reduction(runtime, op, runtime.adapter.dtype(tensor), "tensor")
    async_op = check_bool(async_op, "async_op")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call(
                "reduce",
                runtime.adapter.dtype(tensor),
                runtime.adapter.shape(tensor),
                reduce_op.value,
                root=root,
            ),
        )
    pending = runtime.implementation("reduce", tensor)(
        tensor, root, reduce_op, grp.handle, async_op
    )
    return _done(pending, async_op)


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
    runtime = _runtime.current()
    runtime.check_tensor(output, "output")
    runtime.check_tensor(input, "input")
    grp = runtime.resolve_group(group)
    adapter = runtime.adapter
    check_dtype(adapter.dtype(input), adapter.dtype(output), "input", "the dtype of output")
    out_shape = _check_dim0(runtime, output, "output")
    in_shape = _check_dim0(runtime, input, "input")
    _check_trailing(runtime, input, "input", output, "output")
    if input_split_sizes is None:
        in_sizes = even_split(in_shape[0], grp.size, "input")
    else:
        in_sizes = check_split_sizes(
            input_split_sizes, "input_split_sizes", grp.size, in_shape[0], "input"
        )
    if output_split_sizes is None:
        out_sizes = even_split(out_shape[0], grp.size, "output")
    else:
        out_sizes = check_split_sizes(
            output_split_sizes, "output_split_sizes", grp.size, out_shape[0], "output"
        )
    runtime.check_dtype(adapter.dtype(input), "input")
    async_op = check_bool(async_op, "async_op")
    if runtime.check:
        preflight(
            runtime.adapter,
            grp,
            Call(
                "all_to_all_single",
                adapter.dtype(input),
                in_shape,
                send=in_sizes,
                receive=out_sizes,
            ),
        )
    pending = runtime.implementation("all_to_all_single", input)(
        output, input, out_sizes, in_sizes, grp.handle, async_op
    )
    return _done(pending, async_op)


def _check_point_to_point(
    runtime: Runtime, tensor: Tensor, peer: object, param: str, group: Group | None
) -> tuple[int, Group]:
    runtime.check_tensor(tensor, "tensor")
    grp = runtime.resolve_group(group)
    rank = runtime.check_peer(peer, param, grp)
    if rank == runtime.rank:
        raise ValueError(
            f"{param}: expected a rank other than this rank ({runtime.rank}); got {rank}"
        )
    runtime.check_dtype(runtime.adapter.dtype(tensor), "tensor")
    return rank, grp


def send(tensor: Tensor, dst: int, group: Group | None = None) -> None:
    """Send ``tensor`` to global rank ``dst`` (blocking)."""
    runtime = _runtime.current()
    rank, grp = _check_point_to_point(runtime, tensor, dst, "dst", group)
    runtime.implementation("send", tensor)(tensor, rank, grp.handle)


def recv(tensor: Tensor, src: int, group: Group | None = None) -> None:
    """Receive into ``tensor`` what global rank ``src`` sends (blocking)."""
    runtime = _runtime.current()
    rank, grp = _check_point_to_point(runtime, tensor, src, "src", group)
    runtime.implementation("recv", tensor)(tensor, rank, grp.handle)


def barrier(group: Group | None = None) -> None:
    """Block until every rank of the group has reached the barrier."""
    runtime = _runtime.current()
    grp = runtime.resolve_group(group)
    if runtime.check:
        preflight(runtime.adapter, grp, Call("barrier"))
    runtime.adapter.barrier(grp.handle, False)
