"""compat's key-value stores in this process (torch): the types answer for torch's stores, the
constructors check before connecting. Across real ranks, on both frameworks:
tests/ranks/store_cases.py (run by the collective jobs)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

import compat
from compat.base.adapter import StoreAddress
from compat.base.net import free_port

torch_distributed = pytest.importorskip("torch.distributed")


def test_compat_types_answer_for_torch_stores() -> None:
    store = compat.TCPStore("127.0.0.1", free_port(), is_master=True, wait_for_workers=False,
                            timeout=timedelta(seconds=10), framework="torch")  # fmt: skip
    assert type(store) is torch_distributed.TCPStore
    assert isinstance(store, compat.TCPStore) and isinstance(store, compat.Store)
    assert not isinstance(store, compat.PrefixStore) and not isinstance(object(), compat.Store)
    prefixed = compat.PrefixStore("job", store)
    assert type(prefixed) is torch_distributed.PrefixStore
    prefixed.set("key", "value")
    assert store.get("job/key") == b"value"


def test_hash_store() -> None:
    store = compat.HashStore(framework="torch")
    assert type(store) is torch_distributed.HashStore and isinstance(store, compat.HashStore)
    store.set("key", b"\x00")
    assert store.get("key") == b"\x00"


@pytest.mark.parametrize(
    ("bad", "param"),
    [
        ({"host_name": 5}, "host_name"),
        ({"port": 70000}, "port"),
        ({"port": True}, "port"),
        ({"world_size": -1}, "world_size"),
        ({"is_master": 1}, "is_master"),
        ({"timeout": timedelta(0)}, "timeout"),
        ({"wait_for_workers": None}, "wait_for_workers"),
        ({"use_libuv": "yes"}, "use_libuv"),
    ],
)
def test_bad_arguments_refused_before_connecting(bad: dict[str, Any], param: str) -> None:
    # A master on a port nobody serves would connect or bind; the check comes first.
    arguments: dict[str, Any] = {"host_name": "127.0.0.1", "port": free_port(), **bad}
    with pytest.raises((TypeError, ValueError), match=param):
        compat.TCPStore(**arguments, framework="torch")


def test_prefix_store_takes_only_stores() -> None:
    with pytest.raises(TypeError, match="store"):
        compat.PrefixStore("job", {"a": 1})
    with pytest.raises(TypeError, match="prefix"):
        compat.PrefixStore(3, compat.HashStore(framework="torch"))


def test_mindspore_connection_with_a_short_timeout_gets_the_stores_time_to_connect() -> None:
    """MindSpore bounds connecting by a connection's get timeout: the connection compat opens
    for set_timeout/wait(timeout=) retries until the store's own timeout, so a server that
    answers later than the short timeout (a loaded machine) is still reached."""
    pytest.importorskip("mindspore")
    from compat.adapters.mindspore.store import MindSporeStoreClient

    port, servers = free_port(), []

    def serve_late() -> None:
        time.sleep(1.5)
        master = StoreAddress("127.0.0.1", port, None, True, timedelta(seconds=30), False)
        servers.append(MindSporeStoreClient(master))

    server = threading.Thread(target=serve_late)
    server.start()
    short = timedelta(seconds=0.5)
    client = MindSporeStoreClient(
        StoreAddress("127.0.0.1", port, None, False, short, False, timedelta(seconds=30))
    )
    server.join()
    client.set("key", b"\x00value")
    assert servers[0].get("key") == b"\x00value"
    with pytest.raises(compat.StoreTimeout, match="'absent'"):
        client.get("absent")
    with pytest.raises(RuntimeError, match="while trying to connect"):  # alone: one attempt
        MindSporeStoreClient(StoreAddress("127.0.0.1", free_port(), None, False, short, False))


def test_numpy_integers_and_bools_are_taken_as_torchs_bindings_take_them() -> None:
    """``is_master=rank == 0`` with a numpy rank, a numpy port: torch's TCPStore takes both,
    so code ported to compat.TCPStore keeps working."""
    np = pytest.importorskip("numpy")
    rank = np.int64(0)
    port, world, timeout = np.int64(free_port()), np.int64(1), timedelta(seconds=10)
    store = compat.TCPStore("127.0.0.1", port, world, rank == 0, timeout, False, framework="torch")
    assert type(store) is torch_distributed.TCPStore
    store.set("key", "value")
    assert store.get("key") == b"value"
    with pytest.raises(TypeError, match="is_master"):
        compat.TCPStore("127.0.0.1", free_port(), is_master=1, framework="torch")
