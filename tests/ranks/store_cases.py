"""compat's key-value stores across real ranks: torch's own TCPStore on torch, compat's over
MindSpore's TCPStore on MindSpore (mapping_tables/api_store.toml)."""

from __future__ import annotations

import gc
import time
from datetime import timedelta
from typing import Any

import pytest

import compat
from compat.base.net import free_port
from tests.ranks.cases import rank, register, world

# The ports of the stores _shared_store made, latest last.
_PORTS: list[int] = []


def _shared_store(timeout: float = 30.0) -> Any:
    """One store for the job: rank 0 serves it on a port it sends the others."""
    chosen = [free_port() if rank() == 0 else None]
    compat.broadcast_object_list(chosen, src=0)
    _PORTS.append(chosen[0])
    return compat.TCPStore("127.0.0.1", chosen[0], world(), rank() == 0,
                           timedelta(seconds=timeout))  # fmt: skip


def case_store_methods(kit: Any) -> None:
    """set/get/add/wait/multi_get/delete_key and a PrefixStore across ranks; compare_set and
    num_keys on torch (MindSpore's store has neither)."""
    n, me = world(), rank()
    store = _shared_store()
    assert isinstance(store, compat.TCPStore) and isinstance(store, compat.Store)
    store.set(f"value{me}", f"from {me}")
    assert store.add("count", me + 1) >= me + 1
    store.wait([f"value{r}" for r in range(n)])
    assert store.multi_get([f"value{r}" for r in range(n)]) == [
        f"from {r}".encode() for r in range(n)
    ]
    prefixed = compat.PrefixStore("pre", store)
    prefixed.set(f"bytes{me}", b"\x00\xff" + bytes([me]))
    store.wait([f"pre/bytes{r}" for r in range(n)])
    assert prefixed.get(f"bytes{(me + 1) % n}") == b"\x00\xff" + bytes([(me + 1) % n])
    compat.barrier()
    assert store.get("count") == str(n * (n + 1) // 2).encode()
    if kit.framework == "torch":
        assert store.compare_set("cas", "", "first") == b"first"
        compat.barrier()
        assert store.get("cas") == b"first" and store.num_keys() >= 2 * n + 2
    compat.barrier()
    if me == 0:
        assert store.delete_key("value0") and not store.delete_key("value0")
    compat.barrier()  # the server (rank 0's store) lives until every rank is done with it


def case_store_get_times_out(kit: Any) -> None:
    """A get of a key no rank sets raises a RuntimeError naming the key after the timeout set by
    set_timeout; so does wait with its own timeout; the store works afterwards."""
    store = _shared_store()
    # The constructor's timeout also bounds connecting: a short one is set afterwards.
    store.set_timeout(timedelta(seconds=1))
    assert store.timeout == timedelta(seconds=1)
    with pytest.raises(RuntimeError, match=f"missing{rank()}"):
        store.get(f"missing{rank()}")
    with pytest.raises(RuntimeError, match=f"absent{rank()}"):
        store.wait([f"absent{rank()}"], timedelta(seconds=0.5))
    store.set(f"after{rank()}", "ok")
    assert store.get(f"after{rank()}") == b"ok"
    compat.barrier()


def case_store_bad_arguments(kit: Any) -> None:
    """Constructor arguments refused before any connection, naming the parameter."""
    for bad, param in ((dict(port=-1), "port"), (dict(host_name=""), "host_name"),
                       (dict(world_size=0), "world_size"), (dict(is_master="yes"), "is_master"),
                       (dict(timeout="soon"), "timeout")):  # fmt: skip
        arguments: dict[str, Any] = {"host_name": "127.0.0.1", "port": 1, **bad}
        with pytest.raises((TypeError, ValueError), match=param):
            compat.TCPStore(**arguments)
    compat.barrier()


def case_store_refuses_what_mindspore_lacks(kit: Any) -> None:
    """On MindSpore: torch's methods its store lacks, multi_tenant and port=0 are an
    UnsupportedError naming what it has; bad keys and values a TypeError naming them."""
    store = _shared_store()
    for method, args in (("compare_set", ("k", "", "v")), ("num_keys", ()), ("check", (["k"],))):
        with pytest.raises(compat.UnsupportedError, match=f"{method}.*set, get, add, delete_key"):
            getattr(store, method)(*args)
    with pytest.raises(compat.UnsupportedError, match="multi_tenant"):
        compat.TCPStore("127.0.0.1", free_port(), multi_tenant=True)
    with pytest.raises(compat.UnsupportedError, match="port=0"):
        compat.TCPStore("127.0.0.1", 0, is_master=True)
    bad_calls = (
        (lambda: store.set(5, "v"), "key"),
        (lambda: store.set("", "v"), "key"),
        (lambda: store.set("k", 5), "value"),
        (lambda: store.add("k", 1.5), "amount"),
    )
    for call, param in bad_calls:
        with pytest.raises(TypeError, match=param):
            call()
    with pytest.raises(compat.UnsupportedError, match="HashStore"):
        compat.HashStore()
    compat.barrier()


def case_store_outlives_the_servers_object(kit: Any) -> None:
    """On MindSpore: rank 0 drops its serving store while the others wait in a get; the server
    serves on until the process exits (dropping MindSpore's store could crash the process), so
    rank 0 sets the key through a new compat.TCPStore and every waiting get returns it."""
    store = _shared_store(timeout=60)
    store.set(f"joined{rank()}", "yes")
    store.wait([f"joined{r}" for r in range(world())])
    if rank() == 0:
        del store
        gc.collect()
        time.sleep(1)  # the others are in their blocking gets now
        late = compat.TCPStore("127.0.0.1", _PORTS[-1], timeout=timedelta(seconds=30))
        late.set("late", "from a new connection")
    else:
        assert store.get("late") == b"from a new connection"
    compat.barrier()


register("store-methods", case_store_methods, min_world=2)
register("store-get_times_out", case_store_get_times_out, min_world=2)
register("store-bad_arguments", case_store_bad_arguments)
register("store-outlives_the_servers_object", case_store_outlives_the_servers_object,
         min_world=2, frameworks=("mindspore",))  # fmt: skip
register("store-refuses_what_mindspore_lacks", case_store_refuses_what_mindspore_lacks,
         min_world=2, frameworks=("mindspore",))  # fmt: skip
