"""compat.transport.shared_memory on real ranks: collectives larger than a slot (several rounds, a
different
number of them needed on each rank), the choice the capability table makes for a group on one
host, the fallback for a group without a window, and what is left in /dev/shm (nothing).

The algorithms' results at one round are checked with the others' in algorithm_cases.py, and the
whole collective suite runs through them where the table chooses them.
"""

from __future__ import annotations

import inspect
import itertools
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from typing import Any

import numpy as np

import compat
from compat import algorithms
from compat.base.types import ReduceOp
from compat.core import capabilities, state
from compat.tools import bench
from compat.transport import shared_memory
from tests.ranks.cases import reduce_np, register, runs, subgroup, values, world
from tests.ranks.layout_cases import Placed, sentinel_out

#: A slot this small makes every collective below take several rounds: 256 bytes of data, 64 of
#: them per peer's region in all_to_all at 3 ranks (16 float32).
SMALL_SLOT = shared_memory.HEADER_BYTES + 256


#: (op, dtype, shape) of the all_reduce runs: 111 and 140 elements, several rounds each.
ROUNDS_ALL_REDUCE = [
    ("sum", "float32", (37, 3)),
    ("avg", "float64", (37, 3)),
    ("max", "int64", (37, 3)),
    ("sum", "bfloat16", (70, 2)),
]


def _adapter() -> Any:
    return state.current().adapter


def _new_world_group(slot_bytes: int) -> compat.Group:
    """A group of every rank whose window (made on its first shared-memory collective) has
    slots of ``slot_bytes``."""
    kept = shared_memory.SLOT_BYTES
    shared_memory.SLOT_BYTES = slot_bytes
    try:
        group = compat.new_group(list(range(world())))
        assert shared_memory.window(_adapter(), group.handle) is not None, "no window"
    finally:
        shared_memory.SLOT_BYTES = kept
    return group


def case_rounds(kit: Any) -> None:
    """all_reduce, all_gather (uneven, and into a tensor) and all_to_all_single (uneven, so that
    ranks need different numbers of rounds) through slots of 256 bytes, the tensors as views in
    sentinel-filled bases (the whole base checked), sync and async; this rank's file is gone
    from /dev/shm once the window is made."""
    group = _new_world_group(SMALL_SLOT)
    window = shared_memory.window(_adapter(), group.handle)
    assert window is not None and window.slot_bytes == SMALL_SLOT, window
    # Each rank removes its own file's name before its window is returned (the others', soon).
    own = os.path.join(shared_memory.DIRECTORY, window.names[window.me])
    assert not os.path.exists(own), f"{own} is left in /dev/shm"
    n, me, handle = world(), compat.get_rank(), group.handle
    for async_op in (False, True):
        for (op, dtype, shape), reducing in itertools.product(
            ROUNDS_ALL_REDUCE,
            (algorithms.shared_memory_all_reduce, algorithms.shared_memory_all_reduce_in_shares),
        ):
            key = f"sm-rounds-{op}-{dtype}-{async_op}"
            x = Placed(kit, values(key, me, shape, op), dtype, "interior")
            done = reducing(_adapter(), x.view, ReduceOp(op), handle, async_op)
            _finish(done, async_op)
            x.result(reduce_np([values(key, r, shape, op) for r in range(n)], op))
            x.check(f"{reducing.__name__} {op} {dtype} {shape} async={async_op}")
        sizes = [(17 * r + 40) % 61 for r in range(n)]  # 40, 57, 13 rows of 3
        key = f"sm-rounds-gather-{async_op}"
        mine = Placed(kit, values(key, me, (sizes[me], 3)), "float32", "column")
        outputs = [sentinel_out(kit, (size, 3), "float32", "strided") for size in sizes]
        done = algorithms.shared_memory_all_gather(
            _adapter(), [out.view for out in outputs], mine.view, handle, async_op
        )
        _finish(done, async_op)
        for j, out in enumerate(outputs):
            out.result(values(key, j, (sizes[j], 3)))
            out.check(f"all_gather uneven: part {j} async={async_op}")
        mine.check("all_gather: the input changed")
        whole = sentinel_out(kit, (n * 30, 2), "float16", "interior")
        part = kit.tensor(values(key, me, (30, 2)), "float16")
        _finish(
            algorithms.shared_memory_all_gather_into_tensor(
                _adapter(), whole.view, part, handle, async_op
            ),
            async_op,
        )
        whole.result(np.concatenate([values(key, j, (30, 2)) for j in range(n)]))
        whole.check(f"all_gather_into_tensor async={async_op}")

        def rows(sender: int, receiver: int) -> int:
            return (23 * sender + 5 * receiver) % 29  # up to 28 rows of 2: up to 4 rounds

        def data(sender: int, receiver: int, seed: str = f"sm-a2a-{async_op}") -> np.ndarray:
            return values(seed, sender * 10 + receiver, (rows(sender, receiver), 2))

        send, receive = [rows(me, j) for j in range(n)], [rows(j, me) for j in range(n)]
        source = Placed(kit, np.concatenate([data(me, j) for j in range(n)]), "int32", "interior")
        out = sentinel_out(kit, (sum(receive), 2), "int32", "column")
        done = algorithms.shared_memory_all_to_all(
            _adapter(), out.view, source.view, receive, send, handle, async_op
        )
        _finish(done, async_op)
        out.result(np.concatenate([data(j, me) for j in range(n)]))
        out.check(f"all_to_all_single uneven async={async_op}")
        source.check("all_to_all_single: the input changed")
    compat.destroy(group)
    assert not shared_memory.has_entry(_adapter(), handle), "destroy(group) left its window open"


def _rooted(kit: Any, group: compat.Group | None, label: str) -> None:
    """broadcast, reduce, scatter and gather through shared memory from every root, sync and
    async, the tensors as views in sentinel-filled bases (the whole base checked); the others'
    tensors as they were where the op leaves them (reduce's non-roots, gather's input)."""
    ranks = list(range(world())) if group is None else list(group.ranks)
    if compat.get_rank() not in ranks:
        return
    handle = None if group is None else group.handle
    n, me = len(ranks), ranks.index(compat.get_rank())
    shape = (45, 3)  # 540 bytes of float32: several rounds of a small slot
    for root in range(n):
        for async_op in (False, True):
            what = f"{label} root {root} async={async_op}"
            key = f"sm-rooted-{label}-{root}-{async_op}"
            data = values(key, me, shape)
            x = Placed(kit, data, "float32", "column")
            _finish(
                algorithms.shared_memory_broadcast(
                    _adapter(), x.view, ranks[root], handle, async_op
                ),
                async_op,
            )
            x.result(values(key, root, shape))
            x.check(f"broadcast {what}")
            for op, dtype in (("sum", "float32"), ("max", "int64"), ("avg", "float64")):
                y = Placed(kit, values(key + op, me, shape, op), dtype, "interior")
                done = algorithms.shared_memory_reduce(
                    _adapter(), y.view, ranks[root], ReduceOp(op), handle, async_op
                )
                _finish(done, async_op)
                if me == root:
                    y.result(reduce_np([values(key + op, r, shape, op) for r in range(n)], op))
                y.check(f"reduce {op} {dtype} {what}")
            parts = [
                Placed(kit, values(key, 10 * me + j, shape), "int32", "strided") for j in range(n)
            ]
            out = sentinel_out(kit, shape, "int32", "interior")
            done = algorithms.shared_memory_scatter(
                _adapter(), out.view, [p.view for p in parts] if me == root else None,
                ranks[root], handle, async_op,
            )  # fmt: skip
            _finish(done, async_op)
            out.result(values(key, 10 * root + me, shape))
            out.check(f"scatter {what}")
            mine = Placed(kit, values(key + "g", me, shape), "float16", "column")
            outs = [sentinel_out(kit, shape, "float16", "interior") for _ in range(n)]
            done = algorithms.shared_memory_gather(
                _adapter(), mine.view, [o.view for o in outs] if me == root else None,
                ranks[root], handle, async_op,
            )  # fmt: skip
            _finish(done, async_op)
            for j, o in enumerate(outs):
                if me == root:
                    o.result(values(key + "g", j, shape))
                o.check(f"gather part {j} {what}")
            mine.check(f"gather: the input changed {what}")


def case_rooted(kit: Any) -> None:
    _rooted(kit, None, "world")
    _rooted(kit, subgroup(), "subgroup")
    group = _new_world_group(SMALL_SLOT)
    _rooted(kit, group, "small slots")
    compat.destroy(group)


def case_reduce_scatter_rounds(kit: Any) -> None:
    """reduce_scatter (uneven list form) and reduce_scatter_tensor through slots of 256 bytes,
    every rank's part several rounds long, views in sentinel-filled bases."""
    group = _new_world_group(SMALL_SLOT)
    n, me, handle = world(), compat.get_rank(), group.handle
    for async_op in (False, True):
        for op, dtype in (("sum", "float32"), ("min", "int32"), ("avg", "float64")):
            key = f"sm-rs-{op}-{async_op}"
            sizes = [(11 * r + 30) % 41 for r in range(n)]  # 30, 0, 11 rows of 2
            inputs = [
                Placed(kit, values(key, 100 * me + j, (size, 2), op), dtype, "column")
                for j, size in enumerate(sizes)
            ]
            out = sentinel_out(kit, (sizes[me], 2), dtype, "interior")
            done = algorithms.shared_memory_reduce_scatter(
                _adapter(), out.view, [i.view for i in inputs], ReduceOp(op), handle, async_op
            )
            _finish(done, async_op)
            out.result(
                reduce_np([values(key, 100 * r + me, (sizes[me], 2), op) for r in range(n)], op)
            )
            out.check(f"reduce_scatter uneven {op} {dtype} async={async_op}")
            whole = Placed(kit, values(key + "t", me, (n * 25, 2), op), dtype, "interior")
            part = sentinel_out(kit, (25, 2), dtype, "strided")
            done = algorithms.shared_memory_reduce_scatter_tensor(
                _adapter(), part.view, whole.view, ReduceOp(op), handle, async_op
            )
            _finish(done, async_op)
            full = reduce_np([values(key + "t", r, (n * 25, 2), op) for r in range(n)], op)
            part.result(full[25 * me : 25 * (me + 1)])
            part.check(f"reduce_scatter_tensor {op} {dtype} async={async_op}")
            whole.check("reduce_scatter_tensor: the input changed")
    compat.destroy(group)


def case_round_sizes(kit: Any) -> None:
    """Where each rank writes one part, a round carries a whole slot of it (not a slot shared
    out among the ranks): gather, all_gather_into_tensor, broadcast and reduce of 2 slots and 5
    rows of 2 per rank take 3 rounds on every rank, at any number of ranks (gather took one round
    per slot / ranks before), and give numpy's results in sentinel-filled bases."""
    group = compat.new_group(list(range(world())))
    window = shared_memory.window(_adapter(), group.handle)
    assert window is not None, "no window"
    n, me, handle = world(), compat.get_rank(), group.handle
    rows = 2 * window.region_bytes() // 8 + 5  # float32 of shape (rows, 2)
    key = "sm-round-sizes"
    mine = Placed(kit, values(key, me, (rows, 2)), "float32", "interior")
    expected = [values(key, r, (rows, 2)) for r in range(n)]

    def rounds_of(label: str, algorithm: Any, *args: Any) -> None:
        before = window.rounds
        algorithm(_adapter(), *args, handle, False)
        took = window.rounds - before
        assert took == 3, f"{label}: {took} rounds for 2 slots and 5 rows per rank, not 3"

    for root in range(n):
        gathered = [sentinel_out(kit, (rows, 2), "float32", "column") for _ in range(n)]
        listed = [g.view for g in gathered] if me == root else None
        rounds_of(f"gather to {root}", algorithms.shared_memory_gather, mine.view, listed, root)
        for r, placed in enumerate(gathered):
            if me == root:
                placed.result(expected[r])
            placed.check(f"gather to {root}: part {r}")
        mine.check(f"gather to {root}: the input changed")
    whole = sentinel_out(kit, (n * rows, 2), "float32", "interior")
    rounds_of(
        "all_gather_into_tensor",
        algorithms.shared_memory_all_gather_into_tensor,
        whole.view,
        mine.view,
    )
    whole.result(np.concatenate(expected))
    whole.check("all_gather_into_tensor")
    x = Placed(kit, expected[me], "float32", "column")
    rounds_of("broadcast", algorithms.shared_memory_broadcast, x.view, 0)
    x.result(expected[0])
    x.check("broadcast from 0")
    y = Placed(kit, expected[me], "float32", "interior")
    rounds_of("reduce", algorithms.shared_memory_reduce, y.view, 0, ReduceOp("sum"))
    y.result(reduce_np(expected, "sum") if me == 0 else expected[me])
    y.check("reduce to 0")
    compat.destroy(group)


def _finish(done: Any, async_op: bool) -> None:
    if async_op:
        assert done is not None and done.is_completed(), "expected a completed Work"
        done.wait()
    else:
        assert done is None, done


def case_chosen(kit: Any) -> None:
    """On one host, the public collectives run the shared-memory algorithms the table marks
    ``one_host``, and give numpy's results."""
    runtime = state.current()
    n, me = world(), compat.get_rank()
    x = kit.tensor(values("sm-chosen", me, (5, 3)), "float32")
    compat.all_reduce(x)
    expected = reduce_np([values("sm-chosen", r, (5, 3)) for r in range(n)], "sum")
    np.testing.assert_allclose(kit.numpy(x), expected, rtol=1e-6)
    assert isinstance(shared_memory.made(runtime.adapter, None), shared_memory.SharedWindow), (
        "the world group has no window after a collective the table runs through shared memory"
    )
    chosen = inspect.unwrap(runtime.implementation("all_reduce", x, None, None))
    key = runtime.capability_key
    asynchrony = capabilities.choice(key, "all_reduce", "float32", 0, True, n)[1]
    # From 3 ranks each rank reduces its share of every piece (the table's min_ranks).
    name = "shared_memory_all_reduce" if n == 2 else "shared_memory_all_reduce_in_shares"
    reducing = getattr(algorithms, name)
    if asynchrony == capabilities.BACKGROUND:  # the table's async: through the window's thread
        assert getattr(chosen, "func", None) is shared_memory.in_issue_order, chosen
        assert chosen.args[0] is reducing, chosen
    else:
        assert getattr(chosen, "func", None) is reducing, chosen
    assert runtime.algorithm("all_reduce", "float32", 1024, one_host=True, ranks=n) == name
    # A choice's min_ranks/max_ranks count the group's ranks (Gloo's gather: in rounds from 1 MB
    # per rank at 2 ranks, through the channels otherwise).
    for nbytes in (1024, 2**20):
        expected = capabilities.resolve(
            runtime.capability_key, "gather", "float32", nbytes, True, n
        )
        assert runtime.algorithm("gather", "float32", nbytes, True, n) == expected
        big = kit.tensor(np.zeros(nbytes // 4), "float32")
        assert runs(runtime.implementation("gather", big, None, None), expected)
    # compat bench's algorithm column names what runs: a rooted row's size is the root's list
    # (n parts), and the table chooses by the part each rank passes.
    for op in ("scatter", "gather"):
        for size in (1024 * n, 2**18, 2**20, 4 * 2**20):
            label = bench.algorithm_of(runtime, op, False, "float32", size, n)
            part = kit.tensor(np.zeros(size // n // 4), "float32")
            ran = runtime.implementation(op, part, None, None)
            assert runs(ran, label), (op, size, label, ran)


def case_one_way(kit: Any) -> None:
    """broadcast, scatter and gather through shared memory are one-way rounds: the ranks that
    only write wait for no rank, and write a slot again only once every rank has read it. Ranks
    that come late to each call still get that call's own values, exactly, in one round (7 rows)
    and in several (more than a slot), in interior and column views of sentinel-filled bases;
    and the root returns from a broadcast before a late rank (3 s away) calls its own."""
    n, me = world(), compat.get_rank()
    for rows in (7, 2**20 // 8 + 3):  # the second is more than a 1 MB slot of float32 (2, 2)
        for call in range(3):
            if me != 0:
                time.sleep(0.05)  # the root runs ahead: it must not overwrite what is unread
            seed = f"one-way-b{rows}-{call}"
            x = Placed(kit, values(seed, me, (rows, 2)), "float32", "interior")
            compat.broadcast(x.view, 0)
            x.result(values(seed, 0, (rows, 2)))
            x.check(f"broadcast {rows} rows, call {call}")
            if me != 0:
                time.sleep(0.05)
            seed = f"one-way-s{rows}-{call}"
            parts = [values(seed, r, (rows, 2)) for r in range(n)]
            out = sentinel_out(kit, (rows, 2), "float32", "column")
            given = [kit.tensor(part, "float32") for part in parts] if me == 0 else None
            compat.scatter(out.view, given, 0)
            out.result(parts[me])
            out.check(f"scatter {rows} rows, call {call}")
            if me == 0:
                time.sleep(0.05)  # here the root comes late: the others run ahead
            seed = f"one-way-g{rows}-{call}"
            mine = Placed(kit, values(seed, me, (rows, 2)), "float32", "column")
            gathered = [sentinel_out(kit, (rows, 2), "float32", "interior") for _ in range(n)]
            compat.gather(mine.view, [g.view for g in gathered] if me == 0 else None, 0)
            mine.check(f"gather's input {rows} rows, call {call}")
            for r, placed in enumerate(gathered):
                if me == 0:
                    placed.result(values(seed, r, (rows, 2)))
                placed.check(f"gather from {r}, {rows} rows, call {call}")
    if not shared_memory.waits_in_memory():
        return  # ranks meet in the backend's barrier there: every round is a barrier
    if state.current().check:
        return  # the pre-flight check has every rank agree before each call: the root waits
    x = kit.tensor(np.zeros(5), "float32")
    if me != 0:
        time.sleep(3)
    # Ordered by the clock the ranks of one host share, not by how long a call takes here:
    # the root's broadcast returned before any late rank called its own.
    entered = time.time()
    compat.broadcast(x, 0)
    left = time.time()
    times: list[Any] = [None] * n
    compat.all_gather_object(times, (entered, left))
    if me == 0:
        late = min(entry for entry, _ in times[1:])
        assert left < late, f"the root's broadcast waited {left - late:.2f} s for a late rank"


def case_fallback(kit: Any) -> None:
    """A group whose ranks are not all on one host (rank 0 says it is elsewhere) gets no window
    on any rank, and the table's other choice runs: the results are still numpy's."""
    real = shared_memory.host_identity
    if compat.get_rank() == 0:
        shared_memory.host_identity = lambda: "another host"
    try:
        group = compat.new_group(list(range(world())))
        n, me = world(), compat.get_rank()
        x = kit.tensor(values("sm-fallback", me, (4, 2)), "float32")
        compat.all_reduce(x, group=group)
    finally:
        shared_memory.host_identity = real
    expected = reduce_np([values("sm-fallback", r, (4, 2)) for r in range(n)], "sum")
    np.testing.assert_allclose(kit.numpy(x), expected, rtol=1e-6)
    adapter = _adapter()
    assert shared_memory.has_entry(adapter, group.handle), "no window entry"
    assert shared_memory.made(adapter, group.handle) is None, "a window on several hosts"
    out = kit.tensor(np.zeros((2 * n, 2)), "float32")
    compat.all_gather_into(out, kit.tensor(values("sm-fb", me, (2, 2)), "float32"), group)
    expected = np.concatenate([values("sm-fb", r, (2, 2)) for r in range(n)])
    np.testing.assert_allclose(kit.numpy(out), expected, rtol=1e-6)
    runtime = state.current()
    chosen = runtime.implementation("all_reduce", x, None, group.handle)
    assert getattr(chosen, "func", None) not in (
        algorithms.shared_memory_all_reduce,
        algorithms.shared_memory_all_reduce_in_shares,
    ), chosen
    compat.destroy(group)
    # Destroying the group drops its window and what was chosen for it (choices are kept by
    # group handle, and a later group may get an equal handle).
    assert not shared_memory.has_entry(adapter, group.handle), "destroy(group) left its window"
    kept = [key for key in runtime._implementations if key[2] == group.handle]
    assert not kept, kept


def case_stale_files(kit: Any) -> None:
    """Making a window removes the files of processes that died during a set-up (their pid
    gone, older than a minute), and only those: not a dead process's recent file, nor a live
    process's old one."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    me = compat.get_rank()
    made = {
        "stale": f"{shared_memory.PREFIX}{dead.pid}-test{me}stale",
        "recent": f"{shared_memory.PREFIX}{dead.pid}-test{me}recent",
        "alive": f"{shared_memory.PREFIX}{os.getpid()}-test{me}alive",
    }
    paths = {key: os.path.join(shared_memory.DIRECTORY, name) for key, name in made.items()}
    old = time.time() - 2 * shared_memory.STALE_SECONDS
    for key, path in paths.items():
        with open(path, "wb"):
            pass
        if key != "recent":
            os.utime(path, (old, old))
    try:
        group = compat.new_group(list(range(world())))
        assert shared_memory.window(_adapter(), group.handle) is not None, "no window"
        left = {key for key, path in paths.items() if os.path.exists(path)}
        assert left == {"recent", "alive"}, f"left: {sorted(left)}"
        compat.destroy(group)
    finally:
        for path in paths.values():
            if os.path.exists(path):
                os.unlink(path)


def case_opt_out(kit: Any) -> None:
    """COMPAT_SHARED_MEMORY=0 on one rank (the last) keeps a new group off shared memory on
    every rank; its collectives still give numpy's results."""
    n, me = world(), compat.get_rank()
    if me == n - 1:
        os.environ[shared_memory.ENVIRONMENT] = "0"
    try:
        group = compat.new_group(list(range(n)))
        x = kit.tensor(values("sm-opt-out", me, (3, 2)), "float32")
        compat.all_reduce(x, op=compat.ReduceOp.MAX, group=group)
    finally:
        os.environ.pop(shared_memory.ENVIRONMENT, None)
    expected = reduce_np([values("sm-opt-out", r, (3, 2)) for r in range(n)], "max")
    np.testing.assert_allclose(kit.numpy(x), expected, rtol=1e-6)
    assert shared_memory.has_entry(_adapter(), group.handle), "no window entry"
    assert shared_memory.made(_adapter(), group.handle) is None, "a window against the opt-out"
    compat.destroy(group)


def _completes_within(work: Any, seconds: float, what: str) -> None:
    """Wait for ``work`` by polling, failing after ``seconds`` (a deadlock fails the case here,
    instead of waiting for the backend's 30 minutes)."""
    deadline = time.monotonic() + seconds
    while not work.is_completed():
        assert time.monotonic() < deadline, f"{what}: not completed within {seconds} s"
        time.sleep(0.001)
    work.wait()


def _background_group() -> compat.Group:
    """A new group of every rank, where the table runs shared-memory collectives' async calls
    on the window's thread (capabilities.toml: async = "background")."""
    key = state.current().capability_key
    for collective in ("all_reduce", "broadcast", "all_gather_into_tensor", "all_to_all_single"):
        asynchrony = capabilities.choice(key, collective, "float32", 0, True, world())[1]
        assert asynchrony == capabilities.BACKGROUND, (collective, asynchrony)
    return compat.new_group(list(range(world())))


def case_background_overlap(kit: Any) -> None:
    """An async collective through shared memory returns at once, as Gloo's own does: rank 0
    starts an all_reduce, then sends rank 1 what rank 1 waits for before it joins the
    all_reduce. (When the Work came back completed, rank 0 waited in the all_reduce for rank 1,
    and rank 1 in its receive for rank 0, until the timeout.) The result is numpy's, in a view
    inside a sentinel-filled base."""
    group = _background_group()
    n, me = world(), compat.get_rank()
    x = Placed(kit, values("sm-overlap", me, (6, 3)), "float32", "interior")
    message = values("sm-overlap-message", 0, (4,))
    if me == 0:
        work = compat.all_reduce(x.view, group=group, async_op=True)
        assert work is not None
        compat.send(kit.tensor(message, "float32"), 1)
        _completes_within(work, 60, "rank 0's all_reduce")
    else:
        if me == 1:
            received = kit.tensor(np.zeros(4), "float32")
            # Gloo's receive reports is_completed() only once waited on: a bounded wait.
            compat.irecv(received, 0).wait(timedelta(seconds=60))
            np.testing.assert_array_equal(kit.numpy(received), message.astype(np.float32))
        compat.all_reduce(x.view, group=group)
    x.result(reduce_np([values("sm-overlap", r, (6, 3)) for r in range(n)], "sum"))
    x.check("all_reduce overlapping a send")
    compat.destroy(group)


def case_background_order(kit: Any) -> None:
    """Async collectives of several kinds, issued back to back, run in issue order on the
    window's thread and are waited for in the reverse order; a synchronous collective issued
    after them runs after them. Every result is numpy's, in views inside sentinel-filled bases
    (each whole base checked once its Work has been waited for)."""
    group = _background_group()
    n, me = world(), compat.get_rank()
    summed = Placed(kit, values("sm-order-sum", me, (5, 4)), "float32", "strided")
    maxed = Placed(kit, values("sm-order-max", me, (9,)), "float32", "dense")
    root = n - 1
    broadcast = Placed(kit, values("sm-order-bcast", me, (3, 3)), "float32", "transposed")
    mine = values("sm-order-gather", me, (2, 3))
    gathered = sentinel_out(kit, (2 * n, 3), "float32", "interior")
    works = [
        compat.all_reduce(summed.view, group=group, async_op=True),
        compat.all_reduce(maxed.view, ReduceOp.MAX, group=group, async_op=True),
        compat.broadcast(broadcast.view, root, group=group, async_op=True),
    ]
    _, work = compat.all_gather_into_tensor(
        kit.tensor(mine, "float32"), group, True, out=gathered.view
    )
    works.append(work)
    # Issued last, synchronous: it returns once the four before it and itself have run.
    exchanged = sentinel_out(kit, (2 * n, 2), "float32", "column")
    compat.all_to_all_single(
        exchanged.view, kit.tensor(values("sm-order-a2a", me, (2 * n, 2)), "float32"), group=group
    )
    exchanged.result(
        np.concatenate(
            [values("sm-order-a2a", r, (2 * n, 2))[2 * me : 2 * me + 2] for r in range(n)]
        )
    )
    exchanged.check("all_to_all_single issued after four async collectives")
    assert all(work is not None and work.is_completed() for work in works), works
    for work in reversed(works):
        assert work is not None and work.wait(timedelta(seconds=60)) is True
    summed.result(reduce_np([values("sm-order-sum", r, (5, 4)) for r in range(n)], "sum"))
    summed.check("async all_reduce sum")
    maxed.result(reduce_np([values("sm-order-max", r, (9,)) for r in range(n)], "max"))
    maxed.check("async all_reduce max")
    broadcast.result(values("sm-order-bcast", root, (3, 3)))
    broadcast.check("async broadcast")
    gathered.result(np.concatenate([values("sm-order-gather", r, (2, 3)) for r in range(n)]))
    gathered.check("async all_gather_into_tensor")
    compat.destroy(group)


def case_background_abandoned(kit: Any) -> None:
    """A group destroyed while its async collective still waits for peers that never joined it
    (only rank 0 called it): after a grace, the Work's wait raises CollectiveTimeout saying so,
    no thread is left, and the next collective on the world works."""
    threads = set(threading.enumerate())
    group = _background_group()
    n, me = world(), compat.get_rank()
    compat.barrier(group=group)  # every rank's window exists before rank 0 goes alone
    x = kit.tensor(values("sm-abandoned", me, (4,)), "float32")
    work = compat.all_reduce(x, group=group, async_op=True) if me == 0 else None
    compat.barrier()
    compat.destroy(group)
    if work is not None:
        try:
            work.wait()
        except compat.CollectiveTimeout as error:
            assert "when its group was destroyed" in str(error), error
        else:
            raise AssertionError("expected CollectiveTimeout from the abandoned all_reduce")
    left = [t.name for t in set(threading.enumerate()) - threads]
    assert not left, f"the destroyed group's thread is left: {left}"
    y = kit.tensor(values("sm-abandoned-next", me, (3,)), "float32")
    compat.all_reduce(y)
    np.testing.assert_allclose(
        kit.numpy(y),
        reduce_np([values("sm-abandoned-next", r, (3,)) for r in range(n)], "sum"),
        rtol=1e-6,
    )


def case_barrier(kit: Any) -> None:
    """barrier on one host is a round of the group's window (the table's choice), and still
    waits for every rank: the last rank arrives 0.3 s late, sync and async, on the world and on
    a group compat made; with device_ids it is the backend's own call."""
    runtime = state.current()
    chosen = runtime.implementation("barrier", None, 0, None, "uint8")
    assert runs(chosen, "shared_memory_barrier"), chosen
    late = world() - 1
    group = compat.new_group(list(range(world())))
    for on, async_op in ((None, False), (None, True), (group, False), (group, True)):
        if compat.get_rank() == late:
            time.sleep(0.3)
        started = time.monotonic()
        work = compat.barrier(on, async_op=async_op)
        if async_op:
            assert work is not None
            work.wait()
        else:
            assert work is None
        waited = time.monotonic() - started
        if compat.get_rank() != late:
            assert waited >= 0.25, f"left the barrier after {waited:.2f} s (async={async_op})"
    assert compat.barrier(None, False, [0]) is None
    compat.destroy(group)


def case_new_group_meets(kit: Any) -> None:
    """compat.new_group waits, in the world's shared memory, until every rank has made the group,
    before the group's first collective (its window's set-up, a backend collective, which MCCL
    gives up on after 30 s): the last rank makes its group 1 s late, and every other rank starts
    that set-up only after it. The group then works (an all_reduce on it, checked)."""
    runtime = state.current()
    me, late = compat.get_rank(), world() - 1
    made, opened = runtime.adapter.new_group, runtime.open_window
    started_set_up: list[float] = []

    def made_late(*args: Any, **kwargs: Any) -> Any:
        time.sleep(1.0)
        return made(*args, **kwargs)

    def recorded(handle: Any) -> None:
        started_set_up.append(time.monotonic())
        opened(handle)

    if me == late:
        runtime.adapter.new_group = made_late
    runtime.open_window = recorded  # type: ignore[method-assign]
    try:
        started = time.monotonic()
        group = compat.new_group(list(range(world())))
    finally:
        del runtime.open_window
        if me == late:
            del runtime.adapter.new_group
    waited = started_set_up[0] - started
    assert me == late or waited >= 0.8, (
        f"the group's set-up began {waited:.2f} s in, before rank {late} made it"
    )
    tensor = kit.tensor(np.full(3, me + 1.0), "float32")
    compat.all_reduce(tensor, group=group)
    expected = np.full(3, sum(range(1, world() + 1)), np.float32)
    np.testing.assert_array_equal(kit.numpy(tensor), expected)
    compat.destroy(group)


register("shared_memory-barrier", case_barrier, min_world=2)
register("shared_memory-new_group-meets", case_new_group_meets, min_world=2)
register("shared_memory-rounds", case_rounds, min_world=2)
register("shared_memory-opt-out", case_opt_out, min_world=2)
register("shared_memory-stale-files", case_stale_files, min_world=2)
register("shared_memory-rooted", case_rooted, min_world=2)
register("shared_memory-reduce_scatter-rounds", case_reduce_scatter_rounds, min_world=2)
register("shared_memory-round-sizes", case_round_sizes, min_world=2)
register("shared_memory-chosen", case_chosen, min_world=2)
register("shared_memory-fallback", case_fallback, min_world=2)
register("shared_memory-one-way", case_one_way, min_world=2)
# MCCL's choices are async = "completed" (capabilities.toml): MindSpore's own async collectives
# on CPU wait in its one queue too.
register("shared_memory-background-overlap", case_background_overlap, 2, ("torch",))
register("shared_memory-background-order", case_background_order, 2, ("torch",))
register("shared_memory-background-abandoned", case_background_abandoned, 2, ("torch",))
