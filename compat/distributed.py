"""torch.distributed's names, with torch's signatures and results, run by compat.

For code that binds one name to torch.distributed or to another torch-shaped library by a flag
(``import deepspeed.comm as dist`` in one branch), write::

    import compat.distributed as dist      # in place of: import torch.distributed as dist

    dist.init_process_group("gloo")
    dist.all_reduce(t, async_op=True).wait()
    dist.all_gather_into_tensor(out, t)

and the uses, left as written, run on torch or on MindSpore. Each name takes every call torch's
takes (same positions, same names) and returns what torch's returns; where compat's own function
has another shape (``compat.all_gather_into_tensor`` is MindSpore's functional form) the name is
bound to the one that has torch's (:func:`compat.all_gather_into`). Where torch's parameters are
positional and compat's keyword-only (``group_src``/``group_dst`` of the rooted calls), a thin
function here passes them on, so a positional call is right too. A torch parameter compat cannot
honour (``barrier(timeout=)``, ``new_group(device_id=)``) raises a ValueError naming it unless it
is torch's default; it is never dropped. A name torch.distributed has and compat has not is absent
here (AttributeError): ``__all__`` lists what there is. Groups are the framework's own
(``new_group`` returns a torch ``ProcessGroup`` or a MindSpore group name, ``group.WORLD`` the
world's), so they stay usable by code that calls the framework directly.

``compat port`` writes ``import compat.distributed as dist`` where a file binds ``dist`` both to
torch.distributed and to another library. Importing this module imports no framework.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from compat import collectives as _collectives
from compat import lifecycle as _lifecycle
from compat import objects as _objects
from compat.base.types import Backend, ReduceOp, Work
from compat.collectives import (
    all_gather,
    all_reduce,
    all_reduce_coalesced,
    all_to_all,
    all_to_all_single,
    monitored_barrier,
    reduce_scatter,
)
from compat.collectives import coalescing_manager as _coalescing_manager
from compat.core.specs import DEFAULT_ROOT as _DEFAULT_ROOT
from compat.lifecycle import (
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    is_available,
    is_backend_available,
    is_initialized,
    new_subgroups,
    new_subgroups_by_enumeration,
    split_group,
)
from compat.mesh import DeviceMesh, init_device_mesh
from compat.objects import all_gather_object
from compat.p2p import P2POp, batch_isend_irecv, irecv, isend, recv, send
from compat.store import HashStore, PrefixStore, Store, TCPStore

all_gather_into_tensor = all_gather_single = _all_gather_base = _collectives.all_gather_into
reduce_scatter_tensor = reduce_scatter_single = _reduce_scatter_base = (
    _collectives.reduce_scatter_into
)

#: torch.distributed's name -> the compat function that runs it (tests check each against the
#: port's tables, so that this namespace and ``compat port`` cannot disagree).
RUNS = {
    "all_gather_into_tensor": "all_gather_into",
    "all_gather_single": "all_gather_into",
    "_all_gather_base": "all_gather_into",
    "reduce_scatter_tensor": "reduce_scatter_into",
    "reduce_scatter_single": "reduce_scatter_into",
    "_reduce_scatter_base": "reduce_scatter_into",
    "init_process_group": "init",
    "new_group": "new_framework_group",
    "_coalescing_manager": "coalescing_manager",
    **{
        f"is_{name}_available": "is_backend_available"
        for name in ("gloo", "nccl", "mpi", "ucc", "xccl")
    },
}


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store: object = None,
    group_name: str = "",
    pg_options: object = None,
    device_id: object = None,
    _ranks: list[int] | None = None,
) -> None:
    """torch's ``init_process_group`` (same positions): :func:`compat.init` on the framework
    compat chooses. ``world_size=-1``/``rank=-1`` (torch's defaults): from the environment."""
    if _ranks is not None:
        raise ValueError(f"_ranks: compat joins every rank of the job; expected None, got {_ranks}")
    _lifecycle.init(
        backend=backend,
        init_method=init_method,
        timeout=timeout,
        world_size=world_size,
        rank=rank,
        store=store,
        group_name=group_name,
        pg_options=pg_options,
        device_id=device_id,
    )


def new_group(
    ranks: list[int] | None = None,
    timeout: timedelta | None = None,
    backend: str | None = None,
    pg_options: object = None,
    use_local_synchronization: bool = False,
    group_desc: str | None = None,
    device_id: object = None,
    sort_ranks: bool = True,
) -> object:
    """torch's ``new_group`` (same positions), returning the framework's own group
    (:func:`compat.new_framework_group`). ``device_id`` (torch's eager NCCL set-up) is refused
    unless None; ``sort_ranks=False`` with ranks out of order too (compat's group ranks follow
    the sorted global ranks)."""
    if device_id is not None:
        raise ValueError(
            f"device_id: compat binds a group to the world's device; expected None, "
            f"got {device_id!r}"
        )
    if not sort_ranks and ranks is not None and list(ranks) != sorted(ranks):
        raise ValueError(
            f"sort_ranks: compat numbers a group's ranks in sorted order; expected True or ranks "
            f"in increasing order, got sort_ranks=False with ranks {list(ranks)}"
        )
    return _lifecycle.new_framework_group(
        ranks, timeout, backend, pg_options, use_local_synchronization, group_desc
    )


def barrier(
    group: Any = None,
    async_op: bool = False,
    device_ids: list[int] | None = None,
    timeout: timedelta | None = None,
) -> Work | None:
    """torch's ``barrier`` (same positions). ``timeout``, a bound on this barrier alone, is
    refused unless None: :func:`compat.monitored_barrier` bounds a barrier on every backend."""
    if timeout is not None:
        raise ValueError(
            f"timeout: compat's barrier takes no timeout of its own (the job's, from "
            f"init_process_group, bounds it; monitored_barrier takes one); expected None, "
            f"got {timeout!r}"
        )
    return _collectives.barrier(group, async_op, device_ids)


def _root(rank: int | None) -> int:
    """torch's ``src=None``/``dst=None``: not given (rank 0 unless a group rank is given), as
    compat's default root says."""
    return _DEFAULT_ROOT if rank is None else rank


def broadcast(
    tensor: Any,
    src: int | None = None,
    group: Any = None,
    async_op: bool = False,
    group_src: int | None = None,
) -> Work | None:
    """torch's ``broadcast``: :func:`compat.broadcast`, ``group_src`` positional too."""
    return _collectives.broadcast(tensor, src, group, async_op, group_src=group_src)


def reduce(
    tensor: Any,
    dst: int | None = None,
    op: Any = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
    group_dst: int | None = None,
) -> Work | None:
    """torch's ``reduce``: :func:`compat.reduce`, ``group_dst`` positional too."""
    return _collectives.reduce(tensor, dst, op, group, async_op, group_dst=group_dst)


def gather(
    tensor: Any,
    gather_list: list[Any] | None = None,
    dst: int | None = None,
    group: Any = None,
    async_op: bool = False,
    group_dst: int | None = None,
) -> Work | None:
    """torch's ``gather``: :func:`compat.gather`, ``group_dst`` positional too (``dst=None``
    with no ``group_dst``: rank 0, as torch's)."""
    return _collectives.gather(
        tensor, gather_list, _root(dst), group, async_op, group_dst=group_dst
    )


def scatter(
    tensor: Any,
    scatter_list: list[Any] | None = None,
    src: int | None = None,
    group: Any = None,
    async_op: bool = False,
    group_src: int | None = None,
) -> Work | None:
    """torch's ``scatter``: :func:`compat.scatter`, ``group_src`` positional too (``src=None``
    with no ``group_src``: rank 0, as torch's)."""
    return _collectives.scatter(
        tensor, scatter_list, _root(src), group, async_op, group_src=group_src
    )


def broadcast_object_list(
    object_list: list[Any],
    src: int | None = None,
    group: Any = None,
    device: Any = None,
    group_src: int | None = None,
) -> None:
    """torch's ``broadcast_object_list``: :func:`compat.broadcast_object_list`, ``group_src``
    positional too."""
    _objects.broadcast_object_list(object_list, _root(src), group, device, group_src=group_src)


def gather_object(
    obj: Any,
    object_gather_list: list[Any] | None = None,
    dst: int | None = None,
    group: Any = None,
    group_dst: int | None = None,
) -> None:
    """torch's ``gather_object``: :func:`compat.gather_object`, ``group_dst`` positional too."""
    _objects.gather_object(obj, object_gather_list, _root(dst), group, group_dst=group_dst)


def scatter_object_list(
    scatter_object_output_list: list[Any],
    scatter_object_input_list: list[Any] | None = None,
    src: int | None = None,
    group: Any = None,
    group_src: int | None = None,
) -> None:
    """torch's ``scatter_object_list``: :func:`compat.scatter_object_list`, ``group_src``
    positional too."""
    _objects.scatter_object_list(
        scatter_object_output_list,
        scatter_object_input_list,
        _root(src),
        group,
        group_src=group_src,
    )


def send_object_list(
    object_list: list[Any],
    dst: int | None = None,
    group: Any = None,
    device: Any = None,
    group_dst: int | None = None,
    use_batch: bool = False,
) -> None:
    """torch's ``send_object_list``: :func:`compat.send_object_list`, ``group_dst`` and
    ``use_batch`` positional too."""
    _objects.send_object_list(
        object_list, dst, group, device, group_dst=group_dst, use_batch=use_batch
    )


def recv_object_list(
    object_list: list[Any],
    src: int | None = None,
    group: Any = None,
    device: Any = None,
    group_src: int | None = None,
    use_batch: bool = False,
) -> int:
    """torch's ``recv_object_list``: :func:`compat.recv_object_list`, ``group_src`` and
    ``use_batch`` positional too; returns the sender's rank, as torch's."""
    return _objects.recv_object_list(
        object_list, src, group, device, group_src=group_src, use_batch=use_batch
    )


def is_xccl_available() -> bool:
    """torch's ``is_xccl_available``: ``is_backend_available("xccl")``."""
    return is_backend_available("xccl")


def is_gloo_available() -> bool:
    """torch's ``is_gloo_available``: ``is_backend_available("gloo")``."""
    return is_backend_available("gloo")


def is_nccl_available() -> bool:
    """torch's ``is_nccl_available``: ``is_backend_available("nccl")``."""
    return is_backend_available("nccl")


def is_mpi_available() -> bool:
    """torch's ``is_mpi_available``: ``is_backend_available("mpi")``."""
    return is_backend_available("mpi")


def is_ucc_available() -> bool:
    """torch's ``is_ucc_available``: ``is_backend_available("ucc")``."""
    return is_backend_available("ucc")


class _World:
    """torch's ``group`` and ``GroupMember``: ``WORLD`` is the framework's own world group
    (None before a process group is initialised, as torch's)."""

    @property
    def WORLD(self) -> object:
        return _lifecycle.framework_group()


group = _World()
GroupMember = _World()

__all__ = [
    "Backend",
    "DeviceMesh",
    "GroupMember",
    "HashStore",
    "P2POp",
    "PrefixStore",
    "ReduceOp",
    "Store",
    "TCPStore",
    "Work",
    "_all_gather_base",
    "_coalescing_manager",
    "_reduce_scatter_base",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_gather_single",
    "all_reduce",
    "all_reduce_coalesced",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "batch_isend_irecv",
    "broadcast",
    "broadcast_object_list",
    "destroy_process_group",
    "gather",
    "gather_object",
    "get_backend",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "group",
    "init_device_mesh",
    "init_process_group",
    "irecv",
    "is_available",
    "is_backend_available",
    "is_gloo_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "is_ucc_available",
    "is_xccl_available",
    "isend",
    "monitored_barrier",
    "new_group",
    "new_subgroups",
    "new_subgroups_by_enumeration",
    "recv",
    "recv_object_list",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_single",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "send_object_list",
    "split_group",
]
