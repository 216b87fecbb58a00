"""compat where ported torch code expects torch's behaviour (issue 55): its types (Work's future,
batch_isend_irecv's list, the framework's own groups, get_backend(group), all_gather with parts
of any shape: tests/ranks/torch_types_cases.py on real ranks), every backend string torch
accepts (several devices, backends compat has no table for), and teardown as torch's (compat's
destroy_process_group, and a teardown done by code compat does not own). Each program runs
under a hard timeout."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import compat
from compat.base.adapter import device_backend
from compat.base.types import Future, Work
from compat.core import capabilities
from tests.jobs import BACKGROUND, collective_job
from tests.processes import run_bounded
from tests.test_interop import _environment


def _types_cases(framework: str, world: int) -> tuple[str, ...]:
    return tuple(
        name for name in collective_job(framework, world).cases if name.startswith("torch_types")
    )


# The cases run in the collective job of their framework and size (tests/jobs.py), which
# tests/test_collectives.py reports case by case; this test reads that same job for them.
@pytest.mark.parametrize(
    ("framework", "world"),
    [
        pytest.param(framework, world, marks=pytest.mark.job(collective_job(framework, world)))
        for framework, world in (("torch", 2), ("torch", 3), ("mindspore", 2))
    ],
)
def test_types_answer_as_torchs_on_real_ranks(framework: str, world: int) -> None:
    names = _types_cases(framework, world)
    # every case of the module that this framework and size run (torch's own ones on torch)
    assert len(names) == (9 if framework == "torch" else 7), names
    result = BACKGROUND.result(collective_job(framework, world))
    failures = [failure for name in names if (failure := result.failure(name)) is not None]
    assert not failures, "\n\n".join(failures)


def _run(tmp_path: Path, source: str, world: int = 2) -> str:
    script = tmp_path / "script.py"
    script.write_text(source)
    result = run_bounded(
        [sys.executable, "-m", "compat", "launch", "-n", str(world), "--framework", "torch",
         "--timeout", "150", str(script)],
        timeout=200,
        env=_environment(),
        cwd=str(tmp_path),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert output.count("OK") == world, output[-4000:]
    return output


MULTI_DEVICE = """
import os
import torch
import torch.distributed as dist
import compat

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
# A backend per device, as trainers pass it; on this CPU-only torch (no NCCL built in) Gloo
# serves both. Made by torch, then used by compat without compat.init (adoption).
dist.init_process_group(backend="cuda:gloo,cpu:gloo")
compat.barrier()
x = torch.full((3,), float(rank + 1))
compat.all_reduce(x)
assert x.tolist() == [world * (world + 1) / 2] * 3, x
assert compat.get_backend() == dist.get_backend() == "cuda:gloo,cpu:gloo", compat.get_backend()
part = compat.reduce_scatter_tensor(torch.arange(2.0 * world) * (rank + 1))
assert part.tolist() == [sum(range(1, world + 1)) * (2.0 * rank + i) for i in range(2)], part
group = compat.new_group(list(range(world)), backend="gloo")
assert compat.get_backend(group) == "gloo"
compat.destroy()
assert dist.is_initialized()  # adopted: left alive
dist.barrier()
dist.destroy_process_group()

# compat.init takes the same strings and hands them to torch as they are.
compat.init("torch", backend="cpu:gloo,cuda:gloo", init_method="file://" + os.path.abspath("s1"),
            rank=rank, world_size=world)
assert compat.get_backend() == "cpu:gloo,cuda:gloo"
y = torch.ones(2)
compat.all_reduce(y)
assert y.tolist() == [float(world)] * 2, y
compat.destroy()
assert not dist.is_initialized()
# NCCL is not built into this torch: torch's own error, unchanged (never compat's refusal).
# Each rank alone (a world of one): with peers, one rank's NCCL error could close Gloo's
# connections while another still made its Gloo half ("Connection closed by peer").
try:
    where = "file://" + os.path.abspath(f"s2-{rank}")
    compat.init("torch", backend="cpu:gloo,cuda:nccl", init_method=where, rank=0, world_size=1)
except RuntimeError as error:
    assert "NCCL" in str(error), error
else:
    raise AssertionError("torch without NCCL took cuda:nccl")
assert not compat.is_initialized()
print(f"rank {rank} OK", flush=True)
"""


def test_backend_strings_naming_several_devices(tmp_path: Path) -> None:
    _run(tmp_path, MULTI_DEVICE)


UNVERIFIED = """
import os
from datetime import timedelta
import torch
import torch.distributed as dist
import compat
from compat.core import state

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

# A backend compat has no table for, registered with torch as torch_npu or Intel's
# oneccl_bindings register theirs; here it is Gloo under another name, so it really runs.
def make_ccl(store, rank, size, timeout):
    return dist.ProcessGroupGloo(store, rank, size, timeout)

dist.Backend.register_backend("ccl", make_ccl, devices=["cpu"])
compat.init("torch", backend="ccl")
assert compat.get_backend() == "ccl"
assert state.current().capability_key == "unverified:torch"
x = torch.full((4,), float(rank + 1))
compat.all_reduce(x, op="max")
assert x.tolist() == [float(world)] * 4, x
outs = [torch.full((2,), -7.0) for _ in range(world)]
compat.all_gather(outs, torch.full((2,), float(rank)))
assert [o.tolist() for o in outs] == [[float(r)] * 2 for r in range(world)], outs
work = compat.all_reduce(torch.ones(3), async_op=True)
assert work.wait(timedelta(seconds=60))
compat.barrier()
# torch_npu's hccl is not installed here: torch's own error for new_group, unchanged.
try:
    compat.new_group(list(range(world)), backend="hccl")
except ValueError as error:
    assert not str(error).startswith("backend:"), f"compat refused it: {error}"
except (AssertionError, RuntimeError) as error:
    pass
else:
    raise AssertionError("new_group(backend='hccl') without torch_npu")
compat.destroy()
# A plugin's backend under a name compat aliases (torch_musa registers "mccl", which compat
# otherwise reads as MindSpore's name for Gloo): the plugin's runs, not Gloo.
made = []
def make_mccl(store, rank, size, timeout):
    made.append(rank)
    return dist.ProcessGroupGloo(store, rank, size, timeout)

dist.Backend.register_backend("mccl", make_mccl, devices=["cpu"])
compat.init("torch", backend="mccl", init_method="file://" + os.path.abspath("mccl_store"),
            rank=rank, world_size=world)
assert compat.get_backend() == "mccl" and made == [rank], (compat.get_backend(), made)
x = torch.full((2,), float(rank + 1))
compat.all_reduce(x)
assert x.tolist() == [world * (world + 1) / 2] * 2, x
compat.destroy()
try:
    compat.init("torch", backend="mpi")
except RuntimeError as error:
    assert "MPI" in str(error), error
else:
    raise AssertionError("torch without MPI took mpi")
print(f"rank {rank} OK", flush=True)
"""


def test_a_backend_compat_has_no_table_for_runs_natively(tmp_path: Path) -> None:
    _run(tmp_path, UNVERIFIED)


TEARDOWN = """
import gc
import os
import torch
import torch.distributed as dist
import compat

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
store = lambda name: "file://" + os.path.abspath(name)

def total(expected):
    x = torch.full((2,), float(rank + 1))
    compat.all_reduce(x)
    assert x.tolist() == [expected] * 2, x

# 1. torch made the group, compat adopted it: compat.destroy_process_group() ends it, as
#    torch's destroy_process_group() would.
dist.init_process_group("gloo", init_method=store("a"), rank=rank, world_size=world)
total(world * (world + 1) / 2)
compat.destroy_process_group()
assert not dist.is_initialized() and not compat.is_initialized()

# 2. compat made it, code compat does not own ends it with torch's function: compat notices.
compat.init("torch", backend="gloo", init_method=store("b"), rank=rank, world_size=world)
total(world * (world + 1) / 2)
compat.barrier()
dist.destroy_process_group()
assert not compat.is_initialized()
try:
    compat.get_rank()
except compat.NotInitializedError:
    pass
else:
    raise AssertionError("compat answered for a process group torch destroyed")
compat.init("torch", backend="gloo", init_method=store("c"), rank=rank, world_size=world)
total(world * (world + 1) / 2)
compat.barrier()

# 3. ... and a group torch makes afterwards is adopted again, by the next query or collective.
dist.destroy_process_group()
dist.init_process_group("gloo", init_method=store("d"), rank=rank, world_size=world)
assert compat.get_world_size() == world
total(world * (world + 1) / 2)
compat.barrier()
dist.destroy_process_group()
dist.init_process_group("gloo", init_method=store("e"), rank=rank, world_size=world)
total(world * (world + 1) / 2)  # a collective first
compat.barrier()
compat.destroy_process_group()
assert not dist.is_initialized()
print(f"rank {rank} OK", flush=True)
"""


@pytest.mark.parametrize("world", [2, 3])
def test_teardown_as_torchs(tmp_path: Path, world: int) -> None:
    _run(tmp_path, TEARDOWN, world)


# -- compat's own logic, in addition to the ranks above ---------------------------------------


DDP_HOOK = """
import os
import torch
import torch.distributed as dist
import compat

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo")


# A communication hook as a ported trainer has it: compat's async all_reduce, whose future
# DDP's reducer takes only if it is torch's (and waits for in C++).
def averaging_hook(process_group, bucket):
    group = process_group if process_group is not None else compat.framework_group()
    buffer = bucket.buffer().div_(group.size())
    future = compat.all_reduce(buffer, group=group, async_op=True).get_future()
    return future.then(lambda fut: fut.value()[0])


torch.manual_seed(0)
model = torch.nn.Linear(4, 3)
ddp = torch.nn.parallel.DistributedDataParallel(model)
ddp.register_comm_hook(None, averaging_hook)
for step in range(2):
    ddp.zero_grad()
    ddp(torch.full((2, 4), float(rank + 1 + step))).sum().backward()
    mean = sum(r + 1 + step for r in range(world)) / world
    assert torch.allclose(model.weight.grad, torch.full((3, 4), 2.0 * mean)), model.weight.grad
    assert torch.allclose(model.bias.grad, torch.full((3,), 2.0)), model.bias.grad

# The caller waits for a Work beside the thread that completes its torch future.
x = torch.full((5,), float(rank + 1))
work = compat.all_reduce(x, async_op=True)
future = work.get_future()
assert isinstance(future, torch.futures.Future), type(future)
assert work.wait() is True and work.is_completed()
assert future.wait()[0].tolist() == [world * (world + 1) / 2] * 5, future.value()
dist.destroy_process_group()
print(f"rank {rank} OK", flush=True)
"""


@pytest.mark.parametrize("world", [2, 3])
def test_a_ddp_communication_hook_returns_compats_future(tmp_path: Path, world: int) -> None:
    """flash-attention's fp16_compress_hook ported: ``compat.all_reduce(..., async_op=True)
    .get_future()`` returned compat's Future where compat ran the collective itself (shared
    memory), and DDP's reducer raised on every backward ("Unable to cast ... Future")."""
    _run(tmp_path, DDP_HOOK, world)


def test_the_backend_of_this_processs_device() -> None:
    assert device_backend("cpu:gloo,cuda:nccl", set()) == "gloo"
    assert device_backend("cuda:nccl,cpu:gloo", set()) == "gloo"
    assert device_backend("cuda:nccl,cpu:gloo", {"cuda"}) == "nccl"
    assert device_backend("NCCL", {"cuda"}) == "nccl"
    assert capabilities.backend_key("torch", "gloo") == "gloo"
    assert capabilities.backend_key("torch", "ccl") == "unverified:torch"
    entry = capabilities.capability_entry("unverified:torch")
    assert {op["impl"] for op in entry["ops"].values()} == {"native"}
    assert capabilities.resolve("unverified:torch", "reduce_scatter", "float32", 1 << 20) == (
        "native"
    )


class _Failing:
    """A pending handle whose wait raises, as a native one does when a peer is gone."""

    def wait(self, timeout: object = None) -> None:
        raise RuntimeError("Connection reset by peer")

    def is_completed(self) -> bool:
        return True


def test_a_failed_works_exception_and_future() -> None:
    work = Work([_Failing()])
    with pytest.raises(RuntimeError, match="reset"):
        work.wait()
    assert isinstance(work.exception(), RuntimeError)
    future = Work([_Failing()]).get_future()
    chained = future.then(lambda fut: fut.value())
    with pytest.raises(RuntimeError, match="reset"):
        chained.wait()
    with pytest.raises(RuntimeError, match="reset"):
        future.value()


def test_a_future_of_its_own() -> None:
    future = compat.Future()
    seen: list[object] = []
    future.add_done_callback(lambda fut: seen.append(fut.value()))
    doubled = future.then(lambda fut: fut.value() * 2)
    assert not future.done() and not doubled.done()
    with pytest.raises(RuntimeError, match="not completed"):
        future.value()
    future.set_result(21)
    assert seen == [21] and doubled.wait() == 42
    assert Future is compat.Future


def test_compat_info_says_other_backends_are_not_verified() -> None:
    result = run_bounded([sys.executable, "-m", "compat", "info"], timeout=120)
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "other backends: any other the framework takes" in said, result.stdout
    assert "ccl" in said and "runs natively" in said and "not verified" in said, result.stdout


def test_is_backend_available_asks_the_framework() -> None:
    import torch.distributed as dist

    assert compat.is_backend_available("gloo") is dist.is_gloo_available()
    assert compat.is_backend_available("nccl") is dist.is_nccl_available()
    assert compat.is_backend_available("mpi") is dist.is_mpi_available()
    with pytest.raises(TypeError, match=r"^backend:"):
        compat.is_backend_available(3)  # type: ignore[arg-type]
