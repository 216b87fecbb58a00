"""Single-process device communication: ``torch.cuda.comm`` for any device.

scatter, gather, broadcast, broadcast_coalesced, reduce_add and reduce_add_coalesced: the same
functions and rules as ``torch.cuda.comm`` (exactly one of ``devices`` and ``out``; ``chunk_sizes``
matches ``devices`` and sums to the size of ``dim``; with ``out``, the chunk sizes come from the out
tensors; broadcast_coalesced's tensors are on ``devices[0]``; reduce_add's inputs share shape and
dtype), for torch tensors on CPU or CUDA and for MindSpore tensors. When every device is a CUDA
device, the call is torch.cuda.comm's own (after compat's checks); otherwise the copies and sums are
made by the framework's adapter.

The results match torch.cuda.comm's exactly, on every device and on both paths: the same
containers, and each result is the input itself, a view of an input, or a new tensor just where
torch.cuda.comm's is (torch 2.13: ``torch/csrc/cuda/comm.cpp`` and ``torch/nn/parallel/comm.py``).
A device is an input's own when the input is on it, CPU included (``"cpu"`` for a CPU tensor, as
``"cuda:0"`` for a cuda:0 tensor):

- scatter: the chunk for the input's own device is a view of the input (``Tensor.split``), the
  others are copies; with ``out``, ``out``'s tensors, written.
- gather: a new tensor, also of one tensor on ``destination``; with ``out``, ``out``.
- broadcast: the input itself for each time its own device is listed, a new copy for any other;
  with ``out``, ``out``'s tensors. A list (torch.cuda.comm's docstring says tuple; it returns a
  list).
- broadcast_coalesced: the inputs themselves for ``devices[0]``, copies for another device. For
  ``devices[0]`` listed again, what torch.cuda.comm's flat buffers give: a view of the input if it
  is contiguous, not empty and alone in its buffer (``buffer_size`` bytes of one dtype), else one
  copy that every such list views.
- reduce_add: the input itself for one input on ``destination``, else a new tensor.
- reduce_add_coalesced: of one list on ``destination``, a view of each input that is contiguous,
  not empty and alone in its buffer, else a new tensor; of several lists, new tensors.

MindSpore tensors follow the same rules, with no difference: the input itself is returned as is,
and a view is a MindSpore view of the input (basic slicing, ``Tensor.view``) over the input's memory
(``Tensor.data_ptr()``), also where a slice of all of the input would be the input itself. Which
in-place operations write through a view is MindSpore's behaviour for any view (slice assignment
does).

Differences from torch.cuda.comm, all deliberate:

- CPU devices (``"cpu"``, ``torch.device("cpu")``; MindSpore's ``"CPU"``, any case) are accepted.
- Every rule violation is a ``ValueError`` (``TypeError`` for a wrong type) naming the parameter,
  raised before anything is written; torch.cuda.comm raises ``RuntimeError``. Tensors of another
  dtype than the input are refused instead of being cast (reduce_add's inputs too: none is
  promoted).
- reduce_add's ``destination`` may be any device (torch.cuda.comm requires the device of one of
  the inputs); a sum torch.cuda.comm cannot make there is made by the adapter, a new tensor.
- ``buffer_size`` (the coalesced functions) must be an int > 0. It sets how many bytes
  torch.cuda.comm moves at once: the values of the results never depend on it, which of them are
  views does (as above).

No comm function needs :func:`compat.init`: they are local to the process. Importing this module
imports no framework; the adapter of a tensor's framework is loaded on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

from compat.base import tables
from compat.base.adapter import Adapter
from compat.base.types import ReduceOp
from compat.core import versions
from compat.core.dispatch import framework_of, load_adapter
from compat.core.values import check_int, check_sizes, describe

Tensor = Any

__all__ = [
    "broadcast",
    "broadcast_coalesced",
    "gather",
    "reduce_add",
    "reduce_add_coalesced",
    "scatter",
]


# -- validation --------------------------------------------------------------------------------


@cache
def _adapter(framework: str) -> Adapter:
    adapter = load_adapter(framework)
    versions.warn_if_untested(framework)
    return adapter


def _tensor_types() -> str:
    spellings = [entry["tensor"].replace(":", ".") for entry in tables.load("frameworks").values()]
    return " or ".join(spellings)


def _check_tensor(value: object, param: str) -> tuple[str, Adapter]:
    framework = framework_of(value)
    if framework is None:
        raise TypeError(f"{param}: expected a tensor ({_tensor_types()}); got {describe(value)}")
    return framework, _adapter(framework)


def _check_framework(value: object, param: str, framework: str, of: str) -> None:
    """``value`` is a tensor of ``framework`` (the ``of`` tensor's)."""
    if framework_of(value) != framework:
        raise TypeError(f"{param}: expected a {framework} tensor (as {of}); got {describe(value)}")


def _check_like(
    value: object, param: str, framework: str, adapter: Adapter, dtype: str, of: str
) -> None:
    """``value`` is a tensor of ``framework`` and ``dtype`` (the ``of`` tensor's)."""
    _check_framework(value, param, framework, of)
    actual = adapter.dtype(value)
    if actual != dtype:
        raise TypeError(
            f"{param}: expected dtype {dtype} (the dtype of {of}; compat does not cast); "
            f"got {actual}"
        )


def _check_sequence(value: object, param: str, what: str) -> list[Any]:
    """``value`` as a list: any iterable but a string or a tensor (which iterates its rows)."""
    if (
        isinstance(value, (str, bytes))
        or framework_of(value) is not None
        or not isinstance(value, Iterable)
    ):
        raise TypeError(f"{param}: expected a list of {what}; got {describe(value)}")
    return list(value)


def _check_dim(dim: object, shape: tuple[int, ...], of: str) -> int:
    dim = check_int(dim, "dim")
    ndim = len(shape)
    if ndim == 0:
        raise ValueError(f"dim: expected a dimension of {of}, which is 0-d (has none); got {dim}")
    if not -ndim <= dim < ndim:
        raise ValueError(
            f"dim: expected an int in [{-ndim}, {ndim - 1}] ({of} has {ndim} dimensions, shape "
            f"{shape}); got {dim}"
        )
    return dim % ndim


def _check_device(value: object, param: str, framework: str, adapter: Adapter) -> str:
    available = adapter.available_devices()
    name = adapter.canonical_device(value)
    if name is None and (isinstance(value, bool) or not isinstance(value, (str, int))):
        raise TypeError(
            f"{param}: expected a {framework} device (a name such as {available[0]!r}); "
            f"got {describe(value)}"
        )
    if name not in available:
        means = f" ({name})" if name is not None and name != value else ""
        raise ValueError(
            f"{param}: expected one of this process's {framework} devices {available}; "
            f"got {value!r}{means}"
        )
    return name


def _check_some(items: list[Any], param: str, what: str) -> list[Any]:
    """``items``, which must not be empty (``what``: one of them, in words)."""
    if not items:
        raise ValueError(f"{param}: expected at least one {what}; got an empty list")
    return items


def _names(param: str, count: int) -> list[str]:
    return [f"{param}[{index}]" for index in range(count)]


def _check_devices(
    value: object, framework: str, adapter: Adapter, *, allow_empty: bool = False
) -> list[str]:
    items = _check_sequence(value, "devices", "devices")
    if not allow_empty:
        _check_some(items, "devices", "device")
    return [
        _check_device(item, f"devices[{index}]", framework, adapter)
        for index, item in enumerate(items)
    ]


def _exactly_one(devices: object, out: object) -> None:
    if (devices is None) == (out is None):
        given = "neither" if devices is None else f"both (devices={devices!r}, out=...)"
        raise ValueError(f"devices, out: expected exactly one of devices and out; got {given}")


def _check_chunk_sizes(value: object, parts: int, total: int, dim: int) -> list[int]:
    """scatter's chunk sizes: ``torch.chunk``'s split if None, else one per device."""
    if value is None:
        return chunk_split(total, parts)
    items = _check_sequence(value, "chunk_sizes", "ints")
    return check_sizes(
        items,
        "chunk_sizes",
        parts,
        total,
        per="device, as devices",
        of=f"the size of dim {dim} of tensor",
    )


def chunk_split(total: int, parts: int) -> list[int]:
    """The sizes ``torch.chunk`` splits ``total`` into with ``parts`` chunks.

    Each chunk has ``ceil(total / parts)`` elements but the last, so there can be fewer chunks than
    ``parts`` (5 in 4 parts: ``[2, 2, 1]``), as torch.cuda.comm.scatter gives; an empty dim gives
    ``parts`` empty chunks.
    """
    if total == 0:
        return [0] * parts
    step = -(-total // parts)
    return [step] * (total // step) + ([total % step] if total % step else [])


def _shape_except(shape: Sequence[int], dim: int) -> str:
    return "(" + ", ".join("*" if i == dim else str(size) for i, size in enumerate(shape)) + ")"


def _check_pieces(
    pieces: list[Tensor], param: str, shape: tuple[int, ...], dim: int, adapter: Adapter, of: str
) -> list[int]:
    """Each piece has ``shape`` except on ``dim``; return their sizes on ``dim``."""
    sizes = []
    for index, piece in enumerate(pieces):
        actual = adapter.shape(piece)
        if len(actual) != len(shape) or any(
            a != s for i, (a, s) in enumerate(zip(actual, shape, strict=True)) if i != dim
        ):
            raise ValueError(
                f"{param}[{index}]: expected shape {_shape_except(shape, dim)} ({of}'s shape "
                f"except on dim {dim}); got {actual}"
            )
        sizes.append(actual[dim])
    return sizes


def _native_comm(framework: str, devices: Sequence[str]) -> Any | None:
    """The framework's own device comm module (``device_comm`` in frameworks.toml: torch.cuda.comm)
    if it can take the call, every device being of its type; else None."""
    entry = tables.lookup("frameworks", framework).get("device_comm")
    if entry is None or not devices or any(d.split(":")[0] != entry["device"] for d in devices):
        return None
    return importlib.import_module(entry["module"])


def _check_streams(streams: object, devices: Sequence[str]) -> None:
    if streams is not None:
        raise ValueError(
            f"streams: expected None (streams are CUDA's, and the devices are {list(devices)}); "
            f"got {describe(streams)}"
        )


def _check_destination(destination: object, framework: str, adapter: Adapter) -> str | None:
    """A result's device: -1 is CPU (torch.cuda.comm's convention); None stays None (the
    default, which depends on the inputs' devices)."""
    if isinstance(destination, int) and not isinstance(destination, bool) and destination == -1:
        return adapter.canonical_device("cpu")
    if destination is None:
        return None
    return _check_device(destination, "destination", framework, adapter)


def _default_destination(adapter: Adapter, sources: Sequence[str]) -> str:
    """Where a result goes without a destination, off torch.cuda.comm: the inputs' device if they
    share one, else CPU."""
    if len(set(sources)) == 1:
        return sources[0]
    return str(adapter.canonical_device("cpu"))


def _check_buffer_size(value: object) -> int:
    size = check_int(value, "buffer_size")
    if size <= 0:
        raise ValueError(
            f"buffer_size: expected an int > 0 (the bytes torch.cuda.comm copies at once); "
            f"got {size}"
        )
    return size


def _check_matching(group: Sequence[Tensor], names: Sequence[str], adapter: Adapter) -> None:
    """The tensors of ``group`` (``names`` theirs: the summands of one sum, broadcast's input and
    ``out``) have ``group[0]``'s framework, dtype and shape."""
    framework = str(framework_of(group[0]))
    dtype, shape = adapter.dtype(group[0]), adapter.shape(group[0])
    for item, name in zip(group[1:], names[1:], strict=True):
        _check_like(item, name, framework, adapter, dtype, names[0])
        actual = adapter.shape(item)
        if actual != shape:
            raise ValueError(f"{name}: expected shape {shape} ({names[0]}'s shape); got {actual}")


def _check_on(
    items: Sequence[Tensor], param: str, device: str, adapter: Adapter, expected: str
) -> None:
    """Each of ``items`` (``param``'s) is on ``device`` (``expected`` says which and why)."""
    for index, item in enumerate(items):
        where = adapter.device(item)
        if where != device:
            raise ValueError(
                f"{param}[{index}]: expected a tensor on {expected}; got one on {where}"
            )


def _check_scatter_out(
    out: object,
    chunk_sizes: object,
    tensor: Tensor,
    dim: int,
    framework: str,
    adapter: Adapter,
) -> tuple[list[Tensor], list[int], list[str]]:
    """scatter's ``out``, the chunk sizes it gives (its sizes on ``dim``) and its devices."""
    if chunk_sizes is not None:
        raise ValueError(
            "chunk_sizes: expected None when out is given (the chunk sizes are out's sizes "
            f"on dim {dim}); got {describe(chunk_sizes)}"
        )
    outputs = _check_some(_check_sequence(out, "out", "tensors"), "out", "tensor")
    dtype, shape = adapter.dtype(tensor), adapter.shape(tensor)
    for index, item in enumerate(outputs):
        _check_like(item, f"out[{index}]", framework, adapter, dtype, "tensor")
    sizes = _check_pieces(outputs, "out", shape, dim, adapter, "tensor")
    if sum(sizes) != shape[dim]:
        raise ValueError(
            f"out: expected sizes on dim {dim} summing to {shape[dim]} (the size of dim {dim} "
            f"of tensor); got {sizes} (sum {sum(sizes)})"
        )
    return outputs, sizes, [adapter.device(item) for item in outputs]


def _check_gather_out(
    out: Tensor,
    destination: object,
    expected: tuple[int, ...],
    dim: int,
    framework: str,
    adapter: Adapter,
    dtype: str,
) -> None:
    """gather's ``out``: ``expected``'s shape, and no ``destination`` beside it."""
    if destination is not None:
        raise ValueError(
            "destination: expected None when out is given (the result goes to out's "
            f"device); got {destination!r}"
        )
    _check_like(out, "out", framework, adapter, dtype, "tensors")
    actual = adapter.shape(out)
    if actual != expected:
        raise ValueError(
            f"out: expected shape {expected} (tensors[0]'s shape with the sum of the sizes on "
            f"dim {dim}); got {actual}"
        )


def _check_lists(inputs: object) -> list[list[Tensor]]:
    """reduce_add_coalesced's ``inputs``: lists of tensors, all as long as the first."""
    lists = [
        _check_sequence(item, f"inputs[{index}]", "tensors")
        for index, item in enumerate(_check_sequence(inputs, "inputs", "lists of tensors"))
    ]
    for index, row in enumerate(lists[1:], start=1):
        if len(row) != len(lists[0]):
            raise ValueError(
                f"inputs[{index}]: expected {len(lists[0])} tensors (as inputs[0]); got {len(row)}"
            )
    return lists


def _sum_plan(
    destination: object, framework: str, adapter: Adapter, sources: Sequence[str]
) -> tuple[Any | None, str]:
    """The device a sum of tensors on ``sources`` goes to, and torch.cuda.comm if it can make
    it there: every input on CUDA, the destination one of their devices (its rule)."""
    target = _check_destination(destination, framework, adapter)
    native = _native_comm(framework, sources)
    if target is None and native is not None:
        # torch.cuda.comm's default, the current device: what the bare device type names.
        target = adapter.canonical_device(sources[0].split(":")[0])
    if target is None:
        target = _default_destination(adapter, sources)
    if target not in sources:
        native = None
    return native, target


def _sum(adapter: Adapter, group: Sequence[Tensor], target: str) -> Tensor:
    """The element-wise sum of ``group`` on ``target``, as a new tensor."""
    if len(group) == 1:
        return _copy_to(adapter, group[0], target)
    pieces = [
        item if adapter.device(item) == target else adapter.to_device(item, target)
        for item in group
    ]
    result = adapter.empty(adapter.shape(group[0]), pieces[0])
    if 0 not in adapter.shape(result):  # nothing to add (see _copy)
        adapter.reduce_into(result, pieces, ReduceOp.SUM)
    return result


def _copy_to(adapter: Adapter, tensor: Tensor, target: str) -> Tensor:
    """A new tensor with ``tensor``'s values on ``target``."""
    copy = adapter.to_device(tensor, target)
    # MindSpore's Tensor.copy() of an empty tensor returns that tensor itself, not a copy.
    return adapter.empty(adapter.shape(tensor), copy) if copy is tensor else copy


def _copy(adapter: Adapter, dst: Tensor, src: Tensor) -> None:
    # Nothing to write into an empty tensor; MindSpore's CPU copy fails on some empty shapes
    # ("memcpy_s error" for a (3, 0) tensor).
    if 0 in adapter.shape(dst):
        return
    adapter.copy_(dst, src)


def _finished(adapter: Adapter, results: Sequence[Tensor]) -> tuple[Tensor, ...]:
    """``results`` once the adapter's copies and sums into them have completed."""
    adapter.synchronize()
    return tuple(results)


def _written(adapter: Adapter, outputs: list[Tensor], sources: Sequence[Tensor]) -> list[Tensor]:
    """``outputs``, each with its source's values copied in (the ``out=`` forms)."""
    for item, source in zip(outputs, sources, strict=True):
        _copy(adapter, item, source)
    return outputs


def _scattered(
    adapter: Adapter,
    tensor: Tensor,
    chunks: list[Tensor],
    targets: list[str],
    outputs: list[Tensor] | None,
) -> tuple[Tensor, ...]:
    """scatter by the adapter: ``chunks`` copied into ``outputs``, or as comm.cpp scatter:
    chunks[i] stays the view tensor.chunk/split_with_sizes gives when devices[i] is the tensor's
    own device, else is moved there. The default split can give fewer chunks than devices: the
    last devices get none."""
    if outputs is not None:
        return _finished(adapter, _written(adapter, outputs, chunks))
    own = adapter.device(tensor)
    placed = [
        # A MindSpore slice of all of a tensor is the tensor itself: a view instead.
        (_view(adapter, chunk) if chunk is tensor else chunk)
        if target == own
        else _copy_to(adapter, chunk, target)
        for chunk, target in zip(chunks, targets, strict=False)
    ]
    return _finished(adapter, placed)


def _gathered(
    adapter: Adapter,
    items: list[Tensor],
    sources: list[str],
    dim: int,
    target: str | None,
    out: Tensor | None,
) -> Tensor:
    """gather by the adapter: ``items`` joined on ``target`` (or its default), or into ``out``."""
    if out is not None:
        target = adapter.device(out)
    elif target is None:
        target = _default_destination(adapter, sources)
    pieces = [
        item if source == target else adapter.to_device(item, str(target))
        for item, source in zip(items, sources, strict=True)
    ]
    result = adapter.cat(pieces, dim)  # new, as comm.cpp gather's at::empty
    if out is not None:
        return _finished(adapter, _written(adapter, [out], [result]))[0]
    return _finished(adapter, [result])[0]


# -- torch.cuda.comm's flat buffers ------------------------------------------------------------
#
# The coalesced functions flatten each bucket of same-dtype tensors into one buffer
# (at::flatten_dense_tensors: ``t.contiguous().view(-1)`` for a bucket of one tensor, no copy if
# ``t`` is contiguous; ``at::cat`` for more) and return views of the buffer
# (at::unflatten_dense_tensors: ``flat.narrow(...).view(sizes)``, a new ``at::empty`` for an
# empty tensor). A buffer that is not copied (broadcast_coalesced's to devices[0] again, reduce_add
# of one list) so gives views of an input alone in its bucket. The Adapter has no view of a
# whole tensor or contiguity test: ``Tensor.view`` and ``Tensor.is_contiguous`` are the same
# methods on torch and MindSpore.


def _broadcast_buckets(adapter: Adapter, tensors: Sequence[Tensor], limit: int) -> list[list[int]]:
    """The indices of broadcast_coalesced's buckets: torch::utils::take_tensors
    (torch/csrc/utils/tensor_flatten.cpp) without ``fine_grained``. Tensors are grouped by dtype,
    and a group is closed once its bytes reach ``limit`` (the tensor that reaches it included)."""
    buckets: list[list[int]] = []
    groups: dict[str, tuple[list[int], int]] = {}
    for index, tensor in enumerate(tensors):
        key = adapter.dtype(tensor)
        members, size = groups.get(key, ([], 0))
        members.append(index)
        size += adapter.nbytes(tensor)
        if size >= limit:
            buckets.append(members)
            members, size = [], 0
        groups[key] = (members, size)
    return buckets + [members for members, _ in groups.values() if members]


def _reduce_buckets(adapter: Adapter, tensors: Sequence[Tensor], limit: int) -> list[list[int]]:
    """The indices of reduce_add_coalesced's buckets: torch._utils._take_tensors. Tensors are
    grouped by dtype, and a group is closed before a tensor that would take it past ``limit``
    (unless the group has no bytes yet)."""
    buckets: list[list[int]] = []
    groups: dict[str, tuple[list[int], int]] = {}
    for index, tensor in enumerate(tensors):
        key = adapter.dtype(tensor)
        members, size = groups.get(key, ([], 0))
        nbytes = adapter.nbytes(tensor)
        if size + nbytes > limit and size > 0:
            buckets.append(members)
            members, size = [], 0
        members.append(index)
        groups[key] = (members, size + nbytes)
    return buckets + [members for members, _ in groups.values() if members]


def _flat_views(
    adapter: Adapter, tensors: Sequence[Tensor], buckets: list[list[int]]
) -> list[bool]:
    """For each of ``tensors``: whether the flat buffer of its bucket is a view of it (it is
    alone in its bucket, contiguous and not empty), so that the results are views of it."""
    alone = {bucket[0] for bucket in buckets if len(bucket) == 1}
    return [
        index in alone and adapter.numel(tensor) > 0 and bool(tensor.is_contiguous())
        for index, tensor in enumerate(tensors)
    ]


def _view(adapter: Adapter, tensor: Tensor) -> Tensor:
    """A new tensor object over all of ``tensor``'s memory (no copy)."""
    return tensor.view(adapter.shape(tensor))


def _again(
    adapter: Adapter, items: list[Tensor], home: str, buckets: list[list[int]]
) -> Callable[[int, Tensor], Tensor]:
    """broadcast_coalesced's result for ``home`` (devices[0]) listed again: a view of the flat
    buffer, which is a view of the tensor when the buffer is the tensor (see _flat_views), else
    of one copy that every such list shares."""
    views = _flat_views(adapter, items, buckets)
    shared: dict[int, Tensor] = {}

    def again(index: int, item: Tensor) -> Tensor:
        if not adapter.numel(item):
            return adapter.empty(adapter.shape(item), item)  # unflatten: a new empty tensor
        if index not in shared:
            shared[index] = item if views[index] else _copy_to(adapter, item, home)
        return _view(adapter, shared[index])

    return again


# -- the API -----------------------------------------------------------------------------------


def scatter(
    tensor: Tensor,
    devices: Iterable[Any] | None = None,
    chunk_sizes: Iterable[int] | None = None,
    dim: int = 0,
    streams: Iterable[Any] | None = None,
    *,
    out: Sequence[Tensor] | None = None,
) -> tuple[Tensor, ...]:
    """Split ``tensor`` along ``dim`` and put chunk i on ``devices[i]`` (or into ``out[i]``).

    Parameters
    ----------
    tensor
        A torch or MindSpore tensor, on any device.
    devices
        The target devices: ``"cpu"``, ``torch.device``, an int (a CUDA index, as torch.cuda.comm)
        on torch; ``"CPU"`` (any case) or the current device target on MindSpore. Exactly one of
        ``devices`` and ``out``.
    chunk_sizes
        The size of each chunk on ``dim``: one per device, summing to the size of ``dim``. Default:
        ``torch.chunk``'s split (``ceil(size / len(devices))`` per chunk), which gives fewer chunks
        than devices when ``dim`` is small: the result then has fewer entries, as torch.cuda.comm's.
        Not allowed with ``out``.
    dim
        The dimension to split.
    streams
        CUDA streams, passed to torch.cuda.comm; must be None for other devices.
    out
        Tensors to write the chunks into (keyword only): the same dtype as ``tensor``, its shape
        except on ``dim``, where their sizes sum to the size of ``dim`` and are the chunk sizes.

    Returns
    -------
    tuple
        One tensor per chunk, as torch.cuda.comm's: for ``tensor``'s own device the chunk itself,
        a view of ``tensor`` (writes to it write ``tensor``); for another device a new tensor, a
        copy there. With ``out``: ``out``'s tensors themselves, the chunks copied into them (also
        where one is a view of ``tensor``).

    Examples
    --------
    torch on CPU (every ``"cpu"`` chunk is a view, CPU being the tensor's own device)::

        >>> x = torch.arange(6.0)
        >>> a, b = compat.comm.scatter(x, ["cpu", "cpu"])
        >>> b
        tensor([3., 4., 5.])
        >>> b.data_ptr() == x[3:].data_ptr()
        True

    torch on CUDA (torch.cuda.comm's call)::

        >>> a, b = compat.comm.scatter(x.cuda(0), ["cuda:0", "cuda:1"])  # a: a view; b: a copy

    MindSpore on CPU (views of the input's memory)::

        >>> a, b = compat.comm.scatter(ms.Tensor([0.0, 1.0, 2.0, 3.0]), ["CPU", "CPU"])
    """

    framework, adapter = _check_tensor(tensor, "tensor")
    shape = adapter.shape(tensor)
    _exactly_one(devices, out)
    dim = _check_dim(dim, shape, "tensor")
    if out is None:
        targets = _check_devices(devices, framework, adapter)
        sizes = _check_chunk_sizes(chunk_sizes, len(targets), shape[dim], dim)
        outputs: list[Tensor] | None = None
    else:
        outputs, sizes, targets = _check_scatter_out(
            out, chunk_sizes, tensor, dim, framework, adapter
        )
    native = _native_comm(framework, targets)
    if native is not None:
        given = None if chunk_sizes is None else sizes
        places = targets if outputs is None else None
        return tuple(native.scatter(tensor, places, given, dim, streams, out=outputs))
    _check_streams(streams, targets)
    return _scattered(adapter, tensor, adapter.split(tensor, sizes, dim), targets, outputs)


def gather(
    tensors: Iterable[Tensor],
    dim: int = 0,
    destination: Any = None,
    *,
    out: Tensor | None = None,
) -> Tensor:
    """Concatenate ``tensors`` along ``dim`` on ``destination`` (or into ``out``).

    Parameters
    ----------
    tensors
        Tensors of one framework and dtype, with the same shape except on ``dim``.
    dim
        The dimension to concatenate on.
    destination
        The device of the result: a device as for :func:`scatter`, or -1 for CPU (torch.cuda.comm's
        convention). None: torch.cuda.comm's default (the current CUDA device) when every tensor is
        on CUDA; otherwise the tensors' device if they share one, else CPU. Not allowed with
        ``out``.
    out
        A tensor to write the result into (keyword only): the dtype of ``tensors``, their shape
        with the sum of their sizes on ``dim``.

    Returns
    -------
    tensor
        A new tensor on ``destination``, as torch.cuda.comm's (also of one tensor already there),
        or ``out`` itself.

    Examples
    --------
    torch on CPU::

        >>> compat.comm.gather([torch.tensor([1, 2]), torch.tensor([3])], destination="cpu")
        tensor([1, 2, 3])

    torch on CUDA (torch.cuda.comm's call; the result on the current device)::

        >>> whole = compat.comm.gather([a.cuda(0), b.cuda(1)])

    MindSpore on CPU::

        >>> compat.comm.gather([ms.Tensor([1, 2]), ms.Tensor([3])], destination="CPU")
        Tensor(shape=[3], dtype=Int64, value= [1, 2, 3])
    """

    items = _check_some(_check_sequence(tensors, "tensors", "tensors"), "tensors", "tensor")
    framework, adapter = _check_tensor(items[0], "tensors[0]")
    dtype = adapter.dtype(items[0])
    for index, item in enumerate(items[1:], start=1):
        _check_like(item, f"tensors[{index}]", framework, adapter, dtype, "tensors[0]")
    first = adapter.shape(items[0])
    dim = _check_dim(dim, first, "tensors[0]")
    sizes = _check_pieces(items, "tensors", first, dim, adapter, "tensors[0]")
    expected = tuple(sum(sizes) if i == dim else size for i, size in enumerate(first))
    sources = [adapter.device(item) for item in items]
    target: str | None = None  # None: torch.cuda.comm's default, the current CUDA device
    if out is not None:
        _check_gather_out(out, destination, expected, dim, framework, adapter, dtype)
    else:
        target = _check_destination(destination, framework, adapter)
    native = _native_comm(framework, sources)
    if native is not None:
        return native.gather(items, dim, target, out=out)
    return _gathered(adapter, items, sources, dim, target, out)


def broadcast(
    tensor: Tensor, devices: Iterable[Any] | None = None, *, out: Sequence[Tensor] | None = None
) -> tuple[Tensor, ...]:
    """Put ``tensor`` on each of ``devices`` (or copy it into each of ``out``).

    Parameters
    ----------
    tensor
        A torch or MindSpore tensor, on any device.
    devices
        The target devices, as for :func:`scatter` (an empty list gives an empty list, as
        torch.cuda.comm). Exactly one of ``devices`` and ``out``.
    out
        Tensors to copy into (keyword only): ``tensor``'s shape and dtype.

    Returns
    -------
    tuple
        A tuple, as torch.cuda.comm's docstring says and compat's API fixes (its binding gives a
        list): per device, ``tensor`` itself
        where the device is ``tensor``'s own (each time it is listed), else a new tensor, a copy
        there. With ``out``: ``out``'s tensors themselves, ``tensor`` copied into each.

    Examples
    --------
    torch on CPU (CPU is the tensor's own device)::

        >>> x = torch.tensor([1.0, 2.0])
        >>> [r is x for r in compat.comm.broadcast(x, ["cpu", "cpu"])]
        [True, True]

    torch on CUDA (torch.cuda.comm's call)::

        >>> same, copy = compat.comm.broadcast(x.cuda(0), ["cuda:0", "cuda:1"])  # same is the input

    MindSpore on CPU::

        >>> y = ms.Tensor([1.0, 2.0])
        >>> compat.comm.broadcast(y, ["CPU"])[0] is y
        True
    """

    framework, adapter = _check_tensor(tensor, "tensor")
    _exactly_one(devices, out)
    if out is None:
        targets = _check_devices(devices, framework, adapter, allow_empty=True)
        outputs: list[Tensor] = []
    else:
        outputs = _check_sequence(out, "out", "tensors")
        _check_matching([tensor, *outputs], ["tensor", *_names("out", len(outputs))], adapter)
        targets = [adapter.device(item) for item in outputs]
    if not targets:
        return ()
    native = _native_comm(framework, targets)
    if native is not None:
        if out is None:
            return tuple(native.broadcast(tensor, targets))
        return tuple(native.broadcast(tensor, out=outputs))
    if out is None:
        # comm.cpp broadcast: `tensor` itself for each device that is its own, else a new copy.
        own = adapter.device(tensor)
        result = [
            tensor if target == own else _copy_to(adapter, tensor, target) for target in targets
        ]
        return _finished(adapter, result)
    return _finished(adapter, _written(adapter, outputs, [tensor] * len(outputs)))


def broadcast_coalesced(
    tensors: Iterable[Tensor], devices: Iterable[Any], buffer_size: int = 10485760
) -> list[list[Tensor]]:
    """Put each of ``tensors`` on each of ``devices``.

    Parameters
    ----------
    tensors
        Tensors of one framework, all on ``devices[0]`` (torch.cuda.comm's rule); their shapes and
        dtypes may differ. An empty list gives one empty list per device, as torch.cuda.comm
        (with no tensor, there is no framework to check ``devices`` with).
    devices
        The target devices, as for :func:`scatter`; at least one.
    buffer_size
        An int > 0: the most bytes torch.cuda.comm copies at once, per dtype. It never changes the
        values of the results; it sets which tensors share a buffer, and so which results for
        ``devices[0]`` listed again are views (see Returns).

    Returns
    -------
    list
        One list per device (a list of lists, as torch.cuda.comm's), in the order of ``tensors``:

        - for ``devices[0]``: ``tensors`` themselves;
        - for another device: new tensors, copies there;
        - for ``devices[0]`` listed again (every device, on CPU): torch.cuda.comm's views of its
          flat buffers. Of a tensor that is contiguous, not empty and alone in its buffer (the
          tensors of its dtype up to ``buffer_size`` bytes), a view of the tensor (a new object
          over its memory); of any other, a view of one new copy that all these lists share (a
          write to one shows in the others, not in ``tensors``).

    Examples
    --------
    torch on CPU::

        >>> a, b = torch.tensor([1.0, 2.0]), torch.tensor([3.0])
        >>> mine, again = compat.comm.broadcast_coalesced([a, b], ["cpu", "cpu"])
        >>> mine[0] is a, again[0].data_ptr() == a.data_ptr()   # a and b share one buffer:
        (True, False)
        >>> _, again = compat.comm.broadcast_coalesced([a, b], ["cpu", "cpu"], buffer_size=1)
        >>> again[0].data_ptr() == a.data_ptr()   # a alone in its buffer: a view of a
        True

    torch on CUDA (torch.cuda.comm's call)::

        >>> on_0, on_1 = compat.comm.broadcast_coalesced([a.cuda(0)], ["cuda:0", "cuda:1"])

    MindSpore on CPU::

        >>> mine, again = compat.comm.broadcast_coalesced([ms.Tensor([1.0])], ["CPU", "CPU"])
    """

    items = _check_sequence(tensors, "tensors", "tensors")
    if not items:
        places = _check_some(_check_sequence(devices, "devices", "devices"), "devices", "device")
        _check_buffer_size(buffer_size)
        return [[] for _ in places]
    framework, adapter = _check_tensor(items[0], "tensors[0]")
    for index, item in enumerate(items[1:], start=1):
        _check_framework(item, f"tensors[{index}]", framework, "tensors[0]")
    targets = _check_devices(devices, framework, adapter)
    rule = f"devices[0] ({targets[0]}), as every tensor (torch.cuda.comm's rule)"
    _check_on(items, "tensors", targets[0], adapter, rule)
    size = _check_buffer_size(buffer_size)
    native = _native_comm(framework, targets)
    if native is not None:
        return [list(row) for row in native.broadcast_coalesced(items, targets, size)]
    # comm.cpp broadcast_coalesced: outputs[0] is `tensors`; each bucket's flat buffer is
    # broadcast, which leaves it as it is for devices[0] listed again (_again).
    again = _again(adapter, items, targets[0], _broadcast_buckets(adapter, items, size))
    result = [list(items)]
    for target in targets[1:]:
        if target == targets[0]:
            result.append([again(index, item) for index, item in enumerate(items)])
        else:
            result.append([_copy_to(adapter, item, target) for item in items])
    adapter.synchronize()
    return result


def reduce_add(inputs: Iterable[Tensor], destination: Any = None) -> Tensor:
    """Sum ``inputs`` element-wise on ``destination``.

    Parameters
    ----------
    inputs
        Tensors of one framework with the same shape and dtype (none is cast or promoted), one
        per device, on any devices; at least one.
    destination
        The device of the result, as for :func:`gather`: a device, -1 for CPU, or None:
        torch.cuda.comm's default (the current CUDA device) when every input is on CUDA;
        otherwise the inputs' device if they share one, else CPU.

    Returns
    -------
    tensor
        As torch.cuda.comm's: of one input on ``destination``, that input itself; else a new
        tensor on ``destination``.

    Examples
    --------
    torch on CPU::

        >>> compat.comm.reduce_add([torch.tensor([1, 2]), torch.tensor([10, 20])], "cpu")
        tensor([11, 22])
        >>> x = torch.tensor([1, 2])
        >>> compat.comm.reduce_add([x], "cpu") is x
        True

    torch on CUDA (torch.cuda.comm's call)::

        >>> total = compat.comm.reduce_add([a.cuda(0), b.cuda(1)], destination=0)

    MindSpore on CPU::

        >>> compat.comm.reduce_add([ms.Tensor([1, 2]), ms.Tensor([10, 20])], "CPU")
        Tensor(shape=[2], dtype=Int64, value= [11, 22])
    """

    items = _check_some(_check_sequence(inputs, "inputs", "tensors"), "inputs", "tensor")
    framework, adapter = _check_tensor(items[0], "inputs[0]")
    _check_matching(items, _names("inputs", len(items)), adapter)
    sources = [adapter.device(item) for item in items]
    native, target = _sum_plan(destination, framework, adapter, sources)
    if native is not None:
        return native.reduce_add(items, target)
    if len(items) == 1 and sources[0] == target:
        return items[0]  # nn/parallel/comm.py reduce_add: `if len(inputs) == 1: return inputs[0]`
    return _finished(adapter, [_sum(adapter, items, target)])[0]


def reduce_add_coalesced(
    inputs: Iterable[Iterable[Tensor]], destination: Any = None, buffer_size: int = 10485760
) -> tuple[Tensor, ...]:
    """Sum element-wise, for each j, the j-th tensor of every device's list of ``inputs``.

    Parameters
    ----------
    inputs
        One list of tensors per device, the lists of equal length, each list's tensors on one
        device. ``inputs[i][j]`` has the shape and dtype of ``inputs[0][j]`` (none is cast);
        different j may differ. No list, or empty lists, give an empty tuple, as
        torch.cuda.comm (with no tensor, there is no framework to check ``destination`` with).
    destination
        The device of the results, as for :func:`reduce_add`.
    buffer_size
        An int > 0: the most bytes torch.cuda.comm sums at once, per dtype. It never changes the
        values of the results; with one list, it sets which results are views (see Returns).

    Returns
    -------
    tuple
        A tuple, as torch.cuda.comm's; the j-th is the sum of the ``inputs[i][j]``, on
        ``destination``. New tensors, but of one list on ``destination`` (torch.cuda.comm sums its
        flat buffers, which are the tensors themselves when alone in one): there the j-th is a
        view of ``inputs[0][j]`` (a new object over its memory) if that tensor is contiguous, not
        empty and alone in its buffer (the tensors of its dtype up to ``buffer_size`` bytes), else
        a new tensor.

    Examples
    --------
    torch on CPU::

        >>> on_0 = [torch.tensor([1, 2]), torch.tensor([0.5])]
        >>> on_1 = [torch.tensor([10, 20]), torch.tensor([0.25])]
        >>> compat.comm.reduce_add_coalesced([on_0, on_1], "cpu")
        (tensor([11, 22]), tensor([0.7500]))
        >>> alone = compat.comm.reduce_add_coalesced([on_0], "cpu")   # one list: views
        >>> alone[0].data_ptr() == on_0[0].data_ptr()
        True

    torch on CUDA (torch.cuda.comm's call)::

        >>> sums = compat.comm.reduce_add_coalesced([[a.cuda(0)], [b.cuda(1)]], destination=0)

    MindSpore on CPU::

        >>> compat.comm.reduce_add_coalesced([[ms.Tensor([1, 2])], [ms.Tensor([10, 20])]], "CPU")
        (Tensor(shape=[2], dtype=Int64, value= [11, 22]),)
    """

    lists = _check_lists(inputs)
    if not lists or not lists[0]:
        _check_buffer_size(buffer_size)
        return ()
    framework, adapter = _check_tensor(lists[0][0], "inputs[0][0]")
    groups = [[row[j] for row in lists] for j in range(len(lists[0]))]
    for j, group in enumerate(groups):
        _check_framework(group[0], f"inputs[0][{j}]", framework, "inputs[0][0]")
        _check_matching(group, [f"inputs[{i}][{j}]" for i in range(len(group))], adapter)
    sources = [adapter.device(row[0]) for row in lists]
    for i, row in enumerate(lists):
        why = f"{sources[i]}, as inputs[{i}][0] (each list holds one device's tensors)"
        _check_on(row, f"inputs[{i}]", sources[i], adapter, why)
    native, target = _sum_plan(destination, framework, adapter, sources)
    size = _check_buffer_size(buffer_size)
    if native is not None:
        return tuple(native.reduce_add_coalesced(lists, target, size))
    if len(lists) == 1 and sources[0] == target:
        # nn/parallel/comm.py reduce_add_coalesced: reduce_add of one flat buffer returns it, and
        # the results are views of it (see _flat_views).
        views = _flat_views(adapter, lists[0], _reduce_buckets(adapter, lists[0], size))
        result = [
            _view(adapter, item) if view else _copy_to(adapter, item, target)
            for item, view in zip(lists[0], views, strict=True)
        ]
    else:
        result = [_sum(adapter, group, target) for group in groups]
    return _finished(adapter, result)
