"""compat.algorithms' one_rank_* on real ranks: what a group of one rank runs for every
collective (capabilities.toml chooses them with ``max_ranks = 1`` on Gloo and MCCL).

At world size 1 each is called directly on the world, every dtype and view layout, sync and
async, every tensor a view in a sentinel-filled base that is checked whole. From world size 2
each refuses the world before touching a buffer, and each rank's group of one (a subgroup)
runs them, directly and through the public calls, which the table routes to them. At world
size 1 the whole collective suite (cases.py, layout_cases.py, ...) also runs through them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import compat
from compat import algorithms
from compat.base.errors import UnsupportedError
from compat.base.types import ReduceOp
from compat.collectives import BARRIER_DTYPE
from compat.core import capabilities, state
from tests.ranks.cases import DTYPES, rank, register, runs, values, wait_if, world
from tests.ranks.layout_cases import LAYOUTS, Placed, sentinel_out

SHAPE = (3, 4)
#: The table's tensor collectives (the uneven forms too) -> their one_rank_* algorithm's name:
#: every collective but point to point, barrier (no tensor) and monitored_barrier.
ONE_RANK_COLLECTIVES = {
    collective: f"one_rank_{method}"
    for collective, method in capabilities.COLLECTIVES.items()
    if collective not in capabilities.POINT_TO_POINT and "barrier" not in collective
}

#: (name, the call on (group handle, async_op), its tensors, what their views hold after it).
Call = tuple[str, Callable[[Any, bool], Any], list[Placed], Callable[[], None]]


def _calls(kit: Any, dtype: str, layout: str, seed: str) -> list[Call]:
    """Every one_rank_* algorithm on fresh tensors of ``dtype`` as ``layout`` views, this rank
    the group's one member (its global rank the root)."""
    adapter, me = state.current().adapter, rank()

    def mine(tag: str) -> Placed:
        return Placed(kit, values(f"{seed}-{tag}", me, SHAPE), dtype, layout)

    def out() -> Placed:
        return sentinel_out(kit, SHAPE, dtype, layout)

    def own(tag: str) -> np.ndarray:
        return values(f"{seed}-{tag}", me, SHAPE)

    def nothing() -> None:
        return None

    calls: list[Call] = []
    x = mine("all_reduce")
    calls.append((
        "one_rank_all_reduce",
        lambda g, a, x=x: algorithms.one_rank_all_reduce(adapter, x.view, ReduceOp.AVG, g, a),
        [x], nothing,
    ))  # fmt: skip
    x = mine("reduce")
    calls.append((
        "one_rank_reduce",
        lambda g, a, x=x: algorithms.one_rank_reduce(adapter, x.view, me, ReduceOp.PRODUCT, g, a),
        [x], nothing,
    ))  # fmt: skip
    x = mine("broadcast")
    calls.append((
        "one_rank_broadcast",
        lambda g, a, x=x: algorithms.one_rank_broadcast(adapter, x.view, me, g, a),
        [x], nothing,
    ))  # fmt: skip
    calls.append(("one_rank_barrier", lambda g, a: algorithms.one_rank_barrier(adapter, g, a), [],
                  nothing))  # fmt: skip
    # One input and one output: the output holds the input's values after the call.
    copying: list[tuple[str, Callable[[Any, Any, Any, bool], Any]]] = [
        ("one_rank_all_gather", lambda o, i, g, a: algorithms.one_rank_all_gather(
            adapter, [o], i, g, a)),
        ("one_rank_all_gather_into_tensor", lambda o, i, g, a: (
            algorithms.one_rank_all_gather_into_tensor(adapter, o, i, g, a))),
        ("one_rank_reduce_scatter", lambda o, i, g, a: algorithms.one_rank_reduce_scatter(
            adapter, o, [i], ReduceOp.SUM, g, a)),
        ("one_rank_reduce_scatter_tensor", lambda o, i, g, a: (
            algorithms.one_rank_reduce_scatter_tensor(adapter, o, i, ReduceOp.MAX, g, a))),
        ("one_rank_scatter", lambda o, i, g, a: algorithms.one_rank_scatter(
            adapter, o, [i], me, g, a)),
        ("one_rank_gather", lambda o, i, g, a: algorithms.one_rank_gather(
            adapter, i, [o], me, g, a)),
        ("one_rank_all_to_all_single", lambda o, i, g, a: algorithms.one_rank_all_to_all_single(
            adapter, o, i, [SHAPE[0]], [SHAPE[0]], g, a)),
        ("one_rank_all_to_all", lambda o, i, g, a: algorithms.one_rank_all_to_all(
            adapter, [o], [i], g, a)),
    ]  # fmt: skip
    for name, run in copying:
        source, target = mine(name), out()

        def filled(target: Placed = target, tag: str = name) -> None:
            target.result(own(tag))

        calls.append((
            name,
            lambda g, a, run=run, o=target, i=source: run(o.view, i.view, g, a),
            [source, target], filled,
        ))  # fmt: skip
    return calls


def _finish(pending: Any, async_op: bool) -> None:
    if async_op:
        assert isinstance(pending, compat.Work) and pending.is_completed(), pending
        assert pending.wait() is True
    else:
        assert pending is None, f"expected None for a synchronous call, got {pending!r}"


def _runs_alone(kit: Any, group: Any, dtypes: list[str], layouts: list[str], label: str) -> None:
    for dtype in dtypes:
        for layout in layouts:
            for async_op in (False, True):
                seed = f"one-rank-{dtype}-{layout}"
                for name, call, placed, filled in _calls(kit, dtype, layout, seed):
                    what = f"{name} {label} {dtype} {layout} async={async_op}"
                    _finish(call(group, async_op), async_op)
                    filled()
                    for item in placed:
                        item.check(what)


def case_one_rank(kit: Any) -> None:
    """World size 1: every one_rank_* algorithm, every dtype and layout, sync and async, and an
    empty part copies nothing. From world size 2: each refuses the world (UnsupportedError
    naming itself and the group's size) before touching a buffer, and the next collective
    works."""
    if world() == 1:
        _runs_alone(kit, None, DTYPES, list(LAYOUTS), "world of one")
        empty = kit.tensor(np.zeros((0, 4)), "float32")
        target = sentinel_out(kit, (0, 4), "float32", "interior")
        adapter = state.current().adapter
        _finish(algorithms.one_rank_all_gather(adapter, [target.view], empty, None, False), False)
        target.check("one_rank_all_gather of an empty part")
        return
    for name, call, placed, _ in _calls(kit, "float32", "interior", "one-rank-refused"):
        try:
            call(None, False)
        except UnsupportedError as error:
            message = str(error)
            assert name in message and f"has {world()} ranks" in message, message
        else:
            raise AssertionError(f"{name} ran on a group of {world()} ranks")
        for item in placed:
            item.check(f"{name} refused: the buffers untouched")
    x = kit.tensor(np.ones(4), "float32")
    compat.all_reduce(x)
    np.testing.assert_array_equal(kit.numpy(x), np.full(4, world()))


def _groups_of_one() -> list[compat.Group]:
    """Each rank's group of one (every rank creates every one, as new_group needs)."""
    return [compat.new_group([r]) for r in range(world())]


def case_one_rank_subgroup(kit: Any) -> None:
    """Each rank's group of one: the table chooses the one_rank_* algorithms for it, which run
    directly, and the public calls on it give their one-rank results on view layouts."""
    groups = _groups_of_one()
    group = groups[rank()]
    runtime, handle = state.current(), group.handle
    like = kit.tensor(np.zeros(4), "float32")
    for collective, algorithm in ONE_RANK_COLLECTIVES.items():
        chosen = runtime.implementation(collective, like, 16, handle, "float32")
        assert runs(chosen, algorithm), (collective, chosen)
    chosen = runtime.implementation("barrier", None, 0, handle, BARRIER_DTYPE)
    assert runs(chosen, "one_rank_barrier"), chosen
    _runs_alone(kit, handle, ["float32", "int64"], ["column", "strided"], "own group")
    me, seed = rank(), "one-rank-public"
    x = Placed(kit, values(seed, me, SHAPE), "float32", "column")
    wait_if(compat.all_reduce(x.view, group=group, async_op=True), True)
    compat.broadcast(x.view, me, group=group)
    compat.reduce(x.view, me, group=group)
    x.check("all_reduce, broadcast and reduce in a group of one")
    outs = [sentinel_out(kit, SHAPE, "float32", "strided") for _ in range(4)]
    compat.scatter(outs[0].view, [x.view], me, group=group)
    compat.gather(x.view, [outs[1].view], me, group=group)
    compat.all_gather([outs[2].view], x.view, group=group)
    compat.all_to_all_single(outs[3].view, x.view, group=group)
    for index, placed in enumerate(outs):
        placed.result(values(seed, me, SHAPE))
        placed.check(f"one-rank public call {index}")
    result = compat.reduce_scatter_tensor(x.view, group=group)
    np.testing.assert_array_equal(kit.numpy(result), values(seed, me, SHAPE))
    compat.barrier(group=group)
    for made in groups:
        compat.destroy(made)


register("algorithm-one_rank", case_one_rank)
register("algorithm-one_rank-subgroup", case_one_rank_subgroup, min_world=2)
