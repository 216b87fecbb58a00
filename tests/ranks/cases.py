"""Collective test cases, run inside real ranks by tests/ranks/runner.py.

Every rank can regenerate every rank's input (seeded by case and rank), so each checks its own
result against an expectation computed with numpy. Values are small integers, which every dtype
holds exactly, so sums, products, minima and maxima are exact; AVG is compared with a tolerance.
"""

from __future__ import annotations

import inspect
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import compat
from compat import algorithms
from compat.base import tables
from compat.core import state

REDUCE_OPS = ["sum", "prod", "min", "max", "avg"]
DTYPES = ["float32", "float64", "int32", "int64", "float16", "bfloat16"]
FLOAT_DTYPES = {"float32", "float64", "float16", "bfloat16"}
TOLERANCE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-12}
SENTINEL = -7


@dataclass(frozen=True)
class Case:
    name: str
    run_fn: Callable[[Any], None]
    min_world: int = 1
    frameworks: tuple[str, ...] = ("torch", "mindspore")
    #: run in a job of its own, not in the collective jobs (see own_job_case_names)
    own_job: bool = False

    def run(self, kit: Any) -> None:
        self.run_fn(kit)


CASES: dict[str, Case] = {}


def register(
    name: str,
    fn: Callable[[Any], None],
    min_world: int = 1,
    frameworks: tuple[str, ...] = ("torch", "mindspore"),
    own_job: bool = False,
) -> None:
    if name in CASES:
        raise ValueError(f"duplicate case {name}")
    CASES[name] = Case(name, fn, min_world, frameworks, own_job)


def case_names(framework: str, world: int) -> list[str]:
    """The cases of the collective jobs."""
    return [
        name
        for name, case in CASES.items()
        if framework in case.frameworks and world >= case.min_world and not case.own_job
    ]


def own_job_case_names(prefix: str, framework: str, world: int) -> list[str]:
    """The cases registered with ``own_job`` whose names start with ``prefix``: they need a
    process whose earlier cases did not make groups of their own (member-only groups on torch,
    whose names count the groups each member made: other cases' groups, of some ranks and not
    others, leave that count different from rank to rank)."""
    return [
        name
        for name, case in CASES.items()
        if name.startswith(prefix) and case.own_job
        and framework in case.frameworks and world >= case.min_world
    ]  # fmt: skip


# -- helpers ----------------------------------------------------------------------------------


def rank() -> int:
    return compat.get_rank()


def world() -> int:
    return compat.get_world_size()


def values(seed: str, who: int, shape: tuple[int, ...], op: str = "sum") -> np.ndarray:
    """Rank ``who``'s input for case ``seed``: small integers (kept in [-2, 2] for products)."""
    rng = np.random.default_rng([zlib.crc32(seed.encode()), who])
    low, high = (-2, 3) if op == "prod" else (-3, 4)
    return rng.integers(low, high, size=shape).astype(np.float64)


def reduce_np(arrays: list[np.ndarray], op: str) -> np.ndarray:
    """The reduction, computed with the numpy function the ReduceOp table names."""
    function = getattr(np, tables.lookup("reduce_ops", "ops", op, "numpy"))
    stack = np.stack(arrays)
    if isinstance(function, np.ufunc):
        return function.reduce(stack, axis=0)
    result: np.ndarray = function(stack, axis=0)
    return result


# Every result a case checks is also recorded, so that the parity test can compare the two
# frameworks' results array by array (runner.py saves them per rank).
RECORDS: list[np.ndarray] = []


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str, what: str = "") -> None:
    RECORDS.append(np.array(actual, copy=True))
    expected = np.asarray(expected)
    if dtype in FLOAT_DTYPES:
        np.testing.assert_allclose(actual, expected, rtol=TOLERANCE[dtype], atol=0, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected.astype(actual.dtype), err_msg=what)


def sentinel(kit: Any, shape: tuple[int, ...], dtype: str) -> Any:
    return kit.tensor(np.full(shape, SENTINEL), dtype)


def follow_up(kit: Any) -> None:
    """The next collective on every rank still gives the right result."""
    tensor = kit.tensor(np.full((3,), rank() + 1), "float32")
    compat.all_reduce(tensor)
    assert_close(kit.numpy(tensor), np.full((3,), sum(range(1, world() + 1))), "float32")


def wait_if(work: Any, async_op: bool) -> None:
    if async_op:
        assert isinstance(work, compat.Work), f"expected a compat.Work, got {work!r}"
        assert work.wait() is True
        assert work.is_completed()
    else:
        assert work is None, f"expected None for a synchronous call, got {work!r}"


def runs(chosen: Any, name: str) -> bool:
    """Whether ``chosen`` (what State.implementation returned) runs ``name``: "native" (the
    adapter's method) or a compat.algorithms function (bound, perhaps through the window's
    thread)."""
    chosen = inspect.unwrap(chosen)  # the flight recorder's wrapper (compat.core.recorder)
    if name == "native":
        return not isinstance(chosen, partial)
    # Neither attribute on the adapter's own method (COMPAT_SHARED_MEMORY=0): the case's assert
    # then names what was chosen, rather than an AttributeError here.
    bound = (getattr(chosen, "func", None), *getattr(chosen, "args", ()))
    return getattr(algorithms, name) in bound


_GROUPS: dict[int, compat.Group] = {}


def subgroup() -> compat.Group:
    """Ranks {0, last}: a proper subgroup at world size 3 (rank 1 is outside), created once."""
    if 0 not in _GROUPS:
        _GROUPS[0] = compat.new_group(sorted({0, world() - 1}))
    return _GROUPS[0]


def members(group: compat.Group | None) -> list[int]:
    return list(range(world())) if group is None else list(group.ranks)


# -- reductions: every op x dtype, sync and async, world and subgroup --------------------------


def check_all_reduce(kit: Any, op: str, dtype: str, async_op: bool, use_group: bool) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    seed = f"all_reduce-{op}-{dtype}"
    tensor = kit.tensor(values(seed, rank(), (2, 3), op), dtype)
    work = compat.all_reduce(tensor, op=compat.ReduceOp(op), group=group, async_op=async_op)
    wait_if(work, async_op)
    expected = reduce_np([values(seed, r, (2, 3), op) for r in ranks], op)
    assert_close(kit.numpy(tensor), expected, dtype)


def check_reduce_scatter(kit: Any, op: str, dtype: str, async_op: bool, use_group: bool) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me = len(ranks), ranks.index(rank())
    seed = f"reduce_scatter-{op}-{dtype}"
    inputs = [kit.tensor(values(seed, rank() * 100 + i, (2, 3), op), dtype) for i in range(n)]
    output = sentinel(kit, (2, 3), dtype)
    work = compat.reduce_scatter(output, inputs, op=op, group=group, async_op=async_op)
    wait_if(work, async_op)
    expected = reduce_np([values(seed, r * 100 + me, (2, 3), op) for r in ranks], op)
    assert_close(kit.numpy(output), expected, dtype)


def check_reduce_scatter_tensor(
    kit: Any, op: str, dtype: str, async_op: bool, use_group: bool
) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me = len(ranks), ranks.index(rank())
    seed = f"reduce_scatter_tensor-{op}-{dtype}"
    tensor = kit.tensor(values(seed, rank(), (2 * n, 3), op), dtype)
    before = kit.numpy(tensor)
    returned = compat.reduce_scatter_tensor(tensor, op, group, async_op)
    if async_op:
        result, work = returned
        wait_if(work, True)
    else:
        result = returned
    full = reduce_np([values(seed, r, (2 * n, 3), op) for r in ranks], op)
    assert_close(kit.numpy(result), full[2 * me : 2 * me + 2], dtype)
    assert_close(kit.numpy(tensor), before, dtype, "the input must be left unchanged")


def check_reduce_scatter_into(
    kit: Any, op: str, dtype: str, async_op: bool, use_group: bool
) -> None:
    """torch.distributed.reduce_scatter_tensor's form: the output given, None or a Work back."""
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me = len(ranks), ranks.index(rank())
    seed = f"reduce_scatter_into-{op}-{dtype}"
    tensor = kit.tensor(values(seed, rank(), (2 * n, 3), op), dtype)
    before = kit.numpy(tensor)
    output = sentinel(kit, (2, 3), dtype)
    work = compat.reduce_scatter_into(output, tensor, op, group, async_op)
    wait_if(work, async_op)
    full = reduce_np([values(seed, r, (2 * n, 3), op) for r in ranks], op)
    assert_close(kit.numpy(output), full[2 * me : 2 * me + 2], dtype)
    assert_close(kit.numpy(tensor), before, dtype, "the input must be left unchanged")


def check_reduce(kit: Any, op: str, dtype: str, async_op: bool, use_group: bool) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    dst = ranks[-1]
    seed = f"reduce-{op}-{dtype}"
    mine = values(seed, rank(), (2, 3), op)
    tensor = kit.tensor(mine, dtype)
    work = compat.reduce(tensor, dst, op=op, group=group, async_op=async_op)
    wait_if(work, async_op)
    if rank() == dst:
        expected = reduce_np([values(seed, r, (2, 3), op) for r in ranks], op)
        assert_close(kit.numpy(tensor), expected, dtype)
    else:
        assert_close(kit.numpy(tensor), mine, dtype, "reduce must leave non-dst tensors unchanged")


REDUCTIONS = {
    "all_reduce": check_all_reduce,
    "reduce_scatter": check_reduce_scatter,
    "reduce_scatter_tensor": check_reduce_scatter_tensor,
    "reduce_scatter_into": check_reduce_scatter_into,
    "reduce": check_reduce,
}

for _name, _check in REDUCTIONS.items():
    for _op in REDUCE_OPS:
        for _dtype in DTYPES:
            if _op == "avg" and _dtype not in FLOAT_DTYPES:
                continue
            register(
                f"{_name}[{_op}-{_dtype}]",
                partial(_check, op=_op, dtype=_dtype, async_op=False, use_group=False),
            )
        register(
            f"{_name}[{_op}-float32-async]",
            partial(_check, op=_op, dtype="float32", async_op=True, use_group=False),
        )
    register(
        f"{_name}[sum-int64-group]",
        partial(_check, op="sum", dtype="int64", async_op=False, use_group=True),
    )
    register(
        f"{_name}[max-float32-group-async]",
        partial(_check, op="max", dtype="float32", async_op=True, use_group=True),
    )


# -- data movement: every dtype, sync and async, world and subgroup ---------------------------


def check_all_gather(kit: Any, dtype: str, async_op: bool, use_group: bool) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    seed = f"all_gather-{dtype}"
    outputs = [sentinel(kit, (2, 3), dtype) for _ in ranks]
    work = compat.all_gather(
        outputs, kit.tensor(values(seed, rank(), (2, 3)), dtype), group, async_op
    )
    wait_if(work, async_op)
    for out, r in zip(outputs, ranks, strict=True):
        assert_close(kit.numpy(out), values(seed, r, (2, 3)), dtype, f"entry of rank {r}")


def check_all_gather_into_tensor(kit: Any, dtype: str, async_op: bool, use_group: bool) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    seed = f"all_gather_into_tensor-{dtype}"
    tensor = kit.tensor(values(seed, rank(), (2, 3)), dtype)
    returned = compat.all_gather_into_tensor(tensor, group, async_op)
    result = returned[0] if async_op else returned
    wait_if(returned[1] if async_op else None, async_op)
    expected = np.concatenate([values(seed, r, (2, 3)) for r in ranks])
    assert_close(kit.numpy(result), expected, dtype)


def check_all_gather_into(kit: Any, dtype: str, async_op: bool, use_group: bool) -> None:
    """torch.distributed.all_gather_into_tensor's form: the output given, None or a Work back."""
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    seed = f"all_gather_into-{dtype}"
    tensor = kit.tensor(values(seed, rank(), (2, 3)), dtype)
    output = sentinel(kit, (2 * len(ranks), 3), dtype)
    wait_if(compat.all_gather_into(output, tensor, group, async_op), async_op)
    expected = np.concatenate([values(seed, r, (2, 3)) for r in ranks])
    assert_close(kit.numpy(output), expected, dtype)
    assert_close(kit.numpy(tensor), values(seed, rank(), (2, 3)), dtype, "input unchanged")


def check_broadcast(kit: Any, dtype: str, async_op: bool, use_group: bool) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    seed = f"broadcast-{dtype}"
    for src in ranks:
        tensor = kit.tensor(values(seed, rank(), (4,)), dtype)
        wait_if(compat.broadcast(tensor, src, group, async_op), async_op)
        assert_close(kit.numpy(tensor), values(seed, src, (4,)), dtype, f"src {src}")


def check_scatter(kit: Any, dtype: str, async_op: bool, use_group: bool) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    me = ranks.index(rank())
    seed = f"scatter-{dtype}"
    for src in ranks:
        out = sentinel(kit, (3,), dtype)
        parts = (
            [kit.tensor(values(seed, src * 10 + i, (3,)), dtype) for i in range(len(ranks))]
            if rank() == src
            else None
        )
        wait_if(compat.scatter(out, parts, src, group, async_op), async_op)
        assert_close(kit.numpy(out), values(seed, src * 10 + me, (3,)), dtype, f"src {src}")


def check_scatter_tensor(kit: Any, dtype: str, async_op: bool, use_group: bool) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me = len(ranks), ranks.index(rank())
    seed = f"scatter_tensor-{dtype}"
    for src in ranks:
        tensor = kit.tensor(values(seed, rank(), (2 * n, 3)), dtype)
        returned = compat.scatter_tensor(tensor, src, group, async_op)
        result = returned[0] if async_op else returned
        wait_if(returned[1] if async_op else None, async_op)
        expected = values(seed, src, (2 * n, 3))[2 * me : 2 * me + 2]
        assert_close(kit.numpy(result), expected, dtype, f"src {src}")


def check_gather(kit: Any, dtype: str, async_op: bool, use_group: bool) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    seed = f"gather-{dtype}"
    for dst in ranks:
        outputs = [sentinel(kit, (3,), dtype) for _ in ranks] if rank() == dst else None
        tensor = kit.tensor(values(seed, rank(), (3,)), dtype)
        wait_if(compat.gather(tensor, outputs, dst, group, async_op), async_op)
        if outputs is not None:
            for out, r in zip(outputs, ranks, strict=True):
                assert_close(kit.numpy(out), values(seed, r, (3,)), dtype, f"dst {dst} from {r}")


def check_all_to_all_single(kit: Any, dtype: str, async_op: bool, use_group: bool) -> None:
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me = len(ranks), ranks.index(rank())
    seed = f"all_to_all_single-{dtype}"
    output = sentinel(kit, (2 * n, 3), dtype)
    tensor = kit.tensor(values(seed, rank(), (2 * n, 3)), dtype)
    wait_if(compat.all_to_all_single(output, tensor, group=group, async_op=async_op), async_op)
    expected = np.concatenate([values(seed, r, (2 * n, 3))[2 * me : 2 * me + 2] for r in ranks])
    assert_close(kit.numpy(output), expected, dtype)


def check_send_recv(kit: Any, dtype: str, async_op: bool, use_group: bool) -> None:
    """A ring: even ranks send first, odd ranks receive first (no deadlock on blocking calls)."""
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks or len(ranks) < 2:
        return
    me = ranks.index(rank())
    right, left = ranks[(me + 1) % len(ranks)], ranks[(me - 1) % len(ranks)]
    seed = f"send_recv-{dtype}"
    received = sentinel(kit, (5,), dtype)
    outgoing = kit.tensor(values(seed, rank(), (5,)), dtype)
    if me % 2 == 0:
        compat.send(outgoing, right, group)
        compat.recv(received, left, group)
    else:
        compat.recv(received, left, group)
        compat.send(outgoing, right, group)
    assert_close(kit.numpy(received), values(seed, left, (5,)), dtype)


MOVEMENTS = {
    "all_gather": check_all_gather,
    "all_gather_into_tensor": check_all_gather_into_tensor,
    "all_gather_into": check_all_gather_into,
    "broadcast": check_broadcast,
    "scatter": check_scatter,
    "scatter_tensor": check_scatter_tensor,
    "gather": check_gather,
    "all_to_all_single": check_all_to_all_single,
    "send_recv": check_send_recv,
}

for _name, _check in MOVEMENTS.items():
    _min_world = 2 if _name == "send_recv" else 1
    for _dtype in DTYPES:
        register(
            f"{_name}[{_dtype}]",
            partial(_check, dtype=_dtype, async_op=False, use_group=False),
            _min_world,
        )
    if _name != "send_recv":
        register(
            f"{_name}[float32-async]",
            partial(_check, dtype="float32", async_op=True, use_group=False),
        )
        register(
            f"{_name}[float32-group-async]",
            partial(_check, dtype="float32", async_op=True, use_group=True),
        )
    register(
        f"{_name}[int32-group]",
        partial(_check, dtype="int32", async_op=False, use_group=True),
        _min_world,
    )


# -- uneven sizes, out=, op spellings, queries ------------------------------------------------


def uneven_sizes() -> list[int]:
    return [(r % 3) + 1 for r in range(world())]


def case_reduce_scatter_uneven(kit: Any, async_op: bool) -> None:
    sizes = uneven_sizes()
    seed = "reduce_scatter_uneven"
    inputs = [
        kit.tensor(values(seed, rank() * 100 + i, (s, 2)), "float32") for i, s in enumerate(sizes)
    ]
    output = sentinel(kit, (sizes[rank()], 2), "float32")
    wait_if(compat.reduce_scatter(output, inputs, async_op=async_op), async_op)
    expected = reduce_np(
        [values(seed, r * 100 + rank(), (sizes[rank()], 2)) for r in range(world())], "sum"
    )
    assert_close(kit.numpy(output), expected, "float32")


def case_reduce_scatter_tensor_split_sizes(kit: Any, async_op: bool) -> None:
    sizes = uneven_sizes()
    seed = "reduce_scatter_tensor_split_sizes"
    tensor = kit.tensor(values(seed, rank(), (sum(sizes), 2)), "float32")
    out = sentinel(kit, (sizes[rank()], 2), "float32")
    returned = compat.reduce_scatter_tensor(
        tensor, "sum", None, async_op, out=out, input_split_sizes=sizes
    )
    result = returned[0] if async_op else returned
    wait_if(returned[1] if async_op else None, async_op)
    assert result is out, "with out=, the result is out itself"
    full = reduce_np([values(seed, r, (sum(sizes), 2)) for r in range(world())], "sum")
    start = sum(sizes[: rank()])
    assert_close(kit.numpy(out), full[start : start + sizes[rank()]], "float32")


def case_all_gather_uneven(kit: Any, async_op: bool) -> None:
    sizes = uneven_sizes()
    seed = "all_gather_uneven"
    outputs = [sentinel(kit, (s, 2), "float32") for s in sizes]
    tensor = kit.tensor(values(seed, rank(), (sizes[rank()], 2)), "float32")
    wait_if(compat.all_gather(outputs, tensor, async_op=async_op), async_op)
    for r, out in enumerate(outputs):
        assert_close(kit.numpy(out), values(seed, r, (sizes[r], 2)), "float32", f"rank {r}")


def case_all_gather_into_tensor_split_sizes(kit: Any, async_op: bool) -> None:
    sizes = uneven_sizes()
    seed = "all_gather_into_tensor_split_sizes"
    out = sentinel(kit, (sum(sizes), 2), "float32")
    tensor = kit.tensor(values(seed, rank(), (sizes[rank()], 2)), "float32")
    returned = compat.all_gather_into_tensor(
        tensor, None, async_op, out=out, output_split_sizes=sizes
    )
    result = returned[0] if async_op else returned
    wait_if(returned[1] if async_op else None, async_op)
    assert result is out, "with out=, the result is out itself"
    expected = np.concatenate([values(seed, r, (sizes[r], 2)) for r in range(world())])
    assert_close(kit.numpy(out), expected, "float32")


def case_all_to_all_single_uneven(kit: Any, async_op: bool) -> None:
    # Rank r sends (r + i + 1) rows to rank i.
    n, me = world(), rank()
    in_sizes = [me + i + 1 for i in range(n)]
    out_sizes = [r + me + 1 for r in range(n)]
    seed = "all_to_all_single_uneven"
    tensor = kit.tensor(values(seed, me, (sum(in_sizes), 2)), "float32")
    output = sentinel(kit, (sum(out_sizes), 2), "float32")
    work = compat.all_to_all_single(output, tensor, out_sizes, in_sizes, async_op=async_op)
    wait_if(work, async_op)
    pieces = []
    for r in range(n):
        sent = [r + i + 1 for i in range(n)]
        start = sum(sent[:me])
        pieces.append(values(seed, r, (sum(sent), 2))[start : start + sent[me]])
    assert_close(kit.numpy(output), np.concatenate(pieces), "float32")


def case_reduce_scatter_tensor_out(kit: Any) -> None:
    n = world()
    tensor = kit.tensor(np.arange(2 * n * 2).reshape(2 * n, 2), "int64")
    out = sentinel(kit, (2, 2), "int64")
    result = compat.reduce_scatter_tensor(tensor, out=out)
    assert result is out
    expected = np.arange(2 * n * 2).reshape(2 * n, 2)[2 * rank() : 2 * rank() + 2] * n
    assert_close(kit.numpy(out), expected, "int64")


def case_op_spellings(kit: Any) -> None:
    """Strings, aliases and each framework's native op reduce alike."""
    spellings = {
        "sum": ["sum", "SUM", compat.ReduceOp.SUM, kit.native_op("SUM")],
        "prod": ["prod", "product", compat.ReduceOp.PROD, compat.ReduceOp.PRODUCT],
        "max": ["max", compat.ReduceOp.MAX, kit.native_op("MAX")],
        "min": ["min", kit.native_op("MIN")],
    }
    for op, forms in spellings.items():
        for form in forms:
            tensor = kit.tensor(np.full((2,), rank() + 2), "int32")
            compat.all_reduce(tensor, op=form)
            expected = reduce_np([np.full((2,), r + 2.0) for r in range(world())], op)
            assert_close(kit.numpy(tensor), expected, "int32", f"op spelled {form!r}")


def case_queries(kit: Any) -> None:
    assert compat.is_initialized()
    assert compat.get_framework() == kit.framework
    # The backend init chose by default on CPU (the tables say so of get_backend).
    assert compat.get_backend() == {"torch": "gloo", "mindspore": "mccl"}[kit.framework]
    group = subgroup()
    # Code branches on `get_backend(group) is Backend.GLOO`, as torch's returns its own constant.
    native = {"torch": compat.Backend.GLOO, "mindspore": compat.Backend.MCCL}[kit.framework]
    assert compat.get_backend() is native, repr(compat.get_backend())
    if rank() in group.ranks:
        assert compat.get_backend(group) is native, repr(compat.get_backend(group))
    expected = group.ranks.index(rank()) if rank() in group.ranks else -1
    assert compat.get_rank(group) == expected, (compat.get_rank(group), expected)
    # As torch's and MindSpore's: -1 on a rank outside the group.
    expected_size = len(group.ranks) if rank() in group.ranks else -1
    assert compat.get_world_size(group) == expected_size, compat.get_world_size(group)
    assert 0 <= compat.get_rank() < compat.get_world_size()


#: The threads of MindSpore's asynchronous op pipeline (its runtime/pynative/async queues).
PIPELINE_THREADS = {"frontend_queue", "backend_queue", "launch_queue"}


def case_execution_note(kit: Any) -> None:
    """The note compat bench prints says how MindSpore launches ops, as this process runs them:
    synchronously exactly when no pipeline thread runs (the 3-rank MindSpore job launches
    synchronously, the 2-rank jobs asynchronously: tests/jobs.py), once an op has run."""
    x = kit.tensor(values("execution-note", rank(), (4,)), "float32")
    compat.all_reduce(x)
    kit.numpy(x + x)  # an op of the framework's own, run to its end
    tasks = Path("/proc/self/task")
    names = {(task / "comm").read_text().strip() for task in tasks.iterdir()}
    note = state.current().adapter.execution_note()
    if kit.framework == "torch":
        assert note is None, note
    elif PIPELINE_THREADS & names:
        assert note is not None and note.startswith("launch: asynchronous"), (note, names)
    else:
        assert note is not None and note.startswith("launch: synchronous"), (note, names)


def case_barrier(kit: Any) -> None:
    assert compat.barrier() is None
    group = subgroup()
    if rank() in group.ranks:
        assert compat.barrier(group) is None
    follow_up(kit)


def case_barrier_async_device_ids(kit: Any) -> None:
    """torch's async_op and device_ids: a Work that completes once every rank has arrived;
    device_ids=[0] goes to torch.distributed.barrier (Gloo: the CPU), MindSpore ignores it."""
    wait_if(compat.barrier(async_op=True), True)
    wait_if(compat.barrier(None, False, [0]), False)
    wait_if(compat.barrier(compat.WORLD, async_op=True, device_ids=[0]), True)
    group = subgroup()
    if rank() in group.ranks:
        wait_if(compat.barrier(group, async_op=True), True)
    # Every rank passes the barrier only after every rank has reached it: a value a rank sets
    # before it is seen by all after it (an all_reduce of the arrival counts).
    arrived = kit.tensor(np.ones(1), "float32")
    work = compat.barrier(async_op=True)
    assert work is not None
    work.wait()
    compat.all_reduce(arrived)
    assert_close(kit.numpy(arrived), np.full(1, world()), "float32")
    follow_up(kit)


def case_barrier_async_waits(kit: Any) -> None:
    """A waited async barrier returns only once every rank has reached it: the last rank arrives
    0.5 s late, and every other rank's wait() takes at least most of that. (MindSpore's
    CommHandle.wait() on CPU returned at once: measured 0.00 s against a peer 2 s late.)"""
    late = world() - 1
    if rank() == late:
        time.sleep(0.5)
    started = time.monotonic()
    work = compat.barrier(async_op=True)
    assert isinstance(work, compat.Work), f"barrier(async_op=True) returned {work!r}"
    assert work.wait() is True
    waited = time.monotonic() - started
    assert work.is_completed()
    if rank() != late:
        assert waited >= 0.4, f"rank {rank()} left the barrier after {waited:.2f} s"


register("barrier_async_waits", case_barrier_async_waits, min_world=2)

for _async in (False, True):
    _suffix = "-async" if _async else ""
    register(
        f"reduce_scatter_uneven{_suffix}", partial(case_reduce_scatter_uneven, async_op=_async)
    )
    register(
        f"reduce_scatter_tensor_split_sizes{_suffix}",
        partial(case_reduce_scatter_tensor_split_sizes, async_op=_async),
    )
    register(f"all_gather_uneven{_suffix}", partial(case_all_gather_uneven, async_op=_async))
    register(
        f"all_gather_into_tensor_split_sizes{_suffix}",
        partial(case_all_gather_into_tensor_split_sizes, async_op=_async),
    )
    register(
        f"all_to_all_single_uneven{_suffix}",
        partial(case_all_to_all_single_uneven, async_op=_async),
    )
register("reduce_scatter_tensor_out", case_reduce_scatter_tensor_out)


def random_floats(seed: str, who: int, shape: tuple[int, ...]) -> np.ndarray:
    """Non-integer values, so the parity test compares real rounding, not exact arithmetic."""
    rng = np.random.default_rng([zlib.crc32(seed.encode()), who])
    return rng.standard_normal(shape).astype(np.float32)


def case_parity_random(kit: Any, op: str) -> None:
    """Random float32 through the reducing collectives; each result also recorded for parity."""
    n, me = world(), rank()
    seed = f"parity-{op}"
    mine = random_floats(seed, me, (2 * n, 5))
    everyone = [random_floats(seed, r, (2 * n, 5)) for r in range(n)]
    full = reduce_np([x.astype(np.float64) for x in everyone], op)
    tensor = kit.tensor(mine, "float32")
    compat.all_reduce(tensor, op)
    np.testing.assert_allclose(kit.numpy(tensor), full, rtol=1e-5, atol=1e-6)
    RECORDS.append(kit.numpy(tensor))
    result = compat.reduce_scatter_tensor(kit.tensor(mine, "float32"), op)
    np.testing.assert_allclose(kit.numpy(result), full[2 * me : 2 * me + 2], rtol=1e-5, atol=1e-6)
    RECORDS.append(kit.numpy(result))
    output = sentinel(kit, (2, 5), "float32")
    parts = [kit.tensor(mine[2 * i : 2 * i + 2], "float32") for i in range(n)]
    compat.reduce_scatter(output, parts, op)
    np.testing.assert_allclose(kit.numpy(output), full[2 * me : 2 * me + 2], rtol=1e-5, atol=1e-6)
    RECORDS.append(kit.numpy(output))
    tensor = kit.tensor(mine, "float32")
    compat.reduce(tensor, n - 1, op)
    if me == n - 1:
        np.testing.assert_allclose(kit.numpy(tensor), full, rtol=1e-5, atol=1e-6)
    RECORDS.append(kit.numpy(tensor))
    gathered = compat.all_gather_into_tensor(kit.tensor(mine, "float32"))
    np.testing.assert_array_equal(kit.numpy(gathered), np.concatenate(everyone))
    RECORDS.append(kit.numpy(gathered))


def case_torch_forms(kit: Any) -> None:
    """all_gather_into and reduce_scatter_into have the signature of the framework's own
    all_gather_into_tensor / reduce_scatter_tensor (parameter names, order, kinds), take its op
    and world group by keyword, and give None / a Work on empty tensors too."""
    import inspect

    if kit.framework == "torch":
        import torch.distributed as native

        world_group: Any = native.group.WORLD
    else:
        import mindspore.mint.distributed as native
        from mindspore.communication import GlobalComm

        world_group = GlobalComm.WORLD_COMM_GROUP
    for ours, theirs in ((compat.all_gather_into, native.all_gather_into_tensor),
                         (compat.reduce_scatter_into, native.reduce_scatter_tensor)):  # fmt: skip
        mine = [(p.name, p.kind) for p in inspect.signature(ours).parameters.values()]
        native_params = inspect.signature(theirs).parameters.values()
        assert mine == [(p.name, p.kind) for p in native_params], (ours.__name__, mine)
    n, me = world(), rank()
    seed = "torch_forms"
    output = sentinel(kit, (2, 3), "int32")
    tensor = kit.tensor(values(seed, me, (2 * n, 3), "max"), "int32")
    work = compat.reduce_scatter_into(
        output=output, input=tensor, op=kit.native_op("MAX"), group=world_group, async_op=False
    )
    assert work is None, work
    full = reduce_np([values(seed, r, (2 * n, 3), "max") for r in range(n)], "max")
    assert_close(kit.numpy(output), full[2 * me : 2 * me + 2], "int32")
    gathered = sentinel(kit, (2 * n, 3), "int32")
    compat.all_gather_into(output_tensor=gathered, input_tensor=output, group=world_group)
    assert_close(kit.numpy(gathered), full, "int32")
    empty_out, empty_in = sentinel(kit, (0, 3), "float32"), sentinel(kit, (0, 3), "float32")
    for async_op in (False, True):
        wait_if(compat.all_gather_into(empty_out, empty_in, async_op=async_op), async_op)
        wait_if(compat.reduce_scatter_into(empty_out, empty_in, async_op=async_op), async_op)
    follow_up(kit)


for _op in REDUCE_OPS:
    register(f"parity_random[{_op}]", partial(case_parity_random, op=_op))
register("torch_forms", case_torch_forms)
register("op_spellings", case_op_spellings)
register("queries", case_queries)
register("execution_note", case_execution_note)
register("barrier", case_barrier)
register("barrier_async_device_ids", case_barrier_async_device_ids)

import tests.ranks.algorithm_cases  # noqa: E402,F401  (register cases)
from tests.ranks import (  # noqa: E402,F401  (register cases)
    a2a_cases,
    autograd_cases,
    bad_input_cases,
    bitwise_cases,
    coalescing_cases,
    complex_cases,
    dtensor_cases,
    fast_path_cases,
    float8_cases,
    fuzz_cases,
    interop_cases,
    layout_cases,
    mailbox_cases,
    member_group_cases,
    mesh_cases,
    namespace_cases,
    native_call_cases,
    object_cases,
    one_rank_cases,
    p2p_cases,
    parameter_cases,
    port_api_cases,
    random_cases,
    shared_memory_cases,
    store_cases,
    tensor_parallel_cases,
    torch_types_cases,
    wide_cases,
)
