"""Point to point through shared memory: a channel from each rank of a window to each other.

Gloo and MCCL move a point-to-point message through a TCP socket even between two processes of
one host, which costs far more than a copy through memory. Where a group has a shared-memory
window (:mod:`compat.transport.shared_memory`) made with the group, each rank's file also holds
one channel to each peer: a ring of :func:`compat.transport.shared_memory.channel_bytes` bytes
that only the sender writes, with a count of the bytes written in the sender's file and a count
of the bytes read in the receiver's. A message is a 64-byte header (its size and tag), then its
bytes, padded to 64. A sender writes as much of its message as the ring has room for and
counts it; the receiver copies out what has been counted and counts what it has read, which
frees the room again.

A message larger than the ring is read by the receiver straight from the sender's memory, in one
copy (Linux's ``process_vm_readv``): its header carries the address of its bytes, and the send is
complete once the receiver has counted the header read, which it does after the copy. A sender
that gives up on such a send (timed out) says so in its header: the receive fails, also where its
read had begun (the header, read again after the copy, tells). A receiver
tries such a read from each peer when its mailbox is made (8 bytes fixed at :data:`MARKER` of the
peer's file, read from the peer's memory, must equal what the file holds: another process of the
same id, in another pid namespace, would not hold them) and counts the peers it can read from in
its file; a sender sends directly only to a receiver that counted it. Where the read is refused
(another user's process; a kernel that lets only a process's ancestors read it, as Yama's
``ptrace_scope`` 1, Ubuntu's default, does; a sandbox without the call; not Linux) a large message
streams through the ring instead, as much at a time as there is room, each part copied in by the
sender and out by the receiver: with more ranks than cores every part waits for two processes to be
scheduled, slower than the backend's own send and recv.

Progress is made by the calls themselves, on the calling thread, as an MPI library's is: an
``isend`` writes what fits at once (all of a message that fits: it is then complete), an
``irecv`` takes what has arrived, and every ``wait()`` or ``is_completed()`` moves every pending
message of the rank on, in both directions. While it waits, a rank also takes in every message
that has arrived for it and that no posted receive takes yet (kept aside for the receive that
comes for it), as a backend's receiving thread stores them; so do the waits of the shared-memory
collectives. A message read directly is taken in so only once its header has waited as long as
reading it takes (:data:`DIRECT_READ_BYTES_PER_S`), or while the rank's own direct message to
that peer is unread: its receive most often comes sooner, and read aside it costs a buffer and
a second copy. Two ranks that both send a large message before receiving therefore complete,
as on MCCL, whose sends complete once the peer has stored them.

Messages from one rank keep their order among those of one tag, and a receive takes the first
message of its tag (torch's matching); a message whose size differs from the receiving tensor's
is a :class:`compat.CollectiveMismatchError` on the receiving rank (Gloo refuses it too), and is
read past (one read directly is not copied at all; its send completes). Waits
are bounded by the backend's timeout (``compat.init(timeout=)``), or by ``Work.wait(timeout)``,
after which :class:`compat.CollectiveTimeout` names the peer.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import numpy as np

from compat.base import environment
from compat.base.errors import CollectiveMismatchError, CollectiveTimeout
from compat.transport.backoff import Backoff
from compat.transport.liveness import Liveness

#: A message's header: its size in bytes, its tag and, for a message read directly, the address
#: of its bytes in the sender's memory (else 0; little-endian int64 each), then padding, so that
#: its data starts 64-byte aligned.
HEADER = 64
_HEADER_STRUCT = struct.Struct("<qqq")
#: The address a sender puts in the header of a direct message it gave up on (timed out).
_WITHDRAWN = -1
#: Where, in each rank's file, 8 bytes fixed when the file is made (random) lie; a receiver reads
#: them from the sender's memory to see that its direct reads reach the sender's process.
MARKER = 8
#: What a rank counts, beside its count of the bytes read from a peer, once it can read that
#: peer's memory directly.
_READS_DIRECTLY = 1
#: False: mailboxes made from now on read no peer directly (every message goes through the
#: rings), as where the read is refused; tests set it to keep the rings' streaming covered.
DIRECT_READS = True
#: Direct reads of at least this many bytes are read in two halves at once, the second by a
#: helper thread: in a blocking exchange the sender's core is idle while its receiver copies.
SPLIT_READ_BYTES = 32 << 20
#: How fast a direct read goes (in two halves, between two ranks; compat bench send_recv), for
#: how long a direct message waits before it is read aside. A direct message that no posted
#: receive takes is read aside (for the receive to come) only once its header has waited as long
#: as reading it takes, ``nbytes / DIRECT_READ_BYTES_PER_S``. Read aside, it costs a buffer of
#: its size, that read and a second copy, and the receive most often comes sooner: a blocking
#: send then recv posts it once the send's wait ends. That wait, seeing its send done and the
#: peer's header in one poll, read the message aside: two reads where one does. A rank whose own
#: direct message to that peer is unread reads it aside at once: both may be blocked sending to
#: each other (both send first), and waiting would slow both. Any
#: other rank that must take it in for its peer to go on (a cycle of three that send first)
#: does, one read's time later at most.
DIRECT_READ_BYTES_PER_S = 5e9
#: The memory of direct sends given up on (timed out, or their group destroyed): kept for the
#: rest of the process, since their receiver may still be reading it.
_ABANDONED: list[object] = []


def _padded(nbytes: int) -> int:
    return -(-nbytes // HEADER) * HEADER


def _move(
    message: _Message | _Stashed, base: int, size: int, position: int, room: int, to_ring: bool
) -> int:
    """Copy the next bytes of ``message`` (its padded length), at most ``room`` of them,
    between its memory and the ring of ``size`` bytes at address ``base``, from the ring's
    ``position`` on (wrapping at its end); the bytes moved."""
    padded, moved = _padded(message.nbytes), 0
    while message.offset < padded and moved < room:
        at = (position + moved) % size
        step = min(padded - message.offset, room - moved, size - at)
        real = min(step, message.nbytes - message.offset)  # the padding is not copied
        if real > 0:
            own = message.address + message.offset
            if to_ring:
                ctypes.memmove(base + at, own, real)
            else:
                ctypes.memmove(own, base + at, real)
        message.offset += step
        moved += step
    return moved


class _Message:
    """A send or a receive issued through a mailbox: the pending handle of its Work."""

    __slots__ = ("_mailbox", "address", "done", "error", "keep", "nbytes", "offset", "peer", "tag")
    #: how a timeout names the message: "a send of N bytes to group rank P ... did not receive it"
    _KIND, _TOWARD, _PEER_MISSED = "a message", "with", "take part"

    def __init__(
        self, mailbox: Mailbox, address: int, nbytes: int, peer: int, tag: int, keep: object
    ) -> None:
        self._mailbox = mailbox
        self.address, self.nbytes, self.peer, self.tag = address, nbytes, peer, tag
        # What owns the memory at address, alive until the message is done (a staged copy
        # freed mid-message had its memory reused: wrong data, seen on MindSpore).
        self.keep = keep
        self.offset = 0  # bytes of the padded message moved so far
        self.done = False
        self.error: Exception | None = None

    def wait(self, timeout: timedelta | None = None) -> bool:
        if not self.done:
            self._mailbox.wait(self, None if timeout is None else timeout.total_seconds())
        if self.error is not None:
            raise self.error
        return True

    def is_completed(self) -> bool:
        if not self.done:
            self._mailbox.progress()
        return self.done

    def described(self) -> str:
        """What this message is: "a send of N bytes to group rank P (tag T)"."""
        return f"{self._KIND} of {self.nbytes} bytes {self._TOWARD} group rank {self.peer} " + (
            f"({_labelled(self.tag)})"
        )

    def timed_out(self, seconds: float) -> CollectiveTimeout:
        return CollectiveTimeout(
            f"{self.described()} through shared memory did not complete within {seconds:g} "
            f"s: group rank {self.peer} did not {self._PEER_MISSED}"
        )


class _Send(_Message):
    __slots__ = ("direct_until", "started")
    _KIND, _TOWARD, _PEER_MISSED = "a send", "to", "receive it"

    def __init__(
        self, mailbox: Mailbox, address: int, nbytes: int, peer: int, tag: int, keep: object
    ) -> None:
        super().__init__(mailbox, address, nbytes, peer, tag, keep)
        self.started = False  # header written
        #: a message read directly: the sender's count of bytes written after its header (done
        #: once the receiver's count of bytes read reaches it); 0 for one through the ring
        self.direct_until = 0


class _Receive(_Message):
    __slots__ = ()
    _KIND, _TOWARD, _PEER_MISSED = "a receive", "from", "send it"

    def fill(self, stashed: _Stashed) -> None:
        """Take a message kept aside, once it has arrived whole."""
        if stashed.nbytes != self.nbytes:
            self.error = _mismatch(self, stashed.nbytes)
        elif stashed.error is not None:
            self.error = stashed.error
        else:
            ctypes.memmove(self.address, stashed.address, self.nbytes)
        self.done = True


class _Stashed:
    """A message that arrived before a receive took it, kept in this process's memory."""

    __slots__ = ("address", "data", "done", "error", "nbytes", "offset", "read_past", "receiver")

    def __init__(self, nbytes: int, read_past: bool = False) -> None:
        #: a message no receive takes (its receive's size differed): read past, its bytes
        #: dropped; one read directly is not copied at all
        self.read_past = read_past
        self.data = np.empty(max(nbytes, 1), np.uint8)
        self.address: int = self.data.ctypes.data
        self.nbytes, self.offset, self.done = nbytes, 0, False
        self.error: Exception | None = None  # its direct read failed
        self.receiver: _Receive | None = None  # a receive waiting for the rest of it

    def finish(self) -> None:
        self.done = True
        if self.receiver is not None:
            self.receiver.fill(self)


def _labelled(tag: int) -> str:
    """How an error names a message's tag: a negative one is a collective's (compat.algorithms)."""
    return f"tag {tag}" if tag >= 0 else "a collective's part"


def _mismatch(receive: _Receive, nbytes: int) -> CollectiveMismatchError:
    if receive.tag < 0:  # a part of a collective (compat.algorithms), not a user's recv
        return CollectiveMismatchError(
            f"scatter or gather: group rank {receive.peer} sent {nbytes} bytes as its part; "
            f"this rank's tensor for it holds {receive.nbytes} bytes: every rank's part must "
            "have the same shape and dtype"
        )
    return CollectiveMismatchError(
        f"recv: group rank {receive.peer} sent {nbytes} bytes (tag {receive.tag}); the tensor "
        f"that receives them holds {receive.nbytes} bytes: the receiving tensor's shape and "
        "dtype must match the sent tensor's"
    )


class Mailbox:
    """The point-to-point channels of one window, as this rank sees them (see the module
    docstring). ``views``: every rank's file, in group-rank order; ``start``: where the
    point-to-point area of each file begins; ``channel``: each ring's bytes; ``ranks``: the
    group's global ranks; ``processes``: each rank's process id and the address of its file in
    its own memory, for direct reads of large messages (None: every message goes through the
    rings)."""

    def __init__(
        self,
        views: Sequence[memoryview],
        me: int,
        start: int,
        channel: int,
        fence: threading.Lock,
        timeout: float,
        yields: int,
        ranks: Sequence[int],
        processes: Sequence[tuple[int, int]] | None = None,
        liveness: Liveness | None = None,
    ) -> None:
        count = len(views)
        #: the window's peers' liveness (compat.transport.liveness): a wait on a peer that has
        #: ended raises
        self.liveness = liveness
        self.me, self._channel, self._fence = me, channel, fence
        self.timeout, self._yields = timeout, yields
        #: a global rank's index in the group
        self.index = {rank: index for index, rank in enumerate(ranks)}
        self._lock = threading.RLock()  # calls from several threads, and collective waits

        def counter(rank: int, offset: int) -> ctypes.c_int64:
            # An aligned 8-byte word, read and written whole (one instruction on x86-64); far
            # cheaper than numpy's indexing, on the path of every message.
            return ctypes.c_int64.from_buffer(views[rank], offset)

        def ring(rank: int, to: int) -> memoryview:
            at = channel_start(to) + HEADER
            return views[rank][at : at + channel]

        def address(ring: memoryview) -> int:
            return ctypes.addressof(ctypes.c_char.from_buffer(ring))

        def channel_start(to: int) -> int:  # in the sender's file
            return start + 64 * count + to * (64 + channel)

        peers = range(count)
        # Sending to each peer: this rank's ring and count of bytes written, the peer's count of
        # bytes read from it.
        self._outbox = [ring(me, peer) for peer in peers]
        self._written = [counter(me, channel_start(peer)) for peer in peers]
        self._peer_read = [counter(peer, start + 64 * me) for peer in peers]
        # Receiving from each peer: its ring to this rank and its count, this rank's count read.
        self._inbox = [ring(peer, me) for peer in peers]
        self._peer_written = [counter(peer, channel_start(me)) for peer in peers]
        self._read = [counter(me, start + 64 * peer) for peer in peers]
        # The rings' addresses, for copies straight between them and tensors' memory.
        self._outbox_at = [address(ring) for ring in self._outbox]
        self._inbox_at = [address(ring) for ring in self._inbox]
        # Direct reads of messages larger than a ring: this rank's count, for each peer, that it
        # reads the peer's memory, and each peer's count that it reads this rank's.
        self._peer_reads_mine = [counter(peer, start + 64 * me + 8) for peer in peers]
        self._pids = [0] * count
        for peer in peers:
            if processes is None or peer == me or not DIRECT_READS:
                continue
            pid, file_address = processes[peer]
            marker = bytes(views[peer][MARKER : MARKER + 8])
            if _read_marker(pid, file_address + MARKER) == marker:
                self._pids[peer] = pid
                counter(me, start + 64 * peer + 8).value = _READS_DIRECTLY
        self._sent, self._taken = [0] * count, [0] * count
        self._sends: list[deque[_Send]] = [deque() for _ in peers]
        self._receives: list[deque[_Receive]] = [deque() for _ in peers]
        self._reading: list[_Receive | _Stashed | None] = [None] * count
        # For each peer: where in its ring the direct header no receive takes yet lies, and
        # when this rank first saw it ((-1, 0.0): none).
        self._direct_seen: list[tuple[int, float]] = [(-1, 0.0)] * count
        self._stashed: dict[tuple[int, int], deque[_Stashed]] = {}
        self._closed = False
        _OPEN.add(self)

    # -- issuing ---------------------------------------------------------------------------------
    def isend(self, address: int, nbytes: int, peer: int, tag: int, keep: object) -> _Send:
        """Start sending the ``nbytes`` bytes at ``address`` (the memory of ``keep``, a tensor,
        read until the send is done) to group rank ``peer``; what fits in the channel is written
        now."""
        with self._lock:
            self._check_open()
            message = _Send(self, address, nbytes, peer, tag, keep)
            queue = self._sends[peer]
            queue.append(message)
            if len(queue) == 1:
                self._push(peer)
            return message

    def irecv(self, address: int, nbytes: int, peer: int, tag: int, keep: object) -> _Receive:
        """Start receiving into the ``nbytes`` bytes at ``address`` (the memory of ``keep``, a
        tensor) the next message of ``tag`` from group rank ``peer``; what has arrived is taken
        now."""
        with self._lock:
            self._check_open()
            message = _Receive(self, address, nbytes, peer, tag, keep)
            kept = self._stashed.get((peer, tag))
            if kept:
                stashed = kept.popleft()
                if stashed.done:
                    message.fill(stashed)
                else:
                    stashed.receiver = message
            else:
                self._receives[peer].append(message)
                self._pull(peer, False)
            return message

    def reads_directly_from(self, peer: int) -> bool:
        """Whether this rank reads the large messages of group rank ``peer`` straight from its
        memory (see the module docstring)."""
        return self._pids[peer] != 0

    def ring_bytes_sent(self, peer: int) -> int:
        """The bytes this rank has written into its channel to group rank ``peer`` so far,
        headers included (a direct message writes only its header)."""
        return self._sent[peer]

    # -- progress ------------------------------------------------------------------------------
    def progress(self) -> None:
        """Move every pending message on, and take in what has arrived."""
        with self._lock:
            self._check_open()
            self._progress()

    def take_in(self) -> None:
        """:meth:`progress`, from a collective's wait: skipped while another thread makes it."""
        if self._lock.acquire(blocking=False):
            try:
                if not self._closed:
                    self._progress()
            finally:
                self._lock.release()

    def wait(self, message: _Message, seconds: float | None) -> None:
        """Make progress until ``message`` is done, within ``seconds`` (default the backend's
        timeout; then CollectiveTimeout); meanwhile take in what arrives on the process's other
        mailboxes too (a peer may be blocked sending there before it sends this one)."""
        bound = self.timeout if seconds is None else seconds
        deadline = time.monotonic() + bound
        liveness = self.liveness
        with Backoff(self._yields) as backoff:
            while True:
                self.progress()
                if message.done:
                    return
                take_in_everywhere(self)
                now = time.monotonic()
                if now > deadline:
                    self._withdraw(message)
                    raise message.timed_out(bound)
                if liveness is not None:
                    liveness.check((message.peer,), now, message.described())
                backoff.pause()

    def _withdraw(self, message: _Message) -> None:
        """Take back a message that timed out, if none of it has moved: a later message of
        the peer then goes to a later receive, not to this abandoned one."""
        with self._lock:
            if isinstance(message, _Receive):
                if message in self._receives[message.peer]:
                    self._receives[message.peer].remove(message)
            elif isinstance(message, _Send) and not message.started:
                if message in self._sends[message.peer]:
                    self._sends[message.peer].remove(message)
            elif isinstance(message, _Send) and message.direct_until:
                self._abandon(message)

    def _abandon(self, message: _Send) -> None:
        """Give up on a direct send its receiver has not read: its header says so from now on,
        and its memory is kept (a read that began before this goes on)."""
        if message.done:
            return
        at = (message.direct_until - HEADER) % self._channel + 16  # the header's address word
        # The lock's locked instruction orders the word before the caller's next stores, which
        # may change the tensor (x86; see the receiver's check in _read_directly).
        with self._fence:
            ctypes.c_int64.from_buffer(self._outbox[message.peer], at).value = _WITHDRAWN
        _ABANDONED.append(message.keep)

    def _progress(self) -> None:
        for peer in range(len(self._sends)):
            if peer == self.me:
                continue
            if self._sends[peer]:
                self._push(peer)
            self._pull(peer, True)

    def _push(self, peer: int) -> None:
        """Write the pending sends to ``peer`` into its channel, as far as there is room."""
        queue, ring, size = self._sends[peer], self._outbox[peer], self._channel
        base = self._outbox_at[peer]
        sent = self._sent[peer]
        room = size - (sent - self._peer_read[peer].value)
        finished = []
        while queue and room:
            message = queue[0]
            if not message.started:
                direct = (
                    message.nbytes > size - HEADER
                    and self._peer_reads_mine[peer].value == _READS_DIRECTLY
                )
                at = message.address if direct else 0
                _HEADER_STRUCT.pack_into(ring, sent % size, message.nbytes, message.tag, at)
                sent, room, message.started = sent + HEADER, room - HEADER, True
                if direct:
                    message.direct_until = sent
            if message.direct_until:
                # The receiver counts the header read once it has copied the bytes.
                if self._peer_read[peer].value < message.direct_until:
                    break
                finished.append(queue.popleft())
                continue
            moved = _move(message, base, size, sent, room, True)
            sent, room = sent + moved, room - moved
            if message.offset < _padded(message.nbytes):
                break
            finished.append(queue.popleft())
        if sent != self._sent[peer]:
            self._sent[peer] = sent
            with self._fence:  # the data's stores before the count's (see shared_memory)
                self._written[peer].value = sent
        for message in finished:
            message.done = True

    def _pull(self, peer: int, take_any: bool) -> None:
        """Read what has arrived from ``peer``: into the posted receives of each message's tag,
        or, with ``take_any`` or while a receive from ``peer`` is posted, kept aside."""
        ring, size = self._inbox[peer], self._channel
        base = self._inbox_at[peer]
        taken = self._taken[peer]
        arrived = self._peer_written[peer].value - taken
        while arrived:
            target = self._reading[peer]
            if target is None:
                if not (take_any or self._receives[peer]):
                    break
                header_at = taken % size
                nbytes, tag, address = _HEADER_STRUCT.unpack_from(ring, header_at)
                if address > 0 and not self._direct_due(peer, taken, nbytes, tag):
                    break
                taken, arrived = taken + HEADER, arrived - HEADER
                target = self._match(peer, nbytes, tag)
                if address:
                    self._read_directly(peer, target, address, tag, ring, header_at)
                    continue
                self._reading[peer] = target
            moved = _move(target, base, size, taken, arrived, False)
            taken, arrived = taken + moved, arrived - moved
            if target.offset < _padded(target.nbytes):
                break
            self._reading[peer] = None
            if isinstance(target, _Stashed):
                target.finish()
            else:
                target.done = True
        if taken != self._taken[peer]:
            self._taken[peer] = taken
            with self._fence:  # the reads before the count that frees the room
                self._read[peer].value = taken

    def _direct_due(self, peer: int, position: int, nbytes: int, tag: int) -> bool:
        """Whether to read now the direct message of ``peer`` whose header is at ``position``
        of its ring: at once into a posted receive of its tag, or aside while the peer has not
        read this rank's direct message to it, else once it has waited its time (see
        DIRECT_READ_BYTES_PER_S)."""
        if any(receive.tag == tag for receive in self._receives[peer]):
            return True
        sends = self._sends[peer]
        if sends and sends[0].direct_until and self._peer_read[peer].value < sends[0].direct_until:
            # This rank's own direct message to the peer is unread: both may be blocked sending
            # to each other (the peer counts a read before it sends on, so its header read first
            # shows the count).
            return True
        now = time.monotonic()
        seen_at, since = self._direct_seen[peer]
        if seen_at != position:
            self._direct_seen[peer] = (position, now)
            since = now
        return now - since >= nbytes / DIRECT_READ_BYTES_PER_S

    def _read_directly(
        self,
        peer: int,
        target: _Receive | _Stashed,
        address: int,
        tag: int,
        ring: memoryview,
        header_at: int,
    ) -> None:
        """Copy a direct message of ``peer`` from its memory at ``address`` into ``target``,
        which is then done (with an error if the read failed, or if the sender gave up on the
        send, as its header at ``header_at`` of ``ring`` says, before the read had ended)."""
        if address == _WITHDRAWN:
            failure = "it gave up on the send (it timed out)"
        elif isinstance(target, _Stashed) and target.read_past:
            failure = ""  # its receive has failed already (a size mismatch): nothing to copy
        else:
            error = _read_in_halves(self._pids[peer], address, target.nbytes, target.address)
            failure = "" if error is None else f"reading its memory failed ({error})"
            # A sender that gives up may change its tensor as soon as it has said so: a read
            # that was still going on then may hold some of the new bytes. Read after the copy,
            # the header tells such a read from one that ended first (whose bytes are all the
            # message's).
            if not failure and _HEADER_STRUCT.unpack_from(ring, header_at)[2] == _WITHDRAWN:
                failure = "it gave up on the send (it timed out) while this rank read it"
        if failure:
            target.error = RuntimeError(
                f"recv: the message of {target.nbytes} bytes from group rank {peer} (tag {tag}) "
                f"could not be received: {failure}"
            )
        if isinstance(target, _Stashed):
            target.finish()
        else:
            target.done = True

    def _match(self, peer: int, nbytes: int, tag: int) -> _Receive | _Stashed:
        """Where the message now arriving from ``peer`` goes: the first posted receive of its
        tag, else aside for a later receive (also when the sizes differ: the receive then
        fails, and the message is read past)."""
        receives = self._receives[peer]
        for receive in receives:
            if receive.tag == tag:
                receives.remove(receive)
                if receive.nbytes == nbytes:
                    return receive
                receive.error, receive.done = _mismatch(receive, nbytes), True
                return _Stashed(nbytes, read_past=True)
        stashed = _Stashed(nbytes)
        self._stashed.setdefault((peer, tag), deque()).append(stashed)
        return stashed

    # -- the end ---------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.liveness is not None:
            self.liveness.raise_if_lost("a point-to-point call")
        if self._closed:
            raise CollectiveTimeout(
                "a point-to-point call through shared memory was still pending when its group "
                "was destroyed (call wait() on every Work before destroy)"
            )

    def close(self) -> None:
        """Drop the views of the files (the window unmaps them); pending calls then fail."""
        _OPEN.discard(self)
        with self._lock:
            for queue in self._sends:
                if queue and queue[0].direct_until:
                    self._abandon(queue[0])
            self._closed = True
            self._outbox, self._inbox = [], []
            self._written, self._peer_read, self._peer_written, self._read = [], [], [], []


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


@functools.cache
def _process_vm_readv() -> Callable[..., int] | None:
    """Linux's process_vm_readv, through ctypes (None where the C library has none)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        call = ctypes.CDLL(None, use_errno=True).process_vm_readv
    except (OSError, AttributeError):
        return None
    vector = ctypes.POINTER(_IoVec)
    call.argtypes = [ctypes.c_int, vector, ctypes.c_ulong, vector, ctypes.c_ulong, ctypes.c_ulong]
    call.restype = ctypes.c_ssize_t
    return call


def _read_process(pid: int, remote: int, nbytes: int, local: int) -> str | None:
    """Copy ``nbytes`` bytes at address ``remote`` of process ``pid`` to ``local`` in this one:
    None once done, else why not."""
    call = _process_vm_readv()
    if call is None:
        return "process_vm_readv is not available"
    done = 0
    while done < nbytes:
        into, out_of = _IoVec(local + done, nbytes - done), _IoVec(remote + done, nbytes - done)
        got = call(pid, ctypes.byref(into), 1, ctypes.byref(out_of), 1, 0)
        if got <= 0:
            number = ctypes.get_errno() if got < 0 else 0
            return f"process_vm_readv: {os.strerror(number) if number else 'nothing read'}"
        done += got
    return None


def _read_in_halves(pid: int, remote: int, nbytes: int, local: int) -> str | None:
    """:func:`_read_process`, in two halves read at once from SPLIT_READ_BYTES up (the second
    by the helper thread): None once both are done, else why not."""
    if nbytes < SPLIT_READ_BYTES:
        return _read_process(pid, remote, nbytes, local)
    half = nbytes // 2
    second = _helper().submit(_read_process, pid, remote + half, nbytes - half, local + half)
    first = _read_process(pid, remote, half, local)
    # Both halves end before the read does, failed or not: the caller checks the sender's
    # header after the copy, and a failed receive's tensor is written no more.
    second_error = second.result()
    return first or second_error


@functools.cache
def _helper() -> ThreadPoolExecutor:
    """The thread that reads the second halves (one per process, made on the first)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="compat-read")


# A child forked after the helper was made has no thread behind it: it makes its own.
os.register_at_fork(after_in_child=_helper.cache_clear)


def _read_marker(pid: int, remote: int) -> bytes | None:
    """The 8 bytes at ``remote`` in process ``pid``, or None if they cannot be read."""
    buffer = ctypes.create_string_buffer(8)
    if _read_process(pid, remote, 8, ctypes.addressof(buffer)) is not None:
        return None
    return buffer.raw


#: A process that holds 8 known bytes and prints its pid and their address (direct_read_check).
_HOLDER = (
    "import ctypes, os, sys\n"
    "held = ctypes.create_string_buffer(b'compat?!', 8)\n"
    "print(os.getpid(), ctypes.addressof(held), flush=True)\n"
    "sys.stdin.read()\n"
)
#: A process that reads them from the holder with the read the mailboxes use.
_READER = (
    "import sys\n"
    "sys.path.insert(0, sys.argv[3])\n"
    "from compat.transport.mailbox import _read_process\n"
    "import ctypes\n"
    "buffer = ctypes.create_string_buffer(8)\n"
    "why = _read_process(int(sys.argv[1]), int(sys.argv[2]), 8, ctypes.addressof(buffer))\n"
    "print(why if why is not None else 'read' if buffer.raw == b'compat?!' else 'other bytes')\n"
)


def direct_read_check(timeout: float = 30.0) -> str | None:
    """Whether large point-to-point messages can be read directly on this host: None if a
    process can read the memory of a sibling of the same user (two child processes of this one,
    started side by side as a launcher starts ranks), else why not; the messages then stream
    through the rings. Each mailbox tries the same read on its peers when it is made; this says
    beforehand what it will find (``compat info``)."""
    if _process_vm_readv() is None:
        return "process_vm_readv is not available (not Linux, or a C library without it)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = environment.environment()  # never none (see there)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert holder.stdout is not None  # a pipe, as asked
        said = holder.stdout.readline().split()
        if len(said) != 2:  # it died first (its error went to this process's stderr)
            return f"the process whose memory is read did not start (it printed {said})"
        pid, address = said
        reader = subprocess.run(
            [sys.executable, "-c", _READER, pid, address, root],
            capture_output=True, text=True, timeout=timeout, env=env,
        )  # fmt: skip
    finally:
        holder.communicate(timeout=timeout)
    answer = reader.stdout.strip() or (reader.stderr.strip().splitlines() or ["no answer"])[-1]
    return None if answer == "read" else f"a process could not read a sibling's memory: {answer}"


class _OpenMailboxes:
    """The mailboxes of this process that are open (one per window made with its group), held
    weakly: one a group dropped without closing it is not kept alive, nor taken in.

    A tuple of references, replaced whole on each add and discard (a wait in another thread
    walks the tuple it read), rather than a WeakSet, whose iteration guard runs in Python:
    every poll of a wait walks it."""

    def __init__(self) -> None:
        self.refs: tuple[weakref.ref[Mailbox], ...] = ()

    def add(self, mailbox: Mailbox) -> None:
        self.refs = (*self._without(mailbox), weakref.ref(mailbox))

    def discard(self, mailbox: Mailbox) -> None:
        self.refs = self._without(mailbox)

    def _without(self, mailbox: Mailbox) -> tuple[weakref.ref[Mailbox], ...]:
        """The references but ``mailbox``'s and those of mailboxes gone."""
        return tuple(ref for ref in self.refs if ref() not in (None, mailbox))


_OPEN = _OpenMailboxes()


def take_in_everywhere(besides: Mailbox | None = None) -> None:
    """Let every open mailbox of the process (but ``besides``) take in what has arrived and move
    its pending sends on: what a rank does while it waits, for a point-to-point message or a
    shared-memory collective, so that a peer blocked sending to it on any group completes."""
    for ref in _OPEN.refs:
        mailbox = ref()
        if mailbox is not None and mailbox is not besides:
            mailbox.take_in()
