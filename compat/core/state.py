"""The process's compat state between :func:`compat.init` and :func:`compat.destroy`: the adapter,
the backend, the world group, the argument checks' facts, and what runs each collective (resolved
from ``mapping_tables/capabilities.toml`` by :mod:`compat.core.capabilities`, cached per dtype).

Adoption on first use: a process whose framework process group was initialised outside compat (an
unported module called ``torch.distributed.init_process_group`` or
``mindspore.communication.init()``) and that never called :func:`compat.init` gets that group on
its first collective or query, as ``compat.init()`` would adopt it (:func:`current`). Only
frameworks already imported are asked (:func:`initialised_frameworks`). :func:`start` and
:func:`leave` are what ``compat.init`` (after its checks), adoption and ``compat.destroy()`` run.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from compat.base import tables, types
from compat.base.adapter import Adapter, Rendezvous, device_backend
from compat.base.errors import NotInitializedError
from compat.base.types import Group, Work
from compat.core import capabilities, recorder, versions
from compat.core.checks import Checks
from compat.core.dispatch import load_adapter
from compat.transport import scratch, shared_memory
from compat.transport.liveness import Liveness

#: ``State.implementation``'s default group: none given, so no choice that needs one applies.
NO_GROUP = object()


class State:
    def __init__(self, adapter: Adapter, backend: str, check: bool = False) -> None:
        self.adapter = adapter
        #: run the pre-flight check (compat.core.preflight) before each collective
        self.check = check
        self.framework = adapter.framework
        #: the backend string as the framework has it (torch's ``"cpu:gloo,cuda:nccl"`` too)
        self.backend = backend
        #: the backend of this process's device, whose capability entry compat uses
        self.device_backend = device_backend(backend, adapter.device_kinds())
        self.capability_key = capabilities.backend_key(adapter.framework, self.device_backend)
        self.backend_entry = capabilities.capability_entry(self.capability_key)
        #: when all_reduce_coalesced's tensors go as one buffer: the table's ``coalesce`` rule
        #: (compat.collectives._coalesces); None: one all_reduce each
        self.coalesce: dict[str, Any] | None = self.backend_entry.get("coalesce")
        #: whether the framework's process group is still initialised: code compat does not
        #: own may end it (torch.distributed.destroy_process_group called directly)
        self.alive = adapter.process_group_alive
        self.rank = adapter.rank()
        self.world_size = adapter.world_size()
        self.world = Group(range(self.world_size), None, "world")
        #: the groups compat.new_group made, by their ranks (a list of ranks names one of them)
        self.groups: dict[tuple[int, ...], Group] = {}
        #: async collectives not yet completed, by their group's handle (two groups may have
        #: the same ranks): a barrier on the group completes them first, as Gloo's barrier waits
        #: for the work issued before it
        self.unwaited: dict[Any, list[Work]] = {}
        self.checks = Checks(
            adapter, backend, self.backend_entry, self.rank, self.world, self.groups
        )
        #: (collective, dtype, group handle, tensor in host memory) -> choices by size
        self._implementations: dict[
            tuple[str, str, Any, bool], list[tuple[int, Callable[..., Any]]]
        ] = {}
        #: (collective, dtype) -> the choices by size on the world for a tensor the common case
        #: checked (world_implementation): those of _implementations, found by a shorter key
        self._world_choices: dict[tuple[str, str], list[tuple[int, Callable[..., Any]]]] = {}
        #: bytes an element, by dtype (mapping_tables/dtypes.toml): a size from a shape read
        self._dtype_bytes = tables.dtype_bytes()
        self._one_host_choices: dict[str, bool] = {}
        self._forced: dict[tuple[str, str], tuple[str, Callable[..., Any]]] = {}
        self._stand_ins: dict[tuple[str, str], Callable[..., Any]] = {}
        #: the shape world_implementation was given for the call about to run (compat.core.recorder)
        self.shape_hint: list[tuple[int, ...] | None] = [None]
        self.group_count = 0
        #: member-only groups (new_group(use_local_synchronization=True)) made here, by ranks:
        #: their names count them, since the other ranks' group_count does not move with them
        self.members_only_counts: dict[tuple[int, ...], int] = {}

    def forget_choices(self) -> None:
        """Drop every choice kept: the next call of each collective chooses anew (after a peer
        was found gone, a call on a group with it raises at once: :func:`_raises_lost`)."""
        self._implementations.clear()
        self._world_choices.clear()

    # -- implementations ---------------------------------------------------------------------
    def track(self, group: Any, work: Work) -> None:
        """Note an async collective's Work on ``group`` (a handle); those completed since are
        dropped (their results written, as :meth:`Work.is_completed` does)."""
        works = [w for w in self.unwaited.get(group, ()) if not w.is_completed()]
        self.unwaited[group] = [*works, work]

    def complete_unwaited(self, group: Any) -> None:
        """Wait for the async collectives on ``group`` (a handle) that no one waited for (code
        that relies on a barrier after them, as torch's Gloo and NCCL order them)."""
        for work in self.unwaited.pop(group, ()):
            work.wait()

    def implementation(
        self,
        collective: str,
        like: Any,
        nbytes: int | None = None,
        group: Any = NO_GROUP,
        dtype: str | None = None,
        copies: int = 1,
    ) -> Callable[..., Any]:
        """The callable that runs ``collective`` on tensors of ``like``'s dtype and an input of
        ``nbytes`` bytes (default: ``copies`` times ``like``'s size, read only where the choice
        depends on it), as :func:`compat.core.capabilities.resolve` chooses it: the adapter's native
        method or an algorithm bound to the adapter. With ``group`` (its handle), a choice that
        needs the group's ranks on one host can apply. ``dtype`` is ``like``'s, where the caller
        has read it already (a dtype read is not free on MindSpore)."""
        if dtype is None:
            dtype = self.adapter.dtype(like)
        # No tensor (barrier): nothing that is not in host memory.
        in_host = group is not NO_GROUP and (like is None or self.adapter.in_host_memory(like))
        by_size = self._choices(collective, dtype, group, in_host)
        if len(by_size) == 1:
            return by_size[0][1]
        return self._sized(by_size, like, nbytes, copies)

    def world_implementation(
        self,
        collective: str,
        like: Any,
        dtype: str,
        copies: int = 1,
        shape: tuple[int, ...] | None = None,
    ) -> Callable[..., Any]:
        """:meth:`implementation` on the world, for ``like``, a tensor of ``dtype`` that the
        common case (:mod:`compat.core.common`) checked: on this rank's device, so whether it is
        in host memory is the same for every such tensor, and the choices are found by
        (collective, dtype) alone, the one look-up right after a collective, where each call
        costs most.

        ``shape``: ``like``'s, where the checks have read it. A choice by size then takes the
        size from it and the dtype's bytes (``mapping_tables/dtypes.toml``), ``copies`` times,
        instead of reading the tensor: a dense tensor's size is exactly that, and a read costs
        more on MindSpore."""
        # The flight recorder takes the size of the call about to run from here, where the
        # checks have read it (compat.core.recorder).
        self.shape_hint[0] = shape
        key = (collective, dtype)
        by_size = self._world_choices.get(key)
        if by_size is None:
            in_host = self.adapter.in_host_memory(like)
            by_size = self._world_choices[key] = self._choices(
                collective, dtype, self.world.handle, in_host
            )
        if len(by_size) == 1:
            return by_size[0][1]
        if shape is None:
            return self._sized(by_size, like, None, copies)
        nbytes = math.prod(shape) * self._dtype_bytes[dtype] * copies
        return self._sized(by_size, like, nbytes, 1)

    def _choices(
        self, collective: str, dtype: str, group: Any, in_host: bool
    ) -> list[tuple[int, Callable[..., Any]]]:
        """(min_bytes, callable) from 0 bytes up for ``collective`` on ``dtype`` and ``group``
        (a handle, or NO_GROUP), for tensors in host memory or not (``in_host``)."""
        # Keyed by the group itself: whether it has a window, and its size, are settled on its
        # first call, so later calls skip finding them.
        key = (collective, dtype, group, in_host)
        by_size = self._implementations.get(key)
        if by_size is None:
            lost = None if group is NO_GROUP else shared_memory.lost(self.adapter, group)
            if lost is not None:
                raises = _raises_lost(lost.liveness, collective)
                return [(0, self._recorded(raises, collective, dtype, "none: a peer is gone"))]
            # compat's own algorithms take a group's members for ranks of this world, each at
            # its place among the group's global ranks; on any other group (processes of other
            # worlds: an RL trainer's weight sync) only the backend's call is right.
            placed = group is NO_GROUP or self._of_this_world(group)
            one_host = placed and self._on_one_host(collective, in_host, group)
            # The group's size bounds choices on one host and off it alike (the table's
            # min_ranks and max_ranks).
            ranks = None if group is NO_GROUP else len(self.adapter.group_ranks(group))
            by_size = self._by_size(collective, dtype, ranks, one_host, placed)
            self._implementations[key] = by_size
        return by_size

    def _sized(
        self,
        by_size: list[tuple[int, Callable[..., Any]]],
        like: Any,
        nbytes: int | None,
        copies: int,
    ) -> Callable[..., Any]:
        """The choice of ``by_size`` for an input of ``nbytes`` (default: ``copies`` times
        ``like``'s size)."""
        size = self.adapter.nbytes(like) * copies if nbytes is None else nbytes
        chosen = by_size[0][1]
        for min_bytes, callable_ in by_size:
            if size >= min_bytes:
                chosen = callable_
        return chosen

    def algorithm(
        self,
        collective: str,
        dtype: str,
        nbytes: int,
        one_host: bool = False,
        ranks: int | None = None,
    ) -> str:
        """The name of what runs ``collective`` for ``dtype`` and an input of ``nbytes`` bytes,
        on a group of ``ranks``: ``"native"`` or a compat.algorithms function (``compat bench``
        prints it)."""
        forced = self._forced.get((collective, dtype))
        if forced is not None:
            return forced[0]
        key = self.capability_key
        return capabilities.resolve(key, collective, dtype, nbytes, one_host, ranks)

    def open_window(self, group: Any) -> None:
        """Make ``group``'s shared-memory window now, where the table has choices that use one:
        at compat.init and compat.new_group, which every rank of the group calls at the same
        point. Made on its first collective instead (a group torch made, a world adopted), the
        set-up is a collective that an asynchronous call would make synchronous: a rank that
        then sends a peer what it waits for before that collective would wait for ever."""
        if any(self._wants_one_host(name) for name in capabilities.COLLECTIVES):
            found = shared_memory.window(self.adapter, group)
            if found is not None:
                found.open_point_to_point()

    def through_shared_memory(self, collective: str, like: Any, group: Any) -> bool:
        """Whether ``collective`` on tensors of ``like``'s kind on ``group`` (a handle) can take
        the table's shared-memory choices: the same answer on every rank of the group."""
        in_host = self.adapter.in_host_memory(like)
        return self._of_this_world(group) and self._on_one_host(collective, in_host, group)

    def _wants_one_host(self, collective: str) -> bool:
        """Whether the table has a one_host choice for ``collective`` (looked up once)."""
        wanted = self._one_host_choices.get(collective)
        if wanted is None:
            wanted = self._one_host_choices[collective] = capabilities.wants_one_host(
                self.capability_key, collective
            )
        return wanted

    def forget_group(self, group: Any) -> None:
        """Drop what was chosen for ``group`` (a handle) and close its window, as it is
        destroyed: a later group may get an equal handle (a MindSpore group name) with other
        ranks."""
        for key in [key for key in self._implementations if key[2] == group]:
            del self._implementations[key]
        self.unwaited.pop(group, None)
        shared_memory.close(self.adapter, group)

    def _on_one_host(self, collective: str, in_host: bool, group: Any) -> bool:
        """Whether ``collective``'s one_host choices apply on ``group`` (a handle): where the
        table has one, the call's tensors are in host memory (``in_host``, False without a
        group) and the group has a shared-memory window (made at compat.init and
        compat.new_group, else on first use, which is a collective of the group:
        compat.transport.shared_memory)."""
        if not in_host or not self._wants_one_host(collective):
            return False
        if collective in capabilities.POINT_TO_POINT:
            # Only a window made with the group, never made here: making one is a collective,
            # and a sender and its receiver must take the same path (SharedWindow.point_to_point).
            made = shared_memory.made(self.adapter, group)
            return made is not None and made.point_to_point and made.waits_in_memory
        if collective == "monitored_barrier":
            # Only a window already made: making one is a collective, which would wait for the
            # rank that is away without the barrier's timeout; and only where ranks wait in
            # memory, since the backend's barrier, the rounds' meeting place elsewhere, takes no
            # timeout.
            made = shared_memory.made(self.adapter, group)
            return made is not None and made.waits_in_memory
        return shared_memory.window(self.adapter, group) is not None

    def force(
        self, collective: str, dtype: str, run: str | tuple[str, Callable[..., Any]] | None
    ) -> None:
        """Run ``collective`` on ``dtype`` with ``run`` at every size, whatever the table says:
        ``"native"``, an algorithm's name, or ``(label, callable)``; None restores the table's
        choice. For ``compat bench``, timing one algorithm (:meth:`stand_in` times compat's own
        work)."""
        key = (collective, dtype)
        self._forget_choices(key)
        if run is None:
            self._forced.pop(key, None)
        elif isinstance(run, str):
            bound = capabilities.bind(self.adapter, collective, run, key=self.capability_key)
            self._forced[key] = (run, bound)
        else:
            self._forced[key] = run

    def stand_in(self, collective: str, dtype: str, run: Callable[..., Any] | None) -> None:
        """Call ``run`` for ``collective`` on ``dtype`` wherever the table's choice would run,
        keeping the choice by size (its thresholds, and the size read to pick one); None
        restores the table's. For ``compat bench``'s own work: the call makes every choice a
        real one makes, and only the collective is left out (forced instead, a call chose
        nothing, and the figure left out the choice where there are two)."""
        key = (collective, dtype)
        self._forget_choices(key)
        if run is None:
            self._stand_ins.pop(key, None)
        else:
            self._stand_ins[key] = run

    def _forget_choices(self, key: tuple[str, str]) -> None:
        """Drop every choice kept for (collective, dtype) ``key``: the next call makes it anew."""
        for cached in [kept for kept in self._implementations if kept[:2] == key]:
            del self._implementations[cached]
        self._world_choices.pop(key, None)

    def _of_this_world(self, group: Any) -> bool:
        """Whether ``group`` (a handle) was made through this world, of its ranks, with the
        backend numbering this rank at its place among them, as compat's own algorithms take
        it: not a group made for processes of other worlds (torch's _new_process_group_helper),
        which meets through a store of its own and whose global ranks may lie beyond the world
        or number this process elsewhere. Every member answers alike."""
        adapter = self.adapter
        if not adapter.joined_by_the_world(group):
            return False
        ranks, rank, world = adapter.group_ranks(group), adapter.rank(), adapter.world_size()
        if rank not in ranks or not all(0 <= member < world for member in ranks):
            return False
        return ranks.index(rank) == adapter.own_group_rank(group)

    def _by_size(
        self, collective: str, dtype: str, ranks: int | None, one_host: bool, sized: bool = True
    ) -> list[tuple[int, Callable[..., Any]]]:
        """(min_bytes, callable) from 0 bytes up: where the choice for ``dtype`` can change, on a
        group of ``ranks`` (None: unknown), with a shared-memory window or not (``one_host``);
        without ``sized``, the collective's own entry alone (the backend's call where it has
        one), not the table's choices by size."""
        forced = self._forced.get((collective, dtype))
        if forced is not None:
            return [(0, self._recorded(forced[1], collective, dtype, forced[0]))]
        key = self.capability_key
        choices: list[tuple[int, tuple[str, str]]] = []
        if not sized:
            made = capabilities.entry_choice(key, collective)
            run = capabilities.bind(self.adapter, collective, *made, key=key)
            return [(0, self._recorded(run, collective, dtype, made[0]))]
        for size in capabilities.size_thresholds(key, collective, dtype, one_host, ranks):
            choice = capabilities.choice(key, collective, dtype, size, one_host, ranks)
            # A threshold where the choice stays the same (one for another group size) is
            # left out: with one choice a call reads no size and makes no choice.
            if not choices or choices[-1][1] != choice:
                choices.append((size, choice))
        stand_in = self._stand_ins.get((collective, dtype))
        if stand_in is not None:
            return [
                (size, self._recorded(stand_in, collective, dtype, made[0]))
                for size, made in choices
            ]
        adapter = self.adapter
        bound = []
        for size, made in choices:
            run = capabilities.bind(adapter, collective, *made, key=key)
            bound.append((size, self._recorded(run, collective, dtype, made[0])))
        return bound

    def _recorded(
        self, run: Callable[..., Any], collective: str, dtype: str, algorithm: str
    ) -> Callable[..., Any]:
        """``run`` recording each call in the flight recorder (compat.core.recorder), where it is
        on:
        wrapped once here, as it is chosen, so every collective's calls pass through it."""
        flight = recorder.current()
        if flight is None or not flight.active():
            return run
        how = capabilities.runs_as(self.capability_key, collective, algorithm)
        method = capabilities.COLLECTIVES[collective]
        return flight.wrap(run, collective, method, dtype, algorithm, how, self.shape_hint)


_current: State | None = None


def current() -> State:
    """The process state; on first use without :func:`compat.init`, the state of the framework
    process group initialised outside compat, adopted as ``compat.init()`` adopts it.

    Raises
    ------
    NotInitializedError
        Neither compat nor an imported framework's process group is initialised.
    """
    return _current if _current is not None else _adopt()


def checked() -> State:
    """:func:`current`, after noticing a teardown by code compat does not own (the framework's
    process group ended, e.g. torch.distributed.destroy_process_group called directly): compat
    then drops its state and adopts a process group initialised since, or raises
    NotInitializedError. What the queries, init, new_group and destroy use; the collectives use
    :func:`current`, since the framework's own check would cost more than the rest of a small
    call's own work."""
    _drop_stale()
    return current()


def _drop_stale() -> None:
    """Forget a state whose framework process group was ended by code compat does not own:
    compat's own resources go (windows, scratch), the framework's group is gone already."""
    stale = _current
    if stale is not None and not stale.alive():
        set_current(None)
        shared_memory.close_all(stale.adapter)
        scratch.clear(stale.adapter)


def initialised_frameworks() -> list[str]:
    """The frameworks whose own process group is initialised, in ``frameworks.toml``'s order.

    Each framework's ``initialized`` entry (``"module:function"``) is asked only if that module is
    already in ``sys.modules``: a framework the user has not imported is never imported here.
    """
    found = []
    for name, entry in tables.load("frameworks").items():
        spec = entry.get("initialized")
        if spec is None:
            continue
        module_name, function_name = spec.split(":")
        # torch built without distributed support has torch.distributed but no is_initialized.
        asks = getattr(sys.modules.get(module_name), function_name, None)
        if asks is not None and asks():
            found.append(name)
    return found


def _adopt() -> State:
    """Adopt the one framework process group initialised outside compat (see :func:`current`)."""
    _drop_stale()
    found = initialised_frameworks()
    if not found:
        raise NotInitializedError(
            "compat is not initialised: call compat.init() (or the framework's own "
            "init_process_group / mindspore.communication.init) before any collective or query"
        )
    chosen = os.environ.get("COMPAT_FRAMEWORK")
    if len(found) > 1 and chosen not in found:
        raise NotInitializedError(
            f"compat is not initialised and the process groups of {found} are: call "
            "compat.init(framework) to choose the one compat uses"
        )
    # What compat.init() with no arguments does once it has chosen the framework: its adapter
    # finds the process group initialised and adopts it (compat.destroy leaves it alive).
    framework = chosen if chosen is not None and len(found) > 1 else found[0]
    return start(framework, None, None, Rendezvous(), check_from_environment())


def check_from_environment() -> bool:
    """``init``'s default for ``check``: ``COMPAT_CHECK`` set to anything but ``""`` or ``"0"``."""
    return os.environ.get("COMPAT_CHECK", "") not in ("", "0")


def start(
    framework: str,
    backend: str | None,
    timeout: timedelta | None,
    rendezvous: Rendezvous,
    check: bool,
) -> State:
    """Join the job (or adopt the framework's process group) with arguments :func:`compat.init`
    has checked, and make the result the process state."""
    adapter = load_adapter(framework)
    versions.warn_if_untested(framework)
    chosen_backend = adapter.init(backend, timeout, rendezvous)
    kinds = adapter.device_kinds()
    if backend is not None and device_backend(chosen_backend, kinds) != device_backend(
        backend, kinds
    ):
        adapter.destroy()
        raise ValueError(
            f"backend: the process group compat adopted uses {chosen_backend!r}; got {backend!r}"
        )
    started = State(adapter, chosen_backend, check)
    recorder.start(adapter, framework, chosen_backend, started.forget_choices)
    set_current(started)
    shared_memory.LOSS_LISTENERS[:] = [started.forget_choices]
    # A torch process that exits with its process group alive aborts ("terminate called without
    # an active exception"): leave the job at exit if the script did not.
    atexit.register(leave)
    return started


def leave(adopted_too: bool = False) -> None:
    """Leave the job (:func:`compat.destroy` without a group): the framework's process group too,
    unless it was adopted (``adopted_too``: that one too, as torch's destroy_process_group()).
    Nothing if compat is not initialised."""
    _drop_stale()
    leaving = _current
    if leaving is not None:
        set_current(None)
        recorder.stop()
        shared_memory.close_all(leaving.adapter)
        if adopted_too:
            leaving.adapter.destroy_adopted()
        else:
            leaving.adapter.destroy()
        scratch.clear(leaving.adapter)


def _raises_lost(liveness: Liveness, collective: str) -> Callable[..., Any]:
    """What runs every collective on a group whose peer was found gone: PeerLostError at once,
    naming it (the backend's own call could wait for its whole timeout: MCCL's 30 s)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        raise liveness.error(collective)

    return run


def set_current(state: State | None) -> None:
    global _current
    _current = state


def get_current() -> State | None:
    """The process state, None before compat.init or adoption, or once the framework's
    process group was ended by code compat does not own."""
    _drop_stale()
    return _current


def _whoami() -> tuple[int, int]:
    state = current()
    return state.rank, state.world_size


types.whoami = _whoami
