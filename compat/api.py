"""compat's public API for the process: lifecycle, queries and groups (the collectives are in
:mod:`compat.collectives`)."""

from __future__ import annotations

import atexit
import os
from collections.abc import Sequence
from datetime import timedelta

from compat import capabilities, state
from compat._checks import check_bool, check_int, describe
from compat.dispatch import choose_framework, load_adapter
from compat.state import State
from compat.types import Group

# -- lifecycle --------------------------------------------------------------------------------


def init(
    framework: str | None = None,
    backend: str | None = None,
    *,
    timeout: float | timedelta | None = None,
    check: bool | None = None,
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
        MindSpore: ``"hccl"``, ``"nccl"`` or ``"mccl"`` (default by device).
    timeout
        Seconds (or a ``timedelta``) that bound the set-up and every collective (torch); a
        collective that cannot complete raises :class:`compat.CollectiveTimeout`.
    check
        Run the pre-flight check before each collective (default: ``COMPAT_CHECK=1``): the
        ranks compare their calls and raise :class:`compat.CollectiveMismatchError` on every
        rank, naming the ranks and the difference, instead of hanging or corrupting data.

    Without a launcher's environment a torch process forms a world of one.
    """
    if state.get_current() is not None:
        current = state.current()
        raise RuntimeError(
            f"compat is already initialised ({current.framework}/{current.backend}); "
            "call compat.destroy() first"
        )
    chosen = choose_framework(framework)
    backends = list(capabilities.backends(chosen))
    if backend is not None and backend not in backends:
        raise ValueError(f"backend: expected one of {backends} for {chosen}; got {backend!r}")
    if timeout is not None:
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
            timeout = timedelta(seconds=timeout)
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
            raise ValueError(
                f"timeout: expected a positive number of seconds or timedelta; got {timeout!r}"
            )
    adapter = load_adapter(chosen)
    chosen_backend = adapter.init(backend, timeout)
    if check is None:
        check = os.environ.get("COMPAT_CHECK", "") not in ("", "0")
    state.set_current(State(adapter, chosen_backend, check_bool(check, "check")))
    # A torch process that exits with its process group alive aborts ("terminate called without
    # an active exception", measured): leave the job at exit if the script did not.
    atexit.register(destroy)


def is_initialized() -> bool:
    """True between :func:`init` and :func:`destroy`."""
    return state.get_current() is not None


def destroy() -> None:
    """Leave the job; :func:`init` may be called again afterwards."""
    current = state.get_current()
    if current is not None:
        state.set_current(None)
        current.adapter.destroy()
        current.adapter.scratch.clear()


def get_framework() -> str:
    """The framework compat was initialised for: ``"torch"`` or ``"mindspore"``."""
    return state.current().framework


def get_backend(group: Group | None = None) -> str:
    """The backend in use (``"gloo"``, ``"nccl"``, ``"mccl"``, ``"hccl"``)."""
    current = state.current()
    if group is not None and not isinstance(group, Group):
        raise TypeError(f"group: expected a compat.Group or None; got {describe(group)}")
    return current.backend


def get_rank(group: Group | None = None) -> int:
    """This process's rank in the world, or in ``group`` (-1 if it is not a member)."""
    current = state.current()
    if group is None:
        return current.rank
    if not isinstance(group, Group):
        raise TypeError(f"group: expected a compat.Group or None; got {describe(group)}")
    return group.group_rank(current.rank)


def get_world_size(group: Group | None = None) -> int:
    """The number of ranks in the world, or in ``group``."""
    current = state.current()
    if group is None:
        return current.world_size
    if not isinstance(group, Group):
        raise TypeError(f"group: expected a compat.Group or None; got {describe(group)}")
    return group.size


def new_group(ranks: Sequence[int]) -> Group:
    """Create a group of the given global ranks. Every rank of the world must call it, in the
    same order relative to other new_group calls, like ``torch.distributed.new_group``.

    Ranks are sorted: group rank i is the i-th smallest global rank.
    """
    current = state.current()
    if not isinstance(ranks, Sequence) or isinstance(ranks, str):
        raise TypeError(f"ranks: expected a list of global ranks; got {describe(ranks)}")
    members = [check_int(rank, f"ranks[{i}]") for i, rank in enumerate(ranks)]
    bad = [rank for rank in members if not 0 <= rank < current.world_size]
    if bad or not members or len(set(members)) != len(members):
        raise ValueError(
            f"ranks: expected distinct global ranks in [0, {current.world_size}), at least one; "
            f"got {members}"
        )
    members.sort()
    current.group_count += 1
    name = f"compat_group_{current.group_count}"
    handle = current.adapter.new_group(members, name)
    return Group(members, handle, name)
