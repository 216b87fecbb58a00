"""compat's public API for the process: lifecycle, queries and groups (the collectives are in
:mod:`compat.collectives`).

Every query and collective works after :func:`init`, or without it in a process whose framework
process group was initialised elsewhere (``torch.distributed.init_process_group``,
``mindspore.communication.init()``): the first one adopts that group as ``init()`` would (see
:func:`init`); otherwise it raises :class:`compat.NotInitializedError`.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from compat import algorithms
from compat.base import net, tables
from compat.base.adapter import Adapter, Rendezvous
from compat.base.errors import AlreadyInitializedError, CollectiveTimeout
from compat.base.types import WORLD, Backend, Group
from compat.core import state
from compat.core.dispatch import choose_framework, installed, load_adapter
from compat.core.values import check_bool, check_int, describe
from compat.transport import shared_memory

# -- lifecycle --------------------------------------------------------------------------------


def init(
    framework: str | None = None,
    backend: str | None = None,
    *,
    timeout: float | timedelta | None = None,
    check: bool | None = None,
    init_method: str | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    store: object = None,
    group_name: str = "",
    pg_options: object = None,
    device_id: int | object | None = None,
) -> None:
    """Join the job and set up communication.

    Parameters
    ----------
    framework
        ``"torch"`` or ``"mindspore"``. Default: ``COMPAT_FRAMEWORK``, else the launcher's
        environment (torchrun's ``MASTER_ADDR``/``TORCHELASTIC_RUN_ID``, msrun's ``MS_ROLE``),
        else the one installed framework.
    backend
        torch: ``"gloo"`` or ``"nccl"`` (default nccl if CUDA is available, else gloo).
        MindSpore: ``"hccl"``, ``"nccl"`` or ``"mccl"`` (default by device). The other
        framework's name for the CPU backend means this one's (``"gloo"`` is ``"mccl"`` on
        MindSpore, ``"mccl"`` is ``"gloo"`` on torch), so a script ported from torch runs on both.
    timeout
        Seconds (or a ``timedelta``) that bound the set-up and every collective (torch); a
        collective that cannot complete raises :class:`compat.CollectiveTimeout`.
    check
        Run the pre-flight check before each collective (default: ``COMPAT_CHECK=1``): the
        ranks compare their calls and raise :class:`compat.CollectiveMismatchError` on every
        rank, naming the ranks and the difference, instead of hanging or corrupting data.
    init_method, rank, world_size
        As in ``torch.distributed.init_process_group``: ``"env://"`` (``MASTER_ADDR``,
        ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``), ``"tcp://host:port"`` with ``rank`` and
        ``world_size``, or ``"file://path"`` (torch). On MindSpore too: rank 0 starts
        MindSpore's scheduler at ``host:port`` itself and ends it at :func:`destroy`, so a
        ``torch.multiprocessing.spawn``-style script or ``torchrun`` starts a MindSpore job
        without msrun. ``rank=-1`` and ``world_size=-1`` (torch's defaults) mean not given, as
        None does; other negative values are a ValueError.
    store
        torch: a ``torch.distributed.Store`` to meet through instead of ``init_method`` (with
        ``rank`` and ``world_size``), as torch takes it. MindSpore meets through its scheduler
        only: a store is an UnsupportedError there.
    group_name
        Accepted and ignored, as torch 2.13 ignores it (deprecated there).
    pg_options
        torch: the backend's options (e.g. ``ProcessGroupNCCL.Options``), passed on. MindSpore
        has none to take (its own ``pg_options`` is reserved): anything but None is an
        UnsupportedError.
    device_id
        The device this process uses. torch: as ``init_process_group(device_id=)`` (an index or
        a ``torch.device``; on NCCL also the CUDA device compat makes current, instead of
        ``LOCAL_RANK``). MindSpore: an index, given to ``ms.set_device`` with the backend's
        device target.

    If the framework's own process group is already initialised (the script called
    ``torch.distributed.init_process_group`` or ``mindspore.communication.init()`` itself),
    compat adopts it: rank, world and backend are read from it, and :func:`destroy` leaves it
    alive. Without any of these, a process forms a world of one.

    Calling ``init`` is optional in a process whose framework process group was initialised
    elsewhere: the first collective or query (``compat.get_rank()``, ``compat.all_reduce``, ...)
    adopts that group exactly as ``init()`` with no arguments (framework: the one whose group is
    initialised; ``check`` from ``COMPAT_CHECK``) would. Without either, collectives and queries
    raise :class:`compat.NotInitializedError`.

    Examples
    --------
    Started by ``torch.multiprocessing.spawn(main, nprocs=2)``, on either framework::

        >>> def main(rank):
        ...     compat.init("mindspore", init_method="tcp://127.0.0.1:29500", rank=rank,
        ...                 world_size=2)
    """
    _not_initialised()
    chosen = choose_framework(framework)
    backend = _own_backend(chosen, check_backend(backend, "backend"))
    timeout = _check_timeout(timeout, "timeout")
    rendezvous = _check_rendezvous(init_method, rank, world_size, store)
    _check_name_and_device(group_name, device_id)
    rendezvous = replace(rendezvous, device_id=device_id, pg_options=pg_options)
    check = check_bool(state.check_from_environment() if check is None else check, "check")
    started = state.start(chosen, backend, timeout, rendezvous, check)
    started.open_window(None)


def _not_initialised() -> None:
    """compat is not initialised yet (init twice is an error, as in torch)."""
    if state.get_current() is not None:
        current = state.current()
        raise AlreadyInitializedError(
            f"compat is already initialised ({current.framework}/{current.backend}); "
            "call compat.destroy() first"
        )


def _check_name_and_device(group_name: object, device_id: object) -> None:
    """init's ``group_name`` (a str, ignored) and ``device_id`` (None, an index or a device)."""
    if not isinstance(group_name, str):
        raise TypeError(
            f"group_name: expected a str (ignored, as torch does); got {describe(group_name)}"
        )
    if isinstance(device_id, bool) or (isinstance(device_id, int) and device_id < 0):
        raise ValueError(
            f"device_id: expected None, a device index >= 0 or a device; got {device_id!r}"
        )


def check_backend(backend: object, param: str) -> str | None:
    """``backend``: None or a str, any string the framework takes (compat refuses none: a
    backend compat has no capability entry for runs natively, and the framework answers for
    it)."""
    if backend is not None and not isinstance(backend, str):
        raise TypeError(
            f"{param}: expected None or a backend name (a str, e.g. 'gloo' or "
            f"'cpu:gloo,cuda:nccl'); got {describe(backend)}"
        )
    if backend is not None:
        pairs = [part.split(":") for part in backend.split(",")]
        one_name = len(pairs) == 1 and len(pairs[0]) == 1
        if not all(all(word.strip() for word in pair) for pair in pairs) or not (
            one_name or all(len(pair) == 2 for pair in pairs)
        ):
            # The form torch's BackendConfig parses; any name in it is the framework's to judge.
            raise ValueError(
                f"{param}: expected a backend name or 'device:backend' pairs separated by commas "
                f"(e.g. 'gloo', 'cpu:gloo,cuda:nccl'); got {backend!r}"
            )
    return backend


def _own_backend(framework: str, backend: str | None, adapter: Adapter | None = None) -> str | None:
    """``backend``, or this framework's backend for the same device when ``backend`` is another
    framework's name for it (``backend_aliases`` in frameworks.toml: gloo is mccl on
    MindSpore), unless the framework has a backend of that name itself (a plugin's: torch_musa
    registers "mccl" with torch)."""
    aliases: dict[str, str] = tables.lookup("frameworks", framework).get("backend_aliases", {})
    if not isinstance(backend, str) or backend not in aliases:
        return backend
    if (adapter or load_adapter(framework)).registers_backend(backend):
        return backend
    return aliases[backend]


def _check_timeout(timeout: object, param: str) -> timedelta | None:
    if timeout is None:
        return None
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        try:
            timeout = timedelta(seconds=timeout)
        except (OverflowError, ValueError):  # nan, +-inf, or beyond timedelta's range: refused
            pass
    if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
        raise ValueError(
            f"{param}: expected a positive number of seconds or timedelta; got {timeout!r}"
        )
    return timeout


_INIT_METHODS = ("env://", "tcp://", "file://")


def _check_rendezvous(
    init_method: object, rank: object, world_size: object, store: object = None
) -> Rendezvous:
    if init_method is not None and (
        not isinstance(init_method, str) or not init_method.startswith(_INIT_METHODS)
    ):
        raise ValueError(
            f"init_method: expected None or a URL starting with one of {list(_INIT_METHODS)}; "
            f"got {init_method!r}"
        )
    size = _not_given_as_none(world_size, "world_size")
    if size is not None and size < 1:
        raise ValueError(f"world_size: expected an int >= 1 (or -1 or None: not given); got {size}")
    me = _not_given_as_none(rank, "rank")
    if me is not None and not 0 <= me < (size if size is not None else me + 1):
        raise ValueError(
            f"rank: expected an int in [0, world_size={size}) (or -1 or None: not given); got {me}"
        )
    if isinstance(init_method, str) and init_method.startswith("tcp://"):
        if me is None or size is None:
            raise ValueError(
                f"rank: expected rank and world_size with init_method={init_method!r}; got "
                f"rank={me}, world_size={size}"
            )
        _host_port(init_method)
    if store is not None and (init_method is not None or me is None or size is None):
        raise ValueError(
            "store: expected rank and world_size and no init_method with a store (as torch); "
            f"got init_method={init_method!r}, rank={me}, world_size={size}"
        )
    return Rendezvous(init_method, me, size, store)


def _not_given_as_none(value: object, param: str) -> int | None:
    """``rank``/``world_size``: None or -1 (torch's default, "not given") -> None; else the int."""
    number = None if value is None else check_int(value, param)
    return None if number == -1 else number


def _host_port(url: str) -> tuple[str, int]:
    """``tcp://host:port`` -> (host, port), or the ValueError naming init_method."""
    where = url.removeprefix("tcp://").split("?")[0].rstrip("/")
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"init_method: expected tcp://host:port; got {url!r}")
    return host, int(port)


def get_free_port() -> int:
    """A TCP port on this host that is free now, to pass as ``MASTER_PORT`` or in
    ``init_method`` (torch elastic's ``get_free_port``): free until someone binds it. Taken
    below the range Linux draws outgoing connections' local ports from, where it can tell, so
    that a rendezvous server binding it seconds later (MindSpore's scheduler) does not find it
    taken by a connection meanwhile."""
    return net.free_port()


def get_socket_with_port() -> socket.socket:
    """A TCP socket bound to a free port on localhost and listening, which holds the port
    until it is closed (torch elastic's ``get_socket_with_port``): read the port with
    ``sock.getsockname()[1]``, close the socket just before handing the port on."""
    return net.listening_socket()


def is_available() -> bool:
    """True if a framework compat runs on is installed (checked without importing it)."""
    return bool(installed())


def is_backend_available(backend: str) -> bool:
    """Whether ``backend`` can run here, asked of the framework compat runs on (or would choose,
    see :func:`init`): torch's ``torch.distributed.is_backend_available`` (a question about
    torch's build: ``is_nccl_available()`` is True in a CUDA build without a GPU); on MindSpore,
    a backend of its capability table (torch's name for the CPU backend means MCCL) whose device
    this process has (the CPU always). What ``compat port`` writes for ``is_nccl_available()``
    and the other ``is_*_available()``."""
    name = check_backend(backend, "backend")
    if name is None:
        raise TypeError("backend: expected a backend name (a str); got None")
    current = state.get_current()
    if current is not None:
        framework, adapter = current.framework, current.adapter
    else:
        imported = [
            name
            for name in installed()
            if tables.lookup("frameworks", name, "module") in sys.modules
        ]
        chosen = (
            imported[0] if len(imported) == 1 and "COMPAT_FRAMEWORK" not in os.environ else None
        )
        framework = choose_framework(chosen, first_if_several=True)
        adapter = load_adapter(framework)
    return adapter.backend_available(_own_backend(framework, name, adapter) or name)


def is_initialized() -> bool:
    """True if compat is initialised, or an imported framework's own process group is.

    The second case is a process group compat has not adopted yet (an unported module called
    ``torch.distributed.init_process_group`` or ``mindspore.communication.init()``): compat's
    first collective or query adopts it, so ``if compat.is_initialized():`` keeps the meaning of
    ``if torch.distributed.is_initialized():``. Only frameworks already imported are asked (none
    is imported here); after :func:`destroy`, an adopted group still alive makes it True.
    """
    return state.get_current() is not None or bool(state.initialised_frameworks())


def destroy(group: object = None) -> None:
    """Leave the job, or free ``group``.

    Without a group: leave compat, and the framework's process group if compat created it (an
    adopted one stays alive); :func:`init` may be called again afterwards. With a group (a
    compat.Group or the framework's own): free it, like
    ``torch.distributed.destroy_process_group(group)``.
    """
    if group is not None and group is not WORLD:
        current = state.checked()  # adopts on first use, as the queries do
        resolved = current.checks.group(group, member=False)
        if resolved is current.world:
            raise ValueError(
                "group: expected a group other than the world (destroy() leaves the whole job); "
                f"got {describe(group)}"
            )
        if resolved.handle is not None:
            current.forget_group(resolved.handle)
            current.adapter.destroy_group(resolved.handle)
        if current.groups.get(resolved.ranks) is resolved:
            del current.groups[resolved.ranks]
        resolved.destroyed = True
        current.checks.forget_native(resolved)
        return
    state.leave()


def destroy_process_group(group: object = None) -> None:
    """``torch.distributed.destroy_process_group``: what ``compat port`` writes for it.

    Without a group, or with the world (any spelling): leave compat and end the framework's
    process group, whoever created it (one compat adopted too), as torch's ends the default
    group; nothing if neither is initialised. With another group: free it, as :func:`destroy`.
    """
    if group is not None and group is not WORLD:
        current = state.checked()
        if current.checks.group(group, member=False) is not current.world:
            destroy(group)
            return
        # torch: "if group.WORLD is given, all process groups including the default one will
        # be destroyed"
    if state.get_current() is None and state.initialised_frameworks():
        state.checked()  # adopt the group torch made, to end it
    state.leave(adopted_too=True)


#: How long every rank waits for the others once a group is made (:func:`_meet_once_made`):
#: MindSpore's own bound on setting up a group's communicator (600 s by default,
#: CollectiveManager::GetCommunicatorInitTimeout).
GROUP_SETUP_SECONDS = 600.0


def _meet_once_made(current: state.State) -> None:
    """Wait, in the world's shared-memory window, until every rank has made the group.

    MindSpore makes a group on each member apart, and a member other than the group's first
    fetches the group's set-up from the job's scheduler: a member that is done first starts the
    group's first collective (its window's set-up) while another may still be fetching, and
    MCCL gives up on a collective after 30 s (a CI run on two busy cores: rank 0 timed out
    there, ranks 1 and 2 30 and 60 s later). Here ranks wait for each other as long as
    MindSpore gives a group's set-up, and a rank still missing then is named. Where the world
    has no window in memory (ranks on several hosts, not x86), the group's first collective
    waits as before."""
    window = shared_memory.made(current.adapter, None)
    if window is None or not window.waits_in_memory:
        return
    try:
        algorithms.shared_memory_monitored_barrier(
            current.adapter, None, GROUP_SETUP_SECONDS, False
        )
    except CollectiveTimeout as error:
        raise CollectiveTimeout(
            f"new_group: every rank meets once the group is made; {error}"
        ) from error


# -- queries ----------------------------------------------------------------------------------


def get_framework() -> str:
    """The framework compat was initialised for (or adopts now, see :func:`init`): ``"torch"``
    or ``"mindspore"``."""
    return state.checked().framework


def get_backend(group: object = None) -> str:
    """The backend of ``group`` (default: the world's) as the framework names it (``"gloo"``,
    ``"nccl"``, ``"mccl"``, ``"hccl"``, a string naming one per device such as
    ``"cpu:gloo,cuda:nccl"``, or another the framework runs): a group made with
    ``new_group(backend=...)`` answers its own, as torch's ``get_backend(group)`` does.

    A name :class:`compat.Backend` has is returned as its member, as torch returns its
    ``Backend`` class's own constant: ``get_backend(group) is Backend.NCCL`` holds, as in torch.
    """
    current = state.checked()
    resolved = current.checks.group(group, member=False)
    own = None if resolved.handle is None else current.adapter.group_backend(resolved.handle)
    name = current.backend if own is None else own
    return Backend(name) if name in _BACKEND_NAMES else name


_BACKEND_NAMES = frozenset(member.value for member in Backend)


def get_rank(group: object = None) -> int:
    """This process's rank in the world, or in ``group`` (-1 if it is not a member).

    Like every query, it adopts a framework process group initialised outside compat on first
    use (see :func:`init`); with none, it raises :class:`compat.NotInitializedError`.
    """
    current = state.checked()
    return current.checks.group(group, member=False).group_rank(current.rank)


def get_world_size(group: object = None) -> int:
    """The number of ranks in the world, or in ``group`` (-1 if this process is not a member,
    as torch's and MindSpore's answer)."""
    current = state.checked()
    resolved = current.checks.group(group, member=False)
    return resolved.size() if resolved.own_global_rank(current.rank) in resolved else -1


def get_process_group_ranks(group: object) -> list[int]:
    """The global ranks of ``group`` (None or compat.WORLD: every rank), in group-rank order."""
    return list(state.checked().checks.group(group, member=False).ranks)


def get_global_rank(group: object, group_rank: int) -> int:
    """The global rank of group rank ``group_rank`` of ``group``.

    Examples
    --------
    >>> group = compat.new_group([1, 3])
    >>> compat.get_global_rank(group, 1)
    3
    """
    resolved = state.checked().checks.group(group, member=False)
    index = check_int(group_rank, "group_rank")
    if not 0 <= index < resolved.size():
        raise ValueError(
            f"group_rank: expected a rank in [0, {resolved.size()}) of the group with ranks "
            f"{list(resolved.ranks)}; got {index}"
        )
    return resolved.ranks[index]


def get_group_rank(group: object, global_rank: int) -> int:
    """The rank in ``group`` of global rank ``global_rank``.

    Examples
    --------
    >>> group = compat.new_group([1, 3])
    >>> compat.get_group_rank(group, 3)
    1
    """
    resolved = state.checked().checks.group(group, member=False)
    rank = check_int(global_rank, "global_rank")
    if rank not in resolved:
        raise ValueError(
            f"global_rank: expected a member of the group, one of {list(resolved.ranks)}; "
            f"got {rank}"
        )
    return resolved.group_rank(rank)


# -- groups -----------------------------------------------------------------------------------


def new_group(
    ranks: Sequence[int] | None = None,
    *,
    timeout: float | timedelta | None = None,
    backend: str | None = None,
    use_local_synchronization: bool = False,
) -> Group:
    """Create a group of the given global ranks (None: every rank). Every rank of the world
    must call it, in the same order relative to other new_group calls, like
    ``torch.distributed.new_group``; on MindSpore too (compat creates the group on its members
    only, which MindSpore needs).

    With ``use_local_synchronization=True`` (torch's), only the members call it and only they
    meet: ranks outside the group may be elsewhere (in another collective, making another
    group). As torch asks, every member makes its member-only groups in the same order (on
    torch the group's name counts the groups each member has: members that made different
    numbers of groups before would wait for each other in vain). A rank outside ``ranks`` that
    calls it gets a Group with no handle, at once.

    Ranks are sorted: group rank i is the i-th smallest global rank. ``timeout`` and
    ``backend`` as in torch (torch: any of its backends, e.g. a gloo group in an NCCL job;
    MindSpore: its own backend only, and no timeout: a clear error otherwise).
    """
    return _new_group(ranks, timeout, backend, None, use_local_synchronization)


def new_framework_group(
    ranks: Sequence[int] | None = None,
    timeout: float | timedelta | None = None,
    backend: str | None = None,
    pg_options: object = None,
    use_local_synchronization: bool = False,
    group_desc: str | None = None,
) -> object:
    """:func:`new_group`, returning the framework's own group: a torch ``ProcessGroup``
    (``GroupMember.NON_GROUP_MEMBER`` on ranks outside it), a MindSpore group name (``""``
    outside it). What ``compat port`` writes for ``torch.distributed.new_group``: the group
    stays usable by code that calls the framework directly (``dist.get_global_rank(group, 0)``,
    a checkpoint loader's ``process_group=``), and every compat call takes it too.

    Parameters as torch's ``new_group`` (same positions): ``pg_options`` is passed to torch
    (MindSpore has no counterpart: anything but None is an UnsupportedError there);
    ``use_local_synchronization=True``: only the members call it (see :func:`new_group`), and
    a rank outside the group that calls it gets None, as torch's; ``group_desc`` names the group
    (torch's description of it).
    """
    _check_description(group_desc)
    local = check_bool(use_local_synchronization, "use_local_synchronization")
    made = _new_group(ranks, timeout, backend, group_desc, local, pg_options)
    if local and made.handle is None:
        return None  # torch's answer outside a member-only group
    return framework_group(made)


def split_group(
    parent_pg: object = None,
    split_ranks: Sequence[Sequence[int]] | None = None,
    timeout: float | timedelta | None = None,
    pg_options: object = None,
    group_desc: str | None = None,
    backend: str | None = None,
) -> object:
    """torch's ``split_group``: every rank of ``parent_pg`` (default the world) calls it with
    the same ``split_ranks``, disjoint lists of ranks *in the parent group*; returns the
    framework's own group of this rank's split (as :func:`new_framework_group`), or what the
    installed torch's split_group gives a rank in none of them (None; from torch 2.14
    ``GroupMember.NON_GROUP_MEMBER``; None on MindSpore). A split's group ranks follow its
    ranks' order (torch up to 2.13 sorts each list; from 2.14, which keeps the listed order,
    a list out of order is a ValueError here).

    Made on every backend (torch's own split_group runs on NCCL and XCCL only, sharing the
    parent's communicator there), with ``backend`` or else the parent's. A split of the world:
    every rank makes every split, in list order, as :func:`new_subgroups_by_enumeration`
    (named ``group_desc`` with the split's index); of another parent, the ranks outside it do
    not call, so each split is made by its members only (:func:`new_framework_group` with
    ``use_local_synchronization=True``, whose rule on torch applies). ``timeout`` and
    ``pg_options`` as in :func:`new_framework_group`.
    """
    current = state.checked()
    parent = current.checks.group(parent_pg, "parent_pg")  # this rank a member, as torch asks
    splits = _check_rank_lists(split_ranks, "split_ranks", parent.size(), "of the parent group")
    _check_listed_order(splits, current.adapter.split_keeps_listed_order)
    _check_timeout(timeout, "timeout")
    _check_description(group_desc)
    if backend is None and parent.handle is not None:
        backend = current.adapter.group_backend(parent.handle)
    if parent is current.world:
        # Every rank is here: made as world groups, whose names need no agreement but the order.
        mine, _ = _every_subgroup(splits, timeout, backend, pg_options, group_desc)
        return current.adapter.outside_split if mine is None else mine
    own = next((split for split in splits if parent.group_rank(current.rank) in split), None)
    if own is None:
        return current.adapter.outside_split
    return new_framework_group(
        [parent.ranks[r] for r in sorted(own)], timeout, backend, pg_options, True, group_desc
    )


def _check_rank_lists(lists: object, param: str, size: int, where: str) -> list[list[int]]:
    """A non-empty list of non-empty lists of distinct ranks in ``[0, size)``, each rank in one
    list at most (split_group's ``split_ranks``, new_subgroups_by_enumeration's list): checked
    whole before any group is made, so that a bad last list leaves no group behind."""
    if not isinstance(lists, Sequence) or isinstance(lists, str) or not lists:
        raise ValueError(
            f"{param}: expected a non-empty list of lists of ranks {where}; got {describe(lists)}"
        )
    checked: list[list[int]] = []
    seen: set[int] = set()
    for index, ranks in enumerate(lists):
        if not isinstance(ranks, Sequence) or isinstance(ranks, str) or not ranks:
            raise ValueError(
                f"{param}[{index}]: expected a non-empty list of ranks {where}; "
                f"got {describe(ranks)}"
            )
        members = [check_int(rank, f"{param}[{index}][{i}]") for i, rank in enumerate(ranks)]
        bad = [rank for rank in members if not 0 <= rank < size]
        if bad or seen.intersection(members) or len(set(members)) != len(members):
            raise ValueError(
                f"{param}[{index}]: expected distinct ranks {where}, in [0, {size}), each in "
                f"one list at most; got {members}"
            )
        seen.update(members)
        checked.append(members)
    return checked


def _check_listed_order(splits: list[list[int]], listed_order: bool) -> None:
    """Where torch's split_group numbers a split's ranks as listed, a list out of order would
    number them otherwise than compat's groups, which sort them."""
    for index, members in enumerate(splits):
        if listed_order and members != sorted(members):
            raise ValueError(
                f"split_ranks[{index}]: expected the ranks in increasing order (this torch's "
                "split_group numbers a split's ranks as listed, compat's groups in sorted "
                f"order); got {members}"
            )


def _check_description(group_desc: object) -> None:
    if group_desc is not None and not isinstance(group_desc, str):
        raise TypeError(f"group_desc: expected None or a str; got {describe(group_desc)}")


def new_subgroups_by_enumeration(
    ranks_per_subgroup_list: Sequence[Sequence[int]],
    timeout: float | timedelta | None = None,
    backend: str | None = None,
    pg_options: object = None,
    group_desc: str | None = None,
) -> tuple[object, list[object]]:
    """torch's ``new_subgroups_by_enumeration``: every rank makes every subgroup, in list order
    (each rank in at most one); returns (this rank's subgroup, or None outside all of them, and
    every subgroup), the framework's own groups as :func:`new_framework_group` makes them."""
    world_size = state.checked().world_size
    lists = _check_rank_lists(ranks_per_subgroup_list, "ranks_per_subgroup_list", world_size,
                              "of the world")  # fmt: skip
    _check_description(group_desc)
    return _every_subgroup(lists, timeout, backend, pg_options, group_desc)


def _every_subgroup(
    lists: list[list[int]],
    timeout: float | timedelta | None,
    backend: str | None,
    pg_options: object,
    group_desc: str | None,
) -> tuple[object, list[object]]:
    """Every rank makes every group of ``lists``, in order, named ``group_desc`` and the index."""
    me = state.checked().rank
    mine: object = None
    subgroups: list[object] = []
    for index, ranks in enumerate(lists):
        name = None if group_desc is None else f"{group_desc}_{index}"
        made = new_framework_group(sorted(ranks), timeout, backend, pg_options, False, name)
        subgroups.append(made)
        mine = made if me in ranks else mine
    return mine, subgroups


def new_subgroups(
    group_size: int | None = None,
    group: object = None,
    timeout: float | timedelta | None = None,
    backend: str | None = None,
    pg_options: object = None,
    group_desc: str | None = None,
) -> tuple[object, list[object]]:
    """torch's ``new_subgroups``: ``group`` (default the world) cut into consecutive subgroups
    of ``group_size`` ranks (default: this host's accelerators, as torch's CUDA device count);
    returns (this rank's subgroup, every subgroup), the framework's own groups."""
    current = state.checked()
    resolved = current.checks.group(group, member=False)
    if group_size is None:
        group_size = len(current.adapter.available_devices()) - 1  # every device but the CPU
    size = check_int(group_size, "group_size")
    if size <= 0 or size > resolved.size() or resolved.size() % size:
        raise ValueError(
            f"group_size: expected a positive divisor of the group's size {resolved.size()}; "
            f"got {size}"
        )
    ranks = list(resolved.ranks)
    return new_subgroups_by_enumeration(
        [ranks[start : start + size] for start in range(0, len(ranks), size)],
        timeout,
        backend,
        pg_options,
        group_desc,
    )


def framework_group(group: object = None) -> object:
    """The framework's own object for ``group`` (default: the world): a torch
    ``ProcessGroup`` (``dist.group.WORLD`` for the world, ``GroupMember.NON_GROUP_MEMBER`` on a
    rank outside the group), a MindSpore group name. None while no process group is
    initialised, as ``torch.distributed.group.WORLD`` is then. What ``compat port`` writes for
    ``torch.distributed.group.WORLD``, so the value stays usable by unported code."""
    if not is_initialized():
        return None
    current = state.checked()
    resolved = current.checks.group(group, member=False)
    member = resolved.own_global_rank(current.rank) in resolved.ranks
    found = current.adapter.framework_group(resolved.handle, member)
    return GroupName(found) if isinstance(found, str) else found


class GroupName(str):
    """A MindSpore group's name (what MindSpore's functions take as ``group``) that also answers
    ``size()`` and ``rank()`` as a torch ProcessGroup does, so that ported code written for
    torch's groups (``group.size() <= 1``, ``inputs[group.rank()]``) runs on MindSpore."""

    __slots__ = ()

    def size(self) -> int:
        """The number of ranks in the group."""
        return get_world_size(str(self))

    def rank(self) -> int:
        """This process's rank in the group, -1 if it is not a member."""
        return get_rank(str(self)) if self else -1


def _new_group(
    ranks: Sequence[int] | None,
    timeout: float | timedelta | None,
    backend: str | None,
    description: str | None,
    members_only: bool = False,
    options: object = None,
) -> Group:
    current = state.checked()
    if ranks is None:
        ranks = range(current.world_size)
    if not isinstance(ranks, Sequence) or isinstance(ranks, str):
        raise TypeError(f"ranks: expected a list of global ranks or None; got {describe(ranks)}")
    members = [check_int(rank, f"ranks[{i}]") for i, rank in enumerate(ranks)]
    bad = [rank for rank in members if not 0 <= rank < current.world_size]
    if bad or not members or len(set(members)) != len(members):
        raise ValueError(
            f"ranks: expected distinct global ranks in [0, {current.world_size}), at least one; "
            f"got {members}"
        )
    group_timeout = _check_timeout(timeout, "timeout")
    backend = _own_backend(current.framework, check_backend(backend, "backend"), current.adapter)
    members_only = check_bool(members_only, "use_local_synchronization")
    members.sort()
    if members_only:
        return _new_members_only_group(current, members, group_timeout, backend, description,
                                       options)  # fmt: skip
    current.group_count += 1
    name = description or f"compat_group_{current.group_count}"
    handle = current.adapter.new_group(members, name, group_timeout, backend, options=options)
    group = Group(members, handle, name)
    _meet_once_made(current)
    if current.rank in members:
        current.open_window(handle)
    current.groups.setdefault(tuple(members), group)
    return group


def _new_members_only_group(
    current: state.State,
    members: list[int],
    timeout: timedelta | None,
    backend: str | None,
    description: str | None,
    options: object,
) -> Group:
    """A group its members make alone (``use_local_synchronization=True``). Nothing here may
    count on the other ranks: the group's name is what its members alone agree on (its ranks,
    and how many member-only groups of these ranks each made before), the members meet in
    the group's own creation (not in the world's window), and its window is the group's."""
    made_before = current.members_only_counts.get(tuple(members), 0)
    digest = hashlib.sha1(f"{members}#{made_before}".encode()).hexdigest()[:16]
    name = f"{description or 'compat_local'}_{digest}"
    if current.rank not in members:
        return Group(members, None, name)  # torch's new_group answers at once here
    handle = current.adapter.new_group(
        members, name, timeout, backend, members_only=True, options=options,
        description=description,
    )  # fmt: skip
    current.members_only_counts[tuple(members)] = made_before + 1
    group = Group(members, handle, name)
    current.open_window(handle)
    current.groups.setdefault(tuple(members), group)
    return group
