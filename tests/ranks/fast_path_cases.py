"""all_reduce, broadcast, reduce, all_gather_into_tensor and reduce_scatter_tensor (both forms
each), scatter_tensor, all_to_all_single and the list forms (all_gather, reduce_scatter,
scatter, gather, all_to_all) skip compat.core.call.Call where every argument is the common
case (a synchronous call on the world, dense, non-empty tensors, lists of one such tensor per
rank of one shape, a root given as a global rank, an op seen before with the dtype, dim 0
without split sizes) and take the full path otherwise: both give numpy's results, outputs
framed by sentinels and checked whole."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import numpy as np

import compat
from compat import collectives
from compat.core import capabilities, state
from compat.core.call import Call
from tests.ranks.cases import (
    SENTINEL,
    assert_close,
    follow_up,
    rank,
    register,
    subgroup,
    values,
    wait_if,
    world,
)


@contextmanager
def calls_counted() -> Iterator[list[int]]:
    """How many compat.core.call.Call were made meanwhile (the general path's), by the
    collectives and by point to point."""
    made = [0]
    original = Call.__init__

    def counting(self: Call, *args: Any, **kwargs: Any) -> None:
        made[0] += 1
        original(self, *args, **kwargs)

    Call.__init__ = counting  # type: ignore[method-assign]
    try:
        yield made
    finally:
        Call.__init__ = original  # type: ignore[method-assign]


@contextmanager
def sizes_read(adapter: Any) -> Iterator[list[int]]:
    """How many times ``adapter.nbytes`` read a tensor's size meanwhile."""
    read = [0]
    original = adapter.nbytes

    def counted(tensor: Any) -> int:
        read[0] += 1
        return int(original(tensor))

    adapter.nbytes = counted
    try:
        yield read
    finally:
        del adapter.nbytes


def _framed(kit: Any, inner: np.ndarray) -> tuple[Any, Any]:
    """A sentinel-filled tensor one row larger on each side, and its middle rows holding
    ``inner``: a contiguous view at an offset (dense for torch; MindSpore stages any view)."""
    edge = np.full((1, *inner.shape[1:]), SENTINEL)
    base = kit.tensor(np.concatenate([edge, inner, edge]), "float32")
    return base, base[1 : inner.shape[0] + 1]


def _check(kit: Any, base: Any, inner: np.ndarray, what: str) -> None:
    """The whole base; not recorded for the parity test (which path a view takes differs by
    framework, so these checks run on one framework each)."""
    edge = np.full((1, *inner.shape[1:]), SENTINEL)
    np.testing.assert_array_equal(kit.numpy(base), np.concatenate([edge, inner, edge]), what)


def case_plain_calls_skip_call(kit: Any) -> None:
    n, me = world(), rank()
    everyone = [values("fast-path", r, (2, 3)) for r in range(n)]
    for op in (compat.ReduceOp.SUM, "sum", "max"):  # the first call with an op and dtype:
        compat.all_reduce(kit.tensor(everyone[me], "float32"), op)  # the full path
    whole = kit.tensor(everyone[me], "float32")
    with calls_counted() as made:
        compat.all_reduce(whole)
        assert_close(kit.numpy(whole), np.sum(everyone, axis=0), "float32", "all_reduce")
        for op in (compat.ReduceOp.SUM, "sum"):
            again = kit.tensor(everyone[me], "float32")
            compat.all_reduce(again, op)
            assert_close(kit.numpy(again), np.sum(everyone, axis=0), "float32", repr(op))
        root_tensor = kit.tensor(everyone[me], "float32")
        compat.broadcast(root_tensor, n - 1)
        assert_close(kit.numpy(root_tensor), everyone[-1], "float32", "broadcast")
        gathered = compat.all_gather_into_tensor(kit.tensor(everyone[me], "float32"))
        assert_close(kit.numpy(gathered), np.concatenate(everyone), "float32", "all_gather")
        out = kit.tensor(np.full((2 * n, 3), SENTINEL), "float32")
        compat.all_gather_into(out, kit.tensor(everyone[me], "float32"))
        assert_close(kit.numpy(out), np.concatenate(everyone), "float32", "all_gather_into")
        whole = [values("fast-path-rs", r, (2 * n, 3)) for r in range(n)]
        part = np.sum(whole, axis=0)[2 * me : 2 * me + 2]
        scattered = compat.reduce_scatter_tensor(kit.tensor(whole[me], "float32"))
        assert_close(kit.numpy(scattered), part, "float32", "reduce_scatter_tensor")
        out = kit.tensor(np.full((2, 3), SENTINEL), "float32")
        compat.reduce_scatter_into(out, kit.tensor(whole[me], "float32"))
        assert_close(kit.numpy(out), part, "float32", "reduce_scatter_into")
        received = np.concatenate([w[2 * me : 2 * me + 2] for w in whole])
        out = kit.tensor(np.full((2 * n, 3), SENTINEL), "float32")
        compat.all_to_all_single(out, kit.tensor(whole[me], "float32"))
        assert_close(kit.numpy(out), received, "float32", "all_to_all_single")
        _plain_list_forms(kit, everyone, whole)
        out = kit.tensor(np.full((2, 3), SENTINEL), "float32")
        compat.scatter_tensor(kit.tensor(whole[me], "float32"), n - 1, out=out)
        assert_close(kit.numpy(out), whole[-1][2 * me : 2 * me + 2], "float32", "scatter_tensor")
        part = compat.scatter_tensor(kit.tensor(whole[me], "float32"))  # the default root
        assert_close(kit.numpy(part), whole[0][2 * me : 2 * me + 2], "float32", "scatter_tensor")
        if kit.framework == "torch":
            base, middle = _framed(kit, everyone[me])
            compat.all_reduce(middle, group=compat.WORLD)
            _check(kit, base, np.sum(everyone, axis=0), "all_reduce of a dense view")
            _dense_views_in_lists(kit, everyone, whole)
    if state.current().check:  # the pre-flight check (COMPAT_CHECK=1) runs in Call.issue
        assert made[0] > 0, "with the pre-flight check on, plain calls skipped it"
    else:
        assert made[0] == 0, f"plain calls made {made[0]} Call(s)"


def _sentinels(kit: Any, count: int, shape: tuple[int, ...]) -> list[Any]:
    return [kit.tensor(np.full(shape, SENTINEL), "float32") for _ in range(count)]


def _plain_list_forms(kit: Any, everyone: list[np.ndarray], whole: list[np.ndarray]) -> None:
    """The list forms and reduce, each rank's tensors (2, 3) and its whole (2n, 3)."""
    n, me = world(), rank()
    rows = [slice(2 * r, 2 * r + 2) for r in range(n)]
    out = kit.tensor(np.full((2, 3), SENTINEL), "float32")
    compat.reduce_scatter(out, [kit.tensor(whole[me][part], "float32") for part in rows])
    assert_close(kit.numpy(out), np.sum(whole, axis=0)[rows[me]], "float32", "reduce_scatter")
    outs = _sentinels(kit, n, (2, 3))
    compat.all_gather(outs, kit.tensor(everyone[me], "float32"))
    for r in range(n):
        assert_close(kit.numpy(outs[r]), everyone[r], "float32", f"all_gather[{r}]")
    reduced = kit.tensor(everyone[me], "float32")
    compat.reduce(reduced, n - 1)
    expected = np.sum(everyone, axis=0) if me == n - 1 else everyone[me]
    assert_close(kit.numpy(reduced), expected, "float32", "reduce")
    out = kit.tensor(np.full((2, 3), SENTINEL), "float32")
    parts = [kit.tensor(whole[0][part], "float32") for part in rows] if me == 0 else None
    compat.scatter(out, parts)  # the default root
    assert_close(kit.numpy(out), whole[0][rows[me]], "float32", "scatter")
    outs = _sentinels(kit, n, (2, 3))
    compat.gather(kit.tensor(everyone[me], "float32"), outs if me == n - 1 else None, n - 1)
    for r in range(n):
        expected = everyone[r] if me == n - 1 else np.full((2, 3), SENTINEL)
        assert_close(kit.numpy(outs[r]), expected, "float32", f"gather[{r}]")
    outs = _sentinels(kit, n, (2, 3))
    compat.all_to_all(outs, tuple(kit.tensor(whole[me][part], "float32") for part in rows))
    for r in range(n):
        assert_close(kit.numpy(outs[r]), whole[r][rows[me]], "float32", f"all_to_all[{r}]")
    shapes = [(2, 3), (5,), (1, 2, 2)]
    coalesced = [[values(f"fast-path-co-{i}", r, shape) for r in range(n)]
                 for i, shape in enumerate(shapes)]  # fmt: skip
    tensors = [kit.tensor(each[me], "float32") for each in coalesced]
    compat.all_reduce_coalesced(tensors, "max")  # max: passed with float32 before
    for i, each in enumerate(coalesced):
        expected = np.max(each, axis=0)
        assert_close(kit.numpy(tensors[i]), expected, "float32", f"all_reduce_coalesced[{i}]")


def _dense_views_in_lists(kit: Any, everyone: list[np.ndarray], whole: list[np.ndarray]) -> None:
    """torch: parts of one sentinel-framed buffer are dense views, which the common case
    takes (reduce_scatter's as the tensor form); every base is checked whole."""
    n, me = world(), rank()
    base, middle = _framed(kit, whole[me])
    out_base, out = _framed(kit, np.full((2, 3), SENTINEL))
    compat.reduce_scatter(out, list(middle.chunk(n)))
    _check(kit, base, whole[me], "reduce_scatter's input, whole base")
    _check(kit, out_base, np.sum(whole, axis=0)[2 * me : 2 * me + 2], "reduce_scatter, base")
    base, middle = _framed(kit, np.full((2 * n, 3), SENTINEL))
    compat.all_gather(list(middle.chunk(n)), kit.tensor(everyone[me], "float32"))
    _check(kit, base, np.concatenate(everyone), "all_gather into chunks, whole base")
    base, middle = _framed(kit, np.full((2 * n, 3), SENTINEL))
    compat.all_to_all(list(middle.chunk(n)), list(kit.tensor(whole[me], "float32").chunk(n)))
    received = np.concatenate([w[2 * me : 2 * me + 2] for w in whole])
    _check(kit, base, received, "all_to_all into chunks, whole base")
    base, middle = _framed(kit, whole[me])
    compat.all_reduce_coalesced([middle[:1], middle[1:]])  # two dense views of one buffer
    _check(kit, base, np.sum(whole, axis=0), "all_reduce_coalesced of chunks, whole base")


def case_other_calls_take_the_full_path(kit: Any) -> None:
    n, me = world(), rank()
    everyone = [values("full-path", r, (2, 3)) for r in range(n)]
    total = np.sum(everyone, axis=0)
    compat.all_reduce(kit.tensor(everyone[me], "float32"))
    cases: list[tuple[str, Callable[[], None]]] = []

    def async_all_reduce() -> None:
        tensor = kit.tensor(everyone[me], "float32")
        wait_if(compat.all_reduce(tensor, async_op=True), True)
        assert_close(kit.numpy(tensor), total, "float32", "async all_reduce")

    def group_root_broadcast() -> None:
        tensor = kit.tensor(everyone[me], "float32")
        compat.broadcast(tensor, group_src=n - 1)
        assert_close(kit.numpy(tensor), everyone[-1], "float32", "group_src")

    def strided_broadcast() -> None:  # a view the backend cannot serve: staged
        wide = np.concatenate([everyone[me], np.full((2, 3), SENTINEL)], axis=1)
        base = kit.tensor(wide, "float32")
        compat.broadcast(base[:, :3], 0)
        expected = np.concatenate([everyone[0], np.full((2, 3), SENTINEL)], axis=1)
        assert_close(kit.numpy(base), expected, "float32", "strided broadcast, whole base")

    def gather_along_dim_1() -> None:
        gathered = compat.all_gather_into_tensor(kit.tensor(everyone[me], "float32"), dim=1)
        assert_close(kit.numpy(gathered), np.concatenate(everyone, axis=1), "float32", "dim=1")

    def gather_wrong_out() -> None:  # the full path says what is wrong, out untouched
        out = kit.tensor(np.full((2 * n + 1, 3), SENTINEL), "float32")
        try:
            compat.all_gather_into_tensor(kit.tensor(everyone[me], "float32"), out=out)
        except ValueError as error:
            assert "out" in str(error), error
        else:
            raise AssertionError("an out of the wrong shape was accepted")
        np.testing.assert_array_equal(kit.numpy(out), np.full((2 * n + 1, 3), SENTINEL))

    def reduce_scatter_out_of_another_dtype() -> None:  # read with the input, refused after
        out = kit.tensor(np.full((2, 3), SENTINEL), "float64")
        whole = kit.tensor(values("fast-path-rs-out", me, (2 * n, 3)), "float32")
        try:
            compat.reduce_scatter_tensor(whole, out=out)
        except (TypeError, ValueError) as error:
            assert "out" in str(error), error
        else:
            raise AssertionError("an out of another dtype was accepted")
        np.testing.assert_array_equal(kit.numpy(out), np.full((2, 3), SENTINEL))

    def scatter_tensor_out_of_another_shape() -> None:
        out = kit.tensor(np.full((3, 3), SENTINEL), "float32")
        whole = kit.tensor(values("fast-path-st-out", me, (2 * n, 3)), "float32")
        try:
            compat.scatter_tensor(whole, 0, out=out)
        except ValueError as error:
            assert "out" in str(error), error
        else:
            raise AssertionError("an out of another shape was accepted")
        np.testing.assert_array_equal(kit.numpy(out), np.full((3, 3), SENTINEL))

    def exchange_into_strided_output() -> None:  # an output the backend cannot serve: staged
        whole = [values("fast-path-a2a-strided", r, (2 * n, 3)) for r in range(n)]
        received = np.concatenate([w[2 * me : 2 * me + 2] for w in whole])
        base = kit.tensor(np.full((2 * n, 6), SENTINEL), "float32")
        compat.all_to_all_single(base[:, :3], kit.tensor(whole[me], "float32"))
        expected = np.concatenate([received, np.full((2 * n, 3), SENTINEL)], axis=1)
        assert_close(kit.numpy(base), expected, "float32", "strided all_to_all_single, whole base")

    def gather_into_strided_out() -> None:
        base = kit.tensor(np.full((2 * n, 6), SENTINEL), "float32")
        compat.all_gather_into_tensor(kit.tensor(everyone[me], "float32"), out=base[:, 3:])
        expected = np.concatenate([np.full((2 * n, 3), SENTINEL), np.concatenate(everyone)], 1)
        assert_close(kit.numpy(base), expected, "float32", "strided out, whole base")

    def scatter_uneven_splits() -> None:
        sizes = [1] * (n - 1) + [n + 1]  # 2n rows in all
        whole = [values("fast-path-split", r, (2 * n, 3)) for r in range(n)]
        start = sum(sizes[:me])
        part = np.sum(whole, axis=0)[start : start + sizes[me]]
        result = compat.reduce_scatter_tensor(
            kit.tensor(whole[me], "float32"), input_split_sizes=sizes
        )
        assert_close(kit.numpy(result), part, "float32", "input_split_sizes")

    def exchange_with_split_sizes() -> None:
        whole = [values("fast-path-a2a", r, (2 * n, 3)) for r in range(n)]
        received = np.concatenate([w[2 * me : 2 * me + 2] for w in whole])
        out = kit.tensor(np.full((2 * n, 3), SENTINEL), "float32")
        sizes = [2] * n
        compat.all_to_all_single(out, kit.tensor(whole[me], "float32"), sizes, sizes)
        assert_close(kit.numpy(out), received, "float32", "all_to_all_single with sizes")

    def view_all_reduce() -> None:  # MindSpore stages every view: the full path
        base, middle = _framed(kit, everyone[me])
        compat.all_reduce(middle)
        _check(kit, base, total, "all_reduce of a view")

    def empty_all_reduce() -> None:
        tensor = kit.tensor(np.zeros((0, 3)), "float32")
        compat.all_reduce(tensor)
        assert kit.numpy(tensor).shape == (0, 3)

    def strided_all_gather() -> None:  # a part the backend cannot serve: staged
        bases = [kit.tensor(np.full((2, 6), SENTINEL), "float32") for _ in range(n)]
        compat.all_gather([b[:, :3] for b in bases], kit.tensor(everyone[me], "float32"))
        for r in range(n):
            expected = np.concatenate([everyone[r], np.full((2, 3), SENTINEL)], axis=1)
            assert_close(kit.numpy(bases[r]), expected, "float32", f"strided all_gather[{r}]")

    def all_gather_wrong_dtype() -> None:  # refused on this rank, every output untouched
        outs = _sentinels(kit, n, (2, 3))
        outs[-1] = kit.tensor(np.full((2, 3), SENTINEL), "int32")
        try:
            compat.all_gather(outs, kit.tensor(everyone[me], "float32"))
        except (TypeError, ValueError) as error:
            assert f"tensor_list[{n - 1}]" in str(error), error
        else:
            raise AssertionError("an output of another dtype was accepted")
        for r in range(n):
            np.testing.assert_array_equal(kit.numpy(outs[r]), np.full((2, 3), SENTINEL))

    def scatter_group_src() -> None:
        out = kit.tensor(np.full((2, 3), SENTINEL), "float32")
        parts = [kit.tensor(everyone[r], "float32") for r in range(n)] if me == n - 1 else None
        compat.scatter(out, parts, group_src=n - 1)
        assert_close(kit.numpy(out), everyone[me], "float32", "scatter group_src")

    def scatter_tensor_group_src() -> None:
        whole = [values("fast-path-st", r, (2 * n, 3)) for r in range(n)]
        part = compat.scatter_tensor(kit.tensor(whole[me], "float32"), group_src=n - 1)
        assert_close(kit.numpy(part), whole[-1][2 * me : 2 * me + 2], "float32", "group_src")

    def reduce_group_dst() -> None:
        tensor = kit.tensor(everyone[me], "float32")
        compat.reduce(tensor, group_dst=0)
        expected = total if me == 0 else everyone[me]
        assert_close(kit.numpy(tensor), expected, "float32", "reduce group_dst")

    def uneven_all_to_all() -> None:  # rank r sends r + i + 1 rows to rank i
        sent = [[values("fast-path-a2a-uneven", r * n + i, (r + i + 1, 3)) for i in range(n)]
                for r in range(n)]  # fmt: skip
        outs = [kit.tensor(np.full((r + me + 1, 3), SENTINEL), "float32") for r in range(n)]
        compat.all_to_all(outs, [kit.tensor(part, "float32") for part in sent[me]])
        for r in range(n):
            assert_close(kit.numpy(outs[r]), sent[r][me], "float32", f"uneven all_to_all[{r}]")

    def coalesced_async() -> None:
        first, second = kit.tensor(everyone[me], "float32"), kit.tensor(everyone[me], "float32")
        wait_if(compat.all_reduce_coalesced([first, second], async_op=True), True)
        for i, tensor in enumerate((first, second)):
            assert_close(kit.numpy(tensor), total, "float32", f"async coalesced[{i}]")

    def coalesced_strided() -> None:  # one tensor the backend cannot serve: the full path
        dense = kit.tensor(everyone[me], "float32")
        wide = kit.tensor(np.concatenate([everyone[me], np.full((2, 3), SENTINEL)], 1), "float32")
        compat.all_reduce_coalesced([dense, wide[:, :3]])
        expected = np.concatenate([total, np.full((2, 3), SENTINEL)], axis=1)
        assert_close(kit.numpy(dense), total, "float32", "coalesced, the dense tensor")
        assert_close(kit.numpy(wide), expected, "float32", "coalesced, the strided one's base")

    cases += [
        ("coalesced async", coalesced_async), ("coalesced strided", coalesced_strided),
        ("strided all_gather", strided_all_gather), ("wrong dtype", all_gather_wrong_dtype),
        ("scatter group_src", scatter_group_src), ("reduce group_dst", reduce_group_dst),
        ("scatter_tensor group_src", scatter_tensor_group_src),
        ("async", async_all_reduce), ("group_src", group_root_broadcast),
        ("strided", strided_broadcast), ("empty", empty_all_reduce),
        ("dim=1", gather_along_dim_1), ("wrong out", gather_wrong_out),
        ("split sizes", scatter_uneven_splits), ("a2a split sizes", exchange_with_split_sizes),
        ("out of another dtype", reduce_scatter_out_of_another_dtype),
        ("out of another shape", scatter_tensor_out_of_another_shape),
        ("strided a2a output", exchange_into_strided_output),
        ("strided gather out", gather_into_strided_out),
    ]  # fmt: skip
    if n >= 2:  # with one rank every list has one shape
        cases.append(("uneven all_to_all", uneven_all_to_all))
    if kit.framework == "mindspore":
        cases.append(("view", view_all_reduce))
    if n >= 3:
        group = subgroup()

        def group_all_reduce() -> None:
            if me not in group.ranks:
                return
            tensor = kit.tensor(everyone[me], "float32")
            compat.all_reduce(tensor, group=group)
            expected = np.sum([everyone[r] for r in group.ranks], axis=0)
            assert_close(kit.numpy(tensor), expected, "float32", "subgroup all_reduce")

        cases.append(("subgroup", group_all_reduce))
    for name, run in cases:
        with calls_counted() as made:
            run()
        if name != "subgroup" or me in subgroup().ranks:
            # all_reduce_coalesced's full path makes one all_reduce, so one Call, per tensor, or
            # one in all for its small tensors as one buffer (on Gloo's own transport).
            two = [(2, 3), (2, 3)]  # the coalesced cases' tensors
            expected = _expected_all_reduces(kit, two) if name.startswith("coalesced") else 1
            assert made[0] == expected, f"{name}: {made[0]} Call(s) made, expected {expected}"


def case_unseen_op_takes_the_full_path(kit: Any) -> None:
    """An op the process has not passed with the tensor's dtype goes through the full checks
    (which raise for an unsupported one) before any call of it is one look-up."""
    checks = state.current().checks
    assert checks.known_reduction(object(), "float32") is None
    assert checks.known_reduction([], "float32") is None  # unhashable: no look-up
    tensor = kit.tensor(values("unseen-op", rank(), (2, 3)), "float32")
    compat.all_reduce(tensor, compat.ReduceOp.SUM)
    assert checks.known_reduction(compat.ReduceOp.SUM, "float32") is compat.ReduceOp.SUM


def case_coalesced_shared_memory_reduced_once(kit: Any) -> None:
    """all_reduce_coalesced reduces a tensor given twice, and elements tensors share, once, as
    torch's Gloo does (it flattens the tensors into one buffer and copies the results back):
    synchronous (where the common case would otherwise take them) and asynchronous, each base
    framed by sentinels and checked whole. With one rank a second reduction changes nothing,
    so this tells only from 2 ranks on."""
    n, me = world(), rank()
    everyone = [values("coalesced-shared", r, (4, 3)) for r in range(n)]
    total = np.sum(everyone, axis=0)
    for async_op in (False, True):
        tensor = kit.tensor(everyone[me], "float32")
        wait_if(compat.all_reduce_coalesced([tensor, tensor], async_op=async_op), async_op)
        assert_close(kit.numpy(tensor), total, "float32", f"one tensor twice, async {async_op}")
        tensor = kit.tensor(everyone[me], "float32")
        wait_if(compat.all_reduce_coalesced([tensor, tensor[:]], async_op=async_op), async_op)
        assert_close(kit.numpy(tensor), total, "float32", f"a tensor and its view, {async_op}")
        base, middle = _framed(kit, everyone[me])
        overlapping = [middle[:3], middle[1:]]  # rows 1 and 2 in both
        wait_if(compat.all_reduce_coalesced(overlapping, async_op=async_op), async_op)
        _check(kit, base, total, f"overlapping views, whole base, async {async_op}")
        base, middle = _framed(kit, everyone[me])
        interleaved = [middle[::2], middle[1::2]]  # no element shared, the spans overlap
        wait_if(compat.all_reduce_coalesced(interleaved, async_op=async_op), async_op)
        _check(kit, base, total, f"interleaved views, whole base, async {async_op}")
    tensor, other = kit.tensor(everyone[me], "float32"), kit.tensor(everyone[me], "float32")
    with calls_counted() as made:  # tensors of their own still take the common case
        compat.all_reduce_coalesced([tensor, other])
    if state.current().check:  # the pre-flight check (COMPAT_CHECK=1) runs in Call.issue
        assert made[0] > 0, "with the pre-flight check on, distinct tensors skipped it"
    else:
        assert made[0] == 0, f"distinct tensors: {made[0]} Call(s) made, expected none"
    for i, reduced in enumerate((tensor, other)):
        assert_close(kit.numpy(reduced), total, "float32", f"distinct tensors[{i}]")


@contextmanager
def all_reduces_counted() -> Iterator[list[int]]:
    """How many all_reduce implementations were run meanwhile (each is one collective on the
    wire, whichever path issued it: State.implementation or, in the common case,
    State.world_implementation)."""
    current = state.current()
    made = [0]

    def counting(original: Callable[..., Any]) -> Callable[..., Any]:
        def choose(collective: str, *args: Any, **kwargs: Any) -> Callable[..., Any]:
            run = original(collective, *args, **kwargs)
            if collective != "all_reduce":
                return run

            def counted(*call_args: Any) -> Any:
                made[0] += 1
                return run(*call_args)

            return counted

        return choose

    current.implementation = counting(current.implementation)  # type: ignore[method-assign]
    current.world_implementation = counting(current.world_implementation)  # type: ignore[method-assign]
    try:
        yield made
    finally:
        del current.implementation
        del current.world_implementation


def _expected_all_reduces(kit: Any, shapes: list[tuple[int, ...]], itemsize: int = 4) -> int:
    """How many all_reduces all_reduce_coalesced makes here for tensors of ``shapes`` (of
    ``itemsize`` bytes an element; float32's by default) on the world, by the rule the
    capability table's ``coalesce`` entry states (compat's docs): one where they go as one
    buffer, else one per tensor."""
    current = state.current()
    rule = current.coalesce
    sizes = [int(np.prod(shape)) * itemsize for shape in shapes]
    holding, total = sum(1 for size in sizes if size), sum(sizes)
    like = kit.tensor(np.zeros(1), "float32")
    if rule is None or holding < 2:
        one = False
    elif current.through_shared_memory("all_reduce", like, current.world.handle):
        at_least = rule.get("one_host_min_tensors")
        one = (
            at_least is not None
            and holding >= at_least
            and total <= holding * rule["one_host_max_mean_bytes"]
        )
    else:
        one = total <= rule["max_bytes"]
    return 1 if one else holding


#: A rule that puts each case below on both sides of both bounds (see _coalesced_layouts).
_SMALL_RULE = {
    "max_bytes": 1 << 16,
    "one_host_min_tensors": 3,
    "one_host_max_mean_bytes": 1 << 12,
    "reason": "test",
}


def case_coalesced_layouts_differ_by_rank(kit: Any) -> None:
    """all_reduce_coalesced issues the same collectives on every rank whatever the layout of its
    tensors there: the ranks pass tensors of the same shapes as views of one sentinel-framed
    buffer (which they tile), as tensors of their own, or as strided views of wider buffers,
    by rank. As the table's coalesce rule says, one all_reduce of them as one buffer, or one per
    tensor: with the table's rule, and with a small one that puts 2 and 3 tensors, small and
    large, on both sides of its bounds on either transport (the suite runs every case on the
    backend's own transport too). bfloat16 and int64 too, at the small size (MindSpore copies
    them as bits, or in their numpy spelling, MindSporeAdapter.one_buffer). Every base is
    checked whole, sentinels included."""
    current = state.current()
    table_rule = current.coalesce
    try:
        for rule in (table_rule, _SMALL_RULE):
            current.coalesce = rule
            for rows, dtype in ((2, "float32"), (3000, "float32"), (2, "bfloat16"), (2, "int64")):
                for count in (2, 3):  # 72 bytes in all (3 float32 tensors of 2 rows), or 72 KB
                    _coalesced_layouts(kit, [(rows, 3), (rows + 1, 3), (1, 3)][:count], dtype)
    finally:
        current.coalesce = table_rule


_ITEMSIZES = {"float32": 4, "bfloat16": 2, "int64": 8}


def _coalesced_layouts(kit: Any, shapes: list[tuple[int, ...]], dtype: str) -> None:
    n, me = world(), rank()
    layout = me % 3
    mine = [values(f"coalesced-layout-{i}", me, shape) for i, shape in enumerate(shapes)]
    totals = [
        np.sum([values(f"coalesced-layout-{i}", r, shape) for r in range(n)], axis=0)
        for i, shape in enumerate(shapes)
    ]
    edge = np.full((1, 3), SENTINEL)
    if layout == 0:
        base = kit.tensor(np.concatenate([edge, *mine, edge]), dtype)
        starts = [int(start) for start in np.cumsum([1] + [shape[0] for shape in shapes[:-1]])]
        tensors = [
            base[start : start + shape[0]] for start, shape in zip(starts, shapes, strict=True)
        ]
        expected = [np.concatenate([edge, *totals, edge])]
        bases = [base]
    elif layout == 1:
        tensors = bases = [kit.tensor(part, dtype) for part in mine]
        expected = totals
    else:
        filler = [np.full(shape, SENTINEL) for shape in shapes]
        bases = [kit.tensor(np.concatenate([part, fill], 1), dtype)
                 for part, fill in zip(mine, filler, strict=True)]  # fmt: skip
        tensors = [wide[:, :3] for wide in bases]
        expected = [
            np.concatenate([total, fill], 1) for total, fill in zip(totals, filler, strict=True)
        ]
    with all_reduces_counted() as made:
        compat.all_reduce_coalesced(tensors)
    calls = _expected_all_reduces(kit, shapes, _ITEMSIZES[dtype])
    assert made[0] == calls, f"{shapes}, layout {layout}: {made[0]} all_reduce(s), not {calls}"
    for index, (reduced, want) in enumerate(zip(bases, expected, strict=True)):
        np.testing.assert_array_equal(
            kit.numpy(reduced), want, f"{shapes} {dtype}: layout {layout}, base {index}"
        )


def case_batch_point_to_point(kit: Any) -> None:
    """A batch of compat P2POps on the world, with global peers, tag 0 and dense tensors skips
    Call, in both orders of send and receive; a batch with a view MindSpore stages takes the
    full path; every received tensor is checked whole, its base framed by sentinels where it is
    a view."""
    n, me = world(), rank()
    right, left = (me + 1) % n, (me - 1) % n
    sent = [values("p2p-batch", r, (2, 3)) for r in range(n)]
    outgoing = kit.tensor(sent[me], "float32")
    received = kit.tensor(np.full((2, 3), SENTINEL), "float32")
    ops = [compat.P2POp(compat.irecv, received, left), compat.P2POp(compat.isend, outgoing, right)]
    for work in compat.batch_isend_irecv(ops):  # the full checks see the tensor type first
        work.wait()
    received = kit.tensor(np.full((2, 3), SENTINEL), "float32")
    ops = [compat.P2POp(compat.irecv, received, left), compat.P2POp(compat.isend, outgoing, right)]
    with calls_counted() as made:
        works = compat.batch_isend_irecv(ops if me % 2 else ops[::-1])
    assert made[0] == 0, f"plain batch: {made[0]} Call(s) made, expected none"
    assert len(works) == 2, f"{len(works)} Works for 2 ops"
    for work in works:
        work.wait()
    assert_close(kit.numpy(received), sent[left], "float32", "batch irecv")
    assert_close(kit.numpy(outgoing), sent[me], "float32", "batch isend's tensor unchanged")
    base, middle = _framed(kit, np.full((2, 3), SENTINEL))
    staged = [compat.P2POp(compat.isend, outgoing, right), compat.P2POp(compat.irecv, middle, left)]
    with calls_counted() as made:
        works = compat.batch_isend_irecv(staged)
    view_counts = {"torch": 0, "mindspore": 1}  # a torch view at an offset is dense
    assert made[0] == view_counts[kit.framework], f"batch with a view: {made[0]} Call(s)"
    for work in works:
        work.wait()
    _check(kit, base, sent[left], "batch irecv into a view, whole base")


class _OneHandle:
    """The handles of a batch as one, as NCCL and HCCL return for a coalesced batch; waiting
    for it again returns at once, as NCCL's does (a Gloo send's handle, waited for a second
    time, waits for another send)."""

    def __init__(self, handles: list[Any]) -> None:
        self.handles, self.waits, self.done = handles, 0, False

    def wait(self, timeout: Any = None) -> bool:
        self.waits += 1
        if not self.done:
            for handle in self.handles:
                if timeout is None:
                    handle.wait()
                else:
                    handle.wait(timeout)
            self.done = True
        return True

    def is_completed(self) -> bool:
        return all(handle.is_completed() for handle in self.handles)


def case_batch_with_one_handle(kit: Any) -> None:
    """A backend that returns one handle for a whole batch (NCCL, HCCL; here the batch this
    backend runs, its handles joined into one): compat returns one Work for the batch, as
    torch does there, on the common path and on the full one, and the received tensors are
    checked whole."""
    n, me = world(), rank()
    right, left = (me + 1) % n, (me - 1) % n
    current = state.current()
    outgoing = kit.tensor(values("p2p-one-handle", me, (2, 3)), "float32")
    expected = values("p2p-one-handle", left, (2, 3))
    real = current.implementation(
        "batch_isend_irecv", outgoing, group=current.world.handle, dtype="float32"
    )
    joined: list[_OneHandle] = []

    def one_handle(specs: Any, group: Any) -> list[Any]:
        joined.append(_OneHandle(real(specs, group)))
        return [joined[-1]]

    received = kit.tensor(np.full((2, 3), SENTINEL), "float32")
    ops = [compat.P2POp(compat.isend, outgoing, right), compat.P2POp(compat.irecv, received, left)]
    for work in compat.batch_isend_irecv(ops):  # the full checks see the tensor type first
        work.wait()
    current.force("batch_isend_irecv", "float32", ("one handle", one_handle))
    try:
        received = kit.tensor(np.full((2, 3), SENTINEL), "float32")
        base, middle = _framed(kit, np.full((2, 3), SENTINEL))
        # the common path, then a view: the full path on MindSpore, which stages it
        for target, paths in ((received, (0, 0)), (middle, (0, 1))):
            ops = [compat.P2POp(compat.isend, outgoing, right),
                   compat.P2POp(compat.irecv, target, left)]  # fmt: skip
            with calls_counted() as made:
                works = compat.batch_isend_irecv(ops)
            expected_calls = paths[kit.framework == "mindspore"]
            assert made[0] == expected_calls, f"{made[0]} Call(s), expected {expected_calls}"
            # One Work for the batch, as torch returns where the backend coalesces.
            assert len(works) == 1, f"{len(works)} Works for a batch the backend coalesced"
            for work in works:
                work.wait()
            assert joined[-1].waits == 1, f"the one handle waited {joined[-1].waits} times"
        assert_close(kit.numpy(received), expected, "float32", "batch irecv, one handle")
        _check(kit, base, expected, "batch irecv into a view, one handle, whole base")
    finally:
        current.force("batch_isend_irecv", "float32", None)


def case_adapter_parts_and_memory_spans(kit: Any) -> None:
    """The adapter's parts lie back to back in the tensor's memory, one part is the tensor
    itself (nothing to cut on one rank), and memory spans tell overlapping, interleaved and
    separate tensors apart as all_reduce_coalesced needs."""
    adapter = state.current().adapter
    base = kit.tensor(values("adapter-parts", rank(), (6, 3)), "float32")
    start, end = adapter.memory_span(base)
    assert end - start == 6 * 3 * 4, f"span of a dense (6, 3) float32: {end - start} bytes"
    assert adapter.parts(base, [6])[0] is base, "one part is not the tensor itself"
    parts = adapter.parts(base, [1, 3, 2])
    spans = [adapter.memory_span(part) for part in parts]
    assert spans[0][0] == start and spans[-1][1] == end, f"parts' spans {spans}, whole {start, end}"
    for earlier, later in pairwise(spans):
        assert earlier[1] == later[0], f"parts not back to back: {spans}"
    np.testing.assert_array_equal(
        np.concatenate([kit.numpy(part) for part in parts]), kit.numpy(base), "parts' values"
    )
    may_share = collectives._may_share_memory
    other = kit.tensor(values("adapter-parts", rank(), (6, 3)), "float32")
    assert not may_share(adapter, [base, other]), "two tensors of their own"
    assert not may_share(adapter, [base[:2], base[2:]]), "adjacent rows"
    assert may_share(adapter, [base, base]), "one tensor twice"
    assert may_share(adapter, [base[:4], base[3:]]), "overlapping rows"
    assert may_share(adapter, [base[:, :2], base[:, 2:]]), "interleaved columns (spans overlap)"


def case_blocking_point_to_point(kit: Any) -> None:
    """send and recv of dense tensors on the world with tag 0 skip Call, as isend and irecv do;
    a recv after an irecv from the same rank not yet waited for still gets the second message
    (the irecv the first: on MCCL it is deferred, and the recv runs it first); a view received
    into: its base, framed by sentinels, is checked whole."""
    n, me = world(), rank()
    right, left = (me + 1) % n, (me - 1) % n
    sent = [[values(f"p2p-blocking-{i}", r, (2, 3)) for r in range(n)] for i in range(3)]
    outgoing = kit.tensor(sent[0][me], "float32")
    received = kit.tensor(np.full((2, 3), SENTINEL), "float32")
    with calls_counted() as made:
        if me % 2 == 0:  # even ranks send first: no cycle of blocking calls
            compat.send(outgoing, right)
            source = compat.recv(received, left)
        else:
            source = compat.recv(received, left)
            compat.send(outgoing, right)
    assert made[0] == 0, f"send and recv: {made[0]} Call(s) made, expected none"
    assert source == left, f"recv returned {source}, expected {left}"
    assert_close(kit.numpy(received), sent[0][left], "float32", "recv")
    assert_close(kit.numpy(outgoing), sent[0][me], "float32", "send's tensor unchanged")
    sends = [compat.isend(kit.tensor(sent[i][me], "float32"), right) for i in (1, 2)]
    first = kit.tensor(np.full((2, 3), SENTINEL), "float32")
    second = kit.tensor(np.full((2, 3), SENTINEL), "float32")
    pending = compat.irecv(first, left)
    compat.recv(second, left)
    pending.wait()
    for work in sends:
        work.wait()
    assert_close(kit.numpy(first), sent[1][left], "float32", "irecv before the recv")
    assert_close(kit.numpy(second), sent[2][left], "float32", "recv after the irecv")
    base, middle = _framed(kit, np.full((2, 3), SENTINEL))
    if me % 2 == 0:
        compat.send(outgoing, right)
        compat.recv(middle, left)
    else:
        compat.recv(middle, left)
        compat.send(outgoing, right)
    _check(kit, base, sent[0][left], "recv into a view, whole base")


def case_forced_choice_after_the_common_path(kit: Any) -> None:
    """The common path's choice, kept by (collective, dtype) once made
    (State.world_implementation), is what State.implementation chooses on the world, and gives
    way to a choice forced later and back to the table's once the force is lifted: isend, irecv,
    send, recv, all_reduce and broadcast, each run before, during and after the force, their
    results checked; and all_gather_into_tensor, whose choice can depend on the size (its
    choices by size are kept instead)."""
    n, me = world(), rank()
    right, left = (me + 1) % n, (me - 1) % n
    current = state.current()
    names = ("isend", "irecv", "send", "recv", "all_reduce", "broadcast", "all_gather_into_tensor")
    sent = [values("p2p-forced", r, (2, 3)) for r in range(n)]
    outgoing = kit.tensor(sent[me], "float32")
    total = np.sum(sent, axis=0)
    recorded: dict[str, int] = dict.fromkeys(names, 0)

    def run_all(step: str) -> None:
        received = kit.tensor(np.full((2, 3), SENTINEL), "float32")
        works = [compat.isend(outgoing, right), compat.irecv(received, left)]
        for work in works:
            work.wait()
        assert_close(kit.numpy(received), sent[left], "float32", f"irecv, {step}")
        received = kit.tensor(np.full((2, 3), SENTINEL), "float32")
        if me % 2 == 0:  # even ranks send first: no cycle of blocking calls
            compat.send(outgoing, right)
            compat.recv(received, left)
        else:
            compat.recv(received, left)
            compat.send(outgoing, right)
        assert_close(kit.numpy(received), sent[left], "float32", f"recv, {step}")
        reduced = kit.tensor(sent[me], "float32")
        compat.all_reduce(reduced)
        assert_close(kit.numpy(reduced), total, "float32", f"all_reduce, {step}")
        broadcast = kit.tensor(sent[me], "float32")
        compat.broadcast(broadcast, 0)
        assert_close(kit.numpy(broadcast), sent[0], "float32", f"broadcast, {step}")
        gathered = kit.tensor(np.full((2 * n, 3), SENTINEL), "float32")
        compat.all_gather_into_tensor(outgoing, out=gathered)
        expected = np.concatenate(sent)
        assert_close(kit.numpy(gathered), expected, "float32", f"all_gather_into_tensor, {step}")
        assert_close(kit.numpy(outgoing), sent[me], "float32", f"sent tensor unchanged, {step}")

    run_all("before the force")
    for name in names:
        chosen = current.implementation(name, outgoing, group=current.world.handle)
        kept = current.world_implementation(name, outgoing, "float32")
        assert kept is chosen, f"{name}: the common path's choice {kept} is not {chosen}"
    real = {name: current.world_implementation(name, outgoing, "float32") for name in names}

    def recording(name: str) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            recorded[name] += 1
            return real[name](*args)

        return run

    for name in names:
        current.force(name, "float32", ("recording", recording(name)))
    try:
        run_all("forced")
    finally:
        for name in names:
            current.force(name, "float32", None)
    assert recorded == dict.fromkeys(names, 1), f"forced choices run: {recorded}"
    run_all("after the force")
    assert recorded == dict.fromkeys(names, 1), f"after the force: {recorded}"


def case_stand_in_keeps_the_choice_by_size(kit: Any) -> None:
    """State.stand_in (compat bench's own work): the stand-in runs wherever the table's choice
    would, at the table's sizes (the choice by size still made, where force makes none), on
    the common path and the full one; lifted, the table's choices are back and give numpy's
    results."""
    n, me = world(), rank()
    current = state.current()
    handle = current.world.handle
    names = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor")
    sent = [values("stand-in", r, (2 * n, 3)) for r in range(n)]
    mine = kit.tensor(sent[me], "float32")
    before = {name: current._choices(name, "float32", handle, True) for name in names}
    calls: list[tuple[Any, ...]] = []

    class Done:  # the handle of a collective that did nothing
        def wait(self, timeout: object = None) -> bool:
            return True

        def is_completed(self) -> bool:
            return True

    def record(*args: Any) -> Done:  # no communication: every rank stands in alike
        calls.append(args)
        return Done()

    for name in names:
        current.stand_in(name, "float32", record)
    try:
        for name in names:
            during = current._choices(name, "float32", handle, True)
            sizes = [size for size, _ in before[name]]
            assert [size for size, _ in during] == sizes, (name, during, before[name])
            # inspect.unwrap: the flight recorder records the stand-in's calls
            # (compat.core.recorder)
            assert all(inspect.unwrap(run) is record for _, run in during), (name, during)
        compat.all_reduce(mine)  # the common path
        compat.all_reduce(mine, group=compat.WORLD, async_op=False)
        wait_if(compat.all_reduce(mine, async_op=True), True)  # the full path
        out = kit.tensor(np.full((2 * n * n, 3), SENTINEL), "float32")
        compat.all_gather_into_tensor(mine, out=out)
        np.testing.assert_array_equal(kit.numpy(out), np.full((2 * n * n, 3), SENTINEL))
        assert_close(kit.numpy(mine), sent[me], "float32", "the stand-in's tensor, untouched")
    finally:
        for name in names:
            current.stand_in(name, "float32", None)
    assert len(calls) == 4, calls
    for name in names:
        after = current._choices(name, "float32", handle, True)
        assert [size for size, _ in after] == [size for size, _ in before[name]], (name, after)
        assert all(run is not record for _, run in after), (name, after)
    compat.all_reduce(mine)
    assert_close(kit.numpy(mine), np.sum(sent, axis=0), "float32", "all_reduce after")
    part = compat.reduce_scatter_tensor(kit.tensor(sent[me], "float32"))
    expected = np.sum(sent, axis=0)[2 * me : 2 * me + 2]
    assert_close(kit.numpy(part), expected, "float32", "reduce_scatter_tensor after")


def case_a_choice_that_does_not_change_reads_no_size(kit: Any) -> None:
    """The choices by size keep a threshold only where the table's choice changes there (on
    this world, its size and its window): where none is left, a call reads no size. Checked
    against the table for every collective; and all_gather_into_tensor, whose thresholds on
    Gloo at one rank all choose the same, run on the common path counting the choices made by
    size, exact."""
    n, me = world(), rank()
    current = state.current()
    handle, key = current.world.handle, current.capability_key
    for collective in capabilities.COLLECTIVES:
        one_host = current._on_one_host(collective, True, handle)
        sizes = capabilities.size_thresholds(key, collective, "float32", one_host, n)
        made = [capabilities.choice(key, collective, "float32", s, one_host, n) for s in sizes]
        changes = [s for i, s in enumerate(sizes) if i == 0 or made[i] != made[i - 1]]
        kept = [size for size, _ in current._choices(collective, "float32", handle, True)]
        assert kept == changes, (collective, kept, sizes, made)
    sent = [values("no-size-read", r, (2, 3)) for r in range(n)]
    choices = [0]
    original = current._sized

    def counted(*args: Any) -> Any:
        choices[0] += 1
        return original(*args)

    kept = current._choices("all_gather_into_tensor", "float32", handle, True)
    current._sized = counted  # type: ignore[method-assign]
    try:
        gathered = compat.all_gather_into_tensor(kit.tensor(sent[me], "float32"))
    finally:
        del current._sized
    assert_close(kit.numpy(gathered), np.concatenate(sent), "float32", "all_gather_into_tensor")
    assert choices[0] == (len(kept) > 1), f"{len(kept)} choice(s), {choices[0]} made by size"


def case_a_choice_by_size_takes_the_size_from_the_shape(kit: Any) -> None:
    """On the common path a choice by size takes the input's size from the shape the checks
    read and the dtype's bytes (mapping_tables/dtypes.toml), times the copies, and reads no
    tensor's size (0.30 us a read on MindSpore): for every collective and several dtypes, two
    recording choices with the threshold exactly at numpy's size and one byte above it pick
    the upper and the lower (so the size is exact); neither communicates, so every buffer
    stays as it was. After, the table's choices are back and give numpy's results. With the
    pre-flight check on, every call takes the full path and no such choice runs."""
    n, me = world(), rank()
    for dtype in ("float32", "float64", "int8"):
        mine = values(f"size-from-shape-{dtype}", me, (2 * n, 3))
        seen = kit.tensor(mine, dtype)
        compat.all_reduce(seen)  # the full path: the op and dtype are seen from here on
        every = [values(f"size-from-shape-{dtype}", r, (2 * n, 3)) for r in range(n)]
        assert_close(kit.numpy(seen), np.sum(every, axis=0), dtype, f"all_reduce {dtype}")
        _sizes_from_shapes(kit, dtype)
    follow_up(kit)
    sent = [values("size-from-shape-after", r, (2 * n, 3)) for r in range(n)]
    part = compat.reduce_scatter_tensor(kit.tensor(sent[me], "float32"))
    expected = np.sum(sent, axis=0)[2 * me : 2 * me + 2]
    assert_close(kit.numpy(part), expected, "float32", "reduce_scatter_tensor after")


def _sizes_from_shapes(kit: Any, dtype: str) -> None:
    """case_a_choice_by_size_takes_the_size_from_the_shape for one dtype: each rank's tensors
    (2n, 3), parts (2, 3)."""
    n, me = world(), rank()
    current = state.current()
    rows = 2 * n
    whole = np.zeros((rows, 3), np.dtype(dtype)).nbytes
    part = whole // n
    chosen: list[str] = []
    fresh: dict[str, Any] = {}

    def choice(label: str) -> Callable[..., None]:
        def record(*args: Any) -> None:
            chosen.append(label)

        return record

    def tensor(key: str, shape: tuple[int, ...] = (rows, 3)) -> Any:
        fresh[key] = kit.tensor(np.full(shape, SENTINEL), dtype)
        return fresh[key]

    def parts(key: str, shape: tuple[int, ...] = (2, 3)) -> list[Any]:
        made = [tensor(f"{key}[{index}]", shape) for index in range(n)]
        return made

    calls: list[tuple[tuple[str, ...], int, Callable[[], Any]]] = [
        (("all_reduce",), whole, lambda: compat.all_reduce(tensor("t"))),
        (("broadcast",), whole, lambda: compat.broadcast(tensor("t"), n - 1)),
        (("reduce",), whole, lambda: compat.reduce(tensor("t"), n - 1)),
        (("all_gather_into_tensor",), whole,
         lambda: compat.all_gather_into_tensor(tensor("t"), out=tensor("out", (rows * n, 3)))),
        (("reduce_scatter_tensor",), whole,
         lambda: compat.reduce_scatter_tensor(tensor("t"), out=tensor("out", (2, 3)))),
        (("scatter",), part,
         lambda: compat.scatter_tensor(tensor("t"), n - 1, out=tensor("out", (2, 3)))),
        (("all_to_all_single",), whole,
         lambda: compat.all_to_all_single(tensor("out"), tensor("t"))),
        (("all_gather",), whole,
         lambda: compat.all_gather(parts("out", (rows, 3)), tensor("t"))),
        (("gather",), whole,
         lambda: compat.gather(tensor("t"), parts("out", (rows, 3)) if me == 0 else None)),
        (("scatter",), part,
         lambda: compat.scatter(tensor("out", (2, 3)), parts("in") if me == 0 else None)),
        # n parts: one buffer's size or n copies of a part, whichever the adapter runs
        (("reduce_scatter_tensor", "reduce_scatter"), whole,
         lambda: compat.reduce_scatter(tensor("out", (2, 3)), parts("in"))),
        (("all_to_all",), whole, lambda: compat.all_to_all(parts("out"), parts("in"))),
    ]  # fmt: skip
    for names, size, call in calls:
        try:
            for threshold, expected in ((size, "upper"), (size + 1, "lower")):
                for name in names:
                    current._forget_choices((name, dtype))
                    upper = (threshold, choice("upper"))
                    current._world_choices[(name, dtype)] = [(0, choice("lower")), upper]
                chosen.clear()
                fresh.clear()
                with calls_counted() as made, sizes_read(current.adapter) as read:
                    call()
                what = f"{names[0]} {dtype} at a threshold of {threshold} bytes"
                if current.check:  # the pre-flight check (COMPAT_CHECK=1) runs in Call.issue:
                    # every call takes the full path, which reads the size, and runs the table's
                    # choice for real (so the buffers hold results, not sentinels)
                    assert made[0] > 0 and chosen == [], f"{what}: {made[0]} Call(s), {chosen}"
                    continue
                assert made[0] == 0, f"{what}: took the full path"
                assert read[0] == 0, f"{what}: read a tensor's size {read[0]} time(s)"
                assert chosen == [expected], f"{what}: chose {chosen}, not {expected}"
                for key, buffer in fresh.items():  # no choice communicated or wrote
                    shape = tuple(kit.numpy(buffer).shape)
                    assert_close(kit.numpy(buffer), np.full(shape, SENTINEL), dtype, key)
        finally:
            for name in names:
                current._forget_choices((name, dtype))


def case_none_in_a_list_is_refused(kit: Any) -> None:
    """A None among a list form's tensors, every item or one, is refused by the full checks on
    the calling rank, naming the item, before any communication, with every output untouched;
    the next collective works. (The common-case test once took a None item for the tensor it
    had already checked, and sent the list on: an AttributeError from inside the algorithm, or
    at world size 1 a call that reached the backend.) Every rank passes the same bad list, as
    each is the root of its own scatter and gather, so no rank waits for another."""
    n, me = world(), rank()
    mine = values("none-in-list", me, (2, 3))

    def tensor() -> Any:
        return kit.tensor(mine, "float32")

    outputs = _sentinels(kit, n, (2, 3))
    out = kit.tensor(np.full((2, 3), SENTINEL), "float32")
    last = [None] if n == 1 else [*outputs[:-1], None]  # one None, after dense tensors
    inputs = [tensor() for _ in range(n)]
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("tensor_list[0]", lambda: compat.all_gather([None] * n, tensor())),
        (f"tensor_list[{n - 1}]", lambda: compat.all_gather(last, tensor())),
        ("input_list[0]", lambda: compat.reduce_scatter(out, [None] * n)),
        (f"input_list[{n - 1}]", lambda: compat.reduce_scatter(out, [*inputs[:-1], None])),
        ("scatter_list[0]", lambda: compat.scatter(out, [None] * n, src=me)),
        ("gather_list[0]", lambda: compat.gather(tensor(), [None] * n, dst=me)),
        ("output_tensor_list[0]", lambda: compat.all_to_all([None] * n, inputs)),
        (f"output_tensor_list[{n - 1}]", lambda: compat.all_to_all(last, inputs)),
        (f"input_tensor_list[{n - 1}]", lambda: compat.all_to_all(outputs, [*inputs[:-1], None])),
        ("tensors[1]", lambda: compat.all_reduce_coalesced([tensor(), None])),
    ]
    for item, call in calls:
        try:
            call()
        except TypeError as error:
            assert str(error).startswith(f"{item}: expected a "), (item, error)
        else:
            raise AssertionError(f"a None as {item} was accepted")
        for r, output in enumerate([*outputs, out]):
            np.testing.assert_array_equal(
                kit.numpy(output), np.full((2, 3), SENTINEL), f"{item}: output {r} written"
            )
    reduced = tensor()
    compat.all_reduce(reduced)
    everyone = [values("none-in-list", r, (2, 3)) for r in range(n)]
    assert_close(kit.numpy(reduced), np.sum(everyone, axis=0), "float32", "the next all_reduce")


register("fast_path-plain", case_plain_calls_skip_call, 1)
register("fast_path-blocking_p2p", case_blocking_point_to_point, 2)
register("fast_path-batch_p2p", case_batch_point_to_point, 2)
register("fast_path-batch_one_handle", case_batch_with_one_handle, 2)
register("fast_path-adapter_parts", case_adapter_parts_and_memory_spans, 1)
register("fast_path-coalesced_shared", case_coalesced_shared_memory_reduced_once, 1)
register("fast_path-unseen_op", case_unseen_op_takes_the_full_path, 1)
register("fast_path-full", case_other_calls_take_the_full_path, 1)
register("fast_path-coalesced_layouts", case_coalesced_layouts_differ_by_rank, 1)
register("fast_path-forced_after_cached", case_forced_choice_after_the_common_path, 2)
register("fast_path-stand_in", case_stand_in_keeps_the_choice_by_size, 1)
register("fast_path-one_choice", case_a_choice_that_does_not_change_reads_no_size, 1)
register("fast_path-size_from_shape", case_a_choice_by_size_takes_the_size_from_the_shape, 1)
register("fast_path-none_in_list", case_none_in_a_list_is_refused, 1)
