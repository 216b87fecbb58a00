"""MindSpore's TCP key-value store (``mindspore.mint.distributed.TCPStore``), translated: its
timeout of a blocking get becomes compat's StoreTimeout.

Lifetime: MindSpore's store cannot be destroyed safely. Its destructor (TcpNodeBase::Finalize,
then TCPClient::Finalize) deletes the connection to the server while that connection's receive
thread may still be handling an event for it, which dereferences the deleted connection: a
SIGSEGV in the process that drops a store, a server's or a client's, at any ``del``, garbage
collection or interpreter exit (more often on a loaded machine). So every MindSpore store object
made here is owned for the rest of the process: its reference count is raised once and never
lowered, so no collection and no interpreter teardown ever runs that destructor; the operating
system closes its sockets when the process ends. A server therefore serves until its process
exits, and connections are shared: one per (host, port, timeout) in a process.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

from mindspore.mint.distributed import TCPStore

from compat.base.adapter import StoreAddress
from compat.base.errors import StoreTimeout, UnsupportedError

# What MindSpore's RuntimeError says when a get found no value within the store's timeout
# (a lost server says "send msg to master failed" instead, passed on unchanged).
_GET_TIMED_OUT = "TCP get operation failed"
# What it says when one attempt to connect (bounded by the store's timeout) failed.
_CONNECT_TIMED_OUT = "while trying to connect"

# The process's MindSpore stores, never released (see the module's docstring): servers by
# (host, port), connections by (host, port, timeout in ms).
_SERVERS: dict[tuple[str, int], TCPStore] = {}
_CONNECTIONS: dict[tuple[str, int, int], TCPStore] = {}
_OWNING = threading.Lock()


class MindSporeStoreClient:
    """One connection to a store (its server too where ``address.is_master``)."""

    def __init__(self, address: StoreAddress) -> None:
        if os.environ.get("MS_ROLE") == "MS_SCHED":
            # MindSpore's TCPStore makes an object with no connection in its scheduler process.
            raise UnsupportedError("compat.TCPStore: MindSpore's scheduler process has no store")
        self.address = address
        self._store = _owned_store(address)

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


def _owned_store(address: StoreAddress) -> TCPStore:
    """The process's MindSpore store for ``address``: the server made once per (host, port), a
    connection shared per (host, port, timeout); each kept until the process exits. The lock
    guards the tables only: connecting may wait for a server another thread is starting."""
    served = (address.host, address.port)
    shared = (*served, int(address.timeout.total_seconds() * 1000))
    if address.is_master:
        with _OWNING:
            if served in _SERVERS:
                raise UnsupportedError(
                    f"compat.TCPStore(is_master=True) on MindSpore: this process already serves "
                    f"a store on {address.host}:{address.port}, which serves until the process "
                    "exits (MindSpore's store cannot be shut down safely); connect to it with "
                    "is_master=False, or serve a new store on another port"
                )
        store = _SERVERS[served] = _connect(address)
        with _OWNING:
            _CONNECTIONS.setdefault(shared, store)
        return store
    with _OWNING:
        found = _CONNECTIONS.get(shared)
    if found is None:
        found = _connect(address)
        with _OWNING:
            found = _CONNECTIONS.setdefault(shared, found)
    return found


def _connect(address: StoreAddress) -> TCPStore:
    """MindSpore's TCPStore at ``address``, owned for the process's life; an attempt to connect
    that times out is repeated until ``address.connect_within`` has passed (MindSpore bounds one
    attempt by the timeout)."""
    within = address.connect_within or address.timeout
    deadline = time.monotonic() + within.total_seconds()
    while True:
        try:
            store = TCPStore(
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
        else:
            # The reference that is never given back: the destructor can then never run.
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(store))
            return store
