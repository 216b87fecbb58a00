"""compat's key-value stores in this process (torch): the types answer for torch's stores, the
constructors check before connecting. Across real ranks, on both frameworks:
tests/ranks/store_cases.py (run by the collective jobs)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import compat
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
