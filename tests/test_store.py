"""compat's key-value stores in this process (torch): the types answer for torch's stores, the
constructors check before connecting. Across real ranks, on both frameworks:
tests/ranks/store_cases.py (run by the collective jobs)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

import compat
from compat.base import net
from compat.base.adapter import StoreAddress
from compat.base.environment import environment
from compat.base.net import free_port
from tests.jobs import BACKGROUND, CommandSpec

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


# MindSpore's store, dropped, could SIGSEGV its process (its destructor races the connection's
# receive thread); compat never lets that destructor run. Each program runs in its own process,
# with the fault handler on, so a crash is seen as a signal and its stack is in the output.
STORES_MADE_AND_DROPPED = """
import gc
from datetime import timedelta
import compat
from compat.base.net import free_port
for round in range(40):
    port = free_port()
    server = compat.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                             timeout=timedelta(seconds=30), framework="mindspore")
    clients = [compat.TCPStore("127.0.0.1", port, timeout=timedelta(seconds=30),
                               framework="mindspore") for _ in range(6)]
    for index, client in enumerate(clients):
        client.set(f"key{index}", str(round))
        client.add("count", 1)
    assert server.get("key5") == str(round).encode() and server.get("count") == b"6"
    if round % 2:
        del server
        gc.collect()
    while clients:
        clients.pop()
        gc.collect()
print("dropped 40 stores")
"""


def _python(program: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", program, *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, "GLOG_v": "3"},
    )  # fmt: skip


#: One process that runs on its own for a while: in the background queue (tests/jobs.py).
STORES_DROPPED_RUN = CommandSpec(
    (sys.executable, "-X", "faulthandler", "-c", STORES_MADE_AND_DROPPED),
    timeout=240,
    env=tuple({**environment(), "GLOG_v": "3"}.items()),
)


@pytest.mark.job(STORES_DROPPED_RUN)
def test_mindspore_stores_dropped_again_and_again_never_crash_the_process() -> None:
    """A server and six connections made and dropped 40 times in one process, servers dropped
    before their connections and after: the process ends normally (it died of SIGSEGV before)."""
    pytest.importorskip("mindspore")
    done = BACKGROUND.result(STORES_DROPPED_RUN)
    assert (done.returncode, done.stdout.strip()) == (0, "dropped 40 stores"), done.stderr[-3000:]


def test_mindspore_store_is_refused_a_second_server_on_a_port_this_process_serves() -> None:
    pytest.importorskip("mindspore")
    port, timeout = free_port(), timedelta(seconds=30)
    first = compat.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                            timeout=timeout, framework="mindspore")  # fmt: skip
    first.set("key", "value")
    del first
    with pytest.raises(compat.UnsupportedError, match=f"already serves a store on .*:{port}"):
        compat.TCPStore("127.0.0.1", port, is_master=True, framework="mindspore")
    # The dropped server still serves (until the process exits): a connection reads it.
    client = compat.TCPStore("127.0.0.1", port, timeout=timeout, framework="mindspore")
    assert client.get("key") == b"value"


SERVER_LEAVES = """
import sys, time
from datetime import timedelta
import compat
port = int(sys.argv[1])
store = compat.TCPStore("127.0.0.1", port, world_size=2, is_master=True,
                        timeout=timedelta(seconds=60), framework="mindspore")
store.wait(["client waits"])
time.sleep(1)  # the client is in its blocking get now
print("server leaves", flush=True)
"""

CLIENT_WAITS = """
import sys, time
from datetime import timedelta
import compat
store = compat.TCPStore("127.0.0.1", int(sys.argv[1]), timeout=timedelta(seconds=60),
                        framework="mindspore")
store.set_timeout(timedelta(seconds=8))
store.set("client waits", "yes")
began = time.monotonic()
try:
    store.get("never set")
except RuntimeError as error:
    print(f"{type(error).__name__} after {time.monotonic() - began:.0f} s: {error}")
"""


def test_mindspore_server_process_leaving_first_ends_a_waiting_get_with_an_error() -> None:
    """The serving process exits while another waits in a get: the server's process exits
    normally (no destructor runs at its exit) and the waiting get ends with a RuntimeError
    (compat.StoreTimeout at the latest at its timeout), never a crash."""
    pytest.importorskip("mindspore")
    port = str(free_port())
    with subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", SERVER_LEAVES, port],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "GLOG_v": "3"},
    ) as server:  # fmt: skip
        client = _python(CLIENT_WAITS, port)
        out, err = server.communicate(timeout=120)
    assert (server.returncode, out.strip()) == (0, "server leaves"), err[-3000:]
    assert client.returncode == 0, client.stderr[-3000:]
    assert client.stdout.startswith(("StoreTimeout after", "RuntimeError after")), client.stdout
    assert float(client.stdout.split()[2]) < 30, client.stdout


def test_a_free_port_and_a_socket_that_holds_one() -> None:
    """torch elastic's port helpers: compat.get_free_port() gives a port a server can bind
    (then a client connect to); compat.get_socket_with_port() a listening socket whose port a
    client reaches and no one else can bind until it is closed."""
    port = compat.get_free_port()
    assert isinstance(port, int) and 0 < port < 65536
    with socket.create_server(("127.0.0.1", port)), socket.create_connection(("127.0.0.1", port)):
        pass
    with socket.create_server(("127.0.0.1", 0)) as loopback:  # held on one interface only
        assert not net._bindable(loopback.getsockname()[1])
    held = compat.get_socket_with_port()
    host, taken = held.getsockname()[:2]
    with socket.create_connection((host, taken)):
        pass
    with pytest.raises(OSError), socket.socket(held.family) as other:
        other.bind((host, taken))
    held.close()
    with socket.socket(held.family) as again:
        again.bind((host, taken))
