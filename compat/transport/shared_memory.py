"""Shared memory between the ranks of a group that run on one host: a window of slots.

On CPU the backends move every byte through TCP sockets, even between two processes of one host,
many times slower than numpy copies the same bytes through memory both processes map (compat
bench shows both). So where every rank of a group is on this host,
compat's shared-memory algorithms (:mod:`compat.algorithms`) write their data into memory the
other ranks read, and the backend moves nothing.

Each rank of the group maps one file of ``/dev/shm`` per rank: its own, which only it writes, and
its peers', which it only reads. A file holds a count of the rounds its rank has published, then
two slots of :data:`SLOT_BYTES`, then the point-to-point channels (:func:`file_bytes`,
:mod:`compat.transport.mailbox`). Round after round a rank writes its slot, then
:meth:`SharedWindow.publish` counts its arrival and waits for every peer's, after which every
rank's slot of that round is readable: on x86 the ranks poll each other's counts in the shared
memory (microseconds); elsewhere they meet in the backend's barrier (see :func:`waits_in_memory`).
Rounds alternate between the two slots: a rank writes a slot again only once every peer has
arrived at the next round, which none does before it has finished reading that slot. A round may
be one-way (broadcast, scatter): a rank waits only for the ranks whose slots it reads (the root
for no one), and checks that every peer has arrived before it writes its slot again. A
collective larger than a slot runs in several rounds; every rank runs the same number (each
algorithm makes sure of that), or the ranks would wait for each other in different rounds.

The window is made on a group's first shared-memory collective, by every rank of the group at
once (:func:`window`): each rank creates its file, the ranks exchange the files' names and their
host's identity (an all_gather), open each other's files, and agree that every rank could (a
second all_gather) before each rank removes its file's name: the memory stays mapped until the
window is closed, and nothing is left in ``/dev/shm`` should a process die. A group whose ranks are
on several hosts, or where a file cannot be made or opened, or where a rank has set
``COMPAT_SHARED_MEMORY=0``, has no window (None), and the capability table's choice falls back to
what it chooses otherwise.
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
import platform
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from compat.base.errors import CollectiveTimeout, PeerLostError
from compat.transport import liveness
from compat.transport.backoff import Backoff
from compat.transport.issue_order import IssueOrder
from compat.transport.liveness import Liveness
from compat.transport.mailbox import MARKER, Mailbox, take_in_everywhere

if TYPE_CHECKING:
    from compat.base.adapter import Adapter, GroupHandle, Tensor
    from compat.base.types import Handle

#: The bytes one rank publishes in one round: rounds are cheap where ranks wait in memory, and
#: smaller pieces stay in cache, so larger slots were slower. Each rank's file holds two, so a
#: group of n ranks takes 2n MB of /dev/shm for them (its rings: file_bytes).
SLOT_BYTES = 1 * 2**20
#: Where the files are made: a memory-backed file system on Linux.
DIRECTORY = "/dev/shm"
#: The start of every file's name; then the creating process's id, "-" and a random part.
PREFIX = "compat-"
#: A file whose process is gone is removed once this old (see _remove_stale).
STALE_SECONDS = 60.0
#: Set to "0" on any rank to keep the groups it joins off shared memory: the capability table's
#: other choices run (the backend's own transport).
ENVIRONMENT = "COMPAT_SHARED_MEMORY"
#: The bytes that describe a rank in the exchange at set-up: its host's identity (40 hex digits),
#: its file's name (about 50 bytes), its process id, its file's address and its liveness file's
#: name (about 60 bytes; at most about 170 in all).
_DESCRIPTION_BYTES = 256
#: Bytes at the start of a rank's file, before its slots: the count of rounds it has published,
#: then (at compat.transport.mailbox.MARKER) 8 random bytes fixed when the file is made.
FLAG_BYTES = 64
#: Polls that yield the CPU before the waits sleep (compat.transport.backoff), where every rank
#: of the group can have a core of its own.
_YIELDS = 2000
#: The same with more ranks than cores: a few. Polling as long takes the core of the rank waited
#: for, but a sleep costs far more CPU time than a yield and a rank often arrives within a few.
_YIELDS_OVERSUBSCRIBED = 20
#: Bytes kept at the start of a slot for the word an algorithm publishes
#: (:meth:`SharedWindow.write_word`), so that what follows stays aligned for any dtype.
HEADER_BYTES = 64
#: Point to point (compat.transport.mailbox): the most bytes of one rank's channel to one peer, and
#: what a
#: rank's channels to all its peers take together at most (each channel at least
#: _SMALLEST_CHANNEL): 1 MB to each peer up to 3 ranks, 2 MB shared out beyond.
CHANNEL_BYTES = 1 * 2**20
_CHANNELS_BYTES = 2 * 2**20
_SMALLEST_CHANNEL = 64 * 2**10


def channel_bytes(ranks: int) -> int:
    """The data bytes of each point-to-point channel of a window of ``ranks`` ranks (a multiple
    of 64; 0 for one rank)."""
    if ranks < 2:
        return 0
    share = min(CHANNEL_BYTES, max(_SMALLEST_CHANNEL, _CHANNELS_BYTES // (ranks - 1)))
    return share - share % 64


def file_bytes(ranks: int, slot_bytes: int, channel: int) -> int:
    """The size of each rank's file: the count of rounds, two slots, then the point-to-point
    area (:class:`compat.transport.mailbox.Mailbox`): a 64-byte count per peer of what this rank
    has read
    from the peer's channel, and a channel to each peer (a 64-byte count of what was written,
    then ``channel`` bytes of data)."""
    return FLAG_BYTES + 2 * slot_bytes + ranks * 64 + ranks * (64 + channel)


def host_identity() -> str:
    """This host, as the ranks of a group compare it: a digest of the host name and the kernel's
    boot id (two containers of one kernel share it; they still need one /dev/shm, which opening
    proves), of fixed length."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
            boot = file.read().strip()
    except OSError:
        boot = ""
    return hashlib.sha1(f"{socket.gethostname()}:{boot}".encode()).hexdigest()


class SharedWindow:
    """The slots of every rank of one group, mapped in this process (see the module docstring)."""

    def __init__(
        self,
        adapter: Adapter,
        group: GroupHandle,
        maps: list[mmap.mmap],
        me: int,
        names: Sequence[str] = (),
        slot_bytes: int | None = None,
        channel: int = 0,
        processes: Sequence[tuple[int, int]] | None = None,
        descriptors: Sequence[int | None] = (),
    ):
        #: the files' names in DIRECTORY, removed once every rank had mapped them
        self.names = list(names)
        #: the bytes of one slot (:data:`SLOT_BYTES` when the window was made)
        self.slot_bytes = (len(maps[0]) - FLAG_BYTES) // 2 if slot_bytes is None else slot_bytes
        #: the data bytes of each point-to-point channel (0: none; see file_bytes)
        self.channel_bytes = channel
        #: each rank's process id and its file's address in that process (direct reads of large
        #: point-to-point messages; None: none)
        self.processes = processes
        #: True for a window made when its group was (compat.init, compat.new_group): every rank
        #: of the group has it before any point-to-point call, so sender and receiver both take
        #: its channels (a window made on a later collective is not used for point to point: a
        #: send issued before it and a receive issued after it would take different paths)
        self.point_to_point = False
        self._mailbox: Mailbox | None = None
        #: this rank's index in the group
        self.me = me
        #: True: ranks wait for each other on counters in the shared memory; False: on the
        #: backend's barrier (see :func:`waits_in_memory`)
        self.waits_in_memory = waits_in_memory()
        self._adapter = adapter
        self._group = group
        self._maps = maps
        self._views = [memoryview(mapped) for mapped in maps]
        # Each rank's count of the rounds it has published: aligned 8-byte words, read and
        # written whole by numpy (never torn, unlike a byte-wise struct copy).
        self._arrivals = [np.frombuffer(view, np.int64, 1, 0) for view in self._views]
        self._round = 0
        #: True after a one-way round until every peer has arrived at it (see publish)
        self._readers_behind = False
        self._fence = threading.Lock()
        #: how long a rank waits for its peers: as long as the backend's collectives would
        self.timeout = adapter.collective_timeout()
        self._yields = yields_for(len(maps))
        #: the thread that runs asynchronous collectives, made on the first (see run)
        self._issue_order: IssueOrder | None = None
        #: set by close: a wait for peers ends at once (the slots are about to be unmapped)
        self._closing = False
        #: the group's global ranks, by group rank
        self.ranks = list(adapter.group_ranks(group))
        #: whether each peer's process still runs (compat.transport.liveness; ``descriptors``: each
        #: rank's liveness file, open here, None for this rank or where it has none)
        self.liveness = Liveness(list(descriptors) or [None] * len(maps), self.ranks, me)
        #: what the ranks are doing in the window, for an error that names it (the algorithms
        #: set it: compat.algorithms.shared_memory.group_window)
        self.doing = "a collective"

    @property
    def size(self) -> int:
        """The number of ranks."""
        return len(self._maps)

    @property
    def rounds(self) -> int:
        """The rounds this rank has published in this window so far."""
        return self._round

    def _slot(self, rank: int) -> memoryview:
        start = FLAG_BYTES + (self._round % 2) * self.slot_bytes
        return self._views[rank][start : start + self.slot_bytes]

    def own(self, numel: int, like: Tensor, offset: int = 0) -> Tensor:
        """A 1-d tensor of ``numel`` elements of ``like``'s dtype over this rank's slot of the
        current round, ``offset`` bytes after the header, for this rank to write."""
        if self._readers_behind:
            self._await_readers()
        return self._adapter.host_tensor(self._slot(self.me), HEADER_BYTES + offset, numel, like)

    def publish(self, wait_for: Sequence[int] | None = None) -> list[memoryview]:
        """End this round: wait until every rank of the group has written its slot (a barrier),
        then return every rank's slot, in group-rank order, to read until the round after next.

        ``wait_for``: only the group ranks whose slots this rank reads this round (a one-way
        round: a broadcast's root waits for no one, the others for the root). This rank then
        writes its slot again only once every peer has arrived at this round (:meth:`own` waits
        for that first), since the slot it writes next was read by them until then. Where ranks
        meet in the backend's barrier (not x86) every round is a barrier."""
        if self.waits_in_memory:
            self._arrive()
            peers = range(self.size) if wait_for is None else wait_for
            self._wait_until([rank for rank in peers if rank != self.me], self._round + 1)
            self._readers_behind = wait_for is not None
        else:
            self._adapter.barrier(self._group, False)
        slots = [self._slot(rank) for rank in range(self.size)]
        self._round += 1
        return slots

    def publish_within(self, seconds: float) -> list[int]:
        """End a round of every rank with nothing written, as :meth:`publish` does, waiting for
        the peers at most ``seconds``: the group ranks that had not arrived by then, in group
        order (empty: every rank did). A rank that arrives later passes the same round without
        waiting for this one, which has arrived. Only where ranks wait in memory (the backend's
        barrier takes no timeout)."""
        if not self.waits_in_memory:
            raise RuntimeError("publish_within: this window's ranks meet in the backend's barrier")
        self._arrive()
        peers = [rank for rank in range(self.size) if rank != self.me]
        missing = self._wait_until(peers, self._round + 1, seconds)
        self._readers_behind = bool(missing)
        self._round += 1
        return missing

    def _await_readers(self) -> None:
        """Wait until every peer has arrived at the last round, after a one-way round: this
        rank's slot for the new round is the one they read two rounds ago, up to that arrival."""
        self._wait_until([rank for rank in range(self.size) if rank != self.me], self._round)
        self._readers_behind = False

    def _arrive(self) -> None:
        """Count this rank's arrival at the current round."""
        # A locked instruction orders the slot's stores before the count's (x86).
        with self._fence:
            self._arrivals[self.me][0] = self._round + 1

    def _wait_until(
        self, waiting: list[int], arrival: int, seconds: float | None = None
    ) -> list[int]:
        """Wait until each of ``waiting`` (group ranks) has counted ``arrival`` rounds: poll,
        yielding the CPU, then sleep ever longer, up to the backend's timeout (then
        CollectiveTimeout). With ``seconds``, up to that many instead, then return the ranks
        still missing (empty once every one has arrived). Meanwhile point-to-point messages
        from peers are taken in (a peer may be blocked sending to this rank before it joins the
        collective, as a backend's receiving thread would take them, on any group)."""
        peers = self.liveness
        peers.raise_if_lost(self.doing)
        deadline = time.monotonic() + (self.timeout if seconds is None else seconds)
        with Backoff(self._yields) as backoff:
            while True:
                waiting = [rank for rank in waiting if self._arrivals[rank][0] < arrival]
                if not waiting:
                    return waiting
                take_in_everywhere()
                now = time.monotonic()
                if seconds is not None and not self._closing and now > deadline:
                    return waiting
                self._give_up_if_late(waiting, deadline, now)
                try:
                    peers.check(waiting, now, self.doing)
                except PeerLostError:
                    _spread_loss(self)
                    raise
                backoff.pause()

    def _give_up_if_late(self, waiting: list[int], deadline: float, now: float) -> None:
        """Raise CollectiveTimeout when the group is being destroyed or the deadline has
        passed."""
        closing = self._closing
        if closing or now > deadline:
            missing = f"rank{'s' if len(waiting) > 1 else ''} {', '.join(map(str, waiting))}"
            if closing:
                raise CollectiveTimeout(
                    f"a collective through shared memory was still waiting for group {missing} "
                    "when its group was destroyed (call wait() on every Work before destroy)"
                )
            raise CollectiveTimeout(
                f"a collective through shared memory did not complete within "
                f"{self.timeout:g} s (the backend's bound): group {missing} did not reach it "
                f"(group rank {self.me} waited); a rank missed the call, or died"
            )

    def open_point_to_point(self) -> None:
        """Carry the group's point-to-point calls from now on (a window made with its group;
        see :attr:`point_to_point`). The mailbox is made now, so that every wait of the process
        takes in its messages from the first one on, then the ranks meet (a round): a mailbox
        counts, when it is made, the peers it reads large messages from directly, and a send
        before its receiver had counted it streamed through the ring (1 run in 3 at 3 ranks on
        MindSpore, a job's first large message)."""
        self.point_to_point = True
        self.mailbox()
        self.publish()

    def mailbox(self) -> Mailbox:
        """The point-to-point channels of this window (made on first use)."""
        if self._mailbox is None:
            self._mailbox = Mailbox(
                self._views,
                self.me,
                FLAG_BYTES + 2 * self.slot_bytes,
                self.channel_bytes,
                self._fence,
                self.timeout,
                self._yields,
                self._adapter.group_ranks(self._group),
                self.processes,
                self.liveness,
            )
        return self._mailbox

    def read(self, slot: memoryview, numel: int, like: Tensor, offset: int = 0) -> Tensor:
        """A 1-d tensor of ``numel`` elements of ``like``'s dtype over a published slot."""
        return self._adapter.host_tensor(slot, HEADER_BYTES + offset, numel, like)

    def region_bytes(self, regions: int = 1) -> int:
        """The bytes of each of ``regions`` equal regions of a slot's data (after its header),
        each a multiple of 64 bytes, so that every region starts aligned for any dtype."""
        share = (self.slot_bytes - HEADER_BYTES) // regions
        return share - share % 64

    def write_word(self, value: int) -> None:
        """Publish ``value`` (a signed 64-bit integer) in this round's header."""
        if self._readers_behind:
            self._await_readers()
        struct.pack_into("<q", self._slot(self.me), 0, value)

    @staticmethod
    def word(slot: memoryview) -> int:
        """The word a rank published in a slot's header."""
        value: int = struct.unpack_from("<q", slot, 0)[0]
        return value

    def run(self, job: Callable[[bool], Handle | None], async_op: bool) -> Handle | None:
        """Run ``job`` (a collective of this window: ``job(async_op)``) after every one issued
        before it. With ``async_op`` it runs on the window's thread and the returned handle
        waits for it, as the backend's own asynchronous collectives run on threads of its own;
        a synchronous job runs here once that thread has nothing left. Where ranks wait on the
        backend's barrier (not waits_in_memory) every job runs here: a second thread would
        issue backend calls in an order the other ranks do not share."""
        worker = self._issue_order
        if not self.waits_in_memory or (not async_op and (worker is None or worker.idle())):
            return job(async_op)
        if worker is None:
            worker = self._issue_order = IssueOrder(f"compat-shared-memory-{self.me}")
        pending = worker.submit(partial(job, False))
        if async_op:
            return pending
        pending.wait()
        return None

    def close(self) -> None:
        """Unmap every slot (a tensor over them that is still alive keeps its mapping), once the
        collectives still running on the window's thread have ended (after a grace of
        _CLOSING_GRACE seconds they end with CollectiveTimeout)."""
        if self._issue_order is not None:
            if not self._issue_order.drain(_CLOSING_GRACE):
                self._closing = True
            self._issue_order.stop()
        if self._mailbox is not None:
            self._mailbox.close()
        self._arrivals = []
        for view in self._views:
            try:
                view.release()
            except BufferError:
                pass  # a tensor still views it
        for mapped in self._maps:
            try:
                mapped.close()
            except BufferError:
                pass  # a tensor still views it: the mapping goes with the last reference
        self._maps, self._views = [], []


#: Seconds close() lets a window's pending asynchronous collectives finish before ending them.
_CLOSING_GRACE = 5.0


def in_issue_order(algorithm: Callable[..., Any], adapter: Adapter, *args: Any) -> Handle | None:
    """Run ``algorithm`` (a shared-memory algorithm of compat.algorithms) with ``args``, whose
    last two are the group and ``async_op``, through the group's window in issue order
    (:meth:`SharedWindow.run`): asynchronous calls return at once, as the backend's would."""
    *arguments, group, async_op = args
    found = window(adapter, group)
    if found is None:  # the table chooses these only for groups with a window
        raise RuntimeError(f"{algorithm.__name__}: the group has no shared-memory window")
    return found.run(partial(algorithm, adapter, *arguments, group), async_op)


def yields_for(ranks: int) -> int:
    """How many polls yield the CPU before a wait for ``ranks`` processes sleeps (see _YIELDS):
    a few where they are more than this process's cores."""
    return _YIELDS if ranks <= _cores() else _YIELDS_OVERSUBSCRIBED


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def waits_in_memory() -> bool:
    """Whether ranks wait for each other on counters in the shared memory rather than on the
    backend's barrier (messages, far slower). Only on x86,
    whose memory model keeps a slot's stores ahead of the count's for the other ranks (and a
    locked instruction orders glibc's non-temporal copies); elsewhere (ARM) Python has no fence."""
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


#: The windows of each adapter's groups, by group handle (None: the group has none); an adapter's
#: entry goes with :func:`close_all`.
_WINDOWS: dict[Adapter, dict[GroupHandle, SharedWindow | None]] = {}


def window(adapter: Adapter, group: GroupHandle) -> SharedWindow | None:
    """The shared-memory window of ``group``: made on first use (a collective: every rank of the
    group must call this at the same point), then kept until :func:`close`. None where the group
    cannot have one (its ranks on several hosts, or /dev/shm refused a file) or needs none (one
    rank)."""
    windows = _WINDOWS.get(adapter)
    if windows is None:
        windows = _WINDOWS[adapter] = {}
    if group not in windows:
        windows[group] = _open(adapter, group)
    found: SharedWindow | None = windows[group]
    return found


def made(adapter: Adapter, group: GroupHandle) -> SharedWindow | None:
    """``group``'s window if one has been made, else None; never makes one (which would be a
    collective)."""
    windows = _WINDOWS.get(adapter)
    return None if windows is None else windows.get(group)


def has_entry(adapter: Adapter, group: GroupHandle) -> bool:
    """Whether ``group`` has been given a window or found to have none, and not closed since."""
    return group in _WINDOWS.get(adapter, {})


def close(adapter: Adapter, group: GroupHandle) -> None:
    """Close ``group``'s window (when the group is destroyed). It stays registered until closed:
    an asynchronous collective its thread starts meanwhile must find it, not make another (a
    set-up its peers never join: a hang, seen once the world's barrier went through shared
    memory and no longer gave that thread time to start first)."""
    windows = _WINDOWS.get(adapter, {})
    found = windows.get(group)
    if found is not None:
        found.close()
    windows.pop(group, None)


def close_all(adapter: Adapter) -> None:
    """Close every window of ``adapter`` (when it leaves the job)."""
    for group in list(_WINDOWS.get(adapter, ())):
        close(adapter, group)
    _WINDOWS.pop(adapter, None)


#: Called once a window finds a peer gone (compat.core.state drops the choices it keeps, so that
#: every later call on a group with that peer raises at once, native ones too).
LOSS_LISTENERS: list[Callable[[], None]] = []


def _spread_loss(found: SharedWindow) -> None:
    """Mark the peers ``found`` lost in every other window of its adapter: a rank gone from one
    group is gone from every group it is in."""
    lost = found.liveness.lost_global_ranks()
    for other in list(_WINDOWS.get(found._adapter, {}).values()):
        if other is not None and other is not found:
            for rank in lost:
                other.liveness.mark_lost(rank, found.doing)
    for listener in list(LOSS_LISTENERS):
        listener()


def lost(adapter: Adapter, group: GroupHandle) -> SharedWindow | None:
    """``group``'s window where a peer of it has been found gone, else None."""
    found = made(adapter, group)
    return found if found is not None and found.liveness.lost else None


def _open(adapter: Adapter, group: GroupHandle) -> SharedWindow | None:
    ranks = adapter.group_ranks(group)
    if len(ranks) == 1:
        return None  # nothing to share: the backend's own call copies at most
    me = ranks.index(adapter.rank())
    slot, channel = SLOT_BYTES, channel_bytes(len(ranks))
    size = file_bytes(len(ranks), slot, channel)
    # A rank that opts out offers no file: every rank then sees a missing name, and none maps.
    path, own = (None, None) if os.environ.get(ENVIRONMENT) == "0" else _create(size)
    maps: list[mmap.mmap] = []
    try:
        name = "" if path is None else os.path.basename(path)
        # The file's address in this process, for peers' direct reads (compat.transport.mailbox).
        address = 0 if own is None else ctypes.addressof(ctypes.c_char.from_buffer(own))
        alive = "" if path is None else liveness.own_file()
        described = f"{host_identity()}|{name}|{os.getpid()}|{address:x}|{alive}"
        descriptions = [text.split("|") for text in _exchange(adapter, group, described)]
        hosts, names = {text[0] for text in descriptions}, [text[1] for text in descriptions]
        processes = [(int(text[2]), int(text[3], 16)) for text in descriptions]
        lives = [
            None if rank == me else liveness.peer_file(text[4])
            for rank, text in enumerate(descriptions)
        ]
        if own is not None and len(hosts) == 1 and all(names):
            maps = _map_peers(names, me, own, size)
        # Every rank answers, whether or not it could open every file: the ranks remove their
        # files' names only once none will open them any more.
        agreed = _exchange(adapter, group, "1" if maps else "0")
    finally:
        # Also when the set-up fails (a rank that never came: CollectiveTimeout): no file is
        # left behind. A process killed in between leaves one, for _remove_stale.
        if path is not None:
            os.unlink(path)
    if all(answer == "1" for answer in agreed):
        return SharedWindow(adapter, group, maps, me, names, slot, channel, processes, lives)
    for mapped in maps or ([own] if own is not None else []):
        mapped.close()
    return None


def _create(size: int) -> tuple[str | None, mmap.mmap | None]:
    """This rank's file (its path) mapped, or (None, None) where /dev/shm refuses it."""
    _remove_stale()
    path = os.path.join(DIRECTORY, f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex}")
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    except OSError:
        return None, None
    try:
        # Reserved now: a write past what tmpfs can hold would be SIGBUS, not an error.
        os.posix_fallocate(descriptor, 0, size)
        mapped = mmap.mmap(descriptor, size)
        mapped[MARKER : MARKER + 8] = os.urandom(8)
        return path, mapped
    except OSError:
        os.unlink(path)
        return None, None
    finally:
        os.close(descriptor)


def _remove_stale() -> None:
    """Remove the files of compat processes that died while setting up a window (killed between
    creating their file and removing its name): a file is stale when the process its name
    carries no longer exists and it is older than :data:`STALE_SECONDS` (a process of another
    pid namespace that shares this /dev/shm is not seen: the age spares its set-up)."""
    try:
        names = [name for name in os.listdir(DIRECTORY) if name.startswith(PREFIX)]
    except OSError:
        return
    now = time.time()
    for name in names:
        pid = name[len(PREFIX) :].split("-", 1)[0]
        path = os.path.join(DIRECTORY, name)
        try:
            if (
                not pid.isdigit()
                or _alive(int(pid))
                or now - os.stat(path).st_mtime < STALE_SECONDS
            ):
                continue
            os.unlink(path)
        except OSError:
            continue  # removed meanwhile, or not ours to remove


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


def _map_peers(names: Sequence[str], me: int, own: mmap.mmap, size: int) -> list[mmap.mmap]:
    """Every rank's file mapped (this rank's is ``own``), or [] if one cannot be opened."""
    maps: list[mmap.mmap] = []
    for rank, name in enumerate(names):
        if rank == me:
            maps.append(own)
            continue
        try:
            descriptor = os.open(os.path.join(DIRECTORY, name), os.O_RDWR)
        except OSError:
            break
        try:
            if os.fstat(descriptor).st_size == size:
                maps.append(mmap.mmap(descriptor, size))
        finally:
            os.close(descriptor)
        if len(maps) != rank + 1:
            break
    else:
        return maps
    for mapped in maps:
        if mapped is not own:
            mapped.close()
    return []


def _exchange(adapter: Adapter, group: GroupHandle, text: str) -> list[str]:
    """Every rank's ``text`` (ASCII, at most :data:`_DESCRIPTION_BYTES`), in group-rank order:
    one all_gather."""
    data = text.encode()
    mine = adapter.bytes_tensor(data.ljust(_DESCRIPTION_BYTES, b"\0"))
    gathered = [adapter.bytes_tensor(bytes(_DESCRIPTION_BYTES)) for _ in adapter.group_ranks(group)]
    adapter.all_gather(gathered, mine, group, False)
    return [adapter.to_bytes(item).rstrip(b"\0").decode() for item in gathered]
