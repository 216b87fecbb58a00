"""Cases for what `compat port` writes in place of torch's less common API: all_reduce_coalesced,
``compat.WORLD`` for ``_get_default_group()``, ``compat.get_rank(group) < 0`` for
``_rank_not_in_group(group)``, and a group's torch-style ``size()`` and ``rank()``."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

import compat
from tests.ranks.bad_input_cases import bad_case, expect_error, f32
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
from tests.ranks.layout_cases import Placed


def case_all_reduce_coalesced(kit: Any, op: str, async_op: bool) -> None:
    """Three tensors of one dtype, two of them views in sentinel-filled bases (a column block and
    every other row): each is reduced alone; the bases' other elements stay the sentinel."""
    seed, dtype = f"coalesced-{op}", "float32"
    shapes = [(3,), (2, 2), (4, 1)]
    layouts = ["dense", "column", "strided"]
    placed = [
        Placed(kit, values(f"{seed}-{i}", my_rank(), shape, op), dtype, layout)
        for i, (shape, layout) in enumerate(zip(shapes, layouts, strict=True))
    ]
    work = compat.all_reduce_coalesced([p.view for p in placed], op, async_op=async_op)
    wait_if(work, async_op)
    for i, (item, shape) in enumerate(zip(placed, shapes, strict=True)):
        inputs = [values(f"{seed}-{i}", r, shape, op) for r in range(world())]
        item.result(reduce_np(inputs, op))
        item.check(f"all_reduce_coalesced tensors[{i}]")
    follow_up(kit)


for _op in ("sum", "max"):
    for _async in (False, True):
        register(
            f"all_reduce_coalesced[{_op}{'-async' if _async else ''}]",
            partial(case_all_reduce_coalesced, op=_op, async_op=_async),
        )


def case_all_reduce_coalesced_group(kit: Any) -> None:
    group = subgroup()
    if my_rank() not in group.ranks:
        return
    a = kit.tensor(np.full(2, my_rank() + 1.0), "float32")
    compat.all_reduce_coalesced([a], group=group)
    expected = np.full(2, float(sum(r + 1 for r in group.ranks)))
    np.testing.assert_array_equal(kit.numpy(a), expected)


register("all_reduce_coalesced_group", case_all_reduce_coalesced_group, min_world=2)


@bad_case("all_reduce_coalesced_dtypes")
def _(kit: Any) -> None:
    a, b = f32(kit, (2,)), kit.tensor(np.arange(2), "int32")
    expect_error(
        kit, TypeError, lambda: compat.all_reduce_coalesced([a, b]), "tensors[1]",
        ["expected dtype float32", "got int32"], [a, b],
    )  # fmt: skip
    expect_error(
        kit, TypeError, lambda: compat.all_reduce_coalesced([]), "tensors",
        ["non-empty list", "got"], [],
    )  # fmt: skip
    expect_error(
        kit, TypeError, lambda: compat.all_reduce_coalesced([a, "x"]), "tensors[1]",
        ["expected a", "tensor"], [a],
    )  # fmt: skip


def case_group_queries_torch_style(kit: Any) -> None:
    """``size()`` and ``rank()`` as a torch ProcessGroup answers them, on compat.WORLD and on a
    group; ``compat.get_rank(group) < 0`` is torch's ``_rank_not_in_group(group)``."""
    assert isinstance(compat.WORLD, compat.Group)
    assert compat.WORLD.size() == world(), (compat.WORLD.size(), world())
    assert compat.WORLD.rank() == my_rank()
    group = subgroup()
    inside = my_rank() in group.ranks
    assert group.size() == len(group.ranks)
    assert group.rank() == (group.ranks.index(my_rank()) if inside else -1)
    assert isinstance(group, compat.Group) and isinstance(group.name, str) and group.name
    assert [group.group_rank(r) for r in group.ranks] == list(range(len(group.ranks)))
    # handle: the framework's own group (a ProcessGroup, a MindSpore group name) on members.
    native = {"torch": "ProcessGroup", "mindspore": "str"}[kit.framework]
    assert (type(group.handle).__name__ == native) if inside else group.handle is None
    assert (compat.get_rank(group) < 0) is (not inside)
    assert (compat.get_rank(None) < 0) is False
    assert (compat.get_rank(compat.WORLD) < 0) is False
    # A collective on compat.WORLD, the ported _get_default_group(): the world's sum.
    total = kit.tensor(np.ones(1), "float32")
    compat.all_reduce(total, group=compat.WORLD)
    np.testing.assert_array_equal(kit.numpy(total), np.full(1, float(world())))


register("group_queries_torch_style", case_group_queries_torch_style)


def case_new_group_forms(kit: Any) -> None:
    """What the mapping tables say of compat.new_group: ranks may be left out (every rank) or
    given in any order, and the group's ranks are sorted (group rank i is the i-th smallest
    global rank), answering rank() and size() as a ProcessGroup does; ``timeout`` is taken on
    torch and refused on MindSpore (an UnsupportedError naming it)."""
    everyone = tuple(range(world()))
    timeout = {"timeout": 30} if kit.framework == "torch" else {}
    for group in (compat.new_group(), compat.new_group(list(reversed(everyone)), **timeout)):
        assert group.ranks == everyone, group.ranks
        assert (group.rank(), group.size()) == (my_rank(), world())
    last = world() - 1
    alone = compat.new_group([last])  # a compat.Group on every rank, its handle None outside
    assert isinstance(alone, compat.Group) and alone.ranks == (last,)
    assert (alone.handle is None) is (my_rank() != last), alone.handle
    if kit.framework == "mindspore":
        try:
            compat.new_group(list(everyone), timeout=30)
        except compat.UnsupportedError as error:
            assert "timeout" in str(error), error
        else:
            raise AssertionError("new_group(timeout=30) on MindSpore: no UnsupportedError")


register("new_group_forms", case_new_group_forms)


def case_stacked_whole(kit: Any, async_op: bool, use_group: bool) -> None:
    """torch's other form of all_gather_into_tensor's output and reduce_scatter_tensor's input,
    which NCCL takes (xformers' sequence-parallel fallback writes it): the stack of the group's
    parts, ``(size, *part)``. Each collective writes the stack as it writes the concatenation,
    in the torch form and in compat's out= form (which returns the stack itself)."""
    group = subgroup() if use_group else None
    ranks = list(group.ranks) if group is not None else list(range(world()))
    if my_rank() in ranks:
        for form in ("into", "out"):
            _stacked_all_gather(kit, group, ranks, form, async_op)
            _stacked_reduce_scatter(kit, group, ranks, form, async_op)
    follow_up(kit)


def _stacked_all_gather(kit: Any, group: Any, ranks: list[int], form: str, async_op: bool) -> None:
    part = (2, 3)
    tensor = kit.tensor(values("stacked-ag", my_rank(), part), "float32")
    stack = kit.tensor(np.full((len(ranks), *part), -7.0), "float32")
    if form == "into":
        wait_if(compat.all_gather_into(stack, tensor, group, async_op), async_op)
    else:
        got = compat.all_gather_into_tensor(tensor, group, async_op, out=stack)
        if async_op:
            got, work = got
            wait_if(work, async_op)
        assert got is stack, f"all_gather_into_tensor(out=stack) returned {got!r}"
    expected = np.stack([values("stacked-ag", r, part) for r in ranks])
    np.testing.assert_array_equal(kit.numpy(stack), expected, err_msg=f"all_gather {form}")


def _stacked_reduce_scatter(
    kit: Any, group: Any, ranks: list[int], form: str, async_op: bool
) -> None:
    part = (2, 3)
    inputs = [values("stacked-rs", r, (len(ranks), *part)) for r in ranks]
    me = ranks.index(my_rank())
    stack = kit.tensor(inputs[me], "float32")
    out = kit.tensor(np.full(part, -7.0), "float32")
    if form == "into":
        wait_if(compat.reduce_scatter_into(out, stack, "sum", group, async_op), async_op)
    else:
        got = compat.reduce_scatter_tensor(stack, "sum", group, async_op, out=out)
        if async_op:
            got, work = got
            wait_if(work, async_op)
        assert got is out, f"reduce_scatter_tensor(out=out) returned {got!r}"
    expected = reduce_np(inputs, "sum")[me]
    np.testing.assert_array_equal(kit.numpy(out), expected, err_msg=f"reduce_scatter {form}")
    np.testing.assert_array_equal(kit.numpy(stack), inputs[me], err_msg="input unchanged")


def case_same_elements_whole(kit: Any, async_op: bool, use_group: bool) -> None:
    """NCCL checks only the element count of torch's all_gather_into_tensor output and
    reduce_scatter_tensor input (``numel == size * numel(part)``, ProcessGroupNCCL): NeMo-RL
    gathers 0-d counts into ``(size,)``, others a flat buffer from ``(2, 2)`` parts. Written as
    the concatenation of the parts' elements, in both forms, on every backend."""
    group = subgroup() if use_group else None
    ranks = list(group.ranks) if group is not None else list(range(world()))
    if my_rank() not in ranks:
        follow_up(kit)
        return
    size = len(ranks)
    for part, whole in (((), (size,)), ((2, 2), (size * 4,)), ((3,), (size, 1, 3))):
        for form in ("into", "out"):
            tensor = kit.tensor(values("same-ag", my_rank(), part), "float32")
            out = kit.tensor(np.full(whole, -7.0), "float32")
            if form == "into":
                wait_if(compat.all_gather_into(out, tensor, group, async_op), async_op)
            else:
                got = compat.all_gather_into_tensor(tensor, group, async_op, out=out)
                got, work = got if async_op else (got, None)
                wait_if(work, async_op)
                assert got is out, f"all_gather_into_tensor(out=) returned {got!r}"
            expected = np.stack([values("same-ag", r, part) for r in ranks]).reshape(whole)
            np.testing.assert_array_equal(kit.numpy(out), expected, err_msg=f"{part} {form}")
    inputs = [values("same-rs", r, (len(ranks) * 4,)) for r in ranks]
    out = kit.tensor(np.full((2, 2), -7.0), "float32")
    wait_if(
        compat.reduce_scatter_into(
            out, kit.tensor(inputs[ranks.index(my_rank())], "float32"), "sum", group, async_op
        ),
        async_op,
    )
    expected = reduce_np(inputs, "sum").reshape(len(ranks), 2, 2)[ranks.index(my_rank())]
    np.testing.assert_array_equal(kit.numpy(out), expected, err_msg="reduce_scatter flat input")
    follow_up(kit)


for _async in (False, True):
    for _use_group in (False, True):
        register(
            f"stacked_whole[{'group' if _use_group else 'world'}{'-async' if _async else ''}]",
            partial(case_stacked_whole, async_op=_async, use_group=_use_group),
        )
        _where = f"{'group' if _use_group else 'world'}{'-async' if _async else ''}"
        register(
            f"same_elements_whole[{_where}]",
            partial(case_same_elements_whole, async_op=_async, use_group=_use_group),
        )
