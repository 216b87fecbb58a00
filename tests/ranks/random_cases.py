"""A randomized differential check: every rank runs the same seeded random sequence of calls over
the whole public API (both reduce_scatter styles and torch's forms, every collective, point to
point with its Works outstanding across later calls (not on MCCL: see Sequence.deferred), the
object collectives, barriers; groups given as None, compat.WORLD or a sub-group, roots as global
or group ranks; every dtype and op, even and uneven splits with empty parts, ``out=``, ``dim=``,
views of every layout, several async calls outstanding, waited in either order), and checks each
result against numpy inside a sentinel-filled base tensor. What the backend refuses
(capabilities.toml: its dtypes, AVG of integers) is drawn too and must raise UnsupportedError.

A mismatch is counted and the sequence goes on (a check communicates nothing, so the ranks stay
in step); an exception stops it. Either names the seed and the call index, so it replays:
``random_sequence(kit, seed, calls)`` runs the same calls again (``calls`` = the index + 1), as
does ``COMPAT_SOAK_SEED=<seed> COMPAT_SOAK_CALLS=<index + 1> make soak``.

The short sequences run inside the collective jobs (``make test``); the soak (``make soak``,
tests/test_soak.py) runs 10,000 calls per job through this module's own CASES.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import compat
import compat.core.state
from compat.base import tables
from tests.ranks.cases import (
    FLOAT_DTYPES,
    RECORDS,
    SENTINEL,
    Case,
    assert_close,
    rank,
    reduce_np,
    register,
    values,
    world,
)
from tests.ranks.layout_cases import LAYOUTS, Placed
from tests.ranks.object_cases import payload, same

# Every dtype either CPU backend takes, plus int16, which neither does ('Invalid scalar type'
# from Gloo): the same list on both frameworks, so that a seed draws the same calls on both.
DTYPES = ["float32", "float64", "int32", "int64", "float16", "bfloat16", "int8", "uint8", "bool"]
DTYPES += ["int16"]
OPS = ["sum", "prod", "min", "max", "avg"]
# Only results of dtypes both backends take are recorded: the parity test compares the records of
# the two frameworks one by one (tests/test_parity.py).
SHARED_DTYPES = set(tables.lookup("capabilities", "gloo", "dtypes")) & set(
    tables.lookup("capabilities", "mccl", "dtypes")
)
REDUCING = {"all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor"}
UNTYPED = {"objects", "barrier"}  # no tensor argument, so no dtype to refuse
PEER_TO_PEER = {"send_recv", "ring"}  # need two ranks
Check = Callable[[], None]
Result = tuple[Any, Check]


@dataclass(frozen=True)
class Draw:
    """The arguments drawn for one call."""

    index: int
    tag: str
    ranks: list[int]
    group: Any  # None, compat.WORLD or a compat.Group
    layout: str
    dtype: str
    op: str
    async_op: bool
    cols: int
    by_group_rank: bool  # roots and peers as ranks of the group (group_src=, ...)


class Sequence:
    """One rank's view of a seeded random sequence of calls."""

    def __init__(self, kit: Any, seed: int) -> None:
        self.kit, self.seed = kit, seed
        self.rng = np.random.default_rng(seed)  # the same draws on every rank
        n = world()
        subsets = [list(range(n))] + ([[0, n - 1], [1, n - 1]] if n >= 3 else [])
        everyone = list(range(n))
        self.groups: list[tuple[list[int], Any]] = [(everyone, None), (everyone, compat.WORLD)]
        self.groups += [(ranks, compat.new_group(ranks)) for ranks in subsets]
        state = compat.core.state.get_current()
        assert state is not None
        self.accepted = set(state.backend_entry["dtypes"])
        # Where irecv runs in Work.wait() (MCCL, capabilities.toml), a ring's Works are waited for
        # before the next call: MCCL matches a message by its source alone (not by group, tag or
        # call), so any communication between a peer's isend and the irecv's wait would take
        # the ring's message (measured: 'Memcpy error' in MCCL's ring all_reduce, and swapped
        # data between a world irecv and a sub-group recv).
        self.deferred = state.backend_entry["ops"]["irecv"].get("async") == "deferred"
        self.pending: list[tuple[list[Any], str]] = []  # the Works of calls not waited for yet
        # Every check runs at a flush, in issue order, whichever calls waited there: the records
        # keep one order on every backend (the parity test compares them one by one).
        self.checks: list[Check] = []
        self.mismatches = 0
        self.first_mismatches: list[str] = []  # the first 20 (a soak's memory stays flat)
        self.calls = 0  # calls this rank took part in

    # -- draws (identical on every rank) -------------------------------------------------------
    def pick(self, options: list[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def flip(self, probability: float) -> bool:
        return bool(self.rng.random() < probability)

    def sizes(self, count: int, even: bool) -> list[int]:
        if even:
            return [int(self.rng.integers(0, 3))] * count
        return [int(size) for size in self.rng.integers(0, 4, size=count)]

    # -- one call ------------------------------------------------------------------------------
    def step(self, index: int) -> None:
        name = self.pick(sorted(name for name in CALLS if world() > 1 or name not in PEER_TO_PEER))
        ranks, group = self.pick(self.groups)
        layout, dtype, op = self.pick(sorted(LAYOUTS)), self.pick(DTYPES), self.pick(OPS)
        async_op, cols, by_group_rank = self.flip(0.4), int(self.rng.integers(1, 4)), self.flip(0.3)
        flush_after, reverse = self.flip(0.3), self.flip(0.5)
        if name in ("send_recv", "objects"):
            async_op = False  # blocking by definition
        elif name == "ring":
            async_op = True  # isend/irecv/batch_isend_irecv always give Works
        draw = Draw(index, f"{self.seed}-{index}", ranks, group, layout, dtype, op, async_op, cols,
                    by_group_rank)  # fmt: skip
        named = "None" if group is None else "WORLD" if group is compat.WORLD else ranks
        what = (
            f"seed {self.seed} call {index}: {name} layout={layout} dtype={dtype} op={op} "
            f"group={named} async={async_op} by_group_rank={by_group_rank}"
        )
        if rank() in ranks:
            self.calls += 1
            self.call(name, draw, what)
        else:
            CALLS[name](self, draw, dry=True)  # the same draws as the members, no part in it
        if len(self.pending) >= 3 or flush_after or (name == "ring" and self.deferred):
            self.flush(reverse)

    def call(self, name: str, draw: Draw, what: str) -> None:
        refused = name not in UNTYPED and (
            draw.dtype not in self.accepted
            or (name in REDUCING and draw.op == "avg" and draw.dtype not in FLOAT_DTYPES)
        )
        try:
            result = CALLS[name](self, draw)
        except Exception as error:
            if refused and isinstance(error, compat.UnsupportedError):
                return  # as the capability table says, before any communication
            raise RuntimeError(f"{what}: {type(error).__name__}: {error}") from error
        if result is None:
            return  # a member the call left out (a send and recv between two others)
        returned, check = result
        works = _works(returned)
        if refused:
            self.mismatch(f"{what}: went through where UnsupportedError was expected")
            self.pending.append((works, what))  # every rank went through alike
            return
        labelled = self.labelled(check, what, keep=name in UNTYPED or draw.dtype in SHARED_DTYPES)
        if draw.async_op:
            if not works or not all(isinstance(work, compat.Work) for work in works):
                self.mismatch(f"{what}: expected Works, got {returned!r:.200}")
            self.pending.append((works, what))
        elif works:
            self.mismatch(f"{what}: a synchronous call returned {returned!r:.200}")
        self.checks.append(labelled)

    def labelled(self, check: Check, what: str, keep: bool) -> Check:
        def run() -> None:
            recorded = len(RECORDS)
            try:
                check()
            except AssertionError as error:
                self.mismatch(f"{what}: {error}")
            if not keep:
                del RECORDS[recorded:]

        return run

    def flush(self, reverse: bool = False) -> None:
        """Wait for every outstanding call, in issue order or the reverse, then check every call
        since the last flush."""
        pending, self.pending = self.pending, []
        for works, what in pending[::-1] if reverse else pending:
            try:
                completed = [work.wait() for work in works if isinstance(work, compat.Work)]
            except Exception as error:
                raise RuntimeError(f"{what}: wait: {type(error).__name__}: {error}") from error
            if not all(done is True for done in completed):
                self.mismatch(f"{what}: Work.wait() returned {completed}")
        checks, self.checks = self.checks, []
        for check in checks:
            check()

    def mismatch(self, text: str) -> None:
        self.mismatches += 1
        if len(self.first_mismatches) < 20:
            self.first_mismatches.append(text)

    def verdict(self) -> None:
        if self.mismatches:
            shown = "\n".join(self.first_mismatches[:5])
            raise AssertionError(f"{self.mismatches} mismatches (the first 5):\n{shown}")


def _works(returned: Any) -> list[Any]:
    """The Works a call returned: a Work, a list of them, or a functional form's (tensor, Work)."""
    if isinstance(returned, tuple):
        returned = returned[1]
    if isinstance(returned, list):
        return returned
    return [returned] if isinstance(returned, compat.Work) else []


# -- the calls: each returns (what the API returned, the check to run once it completed), or
# None on a member the call leaves out. Each draws all its arguments before ``if dry``: ranks
# outside the group draw them too.


def _data(c: Draw, who: int, shape: tuple[int, ...], op: str = "sum") -> np.ndarray:
    """Rank ``who``'s values for this call (non-negative for uint8, 0/1 for bool)."""
    base = values(c.tag, who, shape, op)
    if c.dtype == "bool":
        return (base > 0).astype(np.float64)
    return base + 3 if c.dtype == "uint8" else base


def _root(c: Draw, rank_: int, name: str) -> dict[str, int]:
    """A root or peer as the keyword drawn: ``name`` (a global rank) or ``group_<name>``."""
    if c.by_group_rank:
        return {f"group_{name}": c.ranks.index(rank_)}
    return {name: rank_}


def _along(axis: int, size: int, cols: int) -> tuple[int, int]:
    """A 2-d shape: ``size`` on ``axis`` (the one split or gathered), ``cols`` on the other."""
    return (size, cols) if axis == 0 else (cols, size)


def _take(array: np.ndarray, axis: int, start: int, size: int) -> np.ndarray:
    return np.take(array, np.arange(start, start + size), axis=axis)


def call_all_reduce(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows = int(s.rng.integers(0, 4))
    if dry:
        return None
    shape = _shape(c.layout, rows, c.cols)
    x = Placed(s.kit, _data(c, rank(), shape, c.op), c.dtype, c.layout)
    returned = compat.all_reduce(x.view, c.op, c.group, c.async_op)
    x.result(reduce_np([_data(c, r, shape, c.op) for r in c.ranks], c.op))
    return returned, partial(x.check, "all_reduce")


def call_broadcast(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows, src = int(s.rng.integers(0, 4)), s.pick(c.ranks)
    if dry:
        return None
    shape = _shape(c.layout, rows, c.cols)
    x = Placed(s.kit, _data(c, rank(), shape), c.dtype, c.layout)
    returned = compat.broadcast(x.view, group=c.group, async_op=c.async_op, **_root(c, src, "src"))
    x.result(_data(c, src, shape))
    return returned, partial(x.check, "broadcast")


def call_reduce(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows, dst = int(s.rng.integers(0, 4)), s.pick(c.ranks)
    if dry:
        return None
    shape = _shape(c.layout, rows, c.cols)
    x = Placed(s.kit, _data(c, rank(), shape, c.op), c.dtype, c.layout)
    returned = compat.reduce(
        x.view, op=c.op, group=c.group, async_op=c.async_op, **_root(c, dst, "dst")
    )
    if rank() == dst:
        x.result(reduce_np([_data(c, r, shape, c.op) for r in c.ranks], c.op))
    return returned, partial(x.check, "reduce")


def call_all_gather(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    sizes = s.sizes(len(c.ranks), even=s.flip(0.5))
    if dry:
        return None
    me = c.ranks.index(rank())
    x = Placed(s.kit, _data(c, rank(), (sizes[me], c.cols)), c.dtype, "dense")
    outs = [_out(s.kit, (size, c.cols), c.dtype, c.layout) for size in sizes]
    returned = compat.all_gather([out.view for out in outs], x.view, c.group, c.async_op)
    for out, r, size in zip(outs, c.ranks, sizes, strict=True):
        out.result(_data(c, r, (size, c.cols)))
    return returned, _all(*(partial(out.check, "all_gather") for out in outs))


def call_all_gather_into_tensor(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    """The functional form (a new tensor, or out=) on any dim, or torch's all_gather_into."""
    form = s.pick(["new", "out", "into"])
    even = form == "into" or s.flip(0.5)  # the torch form gathers equal parts on dim 0 only
    sizes, dim = s.sizes(len(c.ranks), even), 0 if form == "into" else s.pick([0, 1, -1, -2])
    if dry:
        return None
    me, axis = c.ranks.index(rank()), dim % 2
    x = Placed(s.kit, _data(c, rank(), _along(axis, sizes[me], c.cols)), c.dtype, c.layout)
    shape = _along(axis, sum(sizes), c.cols)
    out = None if form == "new" else _out(s.kit, shape, c.dtype, c.layout)
    if out is not None and form == "into":
        returned = compat.all_gather_into(out.view, x.view, c.group, c.async_op)
    else:
        returned = compat.all_gather_into_tensor(
            x.view, c.group, c.async_op, out=None if out is None else out.view,
            output_split_sizes=None if even else sizes, dim=dim,
        )  # fmt: skip
    parts = zip(c.ranks, sizes, strict=True)
    expected = np.concatenate([_data(c, r, _along(axis, n, c.cols)) for r, n in parts], axis=axis)
    return returned, partial(_check_form, s, c, form, returned, out, x, expected, "all_gather")


def call_reduce_scatter(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    sizes = s.sizes(len(c.ranks), even=s.flip(0.5))
    if dry:
        return None
    me = c.ranks.index(rank())
    inputs = [
        Placed(s.kit, _data(c, rank() * 10 + i, (size, c.cols), c.op), c.dtype, c.layout)
        for i, size in enumerate(sizes)
    ]
    out = _out(s.kit, (sizes[me], c.cols), c.dtype, c.layout)
    returned = compat.reduce_scatter(out.view, [x.view for x in inputs], c.op, c.group, c.async_op)
    out.result(reduce_np([_data(c, r * 10 + me, (sizes[me], c.cols), c.op) for r in c.ranks], c.op))
    return returned, _all(
        partial(out.check, "reduce_scatter"), *(partial(x.check, "input") for x in inputs)
    )


def call_reduce_scatter_tensor(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    """The functional form (a new tensor, or out=) on any dim, or torch's reduce_scatter_into."""
    form = s.pick(["new", "out", "into"])
    even = form == "into" or s.flip(0.5)  # the torch form splits equal parts of dim 0 only
    sizes, dim = s.sizes(len(c.ranks), even), 0 if form == "into" else s.pick([0, 1, -1, -2])
    if dry:
        return None
    me, axis = c.ranks.index(rank()), dim % 2
    shape = _along(axis, sum(sizes), c.cols)
    x = Placed(s.kit, _data(c, rank(), shape, c.op), c.dtype, c.layout)
    out = None if form == "new" else _out(s.kit, _along(axis, sizes[me], c.cols), c.dtype, c.layout)
    if out is not None and form == "into":
        returned = compat.reduce_scatter_into(out.view, x.view, c.op, c.group, c.async_op)
    else:
        returned = compat.reduce_scatter_tensor(
            x.view, c.op, c.group, c.async_op, out=None if out is None else out.view,
            input_split_sizes=None if even else sizes, dim=dim,
        )  # fmt: skip
    full = reduce_np([_data(c, r, shape, c.op) for r in c.ranks], c.op)
    expected = _take(full, axis, sum(sizes[:me]), sizes[me])
    return returned, partial(_check_form, s, c, form, returned, out, x, expected, "reduce_scatter")


def _check_form(
    s: Sequence, c: Draw, form: str, returned: Any, out: Placed | None, x: Placed,
    expected: np.ndarray, what: str,
) -> None:  # fmt: skip
    """The result of a functional form (or of torch's form, in ``out``); the input unchanged."""
    if form != "into":
        result = returned[0] if c.async_op else returned
        assert_close(s.kit.numpy(result), expected, c.dtype, f"{what} ({form})")
        assert out is None or result is out.view, "with out=, the result is out itself"
    if out is not None:
        out.result(expected)
        out.check(f"{what} ({form}) out")
    x.check(f"{what} ({form}) input")


def call_scatter(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows, src = int(s.rng.integers(0, 3)), s.pick(c.ranks)
    if dry:
        return None
    me = c.ranks.index(rank())
    out = _out(s.kit, (rows, c.cols), c.dtype, c.layout)
    parts = None
    if rank() == src:
        parts = [
            Placed(s.kit, _data(c, i, (rows, c.cols)), c.dtype, c.layout)
            for i in range(len(c.ranks))
        ]
    views = None if parts is None else [part.view for part in parts]
    returned = compat.scatter(
        out.view, views, group=c.group, async_op=c.async_op, **_root(c, src, "src")
    )
    out.result(_data(c, me, (rows, c.cols)))
    return returned, _all(
        partial(out.check, "scatter"), *(partial(p.check, "input") for p in parts or [])
    )


def call_scatter_tensor(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows, src = int(s.rng.integers(0, 3)), s.pick(c.ranks)
    form = s.pick(["new", "out"])
    if dry:
        return None
    n, me = len(c.ranks), c.ranks.index(rank())
    x = Placed(s.kit, _data(c, rank(), (rows * n, c.cols)), c.dtype, c.layout)
    out = _out(s.kit, (rows, c.cols), c.dtype, c.layout) if form == "out" else None
    returned = compat.scatter_tensor(
        x.view, group=c.group, async_op=c.async_op, out=None if out is None else out.view,
        **_root(c, src, "src"),
    )  # fmt: skip
    expected = _data(c, src, (rows * n, c.cols))[rows * me : rows * me + rows]
    return returned, partial(_check_form, s, c, form, returned, out, x, expected, "scatter")


def call_gather(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    rows, dst = int(s.rng.integers(0, 3)), s.pick(c.ranks)
    if dry:
        return None
    x = Placed(s.kit, _data(c, rank(), (rows, c.cols)), c.dtype, c.layout)
    outs = (
        [_out(s.kit, (rows, c.cols), c.dtype, c.layout) for _ in c.ranks] if rank() == dst else []
    )
    returned = compat.gather(
        x.view, [o.view for o in outs] if outs else None, group=c.group, async_op=c.async_op,
        **_root(c, dst, "dst"),
    )  # fmt: skip
    for out, r in zip(outs, c.ranks, strict=False):
        out.result(_data(c, r, (rows, c.cols)))
    return returned, _all(
        partial(x.check, "gather input"), *(partial(o.check, "gather") for o in outs)
    )


def call_all_to_all_single(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    n = len(c.ranks)
    even = s.flip(0.5)
    sends = [s.sizes(n, even=even) for _ in range(n)]  # sends[i][j]: rows c.group rank i sends j
    if even:
        sends = [[sends[0][0]] * n for _ in range(n)]
    if dry:
        return None
    me = c.ranks.index(rank())
    mine = sends[me]
    receives = [sends[j][me] for j in range(n)]
    x = Placed(s.kit, _data(c, rank(), (sum(mine), c.cols)), c.dtype, c.layout)
    out = _out(s.kit, (sum(receives), c.cols), c.dtype, c.layout)
    splits = (None, None) if even else (receives, mine)
    returned = compat.all_to_all_single(out.view, x.view, splits[0], splits[1], c.group, c.async_op)
    pieces = []
    for j, r in enumerate(c.ranks):
        theirs = _data(c, r, (sum(sends[j]), c.cols))
        start = sum(sends[j][:me])
        pieces.append(theirs[start : start + sends[j][me]])
    out.result(np.concatenate(pieces))
    return returned, _all(partial(out.check, "all_to_all_single"), partial(x.check, "input"))


def call_all_to_all(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    n = len(c.ranks)
    rows = [s.sizes(n, even=False) for _ in range(n)]  # rows[i][j]: group rank i sends j
    if dry:
        return None
    me = c.ranks.index(rank())

    def part(i: int, j: int) -> np.ndarray:
        return _data(c, c.ranks[i] * 10 + j, (rows[i][j], c.cols))

    inputs = [Placed(s.kit, part(me, j), c.dtype, c.layout) for j in range(n)]
    outs = [_out(s.kit, (rows[i][me], c.cols), c.dtype, c.layout) for i in range(n)]
    returned = compat.all_to_all(
        [out.view for out in outs], [x.view for x in inputs], c.group, c.async_op
    )
    for i, out in enumerate(outs):
        out.result(part(i, me))
    return returned, _all(
        *(partial(out.check, "all_to_all") for out in outs),
        *(partial(x.check, "all_to_all input") for x in inputs),
    )


def call_send_recv(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    """Blocking send and recv between two members drawn at random."""
    rows, order = int(s.rng.integers(0, 3)), s.rng.permutation(len(c.ranks))
    if dry:
        return None
    sender, receiver = c.ranks[order[0]], c.ranks[order[1]]
    shape = _shape(c.layout, rows, c.cols)
    if rank() == sender:
        x = Placed(s.kit, _data(c, sender, shape), c.dtype, c.layout)
        compat.send(x.view, group=c.group, **_root(c, receiver, "dst"))
        return None, partial(x.check, "send input")
    if rank() == receiver:
        out = _out(s.kit, shape, c.dtype, c.layout)
        got = compat.recv(out.view, group=c.group, **_root(c, sender, "src"))
        out.result(_data(c, sender, shape))
        return None, _all(partial(out.check, "recv"), partial(_equal, got, sender, "recv's result"))
    return None


def call_ring(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    """isend to the next member, irecv from the previous one: single calls or one
    batch_isend_irecv, receives or sends first; the Works stay outstanding until a later flush,
    across the calls between."""
    rows, batch, receive_first = int(s.rng.integers(0, 3)), s.flip(0.5), s.flip(0.5)
    if dry:
        return None
    n, me = len(c.ranks), c.ranks.index(rank())
    right, left = c.ranks[(me + 1) % n], c.ranks[(me - 1) % n]
    shape = _shape(c.layout, rows, c.cols)
    source = Placed(s.kit, _data(c, rank(), shape), c.dtype, c.layout)
    target = _out(s.kit, shape, c.dtype, c.layout)
    if batch:
        ops = [
            compat.P2POp(compat.irecv, target.view, group=c.group, **_root(c, left, "peer")),
            compat.P2POp(compat.isend, source.view, group=c.group, **_root(c, right, "peer")),
        ]
        returned: Any = compat.batch_isend_irecv(ops if receive_first else ops[::-1])
    else:
        calls = [
            partial(compat.irecv, target.view, group=c.group, **_root(c, left, "src")),
            partial(compat.isend, source.view, group=c.group, **_root(c, right, "dst")),
        ]
        returned = [call() for call in (calls if receive_first else calls[::-1])]
    target.result(_data(c, left, shape))
    return returned, _all(partial(target.check, "irecv"), partial(source.check, "isend input"))


OBJECT_CALLS = ["all_gather_object", "broadcast_object_list", "gather_object",
                "scatter_object_list", "send_recv_object_list"]  # fmt: skip


def call_objects(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    """One object collective: objects of varied kinds and sizes (tests/ranks/object_cases.py)."""
    kind, count = s.pick(OBJECT_CALLS), int(s.rng.integers(0, 4))
    n = len(c.ranks)
    order = s.rng.permutation(n)
    if dry:
        return None
    root, other, me = c.ranks[order[0]], c.ranks[order[-1]], c.ranks.index(rank())
    expected: Any = None
    got: list[Any] = ["stale"] * n
    sender = root  # recv_object_list's result
    if kind == "all_gather_object":
        compat.all_gather_object(got, payload(rank(), c.index), c.group)
        expected = [payload(r, c.index) for r in c.ranks]
    elif kind == "broadcast_object_list":
        expected = [payload(root, c.index + k) for k in range(count)]
        got = list(expected) if rank() == root else [None] * count
        compat.broadcast_object_list(got, group=c.group, **_root(c, root, "src"))
    elif kind == "gather_object":
        mine = payload(rank(), c.index)
        out = got if rank() == root else None
        compat.gather_object(mine, out, group=c.group, **_root(c, root, "dst"))
        expected = [payload(r, c.index) for r in c.ranks] if rank() == root else ["stale"] * n
    elif kind == "scatter_object_list":
        inputs = [payload(r, c.index) for r in c.ranks] if rank() == root else None
        got = [None]
        compat.scatter_object_list(got, inputs, group=c.group, **_root(c, root, "src"))
        expected = [payload(c.ranks[me], c.index)]
    else:  # send_object_list / recv_object_list, between two members (other = root if n == 1)
        expected = [payload(root, c.index + k) for k in range(count)]
        got = list(expected)
        if rank() == root and other != root:
            compat.send_object_list(got, group=c.group, **_root(c, other, "dst"))
        elif rank() == other and other != root:
            got = [None] * count
            sender = compat.recv_object_list(got, group=c.group, **_root(c, root, "src"))
    return None, _all(partial(same, got, expected, kind), partial(_equal, sender, root, kind))


def call_barrier(s: Sequence, c: Draw, dry: bool = False) -> Result | None:
    monitored = s.flip(0.2)
    if dry:
        return None
    if monitored and not c.async_op:
        return compat.monitored_barrier(c.group, timeout=timedelta(seconds=120)), _nothing
    return compat.barrier(c.group, c.async_op), _nothing


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
    "all_to_all": call_all_to_all,
    "send_recv": call_send_recv,
    "ring": call_ring,
    "objects": call_objects,
    "barrier": call_barrier,
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


def _nothing() -> None:
    pass


def _equal(actual: object, expected: object, what: str) -> None:
    assert actual == expected, f"{what}: {actual!r} != {expected!r}"


def random_sequence(
    kit: Any, seed: int, calls: int, every: Callable[[int], None] | None = None
) -> Sequence:
    """Run ``calls`` calls of the sequence ``seed`` (``every(index)`` after each, if given)."""
    sequence = Sequence(kit, seed)
    for index in range(calls):
        sequence.step(index)
        if every is not None:
            every(index)
    sequence.flush()
    compat.barrier()
    return sequence


def short_sequence(kit: Any, seed: int, calls: int) -> None:
    random_sequence(kit, seed, calls).verdict()


for _seed in (1, 2, 3):
    register(f"random-sequence[seed{_seed}]", partial(short_sequence, seed=_seed, calls=100))


# -- the soak ---------------------------------------------------------------------------------


def _rss_kb() -> int:
    """This process's resident memory (VmRSS), in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def soak(kit: Any) -> None:
    """COMPAT_SOAK_CALLS calls (default 10,000) of sequence COMPAT_SOAK_SEED (default 17); each
    rank writes its figures to COMPAT_SOAK_REPORT/rank<R>.json."""
    calls = int(os.environ.get("COMPAT_SOAK_CALLS", "10000"))
    seed = int(os.environ.get("COMPAT_SOAK_SEED", "17"))
    rss = [_rss_kb()]
    started = time.perf_counter()

    def every(index: int) -> None:
        if index % 1000 == 999:
            RECORDS.clear()  # the runner keeps every checked result: not the memory measured
            rss.append(_rss_kb())

    sequence = random_sequence(kit, seed, calls, every)
    RECORDS.clear()
    report = {
        "rank": rank(), "seed": seed, "calls": calls, "took_part": sequence.calls,
        "mismatches": sequence.mismatches, "first_mismatches": sequence.first_mismatches[:5],
        "seconds": round(time.perf_counter() - started, 1), "rss_kb": [*rss, _rss_kb()],
    }  # fmt: skip
    Path(os.environ["COMPAT_SOAK_REPORT"], f"rank{rank()}.json").write_text(json.dumps(report))
    sequence.verdict()


#: The soak's own cases, outside the collective jobs: tests/test_soak.py runs them with
#: ``run_job(..., "tests.ranks.random_cases", ["soak"])`` (the runner reads a module's CASES).
CASES = {"soak": Case("soak", soak)}
