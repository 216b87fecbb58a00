"""int64 and float64 values that do not fit 32 bits (integers beyond 2**32, doubles that float32
rounds), moved and reduced by every collective that carries data: a path that narrows them
to 32 bits on the way gives a wrong answer without an error. MindSpore's CPU kernels of
ops.AllGather and ops.Broadcast do (capabilities.toml [mccl_primitives]); the other cases
draw small integers, which any width holds. Each result inside a sentinel-filled base.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import compat
from tests.ranks.cases import follow_up, rank, register, world
from tests.ranks.layout_cases import Placed, sentinel_out

WIDE_DTYPES = ("int64", "float64")
#: the layout of each dtype's views inside their bases
LAYOUT = {"int64": "column", "float64": "dense"}


def wide(seed: str, who: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Rank ``who``'s values: integers of up to 50 bits, either sign (exact in the float64 the
    sentinel bases are built from), or doubles of every magnitude float32 rounds."""
    rng = np.random.default_rng([zlib.crc32(f"{seed}-{dtype}".encode()), who])
    if dtype == "int64":
        return rng.integers(-(2**50), 2**50, size=shape).astype(np.float64)
    mantissa = 1 + rng.random(shape) * 2.0**-20  # bits below float32's 24
    return mantissa * 2.0 ** rng.integers(-60, 60, size=shape)


def placed(kit: Any, data: np.ndarray, dtype: str) -> Placed:
    """``data`` in a view of a sentinel-filled base (a 0-d tensor is its own base)."""
    return Placed(kit, data, dtype, LAYOUT[dtype] if data.ndim else "dense")


def out(kit: Any, shape: tuple[int, ...], dtype: str) -> Placed:
    return sentinel_out(kit, shape, dtype, LAYOUT[dtype])


def each_dtype(kit: Any, check: Callable[[Any, str], None]) -> None:
    for dtype in WIDE_DTYPES:
        check(kit, dtype)
    follow_up(kit)


def check_all_gather(kit: Any, dtype: str) -> None:
    parts = [out(kit, (2, 3), dtype) for _ in range(world())]
    compat.all_gather(
        [part.view for part in parts], kit.tensor(wide("ag", rank(), (2, 3), dtype), dtype)
    )
    for who, part in enumerate(parts):
        part.result(wide("ag", who, (2, 3), dtype))
        part.check(f"all_gather {dtype}, part {who}")


def check_all_gather_into_tensor(kit: Any, dtype: str) -> None:
    whole = out(kit, (2 * world(), 3), dtype)
    compat.all_gather_into(whole.view, kit.tensor(wide("agt", rank(), (2, 3), dtype), dtype))
    whole.result(np.concatenate([wide("agt", who, (2, 3), dtype) for who in range(world())]))
    whole.check(f"all_gather_into {dtype}")


def check_broadcast(kit: Any, dtype: str) -> None:
    for src in range(world()):
        for shape in ((3, 4), ()):  # a 0-d tensor too
            x = placed(kit, wide(f"bc{src}", rank(), shape, dtype), dtype)
            compat.broadcast(x.view, src)
            x.result(wide(f"bc{src}", src, shape, dtype))
            x.check(f"broadcast {dtype} {shape} from {src}")


def check_scatter_gather(kit: Any, dtype: str) -> None:
    root, me = world() - 1, rank()
    parts = [kit.tensor(wide("sc", who, (2, 3), dtype), dtype) for who in range(world())]
    received = out(kit, (2, 3), dtype)
    compat.scatter(received.view, parts if me == root else None, src=root)
    received.result(wide("sc", me, (2, 3), dtype))
    received.check(f"scatter {dtype}")
    gathered = [out(kit, (2, 3), dtype) for _ in range(world())] if me == root else []
    mine = kit.tensor(wide("ga", me, (2, 3), dtype), dtype)
    compat.gather(mine, [g.view for g in gathered] if me == root else None, dst=root)
    for who, part in enumerate(gathered):
        part.result(wide("ga", who, (2, 3), dtype))
        part.check(f"gather {dtype}, part {who}")


def check_all_reduce(kit: Any, dtype: str) -> None:
    """MAX (exact in every order), and SUM on int64 (exact too)."""
    for op in ("max", "sum") if dtype == "int64" else ("max",):
        x = placed(kit, wide(f"ar{op}", rank(), (3, 4), dtype), dtype)
        compat.all_reduce(x.view, op=op)
        arrays = [wide(f"ar{op}", who, (3, 4), dtype) for who in range(world())]
        x.result(np.max(arrays, axis=0) if op == "max" else np.sum(arrays, axis=0))
        x.check(f"all_reduce {op} {dtype}")


def check_reduce_scatter_tensor(kit: Any, dtype: str) -> None:
    n, me = world(), rank()
    part = out(kit, (2, 3), dtype)
    compat.reduce_scatter_into(
        part.view, kit.tensor(wide("rs", me, (2 * n, 3), dtype), dtype), "max"
    )
    most = np.max([wide("rs", who, (2 * n, 3), dtype) for who in range(n)], axis=0)
    part.result(most[2 * me : 2 * me + 2])
    part.check(f"reduce_scatter_into max {dtype}")


def check_all_to_all_single(kit: Any, dtype: str) -> None:
    n, me = world(), rank()
    received = out(kit, (2 * n, 3), dtype)
    compat.all_to_all_single(received.view, kit.tensor(wide("a2a", me, (2 * n, 3), dtype), dtype))
    sent = [wide("a2a", who, (2 * n, 3), dtype)[2 * me : 2 * me + 2] for who in range(n)]
    received.result(np.concatenate(sent))
    received.check(f"all_to_all_single {dtype}")


CHECKS = {
    "all_gather": check_all_gather,
    "all_gather_into_tensor": check_all_gather_into_tensor,
    "broadcast": check_broadcast,
    "scatter_gather": check_scatter_gather,
    "all_reduce": check_all_reduce,
    "reduce_scatter_tensor": check_reduce_scatter_tensor,
    "all_to_all_single": check_all_to_all_single,
}

for _name, _check in CHECKS.items():
    register(f"wide[{_name}]", partial(each_dtype, check=_check))
