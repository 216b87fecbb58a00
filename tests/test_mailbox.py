"""compat.mailbox's channels in one process: two ranks' mailboxes over anonymous memory, driven
call by call, so that every interleaving below is exact (a ring wrapping mid-message, a message
kept aside until its receive comes, a size mismatch, a withdrawn receive). The channels are
tested on real ranks, on both frameworks, in tests/ranks/mailbox_cases.py and through every
point-to-point case.
"""

from __future__ import annotations

import mmap
import threading
from typing import Any

import numpy as np
import pytest

from compat.errors import CollectiveMismatchError, CollectiveTimeout
from compat.mailbox import HEADER, Mailbox
from compat.shared_memory import file_bytes

CHANNEL = 256


def _pair(channel: int = CHANNEL) -> tuple[Mailbox, Mailbox]:
    size = file_bytes(2, 0, channel)
    views = [memoryview(mmap.mmap(-1, size)) for _ in range(2)]
    fence = threading.Lock()
    return tuple(  # type: ignore[return-value]
        Mailbox(views, me, 64, channel, fence, 2.0, 0, [10, 11]) for me in range(2)
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
