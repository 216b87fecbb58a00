"""compat.transport.mailbox's channels in one process: two ranks' mailboxes over anonymous memory,
driven
call by call, so that every interleaving below is exact (a ring wrapping mid-message, a message
kept aside until its receive comes, a size mismatch, a withdrawn receive). The channels are
tested on real ranks, on both frameworks, in tests/ranks/mailbox_cases.py and through every
point-to-point case.
"""

from __future__ import annotations

import ctypes
import gc
import mmap
import os
import threading
import weakref
from typing import Any

import numpy as np
import pytest

from compat.base.errors import CollectiveMismatchError, CollectiveTimeout
from compat.transport import mailbox
from compat.transport.mailbox import HEADER, MARKER, Mailbox
from compat.transport.shared_memory import file_bytes
from tests.processes import churning_environment

CHANNEL = 256


def _pair(channel: int = CHANNEL, direct: bool = False) -> tuple[Mailbox, Mailbox]:
    """Two ranks' mailboxes; ``direct``: each reads the other's large messages from its memory
    (both "processes" are this one, whose own memory process_vm_readv reads too)."""
    size = file_bytes(2, 0, channel)
    views = [memoryview(mmap.mmap(-1, size)) for _ in range(2)]
    processes = None
    if direct:
        for rank, view in enumerate(views):
            view[MARKER : MARKER + 8] = bytes([rank + 1] * 8)
        processes = [
            (os.getpid(), ctypes.addressof(ctypes.c_char.from_buffer(view))) for view in views
        ]
    fence = threading.Lock()
    return tuple(  # type: ignore[return-value]
        Mailbox(views, me, 64, channel, fence, 2.0, 0, [10, 11], processes) for me in range(2)
    )


def _send(mailbox: Mailbox, array: np.ndarray, peer: int, tag: int = 0) -> Any:
    return mailbox.isend(array.ctypes.data, array.nbytes, peer, tag, array)


def _receive(mailbox: Mailbox, array: np.ndarray, peer: int, tag: int = 0) -> Any:
    return mailbox.irecv(array.ctypes.data, array.nbytes, peer, tag, array)


def _data(n: int, seed: int) -> np.ndarray:
    return ((np.arange(n) * 7 + seed) % 251).astype(np.uint8)


def test_a_message_that_fits_is_complete_at_once_and_received_whole() -> None:
    zero, one = _pair()
    sent = _send(zero, _data(100, 1), 1, 0)
    assert sent.done  # 64 + 128 bytes fit in 256
    out = np.zeros(100, np.uint8)
    received = _receive(one, out, 0, 0)
    assert received.done and received.wait()
    np.testing.assert_array_equal(out, _data(100, 1))


def test_messages_larger_than_the_ring_stream_around_it_in_order() -> None:
    zero, one = _pair()
    sizes = [1000, 3, 513, 64, 0, 777]
    sends = [_send(zero, _data(n, i), 1, 0) for i, n in enumerate(sizes)]
    outs = [np.zeros(n, np.uint8) for n in sizes]
    receives = [_receive(one, out, 0, 0) for out in outs]
    # Each side moves on only when the other does: alternate until all is done.
    for _ in range(200):
        zero.progress()
        one.progress()
    assert all(message.done for message in sends + receives)
    for i, out in enumerate(outs):
        np.testing.assert_array_equal(out, _data(sizes[i], i))
    assert zero._sent[1] == one._taken[0] == sum(HEADER + -(-n // 64) * 64 for n in sizes)


def test_a_message_no_receive_takes_yet_is_kept_aside_while_waiting() -> None:
    """A rank in a wait takes in what arrives (as a backend's receiving thread stores it): a
    sender blocked on a full ring completes; the receive posted later gets it."""
    zero, one = _pair()
    big = _send(zero, _data(2000, 5), 1, 0)
    assert not big.done
    for _ in range(100):
        one.take_in()  # one waits in something else (a collective, its own send)
        zero.progress()
    assert big.done
    out = np.zeros(2000, np.uint8)
    received = _receive(one, out, 0, 0)
    assert received.done
    np.testing.assert_array_equal(out, _data(2000, 5))


def test_each_receive_takes_the_first_message_of_its_tag() -> None:
    zero, one = _pair()
    for tag in (1, 2, 3):
        _send(zero, np.full(10 * tag, tag, np.uint8), 1, tag)
        one.progress()
        zero.progress()
    outs = {tag: np.zeros(10 * tag, np.uint8) for tag in (3, 1, 2)}
    receives = {tag: _receive(one, out, 0, tag) for tag, out in outs.items()}
    for _ in range(50):
        zero.progress()
        one.progress()
    for tag, out in outs.items():
        assert receives[tag].done
        np.testing.assert_array_equal(out, np.full(10 * tag, tag, np.uint8))


def test_a_size_mismatch_fails_the_receive_and_the_next_message_is_intact() -> None:
    zero, one = _pair()
    _send(zero, _data(40, 1), 1, 0)
    _send(zero, _data(300, 2), 1, 0)
    wrong = np.full(48, 9, np.uint8)
    refused = _receive(one, wrong, 0, 0)
    with pytest.raises(CollectiveMismatchError, match=r"sent 40 bytes.*holds 48 bytes"):
        refused.wait()
    np.testing.assert_array_equal(wrong, np.full(48, 9, np.uint8))
    out = np.zeros(300, np.uint8)
    right = _receive(one, out, 0, 0)
    for _ in range(20):
        zero.progress()
        one.progress()
    assert right.wait()
    np.testing.assert_array_equal(out, _data(300, 2))


def test_a_direct_message_of_another_size_is_read_past_without_a_copy(monkeypatch: Any) -> None:
    """A message read directly whose receive holds another size fails that receive, as through
    the ring, and is not copied at all (it could be 64 MB); the sender's send completes and the
    next message arrives whole."""
    zero, one = _pair(direct=True)
    reads: list[int] = []
    real_read = mailbox._read_process

    def counted_read(pid: int, remote: int, nbytes: int, local: int) -> Any:
        reads.append(nbytes)
        return real_read(pid, remote, nbytes, local)

    monkeypatch.setattr(mailbox, "_read_process", counted_read)
    sent = _send(zero, _data(3000, 1), 1, 0)
    wrong = np.full(2000, 9, np.uint8)
    refused = _receive(one, wrong, 0, 0)
    with pytest.raises(CollectiveMismatchError, match=r"sent 3000 bytes.*holds 2000 bytes"):
        refused.wait()
    np.testing.assert_array_equal(wrong, np.full(2000, 9, np.uint8))
    assert reads == [], f"the mismatched message was read: {reads}"
    zero.progress()
    assert sent.wait()
    _send(zero, _data(3000, 2), 1, 0)
    out = np.zeros(3000, np.uint8)
    assert _receive(one, out, 0, 0).wait()
    assert reads == [3000]
    np.testing.assert_array_equal(out, _data(3000, 2))


def test_a_receive_that_times_out_is_withdrawn() -> None:
    zero, one = _pair()
    abandoned = np.full(8, 9, np.uint8)
    message = _receive(one, abandoned, 0, 0)
    with pytest.raises(CollectiveTimeout, match="group rank 0 did not send it"):
        one.wait(message, 0.05)
    _send(zero, _data(8, 3), 1, 0)
    later = np.zeros(8, np.uint8)
    assert _receive(one, later, 0, 0).done
    np.testing.assert_array_equal(later, _data(8, 3))
    np.testing.assert_array_equal(abandoned, np.full(8, 9, np.uint8))


def test_a_closed_mailbox_fails_pending_calls() -> None:
    _, one = _pair()
    pending = _receive(one, np.zeros(4, np.uint8), 0, 0)
    one.close()
    with pytest.raises(CollectiveTimeout, match="destroyed"):
        one.wait(pending, 1.0)


def test_a_message_larger_than_the_ring_is_read_from_the_senders_memory() -> None:
    """Only its header goes through the ring; the send completes once the receiver has read it;
    a message that fits still goes through the ring whole."""
    zero, one = _pair(direct=True)
    assert zero.reads_directly_from(1) and one.reads_directly_from(0)
    big, small = _data(5000, 4), _data(100, 6)
    sends = [_send(zero, big, 1, 0), _send(zero, small, 1, 0)]
    assert not sends[0].done and not sends[1].done  # the small one queues behind the big one
    outs = [np.zeros(5000, np.uint8), np.zeros(100, np.uint8)]
    receives = [_receive(one, out, 0, 0) for out in outs]
    assert receives[0].done  # read at once, when the receive was posted
    zero.progress()
    one.progress()
    assert all(message.wait() for message in sends + receives)
    np.testing.assert_array_equal(outs[0], big)
    np.testing.assert_array_equal(outs[1], small)
    assert zero.ring_bytes_sent(1) == HEADER + (HEADER + 128)


def test_a_direct_message_no_receive_takes_yet_is_kept_aside_once_it_has_waited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rank that waits in something else reads a direct message aside only once its header
    has waited as long as reading it takes: then the sender, which may be blocked on it,
    completes, and the receive posted later gets it."""
    zero, one = _pair(direct=True)
    monkeypatch.setattr(mailbox, "DIRECT_READ_BYTES_PER_S", 1000.0)  # 3000 bytes: 3 s
    sent = _send(zero, _data(3000, 8), 1, 5)
    for _ in range(20):
        one.take_in()  # one waits in something else
        zero.progress()
    assert not sent.done and not one._stashed
    monkeypatch.setattr(mailbox, "DIRECT_READ_BYTES_PER_S", float("inf"))  # its time is up
    one.take_in()
    zero.progress()
    assert sent.done
    out = np.zeros(3000, np.uint8)
    assert _receive(one, out, 0, 5).done
    np.testing.assert_array_equal(out, _data(3000, 8))


def test_a_rank_whose_direct_send_is_unread_reads_its_receivers_message_aside_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two ranks send directly to each other before receiving. The first to look waits on a
    send the other has not read, with the other's header in its ring: both may be blocked, so
    it reads that message aside without waiting its time (3 s here). The other's send is then
    done, its receive comes next and reads straight, and the first's send completes."""
    zero, one = _pair(direct=True)
    monkeypatch.setattr(mailbox, "DIRECT_READ_BYTES_PER_S", 1000.0)  # 3000 bytes: 3 s
    mine, theirs = _data(3000, 3), _data(3000, 4)
    sends = [_send(zero, mine, 1, 0), _send(one, theirs, 0, 0)]
    zero.take_in()  # each waits on its own send
    one.take_in()
    assert sends[1].done and not sends[0].done
    got_mine = np.zeros(3000, np.uint8)
    assert _receive(one, got_mine, 0, 0).done  # one's send is done: it receives
    zero.take_in()
    assert sends[0].done
    got_theirs = np.zeros(3000, np.uint8)
    assert _receive(zero, got_theirs, 1, 0).done
    np.testing.assert_array_equal(got_theirs, theirs)
    np.testing.assert_array_equal(got_mine, mine)


def test_a_direct_message_whose_receive_comes_in_time_is_read_straight_into_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A blocking send then recv: the send's wait ends in the poll that sees the peer's direct
    header, and the receive posted next reads it straight into its tensor, not aside into a
    buffer first (one read, no buffer, no second copy)."""
    zero, one = _pair(direct=True)
    reads: list[int] = []
    read = mailbox._read_in_halves

    def recorded(pid: int, remote: int, nbytes: int, local: int) -> str | None:
        reads.append(local)
        return read(pid, remote, nbytes, local)

    monkeypatch.setattr(mailbox, "_read_in_halves", recorded)
    mine, theirs = _data(3000, 1), _data(3000, 2)
    sending = _send(zero, mine, 1, 0)  # zero: send, then recv
    got_mine = np.zeros(3000, np.uint8)
    assert _receive(one, got_mine, 0, 0).done  # one: recv, then send
    answer = _send(one, theirs, 0, 0)
    zero.wait(sending, 1.0)  # sees its send done and one's header in the same poll
    assert not zero._stashed and not reads[1:]
    base = np.full(3000 + 128, 0xEE, np.uint8)
    got_theirs = base[64:-64]
    assert _receive(zero, got_theirs, 1, 0).done
    one.wait(answer, 1.0)
    assert reads == [got_mine.ctypes.data, got_theirs.ctypes.data]
    np.testing.assert_array_equal(got_mine, mine)
    np.testing.assert_array_equal(got_theirs, theirs)
    assert (base[:64] == 0xEE).all() and (base[-64:] == 0xEE).all()


class _Waiter:
    """Stands for a mailbox in the process's registry: records that it was taken in."""

    def __init__(self, name: str, taken: list[str]) -> None:
        self.name, self.taken = name, taken

    def take_in(self) -> None:
        self.taken.append(self.name)


def test_a_wait_takes_in_every_open_mailbox_but_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """take_in_everywhere: each open mailbox of the process takes in, once, but the one waiting;
    one discarded, or dropped without being closed, is not taken in, nor kept alive."""
    registry = mailbox._OpenMailboxes()
    monkeypatch.setattr(mailbox, "_OPEN", registry)
    taken: list[str] = []
    a, b, c = (_Waiter(name, taken) for name in "abc")
    for waiter in (a, b, c, b):
        registry.add(waiter)  # type: ignore[arg-type]
    mailbox.take_in_everywhere(b)  # type: ignore[arg-type]
    assert taken == ["a", "c"]
    registry.discard(a)  # type: ignore[arg-type]
    taken.clear()
    mailbox.take_in_everywhere()
    assert taken == ["c", "b"]
    gone = weakref.ref(c)
    del c
    gc.collect()
    assert gone() is None
    taken.clear()
    mailbox.take_in_everywhere()
    assert taken == ["b"]


def test_a_closed_mailbox_leaves_the_registry() -> None:
    zero, one = _pair()
    assert {id(ref()) for ref in mailbox._OPEN.refs} >= {id(zero), id(one)}
    zero.close()
    assert all(ref() is not zero for ref in mailbox._OPEN.refs)
    assert any(ref() is one for ref in mailbox._OPEN.refs)
    one.close()


def test_a_large_direct_read_is_read_in_two_halves_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From SPLIT_READ_BYTES up, a direct read copies its first half while the helper thread
    copies the second: every byte lands where it belongs, in a sentinel-filled base, and
    nothing around it is written; below, one read in the calling thread."""
    monkeypatch.setattr(mailbox, "SPLIT_READ_BYTES", 4097)
    calls: list[tuple[int, str]] = []
    real_read = mailbox._read_process

    def recording(pid: int, remote: int, nbytes: int, local: int) -> Any:
        calls.append((nbytes, threading.current_thread().name))
        return real_read(pid, remote, nbytes, local)

    monkeypatch.setattr(mailbox, "_read_process", recording)
    for nbytes, parts in ((4097, [2048, 2049]), (4096, [4096])):
        calls.clear()
        source = _data(nbytes, 5)
        base = np.full(nbytes + 64, 0xEE, np.uint8)
        target = base[32 : 32 + nbytes]
        error = mailbox._read_in_halves(os.getpid(), source.ctypes.data, nbytes, target.ctypes.data)
        assert error is None
        expected = np.full(nbytes + 64, 0xEE, np.uint8)
        expected[32 : 32 + nbytes] = source
        np.testing.assert_array_equal(base, expected)
        assert sorted(size for size, _ in calls) == parts, nbytes
        helpers = [name for _, name in calls if name.startswith("compat-read")]
        assert len(helpers) == (len(parts) > 1), calls


def test_a_failed_half_fails_the_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Either half's failure is the read's, said as its read said it."""
    monkeypatch.setattr(mailbox, "SPLIT_READ_BYTES", 1000)
    source, target = _data(1000, 6), np.zeros(1000, np.uint8)
    real_read = mailbox._read_process
    failing = [0]

    def failing_read(pid: int, remote: int, nbytes: int, local: int) -> Any:
        if remote == failing[0]:
            return "process_vm_readv: Bad address"
        return real_read(pid, remote, nbytes, local)

    monkeypatch.setattr(mailbox, "_read_process", failing_read)
    for half in (source.ctypes.data, source.ctypes.data + 500):
        failing[0] = half
        target[:] = 0
        error = mailbox._read_in_halves(os.getpid(), source.ctypes.data, 1000, target.ctypes.data)
        assert error == "process_vm_readv: Bad address", half
        # the other half was read in full before the read returned
        other = slice(500, 1000) if half == source.ctypes.data else slice(0, 500)
        np.testing.assert_array_equal(target[other], source[other])


def test_a_direct_send_given_up_on_fails_its_late_receive() -> None:
    """A direct send that timed out is withdrawn in its header: the receive that comes later
    fails saying so, its tensor untouched, and the next message is intact."""
    zero, one = _pair(direct=True)
    # one stands for another process: zero's wait must not take its messages in for it
    mailbox._OPEN.discard(one)
    sent = _send(zero, _data(1000, 1), 1, 0)
    with pytest.raises(CollectiveTimeout, match="group rank 1 did not receive it"):
        zero.wait(sent, 0.05)
    _send(zero, _data(1000, 2), 1, 0)
    late, after = np.full(1000, 9, np.uint8), np.zeros(1000, np.uint8)
    refused = _receive(one, late, 0, 0)
    with pytest.raises(RuntimeError, match=r"from group rank 0 .*gave up on the send"):
        refused.wait()
    np.testing.assert_array_equal(late, np.full(1000, 9, np.uint8))
    assert _receive(one, after, 0, 0).wait()
    np.testing.assert_array_equal(after, _data(1000, 2))


def test_no_direct_reads_where_the_peer_is_not_the_process_it_says() -> None:
    """A peer whose marker the read does not find (another process of that id) is read through
    the ring; so is every peer with direct reads switched off."""
    size = file_bytes(2, 0, CHANNEL)
    views = [memoryview(mmap.mmap(-1, size)) for _ in range(2)]
    views[0][MARKER : MARKER + 8] = b"12345678"
    elsewhere = ctypes.create_string_buffer(8)  # not the file: holds other bytes
    processes = [(os.getpid(), ctypes.addressof(elsewhere) - MARKER)] * 2
    fence = threading.Lock()
    one = Mailbox(views, 1, 64, CHANNEL, fence, 2.0, 0, [10, 11], processes)
    assert not one.reads_directly_from(0)
    kept = mailbox.DIRECT_READS
    mailbox.DIRECT_READS = False
    try:
        zero, one = _pair(direct=True)
    finally:
        mailbox.DIRECT_READS = kept
    assert not zero.reads_directly_from(1) and not one.reads_directly_from(0)
    _send(zero, _data(1000, 3), 1, 0)
    assert zero.ring_bytes_sent(1) == CHANNEL  # streamed: as much as the ring holds


def test_the_direct_read_check_finds_what_the_mailboxes_find_here() -> None:
    """``compat info``'s check, two sibling processes, one reading the other's memory: here,
    where the mailboxes of real ranks read directly (the rank case mailbox-direct), it finds the
    read works; without the call it says why not."""
    assert mailbox.direct_read_check() is None


def test_the_direct_read_check_starts_its_processes_while_another_thread_sets_variables() -> None:
    """Its two processes start with an environment of their own: given none, each read this
    process's environ as it started, and a variable set meanwhile by another thread could free
    it under them (OSError: Bad address)."""
    with churning_environment():
        for _ in range(3):
            assert mailbox.direct_read_check() is None


def test_the_direct_read_check_says_why_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mailbox, "_process_vm_readv", lambda: None)
    assert mailbox.direct_read_check() == (
        "process_vm_readv is not available (not Linux, or a C library without it)"
    )


def test_the_direct_read_check_says_so_when_its_helper_dies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A holder process that dies before it prints its address gives a reason, not a
    ValueError out of ``compat info``."""
    monkeypatch.setattr(mailbox, "_HOLDER", "import sys; sys.exit(3)")
    assert mailbox.direct_read_check() == (
        "the process whose memory is read did not start (it printed [])"
    )


def test_a_direct_read_the_sender_gives_up_on_midway_fails(monkeypatch: Any) -> None:
    """A receiver that read the header of a direct message before its sender gave up, and copies
    its bytes after the sender has changed them, must not see the mixed bytes as the message:
    the receive fails, and so did the send."""
    zero, one = _pair(direct=True)
    mailbox._OPEN.discard(one)  # one stands for another process
    data = _data(1000, 1)
    sent = _send(zero, data, 1, 0)
    real_read = mailbox._read_process

    def read_after_the_sender_gave_up(pid: int, remote: int, nbytes: int, local: int) -> Any:
        with pytest.raises(CollectiveTimeout, match="group rank 1 did not receive it"):
            zero.wait(sent, 0.01)
        data[:] = 0  # the sender uses its tensor again once its send has failed
        return real_read(pid, remote, nbytes, local)

    monkeypatch.setattr(mailbox, "_read_process", read_after_the_sender_gave_up)
    out = np.full(1000, 9, np.uint8)
    received = _receive(one, out, 0, 0)
    with pytest.raises(RuntimeError, match=r"gave up on the send \(it timed out\) while this"):
        received.wait()
    monkeypatch.setattr(mailbox, "_read_process", real_read)
    # The channel goes on: the next message arrives whole.
    following = _data(1000, 2)
    assert _send(zero, following, 1, 0) is not None
    after = np.zeros(1000, np.uint8)
    assert _receive(one, after, 0, 0).wait()
    np.testing.assert_array_equal(after, following)
