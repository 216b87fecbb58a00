"""compat beside code that calls the framework directly: the framework's own groups passed to
compat, compat's groups passed to the framework, compat.WORLD, and the group queries."""

from __future__ import annotations

from typing import Any

import numpy as np

import compat
from tests.ranks.cases import assert_close, rank, register, world


def _native_world(kit: Any) -> Any:
    if kit.framework == "torch":
        import torch.distributed as dist

        return dist.group.WORLD
    from mindspore.communication import GlobalComm

    return GlobalComm.WORLD_COMM_GROUP


def _native_group(kit: Any, ranks: list[int], name: str) -> Any:
    """A group made by the framework itself (every rank calls this, in the same order)."""
    if kit.framework == "torch":
        import torch.distributed as dist

        return dist.new_group(ranks)
    from mindspore.communication import create_group

    if rank() in ranks:
        create_group(name, ranks)  # MindSpore's own rule: members only
    return name


def _native_all_reduce(kit: Any, tensor: Any, group: Any) -> None:
    """The framework's own all_reduce on a group handle compat gave."""
    if kit.framework == "torch":
        import torch.distributed as dist

        dist.all_reduce(tensor, group=group)
    else:
        import mindspore.mint.distributed as dist

        dist.all_reduce(tensor, group=group)


def case_world_spellings(kit: Any) -> None:
    n = world()
    for group in (None, compat.WORLD, _native_world(kit)):
        x = kit.tensor(np.full((3,), rank() + 1), "float32")
        compat.all_reduce(x, group=group)
        assert_close(kit.numpy(x), np.full((3,), n * (n + 1) / 2), "float32", repr(group))
        assert compat.get_world_size(group) == n
        assert compat.get_rank(group) == rank()
        assert compat.get_process_group_ranks(group) == list(range(n))
        assert compat.get_backend(group) == compat.get_backend()
    if kit.framework == "torch":
        # compat.WORLD is compat's own: torch's functions refuse it before communicating.
        import torch.distributed as dist

        x = kit.tensor(np.zeros(3), "float32")
        try:
            dist.all_reduce(x, group=compat.WORLD)
        except ValueError as error:
            assert "not initialized in the world group map" in str(error), error
        except TypeError as error:
            # torch 2.7: its logging wrapper fails first, on the group's missing backend
            assert "value was None when it should not be" in str(error), error
        else:
            raise AssertionError("torch.distributed.all_reduce took group=compat.WORLD")


def case_native_group_in_compat(kit: Any) -> None:
    """A group the framework made, used by compat's collectives and queries."""
    n = world()
    ranks = [0, n - 1] if n > 1 else [0]
    group = _native_group(kit, ranks, "interop_native_group")
    assert not isinstance(group, compat.Group), type(group)  # compat takes it all the same
    if rank() not in ranks:
        if kit.framework == "torch":  # MindSpore's non-members never create the group
            assert compat.get_rank(group) == -1
            assert compat.get_world_size(group) == -1  # as torch's, for NON_GROUP_MEMBER
        return
    assert compat.get_process_group_ranks(group) == ranks
    assert compat.get_world_size(group) == len(ranks)
    assert compat.get_rank(group) == ranks.index(rank())
    assert compat.get_global_rank(group, len(ranks) - 1) == ranks[-1]
    assert compat.get_group_rank(group, rank()) == ranks.index(rank())
    x = kit.tensor(np.full((2, 2), 10 ** rank()), "float32")
    compat.all_reduce(x, group=group)
    assert_close(kit.numpy(x), np.full((2, 2), sum(10**r for r in ranks)), "float32")
    parts = compat.reduce_scatter_tensor(kit.tensor(np.ones((2 * len(ranks), 2)), "float32"),
                                         group=group)  # fmt: skip
    assert_close(kit.numpy(parts), np.full((2, 2), len(ranks)), "float32")
    y = kit.tensor(np.full((2,), rank()), "float32")
    compat.broadcast(y, ranks[-1], group=group)
    assert_close(kit.numpy(y), np.full((2,), ranks[-1]), "float32")


def case_compat_group_in_native(kit: Any) -> None:
    """A group compat made, used by the framework's own collective through ``group.handle``."""
    n = world()
    ranks = list(range(n))[::-1][: max(1, n - 1)]
    group = compat.new_group(ranks)
    if rank() not in ranks:
        return
    x = kit.tensor(np.full((3,), rank() + 1), "float32")
    _native_all_reduce(kit, x, group.handle)
    assert_close(kit.numpy(x), np.full((3,), sum(r + 1 for r in ranks)), "float32")


def case_group_queries(kit: Any) -> None:
    n = world()
    group = compat.new_group()  # every rank
    assert compat.get_process_group_ranks(group) == list(range(n))
    members = sorted({0, n - 1})
    sub = compat.new_group(members)
    assert compat.get_process_group_ranks(sub) == members
    assert [compat.get_global_rank(sub, i) for i in range(len(members))] == members
    for global_rank in range(n):
        if global_rank in members:
            assert compat.get_group_rank(sub, global_rank) == members.index(global_rank)
        else:
            try:
                compat.get_group_rank(sub, global_rank)
            except ValueError as error:
                assert str(error).startswith("global_rank:"), error
            else:
                raise AssertionError(f"get_group_rank({global_rank}) of a non-member")
    try:
        compat.get_global_rank(sub, len(members))
    except ValueError as error:
        assert str(error).startswith("group_rank:"), error
    else:
        raise AssertionError("get_global_rank past the group's size")


def case_destroy_group(kit: Any) -> None:
    """A group freed with destroy(group) is gone; the world goes on."""
    n = world()
    group = compat.new_group(list(range(n)))
    x = kit.tensor(np.full((2,), 1.0), "float32")
    compat.all_reduce(x, group=group)
    compat.destroy(group)
    assert compat.is_initialized()
    # Used after destroy: one ValueError naming the group, before any communication, the tensor
    # untouched (the framework's own error was a bare KeyError); also for the framework's own
    # group object or name compat.Group stood for.
    calls = {
        "all_reduce": lambda: compat.all_reduce(x, group=group),
        "all_reduce on its handle": lambda: compat.all_reduce(x, group=group.handle),
        "get_world_size": lambda: compat.get_world_size(group),
        "destroy again": lambda: compat.destroy(group),
    }
    for what, call in calls.items():
        try:
            call()
        except ValueError as error:
            message = str(error)
        else:
            raise AssertionError(f"{what}: a destroyed group was taken")
        assert message.startswith(f"group: {group!r} was destroyed by compat.destroy(group)"), (
            what,
            message,
        )
        assert_close(kit.numpy(x), np.full((2,), n), "float32", what)
    y = kit.tensor(np.full((2,), 1.0), "float32")
    compat.all_reduce(y)
    assert_close(kit.numpy(y), np.full((2,), n), "float32")


def case_group_as_ranks(kit: Any) -> None:
    """funcol's ``group=[global ranks]``: the world's ranks (in any order) are the world, the
    ranks of a group made before by compat.new_group are that group, for the collectives and the
    queries."""
    n = world()
    for spelled in (list(range(n)), tuple(range(n)), list(range(n))[::-1]):
        x = kit.tensor(np.full((3,), rank() + 1), "float32")
        assert compat.all_reduce(x, group=spelled) is None
        assert_close(kit.numpy(x), np.full((3,), n * (n + 1) / 2), "float32", repr(spelled))
        assert compat.get_world_size(spelled) == n
        assert compat.get_rank(spelled) == rank()
        assert compat.get_process_group_ranks(spelled) == list(range(n))
    ranks = list(range(1, n)) if n > 1 else [0]  # not the world at n > 1
    group = compat.new_group(ranks)
    for spelled in (ranks, ranks[::-1]):
        expected_rank = ranks.index(rank()) if rank() in ranks else -1
        assert compat.get_rank(spelled) == expected_rank, (spelled, expected_rank)
        assert compat.get_process_group_ranks(spelled) == list(group.ranks) == ranks
        if rank() not in ranks:
            continue
        x = kit.tensor(np.full((2, 2), 10 ** rank()), "float32")
        work = compat.all_reduce(x, group=spelled, async_op=True)
        assert isinstance(work, compat.Work) and work.wait()
        assert_close(kit.numpy(x), np.full((2, 2), sum(10**r for r in ranks)), "float32")
        part = compat.reduce_scatter_tensor(kit.tensor(np.ones((len(ranks), 2)), "float32"),
                                            group=spelled)  # fmt: skip
        assert_close(kit.numpy(part), np.full((1, 2), len(ranks)), "float32")


def case_new_group_backend_alias(kit: Any) -> None:
    """new_group takes the other framework's name for the CPU backend (frameworks.toml
    backend_aliases): backend="gloo" on MindSpore is MCCL, backend="mccl" on torch is Gloo."""
    n = world()
    own, other = ("gloo", "mccl") if kit.framework == "torch" else ("mccl", "gloo")
    assert compat.get_backend() == own
    for backend in (other, own):
        ranks = sorted({0, n - 1})
        group = compat.new_group(ranks, backend=backend)
        assert compat.get_backend(group) == own
        if rank() not in ranks:
            continue
        if kit.framework == "torch":
            import torch.distributed as dist

            assert dist.get_backend(group.handle) == "gloo", dist.get_backend(group.handle)
        x = kit.tensor(np.full((2,), rank() + 1), "float32")
        compat.all_reduce(x, group=group)
        assert_close(kit.numpy(x), np.full((2,), sum(r + 1 for r in ranks)), "float32", backend)


register("interop-world-spellings", case_world_spellings)
register("interop-group-as-ranks", case_group_as_ranks)
register("interop-new-group-backend-alias", case_new_group_backend_alias)
register("interop-native-group-in-compat", case_native_group_in_compat)
register("interop-compat-group-in-native", case_compat_group_in_native)
register("interop-group-queries", case_group_queries)
register("interop-destroy-group", case_destroy_group)
