"""The object collectives (all_gather_object, broadcast_object_list, gather_object,
scatter_object_list, send_object_list, recv_object_list): varied objects (dicts, numpy arrays,
strings, None, empty lists, ~1 MB objects, sizes that differ per rank), every root, sub-groups
(global ranks and group_src/group_dst), and bad input that raises on the calling rank before any
communication.

Every rank can rebuild every rank's objects (:func:`payload`), so each checks what it received.
Each result is recorded as the SHA-256 of its pickle, so the parity test compares the frameworks.
"""

from __future__ import annotations

import hashlib
import pickle
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import compat
from tests.ranks.cases import RECORDS, follow_up, members, rank, register, subgroup, world

BIG = 1 << 20  # ~1 MB objects


def payload(who: int, index: int = 0, big: bool = False) -> Any:
    """Rank ``who``'s object number ``index``: a different kind and size per rank and index."""
    rng = np.random.default_rng([who, index, 7])
    kind = (who + index) % 5
    if big:
        return {"rank": who, "weights": rng.standard_normal(BIG // 8 + who * 1000)}
    if kind == 0:
        return {"rank": who, "index": index, "array": rng.integers(0, 9, size=(who + 1, 3))}
    if kind == 1:
        return "x" * (who * 37 + index) + f"-rank{who}"
    if kind == 2:
        return None
    if kind == 3:
        return []
    return [who, (index, 2.5), {"nested": np.arange(who * 11, dtype=np.float32)}, b"\x00\xff"]


def same(actual: Any, expected: Any, what: str) -> None:
    """``actual`` equals ``expected`` (numpy arrays compared by value, dtype and shape)."""
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{what}: expected an ndarray, got {actual!r:.80}"
        assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), f"{what}: keys"
        for key in expected:
            same(actual[key], expected[key], f"{what}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected), f"{what}: {type(actual)} != {type(expected)}"
        assert len(actual) == len(expected), f"{what}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            same(a, e, f"{what}[{i}]")
    else:
        assert type(actual) is type(expected) and actual == expected, (
            f"{what}: {actual!r:.80} != {expected!r:.80}"
        )


def record(result: Any) -> None:
    digest = hashlib.sha256(pickle.dumps(result)).digest()
    RECORDS.append(np.frombuffer(digest, dtype=np.uint8).copy())


def group_of(use_group: bool) -> compat.Group | None:
    return subgroup() if use_group else None


# -- all_gather_object --------------------------------------------------------------------------


def case_all_gather_object(kit: Any, use_group: bool, big: bool) -> None:
    group = group_of(use_group)
    ranks = members(group)
    if rank() not in ranks:
        return
    out: list[Any] = ["stale"] * len(ranks)
    # With big, only the last rank's object is ~1 MB: sizes differ a lot from rank to rank.
    assert (
        compat.all_gather_object(out, payload(rank(), big=big and rank() == ranks[-1]), group)
        is None
    )
    for i, who in enumerate(ranks):
        same(out[i], payload(who, big=big and who == ranks[-1]), f"object_list[{i}]")
    record(out)


# -- broadcast_object_list ----------------------------------------------------------------------


def case_broadcast_object_list(kit: Any, use_group: bool, by_group_rank: bool) -> None:
    group = group_of(use_group)
    ranks = members(group)
    if rank() not in ranks:
        return
    for position, src in enumerate(ranks):
        count = 4 + position
        expected = [payload(src, i) for i in range(count)]
        objects = list(expected) if rank() == src else [None] * count
        if by_group_rank:
            returned = compat.broadcast_object_list(objects, group=group, group_src=position)
        else:
            returned = compat.broadcast_object_list(objects, src, group)
        assert returned is None, returned
        same(objects, expected, f"object_list (src={src})")
        record(objects)


def case_broadcast_object_list_default_src_big(kit: Any) -> None:
    expected = [payload(0, big=True), "tail"]
    objects = list(expected) if rank() == 0 else [None, None]
    compat.broadcast_object_list(objects, device="cpu")  # src defaults to 0, as in torch
    same(objects, expected, "object_list")
    record(objects)


def case_broadcast_object_list_empty(kit: Any) -> None:
    objects: list[Any] = []
    compat.broadcast_object_list(objects, src=world() - 1)
    assert objects == []


# -- gather_object ------------------------------------------------------------------------------


def case_gather_object(kit: Any, use_group: bool, by_group_rank: bool) -> None:
    group = group_of(use_group)
    ranks = members(group)
    if rank() not in ranks:
        return
    for position, dst in enumerate(ranks):
        out: list[Any] | None = ["stale"] * len(ranks) if rank() == dst else None
        mine = payload(rank(), position, big=position == 1 and rank() == ranks[0])
        if by_group_rank:
            returned = compat.gather_object(mine, out, group=group, group_dst=position)
        else:
            returned = compat.gather_object(mine, out, dst, group)
        assert returned is None, returned
        if rank() == dst:
            assert out is not None
            for i, who in enumerate(ranks):
                expected = payload(who, position, big=position == 1 and who == ranks[0])
                same(out[i], expected, f"object_gather_list[{i}] (dst={dst})")
            record(out)


# -- scatter_object_list ------------------------------------------------------------------------


def case_scatter_object_list(kit: Any, use_group: bool, by_group_rank: bool) -> None:
    group = group_of(use_group)
    ranks = members(group)
    if rank() not in ranks:
        return
    me = ranks.index(rank())
    for position, src in enumerate(ranks):
        inputs = [
            payload(who, position, big=position == 0 and i == 0) for i, who in enumerate(ranks)
        ]
        out: list[Any] = ["stale", "kept"]
        # Ignored on ranks other than src, as in torch.
        given = inputs if rank() == src else ["ignored"]
        if by_group_rank:
            returned = compat.scatter_object_list(out, given, group=group, group_src=position)
        else:
            returned = compat.scatter_object_list(out, given, src, group)
        assert returned is None, returned
        same(out[0], inputs[me], f"scatter_object_output_list[0] (src={src})")
        assert out[1] == "kept", "only the first entry is written"
        record(out[0])


# -- send_object_list / recv_object_list --------------------------------------------------------


def case_send_recv_object_list(kit: Any, use_group: bool, by_group_rank: bool) -> None:
    group = group_of(use_group)
    ranks = members(group)
    if rank() not in ranks:
        return
    # Every ordered pair, one at a time (blocking calls): the sizes differ per pair.
    for a, sender in enumerate(ranks):
        for b, receiver in enumerate(ranks):
            if sender == receiver:
                continue
            expected = [payload(sender, i, big=i == 0 and b == 0) for i in range(b + 2)]
            if rank() == sender:
                if by_group_rank:
                    sent = compat.send_object_list(list(expected), group=group, group_dst=b)
                else:
                    sent = compat.send_object_list(list(expected), receiver, group)
                assert sent is None, sent
            elif rank() == receiver:
                objects: list[Any] = [None] * len(expected)
                if by_group_rank:
                    got = compat.recv_object_list(objects, group=group, group_src=a)
                else:
                    got = compat.recv_object_list(objects, sender, group, use_batch=True)
                assert got == sender, f"recv_object_list returned {got}, expected {sender}"
                same(objects, expected, f"object_list ({sender} -> {receiver})")
                record(objects)
    compat.barrier(group)


def case_send_recv_object_list_empty(kit: Any) -> None:
    if rank() == 0:
        compat.send_object_list([], world() - 1, device="cpu")
    elif rank() == world() - 1:
        objects: list[Any] = []
        assert compat.recv_object_list(objects, 0) == 0
        assert objects == []
    compat.barrier()


for _group in (False, True):
    _where = "subgroup" if _group else "world"
    for _big in (False, True):
        register(
            f"objects_all_gather_object[{_where}{'-1MB' if _big else ''}]",
            partial(case_all_gather_object, use_group=_group, big=_big),
        )
    for _by_group_rank in (False, True):
        _how = f"{_where}-{'group_rank' if _by_group_rank else 'global_rank'}"
        register(
            f"objects_broadcast_object_list[{_how}]",
            partial(case_broadcast_object_list, use_group=_group, by_group_rank=_by_group_rank),
        )
        register(
            f"objects_gather_object[{_how}]",
            partial(case_gather_object, use_group=_group, by_group_rank=_by_group_rank),
        )
        register(
            f"objects_scatter_object_list[{_how}]",
            partial(case_scatter_object_list, use_group=_group, by_group_rank=_by_group_rank),
        )
        register(
            f"objects_send_recv_object_list[{_how}]",
            partial(case_send_recv_object_list, use_group=_group, by_group_rank=_by_group_rank),
            min_world=2,
        )
register(
    "objects_broadcast_object_list[default_src-1MB]", case_broadcast_object_list_default_src_big
)
register("objects_broadcast_object_list[empty]", case_broadcast_object_list_empty)
register("objects_send_recv_object_list[empty]", case_send_recv_object_list_empty, min_world=2)


# -- bad input: raised on the calling rank before any communication -----------------------------


def expect_raise(
    call: Callable[[], object], error: type[BaseException], param: str | None, fragments: list[str]
) -> None:
    """``call`` raises ``error`` whose message starts with ``param:`` (None: any start) and
    holds every fragment."""
    try:
        call()
    except error as exc:
        message = str(exc)
    else:
        raise AssertionError(f"expected {error.__name__} naming {param}; nothing was raised")
    if param is not None:
        assert message.startswith(f"{param}:"), f"message does not start with {param!r}: {message}"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from the message: {message}"


def bad_object_case(name: str, min_world: int = 1) -> Callable[[Callable[[Any], None]], Any]:
    """Register a bad-input case; every rank then runs the follow-up collective, and an
    all_gather_object that must still give the right result."""

    def decorate(function: Callable[[Any], None]) -> Callable[[Any], None]:
        def run(kit: Any) -> None:
            function(kit)
            follow_up(kit)
            out: list[Any] = [None] * world()
            compat.all_gather_object(out, payload(rank()))
            same(out, [payload(who) for who in range(world())], "all_gather_object after")

        register(f"bad_input[objects-{name}]", run, min_world)
        return function

    return decorate


@bad_object_case("object_list_not_a_list")
def _(kit: Any) -> None:
    expect_raise(
        lambda: compat.all_gather_object(tuple([None] * world()), 1),  # type: ignore[arg-type]
        TypeError, "object_list", [f"a list of {world()} objects", "got tuple"],
    )  # fmt: skip
    expect_raise(
        lambda: compat.broadcast_object_list("abc", src=0),  # type: ignore[arg-type]
        TypeError, "object_list", ["expected a list", "got str"],
    )  # fmt: skip


@bad_object_case("object_list_length")
def _(kit: Any) -> None:
    out = ["untouched"] * (world() + 1)
    expect_raise(
        lambda: compat.all_gather_object(out, 1),
        ValueError, "object_list", [f"{world()} objects", f"got {world() + 1}"],
    )  # fmt: skip
    assert out == ["untouched"] * (world() + 1), "object_list was modified"


@bad_object_case("unpicklable_obj")
def _(kit: Any) -> None:
    out = ["untouched"] * world()
    # The pickling error itself (TypeError: cannot pickle '_thread.lock' object), before any
    # communication: the other ranks make the same bad call, so nobody waits.
    expect_raise(
        lambda: compat.all_gather_object(out, {"lock": threading.Lock()}),
        TypeError, None, ["pickle"],
    )  # fmt: skip
    assert out == ["untouched"] * world()
    expect_raise(
        lambda: compat.gather_object(threading.Lock(), [None] * world() if rank() == 0 else None),
        TypeError, None, ["pickle"],
    )  # fmt: skip


@bad_object_case("unpicklable_on_the_root_only")
def _(kit: Any) -> None:
    # Only the root makes a call (a bad one); it raises before sending anything.
    if rank() == 0:
        objects = [1, threading.Lock()]
        expect_raise(lambda: compat.broadcast_object_list(objects, 0), TypeError, None, ["pickle"])
        inputs = [threading.Lock()] * world()
        expect_raise(
            lambda: compat.scatter_object_list([None], inputs, 0), TypeError, None, ["pickle"]
        )


@bad_object_case("root_not_in_group")
def _(kit: Any) -> None:
    n = world()
    expect_raise(
        lambda: compat.broadcast_object_list([None], src=n),
        ValueError, "src", [f"one of {list(range(n))}", f"got {n}"],
    )  # fmt: skip
    expect_raise(lambda: compat.gather_object(1, None, dst=-1), ValueError, "dst", ["got -1"])
    expect_raise(
        lambda: compat.scatter_object_list([None], None, src="0"),  # type: ignore[arg-type]
        TypeError, "src", ["expected an int", "got str"],
    )  # fmt: skip
    expect_raise(
        lambda: compat.broadcast_object_list([None], group_src=n),
        ValueError, "group_src", [f"0 to {n - 1}", f"got {n}"],
    )  # fmt: skip
    expect_raise(
        lambda: compat.gather_object(1, None, dst=0, group_dst=0),
        ValueError, "dst", ["not both"],
    )  # fmt: skip


@bad_object_case("root_not_in_subgroup", min_world=3)
def _(kit: Any) -> None:
    group = subgroup()  # ranks {0, last}: rank 1 is not in it
    if rank() in group.ranks:
        expect_raise(
            lambda: compat.scatter_object_list([None], ["a", "b"], src=1, group=group),
            ValueError, "src", ["a global rank in the group", "got 1"],
        )  # fmt: skip


@bad_object_case("lists_on_the_root")
def _(kit: Any) -> None:
    # Only the root calls: a wrong list there raises before any communication.
    if rank() == 0:
        expect_raise(
            lambda: compat.gather_object(1, [None] * (world() + 1), dst=0),
            ValueError, "object_gather_list", [f"{world()} objects", f"got {world() + 1}"],
        )  # fmt: skip
        expect_raise(
            lambda: compat.gather_object(1, None, dst=0),
            TypeError, "object_gather_list", ["expected a list", "got NoneType"],
        )  # fmt: skip
        expect_raise(
            lambda: compat.scatter_object_list([None], ["a"] * (world() + 1), src=0),
            ValueError, "scatter_object_input_list", [f"{world()} objects"],
        )  # fmt: skip
        expect_raise(
            lambda: compat.scatter_object_list([None], None, src=0),
            TypeError, "scatter_object_input_list", ["expected a list", "got NoneType"],
        )  # fmt: skip


@bad_object_case("gather_list_off_the_root", min_world=2)
def _(kit: Any) -> None:
    if rank() != 0:
        expect_raise(
            lambda: compat.gather_object(1, [None] * world(), dst=0),
            ValueError, "object_gather_list", ["expected None on ranks other than dst=0"],
        )  # fmt: skip


@bad_object_case("scatter_output_list")
def _(kit: Any) -> None:
    expect_raise(
        lambda: compat.scatter_object_list([], ["a"] * world(), src=0),
        ValueError, "scatter_object_output_list", ["at least 1"],
    )  # fmt: skip
    expect_raise(
        lambda: compat.scatter_object_list(None, ["a"] * world(), src=0),  # type: ignore[arg-type]
        TypeError, "scatter_object_output_list", ["expected a list"],
    )  # fmt: skip


@bad_object_case("point_to_point", min_world=2)
def _(kit: Any) -> None:
    me, n = rank(), world()
    expect_raise(
        lambda: compat.send_object_list([1], me), ValueError, "dst", ["other than this rank"]
    )
    expect_raise(
        lambda: compat.recv_object_list([None], me), ValueError, "src", ["other than this rank"]
    )
    expect_raise(lambda: compat.recv_object_list([None]), ValueError, "src", ["got neither"])
    expect_raise(lambda: compat.send_object_list([1], n), ValueError, "dst", [f"got {n}"])
    expect_raise(
        lambda: compat.send_object_list([1], group_dst=me), ValueError, "group_dst",
        ["other than this rank"],
    )  # fmt: skip
    expect_raise(
        lambda: compat.recv_object_list((None,), (me + 1) % n),  # type: ignore[arg-type]
        TypeError, "object_list", ["expected a list", "got tuple"],
    )  # fmt: skip
    expect_raise(
        lambda: compat.send_object_list([1], (me + 1) % n, use_batch=1),  # type: ignore[arg-type]
        TypeError, "use_batch", ["expected a bool"],
    )  # fmt: skip
    expect_raise(
        lambda: compat.send_object_list([1], (me + 1) % n, device="no-such-device"),
        TypeError, "device", ["got str"],
    )  # fmt: skip
