"""monitored_barrier: a barrier that raises, within its timeout, on every rank that waited,
naming the ranks that did not arrive (no framework has one: see capabilities.toml)."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence

from compat.algorithms.common import ARRIVAL_TAG
from compat.algorithms.shared_memory import group_window
from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.errors import CollectiveTimeout
from compat.transport import shared_memory
from compat.transport.backoff import Backoff

#: Seconds a rank still waits for a peer's arrival once the deadline has passed (an arrival
#: already there is received in well under this).
_GRACE = 1.0


def reported_barrier(
    adapter: Adapter, group: GroupHandle, timeout: float, wait_all_ranks: bool
) -> None:
    """monitored_barrier from point-to-point messages, timed by compat (so MCCL's fixed 30 s
    bound does not apply): every rank first announces its arrival to every other rank of the
    group (the sends are issued at once and left to complete), then receives the peers'
    announcements in group order within ``timeout`` (:data:`_GRACE` for each one still to hear
    from after the deadline). Every rank that waited raises :class:`compat.CollectiveTimeout`
    naming the peers it did not hear from, so every waiting rank names the missing ranks,
    whichever they are; no rank relays for another, so none waits on a rank that is away.

    ``wait_all_ranks`` is taken as torch takes it; both values name every rank that had not
    arrived by the deadline (the others' announcements are already there: hearing them costs
    well under :data:`_GRACE` each).
    """
    del wait_all_ranks  # see the docstring
    _announced_barrier(adapter, group, timeout, past_silence=True)


def reported_barrier_until_silent(
    adapter: Adapter, group: GroupHandle, timeout: float, wait_all_ranks: bool
) -> None:
    """:func:`reported_barrier` for backends where a receive that waits blocks every later
    operation of the process (MindSpore's PyNative queue, MCCL): each rank stops at the first
    peer it did not hear from by the deadline and names it; the peers after it in group order
    are named as not checked (their announcements may be there, but no receive can reach them
    until MCCL gives up on the blocked one after its fixed 30 s)."""
    del wait_all_ranks  # see reported_barrier
    _announced_barrier(adapter, group, timeout, past_silence=False)


def reported_barrier_in_memory(
    adapter: Adapter, group: GroupHandle, timeout: float, wait_all_ranks: bool
) -> None:
    """:func:`reported_barrier` for backends that receive into host memory in the background
    (Gloo): every send and every receive issued at once, the received bytes watched in memory
    until they have all arrived or the deadline has passed, then each receive and send waited
    for (all complete: every peer issued its receives right after its sends). No thread per
    wait, as :func:`reported_barrier`'s waits take on Gloo: starting and handing back a thread
    costs more than the barrier itself (the figures are in capabilities.toml). It names the
    same ranks: every rank that waited raises naming the peers it did not hear from by the
    deadline. A silent peer's send and receive, left pending, are held by the adapter until
    destroy() (:meth:`compat.base.adapter.Adapter.keep_pending`). Where the bytes would not be
    in host memory (a GPU home device), :func:`reported_barrier` runs instead."""
    ranks = adapter.group_ranks(group)
    me = adapter.own_global_rank(group)
    peers = [rank for rank in ranks if rank != me]
    if not peers:
        return
    arrival, heard = adapter.bytes_tensor(b"\x01"), adapter.bytes_tensor(bytes(len(peers)))
    if not adapter.in_host_memory(heard):
        reported_barrier(adapter, group, timeout, wait_all_ranks)
        return
    started = time.monotonic()
    deadline = started + max(timeout, _GRACE)  # as reported_barrier's first receive waits
    sends = [adapter.isend(arrival, peer, group, ARRIVAL_TAG) for peer in peers]
    receives = [
        adapter.irecv(flag, peer, group, ARRIVAL_TAG)
        for flag, peer in zip(adapter.parts(heard, [1] * len(peers)), peers, strict=True)
    ]
    heard_from = _arrived_by(adapter, heard, len(peers), len(ranks), deadline)
    for came, receive, send in zip(heard_from, receives, sends, strict=True):
        if came:
            receive.wait()
            send.wait()
    silent = [index for index, came in enumerate(heard_from) if not came]
    if silent:
        adapter.keep_pending([sends[i] for i in silent] + [receives[i] for i in silent])
        raise _not_arrived([peers[index] for index in silent], timeout, started)


def _arrived_by(
    adapter: Adapter, heard: Tensor, peers: int, ranks: int, deadline: float
) -> list[bool]:
    """Which of the ``peers`` bytes of ``heard`` (in host memory) a receive has set by
    ``deadline``: watched, backing off as a group of ``ranks`` waits, then read once (a byte
    arriving after that reading is too late)."""
    flags = (ctypes.c_ubyte * peers).from_address(adapter.host_address(heard))
    with Backoff(shared_memory.yields_for(ranks)) as backoff:
        while not all(flags) and time.monotonic() < deadline:
            backoff.pause()
    return [bool(flag) for flag in flags]


def shared_memory_monitored_barrier(
    adapter: Adapter, group: GroupHandle, timeout: float, wait_all_ranks: bool
) -> None:
    """monitored_barrier through shared memory: one round of the group's window with nothing
    written, as :func:`shared_memory_barrier`, in which each rank waits for the others' arrival
    at most ``timeout``. Every rank that waited longer raises :class:`compat.CollectiveTimeout`
    naming every rank it did not see arrive (whichever they are: their counts are in the
    memory, no message has to come through). The round runs after the window's asynchronous
    collectives issued before it. Only on a window whose ranks wait in memory (elsewhere they
    meet in the backend's barrier, which takes no timeout; compat.core.state chooses it only
    there)."""
    del wait_all_ranks  # see reported_barrier
    window = group_window(adapter, group, "monitored_barrier")
    started = time.monotonic()
    missing: list[int] = []

    def job(async_op: bool) -> None:
        missing.extend(window.publish_within(timeout))

    window.run(job, False)
    if missing:
        ranks = adapter.group_ranks(group)
        raise _not_arrived(
            [ranks[index] for index in missing], timeout, started,
            waited=" for them in the group's shared memory",
        )  # fmt: skip


def _announced_barrier(
    adapter: Adapter, group: GroupHandle, timeout: float, past_silence: bool
) -> None:
    ranks = adapter.group_ranks(group)
    me = adapter.own_global_rank(group)
    peers = [rank for rank in ranks if rank != me]
    if not peers:
        return
    started = time.monotonic()
    deadline = started + timeout
    arrival = adapter.bytes_tensor(b"\x01")
    # Every send first, each issued now and left pending: on MCCL it completes once the peer's
    # server thread has stored it, on Gloo once the peer receives (below, whenever it arrives).
    for peer in peers:
        adapter.send_within(arrival, peer, group, 0.0)
    silent: list[int] = []
    unchecked: list[int] = []
    for peer in peers:
        if silent and not past_silence:
            unchecked.append(peer)
            continue
        flag = adapter.bytes_tensor(b"\x00")
        if (
            not adapter.recv_within(flag, peer, group, max(deadline - time.monotonic(), _GRACE))
            or adapter.to_bytes(flag) != b"\x01"
        ):
            silent.append(peer)
    if silent:
        after = (
            f"; not checked (this backend cannot receive past a rank that is away): "
            f"rank{'s' if len(unchecked) > 1 else ''} {', '.join(map(str, unchecked))}"
            if unchecked
            else ""
        )
        raise _not_arrived(silent, timeout, started, after=after)


def _not_arrived(
    missing: Sequence[int], timeout: float, started: float, waited: str = "", after: str = ""
) -> CollectiveTimeout:
    """monitored_barrier's error naming the ``missing`` ranks, for a rank that started waiting
    at ``started``; ``waited`` says where it waited, ``after`` what follows."""
    return CollectiveTimeout(
        f"monitored_barrier: rank{'s' if len(missing) > 1 else ''} "
        f"{', '.join(map(str, missing))} did not arrive within the timeout of {timeout:g} s "
        f"(this rank waited {time.monotonic() - started:.1f} s{waited}){after}"
    )
