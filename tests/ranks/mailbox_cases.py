"""Point to point through shared memory (compat.transport.mailbox) on real ranks: messages larger
than the
channel (streamed around its ring), blocking sends on every rank before any receive, many
messages outstanding and waited out of order, tags matched out of order (torch), views inside
sentinel-filled bases (the whole base checked), a size mismatch and a timeout (refused on the
receiving rank, the next message unaffected), a collective while a peer's send waits for room,
a group destroyed under a pending receive, and the capability table's choice.

The other point-to-point cases (p2p_cases.py, object_cases.py) run through the same channels
wherever the table chooses them: every group compat made, on one host.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import numpy as np

import compat
from compat import algorithms
from compat.core import state
from compat.transport import mailbox, shared_memory
from tests.ranks.cases import register, values, wait_if, world
from tests.ranks.layout_cases import Placed, sentinel_out
from tests.ranks.p2p_cases import data, ring_peers

#: A channel this small (4 headers' worth of data) makes every message below but the smallest
#: go around its ring several times.
SMALL_CHANNEL = 256


def _receive_checked(
    kit: Any, expected: np.ndarray, layout: str, src: int, group: Any, what: str, tag: int = 0
) -> None:
    """Receive ``expected`` (float32) from ``src`` into a ``layout`` view inside a
    sentinel-filled base, and check the whole base."""
    out = sentinel_out(kit, expected.shape, "float32", layout)
    compat.recv(out.view, src, group, tag)
    out.result(expected)
    out.check(what)


def _small_channel_group() -> compat.Group:
    """A group of every rank whose window, made with it, has channels of SMALL_CHANNEL bytes,
    reading large messages directly or streaming them through the rings as
    mailbox.DIRECT_READS says (each case using it runs both ways: _both_ways)."""
    kept = shared_memory.CHANNEL_BYTES
    shared_memory.CHANNEL_BYTES = SMALL_CHANNEL
    try:
        group = compat.new_group(list(range(world())))
    finally:
        shared_memory.CHANNEL_BYTES = kept
    window = shared_memory.made(state.current().adapter, group.handle)
    assert window is not None and window.point_to_point, window
    assert window.channel_bytes == SMALL_CHANNEL, window.channel_bytes
    _check_direct(window.mailbox(), mailbox.DIRECT_READS)
    return group


def _check_direct(box: mailbox.Mailbox, reads: bool) -> None:
    me = compat.get_rank()
    for peer in range(world()):
        if peer != me:
            assert box.reads_directly_from(peer) == reads, (peer, reads)


def _both_ways(case: Callable[[Any], None], reads: bool) -> Callable[[Any], None]:
    """``case`` with the mailboxes it makes reading large messages directly or not."""

    def run(kit: Any) -> None:
        kept = mailbox.DIRECT_READS
        mailbox.DIRECT_READS = reads
        try:
            case(kit)
        finally:
            mailbox.DIRECT_READS = kept

    return run


#: (rows, dtype, layout) of the messages streamed: 1 to 1000 elements, every layout.
STREAMED = [
    ((1,), "float32", "dense"),
    ((7, 10), "float32", "strided"),
    ((50, 20), "float64", "interior"),
    ((9, 13), "int32", "transposed"),
    ((33, 5), "bfloat16", "column"),
    ((1000,), "uint8", "offset0"),
]


def case_streams(kit: Any) -> None:
    """A ring (isend right, irecv left) of each message in STREAMED through 256-byte channels,
    received into views of sentinel-filled bases; then blocking sends on every rank before any
    receive, which complete because every rank's wait takes in what arrives for it."""
    group = _small_channel_group()
    right, left = ring_peers(list(range(world())))
    me = compat.get_rank()
    for receive_first in (False, True):
        for shape, dtype, layout in STREAMED:
            seed = f"mailbox-stream-{dtype}-{receive_first}"
            source = Placed(kit, data(seed, me, shape, dtype), dtype, layout)
            target = sentinel_out(kit, shape, dtype, layout)
            if receive_first:
                works = [
                    compat.irecv(target.view, left, group),
                    compat.isend(source.view, right, group),
                ]
            else:
                works = [
                    compat.isend(source.view, right, group),
                    compat.irecv(target.view, left, group),
                ]
            for work in works:
                work.wait()
            target.result(data(seed, left, shape, dtype))
            target.check(f"ring {shape} {dtype} {layout}, receive first: {receive_first}")
            source.check(f"ring {shape} {dtype} {layout}: the sent view changed")
    # Every rank sends 4000 bytes (16 channels' worth) before it receives.
    outgoing = kit.tensor(values("mailbox-blocking", me, (1000,)), "float32")
    compat.send(outgoing, right, group)
    expected = values("mailbox-blocking", left, (1000,))
    _receive_checked(kit, expected, "interior", left, group, "blocking sends first on every rank")
    compat.destroy(group)


def case_outstanding(kit: Any) -> None:
    """Six messages of different sizes and dtypes outstanding each way, the receives posted
    before the sends on odd ranks, every Work waited in reverse order; then a batch."""
    group = _small_channel_group()
    right, left = ring_peers(list(range(world())))
    me = compat.get_rank()
    kinds = ((3, "float32"), (200, "int64"), (1, "int8"), (90, "float16"), (17, "float64"))
    shapes = [((n,), dtype) for n, dtype in (*kinds, (64, "int32"))]
    targets = [sentinel_out(kit, shape, dtype, "strided") for shape, dtype in shapes]
    sources = [
        kit.tensor(data(f"mailbox-out-{i}", me, shape, dtype), dtype)
        for i, (shape, dtype) in enumerate(shapes)
    ]
    receives = [partial(compat.irecv, target.view, left, group) for target in targets]
    sends = [partial(compat.isend, source, right, group) for source in sources]
    issued = receives + sends if me % 2 else sends + receives
    works = [issue() for issue in issued]
    for work in reversed(works):
        work.wait()
        assert work.is_completed()
    for i, ((shape, dtype), target) in enumerate(zip(shapes, targets, strict=True)):
        target.result(data(f"mailbox-out-{i}", left, shape, dtype))
        target.check(f"outstanding message {i}")
    received = sentinel_out(kit, (30, 10), "float32", "column")
    batch = compat.batch_isend_irecv(
        [
            compat.P2POp(compat.irecv, received.view, left, group),
            compat.P2POp(
                compat.isend, kit.tensor(values("mailbox-batch", me, (30, 10)), "float32"), right,
                group,
            ),
        ]
    )  # fmt: skip
    for work in reversed(batch):
        work.wait()
    received.result(values("mailbox-batch", left, (30, 10)))
    received.check("batch through the channels")
    compat.destroy(group)


def case_tags(kit: Any) -> None:
    """Rank 0 sends tags 1, 2, 3 to rank 1, which receives them as 3, 1, 2: each receive takes
    the message of its tag (the earlier ones are kept aside meanwhile)."""
    group = _small_channel_group()
    me = compat.get_rank()
    sizes = {1: 100, 2: 7, 3: 150}
    if me == 0:
        for tag in (1, 2, 3):
            compat.send(kit.tensor(np.full(sizes[tag], tag * 10.0), "float32"), 1, group, tag)
    elif me == 1:
        for tag in (3, 1, 2):
            expected = np.full(sizes[tag], tag * 10.0)
            _receive_checked(kit, expected, "interior", 0, group, f"tag {tag}", tag)
    compat.barrier(group)
    compat.destroy(group)


def case_mismatch_and_timeout(kit: Any) -> None:
    """A receive whose tensor is larger than the message sent raises CollectiveMismatchError on
    the receiving rank, its tensor untouched; a receive nobody sends to raises CollectiveTimeout
    within Work.wait's timeout, and a message sent afterwards goes to the next receive, not the
    abandoned one."""
    group = _small_channel_group()
    me = compat.get_rank()
    if me == 0:
        compat.send(kit.tensor(np.arange(10.0), "float32"), 1, group)
    elif me == 1:
        out = sentinel_out(kit, (12,), "float32", "dense")
        try:
            compat.recv(out.view, 0, group)
        except compat.CollectiveMismatchError as error:
            assert "40 bytes" in str(error) and "48 bytes" in str(error), str(error)
        else:
            raise AssertionError("a receive of 48 bytes took a message of 40")
        out.check("the tensor of a refused receive")
    if me == 1:
        abandoned = sentinel_out(kit, (5,), "float32", "dense")
        work = compat.irecv(abandoned.view, 0, group)
        try:
            work.wait(timedelta(seconds=0.5))
        except compat.CollectiveTimeout as error:
            assert "group rank 0" in str(error), str(error)
        else:
            raise AssertionError("a receive nobody sent to completed")
    compat.barrier(group)
    if me == 0:
        compat.send(kit.tensor(np.full(5, 7.0), "float32"), 1, group)
    elif me == 1:
        _receive_checked(
            kit, np.full(5, 7.0), "dense", 0, group, "the receive after a timed-out one"
        )
        abandoned.check("the timed-out receive's tensor")
    compat.barrier(group)
    compat.destroy(group)


def case_collective_meanwhile(kit: Any) -> None:
    """Rank 0 sends rank 1 sixteen channels' worth, blocking, then joins an all_reduce; rank 1
    joins the all_reduce first and receives after it: the all_reduce's wait takes the message
    in, so rank 0's send completes and reaches the all_reduce. Then the same with a receive on
    another group in place of the all_reduce."""
    group = _small_channel_group()
    me, n = compat.get_rank(), world()
    x = kit.tensor(np.full(4, me + 1.0), "float32")
    if me == 0:
        compat.send(kit.tensor(values("mailbox-meanwhile", 0, (1000,)), "float32"), 1, group)
        compat.all_reduce(x, group=group)
    elif me == 1:
        compat.all_reduce(x, group=group)
        expected = values("mailbox-meanwhile", 0, (1000,))
        _receive_checked(kit, expected, "strided", 0, group, "received after the collective")
    else:
        compat.all_reduce(x, group=group)
    np.testing.assert_allclose(kit.numpy(x), np.full(4, n * (n + 1) / 2))
    # The same across groups: rank 1 waits for a message on another group, which rank 0 sends
    # only once its blocking send on the first group is through.
    other = _small_channel_group()
    if me == 0:
        compat.send(kit.tensor(values("mailbox-across", 0, (1000,)), "float32"), 1, group)
        compat.send(kit.tensor(np.full(3, 5.0), "float32"), 1, other)
    elif me == 1:
        _receive_checked(
            kit, np.full(3, 5.0), "interior", 0, other, "the message on the other group"
        )
        _receive_checked(
            kit, values("mailbox-across", 0, (1000,)), "strided", 0, group,
            "the message taken in while waiting on the other group",
        )  # fmt: skip
    compat.barrier()
    compat.destroy(other)
    compat.destroy(group)


def case_destroyed(kit: Any) -> None:
    """A receive still pending when its group is destroyed raises CollectiveTimeout saying so
    from wait(); the world's channels still work afterwards."""
    group = _small_channel_group()
    me = compat.get_rank()
    pending = None
    if me == 0:
        pending = compat.irecv(kit.tensor(np.zeros(3), "float32"), 1, group)
    compat.barrier()
    compat.destroy(group)
    if pending is not None:
        try:
            pending.wait()
        except compat.CollectiveTimeout as error:
            assert "destroyed" in str(error), str(error)
        else:
            raise AssertionError("a receive on a destroyed group completed")
    right, left = ring_peers(list(range(world())))
    out = sentinel_out(kit, (3,), "float32", "interior")
    works = [
        compat.isend(kit.tensor(np.full(3, me), "float32"), right),
        compat.irecv(out.view, left),
    ]
    for work in works:
        work.wait()
    out.result(np.full(3, left))
    out.check("the world's channels after a group was destroyed")


def case_chosen(kit: Any) -> None:
    """The table's choice: every point-to-point call on the world (whose window compat.init
    made) and on a compat.new_group runs through the channels; the world's window has them."""
    runtime = state.current()
    x = kit.tensor(np.zeros(4), "float32")
    for name in ("send", "recv", "isend", "irecv", "batch_isend_irecv"):
        chosen = runtime.implementation(name, x, group=None)
        assert getattr(chosen, "func", None) is getattr(algorithms, f"shared_memory_{name}"), (
            name,
            chosen,
        )
    window = shared_memory.made(runtime.adapter, None)
    assert window is not None and window.point_to_point, window
    assert window.channel_bytes == shared_memory.channel_bytes(world()), window.channel_bytes


def case_direct(kit: Any) -> None:
    """Messages larger than the world's channels, read from the sender's memory: a ring of
    isend/irecv of 1-4 channels' worth in views inside sentinel-filled bases (each base checked
    whole, the sent views unchanged); only the headers went through the ring; then blocking
    sends on every rank before any receive (each taken in while its receiver waits in its own
    send), blocking sends and receives in turn, and a receive posted long before its send."""
    window = shared_memory.made(state.current().adapter, None)
    assert window is not None and window.point_to_point, window
    box = window.mailbox()
    _check_direct(box, True)
    # No barrier first: the ranks met once every mailbox was made (SharedWindow.
    # open_point_to_point), so that even a job's first large message goes directly (this case
    # first in a job, without that round: a header and the data through the ring, 1 run in 3
    # at 3 ranks on MindSpore).
    channel = window.channel_bytes
    right, left = ring_peers(list(range(world())))
    me = compat.get_rank()
    shapes = [
        ((channel // 4 + 1,), "float32", "offset0"),
        ((channel // 32, 17), "float64", "interior"),
        ((channel // 16, 9), "int32", "transposed"),
    ]
    for shape, dtype, layout in shapes:
        seed = f"mailbox-direct-{dtype}"
        source = Placed(kit, data(seed, me, shape, dtype), dtype, layout)
        target = sentinel_out(kit, shape, dtype, layout)
        before = box.ring_bytes_sent(box.index[right])
        works = [compat.isend(source.view, right), compat.irecv(target.view, left)]
        for work in works:
            work.wait()
        target.result(data(seed, left, shape, dtype))
        target.check(f"direct {shape} {dtype} {layout}")
        source.check(f"direct {shape} {dtype} {layout}: the sent view changed")
        sent = box.ring_bytes_sent(box.index[right]) - before
        assert sent == mailbox.HEADER, f"{sent} bytes went through the ring, not only a header"
    outgoing = kit.tensor(values("mailbox-direct-blocking", me, (channel // 2,)), "float32")
    compat.send(outgoing, right)
    expected = values("mailbox-direct-blocking", left, (channel // 2,))
    _receive_checked(kit, expected, "strided", left, None, "blocking direct sends first")
    # Even ranks send first, odd ones receive first (no cycle of blocking calls): a header that
    # arrives while its receiver still waits in its send is read once the receive is posted.
    for turn in range(3):
        seed = f"mailbox-direct-alternating-{turn}"
        outgoing = kit.tensor(values(seed, me, (channel // 2 + turn,)), "float32")
        expected = values(seed, left, (channel // 2 + turn,))
        what = f"blocking direct send and recv, turn {turn}"
        if me % 2 == 0:
            compat.send(outgoing, right)
            _receive_checked(kit, expected, "interior", left, None, what)
        else:
            _receive_checked(kit, expected, "interior", left, None, what)
            compat.send(outgoing, right)
    if me == 0:
        target = sentinel_out(kit, (channel // 12, 4), "float32", "column")
        work = compat.irecv(target.view, world() - 1)
        compat.barrier()
        work.wait()
        target.result(values("mailbox-direct-late", world() - 1, (channel // 12, 4)))
        target.check("a receive posted before its direct send")
    else:
        compat.barrier()
        if me == world() - 1:
            late = values("mailbox-direct-late", me, (channel // 12, 4))
            compat.send(kit.tensor(late, "float32"), 0)
    compat.barrier()


def case_direct_in_halves(kit: Any) -> None:
    """case_direct with every direct read of this rank in two halves at once (SPLIT_READ_BYTES
    lowered here: the helper thread reads the second half), each base checked whole."""
    kept = mailbox.SPLIT_READ_BYTES
    mailbox.SPLIT_READ_BYTES = 1
    try:
        case_direct(kit)
    finally:
        mailbox.SPLIT_READ_BYTES = kept


#: (rows of 3, dtype, layout) of the scatter and gather through the channels: a part that fits
#: in a 256-byte channel, and parts of several channels' worth (streamed or read directly).
ROOTED = [(2, "float32", "interior"), (40, "int32", "column"), (23, "float64", "transposed")]


def case_rooted(kit: Any) -> None:
    """scatter and gather through the channels (shared_memory_p2p_scatter, _gather) through
    256-byte channels, from every root, sync and async, views of sentinel-filled bases (the
    whole base checked, the sent views unchanged), with a user's message of tag 0 from each rank
    to the root sent before each call and received after it (the collectives' messages never
    take it); then on the world, parts larger than its channels, only headers through the
    rings where large messages are read directly; then a window without channels (made after
    its group), where they run in rounds."""
    adapter = state.current().adapter
    group = _small_channel_group()
    n, me = world(), compat.get_rank()
    for root in range(n):
        for async_op in (False, True):
            for rows, dtype, layout in ROOTED:
                _rooted_through_channels(
                    kit, group, root, async_op, (rows, 3), dtype, layout, f"small {root}"
                )
    compat.destroy(group)
    window = shared_memory.made(adapter, None)
    box = window.mailbox()
    rows = window.channel_bytes // 8 + 1  # float32 (rows, 2): more than a channel
    for root in range(n):
        sent = [box.ring_bytes_sent(peer) for peer in range(n)]
        _rooted_through_channels(kit, None, root, False, (rows, 2), "float32", "column", "world")
        through = [box.ring_bytes_sent(peer) - sent[peer] for peer in range(n)]
        if mailbox.DIRECT_READS and box.reads_directly_from(root):
            if me != root:  # gather's part (a header alone) and the user's note (header, 64 bytes)
                assert through[root] == 3 * mailbox.HEADER, through
    group = compat.new_group(list(range(n)))
    later = shared_memory.made(adapter, group.handle)
    assert later is not None, "new_group made no window"
    later.point_to_point = False  # as a window made on a group's first collective
    before = later.rounds
    _rooted_through_channels(kit, None, 0, False, (rows, 2), "float32", "interior", "rounds", group)
    assert later.rounds > before, "a window without channels: no rounds ran"
    later.point_to_point = True
    compat.destroy(group)


def _rooted_through_channels(
    kit: Any,
    group: Any,
    root: int,
    async_op: bool,
    shape: tuple[int, int],
    dtype: str,
    layout: str,
    label: str,
    window_group: Any = None,
) -> None:
    """One scatter and one gather from ``root`` (a group rank) through the channels of
    ``group`` (None: the world), each between a user's message to the root and its receive;
    ``window_group``: the group whose window runs them instead (its ranks are the world's)."""
    n, me = world(), compat.get_rank()
    on = group if window_group is None else window_group
    handle = None if on is None else on.handle
    adapter = state.current().adapter
    what = f"{label} root {root} {shape} {dtype} {layout} async={async_op}"
    seed = f"mailbox-rooted-{what}"
    note = kit.tensor(np.array([me + 0.5]), "float32")
    noted = kit.tensor(np.zeros(1), "float32")
    if me != root:
        compat.send(note, root, group)
    parts = [Placed(kit, data(seed, 10 * me + j, shape, dtype), dtype, layout) for j in range(n)]
    out = sentinel_out(kit, shape, dtype, layout)
    done = algorithms.shared_memory_p2p_scatter(
        adapter, out.view, [p.view for p in parts] if me == root else None, root, handle, async_op
    )
    wait_if(done, async_op)
    out.result(data(seed, 10 * root + me, shape, dtype))
    out.check(f"scatter {what}")
    for j, part in enumerate(parts):
        part.check(f"scatter {what}: part {j} changed")
    mine = Placed(kit, data(seed + "g", me, shape, dtype), dtype, layout)
    outs = [sentinel_out(kit, shape, dtype, layout) for _ in range(n)]
    done = algorithms.shared_memory_p2p_gather(
        adapter, mine.view, [o.view for o in outs] if me == root else None, root, handle, async_op
    )
    wait_if(done, async_op)
    for j, o in enumerate(outs):
        if me == root:
            o.result(data(seed + "g", j, shape, dtype))
        o.check(f"gather {what}: part {j}")
    mine.check(f"gather {what}: the input changed")
    if me == root:
        for peer in range(n):
            if peer != root:
                compat.recv(noted, peer, group)
                expected = np.array([peer + 0.5])
                assert np.array_equal(kit.numpy(noted), expected), (what, kit.numpy(noted))


def case_rooted_mismatch(kit: Any) -> None:
    """A scatter through the channels whose part for rank 1 is smaller than rank 1's tensor:
    rank 1 raises CollectiveMismatchError naming the collectives and both sizes (not a "recv"),
    its tensor untouched, and the root returns; with the pre-flight check on (COMPAT_CHECK=1)
    every rank raises before any message, saying the ranks disagree. Then the next scatter and
    gather are exact."""
    group = _small_channel_group()
    me, n = compat.get_rank(), world()
    checked = state.current().check
    parts = [kit.tensor(np.full(10, float(j)), "float32") for j in range(n)]
    out = sentinel_out(kit, (12 if me == 1 else 10,), "float32", "dense")
    try:
        compat.scatter(out.view, parts if me == 0 else None, 0, group)
    except compat.CollectiveMismatchError as error:
        text = str(error)
        if checked:
            assert "disagree" in text and "rank 1 [12]" in text, text
        else:
            assert me == 1, f"rank {me}: {text}"
            assert text.startswith("scatter or gather:"), text
            assert "group rank 0" in text and "40 bytes" in text and "48 bytes" in text, text
        out.check("the tensor of a refused part")
    else:
        assert not checked and me != 1, f"rank {me}: a part of 40 bytes went to a tensor of 48"
    compat.barrier(group)
    out = sentinel_out(kit, (10,), "float32", "dense")
    compat.scatter(out.view, parts if me == 0 else None, 0, group)
    out.result(np.full(10, float(me)))
    out.check("the scatter after a refused part")
    gathered = [sentinel_out(kit, (10,), "float32", "dense") for _ in range(n)]
    mine = kit.tensor(np.full(10, me + 0.5), "float32")
    compat.gather(mine, [g.view for g in gathered] if me == 0 else None, 0, group)
    if me == 0:
        for j, g in enumerate(gathered):
            g.result(np.full(10, j + 0.5))
            g.check(f"the gather after a refused part: part {j}")
    compat.barrier(group)
    compat.destroy(group)


# MindSpore's tag is a reserved parameter (any tag but 0 is an UnsupportedError).
for _name, _case, _frameworks in (
    ("mailbox-streams", case_streams, ("torch", "mindspore")),
    ("mailbox-outstanding", case_outstanding, ("torch", "mindspore")),
    ("mailbox-mismatch-timeout", case_mismatch_and_timeout, ("torch", "mindspore")),
    ("mailbox-collective-meanwhile", case_collective_meanwhile, ("torch", "mindspore")),
    ("mailbox-rooted", case_rooted, ("torch", "mindspore")),
    ("mailbox-rooted-mismatch", case_rooted_mismatch, ("torch", "mindspore")),
    ("mailbox-tags", case_tags, ("torch",)),
):
    register(_name, _both_ways(_case, True), 2, _frameworks)
    register(f"{_name}-through-ring", _both_ways(_case, False), 2, _frameworks)
for _name, _case in (
    ("mailbox-destroyed", case_destroyed),
    ("mailbox-chosen", case_chosen),
    ("mailbox-direct", case_direct),
    ("mailbox-direct-halves", case_direct_in_halves),
):
    register(_name, _case, min_world=2)
