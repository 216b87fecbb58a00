"""MindSpore's TCP key-value store (``mindspore.mint.distributed.TCPStore``), translated: its
timeout of a blocking get becomes compat's StoreTimeout."""

from __future__ import annotations

import os
import time

from mindspore.mint.distributed import TCPStore

from compat.base.adapter import StoreAddress
from compat.base.errors import StoreTimeout, UnsupportedError

# What MindSpore's RuntimeError says when a get found no value within the store's timeout
# (a lost server says "send msg to master failed" instead, passed on unchanged).
_GET_TIMED_OUT = "TCP get operation failed"
# What it says when one attempt to connect (bounded by the store's timeout) failed.
_CONNECT_TIMED_OUT = "while trying to connect"


class MindSporeStoreClient:
    """One connection to a store (its server too where ``address.is_master``)."""

    def __init__(self, address: StoreAddress) -> None:
        if os.environ.get("MS_ROLE") == "MS_SCHED":
            # MindSpore's TCPStore makes an object with no connection in its scheduler process.
            raise UnsupportedError("compat.TCPStore: MindSpore's scheduler process has no store")
        self.address = address
        self._store = _connect(address)

    def set(self, key: str, value: str | bytes) -> None:
        self._store.set(key, value)

    def get(self, key: str) -> bytes:
        try:
            return bytes(self._store.get(key))
        except RuntimeError as error:
            if _GET_TIMED_OUT not in str(error):
                raise
            raise StoreTimeout(
                f"store get: no value for key {key!r} within the store's timeout "
                f"({self.address.timeout.total_seconds():g} s)"
            ) from None

    def add(self, key: str, amount: int) -> int:
        return int(self._store.add(key, amount))

    def delete_key(self, key: str) -> bool:
        return bool(self._store.delete_key(key))


def _connect(address: StoreAddress) -> TCPStore:
    """MindSpore's TCPStore at ``address``; an attempt to connect that times out is repeated
    until ``address.connect_within`` has passed (MindSpore bounds one attempt by the timeout)."""
    within = address.connect_within or address.timeout
    deadline = time.monotonic() + within.total_seconds()
    while True:
        try:
            return TCPStore(
                address.host,
                address.port,
                address.world_size,
                address.is_master,
                address.timeout,
                address.wait_for_workers,
            )
        except RuntimeError as error:
            if _CONNECT_TIMED_OUT not in str(error) or time.monotonic() >= deadline:
                raise
