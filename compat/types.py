"""The types of compat's public API: ReduceOp, Work and Group."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol

from compat import tables
from compat.errors import TableError


class ReduceOp(str, enum.Enum):
    """The reduction of a collective.

    ``PROD`` is an alias of ``PRODUCT``. Every collective also accepts the strings of
    ``mapping_tables/reduce_ops.toml`` (``"sum"``, ``"prod"``/``"product"``, ``"min"``, ``"max"``,
    ``"avg"``) and each framework's native op (``torch.distributed.ReduceOp.SUM``,
    ``mindspore.communication.ReduceOp.SUM``).
    """

    SUM = "sum"
    PRODUCT = "prod"
    PROD = "prod"
    MIN = "min"
    MAX = "max"
    AVG = "avg"

    def __str__(self) -> str:
        return self.value


def _check_ops_match_table() -> None:
    recorded = set(tables.lookup("reduce_ops", "ops"))
    declared = {op.value for op in ReduceOp}
    if recorded != declared:
        raise TableError(
            f"mapping table reduce_ops.toml lists ops {sorted(recorded)}, "
            f"compat.ReduceOp declares {sorted(declared)}"
        )


_check_ops_match_table()


class Backend(str, enum.Enum):
    """The name of a communication backend, as ``torch.distributed.Backend`` names its own: a
    str (``Backend.NCCL == "nccl"``), so it compares equal to what :func:`compat.get_backend`
    returns and is taken wherever a backend name is (compat's and torch's ``backend=``).

    Every backend compat runs on, on either framework (``mapping_tables/capabilities.toml``).
    ``Backend("NCCL")`` is ``Backend.NCCL``, as torch's ``Backend("NCCL")`` is ``"nccl"``.
    """

    GLOO = "gloo"
    NCCL = "nccl"
    MCCL = "mccl"
    HCCL = "hccl"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> Backend:
        lowered = value.lower() if isinstance(value, str) else None
        for member in cls:
            if member.value == lowered:
                return member
        raise ValueError(
            f"backend: expected one of {', '.join(repr(b.value) for b in cls)} (any case); "
            f"got {value!r}"
        )


def _check_backends_match_table() -> None:
    recorded = {entry.get("backend", key) for key, entry in tables.load("capabilities").items()}
    declared = {backend.value for backend in Backend}
    if recorded != declared:
        raise TableError(
            f"mapping table capabilities.toml lists backends {sorted(recorded)}, "
            f"compat.Backend declares {sorted(declared)}"
        )


_check_backends_match_table()


def _alias_map() -> dict[str, ReduceOp]:
    aliases: dict[str, ReduceOp] = {}
    for value, entry in tables.lookup("reduce_ops", "ops").items():
        for alias in entry["aliases"]:
            aliases[alias] = ReduceOp(value)
    return aliases


_ALIASES = _alias_map()


def _native_op(op: object) -> ReduceOp | None:
    """A framework's own ReduceOp member (e.g. torch's ``RedOpType.SUM``), matched by name in
    the table column of the framework that defines its type."""
    framework = type(op).__module__.split(".")[0]
    name = getattr(op, "name", None)
    for value, entry in tables.lookup("reduce_ops", "ops").items():
        if name is not None and entry.get(framework) == name:
            return ReduceOp(value)
    return None


def parse_op(op: object, param: str = "op") -> ReduceOp:
    """Return ``op`` as a ReduceOp, or raise naming ``param``, what it accepts, and what it got."""
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str):
        found = _ALIASES.get(op.lower())
        if found is not None:
            return found
    else:
        found = _native_op(op)
        if found is not None:
            return found
    raise ValueError(
        f"{param}: expected a compat.ReduceOp, one of the strings {sorted(_ALIASES)} or a "
        f"framework's ReduceOp; got {op!r}"
    )


class Handle(Protocol):
    """What an adapter returns for an asynchronous native call."""

    def wait(self, timeout: timedelta | None = None) -> Any: ...

    def is_completed(self) -> bool: ...


class Work:
    """Handle of an asynchronous collective (returned when ``async_op=True``).

    The result tensors are valid once :meth:`wait` has returned. An emulated collective may be
    several native calls plus a local step (e.g. a sum); ``wait`` waits for all of them and then
    runs that step, exactly once.
    """

    __slots__ = ("_finish", "_finished", "_pending")

    def __init__(
        self,
        pending: Sequence[Handle] = (),
        finish: Callable[[], None] | None = None,
    ) -> None:
        self._pending = list(pending)
        self._finish = finish
        self._finished = False

    def wait(self, timeout: float | timedelta | None = None) -> bool:
        """Block until the collective has completed; return True.

        Parameters
        ----------
        timeout
            Seconds (or a ``timedelta``) to wait at most, where the backend supports a bound.
        """
        if not self._finished:
            if isinstance(timeout, (int, float)):
                timeout = timedelta(seconds=timeout)
            # A handle leaves the list once its wait returned: after a later handle's timeout
            # or error the next wait() does not wait for it again (torch's Gloo send handle,
            # waited for twice, waits for another message: measured, rank case
            # p2p_waited_again).
            pending = self._pending
            while pending:
                if timeout is None:
                    pending[0].wait()
                else:
                    pending[0].wait(timeout)
                del pending[0]
            self._complete()
        return True

    def is_completed(self) -> bool:
        """Return True if the collective has completed (its results are then valid)."""
        if not self._finished and all(handle.is_completed() for handle in self._pending):
            self._complete()
        return self._finished

    def _complete(self) -> None:
        self._pending.clear()
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()
        self._finished = True

    def __repr__(self) -> str:
        state = "completed" if self._finished else "pending"
        return f"<compat.Work {state}>"


def _no_state() -> tuple[int, int]:
    raise NotImplementedError("compat.state sets compat.types.whoami when it is imported")


#: This process's (rank, world size), as compat's queries answer them (adopting a framework
#: process group initialised elsewhere on first use). compat.state, which imports this module,
#: sets it: a group's size() and rank() need the process state, which needs this module.
whoami: Callable[[], tuple[int, int]] = _no_state


class Group:
    """A group of ranks, made by :func:`compat.new_group` (on every rank of the world), or
    compat's view of a framework's own group (a torch ProcessGroup, a MindSpore group name).

    ``ranks`` are global ranks, in group-rank order. ``handle`` is the framework's own group
    (a ProcessGroup for torch, a group name for MindSpore); ``None`` on ranks outside the group.
    ``size()`` and ``rank()`` answer as a torch ``ProcessGroup``'s do, so code written for
    torch's groups (``group.size() <= 1``, ``inputs[group.rank()]``) runs on compat's.
    """

    __slots__ = ("destroyed", "handle", "name", "ranks")

    def __init__(self, ranks: Sequence[int], handle: object, name: str) -> None:
        self.ranks = tuple(ranks)
        self.handle = handle
        self.name = name
        #: Set by compat.destroy(group): a later call on the group is refused, naming it.
        self.destroyed = False

    def size(self) -> int:
        """The number of ranks in the group."""
        return len(self.ranks)

    def rank(self) -> int:
        """This process's rank in the group, or -1 if it is not a member (as
        ``compat.get_rank(group)``)."""
        return self.group_rank(whoami()[0])

    def group_rank(self, global_rank: int) -> int:
        """The rank of ``global_rank`` inside this group, or -1 if it is not a member."""
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            return -1

    def __contains__(self, global_rank: object) -> bool:
        return global_rank in self.ranks

    def __repr__(self) -> str:
        return f"compat.Group(name={self.name!r}, ranks={list(self.ranks)})"


class _World(Group):
    """The marker ``compat.WORLD``: every rank, whatever the world's size (resolved per call)."""

    __slots__ = ()

    def size(self) -> int:
        return whoami()[1]

    def rank(self) -> int:
        return whoami()[0]

    def __repr__(self) -> str:
        return "compat.WORLD"


#: The world group: the same as ``group=None`` wherever a group is taken.
WORLD: Group = _World((), None, "world")
