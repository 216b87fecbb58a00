"""MindSpore's TCP key-value store (``mindspore.mint.distributed.TCPStore``), translated: its
timeout of a blocking get becomes compat's StoreTimeout."""

from __future__ import annotations

import os

from mindspore.mint.distributed import TCPStore

from compat.base.adapter import StoreAddress
from compat.base.errors import StoreTimeout, UnsupportedError

# What MindSpore's RuntimeError says when a get found no value within the store's timeout
# (a lost server says "send msg to master failed" instead, passed on unchanged).
_GET_TIMED_OUT = "TCP get operation failed"


class MindSporeStoreClient:
    """One connection to a store (its server too where ``address.is_master``)."""

    def __init__(self, address: StoreAddress) -> None:
        if os.environ.get("MS_ROLE") == "MS_SCHED":
            # MindSpore's TCPStore makes an object with no connection in its scheduler process.
            raise UnsupportedError("compat.TCPStore: MindSpore's scheduler process has no store")
        self.address = address
        self._store = TCPStore(
            address.host,
            address.port,
            address.world_size,
            address.is_master,
            address.timeout,
            address.wait_for_workers,
        )

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
