"""compat's translation onto MindSpore: ``mindspore.mint.distributed`` (and, on GPU, the ``ops``
primitives) for compat's normalised calls, the MindSpore quirks worked around as
:mod:`compat.adapters.mindspore` lists them. The local tensor operations are
:class:`~compat.adapters.mindspore.tensors.MindSporeTensors`'; starting the job is
:mod:`compat.adapters.mindspore.startup`."""

from __future__ import annotations

import functools
import os
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
from mindspore import communication

# PyNative queues operations; this executor's sync() waits for them and raises a deferred error.
# (mindspore.runtime.synchronize() only logs "CPU device is not supported" on CPU, unsynchronised.)
from mindspore._c_expression import RuntimeConf
from mindspore.graph.api import _pynative_executor

from compat.base import tables
from compat.base.adapter import (
    GroupHandle,
    LinearLayer,
    P2PSpec,
    Rendezvous,
    StoreAddress,
    StoreClient,
    Translate,
    device_backend,
    translating_errors,
)
from compat.base.errors import CollectiveTimeout, UnsupportedError
from compat.base.timing import completes_within
from compat.base.types import Handle, ReduceOp

from . import cells, startup
from .tensors import MindSporeTensors, dtype_of, from_c_contiguous, shape_of

Writeback = Callable[[], None]


class _CommHandle:
    """A MindSpore CommHandle as a compat pending handle.

    CommHandle has ``wait()`` but no ``is_completed()`` and no timeout, so completion is known
    only once waited on; staged views are written back then.

    On CPU the wait is the PyNative queue's sync, not ``CommHandle.wait()``: that calls
    ``mindspore.runtime.synchronize()``, which on CPU only logs "[ERROR] ... CPU device is not
    supported" and returns: a waited async barrier then returns before its peers arrive. The
    sync waits for the barrier as for every queued op.
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


class MindSporeAdapter(MindSporeTensors):
    framework = "mindspore"
    native_group_names = "a MindSpore group name (str)"
    # mint.distributed's send/recv/isend/irecv take tag=0, "a reserved parameter currently"
    # (their docstrings, MindSpore 2.10): on MCCL a recv takes the next message whatever its tag
    # (api_send_recv.toml).
    p2p_tag_unsupported = (
        "MindSpore's send/recv/isend/irecv take tag as a reserved parameter (MindSpore 2.10): "
        "messages from one rank match in the order they were sent, whatever their tag"
    )

    def __init__(self) -> None:
        super().__init__()
        ops = tables.lookup("reduce_ops", "ops")
        # MindSpore has no bitwise op (no "mindspore" spelling): compat's table emulates them
        # there (capabilities.toml's emulate rules), so no call passes one to mint.
        self._ops = {
            ReduceOp(value): entry["mindspore"]
            for value, entry in ops.items()
            if "mindspore" in entry
        }
        self._group_ranks: dict[str, list[int]] = {}
        self._world: list[int] = []
        self._rank = 0
        self._adopted = False
        self._scheduler: subprocess.Popen[bytes] | None = None
        self._pending_recvs: list[threading.Event] = []  # see recv_within
        #: collectives through MindSpore's ``ops`` primitives (see PRIMITIVES): on GPU always,
        #: on CPU where COMPAT_MINDSPORE_PRIMITIVES asks for them
        self.primitives = False
        #: the primitive each call of the primitives path ran, by adapter method: what ran
        #: (tests read it)
        self.primitive_calls: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------
    def init(self, backend: str | None, timeout: timedelta | None, rendezvous: Rendezvous) -> str:
        device_id = _checked_device_id(timeout, rendezvous)
        backends = {
            entry.get("backend", key): entry["device_target"]
            for key, entry in tables.load("capabilities").items()
            if entry["framework"] == "mindspore"
        }
        self._adopted = bool(dist.is_initialized())
        if self._adopted:
            # The script called mindspore.communication.init itself: adopt its world.
            target = ms.get_context("device_target")
            backend = next(name for name, device in backends.items() if device == target)
        else:
            if backend is None:
                backend = tables.default_backend(self.framework, self.device_kinds())
            backend = self._own_backend(backend, backends)
            startup.bind_device(backends[backend], device_id)
            self._scheduler = startup.join(rendezvous)
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
        # An MCCL send waits for its receiver's acknowledgement: a receiver that exits right
        # after its last recv can leave that sender failing ("Send failed.") at MCCL's bound.
        # The barrier keeps every rank until all have finished, and the pause after it lets the
        # barrier's own acknowledgements leave (ACK_FLUSH_SECONDS). A process leaving on an
        # uncaught exception skips both: its peers are not coming.
        # A timed recv still waiting for a rank that never sent (monitored_barrier after its
        # timeout) holds the PyNative queue: the barrier would queue behind it and then meet
        # peers that left, so it is skipped. Leaving still waits for that recv until MCCL's
        # bound ("Recv failed."), whichever way the process ends.
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
        # MindSpore does at the process's exit, not in destroy_process_group: waited for here, it
        # would never end. It ends with this process at the latest (_END_WITH_PARENT), reaped by
        # the thread that started it.
        self._scheduler = None

    def rank(self) -> int:
        # Read in init: it is asked on every call of a shared-memory choice, and
        # communication.get_rank() is a slow call.
        return self._rank

    def world_size(self) -> int:
        size: int = communication.get_group_size()
        return size

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
        # members_only changes nothing here: create_group runs on the members only either way.
        _check_group_arguments(timeout, backend, options)
        # Only the members create the group, as create_group's own docstring does: when every
        # rank calls it, a non-member can block in it and leave the members blocked in their next
        # collective (3 ranks, groups [0, 1] then [1, 2]). mint.distributed.new_group is
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
    # job that mindspore.communication.init() started, so it cannot tell a teardown.

    def store_client(self, address: StoreAddress) -> StoreClient:
        from .store import MindSporeStoreClient

        return MindSporeStoreClient(address)

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

    def collective_timeout(self) -> float:
        return MCCL_TIMEOUT_SECONDS

    # -- Cells (compat.tensor.parallel) -------------------------------------------------------
    def module_children(self, module: object) -> list[tuple[str, object]] | None:
        return cells.children(module)

    def linear_layer(self, module: object) -> LinearLayer | None:
        return cells.linear_layer(module)

    def replace_parameter(self, module: object, name: str, value: ms.Tensor) -> None:
        cells.replace_parameter(module, name, value)

    def add_forward_hooks(
        self,
        module: object,
        before: Callable[[ms.Tensor], ms.Tensor],
        after: Callable[[ms.Tensor], ms.Tensor],
    ) -> None:
        cells.add_forward_hooks(module, before, after)

    def differentiable(
        self, forward: Callable[[ms.Tensor], ms.Tensor], backward: Callable[[ms.Tensor], ms.Tensor]
    ) -> Callable[[ms.Tensor], ms.Tensor]:
        return _Differentiable(forward, backward)

    # -- staging of views --------------------------------------------------------------------
    def _alias(self, tensor: ms.Tensor) -> ms.Tensor | None:
        """A dense tensor over a contiguous view's memory (at its offset), or None."""
        array = self._host_view(tensor)
        if array is None or not array.flags.c_contiguous:
            return None
        return from_c_contiguous(array)

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
        operation queued on the PyNative pipeline, whose sync costs as much as a small
        collective. Only there: MindSpore's queue does not keep the array alive (the array of a
        dropped tensor can be freed before the sync), so the tensor of an asynchronous call,
        which a user may drop with its Work unwaited, is MindSpore's own (:meth:`_allocate`)."""
        shape, dtype = tuple(shape_of(tensor)), dtype_of(tensor)
        numpy_dtype = None if async_op else self._from_numpy_as(shape, dtype)
        if numpy_dtype is None:
            staged = self._allocate(shape, dtype)
        else:
            staged = from_c_contiguous(np.empty(shape, numpy_dtype))
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
            # unregistered"): its list all_gather, into the output's parts.
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
        # mint.distributed.scatter wants [] (not None) on the other ranks.
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
    # its input as it is (on CPU), so the result is copied into the caller's
    # tensor once the queue has run it (on wait() for an asynchronous call).
    def _primitive(self, name: str, method: str, *arguments: Any) -> Any:
        self.primitive_calls[method] = f"mindspore.ops.{name}"
        return _primitive_instance(name, arguments)

    def _on_primitives(self, group: GroupHandle) -> bool:
        """Whether a call on ``group`` takes the primitives path. On CPU only the world group's:
        "AllGather only support mccl_world_group on CPU, but got compat_group_1" (MindSpore
        2.10), so a sub-group there keeps mint.distributed (and says so in primitive_calls)."""
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
        """``tensor`` in a dtype the CPU kernels of AllGather and Broadcast take exactly, and
        the dtype to turn the result back into (None: as it is). MindSpore 2.10 refuses
        bfloat16, int8, uint8 and bool there: each travels widened (bfloat16 as float32, the
        others as int16), exact both ways. It narrows int64 and float64 to 32 bits without an
        error: their bits travel as int32 pairs, flattened (numpy's copy: the view of a tensor
        that lies over a larger buffer takes the whole buffer). On GPU the table's dtypes are
        those the NCCL kernels take (PRIMITIVES)."""
        dtype = dtype_of(tensor)
        if not self._on_cpu:
            return tensor, None
        if dtype in _CPU_AS_BITS:
            return ms.Tensor(tensor.asnumpy().reshape(-1).view(np.int32)), dtype
        if dtype not in _CPU_CARRIED:
            return tensor, None
        return tensor.astype(_CPU_CARRIED[dtype]), dtype

    @staticmethod
    def _uncarried(result: ms.Tensor, dtype: Any, shape: tuple[int, ...]) -> ms.Tensor:
        """The result of a carried tensor, in ``dtype`` and ``shape`` (-1 for the rows of a
        gather)."""
        if dtype in _CPU_AS_BITS:
            return ms.Tensor(result.asnumpy().view(_CPU_AS_BITS[dtype]).reshape(shape))
        return result if dtype is None else result.astype(dtype)

    def _holds_nothing(self, tensor: ms.Tensor) -> bool:
        """Whether ``tensor`` has no elements: the primitives refuse it ("For 'AllGather', input
        x_shape[0] is invalid: 0"), and every rank's tensor has that same shape in
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
        # compat checks). On CPU its kernel takes sum on float32 and float16 only;
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
        return self._uncarried(gather(carried), dtype, (-1, *self.shape(tensor)[1:]))

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
        result = self._uncarried(result, dtype, self.shape(tensor))
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
        # before any matching recv.
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
        # Not used on MCCL ('The kernel DistCommBatchIsendIrecv unregistered').
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
    # ``seconds`` (a recv that timed out receives a later message). A recv still
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

#: dtypes the CPU kernels of ops.AllGather and ops.Broadcast refuse (MindSpore 2.10: "must be a
#: type of ..."), and the dtype each travels as there (MindSporeAdapter._carried)
_CPU_CARRIED = {ms.bfloat16: ms.float32, ms.int8: ms.int16, ms.uint8: ms.int16, ms.bool_: ms.int16}
#: the dtypes whose bits travel as int32 pairs there, and numpy's dtype of those bits
_CPU_AS_BITS = {ms.int64: np.int64, ms.float64: np.float64}


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


#: The names MindSpore gives the world group, one per backend.
_WORLD_GROUP_NAMES = frozenset({"hccl_world_group", "nccl_world_group", "mccl_world_group"})

#: How long destroy() lets MCCL's event loop run after its barrier before finalising. A receiver
#: acknowledges a message by echoing it back, queued on its connection (the ps/core AbstractNode's
#: ProcessCollectiveSendData) before the message is handed over; the barrier's last receive can
#: therefore return while that echo is still queued, and a finalise that stops the event loop
#: then drops it: the peer waits out MCCL's bound in the barrier ("RingAllReduce wait sending 8
#: failed."), and a scheduler started by init(init_method="tcp://...") is gone by then.
ACK_FLUSH_SECONDS = 0.2

#: init_process_group arguments MindSpore cannot take, and why.
_NOT_TAKEN_AT_INIT = {
    "store": "MindSpore's ranks meet through its scheduler (which compat starts for tcp:// and "
    "env://), not a torch store",
    "pg_options": "MindSpore's backends take no options (mint.distributed's pg_options is "
    "reserved)",
}


def _checked_device_id(timeout: timedelta | None, rendezvous: Rendezvous) -> int | None:
    """The device index asked for, after refusing what MindSpore's init cannot take, before
    anything starts."""
    if timeout is not None:
        raise UnsupportedError(
            "timeout: MindSpore bounds each collective itself (30 s on MCCL) and takes no "
            f"per-job timeout; expected None on mindspore, got {timeout}"
        )
    for option, why in _NOT_TAKEN_AT_INIT.items():
        if getattr(rendezvous, option) is not None:
            raise UnsupportedError(
                f"{option}: {why}; expected None on mindspore, got {getattr(rendezvous, option)!r}"
            )
    device_id = rendezvous.device_id
    if device_id is not None and not isinstance(device_id, int):
        raise TypeError(
            f"device_id: expected None or a device index (int) on mindspore; got "
            f"{type(device_id).__name__} {device_id!r}"
        )
    return device_id


def _check_group_arguments(timeout: timedelta | None, backend: str | None, options: object) -> None:
    """What create_group cannot take: a timeout, another backend than the job's, options."""
    if options is not None:
        raise UnsupportedError(
            "pg_options: torch's backend options have no MindSpore counterpart (create_group "
            f"takes Ascend's hccl_config only); expected None on mindspore, got {options!r}"
        )
    if timeout is not None:
        raise UnsupportedError(
            "timeout: MindSpore's create_group takes no timeout (each collective is bounded "
            f"by the backend); expected None on mindspore, got {timeout}"
        )
    if backend is not None:
        own = startup.backend_of_target(ms.get_context("device_target"))
        if backend != own:
            raise UnsupportedError(
                f"backend: a MindSpore group uses the job's backend ({own}); got {backend!r}"
            )


def _check_made(name: str, ranks: list[int], size: int) -> None:
    """A group the framework made is the group asked for: a failed creation that left a name
    meaning the world group (mint.distributed.new_group's "") would run every collective of the
    group over every rank, silently."""
    if size != len(ranks):
        raise RuntimeError(
            f"new_group: expected the backend's group {name!r} to have the {len(ranks)} ranks "
            f"{ranks}; it has {size}, so compat does not use it"
        )


# MCCL gives up on a collective after a fixed 30 s with "<Op> failed." (no setting changes
# it). Those words alone also mean other failures, so only a failure that took that long
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
