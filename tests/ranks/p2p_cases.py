"""Point to point beyond send/recv: isend, irecv, P2POp and batch_isend_irecv on real ranks.

Rings in both orders (isend first, irecv first: the order that deadlocks MCCL's own irecv), the
Megatron pipeline exchange (one batch sending and receiving both ways), several messages
outstanding and waited in reverse order, views in sentinel-filled bases, empty tensors,
sub-groups (global ranks), every dtype of each backend. Each result is checked against numpy.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

import compat
from compat import algorithms
from compat.base import tables
from compat.core import state
from tests.ranks.cases import (
    assert_close,
    rank,
    register,
    sentinel,
    subgroup,
    values,
    world,
)
from tests.ranks.layout_cases import LAYOUTS, Placed, sentinel_out

#: Every dtype each backend carries (capabilities.toml), by framework.
BACKEND_DTYPES = {
    "torch": tables.lookup("capabilities", "gloo", "dtypes"),
    "mindspore": tables.lookup("capabilities", "mccl", "dtypes"),
}


def data(seed: str, who: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Rank ``who``'s values for ``dtype`` (non-negative for uint8, 0/1 for bool)."""
    base = values(seed, who, shape)
    if dtype == "bool":
        return base > 0
    if dtype == "uint8":
        return base + 3
    return base


def ring_peers(ranks: list[int]) -> tuple[int, int]:
    """(next, previous) of this rank among ``ranks``."""
    me = ranks.index(rank())
    return ranks[(me + 1) % len(ranks)], ranks[(me - 1) % len(ranks)]


def wait_all(works: list[Any]) -> None:
    for work in works:
        assert isinstance(work, compat.Work), f"expected a compat.Work, got {work!r}"
        assert work.wait() is True
        assert work.is_completed()


# -- rings ------------------------------------------------------------------------------------


def case_ring(kit: Any, dtype: str, receive_first: bool) -> None:
    """isend to the next rank, irecv from the previous; all of one kind first on every rank."""
    right, left = ring_peers(list(range(world())))
    seed = f"p2p-ring-{dtype}"
    received = sentinel(kit, (3, 2), dtype)
    outgoing = kit.tensor(data(seed, rank(), (3, 2), dtype), dtype)
    if receive_first:
        works = [compat.irecv(received, left), compat.isend(outgoing, right)]
    else:
        works = [compat.isend(outgoing, right), compat.irecv(received, left)]
    wait_all(works)
    assert_close(kit.numpy(received), data(seed, left, (3, 2), dtype), dtype, "irecv")
    assert_close(kit.numpy(outgoing), data(seed, rank(), (3, 2), dtype), dtype, "isend input")


for _framework, _dtypes in BACKEND_DTYPES.items():
    for _dtype in _dtypes:
        # A dtype both backends carry is one case on both (the parity test compares them).
        _both = all(_dtype in dtypes for dtypes in BACKEND_DTYPES.values())
        if _both and _framework == "mindspore":
            continue
        _frameworks = ("torch", "mindspore") if _both else (_framework,)
        register(
            f"p2p_ring[{_dtype}]",
            partial(case_ring, dtype=_dtype, receive_first=False),
            2,
            _frameworks,
        )
register(
    "p2p_ring_irecv_first[float32]", partial(case_ring, dtype="float32", receive_first=True), 2
)
register("p2p_ring_irecv_first[int64]", partial(case_ring, dtype="int64", receive_first=True), 2)


def case_pipeline(kit: Any, receive_first: bool, group_name: str) -> None:
    """Megatron's pipeline exchange: one batch sends forward and backward and receives from both
    sides, repeated for a few steps."""
    group = subgroup() if group_name == "group" else None
    ranks = list(range(world())) if group is None else list(group.ranks)
    if rank() not in ranks:
        return
    right, left = ring_peers(ranks)
    for step in range(3):
        seed = f"p2p-pipeline-{step}"
        forward = kit.tensor(data(seed, rank(), (4, 3), "float32"), "float32")
        backward = kit.tensor(data(seed, rank() + 100, (4, 3), "float32"), "float32")
        from_left, from_right = sentinel(kit, (4, 3), "float32"), sentinel(kit, (4, 3), "float32")
        sends = [
            compat.P2POp(compat.isend, forward, right, group),
            compat.P2POp(compat.isend, backward, left, group),
        ]
        receives = [
            compat.P2POp(compat.irecv, from_left, left, group),
            compat.P2POp(compat.irecv, from_right, right, group),
        ]
        ops = receives + sends if receive_first else sends + receives
        works = compat.batch_isend_irecv(ops)
        assert isinstance(works, list) and len(works) == 4, works
        wait_all(works[::-1])
        # With 2 ranks left == right: the peer's two messages arrive in the order it sent them.
        expected_left = data(seed, left, (4, 3), "float32")
        expected_right = data(seed, right + 100, (4, 3), "float32")
        assert_close(kit.numpy(from_left), expected_left, "float32", f"step {step} from left")
        assert_close(kit.numpy(from_right), expected_right, "float32", f"step {step} from right")


for _order in (False, True):
    for _group in ("world", "group"):
        register(
            f"p2p_pipeline[{'recv_first' if _order else 'send_first'}-{_group}]",
            partial(case_pipeline, receive_first=_order, group_name=_group),
            2,
        )


def case_outstanding(kit: Any) -> None:
    """Three messages to the next rank outstanding at once; the receives are waited on in
    reverse order, and a blocking recv after them gets the fourth message."""
    right, left = ring_peers(list(range(world())))
    seed = "p2p-outstanding"
    messages = [data(f"{seed}-{k}", rank(), (5,), "int32") for k in range(4)]
    outgoing = [kit.tensor(message, "int32") for message in messages]
    inboxes = [sentinel(kit, (5,), "int32") for _ in range(3)]
    receives = [compat.irecv(inbox, left) for inbox in inboxes]
    sends = [compat.isend(tensor, right) for tensor in outgoing[:3]]
    last = sentinel(kit, (5,), "int32")
    if rank() % 2 == 0:
        compat.send(outgoing[3], right)
        compat.recv(last, left)
    else:
        compat.recv(last, left)
        compat.send(outgoing[3], right)
    wait_all(receives[::-1] + sends)
    for k, inbox in enumerate(inboxes):
        assert_close(kit.numpy(inbox), data(f"{seed}-{k}", left, (5,), "int32"), "int32", f"{k}")
    assert_close(kit.numpy(last), data(f"{seed}-3", left, (5,), "int32"), "int32", "recv")


register("p2p_outstanding", case_outstanding, 2)


def case_waited_again(kit: Any) -> None:
    """A Work waited for again, or asked is_completed after its wait, returns at once: torch's
    own Gloo send handle, waited for a second time, waits for another send, times out and
    closes the connection (measured with raw torch.distributed, torch 2.13); compat's Works
    (isend, irecv, batch_isend_irecv) end once. The next exchange then arrives whole."""
    right, left = ring_peers(list(range(world())))
    for round_ in range(2):
        seed = f"p2p-waited-again-{round_}"
        outgoing = kit.tensor(data(seed, rank(), (5,), "float32"), "float32")
        inbox, batched = sentinel(kit, (5,), "float32"), sentinel(kit, (5,), "float32")
        works = [compat.isend(outgoing, right), compat.irecv(inbox, left)]
        works += compat.batch_isend_irecv(
            [compat.P2POp(compat.isend, outgoing, right), compat.P2POp(compat.irecv, batched, left)]
        )
        for work in works + works:
            assert work.wait() is True
        assert all(work.is_completed() for work in works), "a waited Work is not completed"
        expected = data(seed, left, (5,), "float32")
        assert_close(kit.numpy(inbox), expected, "float32", f"irecv, round {round_}")
        assert_close(kit.numpy(batched), expected, "float32", f"batched irecv, round {round_}")


register("p2p_waited_again", case_waited_again, 2)


# -- views, empty tensors, sub-groups ---------------------------------------------------------


def case_views(kit: Any, layout: str, dtype: str, batch: bool) -> None:
    """Views as sources and destinations, in sentinel-filled bases: exactly the view's elements
    are sent and received, nothing outside them is touched."""
    right, left = ring_peers(list(range(world())))
    seed = f"p2p-views-{layout}"
    source = Placed(kit, data(seed, rank(), (3, 4), dtype), dtype, layout)
    target = sentinel_out(kit, (3, 4), dtype, layout)
    if batch:
        works = compat.batch_isend_irecv(
            [
                compat.P2POp(compat.irecv, target.view, left),
                compat.P2POp(compat.isend, source.view, right),
            ]
        )
    else:
        works = [compat.irecv(target.view, left), compat.isend(source.view, right)]
    wait_all(works)
    target.result(data(seed, left, (3, 4), dtype))
    target.check("irecv into a view")
    source.check("isend from a view")


for _layout in LAYOUTS:
    register(
        f"p2p_views[{_layout}]",
        partial(case_views, layout=_layout, dtype="float32", batch=False),
        2,
    )
    register(
        f"p2p_views_batch[{_layout}]",
        partial(case_views, layout=_layout, dtype="float32", batch=True),
        2,
    )
register(
    "p2p_views[strided-int64]", partial(case_views, layout="strided", dtype="int64", batch=False), 2
)


def case_empty(kit: Any) -> None:
    """Empty tensors move nothing and give completed Works; the next exchange is unaffected."""
    right, left = ring_peers(list(range(world())))
    for shape in ((0,), (2, 0)):
        out = kit.tensor(np.zeros(shape), "float32")
        works = [
            compat.irecv(out, left),
            compat.isend(kit.tensor(np.zeros(shape), "float32"), right),
        ]
        wait_all(works)
        assert kit.numpy(out).shape == shape
        works = compat.batch_isend_irecv(
            [
                compat.P2POp(compat.isend, kit.tensor(np.zeros(shape), "float32"), right),
                compat.P2POp(compat.irecv, out, left),
            ]
        )
        wait_all(works)
    # A batch mixing empty and non-empty tensors: only the non-empty ones move.
    received = sentinel(kit, (2,), "float32")
    works = compat.batch_isend_irecv(
        [
            compat.P2POp(compat.isend, kit.tensor(np.zeros((0, 3)), "float32"), right),
            compat.P2POp(compat.isend, kit.tensor(np.full((2,), rank() + 1), "float32"), right),
            compat.P2POp(compat.irecv, kit.tensor(np.zeros((0, 3)), "float32"), left),
            compat.P2POp(compat.irecv, received, left),
        ]
    )
    wait_all(works)
    assert_close(kit.numpy(received), np.full((2,), left + 1), "float32", "beside empty ones")


register("p2p_empty", case_empty, 2)


def case_subgroup(kit: Any, dtype: str) -> None:
    """isend/irecv inside the sub-group {0, last}, peers given as global ranks; rank 1 of a
    world of 3 is outside it and takes no part."""
    group = subgroup()
    if rank() not in group.ranks:
        return
    right, left = ring_peers(list(group.ranks))
    seed = f"p2p-subgroup-{dtype}"
    received = sentinel(kit, (4,), dtype)
    works = [
        compat.irecv(received, left, group),
        compat.isend(kit.tensor(data(seed, rank(), (4,), dtype), dtype), right, group),
    ]
    wait_all(works)
    assert_close(kit.numpy(received), data(seed, left, (4,), dtype), dtype, "sub-group irecv")


register("p2p_subgroup[float32]", partial(case_subgroup, dtype="float32"), 2)
register("p2p_subgroup[int32]", partial(case_subgroup, dtype="int32"), 2)


def case_framework_ops(kit: Any) -> None:
    """The framework's own isend/irecv as P2POp's op; on torch, torch's own P2POp objects in
    compat.batch_isend_irecv."""
    right, left = ring_peers(list(range(world())))
    if kit.framework == "torch":
        import torch.distributed as dist

        native_isend, native_irecv = dist.isend, dist.irecv
    else:
        import mindspore.mint.distributed as dist

        native_isend, native_irecv = dist.isend, dist.irecv
    received = sentinel(kit, (3,), "float32")
    works = compat.batch_isend_irecv(
        [
            compat.P2POp(native_irecv, received, left),
            compat.P2POp(native_isend, kit.tensor(np.full((3,), rank()), "float32"), right),
        ]
    )
    wait_all(works)
    assert_close(kit.numpy(received), np.full((3,), left), "float32", "framework's op")
    if kit.framework == "torch":
        received = sentinel(kit, (3,), "float32")
        works = compat.batch_isend_irecv(
            [
                dist.P2POp(dist.irecv, received, left),
                dist.P2POp(dist.isend, kit.tensor(np.full((3,), 10 + rank()), "float32"), right),
            ]
        )
        wait_all(works)
        # Checked, not recorded: the parity test compares what both frameworks record.
        np.testing.assert_array_equal(
            kit.numpy(received), np.full((3,), 10 + left), "torch's P2POp"
        )


register("p2p_framework_ops", case_framework_ops, 2)


# -- torch 2.13's signatures: group ranks, recv's result, tags --------------------------------


def case_group_ranks(kit: Any) -> None:
    """The peer given as a rank of the group (group_dst, group_src, group_peer) in the sub-group
    {0, last}, blocking and asynchronous and batched; recv returns the source's global rank."""
    group = subgroup()
    if rank() not in group.ranks:
        return
    me = list(group.ranks).index(rank())
    other = 1 - me
    other_global = group.ranks[other]
    seed = "p2p-group-ranks"
    outgoing = kit.tensor(data(seed, rank(), (3,), "float32"), "float32")
    expected = data(seed, other_global, (3,), "float32")
    # Blocking: group rank 0 sends first.
    received = sentinel(kit, (3,), "float32")
    for turn in (0, 1):
        if me == turn:
            assert compat.send(outgoing, group=group, group_dst=other) is None
        else:
            source = compat.recv(received, group=group, group_src=other)
            assert source == other_global and type(source) is int, source
    assert_close(kit.numpy(received), expected, "float32", "recv(group_src=)")
    # Asynchronous, keyword and positional (torch's order: tensor, dst, group, tag, group_dst).
    received = sentinel(kit, (3,), "float32")
    works = [
        compat.irecv(received, None, group, 0, other),
        compat.isend(outgoing, group=group, group_dst=other),
    ]
    wait_all(works)
    assert_close(kit.numpy(received), expected, "float32", "irecv(group_src=)")
    # Batched, with group_peer.
    received = sentinel(kit, (3,), "float32")
    works = compat.batch_isend_irecv(
        [
            compat.P2POp(compat.irecv, received, group=group, group_peer=other),
            compat.P2POp(compat.isend, outgoing, None, group, 0, other),
        ]
    )
    wait_all(works)
    assert_close(kit.numpy(received), expected, "float32", "P2POp(group_peer=)")


register("p2p_group_ranks", case_group_ranks, 2)


def case_recv_result(kit: Any) -> None:
    """recv returns the source's global rank (torch's result), also for an empty tensor; in a
    ring, even ranks sending first."""
    right, left = ring_peers(list(range(world())))
    seed = "p2p-recv-result"
    for shape in ((2,), (0,)):
        received = sentinel(kit, shape, "int32")
        outgoing = kit.tensor(data(seed, rank(), shape, "int32"), "int32")
        if rank() % 2 == 0:
            compat.send(outgoing, right)
            source = compat.recv(received, left)
        else:
            source = compat.recv(received, src=left)
            compat.send(outgoing, dst=right)
        assert source == left and type(source) is int, f"recv returned {source!r}"
        assert_close(kit.numpy(received), data(seed, left, shape, "int32"), "int32", "recv")


register("p2p_recv_result", case_recv_result, 2)


def case_tags(kit: Any) -> None:
    """Gloo matches messages by tag: two messages with different tags, received in the swapped
    order (isend/irecv, blocking recv, and a batch of P2POps)."""
    right, left = ring_peers(list(range(world())))
    seed = "p2p-tags"
    first = kit.tensor(data(f"{seed}-1", rank(), (4,), "float32"), "float32")
    second = kit.tensor(data(f"{seed}-2", rank(), (4,), "float32"), "float32")
    expected = [data(f"{seed}-{k}", left, (4,), "float32") for k in (1, 2)]
    # irecv: the tag-2 receive is issued (and waited on) first.
    inbox_1, inbox_2 = sentinel(kit, (4,), "float32"), sentinel(kit, (4,), "float32")
    receives = [compat.irecv(inbox_2, left, tag=2), compat.irecv(inbox_1, left, tag=1)]
    sends = [compat.isend(first, right, tag=1), compat.isend(second, right, None, 2)]
    wait_all(receives + sends)
    assert_close(kit.numpy(inbox_1), expected[0], "float32", "irecv tag 1")
    assert_close(kit.numpy(inbox_2), expected[1], "float32", "irecv tag 2")
    # Blocking recv of the second message before the first.
    inbox_1, inbox_2 = sentinel(kit, (4,), "float32"), sentinel(kit, (4,), "float32")
    sends = [compat.isend(first, right, tag=1), compat.isend(second, right, tag=2)]
    assert compat.recv(inbox_2, left, tag=2) == left
    assert compat.recv(inbox_1, left, None, 1) == left
    wait_all(sends)
    assert_close(kit.numpy(inbox_1), expected[0], "float32", "recv tag 1")
    assert_close(kit.numpy(inbox_2), expected[1], "float32", "recv tag 2")
    # One batch: sends in tag order 1, 2; receives in 2, 1.
    inbox_1, inbox_2 = sentinel(kit, (4,), "float32"), sentinel(kit, (4,), "float32")
    works = compat.batch_isend_irecv(
        [
            compat.P2POp(compat.isend, first, right, tag=1),
            compat.P2POp(compat.isend, second, right, tag=2),
            compat.P2POp(compat.irecv, inbox_2, left, tag=2),
            compat.P2POp(compat.irecv, inbox_1, left, tag=1),
        ]
    )
    wait_all(works[::-1])
    assert_close(kit.numpy(inbox_1), expected[0], "float32", "P2POp tag 1")
    assert_close(kit.numpy(inbox_2), expected[1], "float32", "P2POp tag 2")


register("p2p_tags", case_tags, 2, ("torch",))


def _irecv_pending_then_other_calls(kit: Any) -> None:
    """An irecv not yet waited for, then other communication with its peer (rank 0 -> rank 1).

    A receive from the same peer on another group runs the pending irecv first, so each gets
    its own message (MCCL matches messages by source rank alone: the sub-group recv took the
    world message before). A collective while it is pending is refused where irecv is deferred
    (MCCL): it would take the peer's message, silently; torch runs it. The next collective works.
    """
    group = compat.new_group([0, 1])  # every rank makes a group, as compat.new_group requires
    if rank() > 1:
        return
    first, second = np.full(2, 5.0), np.full(2, 7.0)
    if rank() == 0:
        compat.isend(kit.tensor(first, "float32"), 1).wait()
        compat.send(kit.tensor(second, "float32"), 1, group=group)
    else:
        world_buf, group_buf = sentinel(kit, (2,), "float32"), sentinel(kit, (2,), "float32")
        work = compat.irecv(world_buf, 0)
        compat.recv(group_buf, 0, group=group)
        work.wait()
        assert_close(kit.numpy(world_buf), first, "float32")
        assert_close(kit.numpy(group_buf), second, "float32")
    # Where the world's irecv is deferred (MCCL without shared memory: COMPAT_SHARED_MEMORY=0,
    # or ranks on several hosts); through shared memory it is not, and nothing is refused.
    chosen = state.current().implementation("irecv", kit.tensor(first, "float32"), group=None)
    if getattr(chosen, "func", None) is not algorithms.deferred_recv:
        return
    if rank() == 0:
        compat.isend(kit.tensor(first, "float32"), 1).wait()
        return
    buf, total = sentinel(kit, (2,), "float32"), kit.tensor(np.ones(2), "float32")
    work = compat.irecv(buf, 0)
    try:
        compat.all_reduce(total, group=group)
    except compat.UnsupportedError as error:
        assert str(error).startswith("irecv: all_reduce cannot run"), error
        assert "rank 0" in str(error) and "wait()" in str(error), error
    else:
        raise AssertionError("all_reduce ran with an irecv from its peer pending")
    # Not recorded for the parity test (torch runs no such part): plain numpy checks.
    np.testing.assert_array_equal(kit.numpy(total), np.ones(2))  # untouched
    work.wait()
    np.testing.assert_array_equal(kit.numpy(buf), first)


register("p2p[irecv_pending_then_other_calls]", _irecv_pending_then_other_calls, min_world=2)
