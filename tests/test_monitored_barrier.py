"""compat.algorithms.reported_barrier_in_memory's own logic, on a stand-in adapter whose
receives write their byte into host memory when a test says (the barrier itself runs on real
Gloo ranks in tests/ranks/a2a_cases.py and tests/test_faults.py); and the torch adapter's
keep_pending, ended by destroy."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from adapters import torch as torch_adapter
from compat import algorithms
from compat.algorithms import monitored_barrier
from compat.base.errors import CollectiveTimeout

Array = np.ndarray[Any, Any]


class _Handle:
    def __init__(self, kind: str, peer: int, tag: int) -> None:
        self.kind, self.peer, self.tag, self.waits = kind, peer, tag, 0

    def wait(self, timeout: object = None) -> None:
        self.waits += 1


class _HostAdapter:
    """Rank 0 of ``ranks``; a receive from a peer in ``arrive_after`` writes its byte that many
    seconds after it is issued, one from any other peer never does."""

    def __init__(
        self, ranks: Sequence[int], arrive_after: dict[int, float], in_host: bool = True
    ) -> None:
        self.ranks, self.arrive_after, self.in_host = list(ranks), arrive_after, in_host
        self.handles: list[_Handle] = []
        self.kept: list[_Handle] = []
        self.timers: list[threading.Timer] = []

    def group_ranks(self, group: object) -> list[int]:
        return self.ranks

    def rank(self) -> int:
        return 0

    def own_global_rank(self, group: object) -> int:
        return 0

    def bytes_tensor(self, data: bytes) -> Array:
        return np.frombuffer(bytearray(data), dtype=np.uint8)

    def in_host_memory(self, tensor: Array) -> bool:
        return self.in_host

    def parts(self, tensor: Array, sizes: Sequence[int]) -> list[Array]:
        return np.split(tensor, np.cumsum(sizes)[:-1])

    def host_address(self, tensor: Array) -> int:
        address: int = tensor.ctypes.data
        return address

    def isend(self, tensor: Array, peer: int, group: object, tag: int) -> _Handle:
        assert bytes(tensor) == b"\x01", bytes(tensor)
        self.handles.append(_Handle("send", peer, tag))
        return self.handles[-1]

    def irecv(self, tensor: Array, peer: int, group: object, tag: int) -> _Handle:
        assert tensor.size == 1 and tensor[0] == 0
        if peer in self.arrive_after:
            timer = threading.Timer(self.arrive_after[peer], tensor.__setitem__, (0, 1))
            self.timers.append(timer)
            timer.start()
        self.handles.append(_Handle("recv", peer, tag))
        return self.handles[-1]

    def keep_pending(self, handles: Sequence[_Handle]) -> None:
        self.kept.extend(handles)


def _run(adapter: _HostAdapter, timeout: float) -> float:
    started = time.monotonic()
    try:
        algorithms.reported_barrier_in_memory(adapter, None, timeout, False)  # type: ignore[arg-type]
    finally:
        for timer in adapter.timers:
            timer.join()
    return time.monotonic() - started


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(monitored_barrier, "_GRACE", 0.05)


def test_every_peer_arrives_late_or_at_once_and_everything_is_waited(short_grace: None) -> None:
    adapter = _HostAdapter([0, 1, 2, 3], {1: 0.0, 2: 0.15, 3: 0.05})
    # Returns once the peers arrived (by 0.15 s), not at the timeout: far apart, so a slow
    # machine cannot blur the two.
    assert _run(adapter, 60.0) < 30.0
    assert [(h.kind, h.peer, h.tag, h.waits) for h in adapter.handles] == [
        (kind, peer, algorithms.ARRIVAL_TAG, 1) for kind in ("send", "recv") for peer in (1, 2, 3)
    ]
    assert adapter.kept == []


def test_the_silent_peers_are_named_and_their_messages_kept_pending(short_grace: None) -> None:
    adapter = _HostAdapter([0, 1, 2, 3], {1: 0.0})
    with pytest.raises(CollectiveTimeout) as raised:
        _run(adapter, 0.3)
    message = str(raised.value)
    assert message.startswith("monitored_barrier: ranks 2, 3 did not arrive within the timeout")
    assert "of 0.3 s" in message, message
    waited = {(h.kind, h.peer) for h in adapter.handles if h.waits}
    assert waited == {("send", 1), ("recv", 1)}
    assert sorted((h.kind, h.peer) for h in adapter.kept) == [
        ("recv", 2), ("recv", 3), ("send", 2), ("send", 3)
    ]  # fmt: skip
    assert all(h.waits == 0 for h in adapter.kept)


def test_the_deadline_is_the_timeout_and_at_least_the_grace(short_grace: None) -> None:
    started = time.monotonic()
    with pytest.raises(CollectiveTimeout, match="rank 1 did not arrive"):
        _run(_HostAdapter([0, 1], {}), 1.0)
    assert 1.0 <= time.monotonic() - started < 10.0  # not before the timeout; not long after
    started = time.monotonic()
    with pytest.raises(CollectiveTimeout):
        _run(_HostAdapter([0, 1], {}), 0.0)
    assert time.monotonic() - started >= 0.05  # the grace


def test_a_group_of_one_returns_and_bytes_off_the_host_take_reported_barrier(
    short_grace: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = _HostAdapter([0], {})
    _run(alone, 1.0)
    assert alone.handles == []
    delegated: list[tuple[Any, ...]] = []
    monkeypatch.setattr(monitored_barrier, "reported_barrier", lambda *args: delegated.append(args))
    on_device = _HostAdapter([0, 1], {1: 0.0}, in_host=False)
    _run(on_device, 3.0)
    assert delegated == [(on_device, None, 3.0, False)]
    assert on_device.handles == []


class _KeptHandle:
    def __init__(self, error: Exception | None) -> None:
        self.error, self.timeouts = error, []

    def wait(self, timeout: object = None) -> None:
        self.timeouts.append(timeout)
        if self.error is not None:
            raise self.error


def test_torch_destroy_ends_the_kept_handles(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a timed-out barrier left pending is waited once, briefly, by destroy (closing the
    group's connections ends it), whether its wait raises torch's error or compat's; then the
    group is destroyed."""
    adapter = torch_adapter.TorchAdapter()
    kept = [_KeptHandle(None), _KeptHandle(RuntimeError("closed")), _KeptHandle(
        CollectiveTimeout("timed out")
    )]  # fmt: skip
    adapter.keep_pending(kept)  # type: ignore[arg-type]
    destroyed: list[bool] = []
    monkeypatch.setattr(torch_adapter.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(torch_adapter.dist, "destroy_process_group", lambda: destroyed.append(True))
    adapter.destroy()
    assert [handle.timeouts for handle in kept] == [[torch_adapter._ENDING_WAIT]] * 3
    assert destroyed == [True]
    assert adapter._pending == []
