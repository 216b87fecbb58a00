"""``compat bench``'s native calls on torch: the data and the calls torch spells its own way
(see :mod:`compat.tools.bench_cases`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from compat.base import tables
from compat.base.adapter import Adapter
from compat.tools.bench_cases import Buffers, Builder, Framework, NativeCase

# torch 2.13 deprecates reduce_scatter_tensor and all_gather_into_tensor in favour of these names;
# older releases have only the old ones.
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
_all_gather_single = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)


def _tensors(adapter: Adapter, dtype: str) -> Callable[..., torch.Tensor]:
    kind = getattr(torch, tables.lookup("dtypes", "dtypes", dtype, "torch"))
    home = torch.device(adapter.home_device())

    def new(count: int, ones: bool = False) -> torch.Tensor:
        return (torch.ones if ones else torch.zeros)(count, dtype=kind, device=home)

    return new


def _reduce_scatter_tensor(b: Buffers) -> NativeCase:
    # One output buffer for both timed calls: separate ones differ in speed by where they lie in
    # memory.
    x, out = b.new(b.rows * b.world, True), b.new(b.rows)
    return b.case("reduce_scatter_tensor", x, out, lambda: _reduce_scatter_single(out, x))


def _reduce_scatter(b: Buffers) -> NativeCase:
    x, out = b.new(b.rows * b.world, True), b.new(b.rows)
    parts = list(x.chunk(b.world))
    return b.case("reduce_scatter", x, out, lambda: dist.reduce_scatter(out, parts))


def _all_gather_into_tensor(b: Buffers) -> NativeCase:
    x, out = b.new(b.rows, True), b.new(b.rows * b.world)
    return b.case("all_gather_into_tensor", x, out, lambda: _all_gather_single(out, x))


def _all_reduce_coalesced(b: Buffers) -> NativeCase:
    parts = list(b.new(b.rows * b.world).chunk(b.world))  # n dense views of one buffer
    return b.case("all_reduce_coalesced", parts, None, lambda: dist.all_reduce_coalesced(parts))


def _monitored_barrier(b: Buffers) -> NativeCase:
    return b.case("monitored_barrier", None, None, lambda: dist.monitored_barrier())


_OWN: dict[str, Builder] = {
    "reduce_scatter_tensor": _reduce_scatter_tensor,
    "reduce_scatter": _reduce_scatter,
    "all_gather_into_tensor": _all_gather_into_tensor,
    "all_reduce_coalesced": _all_reduce_coalesced,
    "monitored_barrier": _monitored_barrier,
}

_DESCRIPTIONS = {
    "reduce_scatter_tensor": "{name}.reduce_scatter_tensor (its torch 2.13 name "
    "reduce_scatter_single)",
    "reduce_scatter": "{name}.reduce_scatter (list of x.chunk(n))",
    "all_gather_into_tensor": "{name}.all_gather_into_tensor (its torch 2.13 name "
    "all_gather_single)",
    "all_reduce_coalesced": "{name}.all_reduce_coalesced (n tensors: x.chunk(n))",
    "monitored_barrier": "{name}.monitored_barrier (Gloo only)",
    "scatter_tensor": "{name}.scatter of x.chunk(n) (src 0; torch has no scatter_tensor)",
}

_P2P_OPS: tuple[Any, Any] = (dist.isend, dist.irecv)

FRAMEWORK = Framework(
    dist, "torch.distributed", _tensors, _P2P_OPS, own=_OWN, descriptions=_DESCRIPTIONS
)
