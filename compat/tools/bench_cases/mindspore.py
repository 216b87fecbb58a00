"""``compat bench``'s native calls on MindSpore: the data and the calls MindSpore lacks or spells
its own way (see :mod:`compat.tools.bench_cases`). On MCCL (CPU), where MindSpore has no kernel
for an op, "native" is the best-known plain approach, and the description says so."""

from __future__ import annotations

from collections.abc import Callable

import mindspore as ms
import mindspore.mint.distributed as dist
from mindspore import mint

from compat.base import tables
from compat.base.adapter import Adapter
from compat.tools.bench_cases import SHARED, Buffers, Builder, Framework, NativeCase

_NAME = "mindspore.mint.distributed"


def _tensors(adapter: Adapter, dtype: str) -> Callable[..., ms.Tensor]:
    kind = getattr(ms, tables.lookup("dtypes", "dtypes", dtype, "mindspore"))

    def new(count: int, ones: bool = False) -> ms.Tensor:
        return (mint.ones if ones else mint.zeros)((count,), dtype=kind)

    return new


def _on_mccl(b: Buffers) -> bool:
    return b.adapter.home_device() == "CPU"


def _reduce_scatter(b: Buffers) -> NativeCase:
    # Both forms: all_reduce the input in place (no copy: the reference is as cheap as it can be;
    # zeros keep its values fixed) and keep this rank's slice.
    x, out, rows, rank = b.new(b.rows * b.world), b.new(b.rows), b.rows, b.rank

    def all_reduce_slice() -> ms.Tensor:
        dist.all_reduce(x)
        return x[rank * rows : (rank + 1) * rows]

    description = (
        f"{_NAME}.all_reduce of the input in place + slice (MCCL has no reduce_scatter kernel; "
        "the best-known plain approach)"
        if _on_mccl(b)
        else "all_reduce in place + slice"
    )
    return b.case("reduce_scatter", x, out, all_reduce_slice, description)


def _all_gather_into_tensor(b: Buffers) -> NativeCase:
    x, out = b.new(b.rows, True), b.new(b.rows * b.world)

    def all_gather_cat() -> ms.Tensor:
        gathered = b.lists()
        dist.all_gather(gathered, x)
        return mint.cat(gathered)

    description = (
        f"list {_NAME}.all_gather + cat (MCCL has no all_gather_into_tensor kernel)"
        if _on_mccl(b)
        else "list all_gather + cat"
    )
    return b.case("all_gather_into_tensor", x, out, all_gather_cat, description)


def _reduce(b: Buffers) -> NativeCase:
    if not _on_mccl(b):
        return SHARED["reduce"](b)
    x = b.new(b.rows * b.world)
    description = (
        f"{_NAME}.all_reduce in place (MCCL has no reduce kernel; the result lands on every rank)"
    )
    return b.case("reduce", x, None, lambda: dist.all_reduce(x), description)


def _all_reduce_coalesced(b: Buffers) -> NativeCase:
    # n tensors of their own: compat stages a MindSpore view (the adapter cannot hand MCCL one),
    # and the plain approach would time that staging, not the calls.
    parts = b.lists()

    def each() -> None:
        for part in parts:
            dist.all_reduce(part)

    return b.case("all_reduce_coalesced", parts, None, each)


def _ordered_exchange(
    b: Buffers, sent: list[ms.Tensor], received: list[ms.Tensor]
) -> Callable[[], None]:
    """all_to_all as blocking send/recv with each peer in rank order, the lower rank sending
    first (so no two blocking calls wait on each other), this rank's own part copied."""
    adapter, rank = b.adapter, b.rank

    def exchange() -> None:
        adapter.copy_(received[rank], sent[rank])
        for peer in range(b.world):
            if peer < rank:
                adapter.recv(received[peer], peer, None)
                adapter.send(sent[peer], peer, None)
            elif peer > rank:
                adapter.send(sent[peer], peer, None)
                adapter.recv(received[peer], peer, None)

    return exchange


_ORDERED = (
    "ordered blocking send/recv per pair of ranks, the lower rank sending first (MCCL has no "
    "all_to_all kernel)"
)


def _all_to_all_single(b: Buffers) -> NativeCase:
    if not _on_mccl(b):
        return SHARED["all_to_all_single"](b)
    x, out = b.new(b.rows * b.world, True), b.new(b.rows * b.world)
    sent, received = (b.adapter.split(t, [b.rows] * b.world) for t in (x, out))
    return b.case("all_to_all_single", x, out, _ordered_exchange(b, sent, received), _ORDERED)


def _all_to_all(b: Buffers) -> NativeCase:
    if not _on_mccl(b):
        return SHARED["all_to_all"](b)
    ins, outs = b.lists(True), b.lists()
    return b.case("all_to_all", ins, outs, _ordered_exchange(b, ins, outs), _ORDERED)


def _batch_isend_irecv(b: Buffers) -> NativeCase:
    if not _on_mccl(b):
        return SHARED["batch_isend_irecv"](b)
    # MindSpore registers no DistCommBatchIsendIrecv kernel on CPU: isend_irecv's calls.
    case = SHARED["isend_irecv"](b)
    description = f"{_NAME}.isend + irecv, then wait (MCCL has no batch kernel)"
    return NativeCase(case.input, case.output, case.call, description)


def _barrier(b: Buffers) -> NativeCase:
    # Issued async and waited for by the queue's sync, as compat's own barrier is: the
    # synchronous barrier calls mindspore.runtime.synchronize(), which on CPU only logs
    # "[ERROR] ... CPU device is not supported".
    return b.case("barrier", None, None, lambda: dist.barrier(async_op=True))


def _monitored_barrier(b: Buffers) -> NativeCase:
    case = _barrier(b)
    description = (
        f"{_NAME}.barrier (async, then the queue's sync; MindSpore has no monitored_barrier)"
    )
    return NativeCase(None, None, case.call, description)


_OWN: dict[str, Builder] = {
    "reduce_scatter_tensor": _reduce_scatter,
    "reduce_scatter": _reduce_scatter,
    "all_gather_into_tensor": _all_gather_into_tensor,
    "reduce": _reduce,
    "all_reduce_coalesced": _all_reduce_coalesced,
    "all_to_all_single": _all_to_all_single,
    "all_to_all": _all_to_all,
    "batch_isend_irecv": _batch_isend_irecv,
    "barrier": _barrier,
    "monitored_barrier": _monitored_barrier,
}

_DESCRIPTIONS = {
    "all_reduce_coalesced": "{name}.all_reduce per tensor (MindSpore has no coalesced call)",
    "batch_isend_irecv": "{name}.batch_isend_irecv (next rank, previous)",
    "send_recv": "{name}.send to the next rank + recv from the previous (even ranks send first, "
    "odd ranks receive first), then the queue's sync",
    "barrier": "{name}.barrier (async, then the queue's sync)",
}

FRAMEWORK = Framework(
    dist,
    _NAME,
    _tensors,
    ("isend", "irecv"),
    asynchronous=True,
    own=_OWN,
    descriptions=_DESCRIPTIONS,
)
