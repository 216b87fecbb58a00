"""Single-process scatter, gather and broadcast across devices: ``torch.cuda.comm`` for any device.

The same functions and rules as ``torch.cuda.comm`` (exactly one of ``devices`` and ``out``;
``chunk_sizes`` matches ``devices`` and sums to the size of ``dim``; with ``out``, the chunk sizes
come from the out tensors), for torch tensors on CPU or CUDA and for MindSpore tensors. When every
target is a CUDA device, the call is torch.cuda.comm's own (after compat's checks); otherwise the
copies are made by the framework's adapter.

Differences from torch.cuda.comm, all deliberate:

- CPU devices (``"cpu"``, ``torch.device("cpu")``; MindSpore's ``"CPU"``, any case) are accepted.
- Results are always new tensors, also on the tensor's own device (torch.cuda.comm returns the
  input, or a view of it, for the device the input is already on).
- Every rule violation is a ``ValueError`` (``TypeError`` for a wrong type) naming the parameter,
  raised before anything is written; torch.cuda.comm raises ``RuntimeError``. Tensors of another
  dtype than the input are refused instead of being cast.

No comm function needs :func:`compat.init`: they are local to the process. Importing this module
imports no framework; the adapter of a tensor's framework is loaded on first use.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from compat import tables
from compat._checks import check_int, check_sizes, describe
from compat.adapter import Adapter
from compat.dispatch import framework_of, load_adapter

Tensor = Any

__all__ = ["broadcast", "gather", "scatter"]


# -- validation --------------------------------------------------------------------------------


@cache
def _adapter(framework: str) -> Adapter:
    return load_adapter(framework)


def _tensor_types() -> str:
    spellings = [entry["tensor"].replace(":", ".") for entry in tables.load("frameworks").values()]
    return " or ".join(spellings)


def _check_tensor(value: object, param: str) -> tuple[str, Adapter]:
    framework = framework_of(value)
    if framework is None:
        raise TypeError(f"{param}: expected a tensor ({_tensor_types()}); got {describe(value)}")
    return framework, _adapter(framework)


def _check_like(
    value: object, param: str, framework: str, adapter: Adapter, dtype: str, of: str
) -> None:
    """``value`` is a tensor of ``framework`` and ``dtype`` (the ``of`` tensor's)."""
    if framework_of(value) != framework:
        raise TypeError(f"{param}: expected a {framework} tensor (as {of}); got {describe(value)}")
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


def _check_devices(
    value: object, framework: str, adapter: Adapter, *, allow_empty: bool
) -> list[str]:
    items = _check_sequence(value, "devices", "devices")
    if not items and not allow_empty:
        raise ValueError("devices: expected at least one device; got an empty list")
    return [
        _check_device(item, f"devices[{index}]", framework, adapter)
        for index, item in enumerate(items)
    ]


def _exactly_one(devices: object, out: object) -> None:
    if (devices is None) == (out is None):
        given = "neither" if devices is None else f"both (devices={devices!r}, out=...)"
        raise ValueError(f"devices, out: expected exactly one of devices and out; got {given}")


def _check_chunk_sizes(value: object, parts: int, total: int, dim: int) -> list[int]:
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


def _copy(adapter: Adapter, dst: Tensor, src: Tensor) -> None:
    # Nothing to write into an empty tensor; MindSpore's CPU copy fails on some empty shapes
    # ("memcpy_s error" for a (3, 0) tensor, measured).
    if 0 not in adapter.shape(dst):
        adapter.copy_(dst, src)


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
    """Split ``tensor`` along ``dim`` and copy chunk i to ``devices[i]`` (or into ``out[i]``).

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
        New tensors, one per chunk, on their devices (copies also on ``tensor``'s own device), or
        ``out``'s tensors.
    """
    framework, adapter = _check_tensor(tensor, "tensor")
    shape = adapter.shape(tensor)
    _exactly_one(devices, out)
    dim = _check_dim(dim, shape, "tensor")
    if out is None:
        targets = _check_devices(devices, framework, adapter, allow_empty=False)
        if chunk_sizes is None:
            sizes = chunk_split(shape[dim], len(targets))
        else:
            sizes = _check_chunk_sizes(chunk_sizes, len(targets), shape[dim], dim)
        outputs: list[Tensor] = []
    else:
        if chunk_sizes is not None:
            raise ValueError(
                "chunk_sizes: expected None when out is given (the chunk sizes are out's sizes "
                f"on dim {dim}); got {describe(chunk_sizes)}"
            )
        outputs = _check_sequence(out, "out", "tensors")
        if not outputs:
            raise ValueError("out: expected at least one tensor; got an empty list")
        dtype = adapter.dtype(tensor)
        for index, item in enumerate(outputs):
            _check_like(item, f"out[{index}]", framework, adapter, dtype, "tensor")
        sizes = _check_pieces(outputs, "out", shape, dim, adapter, "tensor")
        if sum(sizes) != shape[dim]:
            raise ValueError(
                f"out: expected sizes on dim {dim} summing to {shape[dim]} (the size of dim {dim} "
                f"of tensor); got {sizes} (sum {sum(sizes)})"
            )
        targets = [adapter.device(item) for item in outputs]
    native = _native_comm(framework, targets)
    if native is not None:
        result = native.scatter(
            tensor,
            None if out is not None else targets,
            None if chunk_sizes is None else sizes,
            dim,
            streams,
            out=None if out is None else outputs,
        )
        return tuple(result)
    _check_streams(streams, targets)
    chunks = adapter.split(tensor, sizes, dim)
    if out is None:
        # The default split can give fewer chunks than devices: the last devices get none.
        result = [
            adapter.to_device(chunk, target) for chunk, target in zip(chunks, targets, strict=False)
        ]
    else:
        for item, chunk in zip(outputs, chunks, strict=True):
            _copy(adapter, item, chunk)
        result = outputs
    adapter.synchronize()
    return tuple(result)


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
        A new tensor on ``destination``, or ``out``.
    """
    items = _check_sequence(tensors, "tensors", "tensors")
    if not items:
        raise ValueError("tensors: expected at least one tensor; got an empty list")
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
    elif isinstance(destination, int) and not isinstance(destination, bool) and destination == -1:
        target = adapter.canonical_device("cpu")
    elif destination is not None:
        target = _check_device(destination, "destination", framework, adapter)
    native = _native_comm(framework, sources)
    if native is not None:
        return native.gather(items, dim, target, out=out)
    if out is not None:
        target = adapter.device(out)
    elif target is None:
        target = sources[0] if len(set(sources)) == 1 else adapter.canonical_device("cpu")
    pieces = [
        item if source == target else adapter.to_device(item, str(target))
        for item, source in zip(items, sources, strict=True)
    ]
    result = adapter.cat(pieces, dim)
    if out is not None:
        _copy(adapter, out, result)
        result = out
    adapter.synchronize()
    return result


def broadcast(
    tensor: Tensor, devices: Iterable[Any] | None = None, *, out: Sequence[Tensor] | None = None
) -> tuple[Tensor, ...]:
    """Copy ``tensor`` to each of ``devices`` (or into each of ``out``).

    Parameters
    ----------
    tensor
        A torch or MindSpore tensor, on any device.
    devices
        The target devices, as for :func:`scatter` (an empty list gives an empty tuple, as
        torch.cuda.comm). Exactly one of ``devices`` and ``out``.
    out
        Tensors to copy into (keyword only): ``tensor``'s shape and dtype.

    Returns
    -------
    tuple
        One new tensor per device (a copy also on ``tensor``'s own device), or ``out``'s tensors.
    """
    framework, adapter = _check_tensor(tensor, "tensor")
    _exactly_one(devices, out)
    if out is None:
        targets = _check_devices(devices, framework, adapter, allow_empty=True)
        outputs: list[Tensor] = []
    else:
        outputs = _check_sequence(out, "out", "tensors")
        dtype = adapter.dtype(tensor)
        shape = adapter.shape(tensor)
        for index, item in enumerate(outputs):
            _check_like(item, f"out[{index}]", framework, adapter, dtype, "tensor")
            actual = adapter.shape(item)
            if actual != shape:
                raise ValueError(
                    f"out[{index}]: expected shape {shape} (tensor's shape); got {actual}"
                )
        targets = [adapter.device(item) for item in outputs]
    if not targets:
        return ()
    native = _native_comm(framework, targets)
    if native is not None:
        if out is None:
            return tuple(native.broadcast(tensor, targets))
        return tuple(native.broadcast(tensor, out=outputs))
    if out is None:
        result = [adapter.to_device(tensor, target) for target in targets]
    else:
        for item in outputs:
            _copy(adapter, item, tensor)
        result = outputs
    adapter.synchronize()
    return tuple(result)
