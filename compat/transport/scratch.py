"""Scratch buffers reused from call to call by compat.algorithms (one pool per adapter).

A fresh buffer of tens of MB can cost as much as the communication itself on CPU: the kernel maps
and zeroes every page on first touch. A buffer is taken for the duration of
one collective (until its Work's finish step for async_op) and then given back; at most ``limit``
bytes are kept, the oldest evicted first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compat.base.adapter import Adapter, Tensor

#: The most scratch memory kept between calls, in bytes, over all dtypes and shapes.
SCRATCH_BYTES = 512 * 2**20

Key = tuple[Any, ...]


class ScratchPool:
    """The kept buffers of one adapter, by dtype, device and shape."""

    def __init__(self, adapter: Adapter, limit: int = SCRATCH_BYTES) -> None:
        self._adapter = adapter
        self._limit = limit
        self._kept: dict[Key, list[Tensor]] = {}
        self._bytes = 0

    def take(self, shape: tuple[int, ...], like: Tensor) -> tuple[Tensor, Key]:
        """A buffer of ``shape`` and ``like``'s dtype and device, and the key to :meth:`give` it
        back under: a kept one if there is one, else a new one."""
        adapter = self._adapter
        key = (adapter.dtype(like), adapter.device(like), shape)
        kept = self._kept.get(key)
        if kept:
            buffer = kept.pop()
            self._bytes -= adapter.nbytes(buffer)
            return buffer, key
        return adapter.empty(shape, like), key

    def give(self, buffer: Tensor, key: Key) -> None:
        """Keep ``buffer`` for a later call, evicting the oldest kept buffers past the limit."""
        size = self._adapter.nbytes(buffer)
        if size > self._limit:
            return
        self._kept.setdefault(key, []).append(buffer)
        self._bytes += size
        while self._bytes > self._limit:
            oldest = next(iter(self._kept))
            evicted = self._kept[oldest]
            self._bytes -= self._adapter.nbytes(evicted.pop(0))
            if not evicted:
                del self._kept[oldest]

    def clear(self) -> None:
        """Drop every kept buffer."""
        self._kept.clear()
        self._bytes = 0


#: Each adapter's pool; an adapter's entry goes with :func:`clear`.
_POOLS: dict[Adapter, ScratchPool] = {}


def pool(adapter: Adapter) -> ScratchPool:
    """``adapter``'s pool (made on first use)."""
    found = _POOLS.get(adapter)
    if found is None:
        found = _POOLS[adapter] = ScratchPool(adapter)
    return found


def clear(adapter: Adapter) -> None:
    """Drop ``adapter``'s pool and every buffer it kept (when it leaves the job)."""
    found = _POOLS.pop(adapter, None)
    if found is not None:
        found.clear()
