"""compat on PyTorch: torch.distributed with Gloo (CPU) or NCCL (CUDA)."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _options
from torch.distributed import distributed_c10d as _c10d
from torch.overrides import has_torch_function, has_torch_function_unary

from compat.base import tables
from compat.base.adapter import (
    DEFAULT_TIMEOUT_SECONDS,
    Adapter,
    GroupHandle,
    P2PSpec,
    Rendezvous,
    TensorFacts,
    Translate,
    device_backend,
    element_extent,
    numpy_elementwise,
    reduce_arrays,
    translating_errors,
)
from compat.base.environment import local_rank
from compat.base.errors import CollectiveTimeout
from compat.base.net import free_port
from compat.base.timing import completes_within
from compat.base.types import Handle, ReduceOp

# torch 2.13 deprecates reduce_scatter_tensor and all_gather_into_tensor in favour of these names;
# older releases have only the old ones.
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
_all_gather_single = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)

#: Whether compat may call the process group's methods directly (the collectives through
#: TorchAdapter._direct, send, recv and batch_isend_irecv): where a torch release keeps no record
#: of open _coalescing_manager contexts where 2.13 does, has no _World.default_pg (the world's
#: group, read there in one property), or names the methods otherwise, every call goes through
#: torch's own function.
_DIRECT = (
    hasattr(getattr(_c10d, "_world", None), "pg_coalesce_state")
    and hasattr(_c10d._world, "default_pg")
    and all(
        hasattr(dist.ProcessGroup, name)
        for name in ("all_gather_single", "reduce_scatter_single", "all_to_all_single", "alltoall")
    )
    and hasattr(dist.ProcessGroup, "_get_backend")
)


def _returned(work: Any, async_op: bool) -> Handle | None:
    """What torch's function returns for the ``work`` it issued: the Work with ``async_op``,
    else None once the work has completed (a backend that completes at issue gives None)."""
    if async_op:
        handle: Handle = work
        return handle
    if work is not None:
        work.wait()
    return None


def _torchcomms() -> bool:
    """Whether torch runs its collectives through torchcomms (torch 2.13's option)."""
    enabled = getattr(_c10d, "_use_torchcomms_enabled", None)
    return enabled is not None and bool(enabled())


def _dtype_names() -> dict[torch.dtype, str]:
    names = {}
    for name, entry in tables.lookup("dtypes", "dtypes").items():
        spelling = entry.get("torch")
        if spelling is not None and hasattr(torch, spelling):  # a release may lack one (float8)
            names[getattr(torch, spelling)] = name
    return names


def _reduce_ops() -> dict[ReduceOp, Any]:
    ops = tables.lookup("reduce_ops", "ops")
    return {ReduceOp(value): getattr(dist.ReduceOp, entry["torch"]) for value, entry in ops.items()}


def _member_work(work: Any) -> Handle:
    """isend/irecv's Work (None only on ranks outside the group, which compat never calls)."""
    assert work is not None
    handle: Handle = work
    return handle


#: How long destroy() waits on a pending timed send or recv before closing its connections.
_ENDING_WAIT = timedelta(milliseconds=10)
#: How long destroy() then waits for each of their threads to return (they return at once).
_ENDED_WITHIN_SECONDS = 5.0


def _ended(entry: tuple[dist.Work | Handle, threading.Event | None]) -> bool:
    """Whether a pending timed send or recv has ended: its waiting thread's wait returned (one
    that no thread waits for ends only in destroy)."""
    return entry[1] is not None and entry[1].is_set()


def home_index(rendezvous: Rendezvous, visible: int) -> int:
    """The CUDA device an NCCL rank uses, of the ``visible`` ones: ``init(device_id=)`` (an index
    or a torch.device); else the local rank a launcher gives (``LOCAL_RANK`` from torchrun, then
    Open MPI's, MVAPICH's, Slurm's and MPICH's: ``local_rank_env`` in frameworks.toml), else the
    rank, modulo ``visible``: with one visible device per rank (``CUDA_VISIBLE_DEVICES``) every
    rank takes index 0, its own device."""
    device_id = rendezvous.device_id
    if isinstance(device_id, torch.device):
        if device_id.type != "cuda" or device_id.index is None:
            raise ValueError(
                f"device_id: expected a CUDA device with an index for nccl; got {device_id}"
            )
        return device_id.index
    if isinstance(device_id, int):
        return device_id
    if visible < 1:
        raise ValueError(
            "backend: 'nccl' needs a CUDA device, and torch sees none (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')!r})"
        )
    local = local_rank("torch")
    if local is None:
        local = rendezvous.rank if rendezvous.rank is not None else int(os.environ.get("RANK", 0))
    return local % visible


def _meeting(rendezvous: Rendezvous) -> dict[str, Any]:
    """init_process_group's arguments for where the ranks meet: a store, an init_method (or
    rank and world size, through env://), a launcher's env://, else a world of one process."""
    if rendezvous.store is not None:
        return {
            "store": rendezvous.store,
            "rank": rendezvous.rank,
            "world_size": rendezvous.world_size,
        }
    if rendezvous.init_method is not None or rendezvous.rank is not None:
        given = {"rank": rendezvous.rank, "world_size": rendezvous.world_size}
        meeting = {name: value for name, value in given.items() if value is not None}
        return {"init_method": rendezvous.init_method or "env://", **meeting}
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return {"init_method": "env://"}
    # Not started by a launcher: a world of one process.
    return {"init_method": f"tcp://127.0.0.1:{free_port()}", "rank": 0, "world_size": 1}


class _Differentiable(torch.autograd.Function):
    """Runs a collective forward; its backward is the collective compat.autograd pairs with it."""

    @staticmethod
    def forward(
        ctx: Any,
        tensor: torch.Tensor,
        forward: Callable[[torch.Tensor], torch.Tensor],
        backward: Callable[[torch.Tensor], torch.Tensor],
    ) -> torch.Tensor:
        ctx.backward_collective = backward
        return forward(tensor)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return ctx.backward_collective(grad.contiguous()), None, None


#: torch's split_group from 2.14 (2.14.1 read) numbers a split's ranks in the order listed and
#: gives a rank in no split GroupMember.NON_GROUP_MEMBER; 2.7 to 2.13 sort them and give None.
_SPLIT_KEEPS_ORDER = tuple(int(part) for part in torch.__version__.split(".")[:2]) >= (2, 14)


class TorchAdapter(Adapter):
    framework = "torch"
    native_group_names = (
        "a torch.distributed ProcessGroup (dist.group.WORLD too), a 1-D DeviceMesh or "
        "(DeviceMesh, mesh dim)"
    )
    split_keeps_listed_order = _SPLIT_KEEPS_ORDER
    outside_split = dist.GroupMember.NON_GROUP_MEMBER if _SPLIT_KEEPS_ORDER else None

    def __init__(self) -> None:
        super().__init__()
        self._adopted = False
        self._rank: int | None = None  # read once the process group is up: see rank()
        self._home = torch.device("cpu")  # this rank's device: see init
        # Whether it is the CPU: tensor.is_cpu then tells a tensor on it, without building the
        # device object tensor.device returns (a large part of dense_facts' cost).
        self._home_is_cpu = True
        self._timeout = DEFAULT_TIMEOUT_SECONDS  # a collective's bound: see init
        #: timed point to point still pending, with the event its waiting thread sets when the
        #: wait returns (None: no thread waits, keep_pending); see destroy
        self._pending: list[tuple[dist.Work | Handle, threading.Event | None]] = []
        #: (subgroup, global rank) -> (process group, the rank in it), for point to point
        self._group_peers: dict[tuple[Any, int], tuple[dist.ProcessGroup, int]] = {}
        #: subgroup -> this process's global rank as the group's own map names it
        self._own_global_ranks: dict[dist.ProcessGroup, int] = {}
        self._dtype_names = _dtype_names()
        self._ops = _reduce_ops()
        self._elementwise = {
            ReduceOp(value): getattr(torch, entry["elementwise"])
            for value, entry in tables.lookup("reduce_ops", "ops").items()
        }
        self._numpy_ops = {
            ReduceOp(value): numpy_elementwise(entry)
            for value, entry in tables.lookup("reduce_ops", "ops").items()
        }

    # -- lifecycle -------------------------------------------------------------------------
    def init(self, backend: str | None, timeout: timedelta | None, rendezvous: Rendezvous) -> str:
        if dist.is_initialized():
            # The script (or a helper it imports) called init_process_group: adopt that group.
            self._adopted = True
            adopted: str = str(dist.get_backend())
            if device_backend(adopted, self.device_kinds()) == "nccl":
                # The script bound its device itself (set_device or device_id=): keep it.
                self._home = torch.device("cuda", torch.cuda.current_device())
                self._home_is_cpu = False
            return adopted
        if backend is None:
            backend = tables.default_backend(self.framework, self.device_kinds())
        kwargs: dict[str, Any] = {"backend": backend, **_meeting(rendezvous)}
        if timeout is not None:
            kwargs["timeout"] = timeout
            self._timeout = timeout.total_seconds()
        for option in ("device_id", "pg_options"):
            if getattr(rendezvous, option) is not None:
                kwargs[option] = getattr(rendezvous, option)
        if device_backend(backend, self.device_kinds()) == "nccl":
            self._home = torch.device("cuda", home_index(rendezvous, torch.cuda.device_count()))
            self._home_is_cpu = False
            torch.cuda.set_device(self._home)
        dist.init_process_group(**kwargs)
        return backend

    def destroy(self) -> None:
        self._rank = None
        if not dist.is_initialized() or self._adopted:
            return
        # A timed send or recv whose peer never came (monitored_barrier past its timeout) is
        # still pending in Gloo, its wait on a thread of its own (reported_barrier) or on none
        # (keep_pending). Left so, the wait returns during the interpreter's shutdown, when the
        # group is torn down, and can abort the process ("terminate called without an active
        # exception"; aborting the group does not end the wait). A timed-out wait closes the
        # group's connections, which ends every pending wait at once; the threads are then joined.
        pending = [entry for entry in self._pending if not _ended(entry)]
        self._pending.clear()
        for work, _ in pending:
            try:
                work.wait(_ENDING_WAIT)
            except (RuntimeError, CollectiveTimeout):  # keep_pending's handles translate
                pass  # timed out, or its connection is already closed: it has ended
        for _, returned in pending:
            if returned is not None:
                returned.wait(_ENDED_WITHIN_SECONDS)
        dist.destroy_process_group()

    def rank(self) -> int:
        # Fixed while the process group lives, and asked on every call of a shared-memory
        # choice: read once (dist.get_rank() is a slow call right after a collective).
        if self._rank is None:
            self._rank = dist.get_rank()
        return self._rank

    def world_size(self) -> int:
        return dist.get_world_size()

    def new_group(
        self,
        ranks: Sequence[int],
        name: str,
        timeout: timedelta | None,
        backend: str | None,
        *,
        members_only: bool = False,
        options: object = None,
        description: str | None = None,
    ) -> GroupHandle:
        arguments: dict[str, Any] = {"group_desc": description or name}
        if timeout is not None:
            arguments["timeout"] = timeout
        if backend is not None:
            arguments["backend"] = backend
        if options is not None:
            arguments["pg_options"] = options
        if members_only:
            # torch's member-only creation: the members meet in the group's own store.
            arguments["use_local_synchronization"] = True
        handle = dist.new_group(list(ranks), **arguments)
        if dist.get_rank() not in ranks:
            return None
        if not isinstance(handle, dist.ProcessGroup) or handle.size() != len(ranks):
            raise RuntimeError(
                f"new_group: expected torch's group {name!r} to have the {len(ranks)} ranks "
                f"{list(ranks)}; got {handle!r}, so compat does not use it"
            )
        return handle

    def destroy_group(self, group: GroupHandle) -> None:
        dist.destroy_process_group(group)

    def store_class(self, kind: str) -> type | None:
        found: type | None = getattr(dist, kind, None)
        return found

    def framework_store(self, kind: str, args: Sequence[object]) -> object:
        return getattr(dist, kind)(*args)

    def device_mesh_class(self) -> type | None:
        module = sys.modules.get("torch.distributed.device_mesh")
        found: type | None = None if module is None else getattr(module, "DeviceMesh", None)
        return found

    def framework_device_mesh(
        self,
        device_type: str,
        mesh_shape: tuple[int, ...],
        mesh_dim_names: tuple[str, ...] | None,
        backend_override: object,
    ) -> object | None:
        from torch.distributed.device_mesh import init_device_mesh

        return init_device_mesh(
            device_type,
            mesh_shape,
            mesh_dim_names=mesh_dim_names,
            backend_override=backend_override,  # type: ignore[arg-type]
        )

    def tensor_api(self, name: str, submodule: str = "") -> object | None:
        package = "torch.distributed.tensor" + (f".{submodule}" if submodule else "")
        return getattr(importlib.import_module(package), name, None)

    def framework_device_mesh_of(
        self, device_type: str, ranks: list[Any], mesh_dim_names: tuple[str, ...] | None
    ) -> object | None:
        from torch.distributed.device_mesh import DeviceMesh

        return DeviceMesh(device_type, torch.tensor(ranks), mesh_dim_names=mesh_dim_names)

    def framework_group(self, group: GroupHandle, member: bool) -> object:
        if group is not None:
            return group
        return dist.group.WORLD if member else dist.GroupMember.NON_GROUP_MEMBER

    def backend_available(self, backend: str) -> bool:
        return bool(dist.is_backend_available(backend))

    def registers_backend(self, backend: str) -> bool:
        return backend.lower() in dist.Backend.backend_list

    def process_group_alive(self) -> bool:
        return dist.is_initialized()

    def group_backend(self, group: GroupHandle) -> str | None:
        return None if group is None else str(dist.get_backend(group))

    def native_group(self, obj: object) -> tuple[list[int], GroupHandle] | None:
        if obj is dist.GroupMember.NON_GROUP_MEMBER:
            # What torch's new_group gives non-members: no ranks known here (get_rank: -1).
            return [], obj
        obj = _mesh_group(obj)
        if not isinstance(obj, dist.ProcessGroup):
            return None
        ranks = dist.get_process_group_ranks(obj)
        return ranks, (None if obj is dist.group.WORLD else obj)

    def group_ranks(self, group: GroupHandle) -> list[int]:
        return dist.get_process_group_ranks(group if group is not None else dist.group.WORLD)

    def joined_by_the_world(self, group: GroupHandle) -> bool:
        # new_group meets through the world's store; a group made for processes of other worlds
        # (an RL trainer's weight sync: _new_process_group_helper) through a store of its own.
        # split_group's own store answers False too: the backend's calls, which are right.
        world = _c10d._world
        default_pg = world.default_pg
        if not isinstance(group, dist.ProcessGroup) or default_pg is None or group is default_pg:
            return True
        made, default = world.pg_map.get(group), world.pg_map.get(default_pg)
        if made is None or default is None:
            return True
        return getattr(made[1], "underlying_store", default[1]) is default[1]

    def own_global_rank(self, group: GroupHandle) -> int:
        # torch's rooted calls compare group.rank() with get_group_rank(group, src): the global
        # rank the group's map gives group.rank() is the one src and dst name this process by.
        if not isinstance(group, dist.ProcessGroup) or group is _c10d._world.default_pg:
            return self.rank()
        found = self._own_global_ranks.get(group)
        if found is None:
            found = self._own_global_ranks[group] = dist.get_global_rank(group, group.rank())
        return found

    def own_group_rank(self, group: GroupHandle) -> int:
        # The backend's own: a group made for processes of other worlds (an RL trainer's weight
        # sync, through _new_process_group_helper) may map global ranks to other places.
        if isinstance(group, dist.ProcessGroup):
            return int(group.rank())
        return super().own_group_rank(group)

    # -- local tensor facts and operations ------------------------------------------------
    def shape(self, tensor: torch.Tensor) -> tuple[int, ...]:
        return tuple(tensor.shape)

    def dtype(self, tensor: torch.Tensor) -> str:
        # Called several times per collective: the fallback string is built only when needed.
        name = self._dtype_names.get(tensor.dtype)
        return name if name is not None else str(tensor.dtype).removeprefix("torch.")

    def device(self, tensor: torch.Tensor) -> str:
        return str(tensor.device)

    def home_device(self) -> str:
        return str(self._home)

    def on_home(self, tensor: torch.Tensor) -> bool:
        return tensor.device == self._home

    def empty(self, shape: Sequence[int], like: torch.Tensor) -> torch.Tensor:
        return torch.empty(tuple(shape), dtype=like.dtype, device=like.device)

    def assign(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        _writable(dst).copy_(src)

    def zeros(self, shape: Sequence[int], like: torch.Tensor) -> torch.Tensor:
        return torch.zeros(tuple(shape), dtype=like.dtype, device=like.device)

    def collective_timeout(self) -> float:
        # The timeout given to compat.init, else torch's default for a process group (30 min).
        return self._timeout

    def in_host_memory(self, tensor: torch.Tensor) -> bool:
        return tensor.is_cpu  # what device.type == "cpu" says, without building a device

    def host_tensor(
        self, memory: memoryview, offset: int, numel: int, like: torch.Tensor
    ) -> torch.Tensor:
        if not numel:
            return torch.empty(0, dtype=like.dtype)
        return torch.frombuffer(memory, dtype=like.dtype, count=numel, offset=offset)

    def host_address(self, tensor: torch.Tensor) -> int:
        address: int = tensor.data_ptr()  # the first element's, storage offset included
        return address

    def memory_span(self, tensor: torch.Tensor) -> tuple[int, int]:
        start: int = tensor.data_ptr()  # the first element's (torch has no negative strides)
        if tensor.is_contiguous():
            return start, start + tensor.nbytes
        if tensor.numel() == 0:
            return start, start
        extent = element_extent(tensor.shape, tensor.stride())
        return start, start + extent * tensor.element_size()

    def dense_dtype(self, tensor: torch.Tensor) -> str | None:
        if not (tensor.is_cpu if self._home_is_cpu else tensor.device == self._home):
            return None
        if not tensor.is_contiguous() or tensor.numel() == 0:
            return None
        name = self._dtype_names.get(tensor.dtype)
        return name if name is not None else self.dtype(tensor)

    def dense_facts(self, tensor: torch.Tensor) -> TensorFacts | None:
        # Four reads of the tensor, each a call into torch, slow right after a collective (cold
        # caches): numel() is not read where the shape says it (0 in it).
        if not (tensor.is_cpu if self._home_is_cpu else tensor.device == self._home):
            return None
        if not tensor.is_contiguous():
            return None
        shape = tuple(tensor.shape)
        if 0 in shape:
            return None
        name = self._dtype_names.get(tensor.dtype)
        return (name if name is not None else self.dtype(tensor)), shape

    def is_dense(self, tensor: torch.Tensor) -> bool:
        # Gloo and NCCL read and write numel elements from data_ptr(), which already includes the
        # storage offset: a contiguous view at any offset is served exactly.
        return tensor.is_contiguous()

    def clone(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.clone(memory_format=torch.contiguous_format)

    def as_bytes(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.view(torch.uint8)

    def as_real(self, tensor: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(tensor)

    def numel(self, tensor: torch.Tensor) -> int:
        return tensor.numel()

    def split(self, tensor: torch.Tensor, sizes: Sequence[int], dim: int = 0) -> list[torch.Tensor]:
        # The op torch.split calls for a list of sizes, without its Python wrapper's cost; a
        # tensor subclass's override still applies (the method's binding dispatches it).
        return list(tensor.split_with_sizes(list(sizes), dim))

    def movedim(self, tensor: torch.Tensor, source: int, destination: int) -> torch.Tensor:
        return tensor.movedim(source, destination)

    def narrow(self, tensor: torch.Tensor, start: int, length: int) -> torch.Tensor:
        return tensor.narrow(0, start, length)

    def cat(self, tensors: Sequence[torch.Tensor], dim: int) -> torch.Tensor:
        return torch.cat(list(tensors), dim=dim)

    def canonical_device(self, spec: object) -> str | None:
        if isinstance(spec, bool):
            return None
        if isinstance(spec, int):
            # torch.cuda.comm's convention: an int is a CUDA device index.
            return f"cuda:{spec}" if spec >= 0 else None
        if isinstance(spec, str):
            try:
                spec = torch.device(spec)
            except RuntimeError:
                return None
        if not isinstance(spec, torch.device):
            return None
        if spec.type == "cpu":
            return "cpu"
        if spec.type == "cuda" and spec.index is None and torch.cuda.is_available():
            return f"cuda:{torch.cuda.current_device()}"
        return str(spec)

    def available_devices(self) -> list[str]:
        return ["cpu", *(f"cuda:{index}" for index in range(torch.cuda.device_count()))]

    def to_device(self, tensor: torch.Tensor, device: str) -> torch.Tensor:
        return tensor.to(device, copy=True, memory_format=torch.contiguous_format)

    def synchronize(self) -> None:
        # Eager CPU operations have completed on return; CUDA ones are queued on the stream.
        if self._home.type == "cuda":
            torch.cuda.synchronize(self._home)

    def copy_(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        if dst.numel() >= _GRAIN and dst.shape == src.shape and dst.dtype == src.dtype:
            target, source = _array(dst, bits=True), _array(src, bits=True)
            if target is not None and source is not None:
                np.copyto(target, source)  # on this thread: see _GRAIN
                return
        _writable(dst).copy_(src)

    def reduce_local(self, tensors: Sequence[torch.Tensor], op: ReduceOp) -> torch.Tensor:
        combine = self._elementwise[op]
        result = tensors[0]
        for tensor in tensors[1:]:
            result = combine(result, tensor)
        if op is ReduceOp.AVG:
            result = torch.div(result, len(tensors))
        return result

    def bytes_tensor(self, data: bytes | memoryview) -> torch.Tensor:
        if not data:  # torch.frombuffer refuses an empty buffer
            return torch.empty(0, dtype=torch.uint8, device=self._home)
        # frombuffer wants writable memory: a writable view is taken as it is, else a copy.
        writable = data if isinstance(data, memoryview) and not data.readonly else bytearray(data)
        return torch.frombuffer(writable, dtype=torch.uint8).to(self._home)

    def to_bytes(self, tensor: torch.Tensor) -> bytes:
        return tensor.cpu().numpy().tobytes()

    def bytes_view(self, tensor: torch.Tensor) -> memoryview:
        return tensor.cpu().numpy().data

    def differentiable(
        self,
        forward: Callable[[torch.Tensor], torch.Tensor],
        backward: Callable[[torch.Tensor], torch.Tensor],
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda tensor: _Differentiable.apply(tensor, forward, backward)  # type: ignore[no-untyped-call]

    def joined(self, pieces: Sequence[torch.Tensor]) -> torch.Tensor | None:
        first = pieces[0]
        if len(pieces) == 1:
            return first if first.is_contiguous() else None
        base = first._base
        if (
            base is not None
            and base.is_contiguous()
            and base.dtype == first.dtype
            and base.shape[1:] == first.shape[1:]
            and base.data_ptr() == first.data_ptr()
            and self.shares_memory(pieces, base)
        ):
            return base  # the common case, x.chunk(n): the buffer they were cut from
        whole = _span(pieces)
        return whole if whole is not None and self.shares_memory(pieces, whole) else None

    def flat_view(self, tensor: torch.Tensor) -> torch.Tensor | None:
        return tensor.view(-1) if tensor.is_contiguous() else None

    def shaped_view(self, tensor: torch.Tensor, shape: Sequence[int]) -> torch.Tensor | None:
        return tensor.view(tuple(shape)) if tensor.is_contiguous() else None

    def reduce_into(self, out: torch.Tensor, tensors: Sequence[torch.Tensor], op: ReduceOp) -> None:
        if len(tensors) == 1:
            self.copy_(out, tensors[0])
            return
        if out.numel() >= _GRAIN:
            arrays = [_array(tensor) for tensor in (out, *tensors)]
            if all(array is not None for array in arrays) and (
                op is not ReduceOp.AVG or out.is_floating_point()
            ):
                target, *sources = arrays
                reduce_arrays(target, sources, self._numpy_ops[op], op is ReduceOp.AVG)
                return
            _serially(
                lambda start, end: self.reduce_into(
                    out[start:end], [tensor[start:end] for tensor in tensors], op
                ),
                out.numel(),
            )
            return
        combine = self._elementwise[op]
        out = _writable(out)
        combine(tensors[0], tensors[1], out=out)
        for tensor in tensors[2:]:
            combine(out, tensor, out=out)
        if op is ReduceOp.AVG:
            out.div_(len(tensors))

    def nbytes(self, tensor: torch.Tensor) -> int:
        return tensor.nbytes

    def shares_memory(self, pieces: Sequence[torch.Tensor], whole: torch.Tensor) -> bool:
        if not whole.is_contiguous():
            return False
        offset = whole.data_ptr()
        for piece in pieces:
            if not piece.is_contiguous() or piece.data_ptr() != offset:
                return False
            offset += piece.numel() * piece.element_size()
        return offset == whole.data_ptr() + whole.numel() * whole.element_size()

    # -- collectives -------------------------------------------------------------------------
    # Each collective calls the process group's own method, as torch's function does once its
    # checks have passed: compat has made those checks (and more) before it gets here, and
    # torch's repeat them in Python at more than compat's own work costs (docs/performance.md).
    # The options are those torch's function sets, made anew per call.
    # torch's function runs instead where it does more than check (_direct says when). Its
    # rewrites of complex tensors (as real pairs) and of float8 for NCCL broadcast on GPUs
    # before sm90 are not needed: compat stages complex tensors as their real views itself
    # (capabilities.toml's as_real), and the table gives Gloo no float8.
    def _direct(
        self, group: GroupHandle, relevant: tuple[torch.Tensor, ...], batched: bool = False
    ) -> dist.ProcessGroup | None:
        """``group``'s process group, to call directly; None where torch's function must run:
        a tensor (or an active mode) that overrides torch's functions, which torch's function
        hands to its override, or, for the collectives torch batches (``batched``), a
        ``_coalescing_manager`` context open on the group, which the call joins instead of
        running."""
        if not _DIRECT or has_torch_function(relevant):
            return None
        # torch's world as dist.group.WORLD gives it, through one property where that takes two
        process_group = group if group is not None else _c10d._world.default_pg
        if batched and process_group in _c10d._world.pg_coalesce_state:
            return None
        return process_group

    def all_reduce(
        self, tensor: torch.Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        process_group = self._direct(group, (tensor,), batched=True)
        if process_group is None:
            return dist.all_reduce(tensor, op=self._ops[op], group=group, async_op=async_op)
        options = _options.AllreduceOptions()
        options.reduceOp, options.asyncOp = self._ops[op], async_op
        return _returned(process_group.allreduce([tensor], options), async_op)

    def all_gather(
        self,
        tensor_list: list[torch.Tensor],
        tensor: torch.Tensor,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        process_group = self._direct(group, (tensor,))
        if process_group is None:
            return dist.all_gather(tensor_list, tensor, group=group, async_op=async_op)
        options = _options.AllgatherOptions()
        options.asyncOp = async_op
        return _returned(process_group.allgather([tensor_list], [tensor], options), async_op)

    def all_gather_into_tensor(
        self, output: torch.Tensor, tensor: torch.Tensor, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        process_group = self._direct(group, (tensor,), batched=True)
        if process_group is None:
            return _all_gather_single(output, tensor, group=group, async_op=async_op)
        options = _options.AllgatherOptions()
        options.asyncOp = async_op
        return _returned(process_group.all_gather_single(output, tensor, options), async_op)

    def reduce_scatter(
        self,
        output: torch.Tensor,
        input_list: list[torch.Tensor],
        op: ReduceOp,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        process_group = self._direct(group, (output,))
        if process_group is None:
            return dist.reduce_scatter(
                output, input_list, op=self._ops[op], group=group, async_op=async_op
            )
        options = _options.ReduceScatterOptions()
        options.reduceOp, options.asyncOp = self._ops[op], async_op
        return _returned(process_group.reduce_scatter([output], [input_list], options), async_op)

    def reduce_scatter_tensor(
        self,
        output: torch.Tensor,
        tensor: torch.Tensor,
        op: ReduceOp,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        process_group = self._direct(group, (tensor,), batched=True)
        if process_group is None:
            return _reduce_scatter_single(
                output, tensor, op=self._ops[op], group=group, async_op=async_op
            )
        options = _options.ReduceScatterOptions()
        options.reduceOp, options.asyncOp = self._ops[op], async_op
        return _returned(process_group.reduce_scatter_single(output, tensor, options), async_op)

    def broadcast(
        self, tensor: torch.Tensor, src: int, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        process_group = self._direct(group, (tensor,))
        if process_group is None:
            return dist.broadcast(tensor, src, group=group, async_op=async_op)
        root = self._group_rank(group, src)
        options = _options.BroadcastOptions()
        options.rootRank, options.rootTensor, options.asyncOp = root, 0, async_op
        return _returned(process_group.broadcast([tensor], options), async_op)

    def scatter(
        self,
        tensor: torch.Tensor,
        scatter_list: list[torch.Tensor] | None,
        src: int,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        process_group = self._direct(group, (tensor,))
        if process_group is None:
            return dist.scatter(tensor, scatter_list, src, group=group, async_op=async_op)
        root = self._group_rank(group, src)
        options = _options.ScatterOptions()
        options.rootRank, options.asyncOp = root, async_op
        # The list is given on the root only (compat's checks); the root's input is the list.
        inputs = [scatter_list] if scatter_list else []
        return _returned(process_group.scatter([tensor], inputs, options), async_op)

    def gather(
        self,
        tensor: torch.Tensor,
        gather_list: list[torch.Tensor] | None,
        dst: int,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        # With torchcomms, torch passes a non-root's outputs as [[]] (its backend requires one
        # entry); its function keeps track of that.
        process_group = self._direct(group, (tensor,))
        if process_group is None or (not gather_list and _torchcomms()):
            return dist.gather(tensor, gather_list, dst, group=group, async_op=async_op)
        root = self._group_rank(group, dst)
        options = _options.GatherOptions()
        options.rootRank, options.asyncOp = root, async_op
        outputs = [gather_list] if gather_list else []  # the root's only (compat's checks)
        return _returned(process_group.gather(outputs, [tensor], options), async_op)

    def reduce(
        self, tensor: torch.Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        process_group = self._direct(group, (tensor,))
        if process_group is None:
            return dist.reduce(tensor, dst, op=self._ops[op], group=group, async_op=async_op)
        root = self._group_rank(group, dst)
        options = _options.ReduceOptions()
        options.reduceOp, options.rootRank, options.asyncOp = self._ops[op], root, async_op
        return _returned(process_group.reduce([tensor], options), async_op)

    def all_to_all_single(
        self,
        output: torch.Tensor,
        tensor: torch.Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        process_group = self._direct(group, (tensor,))
        if process_group is None:
            return dist.all_to_all_single(
                output, tensor, output_split_sizes, input_split_sizes, group=group,
                async_op=async_op,
            )  # fmt: skip
        options = _options.AllToAllOptions()
        options.asyncOp = async_op
        work = process_group.all_to_all_single(
            output, tensor, output_split_sizes, input_split_sizes, options
        )
        return _returned(work, async_op)

    def all_to_all(
        self,
        output_tensor_list: list[torch.Tensor],
        input_tensor_list: list[torch.Tensor],
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        process_group = self._direct(group, tuple(input_tensor_list))
        if process_group is None:
            return dist.all_to_all(
                output_tensor_list, input_tensor_list, group=group, async_op=async_op
            )
        options = _options.AllToAllOptions()
        options.asyncOp = async_op
        work = process_group.alltoall(output_tensor_list, input_tensor_list, options)
        return _returned(work, async_op)

    # Point to point goes to the process group's own send/recv, as torch's isend/irecv do after
    # their argument checks (compat has made them), a large part of a small pair's time. torch's
    # isend/irecv also send complex tensors as real pairs; compat stages them as their real
    # views before they get here (capabilities.toml's as_real), so it never passes one.
    def send(self, tensor: torch.Tensor, dst: int, group: GroupHandle, tag: int = 0) -> None:
        self._send(tensor, dst, group, tag).wait()

    def recv(self, tensor: torch.Tensor, src: int, group: GroupHandle, tag: int = 0) -> None:
        self._recv(tensor, src, group, tag).wait()

    # send/recv and isend/irecv share these rather than calling each other: each of the four is
    # wrapped to translate its own errors (translating_errors). isend/irecv are these functions
    # themselves, under their names (isend/irecv are bound by latency: no call in between).
    def _send(self, tensor: torch.Tensor, dst: int, group: GroupHandle, tag: int = 0) -> Handle:
        # torch's function for a subclass that overrides torch's functions (or a torch release
        # whose groups compat does not call directly, _DIRECT)
        if not _DIRECT or has_torch_function_unary(tensor):
            return _member_work(dist.isend(tensor, dst, group=group, tag=tag))
        if group is None:
            # torch's world, looked up each call (a script may re-create it behind compat),
            # through one property where dist.group.WORLD takes two (each is slow right after a
            # collective).
            process_group: Any = _c10d._world.default_pg
            peer = dst
        else:
            process_group, peer = self._peer(group, dst)
        # The group's own method returns a Work, never None: no _member_work call (every Python
        # call is slow right after a collective).
        sent: Any = process_group.send([tensor], peer, tag)  # a torch Work: a Handle
        return sent

    def _recv(self, tensor: torch.Tensor, src: int, group: GroupHandle, tag: int = 0) -> Handle:
        if not _DIRECT or has_torch_function_unary(tensor):  # as in _send
            return _member_work(dist.irecv(tensor, src, group=group, tag=tag))
        if group is None:  # as in _send
            process_group: Any = _c10d._world.default_pg
            peer = src
        else:
            process_group, peer = self._peer(group, src)
        received: Any = process_group.recv([tensor], peer, tag)
        return received

    isend = _send
    irecv = _recv

    def _group_rank(self, group: GroupHandle, rank: int) -> int:
        """Global ``rank``'s rank in ``group`` (None: the world, where the two are one)."""
        return rank if group is None else self._peer(group, rank)[1]

    def _peer(self, group: dist.ProcessGroup, rank: int) -> tuple[dist.ProcessGroup, int]:
        """``group`` (a group, not the world: its callers read that themselves) and global
        ``rank``'s rank in it."""
        key = (group, rank)
        found = self._group_peers.get(key)
        if found is None:
            found = self._group_peers[key] = (group, dist.get_group_rank(group, rank))
        return found

    def batch_isend_irecv(self, p2p_ops: list[P2PSpec], group: GroupHandle) -> list[Handle]:
        if _DIRECT:
            process_group: Any = _c10d._world.default_pg if group is None else group
            if not process_group._get_backend(self._home).supports_coalescing:
                # What torch's batch_isend_irecv does where the backend does not coalesce
                # (Gloo): each op issued in list order as an isend or irecv, one Work each; here
                # without torch's P2POp objects and its checks of them and of each op, which
                # compat has made (they cost more than compat's own work: docs/performance.md).
                issue = {"isend": self._send, "irecv": self._recv}
                return [
                    issue[kind](tensor, peer, group, tag) for kind, tensor, peer, tag in p2p_ops
                ]
        # One Work for the whole (coalesced) batch (NCCL), which only torch's function makes.
        functions = {"isend": dist.isend, "irecv": dist.irecv}
        works = dist.batch_isend_irecv(
            [
                dist.P2POp(functions[kind], tensor, peer, group, tag)
                for kind, tensor, peer, tag in p2p_ops
            ]
        )
        return [_member_work(work) for work in works]

    def barrier(
        self, group: GroupHandle, async_op: bool, device_ids: list[int] | None = None
    ) -> Handle | None:
        # torch uses device_ids[0] as the barrier's device (NCCL); Gloo runs it on the CPU.
        return dist.barrier(group=group, async_op=async_op, device_ids=device_ids)

    def send_within(
        self, tensor: torch.Tensor, dst: int, group: GroupHandle, seconds: float
    ) -> bool:
        # Issued here, in call order (a later send to the same peer cannot overtake it); only
        # the wait runs on the thread, so it may stay pending (seconds=0: issue, do not wait).
        work = dist.isend(tensor, dst, group=group)
        return work is not None and self._completes_within(work, seconds)

    def recv_within(
        self, tensor: torch.Tensor, src: int, group: GroupHandle, seconds: float
    ) -> bool:
        work = dist.irecv(tensor, src, group=group)  # issued here, as send_within's
        return work is not None and self._completes_within(work, seconds)

    def _completes_within(self, work: dist.Work, seconds: float) -> bool:
        returned = threading.Event()  # also when the wait raised

        def waiting() -> None:
            try:
                work.wait()
            finally:
                returned.set()

        self._pending[:] = [entry for entry in self._pending if not _ended(entry)]
        self._pending.append((work, returned))
        return completes_within(waiting, seconds)

    def keep_pending(self, handles: Sequence[Handle]) -> None:
        self._pending.extend((handle, None) for handle in handles)

    # -- framework facts for compat's tools ------------------------------------------------
    def device_kinds(self) -> set[str]:
        return {"cuda"} if torch.cuda.is_available() else set()


def _span(pieces: Sequence[torch.Tensor]) -> torch.Tensor | None:
    """One contiguous tensor from the first piece's start over as many rows as the pieces hold
    (same dtype, trailing shape and storage), or None where their storage is too short: whether
    it is exactly the pieces is the caller's check."""
    first = pieces[0]
    trailing = first.shape[1:]
    storage = first.untyped_storage().data_ptr()
    for piece in pieces:
        if (
            piece.dtype != first.dtype
            or piece.shape[1:] != trailing
            or piece.untyped_storage().data_ptr() != storage
        ):
            return None
    shape = (sum(piece.shape[0] for piece in pieces), *trailing)
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    needed = (first.storage_offset() + step) * first.element_size()
    if first.untyped_storage().nbytes() < needed:
        return None
    return first.as_strided(shape, tuple(reversed(strides)))


# Gloo's words for a collective that ran out of time, and for every later call on the pairs it
# then closed ("Timed out waiting <N>ms for recv operation to complete", then "Application
# timeout caused pair closure"). NCCL's watchdog says "Watchdog caught collective
# operation timeout".
_TIMEOUT_MARKERS = ("Timed out", "timeout caused pair closure", "operation timeout")


def _timeout_translator(collective: str) -> Translate:
    def translate(error: Exception, seconds: float) -> Exception:
        if not any(marker in str(error) for marker in _TIMEOUT_MARKERS):
            return error
        return CollectiveTimeout(
            f"{collective} did not complete within the timeout given to compat.init: a rank did "
            f"not join it or died; the communicator is no longer usable ({error})"
        )

    return translate


ADAPTER_CLASS = translating_errors(TorchAdapter, _timeout_translator)


#: torch runs an element-wise kernel on its intra-op thread team (OpenMP, as many threads as
#: cores by default) from this many elements up (at::internal::GRAIN_SIZE), on the calling thread
#: below. compat's shared-memory rounds copy and reduce on the calling thread (numpy, or torch in
#: pieces below this): every rank of a host runs them at once, and one team per rank per round
#: fights the other ranks for the cores where the launcher left the threads at their default.
_GRAIN = 32768

#: dtypes whose numpy loops run as fast as torch's kernel on one thread (numpy's float16 converts
#: element by element; bfloat16 it lacks): the others reduce through torch, in pieces.
_FAST_IN_NUMPY = frozenset(
    (
        torch.float32,
        torch.float64,
        torch.int8,
        torch.uint8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.bool,
    )
)
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _writable(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` itself, or its detached alias (same memory) where autograd would refuse an
    in-place write: torch's collectives write into a parameter that requires grad, and so does
    compat (``broadcast(param, 0)`` of a model's parameters)."""
    return tensor.detach() if tensor.requires_grad else tensor


def _array(tensor: torch.Tensor, bits: bool = False) -> Any:
    """``tensor``'s elements as a numpy array over its memory, without a copy (any strides), or
    None where numpy cannot read it at the speed of torch's kernel: off the CPU, a dtype not
    in _FAST_IN_NUMPY (with ``bits``: any dtype, as integers of its width, for copies), or a
    conjugate or negative view."""
    if not tensor.is_cpu or tensor.is_conj() or tensor.is_neg():
        return None
    if bits:
        if tensor.dtype not in _FAST_IN_NUMPY:
            width = _BITS.get(tensor.element_size())
            if width is None or tensor.is_complex():
                return None
            tensor = tensor.view(width)
    elif tensor.dtype not in _FAST_IN_NUMPY:
        return None
    return tensor.detach().numpy()


def _serially(run: Callable[[int, int], None], numel: int) -> None:
    """``run(start, end)`` over ``[0, numel)`` in pieces below _GRAIN: torch's kernels then run
    on this thread (for the dtypes numpy has no fast loop for)."""
    for start in range(0, numel, _GRAIN - 1):
        run(start, min(numel, start + _GRAIN - 1))


def _mesh_group(obj: object) -> object:
    """funcol's DeviceMesh forms of ``group``: a 1-D mesh or ``(mesh, mesh dim)`` stand for the
    mesh's ProcessGroup (DTensor-era code hands them to the collectives); anything else as is."""
    mesh_module = sys.modules.get("torch.distributed.device_mesh")
    if mesh_module is None:
        return obj  # no mesh can exist before its module is imported
    mesh_type = mesh_module.DeviceMesh
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], mesh_type):
        mesh, dim = obj
        if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim < mesh.ndim:
            raise ValueError(
                f"group: expected (DeviceMesh, mesh dim) with a mesh dim from 0 to "
                f"{mesh.ndim - 1}; got a mesh dim of {dim!r}"
            )
        return mesh.get_group(dim)
    if isinstance(obj, mesh_type):
        if obj.ndim != 1:
            raise ValueError(
                f"group: expected a 1-D DeviceMesh or (DeviceMesh, mesh dim); got a mesh of "
                f"{obj.ndim} dims (name the dim: group=(mesh, dim))"
            )
        return obj.get_group()
    return obj
