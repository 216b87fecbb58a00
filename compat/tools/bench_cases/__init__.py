"""``compat bench``'s native calls: per op, the buffers both timed calls share and the
framework's own call on them.

Both frameworks spell most collectives alike (``torch.distributed`` and
``mindspore.mint.distributed``), so one builder per op serves both, through the framework's
:class:`Framework` (its distributed module and what it spells otherwise). A framework's module
here (``bench_cases/<framework>.py``, loaded by :func:`native_case` on first use) holds that data
and the builders of the ops it lacks or calls differently: there, "native" is the best-known
plain approach, and the description says so.

Buffers hold values the op leaves unchanged (zeros where it sums); roots are rank 0; a root-only
list is None on the other ranks. The shapes, by op (``rows`` elements per rank, n ranks):

- reduce_scatter_tensor, reduce_scatter: input ``rows * n`` elements, output ``rows``;
- all_reduce, broadcast, reduce: input ``rows * n`` elements, output None;
- all_gather_into_tensor: input ``rows``, output ``rows * n``; all_gather: input ``rows``,
  output a list of n tensors of ``rows``;
- scatter: input a list of n tensors of ``rows`` (root), output ``rows``; scatter_tensor: input
  ``rows * n`` (sliced on each call, as compat splits it), output ``rows``; gather: input
  ``rows``, output a list of n tensors of ``rows`` (root);
- all_to_all_single: input and output ``rows * n``; all_to_all: lists of n tensors of ``rows``;
  all_reduce_coalesced: input a list of n tensors of ``rows``, output None;
- isend_irecv, batch_isend_irecv, send_recv: input (sent to the next rank) and output (received
  from the previous) ``rows * n`` elements each;
- barrier, monitored_barrier: None, None;
- all_gather_object and gather_object: input a ``bytes`` object of ``rows * itemsize`` bytes,
  output a list of n entries (gather_object: root); broadcast_object_list: input None, output
  the list ``[bytes of rows * n * itemsize]`` (root) or ``[None]``; scatter_object_list: input a
  list of n such ``bytes`` of ``rows * itemsize`` (root), output ``[None]``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from compat.base import tables
from compat.base.adapter import Adapter


@dataclass(frozen=True)
class NativeCase:
    """One op at one size: the buffers, the native call on them (it returns once the call has
    completed), and what that call is (bench's header and CSV)."""

    input: Any
    output: Any
    call: Callable[[], object]
    description: str


@dataclass(frozen=True)
class Buffers:
    """What a builder works with: the framework, the adapter, this rank's place, the op's size."""

    framework: Framework
    adapter: Adapter
    rank: int
    world: int
    rows: int
    itemsize: int
    #: ``new(count, ones=False)``: a new 1-d tensor of the dtype on the home device, zeros or ones
    new: Callable[..., Any]

    @property
    def dist(self) -> Any:
        return self.framework.dist

    @property
    def root(self) -> bool:
        return self.rank == 0

    def lists(self, ones: bool = False) -> list[Any]:
        """n new tensors of ``rows`` elements."""
        return [self.new(self.rows, ones) for _ in range(self.world)]

    def settled(self, call: Callable[[], object]) -> Callable[[], object]:
        """``call``, then the adapter's synchronize where the framework launches calls
        asynchronously (MindSpore: a call returns while its work is still queued)."""
        if not self.framework.asynchronous:
            return call
        synchronize = self.adapter.synchronize

        def run() -> None:
            call()
            synchronize()

        return run

    def case(
        self, op: str, input: Any, output: Any, call: Callable[[], object], description: str = ""
    ) -> NativeCase:
        """The case of ``op``: ``description``, else the framework's description of ``op``."""
        described = description or self.framework.describe(op)
        return NativeCase(input, output, self.settled(call), described)


Builder = Callable[[Buffers], NativeCase]


@dataclass(frozen=True)
class Framework:
    """What differs between the frameworks' native calls, as data."""

    #: the distributed module: torch.distributed, mindspore.mint.distributed
    dist: Any
    #: its name, which starts every description
    name: str
    #: ``new(adapter, dtype)``: the framework's ``new`` of :class:`Buffers` for a dtype name
    tensors: Callable[[Adapter, str], Callable[..., Any]]
    #: what P2POp takes for isend and irecv
    p2p_ops: tuple[Any, Any]
    #: calls return before their work has run (see :meth:`Buffers.settled`)
    asynchronous: bool = False
    #: builders of the ops the framework lacks or calls otherwise, replacing the shared ones
    own: dict[str, Builder] = field(default_factory=dict)
    #: descriptions that differ from the shared ones (:data:`DESCRIPTIONS`), ``{name}`` filled
    descriptions: dict[str, str] = field(default_factory=dict)

    def describe(self, op: str) -> str:
        own = self.descriptions.get(op)
        return (DESCRIPTIONS[op] if own is None else own).format(name=self.name)


#: What each shared call is, ``{name}`` the framework's distributed module.
DESCRIPTIONS = {
    "all_reduce": "{name}.all_reduce",
    "all_gather": "{name}.all_gather (a list of n tensors)",
    "broadcast": "{name}.broadcast (src 0)",
    "reduce": "{name}.reduce (dst 0)",
    "scatter": "{name}.scatter (src 0)",
    "scatter_tensor": "{name}.scatter of the root's tensor sliced in n (src 0)",
    "gather": "{name}.gather (dst 0)",
    "all_to_all_single": "{name}.all_to_all_single",
    "all_to_all": "{name}.all_to_all",
    "isend_irecv": "{name}.isend to the next rank + irecv from the previous, then wait",
    "batch_isend_irecv": "{name}.batch_isend_irecv of an isend to the next rank and an irecv "
    "from the previous, then wait",
    "send_recv": "{name}.send to the next rank + recv from the previous (even ranks send first, "
    "odd ranks receive first)",
    "barrier": "{name}.barrier",
    "all_gather_object": "{name}.all_gather_object",
    "broadcast_object_list": "{name}.broadcast_object_list (src 0)",
    "gather_object": "{name}.gather_object (dst 0)",
    "scatter_object_list": "{name}.scatter_object_list (src 0)",
}


def _all_reduce(b: Buffers) -> NativeCase:
    x = b.new(b.rows * b.world)
    return b.case("all_reduce", x, None, lambda: b.dist.all_reduce(x))


def _all_gather(b: Buffers) -> NativeCase:
    x, outs = b.new(b.rows, True), b.lists()
    return b.case("all_gather", x, outs, lambda: b.dist.all_gather(outs, x))


def _broadcast(b: Buffers) -> NativeCase:
    x = b.new(b.rows * b.world, True)
    return b.case("broadcast", x, None, lambda: b.dist.broadcast(x, 0))


def _reduce(b: Buffers) -> NativeCase:
    x = b.new(b.rows * b.world)
    return b.case("reduce", x, None, lambda: b.dist.reduce(x, 0))


# The rooted lists are [] on the other ranks: mint.distributed's scatter and gather take no None,
# torch's take either.
def _scatter(b: Buffers) -> NativeCase:
    parts, out = b.lists(True) if b.root else None, b.new(b.rows)
    return b.case("scatter", parts, out, lambda: b.dist.scatter(out, parts or [], src=0))


def _scatter_tensor(b: Buffers) -> NativeCase:
    # No framework's scatter takes one tensor (MindSpore's comm_func.scatter_tensor is
    # deprecated): what users write instead, the root's tensor sliced on each call, as compat
    # splits it on each call.
    x, out, rows = b.new(b.rows * b.world, True), b.new(b.rows), b.rows

    def sliced_scatter() -> None:
        parts = [x[i * rows : (i + 1) * rows] for i in range(b.world)] if b.root else []
        b.dist.scatter(out, parts, src=0)

    return b.case("scatter_tensor", x, out, sliced_scatter)


def _gather(b: Buffers) -> NativeCase:
    x, outs = b.new(b.rows, True), b.lists() if b.root else None
    return b.case("gather", x, outs, lambda: b.dist.gather(x, outs or [], dst=0))


def _all_to_all_single(b: Buffers) -> NativeCase:
    x, out = b.new(b.rows * b.world, True), b.new(b.rows * b.world)
    return b.case("all_to_all_single", x, out, lambda: b.dist.all_to_all_single(out, x))


def _all_to_all(b: Buffers) -> NativeCase:
    ins, outs = b.lists(True), b.lists()
    return b.case("all_to_all", ins, outs, lambda: b.dist.all_to_all(outs, ins))


# The ring exchanges, written once for any module with torch.distributed's point-to-point calls:
# the framework's (the native cases) and compat itself (bench's compat calls).
def ring_pairs(dist: Any, x: Any, out: Any, rank: int, world: int) -> Callable[[], None]:
    """isend ``x`` to the next rank and irecv ``out`` from the previous one, then wait for
    both."""
    following, previous = (rank + 1) % world, (rank - 1) % world

    def exchange() -> None:
        sending = dist.isend(x, dst=following)
        receiving = dist.irecv(out, src=previous)
        for work in (sending, receiving):
            if work is not None:
                work.wait()

    return exchange


def ring_batch(
    dist: Any, p2p_ops: tuple[Any, Any], x: Any, out: Any, rank: int, world: int
) -> Callable[[], None]:
    """The same exchange as one batch_isend_irecv (``p2p_ops``: what P2POp takes for isend and
    irecv), then a wait for each of its Works."""
    following, previous = (rank + 1) % world, (rank - 1) % world
    isend, irecv = p2p_ops
    ops = [dist.P2POp(isend, x, following), dist.P2POp(irecv, out, previous)]

    def exchange() -> None:
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    return exchange


def ring_send_recv(dist: Any, x: Any, out: Any, rank: int, world: int) -> Callable[[], None]:
    """Send ``x`` to the next rank and recv ``out`` from the previous, blocking: even ranks send
    first, odd ranks receive first, so no cycle of blocking calls forms."""
    following, previous = (rank + 1) % world, (rank - 1) % world

    def send_first() -> None:
        dist.send(x, dst=following)
        dist.recv(out, src=previous)

    def receive_first() -> None:
        dist.recv(out, src=previous)
        dist.send(x, dst=following)

    return send_first if rank % 2 == 0 else receive_first


def _ring(b: Buffers, op: str) -> NativeCase:
    x, out = b.new(b.rows * b.world, True), b.new(b.rows * b.world)
    if op == "batch_isend_irecv":
        exchange = ring_batch(b.dist, b.framework.p2p_ops, x, out, b.rank, b.world)
    else:
        exchange = (ring_pairs if op == "isend_irecv" else ring_send_recv)(
            b.dist, x, out, b.rank, b.world
        )
    return b.case(op, x, out, exchange)


def _barrier(b: Buffers) -> NativeCase:
    return b.case("barrier", None, None, lambda: b.dist.barrier())


def _all_gather_object(b: Buffers) -> NativeCase:
    obj, gathered = bytes(b.rows * b.itemsize), [None] * b.world
    return b.case(
        "all_gather_object", obj, gathered, lambda: b.dist.all_gather_object(gathered, obj)
    )


def _broadcast_object_list(b: Buffers) -> NativeCase:
    objects = [bytes(b.rows * b.world * b.itemsize) if b.root else None]
    broadcast = lambda: b.dist.broadcast_object_list(objects, 0)  # noqa: E731
    return b.case("broadcast_object_list", None, objects, broadcast)


def _gather_object(b: Buffers) -> NativeCase:
    obj = bytes(b.rows * b.itemsize)
    gathered = [None] * b.world if b.root else None
    return b.case("gather_object", obj, gathered, lambda: b.dist.gather_object(obj, gathered, 0))


def _scatter_object_list(b: Buffers) -> NativeCase:
    objects = [bytes(b.rows * b.itemsize) for _ in range(b.world)] if b.root else None
    out: list[Any] = [None]
    scatter = lambda: b.dist.scatter_object_list(out, objects, 0)  # noqa: E731
    return b.case("scatter_object_list", objects, out, scatter)


#: The builders both frameworks share, by op; a framework's ``own`` replaces or adds to them.
SHARED: dict[str, Builder] = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "broadcast": _broadcast,
    "reduce": _reduce,
    "scatter": _scatter,
    "scatter_tensor": _scatter_tensor,
    "gather": _gather,
    "all_to_all_single": _all_to_all_single,
    "all_to_all": _all_to_all,
    "isend_irecv": partial(_ring, op="isend_irecv"),
    "batch_isend_irecv": partial(_ring, op="batch_isend_irecv"),
    "send_recv": partial(_ring, op="send_recv"),
    "barrier": _barrier,
    "all_gather_object": _all_gather_object,
    "broadcast_object_list": _broadcast_object_list,
    "gather_object": _gather_object,
    "scatter_object_list": _scatter_object_list,
}


def framework(name: str) -> Framework:
    """The :class:`Framework` of ``name`` (``bench_cases/<name>.py``; imports that framework)."""
    found: Framework = importlib.import_module(f"{__name__}.{name}").FRAMEWORK
    return found


def builders(name: str) -> dict[str, Builder]:
    """Every op's builder on framework ``name``."""
    return SHARED | framework(name).own


def native_case(adapter: Adapter, op: str, rows: int, dtype: str) -> NativeCase:
    """``op``'s buffers and native call with ``rows`` elements per rank of the canonical
    ``dtype``, on the adapter's framework (after ``init``)."""
    spec = framework(adapter.framework)
    itemsize = int(tables.lookup("dtypes", "dtypes", dtype, "bytes"))
    new = spec.tensors(adapter, dtype)
    buffers = Buffers(spec, adapter, adapter.rank(), adapter.world_size(), rows, itemsize, new)
    return (SHARED | spec.own)[op](buffers)
