"""Cases for MindSpore's ops primitives path (COMPAT_MINDSPORE_PRIMITIVES=1 on MCCL): which
implementation each collective resolved to, and which primitive ran; the AllReduce call that
MindSpore's GPU all_reduce makes, run directly (the table reduces through AllGather on CPU).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import compat
from compat.base import tables
from compat.base.types import ReduceOp
from compat.core import capabilities, state
from tests.ranks.cases import CASES as SUITE
from tests.ranks.cases import Case

#: The suite's cases and these, so that one job per world size runs both (each MindSpore job
#: takes about 15 s to start).
CASES: dict[str, Case] = dict(SUITE)


def check_path(kit: Any) -> None:
    current = state.current()
    assert current.capability_key == "mccl_primitives", current.capability_key
    entries = tables.lookup("capabilities", "mccl_primitives", "ops")
    for collective, entry in entries.items():
        expected = "native" if entry["impl"] == "native" else entry["algorithm"]
        ran = current.algorithm(collective, "float32", 1024, False, compat.get_world_size())
        assert ran == expected, (collective, ran, expected)
    adapter = current.adapter
    world = compat.get_world_size()
    gather, broadcast = (
        {"all_gather": "mindspore.ops.AllGather"},
        {"broadcast": "mindspore.ops.Broadcast"},
    )
    # Every collective, called through compat, and the primitives it ran (nothing else).
    calls: list[tuple[str, Any, dict[str, str]]] = [
        ("all_reduce", lambda t: compat.all_reduce(t), gather),
        ("all_gather", lambda t: compat.all_gather([kit.tensor(np.zeros(4), "float32")
                                                    for _ in range(world)], t), gather),
        ("all_gather_into_tensor", lambda t: compat.all_gather_into_tensor(t), gather),
        ("reduce_scatter_tensor", lambda t: compat.reduce_scatter_tensor(
            kit.tensor(np.arange(4 * world), "float32")), gather),
        ("reduce", lambda t: compat.reduce(t, 0), gather),
        ("gather", lambda t: compat.gather(t, [kit.tensor(np.zeros(4), "float32")
                                              for _ in range(world)] if compat.get_rank() == 0
                                           else None, 0), gather),
        ("broadcast", lambda t: compat.broadcast(t, 0), broadcast),
        ("scatter_tensor", lambda t: compat.scatter_tensor(
            kit.tensor(np.arange(4 * world), "float32"), 0), broadcast),
        ("all_to_all_single", lambda t: compat.all_to_all_single(
            kit.tensor(np.zeros(4 * world), "float32"),
            kit.tensor(np.arange(4 * world), "float32")), gather),
        ("barrier", lambda t: compat.barrier(), gather),
    ]  # fmt: skip
    for name, call, expected_calls in calls:
        adapter.primitive_calls.clear()
        call(kit.tensor(np.arange(4), "float32"))
        assert adapter.primitive_calls == expected_calls, (name, adapter.primitive_calls)
    # The GPU backend's entries name these same implementations, but for all_reduce (native
    # there) and point to point (unsupported there).
    gpu = tables.lookup("capabilities", "mindspore_nccl", "ops")
    for collective, entry in entries.items():
        if collective == "all_reduce" or collective in capabilities.POINT_TO_POINT:
            continue
        if collective == "monitored_barrier":
            continue
        assert gpu[collective].get("algorithm") == entry.get("algorithm"), collective


def check_all_reduce_primitive(kit: Any) -> None:
    """MindSpore GPU's all_reduce: ops.AllReduce, sum and avg (the CPU kernel's only op)."""
    adapter = state.current().adapter
    world = compat.get_world_size()
    for dtype in ("float32", "float16"):
        for op in (ReduceOp.SUM, ReduceOp.AVG):
            tensor = kit.tensor(np.arange(6) + compat.get_rank(), dtype)
            adapter.all_reduce(tensor, op, None, False)
            expected = sum(np.arange(6) + rank for rank in range(world))
            if op is ReduceOp.AVG:
                expected = expected / world
            got = kit.numpy(tensor).astype(np.float64)
            assert np.allclose(got, expected, atol=1e-2), (dtype, op, got, expected)
    assert adapter.primitive_calls["all_reduce"] == "mindspore.ops.AllReduce"


CASES["primitive-path"] = Case("primitive-path", check_path, 1, ("mindspore",))
CASES["primitive-all_reduce"] = Case(
    "primitive-all_reduce", check_all_reduce_primitive, 1, ("mindspore",)
)
