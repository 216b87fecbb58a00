"""The types of compat's public API: ReduceOp, Work and Group."""

from __future__ import annotations

import enum
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol

from compat.base import tables
from compat.base.errors import CollectiveTimeout, TableError


class ReduceOp(str, enum.Enum):
    """The reduction of a collective.

    ``PROD`` is an alias of ``PRODUCT``. Every collective also accepts the strings of
    ``mapping_tables/reduce_ops.toml`` (``"sum"``, ``"prod"``/``"product"``, ``"min"``, ``"max"``,
    ``"avg"``, ``"band"``, ``"bor"``, ``"bxor"``) and each framework's native op
    (``torch.distributed.ReduceOp.SUM``, ``mindspore.communication.ReduceOp.SUM``).

    ``BAND``, ``BOR`` and ``BXOR`` (bitwise and, or, xor, as torch's) take integer and bool
    dtypes only; MindSpore has no such op, and compat reduces them itself there.

    A member equals the same op of either framework (``ReduceOp.AVG == dist.ReduceOp.AVG``,
    either way round), so that a ported file compares rightly the ops that files not ported
    hand it; and its string. Its hash is its string's.
    """

    SUM = "sum"
    PRODUCT = "prod"
    PROD = "prod"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __str__(self) -> str:
        return self.value

    def __eq__(self, other: object) -> bool:
        # A framework's own member equals compat's: a ported file compares the ops that the
        # files not ported hand it (`op == ReduceOp.AVG` with torch's AVG); torch's == defers.
        if isinstance(other, str):
            return str.__eq__(self, other)
        if type(other) is int:  # torch's == hands over its member's int (AVG is 1)
            return other == _torch_number(self)
        return _native_op(other) is self

    __hash__ = str.__hash__


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

    def __repr__(self) -> str:
        # what get_backend() returns prints as torch's does ('gloo'), in logs and tuples alike
        return repr(self.value)

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


def _torch_number(op: ReduceOp) -> int | None:
    """The int of torch's member for ``op``, where torch.distributed is loaded."""
    dist = sys.modules.get("torch.distributed")
    name = tables.lookup("reduce_ops", "ops", op.value).get("torch")
    member = getattr(getattr(dist, "ReduceOp", None), name or "", None)
    return None if member is None else int(member)


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
    """Handle of an asynchronous collective (returned when ``async_op=True``), answering as
    torch's ``Work`` does where ported code uses it: :meth:`wait`, :meth:`is_completed`,
    :meth:`get_future`, :meth:`exception`, :meth:`result`.

    The result tensors are valid once :meth:`wait` has returned. An emulated collective may be
    several native calls plus a local step (e.g. a sum); ``wait`` waits for all of them and then
    runs that step, exactly once.
    """

    __slots__ = ("_error", "_finish", "_finished", "_lock", "_pending", "_result")

    def __init__(
        self,
        pending: Sequence[Handle] = (),
        finish: Callable[[], None] | None = None,
    ) -> None:
        # One waiter at a time (the thread of a torch future from get_future, the caller):
        # each handle is waited for once and the local step runs once.
        self._lock = threading.RLock()
        self._pending = list(pending)
        self._finish = finish
        self._finished = False
        self._error: BaseException | None = None
        #: the tensors the collective writes (torch's ``Work.result()``), where the call said
        self._result: list[Any] | None = None

    def wait(self, timeout: float | timedelta | None = None) -> bool:
        """Block until the collective has completed; return True.

        Parameters
        ----------
        timeout
            Seconds (or a ``timedelta``) to wait at most, where the backend supports a bound.
        """
        if isinstance(timeout, (int, float)):
            timeout = timedelta(seconds=timeout)
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout.total_seconds()):
            raise CollectiveTimeout(
                f"the collective did not complete within the {timeout} given to Work.wait"
            )
        try:
            if not self._finished:
                self._wait_pending(timeout)
        finally:
            self._lock.release()
        return True

    def _wait_pending(self, timeout: timedelta | None) -> None:
        # A handle leaves the list once its wait returned: after a later handle's timeout
        # or error the next wait() does not wait for it again (torch's Gloo send handle,
        # waited for twice, waits for another message: rank case p2p_waited_again).
        pending = self._pending
        try:
            while pending:
                if timeout is None:
                    pending[0].wait()
                else:
                    pending[0].wait(timeout)
                del pending[0]
            self._complete()
        except Exception as error:
            self._error = error
            raise

    def is_completed(self) -> bool:
        """Return True if the collective has completed: its results are then valid, or, if it
        failed, :meth:`exception` holds the error and :meth:`wait` raises it."""
        if not self._finished and all(handle.is_completed() for handle in self._pending):
            try:
                self.wait()  # each handle has completed: returns at once, or raises its error
            except Exception:  # kept in exception(); wait() raises it again
                return True
        return self._finished

    def exception(self) -> BaseException | None:
        """The error a :meth:`wait` of this Work raised, or None (torch's ``Work.exception()``)."""
        return self._error

    def result(self) -> list[Any]:
        """The tensors the collective writes, as torch's ``Work.result()`` lists them (the
        tensor of an in-place call, an output list's tensors); valid once :meth:`wait` returned.
        Empty for a call without outputs (barrier)."""
        return list(self._result) if self._result is not None else []

    def get_future(self) -> Any:
        """A future that completes with :meth:`result` once the collective has completed, as
        torch's ``Work.get_future()`` (e.g. ``.then(lambda f: f.value()[0].div_(n))``): on
        torch, torch's own future where the work is one native call with one, else a
        ``torch.futures.Future`` that a thread completes (DDP's communication hooks must return
        torch's); on MindSpore a :class:`Future` of compat's with the same methods."""
        if self._finish is None and len(self._pending) == 1:
            native_future = getattr(self._pending[0], "get_future", None)
            if native_future is not None:
                try:
                    found = native_future()
                except (AttributeError, RuntimeError):  # Gloo's reduce_scatter has none
                    found = None
                if type(found).__module__.split(".")[0] == "torch":
                    return found
        return self._torch_future() or Future(self)

    def _torch_future(self) -> Any:
        """For torch tensors, a ``torch.futures.Future`` that a thread completes once this Work
        has (None for other tensors): DDP's reducer takes a communication hook's future only
        if it is torch's, and waits for it in C++, where no wait of compat's runs."""
        results = self._result or []
        if not results or type(results[0]).__module__.split(".")[0] != "torch":
            return None
        future = sys.modules["torch"].futures.Future()

        def complete() -> None:
            try:
                self.wait()
            except Exception as error:
                future.set_exception(error)
            else:
                future.set_result(self.result())

        threading.Thread(target=complete, name="compat-work-future", daemon=True).start()
        return future

    def _complete(self) -> None:
        self._pending.clear()
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()
        self._finished = True

    def __repr__(self) -> str:
        state = "completed" if self._finished else "pending"
        return f"<compat.Work {state}>"


def with_result(work: Work | None, outputs: Sequence[Any]) -> Work | None:
    """``work`` (an async call's, or None) knowing the tensors it writes (:meth:`Work.result`)."""
    if work is not None:
        work._result = list(outputs)
    return work


class Future:
    """What :meth:`Work.get_future` returns where torch's own future is not there (MindSpore,
    compat's emulations): torch.futures.Future's methods. It completes with the Work's
    :meth:`~Work.result`. Callbacks (:meth:`then`, :meth:`add_done_callback`) run once the
    completion is seen: at once if it already is, else at this future's (or a chained one's)
    :meth:`wait`, :meth:`done` or :meth:`value`, on the caller's thread, in order.
    ``Future()`` alone is completed by :meth:`set_result` or :meth:`set_exception`."""

    __slots__ = ("_callback", "_callbacks", "_done", "_error", "_parent", "_value", "_work")

    def __init__(
        self,
        work: Work | None = None,
        parent: Future | None = None,
        callback: Callable[[Future], Any] | None = None,
    ) -> None:
        self._work = work
        self._parent = parent
        self._callback = callback
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future], Any]] = []

    def wait(self) -> Any:
        """Block until complete and return the value (raise the error it completed with)."""
        if not self._done:
            if self._work is not None:
                self._settle(lambda: self._work_wait())
            elif self._parent is not None:
                self._parent._observe(wait=True)
                self._settle(lambda: self._run_callback())
            else:
                raise RuntimeError("Future.wait: nothing will complete this future (set_result)")
        return self.value()

    def done(self) -> bool:
        """Whether the future has completed (running its callbacks if it just did)."""
        self._observe(wait=False)
        return self._done

    def value(self) -> Any:
        """The value of a completed future; raises its error, or RuntimeError if not complete."""
        if not self.done():
            raise RuntimeError("Future.value: the future has not completed; call wait() first")
        if self._error is not None:
            raise self._error
        return self._value

    def then(self, callback: Callable[[Future], Any]) -> Future:
        """A future completing with ``callback(self)`` once this one has completed."""
        chained = Future(parent=self, callback=callback)
        chained.done()  # runs it at once where this one has completed
        return chained

    def add_done_callback(self, callback: Callable[[Future], Any]) -> None:
        """Run ``callback(self)`` once complete (its return value is ignored)."""
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)

    def set_result(self, result: Any) -> None:
        """Complete a future made without a Work with ``result``."""
        self._complete(result, None)

    def set_exception(self, error: BaseException) -> None:
        """Complete a future made without a Work with ``error``."""
        self._complete(None, error)

    def _observe(self, wait: bool) -> None:
        if self._done:
            return
        if self._work is not None and (wait or self._work.is_completed()):
            self._settle(lambda: self._work_wait())
        elif self._parent is not None and (wait or self._parent.done()):
            if wait:
                self._parent._observe(wait=True)
            self._settle(lambda: self._run_callback())

    def _work_wait(self) -> Any:
        assert self._work is not None
        self._work.wait()
        return self._work.result()

    def _run_callback(self) -> Any:
        assert self._parent is not None and self._callback is not None
        return self._callback(self._parent)

    def _settle(self, compute: Callable[[], Any]) -> None:
        try:
            value, error = compute(), None
        except Exception as raised:
            value, error = None, raised
        self._complete(value, error)

    def _complete(self, value: Any, error: BaseException | None) -> None:
        if self._done:
            raise RuntimeError("Future: already completed")
        self._value, self._error, self._done = value, error, True
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def __repr__(self) -> str:
        return f"<compat.Future {'completed' if self._done else 'pending'}>"


def _no_state() -> tuple[int, int]:
    raise NotImplementedError("compat.core.state sets compat.base.types.whoami when it is imported")


#: This process's (rank, world size), as compat's queries answer them (adopting a framework
#: process group initialised elsewhere on first use). compat.core.state, which imports this module,
#: sets it: a group's size() and rank() need the process state, which needs this module.
whoami: Callable[[], tuple[int, int]] = _no_state


class Group:
    """A group of ranks, made by :func:`compat.new_group` (on every rank of the world), or
    compat's view of a framework's own group (a torch ProcessGroup, a MindSpore group name).

    ``ranks`` are global ranks, in group-rank order. ``handle`` is the framework's own group
    (a ProcessGroup for torch, a group name for MindSpore); ``None`` on ranks outside the group.
    ``size()`` and ``rank()`` answer as a torch ``ProcessGroup``'s do, so code written for
    torch's groups (``group.size() <= 1``, ``inputs[group.rank()]``) runs on compat's.

    ``own``: this process's global rank as the group's own rank map names it, where that is not
    its world rank (a torch group made for processes of other worlds, through
    _new_process_group_helper); None: its world rank.
    """

    __slots__ = ("destroyed", "handle", "name", "own", "ranks")

    def __init__(
        self, ranks: Sequence[int], handle: object, name: str, own: int | None = None
    ) -> None:
        self.ranks = tuple(ranks)
        self.handle = handle
        self.name = name
        self.own = own
        #: Set by compat.destroy(group): a later call on the group is refused, naming it.
        self.destroyed = False

    def size(self) -> int:
        """The number of ranks in the group."""
        return len(self.ranks)

    def rank(self) -> int:
        """This process's rank in the group, or -1 if it is not a member (as the framework's
        group answers it)."""
        return self.own_rank(whoami()[0])

    def own_rank(self, world_rank: int) -> int:
        """This process's rank in the group given its ``world_rank``, or -1 if it is not a
        member: :meth:`rank` without looking the world rank up."""
        return self.group_rank(self.own_global_rank(world_rank))

    def own_global_rank(self, world_rank: int) -> int:
        """This process's global rank as this group names it, given its ``world_rank``: what a
        rooted call's src or dst is compared with, and what makes it a member."""
        return world_rank if self.own is None else self.own

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
