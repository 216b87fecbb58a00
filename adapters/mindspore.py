"""compat on MindSpore: ``mindspore.mint.distributed`` over MCCL (CPU), NCCL (GPU), HCCL (Ascend).

What MCCL lacks on CPU is routed to compat.algorithms by the capability table; this module only
translates, plus four things MindSpore 2.10 needs to give correct results:

- Collectives use the whole storage behind a tensor, from its start: an all_reduce of ``t[2:6]``
  leaves it unchanged, one of ``t[:2]`` reduces all of ``t`` (measured). compat.core.layout gives
  the
  adapter dense tensors only; views that compat.algorithms cut from their own buffers are staged
  here (``_stage_in``/``_stage_out``).
- A tensor that was ever written by slice assignment (``t[:] = x``, ``t[:2] = x``) no longer
  receives the result of broadcast, all_gather, scatter or gather: the call returns, and ``t``
  keeps its old values (raw mint.distributed too; all_reduce and recv are not affected;
  measured on MCCL, MindSpore 2.10). Users write their buffers that way, so those four receive
  into a new tensor and copy the result over (``_receive``), and compat itself never slice-assigns
  on CPU: its copies go through numpy on the tensors' memory.
- Errors of an operation surface one call late (PyNative runs asynchronously); a synchronous call
  synchronises so that its error is raised by the call that caused it.
- ``get_cache_group_rank``/``get_cache_group_size`` bind "hccl_world_group" as a default at import,
  so send (and the object collectives) fail on CPU even with ``group=`` given; ``init`` rebinds
  the default to the real world group.
- An MCCL send waits for its receiver's acknowledgement: ``destroy`` waits at a barrier, then
  pauses for the barrier's own acknowledgements, so that no rank exits while a peer's last send
  is unacknowledged.

On CPU each mint operation waits about 1 ms on the PyNative queue once synchronised, so local
copies and reductions run in numpy on the tensors' own memory (``_host_view``).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import math
import operator
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import mindspore as ms
import mindspore.mint.distributed as dist
import numpy as np
from mindspore import communication, mint

# PyNative queues operations; this executor's sync() waits for them and raises a deferred error.
# (mindspore.runtime.synchronize() only logs "CPU device is not supported" on CPU, unsynchronised.)
from mindspore._c_expression import DeviceManagerConf, RuntimeConf, TensorPy
from mindspore.graph.api import _pynative_executor

from compat.base import tables
from compat.base.adapter import (
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
from compat.base.environment import environment, local_rank
from compat.base.errors import CollectiveTimeout, UnsupportedError
from compat.base.timing import completes_within
from compat.base.types import Handle, ReduceOp

Writeback = Callable[[], None]
Array = np.ndarray[Any, Any]


def _getter(private: str, public: str) -> Callable[[ms.Tensor], Any]:
    """Tensor's shape, dtype and nbytes are Python properties that return TensorPy's getters
    (_shape, _dtype, _nbytes): read directly they skip the property's frame, 0.1-0.7 us a read
    (measured, 2.10; more on a tensor an op made), and the common case of a collective reads
    several. The public name where a MindSpore lacks the getter."""
    return operator.attrgetter(private if hasattr(TensorPy, private) else public)


_shape_of = _getter("_shape", "shape")
_dtype_of = _getter("_dtype", "dtype")
_nbytes_of = _getter("_nbytes", "nbytes")
#: Tensor.is_contiguous calls this (0.6 against 0.9 us on a tensor an op made, measured).
_is_contiguous: Callable[[ms.Tensor], bool] = getattr(
    TensorPy, "is_contiguous", ms.Tensor.is_contiguous
)
#: A tensor over a C-contiguous array's memory: what Tensor.from_numpy calls once it has made
#: the array C-contiguous (a copy otherwise), without its Python checks.
_from_c_contiguous: Callable[[Array], ms.Tensor] = getattr(
    TensorPy, "from_numpy", ms.Tensor.from_numpy
)

#: MindSpore's device target names, by their lower-case spelling.
_DEVICE_TARGETS = {"cpu": "CPU", "gpu": "GPU", "ascend": "Ascend"}


class _CommHandle:
    """A MindSpore CommHandle as a compat pending handle.

    CommHandle has ``wait()`` but no ``is_completed()`` and no timeout, so completion is known
    only once waited on; staged views are written back then.

    On CPU the wait is the PyNative queue's sync, not ``CommHandle.wait()``: that calls
    ``mindspore.runtime.synchronize()``, which on CPU only logs "[ERROR] ... CPU device is not
    supported" and returns. A waited async barrier then returned at once while its peer was 2 s
    away (measured, MindSpore 2.10, MCCL); the sync waits for the barrier as for every queued op.
    """

    def __init__(self, handle: Any, writebacks: list[Writeback], on_cpu: bool) -> None:
        self._handle = handle
        self._writebacks = writebacks
        self._on_cpu = on_cpu
        self._done = False

    def wait(self, timeout: timedelta | None = None) -> bool:
        if timeout is not None:
            raise UnsupportedError(
                "timeout: MindSpore's CommHandle.wait() takes no timeout; expected None, "
                f"got {timeout}"
            )
        if not self._done:
            if self._on_cpu:
                _pynative_executor.sync()
            elif self._handle is not None:
                self._handle.wait()
            for writeback in self._writebacks:
                writeback()
            self._done = True
        return True

    def is_completed(self) -> bool:
        return self._done


class _Differentiable(ms.nn.Cell):  # type: ignore[misc]
    """Runs a collective forward; ``bprop`` (MindSpore's custom backward, used by mindspore.grad
    and value_and_grad in PyNative mode) runs the collective compat.autograd pairs with it."""

    def __init__(
        self, forward: Callable[[ms.Tensor], ms.Tensor], backward: Callable[[ms.Tensor], ms.Tensor]
    ) -> None:
        super().__init__()
        self._forward = forward
        self._backward = backward

    def construct(self, tensor: ms.Tensor) -> ms.Tensor:
        return self._forward(tensor)

    def bprop(self, tensor: ms.Tensor, out: ms.Tensor, dout: ms.Tensor) -> tuple[ms.Tensor]:
        return (self._backward(dout),)


class MindSporeAdapter(Adapter):
    framework = "mindspore"
    native_group_names = "a MindSpore group name (str)"
    # mint.distributed's send/recv/isend/irecv take tag=0, "a reserved parameter currently"
    # (their docstrings, MindSpore 2.10): on MCCL, after sends with tag=1 then tag=2, a recv with
    # tag=2 received the tag-1 message (measured; api_send_recv.toml).
    p2p_tag_unsupported = (
        "MindSpore's send/recv/isend/irecv take tag as a reserved parameter (MindSpore 2.10): "
        "messages from one rank match in the order they were sent, whatever their tag"
    )

    def __init__(self) -> None:
        super().__init__()
        self._dtype_names = {
            getattr(ms, entry["mindspore"]): name
            for name, entry in tables.lookup("dtypes", "dtypes").items()
            if "mindspore" in entry
        }
        # Looked up by id: MindSpore's dtypes are one object each (t.dtype is ms.float32), and an
        # id is a tenth of the cost of hashing one (0.04 against 0.2 us, measured). The objects
        # stay alive as _dtype_names' keys, so no other object can take their ids.
        self._dtype_names_by_id = {id(dtype): name for dtype, name in self._dtype_names.items()}
        #: bytes an element, by dtype name: dense_facts' size from the shape it reads
        self._dtype_bytes = tables.dtype_bytes()
        ops = tables.lookup("reduce_ops", "ops")
        self._ops = {ReduceOp(value): entry["mindspore"] for value, entry in ops.items()}
        self._elementwise = {
            ReduceOp(value): getattr(mint, entry["elementwise"]) for value, entry in ops.items()
        }
        self._numpy_ops = {
            ReduceOp(value): numpy_elementwise(entry) for value, entry in ops.items()
        }
        self._numpy_dtypes = {
            getattr(ms, entry["mindspore"]): np.dtype(entry["numpy"])
            for entry in tables.lookup("dtypes", "dtypes").values()
            if "mindspore" in entry and "numpy" in entry
        }
        self._group_ranks: dict[str, list[int]] = {}
        self._world: list[int] = []
        self._rank = 0
        # Before init (compat.comm needs none): the device target MindSpore has now.
        self._on_cpu = ms.get_context("device_target") == "CPU"
        self._adopted = False
        self._scheduler: subprocess.Popen[bytes] | None = None
        self._pending_recvs: list[threading.Event] = []  # see recv_within
        self._target = "CPU"  # the backend's device target, and this rank's device: see init
        self._home = "CPU"
        #: collectives through MindSpore's ``ops`` primitives (see PRIMITIVES): on GPU always,
        #: on CPU where COMPAT_MINDSPORE_PRIMITIVES asks for them
        self.primitives = False
        #: the primitive each call of the primitives path ran, by adapter method: what ran
        #: (tests read it)
        self.primitive_calls: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------
    def init(self, backend: str | None, timeout: timedelta | None, rendezvous: Rendezvous) -> str:
        if timeout is not None:
            raise UnsupportedError(
                "timeout: MindSpore bounds each collective itself (30 s on MCCL) and takes no "
                f"per-job timeout; expected None on mindspore, got {timeout}"
            )
        backends = {
            entry.get("backend", key): entry["device_target"]
            for key, entry in tables.load("capabilities").items()
            if entry["framework"] == "mindspore"
        }
        for option, why in _NOT_TAKEN_AT_INIT.items():
            if getattr(rendezvous, option) is not None:
                raise UnsupportedError(
                    f"{option}: {why}; expected None on mindspore, got "
                    f"{getattr(rendezvous, option)!r}"
                )
        device_id = rendezvous.device_id
        if device_id is not None and not isinstance(device_id, int):
            raise TypeError(
                f"device_id: expected None or a device index (int) on mindspore; got "
                f"{type(device_id).__name__} {device_id!r}"
            )
        self._adopted = bool(dist.is_initialized())
        if self._adopted:
            # The script called mindspore.communication.init itself: adopt its world.
            target = ms.get_context("device_target")
            backend = next(name for name, device in backends.items() if device == target)
        else:
            if backend is None:
                backend = tables.default_backend(self.framework, self.device_kinds())
            backend = self._own_backend(backend, backends)
            _bind_device(backends[backend], device_id)
            self._join(rendezvous)
        self._on_cpu = backends[backend] == "CPU"
        self._target = backends[backend]
        self._home = (
            self._target if self._on_cpu else f"{self._target}:{ms.get_context('device_id')}"
        )
        if os.environ.get("MS_ROLE") == "MS_SCHED":
            # msrun runs the script in its scheduler process too: init() has served the
            # cluster there until the job ended, and the script must not go on to collectives.
            raise SystemExit(0)
        self.primitives = self._target == "GPU" or primitives_forced()
        self._rebind_world_group_defaults()
        self._world = list(range(communication.get_group_size()))
        self._rank = communication.get_rank()
        return backend

    def _own_backend(self, backend: str, backends: dict[str, str]) -> str:
        """MindSpore's backend for ``backend``, a string as torch takes it: a string naming one
        backend per device (``"cpu:gloo,cuda:nccl"``) gives this process's device's, and
        torch's name for a device's backend gives MindSpore's (``backend_aliases``)."""
        chosen = device_backend(backend, self.device_kinds())
        aliases: dict[str, str] = tables.lookup("frameworks", self.framework).get(
            "backend_aliases", {}
        )
        chosen = aliases.get(chosen, chosen)
        if chosen not in backends:
            raise ValueError(
                f"backend: MindSpore's communication.init takes only {sorted(backends)} "
                f"(compat reads the entry for this process's device from a torch-style string); "
                f"got {backend!r}"
            )
        return chosen

    def _join(self, rendezvous: Rendezvous) -> None:
        """mindspore.communication.init, after translating torch's way of meeting (tcp://, or
        MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE) into MindSpore's: rank 0 starts the scheduler
        (what msrun would start) at that address; ``destroy`` ends it."""
        meeting = _torch_meeting(rendezvous)
        if meeting is not None and "MS_ROLE" not in os.environ:
            host, port, rank, world = meeting
            common = {
                "MS_SCHED_HOST": socket.gethostbyname(host),
                "MS_SCHED_PORT": str(port),
                "MS_WORKER_NUM": str(world),
            }
            if rank == 0:
                _check_scheduler_port(common["MS_SCHED_HOST"], port)
                self._scheduler = _start_scheduler(common)
            os.environ.update(common, MS_ROLE="MS_WORKER", MS_NODE_ID=str(rank))
            os.environ.setdefault("RANK_ID", str(rank))
        communication.init()

    @staticmethod
    def _rebind_world_group_defaults() -> None:
        import mindspore.mint.distributed.distributed as implementation

        world = communication.GlobalComm.WORLD_COMM_GROUP
        for name in ("get_cache_group_rank", "get_cache_group_size"):
            function = getattr(implementation, name, None)
            if function is not None and function.__defaults__:
                function.__defaults__ = (world,)

    def destroy(self) -> None:
        if self._adopted:
            return  # the script's own communication: it ends it
        # An MCCL send waits for its receiver's acknowledgement, and a receiver that exits right
        # after its last recv can leave that sender waiting until MCCL's 30 s bound, then failing
        # with "Send failed." (a 32-128 MB send as the last operation: 10 of 19 runs failed;
        # with this barrier, 0 of 11; measured). The barrier keeps every rank until all have
        # finished, and the pause after it lets the barrier's own acknowledgements leave
        # (ACK_FLUSH_SECONDS). A process leaving on an uncaught exception skips both: its peers
        # are not coming.
        # A timed recv still waiting for a rank that never sent (monitored_barrier after its
        # timeout) holds the PyNative queue: the barrier would queue behind it and then meet
        # peers that left, so it is skipped. Leaving still waits for that recv until MCCL's
        # 30 s bound ("Recv failed."): destroy_process_group syncs the queue, and without it
        # _finalize_collective, and without that MindSpore's own exit, wait the same (measured:
        # a rank left 26-28 s after raising each way).
        if not hasattr(sys, "last_value") and not self._blocked_recv():
            try:
                # Issued async and waited for by the queue's sync: a synchronous barrier (or its
                # handle's wait) calls mindspore.runtime.synchronize(), which on CPU only logs
                # "[ERROR] ... CPU device is not supported" on every healthy job's exit.
                dist.barrier(async_op=True)
                _pynative_executor.sync()
                time.sleep(ACK_FLUSH_SECONDS)
            except RuntimeError:
                pass  # a peer has gone: leaving is all that is left to do
        dist.destroy_process_group()
        # The scheduler this rank started (rank 0 of a tcp:// or env:// init) is not waited for:
        # it ends once every worker's node has left the cluster, this one's included, which
        # MindSpore does at the process's exit, not in destroy_process_group. Waited for here,
        # it never ended (rank 0 sat out the whole wait, 10 s, and then killed it, and its node
        # logged "Failed to unregister from the meta server node" at exit; measured). It ends
        # with this process at the latest (_END_WITH_PARENT), reaped by the thread that started
        # it.
        self._scheduler = None

    def rank(self) -> int:
        # Read in init: it is asked on every call of a shared-memory choice, and
        # communication.get_rank() takes 4 us (measured).
        return self._rank

    def world_size(self) -> int:
        size: int = communication.get_group_size()
        return size

    def new_group(
        self, ranks: Sequence[int], name: str, timeout: timedelta | None, backend: str | None
    ) -> GroupHandle:
        if timeout is not None:
            raise UnsupportedError(
                "timeout: MindSpore's create_group takes no timeout (each collective is bounded "
                f"by the backend); expected None on mindspore, got {timeout}"
            )
        if backend is not None and backend != _backend_of_target(ms.get_context("device_target")):
            raise UnsupportedError(
                "backend: a MindSpore group uses the job's backend "
                f"({_backend_of_target(ms.get_context('device_target'))}); got {backend!r}"
            )
        # Only the members create the group, as create_group's own docstring does: when every
        # rank calls it, a non-member can block in it and leave the members blocked in their next
        # collective (3 ranks, groups [0, 1] then [1, 2]: measured). mint.distributed.new_group is
        # not used: it names a group after its ranks (a second group of the same ranks collides)
        # and turns a failure into the name "", which the collectives read as the world group.
        if self._rank not in ranks:
            return None
        communication.create_group(name, list(ranks))
        _pynative_executor.sync()
        _check_made(name, list(ranks), communication.get_group_size(name))
        self._group_ranks[name] = list(ranks)
        return name

    def destroy_group(self, group: GroupHandle) -> None:
        communication.destroy_group(group)
        self._group_ranks.pop(group, None)

    def group_ranks(self, group: GroupHandle) -> list[int]:
        return self._world if group is None else self._group_ranks[group]

    def backend_available(self, backend: str) -> bool:
        for key, entry in tables.load("capabilities").items():
            if entry["framework"] == "mindspore" and entry.get("backend", key) == backend:
                return entry["device"] == "cpu" or entry["device"] in self.device_kinds()
        return False

    # process_group_alive: the base's True. mint.distributed.is_initialized() answers False for a
    # job that mindspore.communication.init() started (measured), so it cannot tell a teardown.

    def framework_group(self, group: GroupHandle, member: bool) -> object:
        if group is not None:
            return group
        # MindSpore's new_group names no group on a rank outside it: "".
        return communication.GlobalComm.WORLD_COMM_GROUP if member else ""

    def native_group(self, obj: object) -> tuple[list[int], GroupHandle] | None:
        if not isinstance(obj, str):
            return None
        if obj in _WORLD_GROUP_NAMES or obj == communication.GlobalComm.WORLD_COMM_GROUP:
            return list(self._world), None
        if obj not in self._group_ranks:
            try:
                self._group_ranks[obj] = list(dist.get_process_group_ranks(obj))
            except (RuntimeError, ValueError, TypeError) as error:
                raise ValueError(
                    f"group: expected the name of a MindSpore group this process knows "
                    f"(created here, or {sorted(_WORLD_GROUP_NAMES)}); got {obj!r} ({error})"
                ) from None
        return list(self._group_ranks[obj]), obj

    # -- local tensor facts and operations ------------------------------------------------
    def shape(self, tensor: ms.Tensor) -> tuple[int, ...]:
        return tuple(_shape_of(tensor))

    def dtype(self, tensor: ms.Tensor) -> str:
        # Called several times per collective: the fallback string is built only when needed
        # (as the default of dict.get it cost 1.5 us a call, measured).
        dtype = _dtype_of(tensor)
        name = self._dtype_names_by_id.get(id(dtype))
        if name is None:
            name = self._dtype_names.get(dtype)
        return name if name is not None else str(dtype).lower()

    def device(self, tensor: ms.Tensor) -> str:
        device: str = ms.get_context("device_target")
        return device

    def home_device(self) -> str:
        return self._home

    def on_home(self, tensor: ms.Tensor) -> bool:
        # A PyNative tensor lives on the device target, unless moved to the host (move_to("CPU"):
        # its device then says "CPU").
        return self._on_cpu or not str(getattr(tensor, "device", self._target)).startswith("CPU")

    def empty(self, shape: Sequence[int], like: ms.Tensor) -> ms.Tensor:
        return self._allocate(tuple(shape), _dtype_of(like))

    def _allocate(self, shape: tuple[int, ...], dtype: Any) -> ms.Tensor:
        """A new tensor of MindSpore's own. mint.empty is an operation queued on the PyNative
        pipeline: the first read of its storage, or a sync, then waits for the queue, 0.8-1.6
        ms on CPU whatever the size. On CPU, up to _HOST_ALLOCATION_MAX bytes, a tensor made
        from an uninitialised numpy array (MindSpore copies it into memory of its own, which
        its queue keeps alive like any) takes 20-260 us instead (measured, MindSpore 2.10,
        1 KB-1 MB; 4 MB took 4 ms, the copy's page faults)."""
        numpy_dtype = self._from_numpy_as(shape, dtype)
        if numpy_dtype is None or math.prod(shape) * numpy_dtype.itemsize > _HOST_ALLOCATION_MAX:
            return mint.empty(shape, dtype=dtype)
        return ms.Tensor(np.empty(shape, numpy_dtype))

    def _from_numpy_as(self, shape: tuple[int, ...], dtype: Any) -> np.dtype[Any] | None:
        """``dtype``'s numpy spelling where a new tensor of ``shape`` may be made from numpy: on
        CPU, not empty (MCCL failed an empty all_reduce over numpy's memory, measured), of a
        dtype numpy has; else None (mint.empty makes it)."""
        return self._numpy_dtypes.get(dtype) if self._on_cpu and 0 not in shape else None

    def dense_dtype(self, tensor: ms.Tensor) -> str | None:
        nbytes = _nbytes_of(tensor)  # read once: not empty, and as large as the storage
        if not nbytes or not self.on_home(tensor) or not _is_contiguous(tensor):
            return None
        return self.dtype(tensor) if tensor.untyped_storage().nbytes() == nbytes else None

    def dense_facts(self, tensor: ms.Tensor) -> TensorFacts | None:
        # dense_dtype and shape in one frame, each fact read once: the reads are most of a
        # collective's own work here (0.2-0.4 us each, measured; see dense_dtype). The size to
        # compare with the storage's is the shape's product times an element's bytes, not a
        # read of its own (0.28 us on a tensor an op made): reduce_scatter_tensor with out at
        # world size 1, the collective a no-op, 4.75-4.78 against 4.59-4.69 us (measured, the
        # two alternating in one process).
        shape = tuple(_shape_of(tensor))
        name = self._dtype_names_by_id.get(id(_dtype_of(tensor)))
        if name is None:
            name = self.dtype(tensor)
        itemsize = self._dtype_bytes.get(name)
        if (
            itemsize is None
            or 0 in shape
            or not (self._on_cpu or self.on_home(tensor))
            or not _is_contiguous(tensor)
            or tensor.untyped_storage().nbytes() != math.prod(shape) * itemsize
        ):
            return None
        return name, shape

    def is_dense(self, tensor: ms.Tensor) -> bool:
        # The whole storage, in order: contiguous and as large as its storage. That also means a
        # storage offset of 0 (a view lies inside its storage), so the offset is not read (each
        # read costs 0.15-0.2 us, measured).
        return _is_contiguous(tensor) and tensor.untyped_storage().nbytes() == _nbytes_of(tensor)

    def clone(self, tensor: ms.Tensor) -> ms.Tensor:
        # A new tensor plus copy_: Tensor.copy() of a view takes 12 ms for 8 MB on CPU, this
        # 1.8 ms (measured, MindSpore 2.10); mint.clone has no CPU kernel.
        staged = self._allocate(tuple(_shape_of(tensor)), _dtype_of(tensor))
        self.copy_(staged, tensor)
        return staged

    def numel(self, tensor: ms.Tensor) -> int:
        count: int = tensor.size
        return count

    def nbytes(self, tensor: ms.Tensor) -> int:
        # TensorPy's getter, not the property over it: 0.22 against 0.30 us on a tensor an op
        # made (measured); a choice by size reads it on every call.
        size: int = _nbytes_of(tensor)
        return size

    def split(self, tensor: ms.Tensor, sizes: Sequence[int], dim: int = 0) -> list[ms.Tensor]:
        # Basic slicing makes the same views as mint.split in 40 us each, where mint.split takes
        # about 1 ms on CPU, waiting on the PyNative queue (measured, MindSpore 2.10).
        leading = (slice(None),) * dim
        starts = [sum(sizes[:index]) for index in range(len(sizes))]
        return [
            tensor[(*leading, slice(start, start + size))]
            for start, size in zip(starts, sizes, strict=True)
        ]

    def movedim(self, tensor: ms.Tensor, source: int, destination: int) -> ms.Tensor:
        return tensor.movedim(source, destination)  # a view (writes through it land: measured)

    def narrow(self, tensor: ms.Tensor, start: int, length: int) -> ms.Tensor:
        return tensor[(slice(start, start + length),)]  # one slice: 0.2 ms each (see split)

    def cat(self, tensors: Sequence[ms.Tensor], dim: int) -> ms.Tensor:
        return mint.cat(list(tensors), dim=dim)

    def canonical_device(self, spec: object) -> str | None:
        # MindSpore names device targets "CPU", "GPU", "Ascend" (ms.set_device, Tensor.move_to);
        # any case is accepted, so that "cpu" means the same on both frameworks.
        if not isinstance(spec, str):
            return None
        return _DEVICE_TARGETS.get(spec.lower())

    def available_devices(self) -> list[str]:
        target: str = ms.get_context("device_target")
        return ["CPU"] if target == "CPU" else ["CPU", target]

    def to_device(self, tensor: ms.Tensor, device: str) -> ms.Tensor:
        # Tensor.move_to to the tensor's own device returns a tensor sharing its memory (measured
        # on CPU), so a copy on the same device is Tensor.copy().
        where = str(getattr(tensor, "device", self.device(tensor))).split(":")[0]
        if where == device:
            return tensor.copy()
        return tensor.move_to(device)

    def synchronize(self) -> None:
        _pynative_executor.sync()

    def execution_note(self) -> str:
        if launches_synchronously():
            return (
                "launch: synchronous (mindspore.runtime.launch_blocking(), "
                "MS_DEV_LAUNCH_BLOCKING=1 or MS_DEV_HOST_BLOCKING_RUN=1)"
            )
        return (
            "launch: asynchronous, MindSpore's default (its pipeline's threads spin while a "
            "message travels; with mindspore.runtime.launch_blocking() MCCL's 1K calls ran "
            "8-34x faster on 2 cores: docs/performance.md)"
        )

    def copy_(self, dst: ms.Tensor, src: ms.Tensor) -> None:
        # On CPU numpy copies the memory at once, for any layout and dtype (as bits); a slice
        # assignment of a view plus the sync that waits for it took 2.2 ms at 1 KB and 1.6 ms at
        # 8 MB, numpy 9 us and 0.27 ms (measured). A slice assignment would also stop `dst`
        # receiving broadcast results (see the module docstring).
        target, source = self._host_view(dst, bits=True), self._host_view(src, bits=True)
        if (
            target is not None
            and source is not None
            and target.shape == source.shape
            and target.dtype == source.dtype
        ):
            np.copyto(target, source)
            return
        # Off CPU (unverified: no GPU or NPU here). `dst[:] = src` writes through views;
        # Tensor.copy_ on a view and `dst[...] = src` on a view from mint.split do not (measured
        # on CPU). A 0-d tensor takes no `[:]`: a 0-d view (indexing keeps its parent) takes
        # `[...]`, in bfloat16 too (on a 0-d int16 view of it, `[...]` does not write through);
        # a 0-d tensor of its own takes copy_, since `[...]` makes it share `src`'s memory, so
        # that a later in-place write to `dst` changes `src` (all measured on CPU).
        if not dst.ndim:
            if getattr(dst, "parent_tensor_", None) is not None:
                dst[...] = src
            else:
                dst.copy_(src)
            return
        if dst.dtype == ms.bfloat16:
            # Slice assignment has no bfloat16 kernel on CPU ("type_id:45 is invalid"); the same
            # bits copied as int16 are the exact copy.
            dst, src = dst.view(ms.int16), src.view(ms.int16)
        dst[:] = src

    def reduce_local(self, tensors: Sequence[ms.Tensor], op: ReduceOp) -> ms.Tensor:
        combine = self._elementwise[op]
        dtype = tensors[0].dtype
        # mint.minimum/maximum have no bfloat16 kernel on CPU (measured); in float32 they are
        # exact, since the result is one of the inputs and bfloat16 -> float32 loses nothing.
        widen = dtype == ms.bfloat16 and op in (ReduceOp.MIN, ReduceOp.MAX)
        if widen:
            tensors = [tensor.astype(ms.float32) for tensor in tensors]
        result = tensors[0]
        for tensor in tensors[1:]:
            result = combine(result, tensor)
        if op is ReduceOp.AVG:
            result = mint.div(result, len(tensors))
        return result.astype(dtype) if widen else result

    def reduce_into(self, out: ms.Tensor, tensors: Sequence[ms.Tensor], op: ReduceOp) -> None:
        # Each mint operation waits on the PyNative queue on CPU, and the reduction plus the copy
        # into `out` take 3 of them; numpy on the same memory takes none (docs/performance.md).
        views = [self._host_view(tensor) for tensor in (out, *tensors)]
        arrays = [array for array in views if array is not None]
        if len(arrays) != len(views):
            super().reduce_into(out, tensors, op)
            return
        target, *sources = arrays
        reduce_arrays(target, sources, self._numpy_ops[op], op is ReduceOp.AVG)

    def collective_timeout(self) -> float:
        return MCCL_TIMEOUT_SECONDS

    def in_host_memory(self, tensor: ms.Tensor) -> bool:
        return self._on_cpu

    def host_tensor(
        self, memory: memoryview, offset: int, numel: int, like: ms.Tensor
    ) -> ms.Tensor:
        dtype = self._numpy_dtypes.get(like.dtype, _BIT_DTYPES[like.itemsize])
        return self._over(np.frombuffer(memory, dtype, numel, offset), like.dtype)

    def host_address(self, tensor: ms.Tensor) -> int:
        # After the queued operations that may still write it (numpy's copies do not queue);
        # compat passes dense tensors that own their memory from its start (_stage_in).
        _pynative_executor.sync()
        address: int = tensor.data_ptr()
        return address

    def memory_span(self, tensor: ms.Tensor) -> tuple[int, int] | None:
        start: int = tensor.data_ptr()  # the first element's: a device address off the CPU
        nbytes = _nbytes_of(tensor)
        if not nbytes or _is_contiguous(tensor):
            return start, start + nbytes
        strides = tuple(tensor.stride())
        if any(stride < 0 for stride in strides):
            return None
        return start, start + element_extent(tuple(_shape_of(tensor)), strides) * tensor.itemsize

    def _host_view(self, tensor: ms.Tensor, bits: bool = False) -> Array | None:
        """``tensor``'s elements as a numpy array over its memory (any layout: offset and strides
        kept), without a copy; on CPU only, else None. (``asnumpy()`` copies a view.) ``bits``:
        as unsigned integers of the dtype's width, which copies any dtype exactly (bfloat16 too);
        else in the dtype's numpy spelling, None where numpy has none. It waits for queued
        operations first, since numpy does not queue behind them."""
        if not self._on_cpu:
            return None
        if bits:
            dtype = _BIT_DTYPES.get(tensor.itemsize)
        else:
            dtype = self._numpy_dtypes.get(_dtype_of(tensor))
        if dtype is None:
            return None
        shape = tuple(_shape_of(tensor))
        made = getattr(tensor, _MADE_OVER, None)
        if made is not None:
            array, address = made
            _pynative_executor.sync()
            # While the tensor still lies over the array it was made over (assign_value moves a
            # tensor's memory): that array, without the 3-8 us of making one again (measured).
            if tensor.data_ptr() == address and _is_contiguous(tensor) and shape == array.shape:
                return array if array.dtype == dtype else array.view(dtype)
        if 0 in shape:
            return np.empty(shape, dtype)
        _pynative_executor.sync()
        address = tensor.data_ptr()
        if not address:
            return None
        if _is_contiguous(tensor):  # numpy's as_strided costs 5 us a call more (measured)
            return _array_at(address, _nbytes_of(tensor), dtype, tensor).reshape(shape)
        strides = tuple(tensor.stride())
        if any(stride < 0 for stride in strides):
            return None
        flat = _array_at(address, element_extent(shape, strides) * dtype.itemsize, dtype, tensor)
        return np.lib.stride_tricks.as_strided(
            flat, shape, tuple(stride * dtype.itemsize for stride in strides)
        )

    def bytes_tensor(self, data: bytes | memoryview) -> ms.Tensor:
        return ms.Tensor(np.frombuffer(data, dtype=np.uint8).copy())

    def to_bytes(self, tensor: ms.Tensor) -> bytes:
        return tensor.asnumpy().tobytes()

    def bytes_view(self, tensor: ms.Tensor) -> memoryview:
        return tensor.asnumpy().data

    def differentiable(
        self, forward: Callable[[ms.Tensor], ms.Tensor], backward: Callable[[ms.Tensor], ms.Tensor]
    ) -> Callable[[ms.Tensor], ms.Tensor]:
        return _Differentiable(forward, backward)

    def shares_memory(self, pieces: Sequence[ms.Tensor], whole: ms.Tensor) -> bool:
        return False

    def one_buffer(
        self, tensors: Sequence[ms.Tensor]
    ) -> tuple[ms.Tensor, Callable[[], None]] | None:
        # On CPU through numpy views of the tensors, one each: the default's tensors over their
        # memory (flat views, the copy's parts) and copies between them cost 30-40 us a tensor
        # here, 7 us with numpy (measured, 32 tensors of 1 KB).
        dtype = _dtype_of(tensors[0])
        bits = dtype not in self._numpy_dtypes
        arrays = []
        for tensor in tensors:
            array = self._host_view(tensor, bits=bits) if _dtype_of(tensor) == dtype else None
            if array is None:
                return super().one_buffer(tensors)  # off CPU: None
            arrays.append(array)
        start = address = arrays[0].ctypes.data
        for array in arrays:
            if not array.flags.c_contiguous or array.ctypes.data != address:
                break
            address += array.nbytes
        else:  # they tile one buffer, in list order: its memory, nothing to copy back
            whole = _array_at(start, address - start, arrays[0].dtype, tuple(tensors))
            return self._over(whole, dtype), _nothing
        flat = np.concatenate([array.reshape(-1) for array in arrays])

        def copy_back() -> None:
            _pynative_executor.sync()  # after the queued all_reduce that wrote flat, if one did
            offset = 0
            for array in arrays:
                np.copyto(array, flat[offset : offset + array.size].reshape(array.shape))
                offset += array.size

        return self._over(flat, dtype), copy_back

    def joined(self, pieces: Sequence[ms.Tensor]) -> ms.Tensor | None:
        # MindSpore views do not expose their base tensor, so on CPU the pieces, if they lie back
        # to back in memory, are joined as one tensor over that memory (no copy). Checked from
        # the pieces' own facts: a numpy view of each piece cost 8 us, and 2 pieces 43 us in all
        # (measured).
        first = pieces[0]
        if len(pieces) == 1:
            return first if self.is_dense(first) else None
        if not self._on_cpu:
            return None
        dtype, shape = _dtype_of(first), tuple(_shape_of(first))
        if not shape:
            return None
        trailing, rows = shape[1:], 0
        _pynative_executor.sync()  # the pieces' memory exists once the ops that made them ran
        start = address = first.data_ptr()
        for piece in pieces:
            shape = tuple(_shape_of(piece))
            if (
                not shape
                or shape[1:] != trailing
                or _dtype_of(piece) != dtype
                or not _is_contiguous(piece)
                or piece.data_ptr() != address
            ):
                return None
            address += _nbytes_of(piece)
            rows += shape[0]
        if not start or address == start:
            return None
        numpy_dtype = self._numpy_dtypes.get(dtype, _BIT_DTYPES[first.itemsize])
        whole = _array_at(start, address - start, numpy_dtype, tuple(pieces))
        whole = whole.reshape((rows, *trailing))
        return self._over(whole, dtype)

    def parts(self, tensor: ms.Tensor, sizes: Sequence[int]) -> list[ms.Tensor]:
        # On CPU, tensors over the parts' memory made from numpy: a view made by slicing is queued
        # on the PyNative executor, and the first access to its memory waits for the queue, about
        # 1.2 ms per call on this machine (measured, MindSpore 2.10, 2 views of a 1 KB tensor).
        if len(sizes) == 1:
            return [tensor]  # one part is the tensor itself, any layout: nothing to queue
        dtype = _dtype_of(tensor)
        array = self._host_view(tensor, bits=dtype not in self._numpy_dtypes)
        if array is None or not array.flags.c_contiguous or not array.ndim:
            return self.split(tensor, sizes)
        starts = [sum(sizes[:index]) for index in range(len(sizes))]
        return [
            self._over(array[start : start + size], dtype)
            for start, size in zip(starts, sizes, strict=True)
        ]

    def flat_view(self, tensor: ms.Tensor) -> ms.Tensor | None:
        # On CPU, a tensor over the same memory (as joined() makes).
        dtype = _dtype_of(tensor)
        array = self._host_view(tensor, bits=dtype not in self._numpy_dtypes)
        if array is None or not array.flags.c_contiguous:
            return None
        return self._over(array.reshape(-1), dtype)

    def _over(self, array: Array, dtype: Any) -> ms.Tensor:
        """A tensor of ``dtype`` over ``array``'s memory: ``array`` (C-contiguous: every caller's
        is) in its numpy spelling, or as bits where numpy has none (bfloat16: the bits viewed as
        the dtype, same memory)."""
        tensor = _from_c_contiguous(array)
        address = tensor.data_ptr()
        if dtype not in self._numpy_dtypes:
            tensor = tensor.view(dtype)
        setattr(tensor, _MADE_OVER, (array, address))
        return tensor

    # -- staging of views --------------------------------------------------------------------
    def _alias(self, tensor: ms.Tensor) -> ms.Tensor | None:
        """A dense tensor over a contiguous view's memory (at its offset), or None."""
        array = self._host_view(tensor)
        if array is None or not array.flags.c_contiguous:
            return None
        return _from_c_contiguous(array)

    def _stage_in(self, tensor: ms.Tensor) -> ms.Tensor:
        return tensor if self.is_dense(tensor) else self.clone(tensor)

    def _stage_out(self, tensor: ms.Tensor, writebacks: list[Writeback]) -> ms.Tensor:
        """``tensor`` for an in-place call (all_reduce, reduce, recv, ...)."""
        if self.is_dense(tensor):
            return tensor
        staged = self.clone(tensor)
        writebacks.append(lambda: self.copy_(tensor, staged))
        return staged

    def _receive(self, tensor: ms.Tensor, writebacks: list[Writeback], async_op: bool) -> ms.Tensor:
        """A new tensor for broadcast, all_gather, scatter and gather to write into, copied into
        ``tensor`` afterwards: they do not write into a tensor that was ever slice-assigned.

        For a synchronous call on CPU it lies over a new numpy array's memory: mint.empty is an
        operation queued on the PyNative pipeline, and with the sync that follows it took
        0.7-1.2 ms at world size 1, as long as the collective itself; this takes 4 us (measured,
        MindSpore 2.10, 1 KB). Only there: MindSpore's queue does not keep the array alive (an
        asynchronous all_reduce of such a tensor, the tensor then dropped: the array was freed
        before the sync, measured), so the tensor of an asynchronous call, which a user may
        drop with its Work unwaited, is MindSpore's own (:meth:`_allocate`)."""
        shape, dtype = tuple(_shape_of(tensor)), _dtype_of(tensor)
        numpy_dtype = None if async_op else self._from_numpy_as(shape, dtype)
        if numpy_dtype is None:
            staged = self._allocate(shape, dtype)
        else:
            staged = _from_c_contiguous(np.empty(shape, numpy_dtype))
        writebacks.append(lambda: self.copy_(tensor, staged))
        return staged

    def _finish(self, handle: Any, async_op: bool, writebacks: list[Writeback]) -> Handle | None:
        if async_op:
            return _CommHandle(handle, writebacks, self._on_cpu)
        _pynative_executor.sync()
        for writeback in writebacks:
            writeback()
        return None

    # -- collectives -------------------------------------------------------------------------
    def all_reduce(
        self, tensor: ms.Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        if self._on_primitives(group):
            return self._primitive_all_reduce(tensor, op, group, async_op)
        writebacks: list[Writeback] = []
        staged = self._stage_out(tensor, writebacks)
        handle = dist.all_reduce(staged, op=self._ops[op], group=group, async_op=async_op)
        return self._finish(handle, async_op, writebacks)

    def all_gather(
        self, tensor_list: list[ms.Tensor], tensor: ms.Tensor, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        if self._on_primitives(group):
            return self._primitive_all_gather(tensor_list, tensor, group, async_op)
        writebacks: list[Writeback] = []
        outputs = [self._receive(item, writebacks, async_op) for item in tensor_list]
        handle = dist.all_gather(outputs, self._stage_in(tensor), group=group, async_op=async_op)
        return self._finish(handle, async_op, writebacks)

    def all_gather_into_tensor(
        self, output: ms.Tensor, tensor: ms.Tensor, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        if self._on_primitives(group):
            return self._primitive_all_gather_into_tensor(output, tensor, group, async_op)
        if self.primitives and self._on_cpu:
            # A sub-group on CPU keeps mint.distributed (_on_primitives), whose
            # all_gather_into_tensor has no CPU kernel ("The kernel DistCommAllGatherIntoTensor
            # unregistered", measured): its list all_gather, into the output's parts.
            shape = self.shape(tensor)
            gathered = [self.empty(shape, tensor) for _ in self.group_ranks(group)]
            staged = self._stage_in(tensor)
            handle = dist.all_gather(gathered, staged, group=group, async_op=async_op)
            parts = self.split(output, [shape[0] if shape else 1] * len(gathered))

            def write() -> None:
                for part, piece in zip(parts, gathered, strict=True):
                    self.copy_(part, piece)

            return self._finish(handle, async_op, [write])
        writebacks: list[Writeback] = []
        staged = self._stage_out(output, writebacks)
        handle = dist.all_gather_into_tensor(
            staged, self._stage_in(tensor), group=group, async_op=async_op
        )
        return self._finish(handle, async_op, writebacks)

    def reduce_scatter(
        self,
        output: ms.Tensor,
        input_list: list[ms.Tensor],
        op: ReduceOp,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        writebacks: list[Writeback] = []
        staged = self._stage_out(output, writebacks)
        inputs = [self._stage_in(item) for item in input_list]
        handle = dist.reduce_scatter(
            staged, inputs, op=self._ops[op], group=group, async_op=async_op
        )
        return self._finish(handle, async_op, writebacks)

    def reduce_scatter_tensor(
        self,
        output: ms.Tensor,
        tensor: ms.Tensor,
        op: ReduceOp,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        writebacks: list[Writeback] = []
        staged = self._stage_out(output, writebacks)
        handle = dist.reduce_scatter_tensor(
            staged, self._stage_in(tensor), op=self._ops[op], group=group, async_op=async_op
        )
        return self._finish(handle, async_op, writebacks)

    def broadcast(
        self, tensor: ms.Tensor, src: int, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        if self._on_primitives(group):
            return self._primitive_broadcast(tensor, src, group, async_op)
        writebacks: list[Writeback] = []
        if src == self._rank:
            staged = self._stage_in(tensor)
        else:
            staged = self._receive(tensor, writebacks, async_op)
        handle = dist.broadcast(staged, src, group=group, async_op=async_op)
        return self._finish(handle, async_op, writebacks)

    def scatter(
        self,
        tensor: ms.Tensor,
        scatter_list: list[ms.Tensor] | None,
        src: int,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        writebacks: list[Writeback] = []
        staged = self._receive(tensor, writebacks, async_op)
        # mint.distributed.scatter wants [] (not None) on the other ranks (measured).
        parts = [self._stage_in(item) for item in scatter_list or []]
        handle = dist.scatter(staged, parts, src=src, group=group, async_op=async_op)
        return self._finish(handle, async_op, writebacks)

    def gather(
        self,
        tensor: ms.Tensor,
        gather_list: list[ms.Tensor] | None,
        dst: int,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        writebacks: list[Writeback] = []
        outputs = [self._receive(item, writebacks, async_op) for item in gather_list or []]
        handle = dist.gather(
            self._stage_in(tensor), outputs, dst=dst, group=group, async_op=async_op
        )
        return self._finish(handle, async_op, writebacks)

    def reduce(
        self, tensor: ms.Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        writebacks: list[Writeback] = []
        staged = self._stage_out(tensor, writebacks)
        handle = dist.reduce(staged, dst, op=self._ops[op], group=group, async_op=async_op)
        return self._finish(handle, async_op, writebacks)

    def all_to_all_single(
        self,
        output: ms.Tensor,
        tensor: ms.Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        writebacks: list[Writeback] = []
        staged = self._stage_out(output, writebacks)
        handle = dist.all_to_all_single(
            staged,
            self._stage_in(tensor),
            output_split_sizes,
            input_split_sizes,
            group=group,
            async_op=async_op,
        )
        return self._finish(handle, async_op, writebacks)

    def all_to_all(
        self,
        output_tensor_list: list[ms.Tensor],
        input_tensor_list: list[ms.Tensor],
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        writebacks: list[Writeback] = []
        outputs = [self._receive(item, writebacks, async_op) for item in output_tensor_list]
        inputs = [self._stage_in(item) for item in input_tensor_list]
        handle = dist.all_to_all(outputs, inputs, group=group, async_op=async_op)
        return self._finish(handle, async_op, writebacks)

    # -- the primitives path: mindspore.ops' AllReduce, AllGather and Broadcast ---------------
    # MindSpore's GPU (NCCL) kernels are those of the ops primitives, not mint.distributed's
    # (capabilities.toml, [mindspore_nccl.ops]). Each primitive returns a new tensor and leaves
    # its input as it is (measured on CPU, 2 ranks), so the result is copied into the caller's
    # tensor once the queue has run it (on wait() for an asynchronous call).
    def _primitive(self, name: str, method: str, *arguments: Any) -> Any:
        self.primitive_calls[method] = f"mindspore.ops.{name}"
        return _primitive_instance(name, arguments)

    def _on_primitives(self, group: GroupHandle) -> bool:
        """Whether a call on ``group`` takes the primitives path. On CPU only the world group's:
        "AllGather only support mccl_world_group on CPU, but got compat_group_1" (measured,
        MindSpore 2.10), so a sub-group there keeps mint.distributed (and says so in
        primitive_calls)."""
        if not self.primitives:
            return False
        if self._on_cpu and group is not None and group not in _WORLD_GROUP_NAMES:
            self.primitive_calls["sub-group"] = "mint.distributed"
            return False
        return True

    @staticmethod
    def _named(group: GroupHandle) -> str:
        """The group's name for a primitive (None, compat's world: the backend's world group)."""
        return str(communication.GlobalComm.WORLD_COMM_GROUP) if group is None else str(group)

    def _carried(self, tensor: ms.Tensor) -> tuple[ms.Tensor, Any]:
        """``tensor`` in a dtype the CPU kernels of AllGather and Broadcast take, and the dtype
        to turn the result back into (None: as it is). MindSpore 2.10 refuses bfloat16, int8,
        uint8 and bool there (measured): each travels widened (bfloat16 as float32, the others
        as int16), exact both ways. A view as int16 bits is not used: the view of a tensor that
        lies over a larger buffer took the whole buffer (broadcast[bfloat16] got 8 elements for
        4, measured). On GPU the table's dtypes are those the NCCL kernels take (PRIMITIVES)."""
        dtype = _dtype_of(tensor)
        if not self._on_cpu or dtype not in _CPU_CARRIED:
            return tensor, None
        return tensor.astype(_CPU_CARRIED[dtype]), dtype

    @staticmethod
    def _uncarried(result: ms.Tensor, dtype: Any) -> ms.Tensor:
        return result if dtype is None else result.astype(dtype)

    def _holds_nothing(self, tensor: ms.Tensor) -> bool:
        """Whether ``tensor`` has no elements: the primitives refuse it ("For 'AllGather', input
        x_shape[0] is invalid: 0", measured), and every rank's tensor has that same shape in
        these calls, so there is nothing to move."""
        return 0 in self.shape(tensor)

    def _primitive_finish(self, async_op: bool, writebacks: list[Writeback]) -> Handle | None:
        if async_op:
            return _CommHandle(_QUEUE, writebacks, self._on_cpu)
        return self._finish(None, False, writebacks)

    def _primitive_all_reduce(
        self, tensor: ms.Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        # ops.AllReduce has no average (its ops: sum, prod, min, max): AVG is its sum divided by
        # the group's size, as MindSpore's own mean gradients are (floating dtypes only, which
        # compat checks). On CPU its kernel takes sum on float32 and float16 only (measured);
        # capabilities.toml [mccl_primitives] reduces there through AllGather instead.
        if self._holds_nothing(tensor):
            return self._primitive_finish(async_op, [])
        primitive_op = _PRIMITIVE_OPS[ReduceOp.SUM if op is ReduceOp.AVG else op]
        result = self._primitive("AllReduce", "all_reduce", primitive_op, self._named(group))(
            self._stage_in(tensor)
        )
        if op is ReduceOp.AVG:
            result = result / len(self.group_ranks(group))
        return self._primitive_finish(async_op, [lambda: self.copy_(tensor, result)])

    def _gathered(self, tensor: ms.Tensor, group: GroupHandle) -> ms.Tensor:
        """ops.AllGather of ``tensor``: every rank's tensor in group-rank order along dim 0."""
        carried, dtype = self._carried(self._stage_in(tensor))
        gather = self._primitive("AllGather", "all_gather", self._named(group))
        return self._uncarried(gather(carried), dtype)

    def _primitive_all_gather(
        self, tensor_list: list[ms.Tensor], tensor: ms.Tensor, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        if self._holds_nothing(tensor):
            return self._primitive_finish(async_op, [])
        if not self.shape(tensor):  # AllGather concatenates along dim 0: a 0-d tensor as (1,)
            gathered = self._gathered(tensor.reshape((1,)), group)
        else:
            gathered = self._gathered(tensor, group)
        rows = [self.shape(item)[0] if self.shape(item) else 1 for item in tensor_list]

        def write() -> None:
            for item, part in zip(tensor_list, self.split(gathered, rows), strict=True):
                self.copy_(item, part.reshape(self.shape(item)))

        return self._primitive_finish(async_op, [write])

    def _primitive_all_gather_into_tensor(
        self, output: ms.Tensor, tensor: ms.Tensor, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        if self._holds_nothing(tensor):
            return self._primitive_finish(async_op, [])
        gathered = self._gathered(tensor, group)
        return self._primitive_finish(
            async_op, [lambda: self.copy_(output, gathered.reshape(self.shape(output)))]
        )

    def _primitive_broadcast(
        self, tensor: ms.Tensor, src: int, group: GroupHandle, async_op: bool
    ) -> Handle | None:
        # root_rank: ops.Broadcast's docstring says a global rank (comm_ops.py:648, MindSpore
        # 2.10), but its GPU kernel hands it to ncclBroadcast unchanged
        # (nccl_collective_gpu_kernel.h:216-218, nvidia_collective_comm_lib.cc:116), whose root
        # is a rank of the group's communicator (ncclCommInitRank with the group rank,
        # nvidia_communication_group.cc:36-39): the group rank, the same for the world group
        # (the only one on CPU). It takes a tuple and returns one.
        if self._holds_nothing(tensor):
            return self._primitive_finish(async_op, [])
        root = self.group_ranks(group).index(src)
        carried, dtype = self._carried(self._stage_in(tensor))
        (result,) = self._primitive("Broadcast", "broadcast", root, self._named(group))((carried,))
        if src == self._rank:
            return self._primitive_finish(async_op, [])
        result = self._uncarried(result, dtype)
        return self._primitive_finish(async_op, [lambda: self.copy_(tensor, result)])

    # send and recv complete before returning, so a view can go as a tensor over its own memory
    # (no copy: the view outlives the call); the other collectives may be asynchronous and stage.
    def send(self, tensor: ms.Tensor, dst: int, group: GroupHandle, tag: int = 0) -> None:
        alias = None if self.is_dense(tensor) else self._alias(tensor)
        staged = self._stage_in(tensor) if alias is None else alias
        dist.send(staged, dst=dst, group=group, tag=tag)
        self._finish(None, False, [])

    def recv(self, tensor: ms.Tensor, src: int, group: GroupHandle, tag: int = 0) -> None:
        writebacks: list[Writeback] = []
        alias = None if self.is_dense(tensor) else self._alias(tensor)
        staged = self._stage_out(tensor, writebacks) if alias is None else alias
        dist.recv(staged, src=src, group=group, tag=tag)
        self._finish(None, False, writebacks)

    def isend(self, tensor: ms.Tensor, dst: int, group: GroupHandle, tag: int = 0) -> Handle:
        # On MCCL the send completes once the receiver's server thread has stored the message,
        # before any matching recv (16 MB: completed in 119 ms while the receiver posted its recv
        # 2 s later; measured).
        handle = dist.isend(self._stage_in(tensor), dst=dst, group=group, tag=tag)
        return _CommHandle(handle, [], self._on_cpu)

    def irecv(self, tensor: ms.Tensor, src: int, group: GroupHandle, tag: int = 0) -> Handle:
        # Not used on MCCL (capabilities.toml: its irecv blocks the queue in issue order).
        writebacks: list[Writeback] = []
        staged = self._stage_out(tensor, writebacks)
        return _CommHandle(
            dist.irecv(staged, src=src, group=group, tag=tag), writebacks, self._on_cpu
        )

    def batch_isend_irecv(self, p2p_ops: list[P2PSpec], group: GroupHandle) -> list[Handle]:
        # Not used on MCCL ('The kernel DistCommBatchIsendIrecv unregistered', measured).
        writebacks: list[Writeback] = []
        functions = {"isend": dist.isend, "irecv": dist.irecv}
        ops = [
            dist.P2POp(
                functions[kind],
                self._stage_in(tensor) if kind == "isend" else self._stage_out(tensor, writebacks),
                peer,
                group=group,
                tag=tag,
            )
            for kind, tensor, peer, tag in p2p_ops
        ]
        # MindSpore returns one CommHandle for the whole batch.
        handle = _CommHandle(dist.batch_isend_irecv(ops)[0], writebacks, self._on_cpu)
        return [handle] * len(p2p_ops)

    def barrier(
        self, group: GroupHandle, async_op: bool, device_ids: list[int] | None = None
    ) -> Handle | None:
        # device_ids is "a reserved parameter" of mint.distributed.barrier (MindSpore 2.10): it
        # is not passed on, and does nothing (api_barrier.toml).
        del device_ids
        # Issued async either way (_finish's queue sync waits for it): a synchronous barrier
        # calls mindspore.runtime.synchronize(), which on CPU only logs "[ERROR] ... CPU device
        # is not supported".
        handle = dist.barrier(group=group, async_op=True)
        return self._finish(handle, async_op, [])

    # MCCL's send and recv take no timeout (a fixed 30 s): the timed forms issue the operation
    # here, in call order on the PyNative queue, and wait for it on a daemon thread at most
    # ``seconds`` (measured: a recv that timed out receives a later message). A recv still
    # waiting blocks every later operation of this process, destroy's barrier too: it is
    # remembered, and destroy then skips that barrier (_blocked_recv).
    def send_within(self, tensor: ms.Tensor, dst: int, group: GroupHandle, seconds: float) -> bool:
        return completes_within(_synchronised(self.isend(tensor, dst, group)), seconds)

    def recv_within(self, tensor: ms.Tensor, src: int, group: GroupHandle, seconds: float) -> bool:
        done = threading.Event()
        handle = self.irecv(tensor, src, group)
        self._pending_recvs.append(done)
        received = completes_within(_synchronised(handle), seconds, done)
        if received:
            self._pending_recvs.remove(done)
        return received

    def _blocked_recv(self) -> bool:
        """Whether a timed recv is still waiting (its peer never sent): it holds the PyNative
        queue, so any later operation would wait behind it until MCCL's 30 s bound."""
        self._pending_recvs[:] = [done for done in self._pending_recvs if not done.is_set()]
        return bool(self._pending_recvs)

    # -- framework facts for compat's tools ------------------------------------------------
    def device_kinds(self) -> set[str]:
        # The device target the user set (MindSpore's default, else "CPU").
        kinds = {"GPU": "cuda", "Ascend": "ascend"}
        target: str = ms.get_context("device_target")
        return {kinds[target]} if target in kinds else set()

    def bench_native(
        self, op: str, rows: int, dtype: str
    ) -> tuple[Any, Any, Callable[[], object], str]:
        kind = {name: key for key, name in self._dtype_names.items()}[dtype]

        def new(count: int, ones: bool = False) -> ms.Tensor:
            return (mint.ones if ones else mint.zeros)((count,), dtype=kind)

        itemsize = int(tables.lookup("dtypes", "dtypes", dtype, "bytes"))
        return _BENCH_CASES[op](self, new, rows, len(self._world), itemsize)


#: The environment variable that puts MCCL's collectives on the ops primitives path (the one
#: MindSpore's GPU backend takes): "1" (anything but "" or "0"). docs/backends.md.
PRIMITIVES_VARIABLE = "COMPAT_MINDSPORE_PRIMITIVES"


def primitives_forced() -> bool:
    return os.environ.get(PRIMITIVES_VARIABLE, "") not in ("", "0")


#: ReduceOp -> the op string mindspore.ops.AllReduce takes (ReduceOp.SUM ...: "sum", "prod",
#: "min", "max"; comm_ops.py, MindSpore 2.10)
_PRIMITIVE_OPS = {
    ReduceOp.SUM: "sum", ReduceOp.PRODUCT: "prod", ReduceOp.MIN: "min", ReduceOp.MAX: "max"
}  # fmt: skip

#: dtypes the CPU kernels of ops.AllGather and ops.Broadcast refuse (MindSpore 2.10, measured:
#: "must be a type of ..."), and the dtype each travels as there (MindSporeAdapter._carried)
_CPU_CARRIED = {ms.bfloat16: ms.float32, ms.int8: ms.int16, ms.uint8: ms.int16, ms.bool_: ms.int16}


@functools.cache
def _primitive_instance(name: str, arguments: tuple[Any, ...]) -> Any:
    """One ``mindspore.ops.<name>(*arguments)`` per name and arguments: a primitive is an object
    MindSpore compiles once per instance."""
    from mindspore import ops

    return getattr(ops, name)(*arguments)


class _QueueSync:
    """The handle of an asynchronous primitive call: its wait() waits for MindSpore's queue."""

    @staticmethod
    def wait() -> None:
        _pynative_executor.sync()


_QUEUE = _QueueSync()


def _synchronised(handle: Handle) -> Callable[[], None]:
    """Waiting for ``handle`` until its operation has run: CommHandle.wait() returns while it is
    still queued (on CPU); the executor's sync() waits for the queue and raises its error."""

    def wait() -> None:
        handle.wait()
        _pynative_executor.sync()

    return wait


#: The environment variables that make MindSpore run each op as it is called, without its
#: pipeline's queue threads (MindSpore's own names; "1" turns them on).
SYNCHRONOUS_LAUNCH_VARIABLES = ("MS_DEV_LAUNCH_BLOCKING", "MS_DEV_HOST_BLOCKING_RUN")


def launches_synchronously() -> bool:
    """Whether MindSpore runs each op before the call returns: mindspore.runtime.launch_blocking()
    was called (which sets its runtime's flag, not the variable), or one of
    :data:`SYNCHRONOUS_LAUNCH_VARIABLES` is "1"."""
    if any(os.environ.get(name) == "1" for name in SYNCHRONOUS_LAUNCH_VARIABLES):
        return True
    flagged: bool = RuntimeConf.get_instance().is_launch_blocking()
    return flagged


def _nothing() -> None:
    pass


def _array_at(address: int, nbytes: int, dtype: np.dtype[Any], owner: object) -> Array:
    """The ``nbytes`` of memory at ``address`` as a 1-d numpy array of ``dtype`` (no copy),
    which keeps ``owner`` (what owns the memory: its tensor) alive as long as it, and any array
    or tensor made over it, is: a part of a staged copy must not outlive the copy's memory."""
    memory = (ctypes.c_char * nbytes).from_address(address)
    memory.owner = owner  # type: ignore[attr-defined]  # ctypes instances take attributes
    return np.frombuffer(memoryview(memory).cast("B"), dtype=dtype)


#: The attribute of a tensor :meth:`MindSporeAdapter._over` made: (the numpy array, its memory's
#: address), which _host_view returns while the tensor still lies over that memory. A shared-memory
#: gather on 3 ranks made 10 host views a call on the root, 6-10 us each (measured).
_MADE_OVER = "_compat_made_over"

#: The largest new tensor made from numpy rather than by mint.empty (MindSporeAdapter._allocate).
_HOST_ALLOCATION_MAX = 1 << 20

#: The names MindSpore gives the world group, one per backend.
_WORLD_GROUP_NAMES = frozenset({"hccl_world_group", "nccl_world_group", "mccl_world_group"})

#: How long destroy() lets MCCL's event loop run after its barrier before finalising. A receiver
#: acknowledges a message by echoing it back, queued on its connection (the ps/core AbstractNode's
#: ProcessCollectiveSendData) before the message is handed over; the barrier's last receive can
#: therefore return while that echo is still queued, and a finalise that stops the event loop
#: then drops it: the peer waits 30 s in the barrier ("RingAllReduce wait sending 8 failed."), and
#: a scheduler started by init(init_method="tcp://...") is gone by then. Measured with 6-8 jobs
#: at once: 4 of 36 jobs without this pause, 0 of 84 with it.
ACK_FLUSH_SECONDS = 0.2

#: init_process_group arguments MindSpore cannot take, and why.
_NOT_TAKEN_AT_INIT = {
    "store": "MindSpore's ranks meet through its scheduler (which compat starts for tcp:// and "
    "env://), not a torch store",
    "pg_options": "MindSpore's backends take no options (mint.distributed's pg_options is "
    "reserved)",
}


def _check_made(name: str, ranks: list[int], size: int) -> None:
    """A group the framework made is the group asked for: a failed creation that left a name
    meaning the world group (mint.distributed.new_group's "") would run every collective of the
    group over every rank, silently."""
    if size != len(ranks):
        raise RuntimeError(
            f"new_group: expected the backend's group {name!r} to have the {len(ranks)} ranks "
            f"{ranks}; it has {size}, so compat does not use it"
        )


def _bind_device(target: str, device_id: int | None) -> None:
    """``ms.set_device`` for the backend's device target: ``device_id`` if given, else the
    device msrun or another launcher gives this rank (``local_rank_env``; msrun's DEVICE_ID is
    the local rank), else MindSpore's default (0). A device the script set itself is kept: a
    second ``ms.set_device`` with another id fails ("can not be modified")."""
    conf = DeviceManagerConf.get_instance()
    if conf.is_device_enable():
        chosen = (conf.get_device_target(), conf.get_device_id())
        if chosen[0] != target:
            raise ValueError(
                f"backend: it runs on {target}; the script set the device to {chosen[0]} "
                "(ms.set_device)"
            )
        if device_id is not None and device_id != chosen[1]:
            raise ValueError(
                f"device_id: the script set device {chosen[1]} (ms.set_device); got {device_id}"
            )
        return
    if device_id is None and target != "CPU":
        device_id = local_rank("mindspore")
    ms.set_device(target, device_id)


def _backend_of_target(target: str) -> str:
    for key, entry in tables.load("capabilities").items():
        if entry["framework"] == "mindspore" and entry.get("device_target") == target:
            name: str = entry.get("backend", key)
            return name
    raise UnsupportedError(
        f"device target {target!r} has no MindSpore backend in capabilities.toml"
    )


def _torch_meeting(rendezvous: Rendezvous) -> tuple[str, int, int, int] | None:
    """(host, port, rank, world size) from torch's init_process_group arguments: tcp://host:port
    with rank and world_size, or env:// (or nothing) with MASTER_ADDR, MASTER_PORT, RANK and
    WORLD_SIZE set; None when neither gives them (msrun's variables, or a world of one)."""
    method = rendezvous.init_method
    if method is not None and method.startswith("file://"):
        raise UnsupportedError(
            f"init_method: MindSpore meets over TCP only; expected env:// or tcp://host:port, "
            f"got {method!r}"
        )
    if method is not None and method.startswith("tcp://"):
        where = method.removeprefix("tcp://").split("?")[0].rstrip("/")
        host, _, port = where.rpartition(":")
        assert rendezvous.rank is not None and rendezvous.world_size is not None  # compat.init
        return host, int(port), rendezvous.rank, rendezvous.world_size
    names = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
    if not all(name in os.environ for name in names):
        return None
    rank = rendezvous.rank if rendezvous.rank is not None else int(os.environ["RANK"])
    world = rendezvous.world_size
    world = world if world is not None else int(os.environ["WORLD_SIZE"])
    master_port = int(os.environ["MASTER_PORT"])
    if "TORCHELASTIC_RUN_ID" in os.environ:
        # torchrun's agent serves its own store on MASTER_PORT (the scheduler could not bind
        # it, and the workers waited: measured, see _check_scheduler_port); the scheduler takes
        # the next port.
        master_port += 1
    return os.environ["MASTER_ADDR"], master_port, rank, world


def _check_scheduler_port(address: str, port: int) -> None:
    """Raise where another process holds ``port`` at ``address``, so that MindSpore's scheduler
    could not listen there. Its output is not shown, and every rank would then wait in
    mindspore.communication.init, retrying to reach it, for MS_TOPO_TIMEOUT seconds: 1800
    unless set (MindSpore's default, which it logs at INFO as "Cluster topo timeout is 1800
    seconds"; measured on 2.10: a port held by a listening socket, 2 ranks still waiting after
    120 s, with no error; a worker with no scheduler and MS_TOPO_TIMEOUT=5 raised RuntimeError
    after 7.6 s). Raised here, rank 0 ends at once; the other ranks, which cannot know, wait
    those 30 minutes, as torch's ranks wait for a missing master for init_process_group's
    timeout (30 minutes by default on Gloo, 2.13). A launcher's free port can be taken before
    rank 0 gets here: by another job, or as the local port of any outgoing connection (both
    draw from the same range)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                return  # MindSpore's scheduler meets it too, and says so
            raise RuntimeError(
                f"MASTER_PORT: MindSpore's scheduler, which compat starts on rank 0 at the "
                f"address the job meets at (init_method's tcp://host:port, else MASTER_ADDR and "
                f"MASTER_PORT, the next port under torchrun), cannot listen on {address}:{port}: "
                f"another process holds that port; expected a free port, got {port}"
            ) from error


#: Run in the scheduler rank 0 starts, before frameworks.toml's code: the kernel kills the
#: scheduler when rank 0 ends, however it ends. Rank 0 ended by a signal Python does not turn into
#: an exception (SIGTERM, as torch.multiprocessing.spawn and torchrun stop ranks; SIGKILL; or
#: MindSpore's own exit on Ctrl-C) runs neither atexit nor destroy(), and its scheduler outlived
#: it by 30-35 s (measured). Not a thread polling getppid(): the scheduler's init() holds the GIL
#: until the job ends, so no other Python thread runs (measured). Linux only (prctl).
_END_WITH_PARENT = """
import ctypes, os, signal, sys
if sys.platform.startswith("linux"):
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != int(sys.argv[1]):
        os._exit(1)  # rank 0 ended before prctl took effect
"""


def _start_scheduler(common: dict[str, str]) -> subprocess.Popen[bytes]:
    """MindSpore's scheduler process, as compat launch and msrun start it (frameworks.toml), ending
    with this process (``_END_WITH_PARENT``)."""
    scheduler = tables.lookup("frameworks", "mindspore", "launch", "scheduler")
    inherited = environment()
    env = {**inherited, **common, **scheduler["env"], "GLOG_v": inherited.get("GLOG_v", "3")}
    argv = [sys.executable, "-c", _END_WITH_PARENT + scheduler["code"], str(os.getpid())]
    if not sys.platform.startswith("linux"):
        return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started: list[subprocess.Popen[bytes] | BaseException] = []
    ready = threading.Event()

    def start_and_stay() -> None:
        # The parent-death signal follows the thread that started the child, not the process:
        # started from compat.init's thread, a scheduler would be killed when that thread ends
        # (an init from a worker thread). This thread stays until the scheduler has exited.
        try:
            popen = subprocess.Popen(
                argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        except BaseException as error:  # the caller raises it
            started.append(error)
            ready.set()
            return
        started.append(popen)
        ready.set()
        popen.wait()  # reaped here: destroy() does not wait for it

    threading.Thread(target=start_and_stay, name="compat-mindspore-scheduler", daemon=True).start()
    ready.wait()
    if isinstance(started[0], BaseException):
        raise started[0]
    return started[0]


#: numpy's unsigned integers by width in bytes: copies move any dtype as these bits.
_BIT_DTYPES = {
    np.dtype(bits).itemsize: np.dtype(bits) for bits in (np.uint8, np.uint16, np.uint32, np.uint64)
}


# MCCL gives up on a collective after a fixed 30 s with "<Op> failed." (measured; no setting
# changes it). Those words alone also mean other failures, so only a failure that took that long
# is a timeout. HCCL's bound is HCCL_EXEC_TIMEOUT (1836 s by default) and whether the process
# survives it is not documented: its errors pass unchanged (README, "What each backend does").
MCCL_TIMEOUT_SECONDS = 30.0


def _timeout_translator(collective: str) -> Translate:
    def translate(error: Exception, seconds: float) -> Exception:
        if seconds < MCCL_TIMEOUT_SECONDS - 1 or ms.get_context("device_target") != "CPU":
            return error
        return CollectiveTimeout(
            f"{collective} did not complete within MindSpore's {MCCL_TIMEOUT_SECONDS:g} s bound "
            f"(it failed after {seconds:.0f} s): a rank did not join it or died ({error})"
        )

    return translate


ADAPTER_CLASS = translating_errors(MindSporeAdapter, _timeout_translator)


# -- compat bench's native calls (Adapter.bench_native): one builder per op, each making the
# buffers (values the op leaves unchanged: zeros where it sums) and the native call on them, which
# synchronises (a MindSpore call returns while its work is still queued). On MCCL (CPU), where
# MindSpore has no kernel for an op, "native" is the best-known plain approach, and the
# description says so. -------------------------------------------------------------------------

_New = Callable[..., ms.Tensor]
_BenchCase = tuple[Any, Any, Callable[[], object], str]
_Builder = Callable[[MindSporeAdapter, _New, int, int, int], _BenchCase]


def _synchronising(adapter: MindSporeAdapter, call: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        call()
        adapter.synchronize()

    return run


def _bench_reduce_scatter(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    # Both forms: all_reduce the input in place (no copy: the reference is as cheap as it can be;
    # zeros keep its values fixed) and keep this rank's slice.
    x, out, rank = new(rows * world), new(rows), adapter._rank

    def all_reduce_slice() -> ms.Tensor:
        dist.all_reduce(x)
        part = x[rank * rows : (rank + 1) * rows]
        adapter.synchronize()
        return part

    native = (
        "mindspore.mint.distributed.all_reduce of the input in place + slice (MCCL has no "
        "reduce_scatter kernel; the best-known plain approach)"
        if adapter._on_cpu
        else "all_reduce in place + slice"
    )
    return x, out, all_reduce_slice, native


def _bench_all_reduce(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    x = new(rows * world)
    native = "mindspore.mint.distributed.all_reduce"
    return x, None, _synchronising(adapter, lambda: dist.all_reduce(x)), native


def _bench_all_gather_into_tensor(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    x, out = new(rows, True), new(rows * world)

    def all_gather_cat() -> ms.Tensor:
        # A list all_gather + cat (the plain approach where MCCL has no all_gather_into_tensor).
        gathered = [new(rows) for _ in range(world)]
        dist.all_gather(gathered, x)
        whole = mint.cat(gathered)
        adapter.synchronize()
        return whole

    native = (
        "list mindspore.mint.distributed.all_gather + cat (MCCL has no all_gather_into_tensor "
        "kernel)"
        if adapter._on_cpu
        else "list all_gather + cat"
    )
    return x, out, all_gather_cat, native


def _bench_all_gather(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    x, outs = new(rows, True), [new(rows) for _ in range(world)]
    native = "mindspore.mint.distributed.all_gather (a list of n tensors)"
    return x, outs, _synchronising(adapter, lambda: dist.all_gather(outs, x)), native


def _bench_broadcast(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    x = new(rows * world, True)
    native = "mindspore.mint.distributed.broadcast (src 0)"
    return x, None, _synchronising(adapter, lambda: dist.broadcast(x, 0)), native


def _bench_reduce(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    x = new(rows * world)
    if adapter._on_cpu:
        native = (
            "mindspore.mint.distributed.all_reduce in place (MCCL has no reduce kernel; the "
            "result lands on every rank)"
        )
        return x, None, _synchronising(adapter, lambda: dist.all_reduce(x)), native
    native = "mindspore.mint.distributed.reduce (dst 0)"
    return x, None, _synchronising(adapter, lambda: dist.reduce(x, 0)), native


def _bench_scatter(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    root = adapter._rank == 0
    parts = [new(rows, True) for _ in range(world)] if root else None
    out = new(rows)
    # mint.distributed.scatter wants [] (not None) on the other ranks (measured).
    scatter = _synchronising(adapter, lambda: dist.scatter(out, parts or [], src=0))
    return parts, out, scatter, "mindspore.mint.distributed.scatter (src 0)"


def _bench_scatter_tensor(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    # comm_func.scatter_tensor is deprecated in 2.10 (its docstring's platforms say so): the
    # root's tensor sliced on each call, as compat splits it, and mint's list scatter.
    x, out, root = new(rows * world, True), new(rows), adapter._rank == 0

    def sliced_scatter() -> None:
        parts = [x[index * rows : (index + 1) * rows] for index in range(world)] if root else []
        dist.scatter(out, parts, src=0)
        adapter.synchronize()

    native = "mindspore.mint.distributed.scatter of the root's tensor sliced in n (src 0)"
    return x, out, sliced_scatter, native


def _bench_all_reduce_coalesced(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    # n tensors of their own: compat stages a MindSpore view (the adapter cannot hand MCCL
    # one), and the plain approach would time that staging, not the calls.
    parts = [new(rows) for _ in range(world)]

    def each() -> None:
        for part in parts:
            dist.all_reduce(part)
        adapter.synchronize()

    native = "mindspore.mint.distributed.all_reduce per tensor (MindSpore has no coalesced call)"
    return parts, None, each, native


def _bench_gather(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    x = new(rows, True)
    outs = [new(rows) for _ in range(world)] if adapter._rank == 0 else None
    gather = _synchronising(adapter, lambda: dist.gather(x, outs or [], dst=0))
    return x, outs, gather, "mindspore.mint.distributed.gather (dst 0)"


def _ordered_exchange(
    adapter: MindSporeAdapter, sent: list[ms.Tensor], received: list[ms.Tensor]
) -> Callable[[], None]:
    """all_to_all as blocking send/recv with each peer in rank order, the lower rank sending
    first (so no two blocking calls wait on each other), this rank's own part copied."""
    rank, world = adapter._rank, len(sent)

    def exchange() -> None:
        adapter.copy_(received[rank], sent[rank])
        for peer in range(world):
            if peer < rank:
                adapter.recv(received[peer], peer, None)
                adapter.send(sent[peer], peer, None)
            elif peer > rank:
                adapter.send(sent[peer], peer, None)
                adapter.recv(received[peer], peer, None)
        adapter.synchronize()

    return exchange


_ORDERED = (
    "ordered blocking send/recv per pair of ranks, the lower rank sending first (MCCL has no "
    "all_to_all kernel)"
)


def _bench_all_to_all_single(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    x, out = new(rows * world, True), new(rows * world)
    if adapter._on_cpu:
        sent, received = adapter.split(x, [rows] * world), adapter.split(out, [rows] * world)
        return x, out, _ordered_exchange(adapter, sent, received), _ORDERED
    exchange = _synchronising(adapter, lambda: dist.all_to_all_single(out, x))
    return x, out, exchange, "mindspore.mint.distributed.all_to_all_single"


def _bench_all_to_all(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    ins, outs = [new(rows, True) for _ in range(world)], [new(rows) for _ in range(world)]
    if adapter._on_cpu:
        return ins, outs, _ordered_exchange(adapter, ins, outs), _ORDERED
    exchange = _synchronising(adapter, lambda: dist.all_to_all(outs, ins))
    return ins, outs, exchange, "mindspore.mint.distributed.all_to_all"


def _bench_isend_irecv(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    x, out, rank = new(rows * world, True), new(rows * world), adapter._rank

    def exchange() -> None:
        sending = dist.isend(x, dst=(rank + 1) % world)
        receiving = dist.irecv(out, src=(rank - 1) % world)
        sending.wait()
        receiving.wait()
        adapter.synchronize()

    native = (
        "mindspore.mint.distributed.isend to the next rank + irecv from the previous, then wait"
    )
    return x, out, exchange, native


def _bench_batch_isend_irecv(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    if adapter._on_cpu:  # 'The kernel DistCommBatchIsendIrecv unregistered' on CPU (measured)
        x, out, exchange, _ = _bench_isend_irecv(adapter, new, rows, world, itemsize)
        native = "mindspore.mint.distributed.isend + irecv, then wait (MCCL has no batch kernel)"
        return x, out, exchange, native
    x, out, rank = new(rows * world, True), new(rows * world), adapter._rank
    ops = [dist.P2POp("isend", x, (rank + 1) % world), dist.P2POp("irecv", out, (rank - 1) % world)]
    batch = _synchronising(adapter, lambda: [work.wait() for work in dist.batch_isend_irecv(ops)])
    return x, out, batch, "mindspore.mint.distributed.batch_isend_irecv (next rank, previous)"


def _bench_send_recv(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    x, out, rank = new(rows * world, True), new(rows * world), adapter._rank
    following, previous = (rank + 1) % world, (rank - 1) % world

    def send_first() -> None:
        dist.send(x, dst=following)
        dist.recv(out, src=previous)
        adapter.synchronize()

    def receive_first() -> None:
        dist.recv(out, src=previous)
        dist.send(x, dst=following)
        adapter.synchronize()

    native = (
        "mindspore.mint.distributed.send to the next rank + recv from the previous (even ranks "
        "send first, odd ranks receive first), then the queue's sync"
    )
    return x, out, send_first if rank % 2 == 0 else receive_first, native


def _bench_monitored_barrier(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    _, _, barrier, _ = _bench_barrier(adapter, new, rows, world, itemsize)
    native = (
        "mindspore.mint.distributed.barrier (async, then the queue's sync; MindSpore has no "
        "monitored_barrier)"
    )
    return None, None, barrier, native


def _bench_barrier(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    # Issued async and waited for by the queue's sync, as compat's own barrier is: the
    # synchronous barrier calls mindspore.runtime.synchronize(), which on CPU only logs
    # "[ERROR] ... CPU device is not supported".
    def barrier() -> None:
        dist.barrier(async_op=True)
        _pynative_executor.sync()

    return None, None, barrier, "mindspore.mint.distributed.barrier (async, then the queue's sync)"


def _bench_all_gather_object(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    obj, gathered = bytes(rows * itemsize), [None] * world
    gather = _synchronising(adapter, lambda: dist.all_gather_object(gathered, obj))
    return obj, gathered, gather, "mindspore.mint.distributed.all_gather_object"


def _bench_broadcast_object_list(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    objects = [bytes(rows * world * itemsize) if adapter._rank == 0 else None]
    broadcast = _synchronising(adapter, lambda: dist.broadcast_object_list(objects, 0))
    return None, objects, broadcast, "mindspore.mint.distributed.broadcast_object_list (src 0)"


def _bench_gather_object(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    obj = bytes(rows * itemsize)
    gathered = [None] * world if adapter._rank == 0 else None
    gather = _synchronising(adapter, lambda: dist.gather_object(obj, gathered, 0))
    return obj, gathered, gather, "mindspore.mint.distributed.gather_object (dst 0)"


def _bench_scatter_object_list(
    adapter: MindSporeAdapter, new: _New, rows: int, world: int, itemsize: int
) -> _BenchCase:
    objects = [bytes(rows * itemsize) for _ in range(world)] if adapter._rank == 0 else None
    out: list[Any] = [None]
    scatter = _synchronising(adapter, lambda: dist.scatter_object_list(out, objects, 0))
    return objects, out, scatter, "mindspore.mint.distributed.scatter_object_list (src 0)"


_BENCH_CASES: dict[str, _Builder] = {
    "reduce_scatter_tensor": _bench_reduce_scatter,
    "reduce_scatter": _bench_reduce_scatter,
    "all_reduce": _bench_all_reduce,
    "all_gather_into_tensor": _bench_all_gather_into_tensor,
    "all_gather": _bench_all_gather,
    "broadcast": _bench_broadcast,
    "reduce": _bench_reduce,
    "scatter": _bench_scatter,
    "scatter_tensor": _bench_scatter_tensor,
    "gather": _bench_gather,
    "all_to_all_single": _bench_all_to_all_single,
    "all_reduce_coalesced": _bench_all_reduce_coalesced,
    "all_to_all": _bench_all_to_all,
    "isend_irecv": _bench_isend_irecv,
    "batch_isend_irecv": _bench_batch_isend_irecv,
    "send_recv": _bench_send_recv,
    "barrier": _bench_barrier,
    "monitored_barrier": _bench_monitored_barrier,
    "all_gather_object": _bench_all_gather_object,
    "broadcast_object_list": _bench_broadcast_object_list,
    "gather_object": _bench_gather_object,
    "scatter_object_list": _bench_scatter_object_list,
}
