"""Mismatched calls across ranks, run with the pre-flight check on (COMPAT_CHECK=1).

Each case has the ranks call a collective with arguments that disagree; every rank must raise
CollectiveMismatchError naming the ranks and the difference, leave its buffers unchanged, and
the next collective must still work (no hang, no desync).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import compat
from tests.ranks.cases import Case, follow_up, rank, sentinel, world

CASES: dict[str, Case] = {}


def mismatch(
    name: str,
) -> Callable[[Callable[[Any], tuple[Callable[[], object], list[str], list[Any]]]], None]:
    """Register a case: the function returns (the call, fragments of the message, buffers)."""

    def decorate(setup: Callable[[Any], tuple[Callable[[], object], list[str], list[Any]]]) -> None:
        def run(kit: Any) -> None:
            call, fragments, buffers = setup(kit)
            snapshots = [kit.numpy(buffer) for buffer in buffers]
            try:
                call()
            except compat.CollectiveMismatchError as error:
                message = str(error)
            else:
                raise AssertionError("expected CollectiveMismatchError; the call went through")
            for fragment in fragments:
                assert fragment in message, f"{fragment!r} missing from: {message}"
            for buffer, snapshot in zip(buffers, snapshots, strict=True):
                np.testing.assert_array_equal(kit.numpy(buffer), snapshot, "a buffer changed")
            follow_up(kit)

        CASES[f"mismatch[{name}]"] = Case(f"mismatch[{name}]", run)

    return decorate


def ranks_listed(values: list[object]) -> str:
    return ", ".join(f"rank {r} {v}" for r, v in enumerate(values))


@mismatch("shape")
def _(kit: Any):
    tensor = kit.tensor(np.ones(4 + rank()), "float32")
    shapes = [[4 + r] for r in range(world())]
    return (
        lambda: compat.all_reduce(tensor),
        ["all_reduce", f"shape: {ranks_listed(shapes)}"],
        [tensor],
    )


@mismatch("dtype")
def _(kit: Any):
    dtypes = ["float32" if r % 2 == 0 else "int32" for r in range(world())]
    tensor = kit.tensor(np.ones(4), dtypes[rank()])
    return lambda: compat.all_reduce(tensor), [f"dtype: {ranks_listed(dtypes)}"], [tensor]


@mismatch("op")
def _(kit: Any):
    ops = ["sum" if r % 2 == 0 else "max" for r in range(world())]
    tensor = kit.tensor(np.ones((world(), 2)), "float32")
    return (
        lambda: compat.reduce_scatter_tensor(tensor, ops[rank()]),
        ["reduce_scatter_tensor", f"op: {ranks_listed(ops)}"],
        [tensor],
    )


@mismatch("function")
def _(kit: Any):
    tensor = kit.tensor(np.ones(4), "float32")
    names = ["all_reduce" if r % 2 == 0 else "broadcast" for r in range(world())]
    calls = {
        "all_reduce": lambda: compat.all_reduce(tensor),
        "broadcast": lambda: compat.broadcast(tensor, 0),
    }
    return calls[names[rank()]], [f"different collectives: {ranks_listed(names)}"], [tensor]


@mismatch("split_sizes")
def _(kit: Any):
    n = world()
    sizes = [[2] * n if r % 2 == 0 else [1, 3] + [2] * (n - 2) for r in range(n)]
    tensor = kit.tensor(np.ones((2 * n, 2)), "float32")
    return (
        lambda: compat.reduce_scatter_tensor(tensor, input_split_sizes=sizes[rank()]),
        [f"sizes: {ranks_listed(sizes)}"],
        [tensor],
    )


@mismatch("root")
def _(kit: Any):
    tensor = kit.tensor(np.full(3, rank()), "int64")
    roots = [r % 2 for r in range(world())]
    return (
        lambda: compat.broadcast(tensor, roots[rank()]),
        [f"root: {ranks_listed(roots)}"],
        [tensor],
    )


@mismatch("all_to_all_splits")
def _(kit: Any):
    n, me = world(), rank()
    send = [2] * n
    receive = [2] * n
    if me == 1:
        receive = [3] + [2] * (n - 1)
    output = sentinel(kit, (sum(receive), 2), "float32")
    tensor = kit.tensor(np.ones((sum(send), 2)), "float32")
    return (
        lambda: compat.all_to_all_single(output, tensor, receive, send),
        ["split sizes: rank 0 sends 2 rows to rank 1, which expects 3"],
        [output, tensor],
    )


@mismatch("reduce_scatter_list_sizes")
def _(kit: Any):
    n, me = world(), rank()
    sizes = [[2] * n for _ in range(n)]
    sizes[1][0] = 3
    output = sentinel(kit, (sizes[me][me], 2), "float32")
    inputs = [kit.tensor(np.ones((s, 2)), "float32") for s in sizes[me]]
    return (
        lambda: compat.reduce_scatter(output, inputs),
        ["reduce_scatter", f"sizes: {ranks_listed(sizes)}"],
        [output, *inputs],
    )
