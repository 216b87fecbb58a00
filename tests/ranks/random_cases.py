"""A randomized differential check: every rank runs the same seeded random sequence of calls over
the whole collective API (both reduce_scatter styles, every collective, point to point, groups and
the world, dtypes, ops, even and uneven splits, empty parts, ``out=``, views of every layout,
several async calls outstanding before their waits), and checks each result against numpy
inside a sentinel-filled base tensor. A failure names the seed and the call index, so it replays:
``random_sequence(kit, seed, calls)`` runs the same calls again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

import compat
from tests.ranks.cases import (
    FLOAT_DTYPES,
    SENTINEL,
    assert_close,
    rank,
    reduce_np,
    register,
    values,
    world,
)
from tests.ranks.layout_cases import LAYOUTS, Placed

DTYPES = ["float32", "float64", "int32", "int64", "float16", "bfloat16"]
OPS = ["sum", "prod", "min", "max", "avg"]
Check = Callable[[], None]
Result = tuple[Any, Check]


@dataclass(frozen=True)
class Draw:
    """The arguments drawn for one call."""

    tag: str
    ranks: list[int]
    group: compat.Group | None
    layout: str
    dtype: str
    op: str
    async_op: bool
    cols: int


class Sequence:
    """One rank's view of a seeded random sequence of calls."""

    def __init__(self, kit: Any, seed: int) -> None:
        self.kit, self.seed = kit, seed
        self.rng = np.random.default_rng(seed)  # the same draws on every rank
        n = world()
        subsets = [list(range(n))] + ([[0, n - 1], [1, n - 1]] if n >= 3 else [])
        self.groups: list[tuple[list[int], compat.Group | None]] = [(list(range(n)), None)]
        self.groups += [(ranks, compat.new_group(ranks)) for ranks in subsets]
        self.pending: list[tuple[Any, Check]] = []

    # -- draws (identical on every rank) -------------------------------------------------------
    def pick(self, options: list[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def sizes(self, count: int, even: bool) -> list[int]:
        if even:
            return [int(self.rng.integers(0, 3))] * count
        return [int(size) for size in self.rng.integers(0, 4, size=count)]

    # -- one call ------------------------------------------------------------------------------
    def step(self, index: int) -> None:
        name = self.pick(sorted(CALLS))
        ranks, group = self.pick(self.groups)
        layout = self.pick(sorted(LAYOUTS))
        dtype = self.pick(DTYPES)
        op = self.pick([op for op in OPS if op != "avg" or dtype in FLOAT_DTYPES])
        async_op = bool(self.rng.random() < 0.4)
        cols = int(self.rng.integers(1, 4))
        tag = f"{self.seed}-{index}"
        what = (
            f"seed {self.seed} call {index}: {name} layout={layout} dtype={dtype} op={op} "
            f"group={ranks} async={async_op}"
        )
        if name == "send_recv":
            async_op = False  # send and recv are blocking
        flush_after = bool(self.rng.random() < 0.3)
        draw = Draw(tag, ranks, group, layout, dtype, op, async_op, cols)
        if rank() not in ranks:
            CALLS[name](self, draw, dry=True)  # the same draws as the members, no part in it
            return
        result = CALLS[name](self, draw)
        assert result is not None
        returned, check = result
        work = returned[1] if isinstance(returned, tuple) else returned
        labelled = _labelled(check, what)
        if async_op:
            assert isinstance(work, compat.Work), f"{what}: expected a Work, got {work!r}"
            self.pending.append((work, labelled))
        else:
            assert work is None or not isinstance(work, compat.Work), what
            labelled()
        if len(self.pending) >= 3 or flush_after:
            self.flush()

    def flush(self) -> None:
        for work, check in self.pending:
            assert work.wait() is True
            check()
        self.pending.clear()


def _labelled(check: Check, what: str) -> Check:
    def run() -> None:
        try:
            check()
        except AssertionError as error:
            raise AssertionError(f"{what}: {error}") from None

    return run


# -- the calls: each returns (what the API returned, the check to run once it completed) -----


def _data(tag: str, who: int, shape: tuple[int, ...], op: str) -> np.ndarray:
    return values(tag, who, shape, op)


def call_all_reduce(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows = int(s.rng.integers(0, 4))
    if dry:
        return None
    shape = _shape(c.layout, rows, c.cols)
    x = Placed(s.kit, _data(c.tag, rank(), shape, c.op), c.dtype, c.layout)
    returned = compat.all_reduce(x.view, c.op, c.group, c.async_op)
    x.result(reduce_np([_data(c.tag, r, shape, c.op) for r in c.ranks], c.op))
    return returned, partial(x.check, "all_reduce")


def call_broadcast(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows, src = int(s.rng.integers(0, 4)), s.pick(c.ranks)
    if dry:
        return None
    shape = _shape(c.layout, rows, c.cols)
    x = Placed(s.kit, _data(c.tag, rank(), shape, "sum"), c.dtype, c.layout)
    returned = compat.broadcast(x.view, src, c.group, c.async_op)
    x.result(_data(c.tag, src, shape, "sum"))
    return returned, partial(x.check, "broadcast")


def call_reduce(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows, dst = int(s.rng.integers(0, 4)), s.pick(c.ranks)
    if dry:
        return None
    shape = _shape(c.layout, rows, c.cols)
    x = Placed(s.kit, _data(c.tag, rank(), shape, c.op), c.dtype, c.layout)
    returned = compat.reduce(x.view, dst, c.op, c.group, c.async_op)
    if rank() == dst:
        x.result(reduce_np([_data(c.tag, r, shape, c.op) for r in c.ranks], c.op))
    return returned, partial(x.check, "reduce")


def call_all_gather(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    sizes = s.sizes(len(c.ranks), even=bool(s.rng.random() < 0.5))
    if dry:
        return None
    me = c.ranks.index(rank())
    x = Placed(s.kit, _data(c.tag, rank(), (sizes[me], c.cols), "sum"), c.dtype, "dense")
    outs = [_out(s.kit, (size, c.cols), c.dtype, c.layout) for size in sizes]
    returned = compat.all_gather([out.view for out in outs], x.view, c.group, c.async_op)
    for out, r, size in zip(outs, c.ranks, sizes, strict=True):
        out.result(_data(c.tag, r, (size, c.cols), "sum"))
    return returned, _all(*(partial(out.check, "all_gather") for out in outs))


def call_all_gather_into_tensor(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    even = bool(s.rng.random() < 0.5)
    sizes, use_out = s.sizes(len(c.ranks), even), bool(s.rng.random() < 0.5)
    if dry:
        return None
    me = c.ranks.index(rank())
    x = Placed(s.kit, _data(c.tag, rank(), (sizes[me], c.cols), "sum"), c.dtype, c.layout)
    out = _out(s.kit, (sum(sizes), c.cols), c.dtype, c.layout) if use_out else None
    split = None if even else sizes
    returned = compat.all_gather_into_tensor(
        x.view, c.group, c.async_op, out=None if out is None else out.view, output_split_sizes=split
    )
    expected = np.concatenate(
        [_data(c.tag, r, (size, c.cols), "sum") for r, size in zip(c.ranks, sizes, strict=True)]
    )
    result = returned[0] if c.async_op else returned

    def check() -> None:
        assert_close(s.kit.numpy(result), expected, c.dtype, "all_gather_into_tensor")
        if out is not None:
            out.result(expected)
            out.check("all_gather_into_tensor out")
        x.check("all_gather_into_tensor input")

    return returned, check


def call_reduce_scatter(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    sizes = s.sizes(len(c.ranks), even=bool(s.rng.random() < 0.5))
    if dry:
        return None
    me = c.ranks.index(rank())
    inputs = [
        Placed(s.kit, _data(c.tag, rank() * 10 + i, (size, c.cols), c.op), c.dtype, c.layout)
        for i, size in enumerate(sizes)
    ]
    out = _out(s.kit, (sizes[me], c.cols), c.dtype, c.layout)
    returned = compat.reduce_scatter(out.view, [x.view for x in inputs], c.op, c.group, c.async_op)
    out.result(
        reduce_np([_data(c.tag, r * 10 + me, (sizes[me], c.cols), c.op) for r in c.ranks], c.op)
    )
    return returned, _all(
        partial(out.check, "reduce_scatter"), *(partial(x.check, "input") for x in inputs)
    )


def call_reduce_scatter_tensor(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    even = bool(s.rng.random() < 0.5)
    sizes, use_out = s.sizes(len(c.ranks), even), bool(s.rng.random() < 0.5)
    if dry:
        return None
    me = c.ranks.index(rank())
    total = sum(sizes)
    x = Placed(s.kit, _data(c.tag, rank(), (total, c.cols), c.op), c.dtype, c.layout)
    out = _out(s.kit, (sizes[me], c.cols), c.dtype, c.layout) if use_out else None
    returned = compat.reduce_scatter_tensor(
        x.view, c.op, c.group, c.async_op, out=None if out is None else out.view,
        input_split_sizes=None if even else sizes,
    )  # fmt: skip
    start = sum(sizes[:me])
    expected = reduce_np([_data(c.tag, r, (total, c.cols), c.op) for r in c.ranks], c.op)[
        start : start + sizes[me]
    ]
    result = returned[0] if c.async_op else returned

    def check() -> None:
        assert_close(s.kit.numpy(result), expected, c.dtype, "reduce_scatter_tensor")
        if out is not None:
            out.result(expected)
            out.check("reduce_scatter_tensor out")
        x.check("reduce_scatter_tensor input")

    return returned, check


def call_scatter(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows, src = int(s.rng.integers(0, 3)), s.pick(c.ranks)
    if dry:
        return None
    me = c.ranks.index(rank())
    out = _out(s.kit, (rows, c.cols), c.dtype, c.layout)
    parts = None
    if rank() == src:
        parts = [
            Placed(s.kit, _data(c.tag, i, (rows, c.cols), "sum"), c.dtype, c.layout)
            for i in range(len(c.ranks))
        ]
    views = None if parts is None else [part.view for part in parts]
    returned = compat.scatter(out.view, views, src, c.group, c.async_op)
    out.result(_data(c.tag, me, (rows, c.cols), "sum"))
    return returned, _all(
        partial(out.check, "scatter"), *(partial(p.check, "input") for p in parts or [])
    )


def call_scatter_tensor(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows, src = int(s.rng.integers(0, 3)), s.pick(c.ranks)
    use_out = bool(s.rng.random() < 0.5)
    if dry:
        return None
    n, me = len(c.ranks), c.ranks.index(rank())
    x = Placed(s.kit, _data(c.tag, rank(), (rows * n, c.cols), "sum"), c.dtype, c.layout)
    out = _out(s.kit, (rows, c.cols), c.dtype, c.layout) if use_out else None
    returned = compat.scatter_tensor(
        x.view, src, c.group, c.async_op, out=None if out is None else out.view
    )
    expected = _data(c.tag, src, (rows * n, c.cols), "sum")[rows * me : rows * me + rows]
    result = returned[0] if c.async_op else returned

    def check() -> None:
        assert_close(s.kit.numpy(result), expected, c.dtype, "scatter_tensor")
        if out is not None:
            out.result(expected)
            out.check("scatter_tensor out")
        x.check("scatter_tensor input")

    return returned, check


def call_gather(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows, dst = int(s.rng.integers(0, 3)), s.pick(c.ranks)
    if dry:
        return None
    x = Placed(s.kit, _data(c.tag, rank(), (rows, c.cols), "sum"), c.dtype, c.layout)
    outs = (
        [_out(s.kit, (rows, c.cols), c.dtype, c.layout) for _ in c.ranks] if rank() == dst else []
    )
    returned = compat.gather(
        x.view, [o.view for o in outs] if outs else None, dst, c.group, c.async_op
    )
    for out, r in zip(outs, c.ranks, strict=False):
        out.result(_data(c.tag, r, (rows, c.cols), "sum"))
    return returned, _all(
        partial(x.check, "gather input"), *(partial(o.check, "gather") for o in outs)
    )


def call_all_to_all_single(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    n = len(c.ranks)
    even = bool(s.rng.random() < 0.5)
    sends = [s.sizes(n, even=even) for _ in range(n)]  # sends[i][j]: rows c.group rank i sends j
    if even:
        sends = [[sends[0][0]] * n for _ in range(n)]
    if dry:
        return None
    me = c.ranks.index(rank())
    mine = sends[me]
    receives = [sends[j][me] for j in range(n)]
    x = Placed(s.kit, _data(c.tag, rank(), (sum(mine), c.cols), "sum"), c.dtype, c.layout)
    out = _out(s.kit, (sum(receives), c.cols), c.dtype, c.layout)
    splits = (None, None) if even else (receives, mine)
    returned = compat.all_to_all_single(out.view, x.view, splits[0], splits[1], c.group, c.async_op)
    pieces = []
    for j, r in enumerate(c.ranks):
        theirs = _data(c.tag, r, (sum(sends[j]), c.cols), "sum")
        start = sum(sends[j][:me])
        pieces.append(theirs[start : start + sends[j][me]])
    out.result(np.concatenate(pieces))
    return returned, _all(partial(out.check, "all_to_all_single"), partial(x.check, "input"))


def call_send_recv(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows = int(s.rng.integers(0, 3))
    if dry:
        return None
    if len(c.ranks) < 2:
        return None, lambda: None
    sender, receiver = c.ranks[0], c.ranks[-1]
    shape = _shape(c.layout, rows, c.cols)
    if rank() == sender:
        x = Placed(s.kit, _data(c.tag, sender, shape, "sum"), c.dtype, c.layout)
        compat.send(x.view, receiver, c.group)
        check: Check = partial(x.check, "send input")
    elif rank() == receiver:
        out = _out(s.kit, shape, c.dtype, c.layout)
        compat.recv(out.view, sender, c.group)
        out.result(_data(c.tag, sender, shape, "sum"))
        check = partial(out.check, "recv")
    else:
        check = lambda: None  # noqa: E731
    return None, check


CALLS: dict[str, Callable[..., Any]] = {
    "all_reduce": call_all_reduce,
    "broadcast": call_broadcast,
    "reduce": call_reduce,
    "all_gather": call_all_gather,
    "all_gather_into_tensor": call_all_gather_into_tensor,
    "reduce_scatter": call_reduce_scatter,
    "reduce_scatter_tensor": call_reduce_scatter_tensor,
    "scatter": call_scatter,
    "scatter_tensor": call_scatter_tensor,
    "gather": call_gather,
    "all_to_all_single": call_all_to_all_single,
    "send_recv": call_send_recv,
}


def _shape(layout: str, rows: int, cols: int) -> tuple[int, ...]:
    return (rows, cols)


def _out(kit: Any, shape: tuple[int, ...], dtype: str, layout: str) -> Placed:
    return Placed(kit, np.full(shape, SENTINEL, dtype=np.float64), dtype, layout)


def _all(*checks: Check) -> Check:
    def run() -> None:
        for check in checks:
            check()

    return run


def random_sequence(kit: Any, seed: int, calls: int) -> None:
    sequence = Sequence(kit, seed)
    for index in range(calls):
        sequence.step(index)
    sequence.flush()
    compat.barrier()


for _seed in (1, 2, 3):
    register(f"random-sequence[seed{_seed}]", partial(random_sequence, seed=_seed, calls=60))
