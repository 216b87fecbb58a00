"""The bitwise ReduceOps (BAND, BOR, BXOR, as torch's) on real ranks: every reducing collective
(all_reduce, reduce, reduce_scatter, reduce_scatter_tensor, all_reduce_coalesced and a
coalescing_manager block), on every integer dtype the backend takes and bool where it takes
bool, synchronous and with async_op, each result inside a sentinel-filled base and checked
against numpy's bitwise function (reduce_ops.toml's ``numpy``). Gloo reduces them natively;
MCCL has no bitwise op, and compat reduces them itself there (capabilities.toml's ``emulate``);
it takes no bool.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import compat
from compat.base import tables
from tests.ranks.cases import follow_up, rank, register, wait_if, world
from tests.ranks.layout_cases import Placed, sentinel_out

BITWISE_OPS = [
    op for op, entry in tables.lookup("reduce_ops", "ops").items() if entry.get("integer_only")
]
#: the layout of each output's view inside its sentinel-filled base, by dtype
LAYOUT = {"int8": "offset0", "uint8": "interior", "int32": "column", "int64": "dense"}
#: the value range of each dtype's inputs: every bit of it set somewhere, signs included
LIMITS = {"int8": (-128, 128), "uint8": (0, 256), "int32": (-(2**31), 2**31)}


def bitwise_dtypes() -> list[str]:
    """The backend's integer and bool dtypes (Gloo: int8, uint8, int32, int64, bool; MCCL: no
    bool)."""
    kinds = tables.lookup("dtypes", "dtypes")
    backend = tables.lookup("capabilities", compat.get_backend())
    return [name for name in backend["dtypes"] if kinds[name]["kind"] in ("int", "bool")]


def inputs(seed: str, who: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Rank ``who``'s input, as numpy's ``dtype``."""
    rng = np.random.default_rng([zlib.crc32(seed.encode()), who])
    low, high = (0, 2) if dtype == "bool" else LIMITS.get(dtype, (-(2**40), 2**40))
    return rng.integers(low, high, size=shape).astype(dtype)


def reduced(arrays: list[np.ndarray], op: str) -> np.ndarray:
    """The ranks' arrays reduced with the numpy function the ReduceOp table names."""
    function = getattr(np, tables.lookup("reduce_ops", "ops", op, "numpy"))
    result: np.ndarray = function.reduce(np.stack(arrays), axis=0)
    return result


def placed(kit: Any, data: np.ndarray, dtype: str) -> Placed:
    """``data`` in a view inside a sentinel-filled base; bool's sentinel (True) is the base's."""
    return Placed(kit, data, dtype, LAYOUT.get(dtype, "offset0"))


def each_dtype(kit: Any, check: Callable[[Any, str, str, bool], None], op: str) -> None:
    """``check`` on every integer dtype of the backend, then with async_op on int32 (bool,
    which Gloo takes and MCCL does not, in cases of its own: the parity test compares the
    two frameworks' records of a case one by one)."""
    for dtype in bitwise_dtypes():
        if dtype != "bool":
            check(kit, op, dtype, False)
    check(kit, op, "int32", True)
    follow_up(kit)


def on_bool(kit: Any, check: Callable[[Any, str, str, bool], None], op: str) -> None:
    check(kit, op, "bool", False)
    follow_up(kit)


def check_all_reduce(kit: Any, op: str, dtype: str, async_op: bool) -> None:
    seed = f"bitwise-all_reduce-{op}-{dtype}-{async_op}"
    x = placed(kit, inputs(seed, rank(), (3, 4), dtype), dtype)
    wait_if(compat.all_reduce(x.view, op=op, async_op=async_op), async_op)
    x.result(reduced([inputs(seed, r, (3, 4), dtype) for r in range(world())], op))
    x.check(f"all_reduce {op} {dtype}")


def check_reduce(kit: Any, op: str, dtype: str, async_op: bool) -> None:
    seed, dst = f"bitwise-reduce-{op}-{dtype}-{async_op}", world() - 1
    mine = inputs(seed, rank(), (3, 4), dtype)
    x = placed(kit, mine, dtype)
    wait_if(compat.reduce(x.view, dst, op=compat.ReduceOp(op), async_op=async_op), async_op)
    if rank() == dst:
        x.result(reduced([inputs(seed, r, (3, 4), dtype) for r in range(world())], op))
    x.check(f"reduce {op} {dtype} (the others' tensors unchanged)")


def check_reduce_scatter(kit: Any, op: str, dtype: str, async_op: bool) -> None:
    seed, n, me = f"bitwise-reduce_scatter-{op}-{dtype}-{async_op}", world(), rank()
    parts = [kit.tensor(inputs(seed, me * 100 + i, (2, 3), dtype), dtype) for i in range(n)]
    out = sentinel_out(kit, (2, 3), dtype, LAYOUT.get(dtype, "offset0"))
    # torch's own member, as ported code passes it (MindSpore has none: the string)
    given = kit.native_op(op.upper()) if kit.framework == "torch" else op
    wait_if(compat.reduce_scatter(out.view, parts, op=given, async_op=async_op), async_op)
    out.result(reduced([inputs(seed, r * 100 + me, (2, 3), dtype) for r in range(n)], op))
    out.check(f"reduce_scatter {op} {dtype}")


def check_reduce_scatter_tensor(kit: Any, op: str, dtype: str, async_op: bool) -> None:
    seed, n, me = f"bitwise-reduce_scatter_tensor-{op}-{dtype}-{async_op}", world(), rank()
    mine = inputs(seed, me, (2 * n, 3), dtype)
    tensor = kit.tensor(mine, dtype)
    out = sentinel_out(kit, (2, 3), dtype, LAYOUT.get(dtype, "offset0"))
    returned = compat.reduce_scatter_tensor(tensor, op, async_op=async_op, out=out.view)
    if async_op:
        wait_if(returned[1], True)
    whole = reduced([inputs(seed, r, (2 * n, 3), dtype) for r in range(n)], op)
    out.result(whole[2 * me : 2 * me + 2])
    out.check(f"reduce_scatter_tensor {op} {dtype}")
    np.testing.assert_array_equal(kit.numpy(tensor), mine, "the input must be left unchanged")


def check_all_reduce_coalesced(kit: Any, op: str, dtype: str, async_op: bool) -> None:
    """all_reduce_coalesced of three views (one buffer or one call each, as the backend's
    coalesce rule says), then the same in a coalescing_manager block."""
    seed, shapes = f"bitwise-coalesced-{op}-{dtype}-{async_op}", [(3, 4), (2, 2), (5, 1)]
    for form in ("all_reduce_coalesced", "coalescing_manager"):
        views = [
            placed(kit, inputs(f"{seed}-{form}-{i}", rank(), s, dtype), dtype)
            for i, s in enumerate(shapes)
        ]
        if form == "all_reduce_coalesced":
            work = compat.all_reduce_coalesced([v.view for v in views], op, async_op=async_op)
            wait_if(work, async_op)
        else:
            with compat.coalescing_manager():
                for item in views:
                    assert compat.all_reduce(item.view, op) is None
        for i, (item, shape) in enumerate(zip(views, shapes, strict=True)):
            arrays = [inputs(f"{seed}-{form}-{i}", r, shape, dtype) for r in range(world())]
            item.result(reduced(arrays, op))
            item.check(f"{form} [{i}] {op} {dtype}")


CHECKS = {
    "all_reduce": check_all_reduce,
    "reduce": check_reduce,
    "reduce_scatter": check_reduce_scatter,
    "reduce_scatter_tensor": check_reduce_scatter_tensor,
    "all_reduce_coalesced": check_all_reduce_coalesced,
}

for _name, _check in CHECKS.items():
    for _op in BITWISE_OPS:
        register(f"bitwise[{_name}-{_op}]", partial(each_dtype, check=_check, op=_op))
        register(
            f"bitwise_bool[{_name}-{_op}]",
            partial(on_bool, check=_check, op=_op),
            frameworks=("torch",),
        )
