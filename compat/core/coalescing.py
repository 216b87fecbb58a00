"""The blocks of :func:`compat.coalescing_manager` (torch's ``_coalescing_manager``): while a
block is open on a group, the collectives torch's manager collects (all_reduce,
all_gather_into_tensor and reduce_scatter_tensor, each in the forms that write into a given
output) are checked on the calling rank as always, then recorded here instead
of issued; the block's end issues them (:mod:`compat.collectives`). Other collectives run at
once, as under torch's manager.

:data:`OPEN` holds the open blocks by their group's handle (None: the world). The common case
(:func:`compat.core.common.tensor_facts`) falls through while any block is open, so its one
extra step outside a block is asking whether this dict is empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from compat.base.adapter import Tensor
from compat.base.types import Group, ReduceOp, Work, with_result

#: The open blocks, by their group's handle (None: the world).
OPEN: dict[object, Block] = {}

#: The kinds of call a block collects, by torch's names (compat's forms of each: all_reduce;
#: all_gather_into and all_gather_into_tensor with ``out``; reduce_scatter_into and
#: reduce_scatter_tensor with ``out``).
ALL_REDUCE, ALL_GATHER_INTO_TENSOR, REDUCE_SCATTER_TENSOR = (
    "all_reduce",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
)


class Block:
    """The calls one block has recorded, all of one kind (and one reduction), in issue order."""

    __slots__ = ("async_ops", "group", "issues", "kind", "op", "reductions", "work")

    def __init__(self, group: Group, async_ops: bool) -> None:
        self.group, self.async_ops = group, async_ops
        self.kind: str | None = None
        self.op: ReduceOp | None = None
        #: all_reduce's calls: (tensor, dtype), reduced together at the block's end
        self.reductions: list[tuple[Tensor, str]] = []
        #: the other kinds' calls, each issued (asynchronously) at the block's end, in order
        self.issues: list[Callable[[], Work | None]] = []
        #: what the block's end issued; None until then
        self.work: Work | None = None

    def join(self, kind: str, op: ReduceOp | None = None) -> None:
        """Refuse, before anything is recorded or sent, a call of another kind (or reduction)
        than the block's first: torch batches one kind per block."""
        if self.kind is None:
            self.kind, self.op = kind, op
            return
        if kind != self.kind:
            raise ValueError(
                f"{kind}: a coalescing_manager block collects calls of one kind, as torch's "
                f"_coalescing_manager does; this block on {self.group!r} collects {self.kind}; "
                f"got {kind} (run it outside the block, or in a block of its own)"
            )
        if op is not self.op:
            raise ValueError(
                f"op: a coalescing_manager block reduces with one op; this block's first "
                f"{kind} uses {self.op}; got {op} (torch's manager would reduce every call "
                "with the first one's op)"
            )

    def record(
        self,
        kind: str,
        issue: Callable[[], Work | None],
        async_op: bool,
        outputs: list[Any],
        op: ReduceOp | None = None,
    ) -> Work | None:
        """Record a call that the block's end issues with ``issue`` (which returns its Work);
        what the call returns now."""
        self.join(kind, op)
        self.issues.append(issue)
        return self.ticket(async_op, outputs)

    def record_reduction(
        self, tensor: Tensor, dtype: str, op: ReduceOp, async_op: bool
    ) -> Work | None:
        """Record an all_reduce, which the block's end reduces with the block's others."""
        self.join(ALL_REDUCE, op)
        self.reductions.append((tensor, dtype))
        return self.ticket(async_op, [tensor])

    def ticket(self, async_op: bool, outputs: list[Any]) -> Work | None:
        """A recorded call's result: None, or with ``async_op`` a Work that completes with the
        block's (torch's manager returns a Work that cannot be waited for)."""
        return with_result(Work([_Ticket(self)]), outputs) if async_op else None


class _Ticket:
    """The handle of a recorded call: the block's work, once the block's end issued it."""

    __slots__ = ("_block",)

    def __init__(self, block: Block) -> None:
        self._block = block

    def wait(self, timeout: float | timedelta | None = None) -> bool:
        work = self._block.work
        if work is None:
            raise RuntimeError(
                "wait: this call is recorded by a compat.coalescing_manager block and issued "
                "at the block's end; its result is valid after the block (with async_ops=True, "
                "after the manager's wait())"
            )
        return work.wait(timeout)

    def is_completed(self) -> bool:
        work = self._block.work
        return work is not None and work.is_completed()


def block_on(group: Group) -> Block | None:
    """The block open on ``group``, if any."""
    return OPEN.get(group.handle) if OPEN else None


def open_block(group: Group, async_ops: bool) -> Block:
    """A new block on ``group``; refused where one is open on it already."""
    if group.handle in OPEN:
        raise ValueError(
            f"group: a coalescing_manager block is open on {group!r} already; expected a "
            "group without one (blocks on one group do not nest)"
        )
    block = OPEN[group.handle] = Block(group, async_ops)
    return block


def close(block: Block) -> None:
    """The block's calls are no longer recorded (its end, or an error inside it)."""
    if OPEN.get(block.group.handle) is block:
        del OPEN[block.group.handle]


@contextmanager
def suspended(handle: object) -> Iterator[None]:
    """The block on the group of ``handle``, if any, records nothing meanwhile: a call torch's
    manager runs at once (all_reduce_coalesced) runs at once through compat's all_reduce."""
    block = OPEN.pop(handle, None)
    try:
        yield
    finally:
        if block is not None:
            OPEN[handle] = block
