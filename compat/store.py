"""Key-value stores, as torch.distributed's: ``TCPStore``, ``HashStore``, ``PrefixStore`` and
``Store`` (for annotations and ``isinstance``).

On torch each constructor returns torch's own store, so code that was not ported (and torch's
``init_process_group(store=...)``, and ``compat.init(store=...)``) keeps taking it. On MindSpore
compat's store serves torch's methods over ``mindspore.mint.distributed.TCPStore``: natively
where MindSpore has the method, emulated where ``mapping_tables/api_store.toml`` says so, and
otherwise an UnsupportedError naming what MindSpore lacks. Values come back as ``bytes`` on both.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from datetime import timedelta
from functools import cache
from typing import Any, NoReturn

from compat.base import tables
from compat.base.adapter import Adapter, StoreAddress, StoreClient
from compat.base.errors import UnsupportedError
from compat.core import dispatch, state

_DEFAULT_TIMEOUT = timedelta(seconds=300)
_MINDSPORE_STORE = "mindspore.mint.distributed.TCPStore"


@cache
def _adapter(framework: str) -> Adapter:
    return dispatch.load_adapter(framework)


def _chosen(framework: str | None) -> Adapter:
    """The adapter of ``framework``; None: compat's framework once initialised, else the one
    :func:`compat.init` would choose."""
    current = state.get_current()
    if framework is None and current is not None:
        return _adapter(current.framework)
    return _adapter(dispatch.choose_framework(framework))


class _StoreKind(type):
    """``isinstance(x, compat.TCPStore)`` is true of compat's stores and of the framework's own
    store of that kind (torch's), looked up only in frameworks the program has imported."""

    def __instancecheck__(cls, obj: object) -> bool:
        if type.__instancecheck__(cls, obj):
            return True
        for framework in dispatch.imported():
            native = _adapter(framework).store_class(cls.__name__)
            if native is not None and isinstance(obj, native):
                return True
        return False


class Store(metaclass=_StoreKind):
    """A key-value store: torch's ``torch.distributed.Store`` on torch, compat's on MindSpore.

    Of torch's methods, one MindSpore cannot serve raises :class:`compat.UnsupportedError`
    naming what MindSpore's store has (``mapping_tables/api_store.toml``)."""

    def __getattr__(self, name: str) -> NoReturn:
        if name in _lacking():
            has = ", ".join(tables.family("store")["apis"][_MINDSPORE_STORE]["methods"])
            raise UnsupportedError(
                f"compat.{type(self).__name__}.{name}: MindSpore's store "
                f"({_MINDSPORE_STORE}) has no {name} and compat cannot emulate it; it has {has}"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


@cache
def _lacking() -> frozenset[str]:
    return frozenset(tables.family("store")["apis"][_MINDSPORE_STORE]["lacks"])


def _key(key: object, param: str = "key") -> str:
    if not isinstance(key, str) or not key:
        raise TypeError(f"{param}: expected a non-empty str; got {key!r}")
    return key


def _value(value: object, param: str = "value") -> str | bytes:
    if not isinstance(value, (str, bytes)):
        raise TypeError(f"{param}: expected str or bytes; got {type(value).__name__}")
    return value


def _keys(keys: object, param: str = "keys") -> list[str]:
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
        raise TypeError(f"{param}: expected a list of str; got {type(keys).__name__}")
    return [_key(key, f"{param}[{i}]") for i, key in enumerate(keys)]


def _timeout(timeout: object, param: str = "timeout") -> timedelta:
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        timeout = timedelta(seconds=timeout)
    if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
        raise TypeError(f"{param}: expected a positive timedelta (or seconds); got {timeout!r}")
    return timeout


def _bool(value: object, param: str) -> bool:
    """A bool, or numpy's (torch's bindings take it too)."""
    kind = type(value)
    if not isinstance(value, bool) and (kind.__module__, kind.__name__) not in _NUMPY_BOOLS:
        raise TypeError(f"{param}: expected a bool; got {value!r}")
    return bool(value)


_NUMPY_BOOLS = {("numpy", "bool_"), ("numpy", "bool")}


def _integer(value: object, param: str, least: int, most: int) -> int:
    """An int, or what has ``__index__`` (numpy's: torch's bindings take them), in range."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        number = None
    if number is None or isinstance(value, bool) or not least <= number <= most:
        raise ValueError(f"{param}: expected an int in [{least}, {most}]; got {value!r}")
    return number


def _address(
    host_name: object,
    port: object,
    world_size: object,
    is_master: object,
    timeout: object,
    wait_for_workers: object,
) -> StoreAddress:
    """The constructor's arguments, checked (before any connection) and normalised."""
    if not isinstance(host_name, str) or not host_name:
        raise TypeError(f"host_name: expected a non-empty str; got {host_name!r}")
    return StoreAddress(
        host_name,
        _integer(port, "port", 0, 65535),
        None if world_size is None else _integer(world_size, "world_size", 1, 2**31 - 1),
        _bool(is_master, "is_master"),
        _timeout(timeout),
        _bool(wait_for_workers, "wait_for_workers"),
    )


class TCPStore(Store):
    """``torch.distributed.TCPStore``'s constructor, on either framework.

    torch: returns torch's TCPStore made from these arguments. MindSpore: compat's store over
    ``mindspore.mint.distributed.TCPStore``, which needs no ``compat.init`` first;
    ``multi_tenant=True`` and ``master_listen_fd`` are an UnsupportedError there (MindSpore
    ignores both), ``use_libuv`` (a server implementation choice) is accepted and unused.
    ``port=0`` (torch: any free port, read back from ``.port``) is an UnsupportedError there.
    Dropping MindSpore's store can crash its process, so there a server serves and a connection
    stays open until the process exits (see compat.adapters.mindspore.store).
    ``framework``: as :func:`compat.init` chooses it when None.
    """

    host: str
    port: int

    def __new__(
        cls,
        host_name: str,
        port: int,
        world_size: int | None = None,
        is_master: bool = False,
        timeout: timedelta | float = _DEFAULT_TIMEOUT,
        wait_for_workers: bool = True,
        multi_tenant: bool = False,
        master_listen_fd: int | None = None,
        use_libuv: bool = True,
        *,
        framework: str | None = None,
    ) -> Any:
        address = _address(host_name, port, world_size, is_master, timeout, wait_for_workers)
        extra = (
            _bool(multi_tenant, "multi_tenant"),
            master_listen_fd,
            _bool(use_libuv, "use_libuv"),
        )
        adapter = _chosen(framework)
        if adapter.store_class("TCPStore") is not None:
            fields = (address.host, address.port, address.world_size, address.is_master)
            return adapter.framework_store(
                "TCPStore", (*fields, address.timeout, address.wait_for_workers, *extra)
            )
        _native_only(adapter, multi_tenant, master_listen_fd, address.port)
        store = object.__new__(cls)
        store._open(adapter, address)
        return store

    def __init__(self, *args: object, **kwargs: object) -> None:
        """Made by ``__new__`` (which returns torch's own store on torch)."""

    def _open(self, adapter: Adapter, address: StoreAddress) -> None:
        self._adapter, self._address = adapter, address
        self._clients: dict[timedelta, StoreClient] = {
            address.timeout: adapter.store_client(address)
        }
        self._timeout = address.timeout
        self.host, self.port = address.host, address.port

    def _client(self, timeout: timedelta) -> StoreClient:
        """A connection whose blocking gets wait ``timeout``: MindSpore fixes a connection's
        timeout when it is made, so another timeout is another client connection. It may take
        the store's own timeout to connect: a short one alone fails to connect under load."""
        if timeout not in self._clients:
            address = StoreAddress(self.host, self.port, None, False, timeout, False,
                                   connect_within=max(timeout, self._address.timeout))  # fmt: skip
            self._clients[timeout] = self._adapter.store_client(address)
        return self._clients[timeout]

    def set(self, key: str, value: str | bytes) -> None:
        self._client(self._timeout).set(_key(key), _value(value))

    def get(self, key: str) -> bytes:
        return self._client(self._timeout).get(_key(key))

    def add(self, key: str, amount: int) -> int:
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise TypeError(f"amount: expected an int; got {amount!r}")
        return self._client(self._timeout).add(_key(key), amount)

    def delete_key(self, key: str) -> bool:
        return self._client(self._timeout).delete_key(_key(key))

    def wait(self, keys: Sequence[str], timeout: timedelta | float | None = None) -> None:
        """Emulated: a blocking get of each key, each bounded by ``timeout`` (default the
        store's), through a connection made with that timeout; StoreTimeout on expiry."""
        client = self._client(self._timeout if timeout is None else _timeout(timeout))
        for key in _keys(keys):
            client.get(key)

    def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        """Emulated: a get of each key in turn."""
        client = self._client(self._timeout)
        return [client.get(key) for key in _keys(keys)]

    @property
    def timeout(self) -> timedelta:
        return self._timeout

    def set_timeout(self, timeout: timedelta) -> None:
        """Emulated: later gets go through a connection made with ``timeout``."""
        self._timeout = _timeout(timeout)


def _native_only(adapter: Adapter, multi_tenant: bool, listen_fd: object, port: int) -> None:
    """Refuse what compat's store cannot do, naming the framework's store's limits."""
    if multi_tenant or listen_fd is not None:
        given = "multi_tenant=True" if multi_tenant else f"master_listen_fd={listen_fd!r}"
        raise UnsupportedError(
            f"compat.TCPStore({given}) on {adapter.framework}: {_MINDSPORE_STORE} ignores "
            "multi_tenant and master_listen_fd (one server per TCPStore, bound to port)"
        )
    if port == 0:
        raise UnsupportedError(
            f"compat.TCPStore(port=0) on {adapter.framework}: {_MINDSPORE_STORE} cannot pick a "
            "free port and report it; pass a port (compat.base.net.free_port finds one)"
        )


class HashStore(Store):
    """``torch.distributed.HashStore()``: torch's in-process store, itself. MindSpore has none,
    and compat.init takes no store there: an UnsupportedError."""

    def __new__(cls, *, framework: str | None = None) -> Any:
        adapter = _chosen(framework)
        if adapter.store_class("HashStore") is None:
            raise UnsupportedError(
                f"compat.HashStore on {adapter.framework}: MindSpore has no in-process store, "
                "and compat.init meets through MindSpore's scheduler there (no store=)"
            )
        return adapter.framework_store("HashStore", ())


class PrefixStore(Store):
    """``torch.distributed.PrefixStore(prefix, store)``: every key is ``prefix + "/" + key``
    in ``store``. torch: torch's PrefixStore over torch's store. MindSpore: compat's, over a
    compat store; each method is the underlying store's (emulated or refused alike)."""

    _prefix: str
    _store: Store

    def __new__(cls, prefix: str, store: Store) -> Any:
        if not isinstance(prefix, str):
            raise TypeError(f"prefix: expected a str; got {prefix!r}")
        if not isinstance(store, Store):
            raise TypeError(f"store: expected a compat.Store or torch Store; got {store!r}")
        if not type.__instancecheck__(Store, store):  # the framework's own: torch's
            adapter = next(
                _adapter(name)
                for name in dispatch.imported()
                if isinstance(store, _adapter(name).store_class("Store") or ())
            )
            return adapter.framework_store("PrefixStore", (prefix, store))
        made = object.__new__(cls)
        made._prefix, made._store = prefix, store
        return made

    def __init__(self, *args: object, **kwargs: object) -> None:
        """Made by ``__new__``."""

    def _name(self, key: str) -> str:
        return f"{self._prefix}/{_key(key)}"

    def set(self, key: str, value: str | bytes) -> None:
        self._store.set(self._name(key), value)

    def get(self, key: str) -> bytes:
        got: bytes = self._store.get(self._name(key))
        return got

    def add(self, key: str, amount: int) -> int:
        total: int = self._store.add(self._name(key), amount)
        return total

    def delete_key(self, key: str) -> bool:
        deleted: bool = self._store.delete_key(self._name(key))
        return deleted

    def wait(self, keys: Sequence[str], timeout: timedelta | float | None = None) -> None:
        self._store.wait([self._name(key) for key in _keys(keys)], timeout)

    def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        got: list[bytes] = self._store.multi_get([self._name(key) for key in _keys(keys)])
        return got

    @property
    def timeout(self) -> timedelta:
        value: timedelta = self._store.timeout
        return value

    def set_timeout(self, timeout: timedelta) -> None:
        self._store.set_timeout(timeout)

    @property
    def underlying_store(self) -> Store:
        """The store this one prefixes (torch's PrefixStore has the same attribute)."""
        return self._store
