"""compat's types where ported torch code uses torch's: a Work's future, result, exception and
timed wait; batch_isend_irecv's list as torch returns it per backend; the framework's own groups
from compat (new_framework_group, framework_group) used by the framework's own functions;
get_backend(group); the list all_gather with parts of any shape."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import numpy as np

import compat
from compat.core import state
from tests.ranks.cases import SENTINEL, assert_close, rank, register, world


def _native(kit: Any) -> Any:
    """The framework's own distributed module."""
    if kit.framework == "torch":
        import torch.distributed as dist

        return dist
    import mindspore.mint.distributed as dist

    return dist


def case_work_future(kit: Any) -> None:
    """``work.get_future().then(...)`` as an optimizer's communication path chains it: the
    future completes with the collective's result (``value()[0]`` is the tensor)."""
    n = world()
    x = kit.tensor(np.full((4,), rank() + 1.0), "float32")
    work = compat.all_reduce(x, async_op=True)
    assert work is not None
    halved = work.get_future().then(lambda fut: fut.value()[0] / 2)
    total = n * (n + 1) / 2
    assert_close(kit.numpy(halved.wait()), np.full((4,), total / 2), "float32")
    assert_close(kit.numpy(x), np.full((4,), total), "float32")
    assert work.is_completed() and work.exception() is None
    assert [kit.numpy(t).tolist() for t in work.result()] == [kit.numpy(x).tolist()]
    # A chain of two, a done callback, and the future of a completed Work.
    y = kit.tensor(np.full((2, 3), float(rank())), "float32")
    work = compat.broadcast(y, n - 1, async_op=True)
    assert work is not None
    seen: list[Any] = []
    called = threading.Event()
    future = work.get_future()
    future.add_done_callback(lambda fut: (seen.append(fut), called.set()))
    chained = future.then(lambda fut: fut.value()[0] + 1).then(lambda fut: fut.value() * 10)
    assert_close(kit.numpy(chained.wait()), np.full((2, 3), (n - 1 + 1) * 10.0), "float32")
    # torch runs a done callback on the thread that completes the future, in no order promised
    # against the chain's: waited for, not assumed run.
    assert future.done() and called.wait(60) and len(seen) == 1
    assert_close(kit.numpy(y), np.full((2, 3), n - 1.0), "float32")
    # The list form: value() lists the output parts, as torch's.
    parts = [kit.tensor(np.full((2,), SENTINEL), "float32") for _ in range(n)]
    work = compat.all_gather(parts, kit.tensor(np.full((2,), rank() * 1.0), "float32"),
                             async_op=True)  # fmt: skip
    assert work is not None
    gathered = work.get_future().wait()
    assert [kit.numpy(t).tolist() for t in gathered] == [[r * 1.0] * 2 for r in range(n)]
    # wait(timeout) in seconds and as a timedelta, as torch's Work.wait takes it (MindSpore's
    # own handle takes none: a clear error, and the Work can still be waited for).
    z = kit.tensor(np.ones(3), "float32")
    work = compat.all_reduce(z, async_op=True)
    assert work is not None
    try:
        assert work.wait(timedelta(seconds=60)) is True
    except compat.UnsupportedError as error:
        assert kit.framework == "mindspore" and str(error).startswith("timeout:"), error
        assert isinstance(work.exception(), compat.UnsupportedError)
        work.wait()
    assert work.wait(30.0) is True
    assert_close(kit.numpy(z), np.full((3,), n), "float32")


def case_work_future_native(kit: Any) -> None:
    """Where the Work is one native torch call, get_future() is torch's own Future."""
    import torch

    current = state.current()
    current.force("all_reduce", "float32", "native")
    try:
        x = kit.tensor(np.full((5,), rank() + 1.0), "float32")
        work = compat.all_reduce(x, async_op=True)
        assert work is not None
        future = work.get_future()
        # What torch's own Work.get_future() returns: torch._C.Future (torch.futures.Future's base).
        assert isinstance(future, torch._C.Future), type(future)
        doubled = future.then(lambda fut: fut.value()[0] * 2).wait()
        n = world()
        assert_close(kit.numpy(doubled), np.full((5,), n * (n + 1)), "float32")
    finally:
        current.force("all_reduce", "float32", None)


def case_p2p_work_future(kit: Any) -> None:
    """isend/irecv futures complete with the tensor, as torch's."""
    n = world()
    peer_to, peer_from = (rank() + 1) % n, (rank() - 1) % n
    out = kit.tensor(np.full((3,), SENTINEL), "float32")
    received = compat.irecv(out, peer_from)
    sent = compat.isend(kit.tensor(np.full((3,), rank() * 1.0), "float32"), peer_to)
    assert_close(kit.numpy(received.get_future().wait()[0]), np.full((3,), peer_from), "float32")
    sent.wait()
    assert_close(kit.numpy(out), np.full((3,), peer_from), "float32")


def case_batch_result_per_backend(kit: Any) -> None:
    """batch_isend_irecv returns what torch's returns on the backend: one Work per op where the
    backend does not coalesce (Gloo; MCCL), one Work for the whole batch where it does (NCCL,
    whose adapter gives one handle for the batch: here Gloo's handles, joined as NCCL's
    would be, so the unpacking ``(req,) = ...`` that NCCL code does is checked on real ranks)."""
    n = world()
    peer_to, peer_from = (rank() + 1) % n, (rank() - 1) % n

    def batch() -> tuple[list[compat.Work], Any]:
        out = kit.tensor(np.full((2,), SENTINEL), "float32")
        ops = [
            compat.P2POp(compat.irecv, out, peer_from),
            compat.P2POp(compat.isend, kit.tensor(np.full((2,), rank() + 5.0), "float32"), peer_to),
        ]
        return compat.batch_isend_irecv(ops), out

    works, out = batch()
    assert len(works) == 2, works  # one per op, as torch's on Gloo / compat's on MCCL
    for work in works:
        work.wait()
    assert_close(kit.numpy(out), np.full((2,), peer_from + 5.0), "float32")
    current = state.current()
    chosen = current.implementation("batch_isend_irecv", out, group=None)

    def coalescing(specs: Any, group: Any) -> list[Any]:
        return [compat.Work(chosen(specs, group))]  # one handle for the batch, as NCCL's

    current.force("batch_isend_irecv", "float32", ("coalescing", coalescing))
    try:
        works, out = batch()
        (request,) = works
        request.wait()
        assert_close(kit.numpy(out), np.full((2,), peer_from + 5.0), "float32")
    finally:
        current.force("batch_isend_irecv", "float32", None)
    compat.barrier()


def case_framework_groups(kit: Any) -> None:
    """new_framework_group and framework_group give the framework's own objects, which the
    framework's functions take (a module that was not ported), and compat's too."""
    dist = _native(kit)
    n = world()
    members = [0, n - 1] if n > 1 else [0]
    group = compat.new_framework_group(members[::-1])  # sorted, as torch's default sort_ranks
    world_group = compat.framework_group()
    if kit.framework == "torch":
        assert world_group is dist.group.WORLD
        if rank() in members:
            assert isinstance(group, dist.ProcessGroup), type(group)
        else:  # what torch's new_group gives a rank outside the group
            assert group == dist.GroupMember.NON_GROUP_MEMBER, group
    else:
        assert isinstance(group, str) and isinstance(world_group, str)
    # size() and rank() as a torch ProcessGroup answers them (a MindSpore name answers them too).
    assert world_group.size() == n and world_group.rank() == rank()
    if rank() in members:
        assert group.size() == len(members) and group.rank() == members.index(rank())
    x = kit.tensor(np.full((3,), rank() + 1.0), "float32")
    dist.all_reduce(x, group=world_group)  # the framework's own call on compat's world
    assert_close(kit.numpy(x), np.full((3,), n * (n + 1) / 2), "float32")
    if rank() in members:
        if kit.framework == "torch":
            assert dist.get_process_group_ranks(group) == members
            assert dist.get_global_rank(group, len(members) - 1) == members[-1]
        y = kit.tensor(np.full((2,), 10.0 ** rank()), "float32")
        dist.all_reduce(y, group=group)
        assert_close(kit.numpy(y), np.full((2,), sum(10.0**r for r in members)), "float32")
        z = kit.tensor(np.full((2,), 10.0 ** rank()), "float32")
        compat.all_reduce(z, group=group)
        assert_close(kit.numpy(z), np.full((2,), sum(10.0**r for r in members)), "float32")
        assert compat.get_process_group_ranks(group) == members
    compat.barrier()


def case_subgroups(kit: Any) -> None:
    """new_subgroups / new_subgroups_by_enumeration as torch's: (this rank's subgroup, every
    subgroup), the framework's own groups, which the framework's all_reduce takes."""
    dist = _native(kit)
    n = world()
    mine, every = compat.new_subgroups(1, None, None, None, None, "singles")
    assert len(every) == n and compat.get_process_group_ranks(mine) == [rank()]
    lists = [list(range(0, n, 2)), list(range(1, n, 2))] if n > 1 else [[0]]
    # torch's positions: (lists, timeout, backend, pg_options, group_desc)
    mine, every = compat.new_subgroups_by_enumeration(lists, None, None, None, "halves")
    assert len(every) == len(lists)
    members = next(ranks for ranks in lists if rank() in ranks)
    assert mine.size() == len(members) and mine.rank() == members.index(rank())
    x = kit.tensor(np.full((2,), 10.0 ** rank()), "float32")
    dist.all_reduce(x, group=mine)
    assert_close(kit.numpy(x), np.full((2,), sum(10.0**r for r in members)), "float32")
    mine, every = compat.new_subgroups_by_enumeration([[0]])  # the other ranks are in none
    assert len(every) == 1 and (mine is None) == (rank() != 0), (mine, every)
    compat.barrier()


def case_group_backend(kit: Any) -> None:
    """get_backend(group) answers the group's backend, as torch's: a Gloo group of a job whose
    world was made with another backend string answers "gloo" where the world answers its own."""
    dist = _native(kit)
    group = compat.new_group(list(range(world())), backend="gloo")
    assert compat.get_backend(group) == "gloo" == dist.get_backend(group.handle)
    assert compat.get_backend() == dist.get_backend(), (compat.get_backend(), dist.get_backend())


def case_all_gather_any_shape(kit: Any) -> None:
    """The list all_gather with parts that differ in a dim other than dim 0 (hidden states
    (1, tokens, hidden), tokens per rank), in sentinel-filled outputs, sync and async."""
    n = world()
    hidden = 3

    def shape_of(r: int) -> tuple[int, int, int]:
        return (1, r + 2, hidden)

    def values_of(r: int) -> np.ndarray:
        return np.arange(np.prod(shape_of(r)), dtype=np.float32).reshape(shape_of(r)) + 100 * r

    for async_op in (False, True):
        outputs = [kit.tensor(np.full(shape_of(r), SENTINEL), "float32") for r in range(n)]
        work = compat.all_gather(outputs, kit.tensor(values_of(rank()), "float32"),
                                 async_op=async_op)  # fmt: skip
        if async_op:
            assert work is not None
            work.wait()
        for r in range(n):
            assert_close(kit.numpy(outputs[r]), values_of(r), "float32", f"part {r}")
    # Views of one larger tensor: each written exactly, the elements around them untouched.
    sizes = [int(np.prod(shape_of(r))) for r in range(n)]
    whole = kit.tensor(np.full(sum(sizes) + 4, SENTINEL), "float32")
    if kit.framework == "torch":
        starts = np.cumsum([2, *sizes])
        outputs = [whole[starts[r] : starts[r] + sizes[r]].view(shape_of(r)) for r in range(n)]
        compat.all_gather(outputs, kit.tensor(values_of(rank()), "float32"))
        expected = np.concatenate([[SENTINEL] * 2, *[values_of(r).ravel() for r in range(n)],
                                   [SENTINEL] * 2])  # fmt: skip
        # Not recorded for the parity test: MindSpore runs no such views here.
        np.testing.assert_array_equal(kit.numpy(whole), expected.astype(np.float32))


def case_all_gather_own_entry_reshaped(kit: Any) -> None:
    """This rank's entry with tensor's elements in other dims, as torch's NCCL takes it: a
    sequence-parallel length gather (a 0-d tensor into parts of shape (1,)), sync and async,
    and a (2, 3) tensor into parts of shape (6,); an entry of other elements is refused."""
    n = world()
    for async_op in (False, True):
        outputs = [kit.tensor(np.full((1,), SENTINEL), "int64") for _ in range(n)]
        work = compat.all_gather(outputs, kit.tensor(np.array(5 + rank()), "int64"),
                                 async_op=async_op)  # fmt: skip
        if async_op:
            assert work is not None
            work.wait()
        for r in range(n):
            np.testing.assert_array_equal(kit.numpy(outputs[r]), np.array([5 + r]))
    values = np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * rank()
    outputs = [kit.tensor(np.full((6,), SENTINEL), "float32") for _ in range(n)]
    compat.all_gather(outputs, kit.tensor(values, "float32"))
    for r in range(n):
        assert_close(kit.numpy(outputs[r]), np.arange(6) + 10.0 * r, "float32", f"part {r}")
    wrong = [kit.tensor(np.full((2,), SENTINEL), "int64") for _ in range(n)]
    try:
        compat.all_gather(wrong, kit.tensor(np.array(1), "int64"))
    except ValueError as error:
        assert f"tensor_list[{rank()}]" in str(error), error
    else:
        raise AssertionError("an entry of other elements than tensor's was taken")
    np.testing.assert_array_equal(kit.numpy(wrong[rank()]), np.full((2,), SENTINEL))
    compat.barrier()


register("torch_types-work_future", case_work_future)
register("torch_types-work_future_native", case_work_future_native, frameworks=("torch",))
register("torch_types-p2p_work_future", case_p2p_work_future, min_world=2)
register("torch_types-batch_result_per_backend", case_batch_result_per_backend, min_world=2)
register("torch_types-framework_groups", case_framework_groups)
register("torch_types-subgroups", case_subgroups)
register("torch_types-group_backend", case_group_backend, frameworks=("torch",))
register("torch_types-all_gather_any_shape", case_all_gather_any_shape)
register("torch_types-all_gather_own_entry_reshaped", case_all_gather_own_entry_reshaped)
