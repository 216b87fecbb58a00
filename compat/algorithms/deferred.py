"""Point to point where the backend's receive blocks in issue order (MCCL): each receive is deferred
to its Work's wait, and this module keeps the ones not run yet, per adapter."""

from __future__ import annotations

from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.errors import UnsupportedError
from compat.base.types import Handle

#: The receives deferred and not run yet of each adapter that has any, in issue order (an
#: adapter without one has no entry: every collective's common case asks ``adapter in WAITING``).
WAITING: dict[Adapter, list[DeferredRecv]] = {}


class DeferredRecv:
    """A receive that runs when its Work is waited on (see :func:`deferred_recv`)."""

    __slots__ = ("_adapter", "_done", "_group", "_queue", "_src", "_tag", "_tensor")

    def __init__(
        self, adapter: Adapter, tensor: Tensor, src: int, group: GroupHandle, tag: int
    ) -> None:
        self._adapter, self._tensor, self._src, self._group = adapter, tensor, src, group
        self._tag, self._done = tag, False
        self._queue = WAITING.setdefault(adapter, [])
        self._queue.append(self)

    def wait(self, timeout: object = None) -> bool:
        if timeout is not None:
            raise UnsupportedError(
                "timeout: a deferred receive is one blocking recv, which MindSpore bounds itself "
                f"(30 s on MCCL); expected None, got {timeout}"
            )
        if not self._done:
            # A peer's messages arrive in the order it sent them: the receives from it that were
            # issued earlier take theirs first.
            for earlier in [item for item in self._queue if item._same_peer(self)]:
                earlier._run()
                if earlier is self:
                    break
        return True

    def is_completed(self) -> bool:
        # Completion is known only by receiving; the message is on its way or already stored
        # by the receiver's server thread (a send completes without its receive).
        return self.wait()

    def _same_peer(self, other: DeferredRecv) -> bool:
        return self._src == other._src  # on any group: see settle_deferred_recvs

    def _run(self) -> None:
        self._queue.remove(self)
        if not self._queue:
            WAITING.pop(self._adapter, None)
        self._done = True
        self._adapter.recv(self._tensor, self._src, self._group, self._tag)


def deferred_sources(adapter: Adapter) -> frozenset[int]:
    """The ranks this process has a deferred receive from that is not run yet."""
    queue = WAITING.get(adapter) if WAITING else None
    return frozenset(item._src for item in queue) if queue else _NO_RANKS


_NO_RANKS: frozenset[int] = frozenset()


def settle_deferred_recvs(adapter: Adapter, src: int, group: GroupHandle) -> None:
    """Run the deferred receives from ``src`` on ``group`` (before a blocking recv from it, so
    that messages keep their order)."""
    queue = WAITING.get(adapter)
    if queue:
        # MCCL matches a message by its source rank alone, whatever the group: a receive from
        # `src` on any group runs first (a soak found a world irecv and a sub-group recv from
        # one peer swapping their data).
        for item in [item for item in queue if item._src == src]:
            item._run()


def deferred_recv(
    adapter: Adapter, tensor: Tensor, src: int, group: GroupHandle, tag: int = 0
) -> Handle:
    """irecv where the backend's receive blocks in issue order (MCCL: an irecv queued before the
    matching isend on every rank waits for ever): the receive is a blocking recv run by
    ``Work.wait()`` (or ``is_completed()``), after the receives issued earlier from the same
    peer. Never deadlocks where the backend's sends complete without their receive (MCCL's do:
    the receiver's server thread stores the message): every send a wait needs has been issued.
    """
    return DeferredRecv(adapter, tensor, src, group, tag)


def sends_then_deferred_recvs(
    adapter: Adapter, p2p_ops: list[tuple[str, Tensor, int, int]], group: GroupHandle
) -> list[Handle]:
    """batch_isend_irecv from the backend's isend and :func:`deferred_recv`: every send is
    issued now, in list order; each receive runs when its Work is waited on. No rank blocks
    before all its sends are out, so no cycle of blocking calls can form."""
    handles: list[Handle] = []
    for direction, tensor, peer, tag in p2p_ops:
        if direction == "isend":
            handles.append(adapter.isend(tensor, peer, group, tag))
        else:
            handles.append(deferred_recv(adapter, tensor, peer, group, tag))
    return handles
