"""compat.coalescing_manager (torch's ``_coalescing_manager``) on real ranks: blocks of
all_reduce (several tensors, several dtypes, views in sentinel-filled bases), of all_gather_into
and of reduce_scatter_into, synchronous and with ``async_ops=True``; a block of mixed kinds or
ops refused before anything is sent; a block on a subgroup beside a call on the world."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

import compat
from tests.ranks.bad_input_cases import expect_error, f32
from tests.ranks.cases import (
    follow_up,
    reduce_np,
    register,
    subgroup,
    values,
    wait_if,
    world,
)
from tests.ranks.cases import rank as my_rank
from tests.ranks.layout_cases import Placed, sentinel_out

#: (shape, dtype, layout) of each tensor an all_reduce block reduces, in order.
REDUCED = [
    ((3,), "float32", "dense"),
    ((2, 2), "int32", "column"),
    ((4, 1), "float32", "strided"),
    ((5,), "float16", "dense"),
    ((2, 3), "int32", "dense"),
]


def _end(manager: Any, async_ops: bool) -> None:
    """After the block: with async_ops, one Work in ``works``, waited for by ``wait()``."""
    if async_ops:
        assert len(manager.works) == 1, manager.works
        manager.wait()
        assert manager.works[0].is_completed()
    else:
        assert manager.works == [], manager.works


def case_all_reduce_block(kit: Any, op: str, async_ops: bool) -> None:
    """Each tensor is reduced alone; no result before the block's end (the calls are recorded
    and reduced together there); an async_op call's Work completes with the block."""
    seed = f"coalescing-all_reduce-{op}"
    placed = [
        Placed(kit, values(f"{seed}-{i}", my_rank(), shape, op), dtype, layout)
        for i, (shape, dtype, layout) in enumerate(REDUCED)
    ]
    with compat.coalescing_manager(async_ops=async_ops) as manager:
        for item in placed[:-1]:
            assert compat.all_reduce(item.view, op) is None
        last = compat.all_reduce(placed[-1].view, op, async_op=True)
        placed[0].check("all_reduce recorded, not issued before the block's end")
    _end(manager, async_ops)
    wait_if(last, True)
    for i, (item, (shape, _, _)) in enumerate(zip(placed, REDUCED, strict=True)):
        inputs = [values(f"{seed}-{i}", r, shape, op) for r in range(world())]
        item.result(reduce_np(inputs, op))
        item.check(f"all_reduce [{i}] of the block")
    follow_up(kit)


def case_all_gather_block(kit: Any, async_ops: bool) -> None:
    """all_gather_into into outputs inside sentinel-filled bases (one a strided view), and
    all_gather_into_tensor given ``out``, of two dtypes (torch's Gloo gathers such a block into
    wrong values): every output right after the block."""
    seed, count = "coalescing-all_gather", world()
    shapes = [(2, 3), (1, 4), (3,)]
    dtypes = ["float32", "int32", "float32"]
    inputs = [
        kit.tensor(values(f"{seed}-{i}", my_rank(), shape), dtype)
        for i, (shape, dtype) in enumerate(zip(shapes, dtypes, strict=True))
    ]
    outs = [
        sentinel_out(kit, (s[0] * count, *s[1:]), dtype, layout)
        for s, dtype, layout in zip(shapes, dtypes, ["dense", "strided", "interior"], strict=True)
    ]
    with compat.coalescing_manager(async_ops=async_ops) as manager:
        assert compat.all_gather_into(outs[0].view, inputs[0]) is None
        work = compat.all_gather_into(outs[1].view, inputs[1], async_op=True)
        compat.all_gather_into_tensor(inputs[2], out=outs[2].view)
        outs[0].check("all_gather_into recorded, not issued before the block's end")
    _end(manager, async_ops)
    wait_if(work, True)
    for i, (out, shape) in enumerate(zip(outs, shapes, strict=True)):
        out.result(np.concatenate([values(f"{seed}-{i}", r, shape) for r in range(count)]))
        out.check(f"all_gather_into [{i}] of the block")
    follow_up(kit)


def case_reduce_scatter_block(kit: Any, op: str, async_ops: bool) -> None:
    """reduce_scatter_into, and reduce_scatter_tensor given ``out``, into outputs inside
    sentinel-filled bases; the inputs unchanged."""
    seed, count = f"coalescing-reduce_scatter-{op}", world()
    parts = [(2, 3), (1, 2), (4,)]
    shapes = [(p[0] * count, *p[1:]) for p in parts]
    inputs = [
        kit.tensor(values(f"{seed}-{i}", my_rank(), s, op), dtype)
        for i, (s, dtype) in enumerate(zip(shapes, ["float32", "int32", "float32"], strict=True))
    ]
    outs = [
        sentinel_out(kit, p, dtype, layout)
        for p, dtype, layout in zip(
            parts, ["float32", "int32", "float32"], ["dense", "column", "offset0"], strict=True
        )
    ]
    with compat.coalescing_manager(async_ops=async_ops) as manager:
        assert compat.reduce_scatter_into(outs[0].view, inputs[0], op) is None
        work = compat.reduce_scatter_into(outs[1].view, inputs[1], op, async_op=True)
        compat.reduce_scatter_tensor(inputs[2], op, out=outs[2].view)
    _end(manager, async_ops)
    wait_if(work, True)
    me = my_rank()
    for i, (out, shape, part) in enumerate(zip(outs, shapes, parts, strict=True)):
        whole = reduce_np([values(f"{seed}-{i}", r, shape, op) for r in range(count)], op)
        out.result(whole[me * part[0] : (me + 1) * part[0]])
        out.check(f"reduce_scatter_into [{i}] of the block")
        np.testing.assert_array_equal(kit.numpy(inputs[i]), values(f"{seed}-{i}", me, shape, op))
    follow_up(kit)


for _async in (False, True):
    _suffix = "-async" if _async else ""
    for _op in ("sum", "max"):
        register(
            f"coalescing[all_reduce-{_op}{_suffix}]",
            partial(case_all_reduce_block, op=_op, async_ops=_async),
        )
    register(
        f"coalescing[all_gather_into{_suffix}]", partial(case_all_gather_block, async_ops=_async)
    )
    register(
        f"coalescing[reduce_scatter_into{_suffix}]",
        partial(case_reduce_scatter_block, op="sum", async_ops=_async),
    )


def case_refused(kit: Any) -> None:
    """Another kind, or another op, in a block: ValueError at that call, before anything is
    sent; an error leaving the block drops its calls (nothing reduced) and the next collective
    works. A second block on the group, or a device that names none, are refused too."""
    reduced, out = f32(kit, (3,), my_rank() + 1.0), f32(kit, (3 * world(),), -7.0)
    try:
        with compat.coalescing_manager() as manager:
            compat.all_reduce(reduced)
            expect_error(
                kit, ValueError, lambda: compat.all_gather_into(out, reduced),
                "all_gather_into_tensor", ["collects all_reduce", "got all_gather_into_tensor"],
                [out, reduced],
            )  # fmt: skip
            expect_error(
                kit, ValueError, lambda: compat.all_reduce(reduced, "max"), "op",
                ["uses sum", "got max"], [reduced],
            )  # fmt: skip
            nested = compat.coalescing_manager()
            expect_error(kit, ValueError, nested.__enter__, "group", ["open on"], [reduced])
            compat.all_gather_into(out, reduced)  # raises: leaves the block
    except ValueError as error:
        assert str(error).startswith("all_gather_into_tensor:"), error
    else:
        raise AssertionError("a block of mixed kinds was not refused")
    np.testing.assert_array_equal(kit.numpy(reduced), np.full(3, my_rank() + 1.0))
    np.testing.assert_array_equal(kit.numpy(out), np.full(3 * world(), -7.0))
    assert manager.works == []
    bad_device = compat.coalescing_manager(device=3.5)
    expect_error(kit, TypeError, bad_device.__enter__, "device", ["got float 3.5"], [reduced])
    follow_up(kit)


def case_subgroup(kit: Any) -> None:
    """A block on the subgroup {0, last}: its all_reduces run at the block's end; an all_reduce
    on the world and an all_reduce_coalesced on the group, inside the block, run at once (as
    under torch's manager); the ranks outside the group take part in the world's call only."""
    group = subgroup()
    world_tensor = f32(kit, (2,), my_rank() + 1.0)
    if my_rank() not in group.ranks:
        compat.all_reduce(world_tensor)
    else:
        recorded = [f32(kit, (3,), my_rank() + 1.0), kit.tensor(np.full(2, my_rank() + 2), "int32")]
        at_once = f32(kit, (4,), my_rank() + 3.0)
        with compat.coalescing_manager(group=group, async_ops=True) as manager:
            for tensor in recorded:
                compat.all_reduce(tensor, group=group)
            compat.all_reduce(world_tensor)
            compat.all_reduce_coalesced([at_once], group=group)
            np.testing.assert_array_equal(kit.numpy(at_once), sum(r + 3.0 for r in group.ranks))
            np.testing.assert_array_equal(kit.numpy(recorded[0]), my_rank() + 1.0)
        manager.wait()
        np.testing.assert_array_equal(kit.numpy(recorded[0]), sum(r + 1.0 for r in group.ranks))
        np.testing.assert_array_equal(kit.numpy(recorded[1]), sum(r + 2 for r in group.ranks))
    np.testing.assert_array_equal(kit.numpy(world_tensor), sum(range(1, world() + 1)))
    follow_up(kit)


register("coalescing[refused]", case_refused)
register("coalescing[subgroup]", case_subgroup)
