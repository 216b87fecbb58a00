"""One call of a collective on its general path: the process state, the group, the stand-ins of
its tensors (:mod:`compat.core.layout`), and the issue: the pre-flight check, nothing where the
call moves no data, then what the capability table chooses, waited for unless ``async_op``. The
common case skips all of it (:mod:`compat.core.common`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from compat.algorithms import deferred_sources
from compat.base.adapter import Tensor
from compat.base.errors import UnsupportedError
from compat.base.types import Handle, ReduceOp, Work, with_result
from compat.core import state
from compat.core.layout import Staging, completed
from compat.core.preflight import Description
from compat.core.preflight import check as preflight
from compat.core.values import check_bool


class Call(Staging):
    """One call of a collective: the process state, the group it runs on, the stand-ins of its
    tensors (a :class:`compat.core.layout.Staging`: ``call.read(tensor)`` and so on), and whether it
    returns a Work (``async_op``)."""

    __slots__ = ("async_op", "checks", "group", "state")

    def __init__(self, group: object, async_op: object = False) -> None:
        current = self.state = state.current()
        # Staging's, without a call
        self.adapter, self._writebacks, self.as_bytes = current.adapter, None, False
        self.as_real = False
        self.checks = current.checks
        self.group = self.checks.group(group) if group is not None else current.world
        self.async_op = async_op if async_op is False else check_bool(async_op, "async_op")

    def done(self, pending: Handle | None, async_op: bool) -> Work | None:
        """:meth:`Staging.done`, the Work noted on the group for a later barrier."""
        work = super().done(pending, async_op)
        if work is not None:
            self.state.track(self.group.handle, work)
        return work

    def moved(self, dtype: str, param: str) -> None:
        """The dtype check of a collective that moves tensors of ``dtype`` (``param``'s) without
        reducing them: a dtype the backend takes, or one it moves as bytes (capabilities.toml's
        ``as_bytes``: the call's tensors are then staged as their views as uint8,
        :mod:`compat.core.layout`, and it runs as uint8's); else the error naming what is
        supported."""
        if dtype in self.checks.as_bytes:
            self.as_bytes = True
        elif dtype in self.checks.as_real:
            self.as_real = True
        else:
            self.checks.dtype(dtype, param)

    def reduction(self, op: object, dtype: str, param: str) -> ReduceOp:
        """The dtype and op check of a collective that reduces tensors of ``dtype``
        (:meth:`compat.core.checks.Checks.reduction`); a complex dtype the backend lacks stages
        the call's tensors as their real views (capabilities.toml's ``as_real``)."""
        reduce_op = self.checks.reduction(op, dtype, param)
        self.as_real = dtype in self.checks.as_real
        return reduce_op

    def agree(self, describe_call: Callable[[], Description]) -> None:
        """The pre-flight check (``init(check=True)``): every rank of the group compares its call
        with the others' before anything runs."""
        if self.state.check:
            preflight(self.adapter, self.group, describe_call())

    def issue(
        self,
        collective: str,
        like: Tensor,
        *args: Any,
        nbytes: int | None = None,
        agree: Callable[[], Description],
        empty: bool = False,
        dtype: str | None = None,
        outputs: Sequence[Tensor] = (),
    ) -> Work | None:
        """Run ``collective`` with ``args`` (then the group's handle and ``async_op``) through
        what the capability table chooses for ``like``'s dtype (``dtype``, where the caller has
        read it) and ``nbytes``; nothing when ``empty`` (every rank knows its call moves no
        data). ``outputs``: the user's tensors the call writes (its Work's ``result()``)."""
        waiting = deferred_sources(self.adapter)
        if waiting and not waiting.isdisjoint(self.group.ranks):
            # A deferred irecv (MCCL) receives at wait(); MCCL matches messages by source rank
            # alone, so this collective would take that peer's message, and the irecv one of the
            # collective's: silently wrong results on both (the soak found it).
            peers = sorted(waiting.intersection(self.group.ranks))
            raise UnsupportedError(
                f"irecv: {collective} cannot run while an irecv from rank "
                f"{', '.join(map(str, peers))} is not waited for: on this backend a receive "
                "takes the next message from its source whatever call sent it; call wait() on "
                f"the irecv's Work before {collective}"
            )
        if self.state.check:
            preflight(self.adapter, self.group, agree())
        if empty:
            return with_result(completed(self.async_op), outputs)
        dtype = self._travels_as(dtype)  # the staged tensors' (as bytes, as real numbers)
        run = self.state.implementation(collective, like, nbytes, self.group.handle, dtype)
        pending = run(*args, self.group.handle, self.async_op)
        if self.async_op or self._writebacks:
            return with_result(self.done(pending, self.async_op), outputs)
        return None  # a synchronous call that has completed, with nothing to copy back

    def _travels_as(self, dtype: str | None) -> str | None:
        """The dtype the call's staged tensors have: uint8 for bytes, a complex dtype's real one
        for real views (None: read from the tensor the call passes)."""
        if self.as_bytes:
            return "uint8"
        if self.as_real and dtype is not None:
            return self.checks.as_real[dtype]
        return dtype

    def issue_blocking(
        self, collective: str, like: Tensor, *args: Any, tag: int, empty: bool
    ) -> None:
        """Point to point: ``args``, the group's handle, then ``tag``; returns once it has
        completed."""
        if not empty:
            run = self.state.implementation(collective, like, group=self.group.handle)
            run(*args, self.group.handle, tag)
            self.finish()

    def result(self, tensor: Tensor, work: Work | None) -> Any:
        """A functional form's result: the tensor, or ``(tensor, Work)`` with async_op."""
        return (tensor, work) if self.async_op else tensor
