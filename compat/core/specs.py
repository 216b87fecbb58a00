"""Each collective described once: the roles of its arguments, the capability entry its common
case runs (``mapping_tables/capabilities.toml``), and what the pre-flight check compares.

:func:`compat.core.common.compile_spec` makes each collective's common case (a synchronous call
on the world with dense tensors of a type seen before) from its :class:`Spec`, once; the public
functions in :mod:`compat.collectives` hand it their arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Roles of ``out``: no out tensor; a tensor of the input's dtype and shape (all_to_all_single,
#: required); the input's dim 0 split in world-size parts (made when None); the inputs of every
#: rank concatenated on dim 0 (made when None); one tensor like the input per rank.
NO_OUT, SAME, PART, WHOLE, PER_RANK = "none", "same", "part", "whole", "per_rank"
#: Roles of ``items``: none; one tensor like the input per rank; that list on the root and None
#: elsewhere; the input's equal parts, read on the root only; the equal split sizes of dim 0.
NO_ITEMS, EVERY_RANK, ON_ROOT, PARTS_ON_ROOT, EVEN_SIZES = (
    "none", "every_rank", "on_root", "parts_on_root", "even_sizes",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Spec:
    """One collective: ``name`` as the pre-flight check names it, ``agree`` what it compares,
    ``capability`` what its common case runs, and its argument roles. ``issue`` calls the
    chosen callable ``run`` with the roles ``(tensor, out, items, op, root)`` in the order it
    takes them, then the world's handle and ``async_op`` False."""

    name: str
    agree: tuple[str, ...]
    capability: str
    issue: Callable[[Any, Any, Any, Any, Any, Any, Any], Any]
    out: str = NO_OUT
    items: str = NO_ITEMS
    reduces: bool = False
    rooted: bool = False
    #: the input needs a dim 0 (it is split or concatenated on it)
    dim0: bool = False
    #: the choice by size sees world-size copies of the input (list forms)
    copies: bool = False
    #: the choice by size sees ``out``'s size, not the input's (scatter_tensor: one part)
    sized_by_out: bool = False
    #: the capability that runs instead where the ``items`` list tiles one buffer
    joined: str = ""


ALL_REDUCE = Spec(
    "all_reduce", ("op", "dtype", "shape"), "all_reduce",
    lambda run, t, out, items, op, root, world: run(t, op, world, False),
    reduces=True,
)  # fmt: skip
BROADCAST = Spec(
    "broadcast", ("dtype", "shape", "root"), "broadcast",
    lambda run, t, out, items, op, root, world: run(t, root, world, False),
    rooted=True,
)  # fmt: skip
REDUCE = Spec(
    "reduce", ("op", "dtype", "shape", "root"), "reduce",
    lambda run, t, out, items, op, root, world: run(t, root, op, world, False),
    reduces=True, rooted=True,
)  # fmt: skip
ALL_GATHER = Spec(
    "all_gather", ("dtype", "trailing", "sizes"), "all_gather",
    lambda run, t, out, items, op, root, world: run(out, t, world, False),
    out=PER_RANK,
)  # fmt: skip
ALL_GATHER_INTO_TENSOR = Spec(
    "all_gather_into_tensor", ("dtype", "trailing", "sizes", "dim"), "all_gather_into_tensor",
    lambda run, t, out, items, op, root, world: run(out, t, world, False),
    out=WHOLE, dim0=True,
)  # fmt: skip
REDUCE_SCATTER = Spec(
    "reduce_scatter", ("op", "dtype", "trailing", "sizes"), "reduce_scatter",
    lambda run, t, out, items, op, root, world: run(t, items, op, world, False),
    items=EVERY_RANK, reduces=True, copies=True, joined="reduce_scatter_tensor",
)  # fmt: skip
REDUCE_SCATTER_TENSOR = Spec(
    "reduce_scatter_tensor", ("op", "dtype", "shape", "sizes", "dim"), "reduce_scatter_tensor",
    lambda run, t, out, items, op, root, world: run(out, t, op, world, False),
    out=PART, reduces=True, dim0=True,
)  # fmt: skip
SCATTER = Spec(
    "scatter", ("dtype", "shape", "root"), "scatter",
    lambda run, t, out, items, op, root, world: run(t, items, root, world, False),
    items=ON_ROOT, rooted=True,
)  # fmt: skip
SCATTER_TENSOR = Spec(
    "scatter_tensor", ("dtype", "shape", "root"), "scatter",
    lambda run, t, out, items, op, root, world: run(out, items, root, world, False),
    out=PART, items=PARTS_ON_ROOT, rooted=True, dim0=True, sized_by_out=True,
)  # fmt: skip
GATHER = Spec(
    "gather", ("dtype", "shape", "root"), "gather",
    lambda run, t, out, items, op, root, world: run(t, items, root, world, False),
    items=ON_ROOT, rooted=True,
)  # fmt: skip
ALL_TO_ALL_SINGLE = Spec(
    "all_to_all_single", ("dtype", "trailing"), "all_to_all_single",
    lambda run, t, out, items, op, root, world: run(out, t, items, items, world, False),
    out=SAME, items=EVEN_SIZES, dim0=True,
)  # fmt: skip
ALL_TO_ALL = Spec(
    "all_to_all", ("dtype", "trailing"), "all_to_all",
    lambda run, t, out, items, op, root, world: run(out, items, world, False),
    out=PER_RANK, items=EVERY_RANK, dim0=True, copies=True,
)  # fmt: skip
#: Every collective's spec, by name (the pre-flight check reads ``agree`` here).
SPECS: dict[str, Spec] = {
    spec.name: spec
    for spec in (
        ALL_REDUCE, BROADCAST, REDUCE, ALL_GATHER, ALL_GATHER_INTO_TENSOR, REDUCE_SCATTER,
        REDUCE_SCATTER_TENSOR, SCATTER, SCATTER_TENSOR, GATHER, ALL_TO_ALL_SINGLE, ALL_TO_ALL,
    )
}  # fmt: skip


class _DefaultRank(int):
    """The default ``src=0``/``dst=0`` of scatter, scatter_tensor and gather: 0, but told apart
    from a 0 the caller passed, so that ``group_src=``/``group_dst=`` alone is accepted and both
    together are refused, as in torch 2.13 (whose default is None)."""

    __slots__ = ()


#: The default root of scatter, scatter_tensor and gather (see :class:`_DefaultRank`).
DEFAULT_ROOT = _DefaultRank(0)
