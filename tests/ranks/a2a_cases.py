"""all_to_all (list form), dim= on the functional forms, group_src/group_dst on the rooted
collectives, and monitored_barrier's normal path, on real ranks; and their bad input.

Every name starts with "a2a" (or "bad_input[a2a"), so ``-k a2a`` selects them.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from functools import partial
from typing import Any

import numpy as np

import compat
from compat import algorithms
from compat.core import state
from tests.ranks.bad_input_cases import bad_case, expect_error, f32
from tests.ranks.cases import (
    DTYPES,
    assert_close,
    follow_up,
    members,
    rank,
    reduce_np,
    register,
    sentinel,
    subgroup,
    values,
    wait_if,
    world,
)
from tests.ranks.layout_cases import Placed, sentinel_out


def _group(use_group: bool) -> compat.Group | None:
    return subgroup() if use_group else None


def _result(returned: Any, async_op: bool) -> Any:
    """A functional form's tensor, after waiting if async."""
    if async_op:
        tensor, work = returned
        wait_if(work, True)
        return tensor
    return returned


# -- all_to_all -----------------------------------------------------------------------------------


def _rows(sender: int, receiver: int, pattern: str) -> int:
    """Rows group rank ``sender`` sends group rank ``receiver``."""
    if pattern == "even":
        return 2
    if pattern == "by_sender":  # each rank's inputs of one shape, its outputs of several
        return sender + 1
    return (sender + 2 * receiver) % 3  # uneven, with empty pairs (0 rows)


def check_all_to_all(
    kit: Any, dtype: str, async_op: bool, use_group: bool, pattern: str = "even"
) -> None:
    group = _group(use_group)
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me = len(ranks), ranks.index(rank())
    seed = f"a2a-{dtype}-{pattern}"

    def part(sender: int, receiver: int) -> np.ndarray:
        return values(seed, sender * 10 + receiver, (_rows(sender, receiver, pattern), 3))

    inputs = [kit.tensor(part(me, i), dtype) for i in range(n)]
    outputs = [sentinel(kit, (_rows(j, me, pattern), 3), dtype) for j in range(n)]
    before = [kit.numpy(item) for item in inputs]
    wait_if(compat.all_to_all(outputs, inputs, group=group, async_op=async_op), async_op)
    for j, out in enumerate(outputs):
        assert_close(kit.numpy(out), part(j, me), dtype, f"part from group rank {j}")
    for item, snapshot in zip(inputs, before, strict=True):
        assert_close(kit.numpy(item), snapshot, dtype, "the inputs must be left unchanged")


for _dtype in DTYPES:
    register(f"a2a_all_to_all[{_dtype}]", partial(check_all_to_all, dtype=_dtype, async_op=False,
                                                  use_group=False))  # fmt: skip
for _pattern in ("even", "by_sender", "uneven"):
    for _async in (False, True):
        for _use_group in (False, True):
            _name = f"a2a_all_to_all[{_pattern}{'-group' if _use_group else ''}"
            register(
                f"{_name}{'-async' if _async else ''}]",
                partial(
                    check_all_to_all, dtype="float32", async_op=_async, use_group=_use_group,
                    pattern=_pattern,
                ),
            )  # fmt: skip


def case_all_to_all_dispatch(kit: Any) -> None:
    """compat.all_to_all runs lists whose tensors all have one shape through the capability
    table's all_to_all entry (Gloo's alltoall, which refuses any other), and every other call
    through all_to_all_uneven: also inputs of one shape whose outputs differ (each rank sending
    its own row count), where each rank's inputs alone look even."""
    from compat.core import state

    runtime = state.current()
    like = kit.tensor([0.0], "float32")
    ran: list[str] = []

    def recording(key: str) -> Any:
        table_choice = runtime.implementation(key, like)

        def record(*args: Any) -> Any:
            ran.append(key)
            return table_choice(*args)

        return record

    keys = ("all_to_all", "all_to_all_uneven")
    for key in keys:
        runtime.force(key, "float32", ("recording", recording(key)))
    try:
        for pattern, expected in (
            ("even", "all_to_all"), ("by_sender", "all_to_all_uneven"),
            ("uneven", "all_to_all_uneven"),
        ):  # fmt: skip
            ran.clear()
            check_all_to_all(kit, "float32", False, False, pattern)
            assert ran == [expected], f"{pattern}: ran {ran}, expected {expected}"
    finally:
        for key in keys:
            runtime.force(key, "float32", None)


register("a2a_all_to_all_dispatch", case_all_to_all_dispatch, min_world=2)


def case_all_to_all_views(kit: Any, layout: str, async_op: bool) -> None:
    """Inputs and outputs are views inside sentinel-filled bases (uneven sizes)."""
    n, me = world(), rank()
    seed = f"a2a-views-{layout}"

    def part(sender: int, receiver: int) -> np.ndarray:
        return values(seed, sender * 10 + receiver, (sender + receiver + 1, 4))

    inputs = [Placed(kit, part(me, i), "float32", layout) for i in range(n)]
    outputs = [sentinel_out(kit, (j + me + 1, 4), "float32", layout) for j in range(n)]
    work = compat.all_to_all(
        [out.view for out in outputs], [item.view for item in inputs], async_op=async_op
    )
    wait_if(work, async_op)
    for j, out in enumerate(outputs):
        out.result(part(j, me))
        out.check(f"all_to_all output {j} ({layout})")
    for item in inputs:
        item.check(f"all_to_all input ({layout})")


for _layout in ("offset0", "interior", "strided", "column"):
    register(f"a2a_all_to_all_views[{_layout}]", partial(case_all_to_all_views, layout=_layout,
                                                         async_op=False))  # fmt: skip
register(
    "a2a_all_to_all_views[strided-async]",
    partial(case_all_to_all_views, layout="strided", async_op=True),
)


def case_all_to_all_chunks(kit: Any) -> None:
    """The inputs and outputs tile one buffer each (``x.chunk(n)``): no copies on Gloo."""
    n, me = world(), rank()
    seed = "a2a-chunks"
    whole = values(seed, me, (2 * n, 3))
    x = kit.tensor(whole, "int64")
    buf = sentinel(kit, (2 * n, 3), "int64")
    inputs = [x[2 * i : 2 * i + 2] for i in range(n)]
    outputs = [buf[2 * j : 2 * j + 2] for j in range(n)]
    compat.all_to_all(outputs, inputs)
    expected = np.concatenate([values(seed, j, (2 * n, 3))[2 * me : 2 * me + 2] for j in range(n)])
    assert_close(kit.numpy(buf), expected, "int64")
    assert_close(kit.numpy(x), whole, "int64", "the input must be left unchanged")


def case_all_to_all_empty(kit: Any) -> None:
    """Tensors with a 0 among the trailing dims move nothing; every rank knows it."""
    n = world()
    inputs = [kit.tensor(np.zeros((2, 0)), "float32") for _ in range(n)]
    outputs = [kit.tensor(np.zeros((2, 0)), "float32") for _ in range(n)]
    wait_if(compat.all_to_all(outputs, inputs, async_op=True), True)
    follow_up(kit)


register("a2a_all_to_all_chunks", case_all_to_all_chunks)
register("a2a_all_to_all_empty", case_all_to_all_empty)


# -- dim= on reduce_scatter_tensor and all_gather_into_tensor --------------------------------------


def _with(axis: int, size: int) -> tuple[int, ...]:
    """A 3-d shape (3, 2, 3) with dim ``axis`` of ``size``."""
    shape = [3, 2, 3]
    shape[axis] = size
    return tuple(shape)


def case_reduce_scatter_dim(
    kit: Any, dim: int, async_op: bool, use_group: bool, uneven: bool = False, view: bool = False
) -> None:
    group = _group(use_group)
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me = len(ranks), ranks.index(rank())
    sizes = [i % 2 + 1 for i in range(n)] if uneven else [2] * n
    axis = dim % 3
    shape = _with(axis, sum(sizes))
    seed = f"a2a-rs-dim{dim}"
    mine = values(seed, rank(), shape)
    if view:
        x = Placed(kit, mine, "float32", "interior")
        tensor = x.view
    else:
        tensor = kit.tensor(mine, "float32")
    out_shape = _with(axis, sizes[me])
    out = sentinel_out(kit, out_shape, "float32", "strided") if view else None
    returned = compat.reduce_scatter_tensor(
        tensor, "sum", group, async_op, out=None if out is None else out.view,
        input_split_sizes=sizes if uneven else None, dim=dim,
    )  # fmt: skip
    result = _result(returned, async_op)
    full = reduce_np([values(seed, r, shape) for r in ranks], "sum")
    start = sum(sizes[:me])
    expected = np.take(full, range(start, start + sizes[me]), axis=axis)
    assert tuple(result.shape) == out_shape, (tuple(result.shape), out_shape)
    assert_close(kit.numpy(result), expected, "float32")
    if view:
        assert out is not None
        assert result is out.view, "with out=, the result is out itself"
        out.result(expected)
        out.check("reduce_scatter_tensor out= view")
        x.check("reduce_scatter_tensor input view")
    else:
        assert_close(kit.numpy(tensor), mine, "float32", "the input must be left unchanged")


def case_all_gather_dim(
    kit: Any, dim: int, async_op: bool, use_group: bool, uneven: bool = False, view: bool = False
) -> None:
    group = _group(use_group)
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me = len(ranks), ranks.index(rank())
    sizes = [i % 2 + 1 for i in range(n)] if uneven else [2] * n
    axis = dim % 3

    def shape_of(i: int) -> tuple[int, ...]:
        return _with(axis, sizes[i])

    seed = f"a2a-ag-dim{dim}"
    mine = values(seed, rank(), shape_of(me))
    if view:
        x = Placed(kit, mine, "float32", "strided")
        tensor = x.view
    else:
        tensor = kit.tensor(mine, "float32")
    out_shape = _with(axis, sum(sizes))
    out = sentinel_out(kit, out_shape, "float32", "offset0") if view else None
    returned = compat.all_gather_into_tensor(
        tensor, group, async_op, out=None if out is None else out.view,
        output_split_sizes=sizes if uneven else None, dim=dim,
    )  # fmt: skip
    result = _result(returned, async_op)
    expected = np.concatenate([values(seed, r, shape_of(i)) for i, r in enumerate(ranks)], axis)
    assert tuple(result.shape) == out_shape, (tuple(result.shape), out_shape)
    assert_close(kit.numpy(result), expected, "float32")
    if view:
        assert out is not None
        assert result is out.view, "with out=, the result is out itself"
        out.result(expected)
        out.check("all_gather_into_tensor out= view")
        x.check("all_gather_into_tensor input view")


def case_dim_last_2d(kit: Any) -> None:
    """dim=-1 of a 2-d int64 tensor, both forms; dim=-2 is dim 0 (the zero-copy path)."""
    n, me = world(), rank()
    mine = values("a2a-2d", me, (2, 2 * n))
    result = compat.reduce_scatter_tensor(kit.tensor(mine, "int64"), dim=-1)
    full = reduce_np([values("a2a-2d", r, (2, 2 * n)) for r in range(n)], "sum")
    assert_close(kit.numpy(result), full[:, 2 * me : 2 * me + 2], "int64")
    gathered = compat.all_gather_into_tensor(kit.tensor(mine, "int64"), dim=-1)
    expected = np.concatenate([values("a2a-2d", r, (2, 2 * n)) for r in range(n)], axis=1)
    assert_close(kit.numpy(gathered), expected, "int64")
    gathered = compat.all_gather_into_tensor(kit.tensor(mine, "int64"), dim=-2)
    expected = np.concatenate([values("a2a-2d", r, (2, 2 * n)) for r in range(n)], axis=0)
    assert_close(kit.numpy(gathered), expected, "int64")


for _dim in (1, -2, 2):
    for _async in (False, True):
        _suffix = "-async" if _async else ""
        register(
            f"a2a_reduce_scatter_dim[{_dim}{_suffix}]",
            partial(case_reduce_scatter_dim, dim=_dim, async_op=_async, use_group=False),
        )
        register(
            f"a2a_all_gather_dim[{_dim}{_suffix}]",
            partial(case_all_gather_dim, dim=_dim, async_op=_async, use_group=False),
        )
for _fn, _what in (
    (case_reduce_scatter_dim, "reduce_scatter"),
    (case_all_gather_dim, "all_gather"),
):
    register(
        f"a2a_{_what}_dim[1-uneven]",
        partial(_fn, dim=1, async_op=False, use_group=False, uneven=True),
    )
    register(
        f"a2a_{_what}_dim[1-uneven-group-async]",
        partial(_fn, dim=1, async_op=True, use_group=True, uneven=True),
    )
    register(
        f"a2a_{_what}_dim[1-views]", partial(_fn, dim=1, async_op=False, use_group=False, view=True)
    )
    register(
        f"a2a_{_what}_dim[-2-views-uneven-async]",
        partial(_fn, dim=-2, async_op=True, use_group=False, view=True, uneven=True),
    )
register("a2a_dim_last_2d", case_dim_last_2d)  # fmt: skip


# -- group_src / group_dst ------------------------------------------------------------------------


def case_group_roots(kit: Any, use_group: bool, async_op: bool) -> None:
    """Every rooted collective with its root given as a rank of the group."""
    group = _group(use_group)
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me = len(ranks), ranks.index(rank())
    seed = "a2a-group-roots"
    for index, root in enumerate(ranks):
        what = f"group rank {index} (global {root})"
        tensor = kit.tensor(values(seed, rank(), (4,)), "int32")
        wait_if(compat.broadcast(tensor, group=group, async_op=async_op, group_src=index),
                async_op)  # fmt: skip
        assert_close(kit.numpy(tensor), values(seed, root, (4,)), "int32", f"broadcast {what}")

        out = sentinel(kit, (3,), "int32")
        parts = (
            [kit.tensor(values(seed, root * 10 + i, (3,)), "int32") for i in range(n)]
            if rank() == root
            else None
        )
        wait_if(compat.scatter(out, parts, group=group, async_op=async_op, group_src=index),
                async_op)  # fmt: skip
        assert_close(kit.numpy(out), values(seed, root * 10 + me, (3,)), "int32", f"scatter {what}")

        whole = kit.tensor(values(seed, rank(), (2 * n, 2)), "int32")
        result = _result(
            compat.scatter_tensor(whole, group=group, async_op=async_op, group_src=index),
            async_op,
        )
        expected = values(seed, root, (2 * n, 2))[2 * me : 2 * me + 2]
        assert_close(kit.numpy(result), expected, "int32", f"scatter_tensor {what}")

        outs = [sentinel(kit, (3,), "int32") for _ in ranks] if rank() == root else None
        tensor = kit.tensor(values(seed, rank(), (3,)), "int32")
        wait_if(compat.gather(tensor, outs, group=group, async_op=async_op, group_dst=index),
                async_op)  # fmt: skip
        if outs is not None:
            for out, r in zip(outs, ranks, strict=True):
                assert_close(kit.numpy(out), values(seed, r, (3,)), "int32", f"gather {what}")

        mine = values(seed, rank(), (2, 2))
        tensor = kit.tensor(mine, "int32")
        wait_if(compat.reduce(tensor, group=group, async_op=async_op, group_dst=index), async_op)
        if rank() == root:
            expected = reduce_np([values(seed, r, (2, 2)) for r in ranks], "sum")
            assert_close(kit.numpy(tensor), expected, "int32", f"reduce {what}")
        else:
            assert_close(kit.numpy(tensor), mine, "int32", f"reduce {what}: non-root unchanged")


def case_default_root(kit: Any) -> None:
    """scatter/gather's default src=0/dst=0 still works without group_src/group_dst, and an
    explicit src equal to the default is taken as given."""
    n, me = world(), rank()
    out = sentinel(kit, (2,), "float32")
    parts = [kit.tensor(np.full(2, i), "float32") for i in range(n)] if me == 0 else None
    compat.scatter(out, parts)
    assert_close(kit.numpy(out), np.full(2, me), "float32")
    outs = [sentinel(kit, (2,), "float32") for _ in range(n)] if me == 0 else None
    compat.gather(kit.tensor(np.full(2, me), "float32"), outs, dst=0)
    if outs is not None:
        for r, item in enumerate(outs):
            assert_close(kit.numpy(item), np.full(2, r), "float32")


register("a2a_group_roots[world]", partial(case_group_roots, use_group=False, async_op=False))
register("a2a_group_roots[world-async]", partial(case_group_roots, use_group=False, async_op=True))
register("a2a_group_roots[group]", partial(case_group_roots, use_group=True, async_op=False))
register("a2a_group_roots[group-async]", partial(case_group_roots, use_group=True, async_op=True))
register("a2a_default_root", case_default_root)


# -- monitored_barrier ----------------------------------------------------------------------------


def case_monitored_barrier(kit: Any) -> None:
    """monitored_barrier's normal path on the world and a group; where the capability table
    chooses reported_barrier_in_memory (Gloo's own transport), without starting a thread."""
    started: list[str] = []
    start = threading.Thread.start

    def counted_start(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    threading.Thread.start = counted_start  # type: ignore[method-assign]
    try:
        assert compat.monitored_barrier(timeout=20) is None
        assert compat.monitored_barrier(timeout=timedelta(seconds=20), wait_all_ranks=True) is None
        assert compat.monitored_barrier() is None
        group = subgroup()
        if rank() in group.ranks:
            assert compat.monitored_barrier(group, timeout=20) is None
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]
    current = state.current()
    chosen = current.implementation("monitored_barrier", None, 0, current.world.handle, "uint8")
    if getattr(chosen, "func", None) is algorithms.reported_barrier_in_memory:
        assert not started, f"monitored_barrier started threads: {started}"
    follow_up(kit)


register("a2a_monitored_barrier", case_monitored_barrier)


# -- bad input: each raises on the calling rank before any communication ---------------------


def _lists(kit: Any, rows: int = 2) -> tuple[list[Any], list[Any]]:
    outs = [sentinel(kit, (rows, 3), "float32") for _ in range(world())]
    ins = [f32(kit, (rows, 3)) for _ in range(world())]
    return outs, ins


@bad_case("a2a_all_to_all_length")
def _(kit: Any) -> None:
    outs, ins = _lists(kit)
    expect_error(
        kit, ValueError, lambda: compat.all_to_all(outs, [*ins, ins[0]]), "input_tensor_list",
        [f"{world()} tensors", f"got {world() + 1}"], outs,
    )  # fmt: skip


@bad_case("a2a_all_to_all_not_a_list")
def _(kit: Any) -> None:
    outs, ins = _lists(kit)
    expect_error(
        kit, TypeError, lambda: compat.all_to_all(ins[0], ins), "output_tensor_list",
        ["expected a list", "got a"], [*outs, *ins],
    )  # fmt: skip


@bad_case("a2a_all_to_all_dtype")
def _(kit: Any) -> None:
    outs, ins = _lists(kit)
    outs[-1] = kit.tensor(np.zeros((2, 3)), "int32")
    expect_error(
        kit, TypeError, lambda: compat.all_to_all(outs, ins),
        f"output_tensor_list[{world() - 1}]", ["expected dtype float32", "got int32"], outs,
    )  # fmt: skip


@bad_case("a2a_all_to_all_trailing")
def _(kit: Any) -> None:
    outs, ins = _lists(kit)
    outs[-1] = sentinel(kit, (2, 4), "float32")
    expect_error(
        kit, ValueError, lambda: compat.all_to_all(outs, ins),
        f"output_tensor_list[{world() - 1}]", ["expected shape (*, 3)", "got (2, 4)"], outs,
    )  # fmt: skip


@bad_case("a2a_all_to_all_own_part")
def _(kit: Any) -> None:
    outs, ins = _lists(kit)
    outs[rank()] = sentinel(kit, (3, 3), "float32")
    expect_error(
        kit, ValueError, lambda: compat.all_to_all(outs, ins), f"output_tensor_list[{rank()}]",
        ["expected shape (2, 3)", "got (3, 3)"], outs,
    )  # fmt: skip


@bad_case("a2a_dim_out_of_range")
def _(kit: Any) -> None:
    tensor = f32(kit, (2 * world(), 2))
    for call in (
        lambda: compat.reduce_scatter_tensor(tensor, dim=2),
        lambda: compat.all_gather_into_tensor(tensor, dim=-3),
    ):
        expect_error(kit, ValueError, call, "dim", ["-2 to 1", "shape (", "got "], [tensor])


@bad_case("a2a_dim_type")
def _(kit: Any) -> None:
    tensor = f32(kit, (2 * world(), 2))
    expect_error(
        kit, TypeError, lambda: compat.reduce_scatter_tensor(tensor, dim=1.0), "dim",
        ["expected an int", "got float"], [tensor],
    )  # fmt: skip
    expect_error(
        kit, TypeError, lambda: compat.all_gather_into_tensor(tensor, dim=True), "dim",
        ["expected an int", "got bool"], [tensor],
    )  # fmt: skip


@bad_case("a2a_dim_not_divisible", min_world=2)
def _(kit: Any) -> None:
    tensor = f32(kit, (2, 2 * world() + 1))
    expect_error(
        kit, ValueError, lambda: compat.reduce_scatter_tensor(tensor, dim=1), "tensor",
        [f"dim 1 divisible by the group size {world()}", f"got {2 * world() + 1}"], [tensor],
    )  # fmt: skip


@bad_case("a2a_dim_split_sizes")
def _(kit: Any) -> None:
    tensor = f32(kit, (2, 2 * world()))
    sizes = [1] * world()
    expect_error(
        kit, ValueError,
        lambda: compat.reduce_scatter_tensor(tensor, input_split_sizes=sizes, dim=-1),
        "input_split_sizes", ["dim 1 of tensor", f"sum {world()}"], [tensor],
    )  # fmt: skip
    sizes = [3] * world()
    expect_error(
        kit, ValueError,
        lambda: compat.all_gather_into_tensor(tensor, output_split_sizes=sizes, dim=1),
        "output_split_sizes", ["dim 1 of tensor", f"({2 * world()})"], [tensor],
    )  # fmt: skip


@bad_case("a2a_dim_out_shape")
def _(kit: Any) -> None:
    tensor = f32(kit, (2, 2 * world()))
    out = sentinel(kit, (3, 2 * world() * world()), "float32")
    expect_error(
        kit, ValueError, lambda: compat.all_gather_into_tensor(tensor, out=out, dim=1), "out",
        [f"expected shape (2, {2 * world() * world()})"], [tensor, out],
    )  # fmt: skip


@bad_case("a2a_group_src_and_src")
def _(kit: Any) -> None:
    tensor = f32(kit, (2,))
    expect_error(
        kit, ValueError, lambda: compat.broadcast(tensor, 0, group_src=0), "src",
        ["not both", "group_src=0"], [tensor],
    )  # fmt: skip
    expect_error(
        kit, ValueError, lambda: compat.scatter(tensor, None, 0, group_src=0), "src",
        ["not both"], [tensor],
    )  # fmt: skip
    expect_error(
        kit, ValueError, lambda: compat.gather(tensor, dst=0, group_dst=0), "dst",
        ["not both"], [tensor],
    )  # fmt: skip


@bad_case("a2a_group_src_neither")
def _(kit: Any) -> None:
    tensor = f32(kit, (2,))
    expect_error(
        kit, ValueError, lambda: compat.broadcast(tensor), "src",
        ["expected a global rank, or group_src", "got neither"], [tensor],
    )  # fmt: skip
    expect_error(
        kit, ValueError, lambda: compat.reduce(tensor), "dst",
        ["or group_dst", "got neither"], [tensor],
    )  # fmt: skip


@bad_case("a2a_group_src_range")
def _(kit: Any) -> None:
    tensor = f32(kit, (2,))
    group = subgroup()
    if rank() in group.ranks:
        expect_error(
            kit, ValueError, lambda: compat.reduce(tensor, group=group, group_dst=group.size()),
            "group_dst", [f"0 to {group.size() - 1}", f"got {group.size()}"], [tensor],
        )  # fmt: skip
    whole = f32(kit, (2 * world(),))
    expect_error(
        kit, TypeError, lambda: compat.scatter_tensor(whole, group_src="0"), "group_src",
        ["expected an int", "got str"], [whole],
    )  # fmt: skip


@bad_case("a2a_monitored_barrier_args")
def _(kit: Any) -> None:
    expect_error(
        kit, ValueError, lambda: compat.monitored_barrier(timeout=-1), "timeout",
        ["positive", "got -1"], [],
    )  # fmt: skip
    expect_error(
        kit, TypeError, lambda: compat.monitored_barrier(timeout="5"), "timeout",
        ["timedelta", "got str"], [],
    )  # fmt: skip
    expect_error(
        kit, TypeError, lambda: compat.monitored_barrier(wait_all_ranks=1), "wait_all_ranks",
        ["expected a bool", "got int"], [],
    )  # fmt: skip
