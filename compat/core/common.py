"""The common case of every collective, in one place: a synchronous call on the world, with
dense, non-empty tensors of a type seen before, a reduction and a root that passed before, and
no pre-flight check or deferred receive in the way. :func:`run` reads the collective's
:class:`compat.core.specs.Spec`, checks the common case without building any message, and runs
the capability table's choice, kept by (collective, dtype); anything else returns
:data:`FALL_THROUGH`, and the public function takes the general path (:class:`Call`), which
checks every argument and says what is wrong.

Right after a collective compat's Python runs cold while the other ranks wait, so the common
case reads each fact once and calls as little as it can (``compat bench -n 1`` prints compat's
own work per call; docs/performance.md explains it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compat.algorithms import deferred_sources
from compat.base.adapter import Tensor, TensorFacts
from compat.base.types import WORLD
from compat.core import state
from compat.core.specs import (
    DEFAULT_ROOT,
    EVERY_RANK,
    NO_ITEMS,
    NO_OUT,
    ON_ROOT,
    PART,
    PARTS_ON_ROOT,
    PER_RANK,
    SAME,
    WHOLE,
    Spec,
)

#: What :func:`run` returns where the call is not the common case.
FALL_THROUGH: Any = object()


def may_run(current: state.State, group: object, async_op: object) -> bool:
    """Whether a collective may take the common case on dispatch's side: synchronous, on the
    world, without the pre-flight check, and no deferred receive waiting (a collective would
    take its message: :meth:`compat.core.call.Call.issue`)."""
    return (
        async_op is False
        and (group is None or group is WORLD)
        and not current.check
        and not deferred_sources(current.adapter)
    )


def run(
    spec: Spec,
    tensor: Tensor,
    group: object,
    async_op: object,
    out: Any = None,
    items: Any = None,
    op: object = None,
    root: object = None,
    group_root: object = None,
) -> Any:
    """Run ``spec``'s common case with these roles: its result (``out`` for a functional form,
    else None), or FALL_THROUGH where any argument is not the common case."""
    current = state.current()
    if not may_run(current, group, async_op):
        return FALL_THROUGH
    checks = current.checks
    plain = checks.plain_tensor(tensor, out if spec.out in (SAME, PART, WHOLE) else None)
    if plain is None:
        return FALL_THROUGH
    facts, out_facts = plain
    dtype, shape = facts
    if spec.reduces:
        op = checks.known_reduction(op, dtype)
        if op is None:
            return FALL_THROUGH
    if spec.rooted:
        root = 0 if root is DEFAULT_ROOT else root
        if not checks.plain_root(root, group_root):
            return FALL_THROUGH
    count = current.world_size
    if spec.dim0 and not shape:
        return FALL_THROUGH
    out = _out(spec, current, tensor, out, out_facts, facts)
    if out is FALL_THROUGH:
        return FALL_THROUGH
    items = _items(spec, current, tensor, items, root, facts)
    if items is FALL_THROUGH:
        return FALL_THROUGH
    capability, copies = spec.capability, count if spec.copies else 1
    if spec.joined:
        # One part (a world of one) is the whole; plain_list found it dense.
        whole = items[0] if count == 1 else current.adapter.joined(items)
        if whole is not None:  # equal parts of one buffer (x.chunk(n)): the tensor form
            capability, items = spec.joined, whole
    sized = (shape[0] // count, *shape[1:]) if spec.sized_by_out else shape
    chosen = current.world_implementation(capability, tensor, dtype, copies, sized)
    assert spec.arguments is not None
    chosen(*spec.arguments(tensor, out, items, op, root), current.world.handle, False)
    return out if spec.returns_out else None


def _out(
    spec: Spec,
    current: state.State,
    tensor: Tensor,
    out: Any,
    out_facts: TensorFacts | None,
    facts: TensorFacts,
) -> Any:
    """``out`` as the common case takes it (made where the form makes it), or FALL_THROUGH."""
    role = spec.out
    if role == NO_OUT:
        return out
    if role == PER_RANK:
        outputs = current.checks.plain_list(out, facts)
        return FALL_THROUGH if outputs is None else outputs
    if role == SAME:
        return out if out_facts == facts else FALL_THROUGH
    dtype, shape = facts
    count = current.world_size
    if role == PART and shape[0] % count:
        return FALL_THROUGH
    expected = (shape[0] // count if role == PART else shape[0] * count, *shape[1:])
    if out is None:
        return current.adapter.empty(expected, tensor)
    return out if out_facts == (dtype, expected) else FALL_THROUGH


def _items(
    spec: Spec,
    current: state.State,
    tensor: Tensor,
    items: Any,
    root: Any,
    facts: TensorFacts,
) -> Any:
    """``items`` as the common case takes them, or FALL_THROUGH."""
    role = spec.items
    if role == NO_ITEMS:
        return items
    if role == EVERY_RANK:
        listed = current.checks.plain_list(items, facts, tensor)
        return FALL_THROUGH if listed is None else listed
    if role == ON_ROOT:
        if current.rank != root:
            return None if items is None else FALL_THROUGH
        listed = current.checks.plain_list(items, facts)
        return FALL_THROUGH if listed is None else listed
    count, rows = current.world_size, facts.shape[0] if facts.shape else 0
    if role == PARTS_ON_ROOT:  # _out found dim 0 divisible (the out is a part)
        return (
            current.adapter.parts(tensor, [rows // count] * count) if current.rank == root else None
        )
    return FALL_THROUGH if rows % count else [rows // count] * count  # EVEN_SIZES


def point_to_point(
    capability: str, tensor: Tensor, peer: object, group: object, tag: object, group_peer: object
) -> Callable[..., Any] | None:
    """What runs a point-to-point call's common case (on the world, another rank's global
    rank as an int, tag 0, a dense, non-empty tensor of a type seen before, of a supported
    dtype), else None: the general path."""
    current = state.current()
    dtype = current.checks.plain_point_to_point(tensor, peer, group, tag, group_peer)
    if dtype is None:
        return None
    return current.world_implementation(capability, tensor, dtype)
