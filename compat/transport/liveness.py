"""Whether the other ranks of a shared-memory window still run: a kernel lock, no heartbeat.

Each process that joins a window holds a POSIX record lock on a file of its own in ``/dev/shm``
(:func:`own_file`) for as long as it lives; the kernel drops the lock when the process ends,
however it ends (SIGKILL, a crash, an exit). The ranks exchange the files' names when they make
a window; a rank waiting for a peer tries, now and then, to take a shared lock on the peer's
file (:meth:`Liveness.check`): refused, the peer runs; granted, it has ended. A peer that is
alive but slow keeps its lock, so it still gets the whole timeout; one that destroys a group
keeps it too. POSIX locks are not inherited by ``fork``, so a forked child (a data loader's
worker) does not keep a dead rank's lock, and they work between pid namespaces that share
``/dev/shm``.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import uuid
from collections.abc import Iterable, Sequence

from compat.base.errors import PeerLostError

#: How often a waiting rank looks at its peers' locks (one system call per peer waited for).
CHECK_SECONDS = 0.1
#: Where the files are made, and how their names start: "compat-<pid>-live-" (so that
#: compat.transport.shared_memory removes those of processes that died, as it does its window
#: files).
DIRECTORY = "/dev/shm"
_PREFIX = "compat-{pid}-live-"

_own: tuple[int, str, int] | None = None  # this process's (descriptor, name, pid), once made
_peers: dict[str, int | None] = {}  # a peer's file name -> its descriptor here (None: none)


def own_file() -> str:
    """The name of this process's liveness file, made (and locked) on first use; "" where
    ``/dev/shm`` refuses it (its peers then cannot tell, and wait for the timeout)."""
    global _own
    if _own is None or _own[2] != os.getpid():  # a forked child holds no lock: its own file
        name = _PREFIX.format(pid=os.getpid()) + uuid.uuid4().hex
        path = os.path.join(DIRECTORY, name)
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except OSError:
            return ""
        try:
            fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(descriptor)
            os.unlink(path)
            return ""
        _own = (descriptor, name, os.getpid())
        atexit.register(_remove, path, os.getpid())
    return _own[1]


def peer_file(name: str) -> int | None:
    """A peer's liveness file (``name`` from :func:`own_file`) open here, kept for every window
    with that peer; None where it has none or it cannot be opened."""
    if not name or "/" in name:
        return None
    if name not in _peers:
        try:
            _peers[name] = os.open(os.path.join(DIRECTORY, name), os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            _peers[name] = None
    return _peers[name]


def _remove(path: str, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child that exits
        try:
            os.unlink(path)
        except OSError:
            pass


class Liveness:
    """The peers of one window: each one's file, open in this process, and the peers found gone.

    ``descriptors``: per group rank, the rank's liveness file open here (None where its lock
    cannot be looked at: this rank's own, or a peer without one); ``ranks``: the group's global
    ranks."""

    def __init__(self, descriptors: Sequence[int | None], ranks: Sequence[int], me: int) -> None:
        self._descriptors = list(descriptors)
        self._ranks = list(ranks)
        self._me = me
        self._next_check = 0.0
        #: group ranks found gone, with what this rank was doing when it found them
        self.lost: dict[int, str] = {}

    def check(self, waiting: Iterable[int], now: float, doing: str) -> None:
        """Raise PeerLostError if a group rank of ``waiting`` has ended, looking at most every
        CHECK_SECONDS (``now``: time.monotonic())."""
        if now < self._next_check:
            return
        self._next_check = now + CHECK_SECONDS
        gone = [rank for rank in waiting if not self._alive(rank)]
        if gone:
            for rank in gone:
                self.lost.setdefault(rank, doing)
            raise self.error(doing)

    def raise_if_lost(self, doing: str) -> None:
        """Raise PeerLostError at once if a peer has been found gone (the group is unusable)."""
        if self.lost:
            raise self.error(doing)

    def mark_lost(self, global_rank: int, doing: str) -> None:
        """Record that ``global_rank`` (found gone through another window) has ended."""
        if global_rank in self._ranks:
            self.lost.setdefault(self._ranks.index(global_rank), doing)

    def lost_global_ranks(self) -> list[int]:
        return [self._ranks[rank] for rank in sorted(self.lost)]

    def error(self, doing: str) -> PeerLostError:
        names = ", ".join(
            f"rank {self._ranks[rank]} (group rank {rank})" for rank in sorted(self.lost)
        )
        first = self.lost[min(self.lost)]
        now = "" if doing == first else f"; this rank was in {doing}"
        return PeerLostError(
            f"{names} left the group (its process ended: killed, crashed or exited; or it "
            f"destroyed the group) while rank {self._ranks[self._me]} waited for it in {first} "
            f"through shared memory{now}. The group cannot be used any more: end the job"
        )

    def _alive(self, rank: int) -> bool:
        descriptor = self._descriptors[rank]
        if descriptor is None:
            return True  # cannot tell: the timeout bounds the wait
        try:
            fcntl.lockf(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True  # refused: its process holds its lock
        return False
