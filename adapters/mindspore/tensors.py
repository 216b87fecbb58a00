"""MindSpore's local tensor facts and operations for compat: the half of the adapter that does not
communicate (shapes, dtypes, views, copies, reductions, host memory).

On CPU each mint operation waits on the PyNative queue once synchronised, so local copies and
reductions run in numpy on the tensors' own memory (``_host_view``), and compat never
slice-assigns there (a slice-assigned tensor stops receiving collective results: see
:mod:`compat.adapters.mindspore`).
"""

from __future__ import annotations

import ctypes
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import mindspore as ms
import numpy as np
from mindspore import mint

# PyNative queues operations; this executor's sync() waits for them and raises a deferred error.
# (mindspore.runtime.synchronize() only logs "CPU device is not supported" on CPU, unsynchronised.)
from mindspore._c_expression import TensorPy
from mindspore.graph.api import _pynative_executor

from compat.base import tables
from compat.base.adapter import (
    Adapter,
    TensorFacts,
    element_extent,
    numpy_elementwise,
    reduce_arrays,
)
from compat.base.errors import UnsupportedError
from compat.base.types import ReduceOp

Array = np.ndarray[Any, Any]


def _getter(private: str, public: str) -> Callable[[ms.Tensor], Any]:
    """Tensor's shape, dtype and nbytes are Python properties that return TensorPy's getters
    (_shape, _dtype, _nbytes): read directly they skip the property's frame, and the common case
    of a collective reads several. The public name where a MindSpore lacks the getter."""
    return operator.attrgetter(private if hasattr(TensorPy, private) else public)


shape_of = _getter("_shape", "shape")
dtype_of = _getter("_dtype", "dtype")
_nbytes_of = _getter("_nbytes", "nbytes")
#: Tensor.is_contiguous calls this (without the method's frame).
_is_contiguous: Callable[[ms.Tensor], bool] = getattr(
    TensorPy, "is_contiguous", ms.Tensor.is_contiguous
)
#: A tensor over a C-contiguous array's memory: what Tensor.from_numpy calls once it has made
#: the array C-contiguous (a copy otherwise), without its Python checks.
from_c_contiguous: Callable[[Array], ms.Tensor] = getattr(
    TensorPy, "from_numpy", ms.Tensor.from_numpy
)

#: MindSpore's device target names, by their lower-case spelling.
_DEVICE_TARGETS = {"cpu": "CPU", "gpu": "GPU", "ascend": "Ascend"}


def nothing() -> None:
    pass


def _array_at(address: int, nbytes: int, dtype: np.dtype[Any], owner: object) -> Array:
    """The ``nbytes`` of memory at ``address`` as a 1-d numpy array of ``dtype`` (no copy),
    which keeps ``owner`` (what owns the memory: its tensor) alive as long as it, and any array
    or tensor made over it, is: a part of a staged copy must not outlive the copy's memory."""
    memory = (ctypes.c_char * nbytes).from_address(address)
    memory.owner = owner  # type: ignore[attr-defined]  # ctypes instances take attributes
    return np.frombuffer(memoryview(memory).cast("B"), dtype=dtype)


#: The attribute of a tensor :meth:`MindSporeAdapter._over` made: (the numpy array, its memory's
#: address), which _host_view returns while the tensor still lies over that memory, instead of
#: making a view again (shared-memory algorithms ask for many a call).
_MADE_OVER = "_compat_made_over"

#: The largest new tensor made from numpy rather than by mint.empty (MindSporeAdapter._allocate).
_HOST_ALLOCATION_MAX = 1 << 20

#: numpy's unsigned integers by width in bytes: copies move any dtype as these bits.
_BIT_DTYPES = {
    np.dtype(bits).itemsize: np.dtype(bits) for bits in (np.uint8, np.uint16, np.uint32, np.uint64)
}


def _elementwise(entry: dict[str, Any]) -> Callable[[ms.Tensor, ms.Tensor], ms.Tensor]:
    """The two-tensor function of a reduce_ops.toml entry: mindspore.ops' where the table names
    one (mint's has no CPU kernel there), else mint's."""
    if "mindspore_elementwise" in entry:
        function: Callable[[ms.Tensor, ms.Tensor], ms.Tensor] = getattr(
            ms.ops, entry["mindspore_elementwise"]
        )
        return function
    found: Callable[[ms.Tensor, ms.Tensor], ms.Tensor] = getattr(mint, entry["elementwise"])
    return found


class MindSporeTensors(Adapter):
    """The local half of :class:`~compat.adapters.mindspore.adapter.MindSporeAdapter`: tensor
    facts and operations, on CPU through numpy over the tensors' memory."""

    def __init__(self) -> None:
        super().__init__()
        self._dtype_names = {
            getattr(ms, entry["mindspore"]): name
            for name, entry in tables.lookup("dtypes", "dtypes").items()
            if hasattr(ms, entry.get("mindspore", ""))  # a release may lack one (float8)
        }
        # Looked up by id: MindSpore's dtypes are one object each (t.dtype is ms.float32), and an
        # id hashes faster than a dtype. The objects stay alive as _dtype_names' keys, so no
        # other object can take their ids.
        self._dtype_names_by_id = {id(dtype): name for dtype, name in self._dtype_names.items()}
        #: bytes an element, by dtype name: dense_facts' size from the shape it reads
        self._dtype_bytes = tables.dtype_bytes()
        ops = tables.lookup("reduce_ops", "ops")
        self._elementwise = {ReduceOp(value): _elementwise(entry) for value, entry in ops.items()}
        self._numpy_ops = {
            ReduceOp(value): numpy_elementwise(entry) for value, entry in ops.items()
        }
        self._numpy_dtypes = {
            getattr(ms, entry["mindspore"]): np.dtype(entry["numpy"])
            for entry in tables.lookup("dtypes", "dtypes").values()
            if "mindspore" in entry and "numpy" in entry
        }
        #: the real dtype of each complex one (dtypes.toml's ``real``), as_real's
        dtypes = tables.lookup("dtypes", "dtypes")
        self._real_dtypes = {
            getattr(ms, entry["mindspore"]): getattr(ms, dtypes[entry["real"]]["mindspore"])
            for entry in dtypes.values()
            if "real" in entry
        }
        # Before init (compat.comm needs none): the device target MindSpore has now.
        self._on_cpu = ms.get_context("device_target") == "CPU"
        self._target = "CPU"  # the backend's device target, and this rank's device: see init
        self._home = "CPU"

    # -- local tensor facts and operations ------------------------------------------------
    def shape(self, tensor: ms.Tensor) -> tuple[int, ...]:
        return tuple(shape_of(tensor))

    def dtype(self, tensor: ms.Tensor) -> str:
        # Called several times per collective: the fallback string is built only when needed.
        dtype = dtype_of(tensor)
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
        return self._allocate(tuple(shape), dtype_of(like))

    def assign(self, dst: ms.Tensor, src: ms.Tensor) -> None:
        # MindSpore 2.10's CPU InplaceCopy refuses a view that ends before its storage does
        # ("an unexpected kernel has been launched"): mint.cat of one tensor makes a dense one.
        dst.copy_(mint.cat([src]))

    def zeros(self, shape: Sequence[int], like: ms.Tensor) -> ms.Tensor:
        return mint.zeros(tuple(shape), dtype=dtype_of(like))

    def _allocate(self, shape: tuple[int, ...], dtype: Any) -> ms.Tensor:
        """A new tensor of MindSpore's own. mint.empty is an operation queued on the PyNative
        pipeline: the first read of its storage, or a sync, then waits for the queue. On CPU, up
        to _HOST_ALLOCATION_MAX bytes (above it the copy's page faults cost more), a tensor made
        from an uninitialised numpy array is faster (MindSpore copies it into memory of its own,
        which its queue keeps alive like any)."""
        numpy_dtype = self._from_numpy_as(shape, dtype)
        if numpy_dtype is None or math.prod(shape) * numpy_dtype.itemsize > _HOST_ALLOCATION_MAX:
            return mint.empty(shape, dtype=dtype)
        return ms.Tensor(np.empty(shape, numpy_dtype))

    def _from_numpy_as(self, shape: tuple[int, ...], dtype: Any) -> np.dtype[Any] | None:
        """``dtype``'s numpy spelling where a new tensor of ``shape`` may be made from numpy: on
        CPU, not empty (MCCL fails an empty all_reduce over numpy's memory), of a dtype numpy
        has; else None (mint.empty makes it)."""
        return self._numpy_dtypes.get(dtype) if self._on_cpu and 0 not in shape else None

    def dense_dtype(self, tensor: ms.Tensor) -> str | None:
        nbytes = _nbytes_of(tensor)  # read once: not empty, and as large as the storage
        if not nbytes or not self.on_home(tensor) or not _is_contiguous(tensor):
            return None
        return self.dtype(tensor) if tensor.untyped_storage().nbytes() == nbytes else None

    def dense_facts(self, tensor: ms.Tensor) -> TensorFacts | None:
        # dense_dtype and shape in one frame, each fact read once (the reads are most of a
        # collective's own work); the size is the shape's product times an element's bytes,
        # not a read of its own.
        shape = tuple(shape_of(tensor))
        name = self._dtype_names_by_id.get(id(dtype_of(tensor)))
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
        # storage offset of 0 (a view lies inside its storage), so the offset is not read.
        return _is_contiguous(tensor) and tensor.untyped_storage().nbytes() == _nbytes_of(tensor)

    def as_bytes(self, tensor: ms.Tensor) -> ms.Tensor:
        return tensor.view(ms.uint8)

    def as_real(self, tensor: ms.Tensor) -> ms.Tensor:
        # A tensor over the same memory, made from numpy's real view of it: MindSpore's own
        # Tensor.view(float32) of a complex64 tensor keeps the complex itemsize (its nbytes
        # doubled: MindSpore 2.10.0), and ops.view_as_real copies.
        array = self._host_view(tensor)
        if array is None or not array.flags.c_contiguous:
            raise UnsupportedError(
                f"tensor: a complex tensor is viewed as real numbers in host memory only; got "
                f"one on {self.device(tensor)}"
            )
        real = self._real_dtypes[tensor.dtype]
        flat = array.reshape(-1).view(self._numpy_dtypes[real])
        return self._over(flat.reshape((*array.shape, 2)), real)

    def clone(self, tensor: ms.Tensor) -> ms.Tensor:
        # A new tensor plus copy_, several times faster than Tensor.copy() of a view on CPU;
        # mint.clone has no CPU kernel.
        staged = self._allocate(tuple(shape_of(tensor)), dtype_of(tensor))
        self.copy_(staged, tensor)
        return staged

    def numel(self, tensor: ms.Tensor) -> int:
        count: int = tensor.size
        return count

    def nbytes(self, tensor: ms.Tensor) -> int:
        # TensorPy's getter, not the property over it: a choice by size reads it on every call.
        size: int = _nbytes_of(tensor)
        return size

    def split(self, tensor: ms.Tensor, sizes: Sequence[int], dim: int = 0) -> list[ms.Tensor]:
        # Basic slicing makes the same views as mint.split without waiting on the PyNative
        # queue, as mint.split does on CPU.
        leading = (slice(None),) * dim
        starts = [sum(sizes[:index]) for index in range(len(sizes))]
        return [
            tensor[(*leading, slice(start, start + size))]
            for start, size in zip(starts, sizes, strict=True)
        ]

    def movedim(self, tensor: ms.Tensor, source: int, destination: int) -> ms.Tensor:
        return tensor.movedim(source, destination)  # a view (writes through it land)

    def narrow(self, tensor: ms.Tensor, start: int, length: int) -> ms.Tensor:
        return tensor[(slice(start, start + length),)]  # one slice (see split)

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
        # Tensor.move_to to the tensor's own device returns a tensor sharing its memory (on
        # CPU), so a copy on the same device is Tensor.copy().
        where = str(getattr(tensor, "device", self.device(tensor))).split(":")[0]
        if where == device:
            return tensor.copy()
        return tensor.move_to(device)

    def synchronize(self) -> None:
        _pynative_executor.sync()

    def copy_(self, dst: ms.Tensor, src: ms.Tensor) -> None:
        # On CPU numpy copies the memory at once, for any layout and dtype (as bits), without
        # the queue's wait a slice assignment costs, which would also stop `dst` receiving
        # broadcast results (see compat.adapters.mindspore).
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
        # Tensor.copy_ on a view and `dst[...] = src` on a view from mint.split do not (on
        # CPU). A 0-d tensor takes no `[:]`: a 0-d view (indexing keeps its parent) takes
        # `[...]`, in bfloat16 too (on a 0-d int16 view of it, `[...]` does not write through);
        # a 0-d tensor of its own takes copy_, since `[...]` makes it share `src`'s memory, so
        # that a later in-place write to `dst` changes `src` (all seen on CPU).
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
        # mint.minimum/maximum have no bfloat16 kernel on CPU; in float32 they are
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

    def in_host_memory(self, tensor: ms.Tensor) -> bool:
        return self._on_cpu

    def host_tensor(
        self, memory: memoryview, offset: int, numel: int, like: ms.Tensor
    ) -> ms.Tensor:
        dtype = self._numpy_dtypes.get(like.dtype) or _BIT_DTYPES[like.itemsize]
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
        return start, start + element_extent(tuple(shape_of(tensor)), strides) * tensor.itemsize

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
            dtype = self._numpy_dtypes.get(dtype_of(tensor))
        if dtype is None:
            return None
        shape = tuple(shape_of(tensor))
        made = getattr(tensor, _MADE_OVER, None)
        if made is not None:
            array, address = made
            _pynative_executor.sync()
            # While the tensor still lies over the array it was made over (assign_value moves a
            # tensor's memory): that array, without the cost of making one again.
            if tensor.data_ptr() == address and _is_contiguous(tensor) and shape == array.shape:
                return array if array.dtype == dtype else array.view(dtype)
        if 0 in shape:
            return np.empty(shape, dtype)
        _pynative_executor.sync()
        address = tensor.data_ptr()
        if not address:
            return None
        if _is_contiguous(tensor):  # numpy's as_strided costs more a call
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

    def shares_memory(self, pieces: Sequence[ms.Tensor], whole: ms.Tensor) -> bool:
        return False

    def one_buffer(
        self, tensors: Sequence[ms.Tensor]
    ) -> tuple[ms.Tensor, Callable[[], None]] | None:
        # On CPU through numpy views of the tensors, one each: several times cheaper than the
        # default's tensors over their memory (flat views, the copy's parts) and their copies.
        dtype = dtype_of(tensors[0])
        bits = dtype not in self._numpy_dtypes
        arrays = []
        for tensor in tensors:
            array = self._host_view(tensor, bits=bits) if dtype_of(tensor) == dtype else None
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
            return self._over(whole, dtype), nothing
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
        # the pieces' own facts, cheaper than a numpy view of each piece.
        first = pieces[0]
        if len(pieces) == 1:
            return first if self.is_dense(first) else None
        if not self._on_cpu:
            return None
        dtype, shape = dtype_of(first), tuple(shape_of(first))
        if not shape:
            return None
        trailing, rows = shape[1:], 0
        _pynative_executor.sync()  # the pieces' memory exists once the ops that made them ran
        start = address = first.data_ptr()
        for piece in pieces:
            shape = tuple(shape_of(piece))
            if (
                not shape
                or shape[1:] != trailing
                or dtype_of(piece) != dtype
                or not _is_contiguous(piece)
                or piece.data_ptr() != address
            ):
                return None
            address += _nbytes_of(piece)
            rows += shape[0]
        if not start or address == start:
            return None
        numpy_dtype = self._numpy_dtypes.get(dtype) or _BIT_DTYPES[first.itemsize]
        whole = _array_at(start, address - start, numpy_dtype, tuple(pieces))
        whole = whole.reshape((rows, *trailing))
        return self._over(whole, dtype)

    def parts(self, tensor: ms.Tensor, sizes: Sequence[int]) -> list[ms.Tensor]:
        # On CPU, tensors over the parts' memory made from numpy: a view made by slicing is queued
        # on the PyNative executor, and the first access to its memory waits for the queue.
        if len(sizes) == 1:
            return [tensor]  # one part is the tensor itself, any layout: nothing to queue
        dtype = dtype_of(tensor)
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
        dtype = dtype_of(tensor)
        array = self._host_view(tensor, bits=dtype not in self._numpy_dtypes)
        if array is None or not array.flags.c_contiguous:
            return None
        return self._over(array.reshape(-1), dtype)

    def shaped_view(self, tensor: ms.Tensor, shape: Sequence[int]) -> ms.Tensor | None:
        # On CPU, a tensor over the same memory, as flat_view makes.
        dtype = dtype_of(tensor)
        array = self._host_view(tensor, bits=dtype not in self._numpy_dtypes)
        if array is None or not array.flags.c_contiguous:
            return None
        return self._over(array.reshape(tuple(shape)), dtype)

    def _over(self, array: Array, dtype: Any) -> ms.Tensor:
        """A tensor of ``dtype`` over ``array``'s memory: ``array`` (C-contiguous: every caller's
        is) in its numpy spelling, or as bits where numpy has none (bfloat16: the bits viewed as
        the dtype, same memory)."""
        tensor = from_c_contiguous(array)
        address = tensor.data_ptr()
        if dtype not in self._numpy_dtypes:
            tensor = tensor.view(dtype)
        setattr(tensor, _MADE_OVER, (array, address))
        return tensor
