"""Groups made by their members only: ``new_group(..., use_local_synchronization=True)`` and
``split_group``, called by the ranks of the new group alone while the others do something else
(make their own group, wait in a collective on the world), then collectives on each group
checked against numpy in sentinel-filled outputs; bad input refused on the calling rank before
any communication, and the next collective runs.

On torch a member-only group's name counts the groups each member made before (torch's
``_hash_ranks_to_str``): these cases keep that count equal on every rank (each rank makes the
same number of groups), as torch asks of its users."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np

import compat
from compat.base.errors import UnsupportedError
from tests.ranks.bad_input_cases import expect_error
from tests.ranks.cases import SENTINEL, assert_close, rank, register, world


def _check_collectives(kit: Any, group: object, members: list[int], seed: float) -> None:
    """all_reduce, broadcast and all_gather on ``group`` (members ``members``), each output in
    sentinel-filled buffers, against numpy."""
    me = members.index(rank())
    x = kit.tensor(np.full((3,), seed + 10.0 ** rank()), "float32")
    compat.all_reduce(x, group=group)
    expected = np.full((3,), sum(seed + 10.0**r for r in members))
    assert_close(kit.numpy(x), expected, "float32", f"all_reduce on {members}")
    y = kit.tensor(np.full((2,), seed + rank()), "float32")
    compat.broadcast(y, members[-1], group=group)
    assert_close(kit.numpy(y), np.full((2,), seed + members[-1]), "float32", "broadcast")
    parts = [kit.tensor(np.full((2,), SENTINEL), "float32") for _ in members]
    compat.all_gather(parts, kit.tensor(np.full((2,), seed + me), "float32"), group=group)
    for index, part in enumerate(parts):
        assert_close(kit.numpy(part), np.full((2,), seed + index), "float32", f"part {index}")
    if kit.framework == "torch":
        # Into a view of a larger tensor: the elements around it untouched.
        whole = kit.tensor(np.full((7,), SENTINEL), "float32")
        whole[2:5] = 10.0 ** rank()
        compat.all_reduce(whole[2:5], group=group)
        around = np.full((7,), float(SENTINEL))
        around[2:5] = sum(10.0**r for r in members)
        np.testing.assert_array_equal(kit.numpy(whole), around.astype(np.float32))
    assert compat.get_process_group_ranks(group) == members
    assert compat.get_rank(group) == me and compat.get_world_size(group) == len(members)


def _world_sum(kit: Any, value: float) -> None:
    """An all_reduce on the world, checked: every rank takes part."""
    n = world()
    x = kit.tensor(np.full((4,), value + rank()), "float32")
    compat.all_reduce(x)
    assert_close(kit.numpy(x), np.full((4,), n * value + n * (n - 1) / 2), "float32", "world")


def _outside_split(kit: Any) -> object:
    """What split_group gives a rank in no split: torch up to 2.13 None, from 2.14 (read in
    2.14.1's source) GroupMember.NON_GROUP_MEMBER; None on MindSpore."""
    if kit.framework != "torch":
        return None
    import torch
    import torch.distributed as dist

    newer = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 14)
    return dist.GroupMember.NON_GROUP_MEMBER if newer else None


def case_members_only(kit: Any) -> None:
    """Two groups that cover the world, each made by its own members only (rank 1 alone, the
    others together), then each group's collectives, then the world's. A rank outside a
    member-only group that calls it gets torch's answer at once (None; a compat.Group with no
    handle), without making anything."""
    n = world()
    team = [r for r in range(n) if r != 1]
    if rank() in team:
        group: object = compat.new_framework_group(team[::-1], use_local_synchronization=True)
        _check_collectives(kit, group, team, 100.0)
        if kit.framework == "torch":
            import torch.distributed as dist

            assert isinstance(group, dist.ProcessGroup), type(group)
            assert dist.get_process_group_ranks(group) == team  # torch's own functions take it
        else:
            assert isinstance(group, str) and group, group
    else:
        alone = compat.new_group([rank()], use_local_synchronization=True)
        assert isinstance(alone, compat.Group) and alone.handle is not None
        _check_collectives(kit, alone, [rank()], 200.0)
        assert compat.new_framework_group(team, use_local_synchronization=True) is None
        outside = compat.new_group(team, use_local_synchronization=True)
        assert outside.handle is None and outside.rank() == -1
    _world_sum(kit, 1.0)
    # Every rank a member, made member-only: the plain case, two groups of the same ranks.
    made = []
    for seed in (300.0, 400.0):
        made.append(compat.new_group(list(range(n)), use_local_synchronization=True))
        _check_collectives(kit, made[-1], list(range(n)), seed)
    assert made[0].name != made[1].name
    if kit.framework == "mindspore":
        # The last destroyed and made again: a new name (MindSpore's names are not reused).
        # Not on torch: torch names the new group as the destroyed one (its ranks and how many
        # groups the process has), whose creation keys are still in the store, so a member
        # that gets there first meets the other's old entry, as torch's own calls would.
        compat.destroy(made[1])
        again = compat.new_group(list(range(n)), use_local_synchronization=True)
        assert again.name not in (made[0].name, made[1].name)
        _check_collectives(kit, again, list(range(n)), 450.0)
    _check_collectives(kit, made[0], list(range(n)), 460.0)
    _world_sum(kit, 2.0)


def case_members_only_while_world_waits(kit: Any) -> None:
    """The ranks outside the group wait in a collective on the world (an all_reduce) while the
    members make the group and use it: member-only creation does not need them."""
    n = world()
    team = list(range(1, n)) if n > 2 else [0, 1]
    if rank() in team:
        group = compat.new_group(team, use_local_synchronization=True)
        _check_collectives(kit, group, team, 500.0)
    _world_sum(kit, 3.0)
    if rank() not in team:  # the same count of groups on every rank (torch's names)
        compat.new_group([rank()], use_local_synchronization=True)
    _world_sum(kit, 4.0)


def case_split(kit: Any) -> None:
    """split_group of the world into a partition (unsorted lists, in the parent's ranks), of a
    member-only parent (its group ranks are not the global ones), and with a rank in no split
    (None there)."""
    dist = None
    if kit.framework == "torch":
        import torch.distributed as dist
    n = world()
    splits = [[2, 0], [1]] if n > 2 else [[1, 0]]
    if _outside_split(kit) is not None:  # a torch that keeps the listed order: compat sorts
        splits = [sorted(split) for split in splits]
    mine = compat.split_group(split_ranks=splits, group_desc="halves")
    members = sorted(next(split for split in splits if rank() in split))
    assert mine is not None
    if dist is not None:
        assert isinstance(mine, dist.ProcessGroup) and dist.get_process_group_ranks(mine) == members
    _check_collectives(kit, mine, members, 600.0)
    _world_sum(kit, 5.0)
    if dist is not None:  # torch's backend argument (torch 2.13's): the splits' backend
        again = compat.split_group(None, splits, None, None, "again", backend="gloo")
        assert compat.get_backend(again) == "gloo" == dist.get_backend(again)
        _check_collectives(kit, again, members, 650.0)
    # A parent whose group ranks are not the global ranks: ranks 1.. (rank 0 alone, apart).
    parent_ranks = list(range(1, n)) if n > 1 else [0]
    parent = compat.new_group(parent_ranks if rank() in parent_ranks else [rank()],
                              use_local_synchronization=True)  # fmt: skip
    if rank() in parent_ranks:
        # Group rank 0 of the parent is global rank 1: a split of the parent's last rank only.
        last = len(parent_ranks) - 1
        child = compat.split_group(
            parent.handle if dist is not None else parent, [[last]], group_desc="child"
        )
        if parent_ranks.index(rank()) == last:
            assert child is not None
            _check_collectives(kit, child, [parent_ranks[-1]], 700.0)
            if dist is not None:  # torch's own description, as torch's split_group keeps it
                assert child.group_desc == "child", child.group_desc
        else:  # in no split: nothing made, and the installed torch's answer
            assert child is _outside_split(kit), child
            compat.new_group([rank()], use_local_synchronization=True)  # torch's count kept
    else:  # two groups, as the parent's last rank makes (torch's count kept)
        compat.new_group([rank()], use_local_synchronization=True)
        compat.new_group([rank()], use_local_synchronization=True)
    _world_sum(kit, 6.0)


def case_bad_input(kit: Any) -> None:
    """Bad split_group and member-only new_group input: a clear error on the calling rank,
    naming the parameter, before any communication; then the next collective runs."""
    n = world()
    buffer = kit.tensor(np.full((3,), float(SENTINEL)), "float32")
    bad: list[tuple[type[BaseException], Any, str, list[str]]] = [
        (ValueError, lambda: compat.split_group(), "split_ranks", ["non-empty list", "None"]),
        (ValueError, lambda: compat.split_group(split_ranks=[]), "split_ranks", ["non-empty"]),
        (ValueError, lambda: compat.split_group(split_ranks=[[0], []]), "split_ranks[1]",
         ["non-empty"]),
        (ValueError, lambda: compat.split_group(split_ranks=[[0, 0]]), "split_ranks[0]",
         ["distinct", "[0, 0]"]),
        (ValueError, lambda: compat.split_group(split_ranks=[[0], [1, 0]]), "split_ranks[1]",
         ["one list at most", "[1, 0]"]),
        (ValueError, lambda: compat.split_group(split_ranks=[[n]]), "split_ranks[0]",
         [f"[0, {n})", f"[{n}]"]),
        (TypeError, lambda: compat.split_group(split_ranks=[[0, "1"]]), "split_ranks[0][1]",
         ["'1'"]),
        (ValueError, lambda: compat.split_group(split_ranks=[[0]], timeout=-1), "timeout",
         ["positive", "-1"]),
        (TypeError, lambda: compat.new_framework_group([0], use_local_synchronization="yes"),
         "use_local_synchronization", ["'yes'"]),
        (ValueError, lambda: compat.new_group([0, n], use_local_synchronization=True), "ranks",
         [f"[0, {n})"]),
    ]  # fmt: skip
    for error, call, param, fragments in bad:
        expect_error(kit, error, call, param, fragments, [buffer])
    # A bad list after good ones: refused before any of them is made (no group left behind).
    made_before = compat.lifecycle.state.checked().group_count
    expect_error(kit, ValueError, lambda: compat.new_subgroups_by_enumeration([[0], [n]]),
                 "ranks_per_subgroup_list[1]", [f"[0, {n})", f"[{n}]"], [buffer])  # fmt: skip
    expect_error(kit, ValueError, lambda: compat.new_subgroups_by_enumeration([[0], []]),
                 "ranks_per_subgroup_list[1]", ["non-empty"], [buffer])  # fmt: skip
    assert compat.lifecycle.state.checked().group_count == made_before
    if _outside_split(kit) is not None:  # a torch whose split_group keeps the listed order
        expect_error(kit, ValueError, lambda: compat.split_group(split_ranks=[[1, 0]]),
                     "split_ranks[0]", ["increasing order", "[1, 0]"], [buffer])  # fmt: skip
    # A parent this rank is not in: the group of the next rank, made member-only by it.
    other = compat.new_group([(rank() + 1) % n], use_local_synchronization=True)
    assert other.handle is None
    expect_error(kit, ValueError, lambda: compat.split_group(other, [[0]]), "parent_pg",
                 ["a member", f"[{(rank() + 1) % n}]"], [buffer])  # fmt: skip
    if kit.framework == "mindspore":
        singles = [[r] for r in range(n)]
        expect_error(
            kit,
            UnsupportedError,
            lambda: compat.split_group(split_ranks=singles, pg_options=object()),
            "pg_options",
            ["mindspore"],
            [buffer],
        )
        expect_error(kit, UnsupportedError, lambda: compat.split_group(
            split_ranks=singles, timeout=timedelta(seconds=5)), "timeout", ["mindspore"],
            [buffer])  # fmt: skip
        # Member-only, on this rank alone: refused before anything is made.
        expect_error(kit, UnsupportedError, lambda: compat.new_framework_group(
            [rank()], pg_options=object(), use_local_synchronization=True), "pg_options",
            ["mindspore"], [buffer])  # fmt: skip
    _world_sum(kit, 7.0)


# In a job of their own (tests/test_member_groups.py): see own_job_case_names.
register("member_groups-members_only", case_members_only, min_world=2, own_job=True)
register("member_groups-while_world_waits", case_members_only_while_world_waits, min_world=2,
         own_job=True)  # fmt: skip
register("member_groups-split", case_split, min_world=2, own_job=True)
register("member_groups-bad_input", case_bad_input, min_world=2, own_job=True)
