"""Device placement without devices: the home device each rank decides at init (torch: which CUDA
device; MindSpore: which device id, keeping one the script set), the tensors compat makes going
there, and the group guard. The frameworks' device calls are replaced by recorders and the
``meta`` device stands in for a GPU; the multi-rank checks of the same rules run on Gloo in
tests/ranks/cases.py (a tensor on another device is refused before any communication)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from compat.adapters import torch as torch_adapter

from compat.base.adapter import Rendezvous

LAUNCHER_VARIABLES = (
    "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
    "MPI_LOCALRANKID", "DEVICE_ID", "RANK",
)  # fmt: skip


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("env", "rendezvous", "visible", "expected"),
    [
        ({"LOCAL_RANK": "3"}, Rendezvous(), 4, 3),  # torchrun
        ({"LOCAL_RANK": "1"}, Rendezvous(), 1, 0),  # one visible GPU per rank
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "2"}, Rendezvous(), 4, 2),  # mpirun
        ({"SLURM_LOCALID": "5"}, Rendezvous(), 4, 1),  # srun, more ranks than GPUs on a node
        ({}, Rendezvous(rank=5, world_size=8), 4, 1),  # no launcher: the rank
        ({"RANK": "6"}, Rendezvous(), 4, 2),
        ({"LOCAL_RANK": "0"}, Rendezvous(device_id=3), 4, 3),  # device_id wins
        ({}, Rendezvous(device_id=torch.device("cuda", 2)), 4, 2),
    ],
)
def test_an_nccl_rank_takes_its_device_as_launchers_and_torch_say(
    clean_env: pytest.MonkeyPatch,
    env: dict[str, str],
    rendezvous: Rendezvous,
    visible: int,
    expected: int,
) -> None:
    for name, value in env.items():
        clean_env.setenv(name, value)
    assert torch_adapter.home_index(rendezvous, visible) == expected


@pytest.mark.parametrize(
    ("rendezvous", "visible", "fragments"),
    [
        (Rendezvous(), 0, ["backend:", "'nccl' needs a CUDA device", "CUDA_VISIBLE_DEVICES"]),
        (Rendezvous(device_id=torch.device("cpu")), 2, ["device_id:", "with an index", "cpu"]),
        (Rendezvous(device_id=torch.device("cuda")), 2, ["device_id:", "with an index", "cuda"]),
    ],
)
def test_an_nccl_rank_without_a_usable_device_is_told_why(
    clean_env: pytest.MonkeyPatch, rendezvous: Rendezvous, visible: int, fragments: list[str]
) -> None:
    with pytest.raises(ValueError) as raised:
        torch_adapter.home_index(rendezvous, visible)
    message = str(raised.value)
    assert message.startswith(fragments[0]), message
    assert all(fragment in message for fragment in fragments[1:]), message


def test_nccl_init_binds_the_home_device_and_compat_makes_its_tensors_there(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """init on NCCL with LOCAL_RANK=1 of 2 visible devices: cuda:1 is made current and passed to
    nothing else; the tensors compat makes (pre-flight and object bytes) go to the home device,
    which only a tensor there passes the check of (``meta`` stands in for the GPU)."""
    calls: list[tuple[str, Any]] = []
    clean_env.setenv("LOCAL_RANK", "1")
    clean_env.setenv("RANK", "1")
    clean_env.setenv("WORLD_SIZE", "2")
    clean_env.setattr(torch.cuda, "device_count", lambda: 2)
    clean_env.setattr(torch.cuda, "set_device", lambda device: calls.append(("set", device)))
    clean_env.setattr(torch_adapter.dist, "is_initialized", lambda: False)
    clean_env.setattr(
        torch_adapter.dist, "init_process_group", lambda **kw: calls.append(("init", kw))
    )
    adapter = torch_adapter.TorchAdapter()
    assert adapter.init("nccl", None, Rendezvous()) == "nccl"
    assert calls[0] == ("set", torch.device("cuda", 1))
    assert calls[1] == ("init", {"backend": "nccl", "init_method": "env://"})
    assert adapter.home_device() == "cuda:1"

    adapter._home = torch.device("meta")  # the same code path, on a device this machine has
    assert adapter.bytes_tensor(b"ab").device.type == "meta"
    assert adapter.bytes_tensor(b"").device.type == "meta"
    assert adapter.on_home(torch.empty(2, device="meta"))
    assert not adapter.on_home(torch.empty(2))
    adapter.synchronize()  # nothing queued on meta; on CUDA it waits for the device


def _mindspore() -> Any:
    pytest.importorskip("mindspore")  # installed by make setup: never skipped there
    from compat.adapters import mindspore as ms_adapter

    return ms_adapter


def _mindspore_startup() -> Any:
    _mindspore()
    from compat.adapters.mindspore import startup

    return startup


class _DeviceConf:
    """MindSpore's DeviceManagerConf as a script that called ms.set_device (or did not) leaves
    it."""

    def __init__(self, chosen: tuple[str, int] | None) -> None:
        self.chosen = chosen

    def get_instance(self) -> _DeviceConf:
        return self

    def is_device_enable(self) -> bool:
        return self.chosen is not None

    def get_device_target(self) -> str:
        assert self.chosen is not None
        return self.chosen[0]

    def get_device_id(self) -> int:
        assert self.chosen is not None
        return self.chosen[1]


@pytest.mark.parametrize(
    ("chosen", "target", "device_id", "env", "expected"),
    [
        (None, "Ascend", None, {"DEVICE_ID": "5"}, ("Ascend", 5)),  # msrun's DEVICE_ID
        (None, "Ascend", None, {"LOCAL_RANK": "2"}, ("Ascend", 2)),  # torchrun's
        (None, "GPU", 3, {"DEVICE_ID": "5"}, ("GPU", 3)),  # device_id wins
        (None, "Ascend", None, {}, ("Ascend", None)),  # MindSpore's default
        (None, "CPU", None, {"DEVICE_ID": "5"}, ("CPU", None)),  # no device to choose on CPU
        (("Ascend", 3), "Ascend", None, {"DEVICE_ID": "5"}, None),  # the script's choice stays
        (("Ascend", 3), "Ascend", 3, {}, None),
    ],
)
def test_a_mindspore_rank_keeps_the_device_the_script_set_else_takes_the_launchers(
    clean_env: pytest.MonkeyPatch,
    chosen: tuple[str, int] | None,
    target: str,
    device_id: int | None,
    env: dict[str, str],
    expected: tuple[str, int | None] | None,
) -> None:
    startup = _mindspore_startup()
    calls: list[tuple[str, int | None]] = []
    for name, value in env.items():
        clean_env.setenv(name, value)
    clean_env.setattr(startup, "DeviceManagerConf", _DeviceConf(chosen))
    clean_env.setattr(startup.ms, "set_device", lambda t, i=None: calls.append((t, i)))
    startup.bind_device(target, device_id)
    assert calls == ([] if expected is None else [expected])


@pytest.mark.parametrize(
    ("chosen", "target", "device_id", "fragments"),
    [
        (("GPU", 0), "Ascend", None, ["backend:", "runs on Ascend", "set the device to GPU"]),
        (("Ascend", 3), "Ascend", 1, ["device_id:", "set device 3", "got 1"]),
    ],
)
def test_a_mindspore_device_choice_that_contradicts_the_scripts_is_refused(
    clean_env: pytest.MonkeyPatch,
    chosen: tuple[str, int],
    target: str,
    device_id: int | None,
    fragments: list[str],
) -> None:
    startup = _mindspore_startup()
    clean_env.setattr(startup, "DeviceManagerConf", _DeviceConf(chosen))
    with pytest.raises(ValueError) as raised:
        startup.bind_device(target, device_id)
    message = str(raised.value)
    assert message.startswith(fragments[0]), message
    assert all(fragment in message for fragment in fragments[1:]), message


def test_a_group_the_backend_made_of_other_ranks_is_never_used() -> None:
    """MindSpore: a creation that left a name meaning the world (mint.distributed.new_group's
    "" after a failure) is refused, not used for the group's collectives."""
    _mindspore()
    from compat.adapters.mindspore import adapter

    with pytest.raises(RuntimeError, match=r"^new_group: expected .*'g'.* \[0, 1\]; it has 4"):
        adapter._check_made("g", [0, 1], 4)
    adapter._check_made("g", [0, 1], 2)


def test_the_off_cpu_copy_writes_a_0d_tensor_in_place_and_a_0d_view_through() -> None:
    """The MindSpore adapter's copy for devices without host memory (run here by turning the CPU
    path off): a 0-d tensor of its own must not come to share the source's memory, and a 0-d
    view must write into its parent."""
    ms_adapter = _mindspore()
    import mindspore as ms
    import numpy as np

    adapter = ms_adapter.MindSporeAdapter()
    adapter._on_cpu = False
    for dtype in (ms.float32, ms.bfloat16, ms.int32):
        src = ms.Tensor(np.array(5.0, np.float32)).astype(dtype)
        dst = ms.Tensor(np.array(1.0, np.float32)).astype(dtype)
        adapter.copy_(dst, src)
        dst.copy_(ms.Tensor(np.array(9.0, np.float32)).astype(dtype))
        assert float(src.astype(ms.float32).asnumpy()) == 5.0, dtype  # not shared
        if dtype == ms.bfloat16:
            continue  # CPU has no bfloat16 slice-assignment kernel ("type_id:45 is invalid")
        base = ms.Tensor(np.zeros(3, np.float32)).astype(dtype)
        adapter.copy_(base[1], src)
        assert base.astype(ms.float32).asnumpy().tolist() == [0.0, 5.0, 0.0], dtype


def test_a_tensor_compat_made_over_host_memory_is_read_through_its_own_array() -> None:
    """The MindSpore adapter's tensors over numpy memory (flat views, the window's slots, parts)
    are read through the array they were made over, not a new one each time (3-8 us each), and
    only while their memory is still that array's: after assign_value moved it, the new one."""
    ms_adapter = _mindspore()
    import mindspore as ms
    import numpy as np

    adapter = ms_adapter.MindSporeAdapter()
    user = ms.Tensor(np.arange(8, dtype=np.float32))
    flat = adapter.flat_view(user)
    memory = memoryview(bytearray(256))
    slot = adapter.host_tensor(memory, 64, 8, user)
    parts = adapter.parts(flat, [3, 5])
    for made in (flat, slot, *parts):
        first = adapter._host_view(made)
        assert first is adapter._host_view(made)  # the same array: nothing made again
        assert adapter._host_view(made, bits=True).dtype == np.uint32
    adapter.copy_(slot, flat)
    assert np.frombuffer(memory, np.float32, 8, 64).tolist() == list(range(8))
    adapter.copy_(parts[1], ms.Tensor(np.full(5, -1, np.float32)))
    assert user.asnumpy().tolist() == [0, 1, 2, -1, -1, -1, -1, -1]
    flat.assign_value(ms.Tensor(np.full(8, 7, np.float32)))  # new memory for `flat`
    assert adapter._host_view(flat).tolist() == [7] * 8
    adapter.copy_(flat, ms.Tensor(np.full(8, 9, np.float32)))
    assert flat.asnumpy().tolist() == [9] * 8
    assert user.asnumpy().tolist() == [0, 1, 2, -1, -1, -1, -1, -1]  # no longer its memory
    bits = adapter.flat_view(ms.Tensor(np.ones(4, np.float32)).astype(ms.bfloat16))
    assert adapter._host_view(bits) is None  # numpy has no bfloat16
    assert adapter._host_view(bits, bits=True).dtype == np.uint16


def test_bench_makes_its_buffers_on_the_home_device(clean_env: pytest.MonkeyPatch) -> None:
    """compat bench's native and compat calls share buffers made for the adapter: on the home
    device (``meta`` standing in for a GPU), never the CPU."""
    from compat.tools import bench_cases

    clean_env.setattr(torch_adapter.dist, "get_world_size", lambda: 2)
    clean_env.setattr(torch_adapter.dist, "get_rank", lambda: 0)
    adapter = torch_adapter.TorchAdapter()
    adapter._home = torch.device("meta")
    for op in ("reduce_scatter_tensor", "reduce_scatter", "all_reduce", "all_gather_into_tensor"):
        case = bench_cases.native_case(adapter, op, 4, "float32")
        assert case.input.device.type == "meta", op
        assert case.output is None or case.output.device.type == "meta", op


class _StubBackend:
    def __init__(self, coalesces: bool) -> None:
        self.supports_coalescing = coalesces


class _StubGroup:
    """A process group whose backend on the home device coalesces or not (NCCL or Gloo), and
    whose own send/recv record what they were given."""

    def __init__(self, home: torch.device, coalesces: bool) -> None:
        self.home, self.coalesces, self.calls = home, coalesces, []

    def _get_backend(self, device: torch.device) -> _StubBackend:
        assert device == self.home, device
        return _StubBackend(self.coalesces)

    def send(self, tensors: list[torch.Tensor], peer: int, tag: int) -> str:
        self.calls.append(("send", tensors[0], peer, tag))
        return f"sent to {peer}"

    def recv(self, tensors: list[torch.Tensor], peer: int, tag: int) -> str:
        self.calls.append(("recv", tensors[0], peer, tag))
        return f"received from {peer}"


def test_batch_isend_irecv_coalesces_through_torch_where_the_backend_does(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """A batch goes through torch.distributed.batch_isend_irecv where the group's backend on
    the home device coalesces (NCCL: one group call, which only torch's function makes, and one
    Work for the batch), and op by op to the group's own send and recv, in list order, where it
    does not (Gloo, as torch's function does there): stub groups stand in for both."""
    adapter = torch_adapter.TorchAdapter()
    adapter._peer = lambda group, rank: (group, rank + 10)  # type: ignore[method-assign]
    a, b, c = torch.zeros(2), torch.ones(2), torch.full((2,), 2.0)
    specs = [("irecv", a, 1, 0), ("isend", b, 2, 7), ("isend", c, 1, 0)]

    gloo = _StubGroup(adapter._home, coalesces=False)
    assert adapter.batch_isend_irecv(specs, gloo) == [
        "received from 11", "sent to 12", "sent to 11"
    ]  # fmt: skip
    assert [(kind, tensor is mine, peer, tag) for (kind, tensor, peer, tag), mine in zip(
        gloo.calls, (a, b, c), strict=True
    )] == [("recv", True, 11, 0), ("send", True, 12, 7), ("send", True, 11, 0)]  # fmt: skip

    batches: list[list[Any]] = []
    clean_env.setattr(
        torch_adapter.dist, "P2POp", lambda op, tensor, peer, group, tag: (op, tensor, peer, tag)
    )
    clean_env.setattr(
        torch_adapter.dist, "batch_isend_irecv", lambda ops: (batches.append(ops), ["one"])[1]
    )
    nccl = _StubGroup(adapter._home, coalesces=True)
    assert adapter.batch_isend_irecv(specs, nccl) == ["one"]
    dist = torch_adapter.dist
    assert batches == [[(dist.irecv, a, 1, 0), (dist.isend, b, 2, 7), (dist.isend, c, 1, 0)]]
    assert nccl.calls == []


def test_point_to_point_goes_through_torch_where_groups_are_not_called_directly(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """On a torch release whose process groups compat does not call directly (_DIRECT False:
    no _World.default_pg, for one), send, recv and batch_isend_irecv go through torch's own
    functions, on the world and on a group, and never read the world's group or call a
    group's methods; with _DIRECT, send and recv call the group's own methods."""
    adapter = torch_adapter.TorchAdapter()
    adapter._peer = lambda group, rank: (group, rank + 10)  # type: ignore[method-assign]
    a, b = torch.zeros(2), torch.ones(2)
    group = _StubGroup(adapter._home, coalesces=False)
    through_torch: list[tuple[Any, ...]] = []
    dist = torch_adapter.dist
    clean_env.setattr(
        dist,
        "isend",
        lambda t, peer, group, tag: (through_torch.append(("isend", t, peer, group, tag)), "i")[1],
    )
    clean_env.setattr(
        dist,
        "irecv",
        lambda t, peer, group, tag: (through_torch.append(("irecv", t, peer, group, tag)), "r")[1],
    )
    clean_env.setattr(dist, "P2POp", lambda op, t, peer, group, tag: (op, t, peer, group, tag))
    clean_env.setattr(
        dist, "batch_isend_irecv", lambda ops: (through_torch.append(("batch", ops)), ["b"])[1]
    )

    class NoWorld:  # _World without default_pg: any read of it fails the test
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"read _c10d._world.{name}")

    clean_env.setattr(torch_adapter._c10d, "_world", NoWorld())
    clean_env.setattr(torch_adapter, "_DIRECT", False)
    assert adapter._send(a, 1, None, 0) == "i"
    assert adapter._recv(b, 1, group, 5) == "r"
    assert adapter.batch_isend_irecv([("irecv", a, 1, 0), ("isend", b, 0, 3)], None) == ["b"]
    assert adapter.batch_isend_irecv([("isend", b, 1, 0)], group) == ["b"]
    assert through_torch == [
        ("isend", a, 1, None, 0),
        ("irecv", b, 1, group, 5),
        ("batch", [(dist.irecv, a, 1, None, 0), (dist.isend, b, 0, None, 3)]),
        ("batch", [(dist.isend, b, 1, group, 0)]),
    ]
    assert group.calls == []

    clean_env.setattr(torch_adapter, "_DIRECT", True)
    assert adapter._send(a, 1, group, 0) == "sent to 11"
    assert adapter._recv(b, 0, group, 4) == "received from 10"
    assert [(kind, peer, tag) for kind, _, peer, tag in group.calls] == [
        ("send", 11, 0), ("recv", 10, 4)
    ]  # fmt: skip
    assert len(through_torch) == 4


#: Every adapter collective, sync and async, on torch's fake process group (another C++
#: backend than Gloo) with tensors on the meta device; prints what reached torch's functions.
FAKE_BACKEND_SCRIPT = """
import torch, torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
import compat.adapters.torch as T
from compat.base.types import ReduceOp
called = []
for name in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "scatter", "gather",
             "reduce", "all_to_all_single", "all_to_all"):
    original = getattr(dist, name)
    setattr(dist, name, lambda *a, _n=name, _f=original, **k: (called.append(_n), _f(*a, **k))[1])
for name in ("_all_gather_single", "_reduce_scatter_single"):
    original = getattr(T, name)
    setattr(T, name, lambda *a, _n=name, _f=original, **k: (called.append(_n), _f(*a, **k))[1])
adapter = T.ADAPTER_CLASS()
meta = lambda n: torch.empty(n, device="meta")
for group in (None, dist.new_group([0, 1])):
    for async_op in (False, True):
        results = [
            adapter.all_reduce(meta(4), ReduceOp.SUM, group, async_op),
            adapter.all_gather([meta(4), meta(4)], meta(4), group, async_op),
            adapter.all_gather_into_tensor(meta(8), meta(4), group, async_op),
            adapter.reduce_scatter(meta(4), [meta(4), meta(4)], ReduceOp.SUM, group, async_op),
            adapter.reduce_scatter_tensor(meta(4), meta(8), ReduceOp.SUM, group, async_op),
            adapter.broadcast(meta(4), 1, group, async_op),
            adapter.scatter(meta(4), [meta(4), meta(4)], 0, group, async_op),
            adapter.scatter(meta(4), None, 1, group, async_op),
            adapter.gather(meta(4), [meta(4), meta(4)], 0, group, async_op),
            adapter.gather(meta(4), None, 1, group, async_op),
            adapter.reduce(meta(4), 1, ReduceOp.SUM, group, async_op),
            adapter.all_to_all_single(meta(8), meta(8), [4, 4], [4, 4], group, async_op),
            adapter.all_to_all([meta(4), meta(4)], [meta(4), meta(4)], group, async_op),
        ]
        for result in results:
            assert (result is not None) == async_op, result
            if async_op:
                assert result.wait() is True
print("torch functions called:", called)
"""


def test_the_collectives_call_another_backends_process_group_with_device_tensors(
    tmp_path: Path,
) -> None:
    """The adapter's direct calls of the process group's methods (the path NCCL takes), on
    torch's fake backend with tensors on the meta device standing in for a GPU: every
    collective, sync and async, on the world and on a group torch made, with the root given as
    a global rank, is accepted and returns what torch's function returns, without torch's
    function for the collective being called."""
    from tests.jobs import ROOT

    found = subprocess.run(
        [sys.executable, "-c", FAKE_BACKEND_SCRIPT], capture_output=True, text=True,
        timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert found.returncode == 0, found.stderr[-3000:]
    assert "torch functions called: []" in found.stdout, found.stdout
