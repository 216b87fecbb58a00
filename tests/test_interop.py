"""compat in programs that start themselves the way PyTorch programs do: a script that calls
``torch.distributed.init_process_group`` (or ``mindspore.communication.init()``) itself and then
compat, with or without ``compat.init`` (adoption, on first use too), one started by
``torch.multiprocessing.spawn`` with ``init_method="tcp://..."`` (torch; MindSpore's:
tests/test_launch_styles.py), and torchrun starting a torch or MindSpore script through
``compat.init`` with torch's ``rank=-1, world_size=-1`` defaults (the framework the script
imported, with none named). Both pass the other
framework's name for the CPU backend on one of the frameworks (``"mccl"`` on torch, ``"gloo"``
on MindSpore: ``backend_aliases``). Each runs under a hard timeout."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from compat.base.net import free_port
from tests.processes import run_bounded

ROOT = Path(__file__).resolve().parent.parent

#: Variables a launcher sets; the no-launcher tests start without any of them.
LAUNCHER_VARIABLES = (
    "COMPAT_FRAMEWORK", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM", "MS_NODE_ID", "RANK_ID",
    "TORCHELASTIC_RUN_ID",
)  # fmt: skip


def _environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in LAUNCHER_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.setdefault("GLOG_v", "3")
    return env


# The same checks on both frameworks: a collective in both reduce_scatter styles and an average,
# every value known exactly.
CHECKS = """
def check(framework, rank, world):
    import numpy as np
    import compat

    assert compat.get_rank() == rank and compat.get_world_size() == world, (
        compat.get_rank(), compat.get_world_size())
    if framework == "torch":
        import torch
        make = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float32))
        read = lambda t: t.numpy()
    else:
        import mindspore as ms
        make = lambda a: ms.Tensor(np.asarray(a, dtype=np.float32))
        read = lambda t: t.asnumpy()
    x = make(np.full(4, rank + 1.0))
    compat.all_reduce(x, op="avg")
    assert np.allclose(read(x), (world + 1) / 2), read(x)
    full = np.arange(2 * world * 3, dtype=np.float32).reshape(2 * world, 3)
    part = compat.reduce_scatter_tensor(make(full * (rank + 1)))
    total = sum(range(1, world + 1))
    assert np.array_equal(read(part), total * full[2 * rank : 2 * rank + 2]), read(part)
    out = make(np.zeros((2, 3)))
    compat.reduce_scatter(out, [make(full[2 * i : 2 * i + 2]) for i in range(world)])
    assert np.array_equal(read(out), world * full[2 * rank : 2 * rank + 2]), read(out)
"""

SPAWN = (
    CHECKS
    + """
import sys


def main(rank, port, framework, world, store_port):
    import compat
    import torch.distributed as dist

    # MindSpore's name for the CPU backend: Gloo on torch (frameworks.toml backend_aliases).
    compat.init(
        framework, "mccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
        group_name="ignored",
    )
    assert compat.get_backend() == "gloo"
    check(framework, rank, world)
    compat.destroy()
    # torch's other way to meet, a store (with rank and world_size), and its options.
    store = dist.TCPStore("127.0.0.1", store_port, world, rank == 0)
    compat.init(framework, compat.Backend.GLOO, store=store, rank=rank, world_size=world,
                pg_options=None)
    check(framework, rank, world)
    compat.destroy()
    print(f"rank {rank} OK", flush=True)


if __name__ == "__main__":
    framework, port, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store_port = int(sys.argv[4])
    import torch.multiprocessing as mp

    mp.spawn(main, args=(port, framework, world, store_port), nprocs=world)
"""
)


def test_a_spawn_style_program_runs_without_a_launcher(tmp_path: Path) -> None:
    """On torch: the backend by MindSpore's name, then a store. MindSpore's spawn-style start
    (torch's arguments it refuses, its scheduler at destroy) is
    tests/test_launch_styles.py::test_spawn_style_job_with_default_threads_matches_numpy."""
    script = tmp_path / "spawned.py"
    script.write_text(SPAWN)
    result = run_bounded(
        [sys.executable, str(script), "torch", str(free_port()), "2", str(free_port())],
        timeout=240,
        env=_environment(),
        cwd=str(tmp_path),
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "rank 0 OK" in result.stdout and "rank 1 OK" in result.stdout, output[-3000:]


ADOPT = (
    CHECKS
    + """
import gc
import sys

import numpy as np
import torch
import torch.distributed as dist

import compat

# Neither compat nor torch initialised: is_initialized() is False and a query raises.
assert not compat.is_initialized()
try:
    compat.get_rank()
except compat.NotInitializedError:
    pass
else:
    raise AssertionError("compat.get_rank() before any process group exists")
assert "mindspore" not in sys.modules, "compat imported a framework the script did not"

dist.init_process_group("gloo")  # an unported module's own init, from the launcher's env://
rank, world = dist.get_rank(), dist.get_world_size()

# Adoption on first use: no compat.init(), as in a file `compat port` rewrote.
assert compat.is_initialized()
assert compat.get_rank() == rank and compat.get_world_size() == world
assert compat.get_framework() == "torch" and compat.get_backend() == "gloo"
x = torch.full((3,), float(rank + 1))
compat.all_reduce(x)
assert np.array_equal(x.numpy(), np.full(3, world * (world + 1) / 2)), x
compat.destroy()
assert dist.is_initialized(), "compat.destroy() must leave an adopted process group alive"
assert compat.is_initialized(), "torch's process group is alive: is_initialized() stays True"
assert compat.get_rank() == rank  # adopted again on first use

compat.destroy()
compat.init()  # explicit: adopts it too
assert compat.get_backend() == "gloo"
check("torch", rank, world)

# torch's groups in compat's calls, compat's groups in torch's calls.
x = torch.full((2,), float(rank + 1))
compat.all_reduce(x, group=dist.group.WORLD)
assert x.tolist() == [world * (world + 1) / 2] * 2, x
pair = dist.new_group([0, world - 1])
y = torch.ones(3)
compat.all_reduce(y, group=pair)
assert y.tolist() == [2.0] * 3, y
assert compat.get_process_group_ranks(pair) == [0, world - 1]
group = compat.new_group([0, world - 1])
z = torch.ones(3)
dist.all_reduce(z, group=group.handle)
assert z.tolist() == [2.0] * 3, z

compat.destroy()
assert dist.is_initialized(), "compat.destroy() must leave an adopted process group alive"
w = torch.ones(1)
dist.all_reduce(w)
assert w.item() == world
# Leave together: a rank tearing Gloo down after its peer has gone can abort at exit
# ("terminate called without an active exception", seen once in 4 runs). The subgroups' objects
# go before the process group, not in the interpreter's own teardown (the abort was seen again
# with the barrier alone, once in about 3 fresh-clone runs).
dist.barrier()
del pair, group
gc.collect()
dist.destroy_process_group()
assert not compat.is_initialized()
print(f"rank {rank} OK", flush=True)
"""
)


def test_compat_adopts_a_process_group_the_script_initialised(tmp_path: Path) -> None:
    script = tmp_path / "adopt.py"
    script.write_text(ADOPT)
    result = run_bounded(
        [sys.executable, "-m", "compat", "launch", "-n", "2", "--framework", "torch",
         "--timeout", "120", str(script)],
        timeout=180,
        env=_environment(),
        cwd=str(tmp_path),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert output.count("OK") == 2, output[-3000:]


TORCHRUN = (
    CHECKS
    + """
import os
import sys

import compat

framework = sys.argv[1]
__import__(framework)  # the script's one framework, which compat runs on under torchrun too
# torchrun's MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE (no msrun on MindSpore); rank=-1 and
# world_size=-1 are torch's defaults, "not given", as a ported init_process_group passes them;
# so is its backend="gloo", which is MCCL on MindSpore (frameworks.toml backend_aliases).
compat.init(backend="gloo", init_method="env://", rank=-1, world_size=-1)
assert compat.get_backend() == {"torch": "gloo", "mindspore": "mccl"}[framework]
check(framework, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
compat.destroy()
print(f"rank {os.environ['RANK']} OK", flush=True)
"""
)


# The MindSpore run (its scheduler waits out the torchrun workers' exit: about half a minute)
# is under make test-long; torch's stays in make test.
@pytest.mark.parametrize("framework", ["torch", pytest.param("mindspore", marks=pytest.mark.long)])
def test_torchrun_starts_a_job_with_torch_defaults(framework: str, tmp_path: Path) -> None:
    script = tmp_path / "torchrun_job.py"
    script.write_text(textwrap.dedent(TORCHRUN))
    torchrun = Path(sys.executable).with_name("torchrun")
    result = run_bounded(
        [str(torchrun), "--nproc-per-node", "2", "--master-port", str(free_port()), str(script),
         framework],
        timeout=240,
        env=_environment(),
        cwd=str(tmp_path),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "rank 0 OK" in output and "rank 1 OK" in output, output[-3000:]


ADOPT_MINDSPORE = (
    CHECKS
    + """
import sys

import mindspore as ms
import mindspore.communication
import mindspore.mint.distributed as dist
import numpy as np

import compat

ms.set_device("CPU")
assert not compat.is_initialized()
try:
    compat.get_world_size()
except compat.NotInitializedError:
    pass
else:
    raise AssertionError("compat.get_world_size() before any process group exists")
assert "torch" not in sys.modules, "compat imported a framework the script did not"

mindspore.communication.init()  # an unported module's own init, from the launcher's MS_* env
rank, world = mindspore.communication.get_rank(), mindspore.communication.get_group_size()

# Adoption on first use: no compat.init().
assert compat.is_initialized()
assert compat.get_rank() == rank and compat.get_world_size() == world
assert compat.get_framework() == "mindspore" and compat.get_backend() == "mccl"
check("mindspore", rank, world)
parts = compat.autograd.all_gather_tuple(ms.Tensor(np.float32(rank)))
assert [float(p.asnumpy()) for p in parts] == list(range(world)), parts
compat.destroy()
assert compat.is_initialized(), "MindSpore's communication is alive: is_initialized() stays True"
t = ms.Tensor(np.ones(2, np.float32))
dist.all_reduce(t)  # compat.destroy() left the adopted communication alive
assert t.asnumpy().tolist() == [world] * 2, t
y = ms.Tensor(np.full(2, rank + 1.0, np.float32))
compat.all_reduce(y)  # adopted again on first use
assert y.asnumpy().tolist() == [world * (world + 1) / 2] * 2, y
# Leave together: an MCCL send is acknowledged by its receiver's server thread.
compat.barrier()
print(f"rank {rank} OK", flush=True)
"""
)


def test_compat_adopts_mindspore_communication_on_first_use(tmp_path: Path) -> None:
    script = tmp_path / "adopt_ms.py"
    script.write_text(ADOPT_MINDSPORE)
    result = run_bounded(
        [sys.executable, "-m", "compat", "launch", "-n", "2", "--framework", "mindspore",
         "--timeout", "180", str(script)],
        timeout=240,
        env=_environment(),
        cwd=str(tmp_path),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert output.count("OK") == 2, output[-3000:]


NOTHING_IMPORTED = """
import sys

import compat

assert not compat.is_initialized()
try:
    compat.all_reduce(object())
except compat.NotInitializedError as error:
    assert "compat.init()" in str(error), error
else:
    raise AssertionError("a collective without any process group")
imported = sorted({"torch", "mindspore"} & set(sys.modules))
assert not imported, f"compat imported {imported} to ask whether they are initialised"
print("OK", flush=True)
"""


def test_no_process_group_anywhere_is_not_initialized(tmp_path: Path) -> None:
    result = run_bounded(
        [sys.executable, "-c", NOTHING_IMPORTED], timeout=60, env=_environment(), cwd=str(tmp_path)
    )
    assert result.returncode == 0 and "OK" in result.stdout, result.stdout + result.stderr


# An RL trainer's weight sync (xtuner's, OpenRLHF's): processes of separate worlds join one torch
# group through _new_process_group_helper and a global-rank map of their own ({i: i}). Here the
# trainers' world has 2 ranks and the rollout's 1: trainer 0 is rank 0 of the group, whose ranks
# fit in its world, and the rollout, global rank 0 of its world, is rank 1 of it. compat's calls
# on that group must be the backend's on every member, as torch's are.
FOREIGN_GROUP_HELPERS = """
import inspect
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

import compat

SENTINEL = -7.0


def inside(shape):
    # a view in the middle of a sentinel-filled base, and the base
    base = torch.full((int(np.prod(shape)) + 4,), SENTINEL)
    return base[2:-2].view(shape), base


def whole(base, expected):
    assert np.array_equal(base[:2].numpy(), [SENTINEL] * 2), base
    assert np.array_equal(base[-2:].numpy(), [SENTINEL] * 2), base
    assert np.array_equal(base[2:-2].numpy(), np.ravel(expected)), (base, expected)


def foreign_group(index, world, port):
    timeout = c10d.default_pg_timeout
    store, _, _ = next(c10d.rendezvous(f"tcp://127.0.0.1:{port}", index, world, timeout=timeout))
    store = dist.PrefixStore("weight_sync", store)
    options = "backend_options" if "backend_options" in inspect.signature(
        c10d._new_process_group_helper).parameters else "pg_options"
    group, _ = c10d._new_process_group_helper(
        world, index, [], dist.Backend("gloo"), store, group_name="weight_sync",
        timeout=timeout, **{options: None})
    c10d._world.pg_group_ranks[group] = {i: i for i in range(world)}
    return group


def start(process, ports, leaver):
    # Processes 0 and 1 are a trainer world (checked on compat's own algorithms), process 2 a
    # rollout world of one; the trainer `leaver` leaves at once. Whether this is a trainer, or
    # None where it left.
    trainer = process < 2
    compat.init("torch", "gloo", init_method=f"tcp://127.0.0.1:{ports[1 if trainer else 2]}",
                rank=process if trainer else 0, world_size=2 if trainer else 1)
    if trainer:
        x = torch.ones(2)
        compat.all_reduce(x)
        assert x.tolist() == [2.0, 2.0], x
    if process != leaver:
        return trainer
    compat.barrier()  # the trainers leave together
    compat.destroy()
    print(f"process {process} OK", flush=True)
    return None


def finish(process, trainer, group):
    compat.barrier(group=group)
    compat.destroy_process_group(group)
    if trainer:
        compat.barrier()
    compat.destroy()
    print(f"process {process} OK", flush=True)
"""

FOREIGN_GROUP = """

def main(process, ports):
    trainer = start(process, ports, leaver=1)
    if trainer is None:
        return
    world, index = 2, 0 if trainer else 1
    group = foreign_group(index, world, ports[0])
    assert group.rank() == index

    out, base = inside((4,))
    out.copy_(torch.full((4,), 5.0) if index == 0 else torch.zeros(4))
    compat.broadcast(out, src=0, group=group)
    whole(base, np.full(4, 5.0))

    out, base = inside((3,))
    out.copy_(torch.full((3,), index + 1.0))
    compat.all_reduce(out, group=group)
    whole(base, np.full(3, 3.0))

    parts = [inside((2,)) for _ in range(world)]
    compat.all_gather([part for part, _ in parts], torch.full((2,), float(index)), group=group)
    for rank, (_, part_base) in enumerate(parts):
        whole(part_base, np.full(2, float(rank)))

    full = np.arange(2 * world, dtype=np.float32)
    out, base = inside((2,))
    compat.reduce_scatter_into(out, torch.from_numpy(full * (index + 1)), group=group)
    whole(base, 3 * full[2 * index : 2 * index + 2])

    out, base = inside((4,))
    compat.all_to_all_single(out, torch.arange(4.0) + 10 * index, group=group)
    whole(base, [2 * index + 10 * rank + i for rank in range(world) for i in range(2)])

    finish(process, trainer, group)


if __name__ == "__main__":
    import torch.multiprocessing as mp

    mp.spawn(main, args=([int(port) for port in sys.argv[1:]],), nprocs=3)
"""


# Rooted calls on such a group: src and dst are global ranks of the group's own map, and this
# process is the root where the group's rank of it is the root's (torch's get_group_rank and
# group.rank()), not where its world rank is the root's number. Here trainer 1 (world rank 1) is
# global rank 0 of the group's map and the rollout (world rank 0 of its world) global rank 1:
# each one's world rank names the other, so a root compared with world ranks is wrong on both.
FOREIGN_GROUP_ROOTED = """

def by(name, root, by_group):
    # the root as a global rank (src/dst) or as a rank of the group (group_src/group_dst)
    return {f"group_{name}" if by_group else name: root}


def rooted(index, group):
    world = 2
    for root, by_group in ((1, False), (0, True), (0, False), (1, True)):
        mine = torch.full((3,), 10.0 * index + 1)
        parts = [inside((3,)) for _ in range(world)] if index == root else None
        compat.gather(mine, parts and [part for part, _ in parts], group=group,
                      **by("dst", root, by_group))
        assert mine.tolist() == [10.0 * index + 1] * 3, mine
        for rank, (_, part_base) in enumerate(parts or []):
            whole(part_base, np.full(3, 10.0 * rank + 1))

        out, base = inside((2,))
        parts = [torch.full((2,), 100.0 * root + rank) for rank in range(world)]
        compat.scatter(out, parts if index == root else None, group=group,
                       **by("src", root, by_group))
        whole(base, np.full(2, 100.0 * root + index))

        values, base = inside((4,))
        values.copy_(torch.arange(4.0) + index)
        compat.reduce(values, group=group, **by("dst", root, by_group))
        # the other ranks' tensors are left as they were
        whole(base, 2 * np.arange(4.0) + 1 if index == root else np.arange(4.0) + index)

        out, base = inside((2,))
        compat.scatter_tensor(torch.arange(4.0) + 10 * index, group=group, out=out,
                              **by("src", root, by_group))
        whole(base, np.arange(2.0 * index, 2.0 * index + 2) + 10 * root)

        gathered = [None] * world if index == root else None
        compat.gather_object({"from": index}, gathered, group=group, **by("dst", root, by_group))
        assert gathered is None or gathered == [{"from": 0}, {"from": 1}], gathered

        received = [None]
        sent = [("to", rank, root) for rank in range(world)] if index == root else None
        compat.scatter_object_list(received, sent, group=group, **by("src", root, by_group))
        assert received == [("to", index, root)], received

        objects = [{"weights": root}, "v7"] if index == root else [None, None]
        compat.broadcast_object_list(objects, group=group, **by("src", root, by_group))
        assert objects == [{"weights": root}, "v7"], objects

    for root in (1, 0):
        # differentiable forms (global ranks only, as torch.distributed.nn.functional's)
        x = torch.full((2,), index + 1.0, requires_grad=True)
        got = compat.autograd.gather(x, dst=root, group=group)
        expected = [[rank + 1.0] * 2 for rank in range(world)] if index == root else [[0.0] * 2] * 2
        assert [part.tolist() for part in got] == expected, got
        sum((part * (rank + 1)).sum() for rank, part in enumerate(got)).backward()
        assert x.grad.tolist() == [index + 1.0] * 2, x.grad

        tensors = [torch.full((2,), 10.0 * index + rank, requires_grad=True) for rank in range(2)]
        got = compat.autograd.scatter(tensors, src=root, group=group)
        assert got.tolist() == [10.0 * root + index] * 2, got
        (got * (index + 1)).sum().backward()
        for rank, item in enumerate(tensors):
            grad = [rank + 1.0] * 2 if index == root else [0.0] * 2
            assert item.grad.tolist() == grad, (rank, item.grad)

        x = torch.full((2,), index + 1.0, requires_grad=True)
        got = compat.autograd.reduce(x, dst=root, group=group)
        assert got.tolist() == [3.0 if index == root else index + 1.0] * 2, got
        (got * 5).sum().backward()
        assert x.grad.tolist() == [5.0] * 2, x.grad

        x = torch.full((2,), index + 1.0, requires_grad=True)
        got = compat.autograd.broadcast(x, src=root, group=group)
        assert got.tolist() == [root + 1.0] * 2, got
        (got * (index + 1)).sum().backward()
        assert x.grad.tolist() == [3.0 if index == root else 0.0] * 2, x.grad


def main(process, ports):
    trainer = start(process, ports, leaver=0)
    if trainer is None:
        return
    index = 0 if trainer else 1
    group = foreign_group(index, 2, ports[0])
    assert group.rank() == index and compat.get_rank() == (1 if trainer else 0)
    rooted(index, group)
    compat.monitored_barrier(group=group, timeout=60)  # its peers: the group's other member
    finish(process, trainer, group)


if __name__ == "__main__":
    import torch.multiprocessing as mp

    mp.spawn(main, args=([int(port) for port in sys.argv[1:]],), nprocs=3)
"""


@pytest.mark.parametrize("calls", ["unrooted", "rooted"])
def test_collectives_on_a_group_of_processes_of_other_worlds_match_torch(
    calls: str, tmp_path: Path
) -> None:
    script = tmp_path / f"foreign_group_{calls}.py"
    body = {"unrooted": FOREIGN_GROUP, "rooted": FOREIGN_GROUP_ROOTED}[calls]
    script.write_text(FOREIGN_GROUP_HELPERS + body)
    result = run_bounded(
        [sys.executable, str(script), *(str(free_port()) for _ in range(3))],
        timeout=180,
        env=_environment(),
        cwd=str(tmp_path),
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert all(f"process {process} OK" in result.stdout for process in range(3)), output[-3000:]
