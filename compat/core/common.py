"""The common case of every collective, in one place: a synchronous call on the world, with
dense, non-empty tensors of a type seen before, a reduction and a root that passed before, and
no pre-flight check or deferred receive in the way. Each public collective runs its common case
first, made once from its :class:`compat.core.specs.Spec` by :func:`compile_spec`::

    collective(tensor, ...)                         compat/collectives.py
      └─ its common case                            compile_spec(SPEC), made at import
           tensor_facts   synchronous, on the world, nothing waiting, no block open; the
                          tensor dense, of a type and dtype seen before: its (dtype, shape)
           op             a reduction seen before with that dtype   (reducing collectives)
           _global_root   a global rank of the world, given as such (rooted collectives)
           out, items     the steps of the spec's roles (_OUT_STEPS, _ITEMS_STEPS)
           choose         State.world_implementation: the table's choice, kept by
                          (collective, dtype)
           issue          the spec calls the choice with the roles in its order
      └─ FALL_THROUGH: the general path (compat.core.call.Call), which checks every argument
         and says what is wrong

The steps of each role are chosen when the spec is compiled, so a call reads no spec field and
calls no step for a role its collective does not have: right after a collective compat's Python
runs cold while the other ranks wait, so the common case reads each fact once and calls as
little as it can (``compat bench -n 1`` prints compat's own work per call; docs/performance.md
explains it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compat.algorithms.deferred import WAITING
from compat.base.adapter import Tensor, TensorFacts
from compat.base.types import WORLD
from compat.core import state
from compat.core.coalescing import OPEN
from compat.core.specs import (
    DEFAULT_ROOT,
    EVEN_SIZES,
    EVERY_RANK,
    ON_ROOT,
    PART,
    PARTS_ON_ROOT,
    PER_RANK,
    SAME,
    WHOLE,
    Spec,
)

#: What a common case returns where the call is not the common case.
FALL_THROUGH: Any = object()

#: A collective's common case: ``(tensor, group, async_op, out=, items=, op=, root=,
#: group_root=)`` -> ``out`` as the call took it (a functional form's result), or FALL_THROUGH.
CommonCase = Callable[..., Any]
#: The step of ``out``'s role: ``(current, tensor, out, facts)`` -> ``out`` as the chosen
#: callable takes it (made where the form makes it), or FALL_THROUGH.
OutStep = Callable[[state.State, Tensor, Any, TensorFacts], Any]
#: The step of ``items``' role: ``(current, tensor, items, root, facts)`` -> the items as the
#: chosen callable takes them, or FALL_THROUGH.
ItemsStep = Callable[[state.State, Tensor, Any, Any, TensorFacts], Any]


def compile_spec(spec: Spec) -> CommonCase:
    """``spec``'s common case, as the module docstring draws it."""
    out_step, capability = _OUT_STEPS.get(spec.out), spec.capability
    items_step = _every_rank_joined if spec.joined else _ITEMS_STEPS.get(spec.items)
    reduces, rooted, dim0, copies = spec.reduces, spec.rooted, spec.dim0, spec.copies
    joined, sized_by_out, issue = spec.joined, spec.sized_by_out, spec.issue

    def common_case(
        tensor: Tensor, group: object, async_op: object, out: Any = None, items: Any = None,
        op: object = None, root: Any = None, group_root: object = None,
    ) -> Any:  # fmt: skip
        current = state.current()
        facts = tensor_facts(current, tensor, group, async_op, dim0)
        # The steps of the spec's roles in turn: any that is not the common case falls through.
        if (
            facts is None
            or (reduces and (op := current.checks.known_reduction(op, facts[0])) is None)
            or (rooted and (root := _global_root(current, root, group_root)) is FALL_THROUGH)
            or (out_step and (out := out_step(current, tensor, out, facts)) is FALL_THROUGH)
            or (
                items_step
                and (items := items_step(current, tensor, items, root, facts)) is FALL_THROUGH
            )
        ):
            return FALL_THROUGH
        (dtype, shape), count = facts, current.world_size
        if sized_by_out:  # the choice by size sees one part, out's
            shape = (shape[0] // count, *shape[1:])
        # Parts that tile one buffer (_every_rank_joined) run as the tensor form.
        name = joined if joined and type(items) is not list else capability
        run = current.world_implementation(name, tensor, dtype, count if copies else 1, shape)
        issue(run, tensor, out, items, op, root, current.world.handle)
        return out

    return common_case


def _global_root(current: state.State, root: Any, group_root: object) -> Any:
    """A rooted call's root where it is the common case, a global rank of the world given as an
    int (or the default 0) and no group rank; else FALL_THROUGH."""
    root = 0 if root is DEFAULT_ROOT else root
    if group_root is None and type(root) is int and 0 <= root < current.world_size:
        return root
    return FALL_THROUGH


def tensor_facts(
    current: state.State, tensor: Tensor, group: object, async_op: object, dim0: bool = False
) -> TensorFacts | None:
    """``tensor``'s (dtype, shape) where the call may take the common case, else None: it is
    synchronous, on the world, without the pre-flight check, no deferred receive waits (the
    collective would take its message: :meth:`compat.core.call.Call.issue`), no
    coalescing_manager block is open (:mod:`compat.core.coalescing`), and the tensor is
    dense, non-empty, of a type seen before and a dtype the backend takes (with a dim 0 where
    the collective splits or joins on it)."""
    checks = current.checks
    if (
        async_op is not False
        or (group is not None and group is not WORLD)
        or current.check
        or current.adapter in WAITING
        or OPEN
        or type(tensor) not in checks.tensor_types
    ):
        return None
    facts = current.adapter.dense_facts(tensor)
    if facts is None or facts[0] not in checks.dtypes_ok or (dim0 and not facts[1]):
        return None
    return facts


# -- the steps of out's roles -------------------------------------------------------------------
def _same(current: state.State, tensor: Tensor, out: Any, facts: TensorFacts) -> Any:
    """An out of the input's dtype and shape (all_to_all_single: given)."""
    return out if _out_facts(current, out) == facts else FALL_THROUGH


def _part(current: state.State, tensor: Tensor, out: Any, facts: TensorFacts) -> Any:
    """An out of one of the input's world-size parts of dim 0 (made where None)."""
    dtype, shape = facts
    count = current.world_size
    if shape[0] % count:
        return FALL_THROUGH
    part = (shape[0] // count, *shape[1:])
    if out is None:
        return current.adapter.empty(part, tensor)
    return out if _out_facts(current, out) == (dtype, part) else FALL_THROUGH


def _whole(current: state.State, tensor: Tensor, out: Any, facts: TensorFacts) -> Any:
    """An out of every rank's input, concatenated on dim 0 (made where None)."""
    dtype, shape = facts
    whole = (shape[0] * current.world_size, *shape[1:])
    if out is None:
        return current.adapter.empty(whole, tensor)
    return out if _out_facts(current, out) == (dtype, whole) else FALL_THROUGH


def _out_facts(current: state.State, out: Any) -> TensorFacts | None:
    """A given out's (dtype, shape) where it is dense, of a type seen before; another dtype or
    shape than the call needs is the general path's to refuse."""
    return current.adapter.dense_facts(out) if type(out) in current.checks.tensor_types else None


def _per_rank(current: state.State, tensor: Tensor, out: Any, facts: TensorFacts) -> Any:
    """One tensor like the input per rank."""
    outputs = current.checks.plain_list(out, facts)
    return FALL_THROUGH if outputs is None else outputs


_OUT_STEPS: dict[str, OutStep] = {SAME: _same, PART: _part, WHOLE: _whole, PER_RANK: _per_rank}


# -- the steps of items' roles ------------------------------------------------------------------
def _every_rank(
    current: state.State, tensor: Tensor, items: Any, root: Any, facts: TensorFacts
) -> Any:
    """One tensor like the input per rank (the input among them need not be read again)."""
    listed = current.checks.plain_list(items, facts, tensor)
    return FALL_THROUGH if listed is None else listed


def _every_rank_joined(
    current: state.State, tensor: Tensor, items: Any, root: Any, facts: TensorFacts
) -> Any:
    """One tensor like the input per rank; where they are the equal parts of one buffer
    (``x.chunk(n)``), that buffer, on which the collective's tensor form runs."""
    listed = current.checks.plain_list(items, facts)
    if listed is None:
        return FALL_THROUGH
    # One part (a world of one) is the whole; plain_list found it dense.
    whole = listed[0] if len(listed) == 1 else current.adapter.joined(listed)
    return listed if whole is None else whole


def _on_root(
    current: state.State, tensor: Tensor, items: Any, root: Any, facts: TensorFacts
) -> Any:
    """One tensor like the input per rank on the root, None elsewhere."""
    if current.rank != root:
        return None if items is None else FALL_THROUGH
    listed = current.checks.plain_list(items, facts)
    return FALL_THROUGH if listed is None else listed


def _parts_on_root(
    current: state.State, tensor: Tensor, items: Any, root: Any, facts: TensorFacts
) -> Any:
    """The input's equal parts of dim 0 on the root (the out step found it divisible), None
    elsewhere."""
    if current.rank != root:
        return None
    count = current.world_size
    return current.adapter.parts(tensor, [facts[1][0] // count] * count)


def _even_sizes(
    current: state.State, tensor: Tensor, items: Any, root: Any, facts: TensorFacts
) -> Any:
    """The equal split sizes of the input's dim 0."""
    rows, count = facts[1][0], current.world_size
    return FALL_THROUGH if rows % count else [rows // count] * count


_ITEMS_STEPS: dict[str, ItemsStep] = {
    EVERY_RANK: _every_rank,
    ON_ROOT: _on_root,
    PARTS_ON_ROOT: _parts_on_root,
    EVEN_SIZES: _even_sizes,
}


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
