"""Whether the other ranks of a shared-memory window still run: a kernel lock, no heartbeat.

Each rank holds a POSIX record lock on its own window file for as long as its process lives
(:func:`hold`); the kernel drops it when the process ends, however it ends (SIGKILL, a crash,
an exit). A rank waiting for a peer tries, now and then, to take a shared lock on the peer's file
(:meth:`Liveness.check`): refused, the peer runs; granted, it has ended. A peer that is alive but
slow keeps its lock, so it still gets the whole timeout. POSIX locks are not inherited by
``fork``, so a forked child (a data loader's worker) does not keep a dead rank's lock, and they
work between pid namespaces that share ``/dev/shm``.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterable, Sequence

from compat.errors import PeerLostError

#: How often a waiting rank looks at its peers' locks (one system call per peer waited for).
CHECK_SECONDS = 0.1


def hold(descriptor: int) -> bool:
    """Take this process's lock on its own window file (open for writing): True if taken."""
    try:
        fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


class Liveness:
    """The peers of one window: each one's file, open in this process, and the peers found gone.

    ``descriptors``: per group rank, the rank's file open here (None where its lock cannot be
    looked at: this rank's own, or a file not kept open); ``ranks``: the group's global ranks."""

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
