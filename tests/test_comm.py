"""compat.comm: torch.cuda.comm's functions across the devices of one process.

Results are checked against numpy on torch CPU and on MindSpore CPU (in this process; comm needs no
communication init), for several dtypes; so is what each result is, as torch.cuda.comm's (the input
itself, a view of an input, a new tensor), by identity, ``data_ptr()`` and by where a write into it
lands. Every rule violation is checked for its exception type, its message (parameter, what was
expected, what was given) and for leaving ``out`` and the inputs untouched. The delegation to
torch.cuda.comm is checked on CPU against the adapter path, with torch.nn.parallel.comm's own Python
(torch.cuda.comm's code) over a transliteration of its C++ (torch/csrc/cuda/comm.cpp, which a CPU
build lacks); on CUDA itself only where CUDA is present. `compat port` rewrites every
torch.cuda.comm function to compat.comm's.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

import compat
from compat.comm import chunk_split
from compat.core.dispatch import load_adapter

DTYPES = ["float32", "bfloat16", "int64", "int32"]
SENTINEL = 7


class Kit:
    """Tensors of one framework from and to numpy, and the device names it uses."""

    name: str
    cpu_names: list[Any]  # spellings of the CPU device for devices= / destination=
    missing_device: Any  # a device spelling this process does not have
    dtypes: dict[str, Any]

    def __init__(self) -> None:
        self.adapter = load_adapter(self.name)

    def tensor(self, array: Any, dtype: str) -> Any:
        raise NotImplementedError

    def numpy(self, tensor: Any) -> np.ndarray:
        raise NotImplementedError

    def full(self, shape: tuple[int, ...], dtype: str, value: int = SENTINEL) -> Any:
        return self.tensor(np.full(shape, value), dtype)

    def dtype(self, tensor: Any) -> str:
        return self.adapter.dtype(tensor)

    def write(self, target: Any, value: int) -> None:
        """Write ``value`` into every element of ``target``'s memory. A 0-d tensor is written
        through its 1-element view: the MindSpore adapter, compat not initialised, copies into
        one by `dst[...] = src`, which gives `dst` the memory of `src` instead (measured,
        MindSpore 2.10; compat.comm does the same)."""
        shape = self.adapter.shape(target)
        if not shape:
            target, shape = target.view((1,)), (1,)
        self.adapter.copy_(target, self.full(shape, self.dtype(target), value))


class TorchKit(Kit):
    name = "torch"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.cpu_names = ["cpu", torch.device("cpu"), "cpu:0"]
        self.missing_device = "cuda:99"
        super().__init__()

    def tensor(self, array: Any, dtype: str) -> Any:
        array = np.asarray(array)
        wide = "float32" if dtype == "bfloat16" else dtype
        return self.torch.from_numpy(array.astype(wide)).to(getattr(self.torch, dtype))

    def numpy(self, tensor: Any) -> np.ndarray:
        if tensor.dtype == self.torch.bfloat16:
            tensor = tensor.float()
        return tensor.numpy()


class MindSporeKit(Kit):
    name = "mindspore"

    def __init__(self) -> None:
        import mindspore as ms

        # No communication init: comm is local to the process. set_device refuses once a kernel
        # has run (another test file of this pytest process may have run one, on the device
        # MindSpore chose itself): that device must be the CPU.
        try:
            ms.set_device("CPU")
        except RuntimeError:
            if ms.get_context("device_target") != "CPU":
                raise
        self.ms = ms
        self.cpu_names = ["CPU", "cpu"]
        self.missing_device = "Ascend"
        super().__init__()

    def tensor(self, array: Any, dtype: str) -> Any:
        array = np.asarray(array)
        wide = "float32" if dtype == "bfloat16" else dtype
        return self.ms.Tensor(array.astype(wide)).astype(getattr(self.ms, dtype))

    def numpy(self, tensor: Any) -> np.ndarray:
        if tensor.dtype == self.ms.bfloat16:
            tensor = tensor.astype(self.ms.float32)
        return tensor.asnumpy()


KITS: dict[str, Callable[[], Kit]] = {"torch": TorchKit, "mindspore": MindSporeKit}


@pytest.fixture(scope="module", params=list(KITS))
def kit(request: pytest.FixtureRequest) -> Kit:
    pytest.importorskip(request.param)
    return KITS[request.param]()


def _data(shape: tuple[int, ...]) -> np.ndarray:
    """Small distinct integers: exact in every dtype tested, bfloat16 included."""
    return (np.arange(int(np.prod(shape))) % 97).reshape(shape)


def _expected_chunks(array: np.ndarray, sizes: list[int], dim: int) -> list[np.ndarray]:
    return np.split(array, np.cumsum(sizes)[:-1], axis=dim)


#: Values no test tensor holds (_data's are >= 0): each write by _reach is told apart.
_MARKS = itertools.count(-1, -1)


def _reach(kit: Kit, target: Any, others: Sequence[Any]) -> list[bool]:
    """Write a new value into all of ``target``; which of ``others`` it changed (shares memory
    with). An empty ``target`` changes nothing."""
    before = [kit.numpy(other).copy() for other in others]
    if 0 not in kit.adapter.shape(target):
        kit.write(target, next(_MARKS))
    return [
        not np.array_equal(kit.numpy(other), old) for other, old in zip(others, before, strict=True)
    ]


def _ptr(tensor: Any) -> int:
    """The address of the first element (torch and MindSpore both have ``data_ptr()``)."""
    return int(tensor.data_ptr())


def _check_result(kit: Kit, tensors: Any, expected: list[np.ndarray], dtype: str) -> None:
    assert isinstance(tensors, tuple)
    assert len(tensors) == len(expected)
    for tensor, want in zip(tensors, expected, strict=True):
        assert not dtype or kit.dtype(tensor) == dtype  # "": the caller checks each one's
        got = kit.numpy(tensor)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


# -- results -------------------------------------------------------------------------------------


def test_chunk_split_is_torch_chunk() -> None:
    torch = pytest.importorskip("torch")
    for total in range(0, 13):
        for parts in range(1, 7):
            chunks = torch.chunk(torch.empty(total), parts)
            assert chunk_split(total, parts) == [c.shape[0] for c in chunks], (total, parts)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("rows", "parts"), [(6, 3), (7, 3), (5, 4), (3, 4), (4, 1), (0, 2)])
def test_scatter_default_chunks(kit: Kit, dtype: str, rows: int, parts: int) -> None:
    array = _data((rows, 3))
    tensor = kit.tensor(array, dtype)
    devices = [kit.cpu_names[i % len(kit.cpu_names)] for i in range(parts)]
    result = compat.comm.scatter(tensor, devices)
    # torch.chunk's split: ceil(rows / parts) rows per chunk, so possibly fewer chunks (5 rows on
    # 4 devices: 2, 2, 1; 3 rows on 4 devices: 1, 1, 1), as torch.cuda.comm.scatter gives.
    _check_result(kit, result, _expected_chunks(array, chunk_split(rows, parts), 0), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "sizes", "dim"),
    [((5, 2), [2, 0, 3], 0), ((3, 5), [1, 0, 4], 1), ((2, 3, 4), [3, 1], -1), ((4,), [4], 0)],
)
def test_scatter_chunk_sizes(
    kit: Kit, dtype: str, shape: tuple[int, ...], sizes: list[int], dim: int
) -> None:
    array = _data(shape)
    tensor = kit.tensor(array, dtype)
    devices = [kit.cpu_names[0]] * len(sizes)
    result = compat.comm.scatter(tensor, devices, chunk_sizes=sizes, dim=dim)
    _check_result(kit, result, _expected_chunks(array, sizes, dim), dtype)
    np.testing.assert_array_equal(kit.numpy(tensor), array)  # the input is unchanged


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "sizes", "dim"), [((5, 2), [2, 3], 0), ((3, 5), [1, 0, 4], 1), ((2, 6), [3, 3], -1)]
)
def test_scatter_into_out(
    kit: Kit, dtype: str, shape: tuple[int, ...], sizes: list[int], dim: int
) -> None:
    array = _data(shape)
    tensor = kit.tensor(array, dtype)
    out = []
    for size in sizes:
        part_shape = list(shape)
        part_shape[dim] = size
        out.append(kit.full(tuple(part_shape), dtype))
    result = compat.comm.scatter(tensor, dim=dim, out=out)
    assert all(got is want for got, want in zip(result, out, strict=True))
    _check_result(kit, result, _expected_chunks(array, sizes, dim), dtype)


def test_scatter_chunks_on_the_own_device_are_views(kit: Kit) -> None:
    # comm.cpp scatter: a chunk for the tensor's own device stays tensor.chunk's (or
    # split_with_sizes') view; CPU is a CPU tensor's own device.
    array = _data((4, 3))
    tensor = kit.tensor(array, "float32")
    chunks = compat.comm.scatter(tensor, [kit.cpu_names[0]] * 2)
    assert isinstance(chunks, tuple) and all(chunk is not tensor for chunk in chunks)
    assert [_ptr(chunk) for chunk in chunks] == [_ptr(tensor), _ptr(tensor) + 6 * 4]
    assert _reach(kit, chunks[1], [tensor, chunks[0]]) == [True, False]
    got = kit.numpy(tensor)
    np.testing.assert_array_equal(got[:2], array[:2])
    assert (got[2:] < 0).all()
    assert _reach(kit, tensor, list(chunks)) == [True, True]  # and the other way
    # One chunk, all of the tensor: a view, not the tensor itself.
    (whole,) = compat.comm.scatter(tensor, _cpu(kit, 1))
    assert whole is not tensor and _ptr(whole) == _ptr(tensor)
    assert _reach(kit, whole, [tensor]) == [True]
    # Along dim 1 the views are not contiguous: a write lands in the input's columns.
    tensor = kit.tensor(array, "float32")
    first, empty, last = compat.comm.scatter(tensor, _cpu(kit, 3), [1, 0, 2], dim=1)
    assert _ptr(last) == _ptr(tensor) + 4
    assert _reach(kit, last, [tensor, first]) == [True, False]
    got = kit.numpy(tensor)
    np.testing.assert_array_equal(got[:, 0], array[:, 0])
    assert (got[:, 1:] < 0).all()
    assert kit.adapter.shape(empty) == (4, 0)


def test_scatter_into_out_copies(kit: Kit) -> None:
    # comm.cpp scatter_out: out_tensors[i].copy_(chunks[i]), returned themselves.
    array = _data((4, 3))
    tensor = kit.tensor(array, "float32")
    out = [kit.full((1, 3), "float32"), kit.full((3, 3), "float32")]
    result = compat.comm.scatter(tensor, out=out)
    assert isinstance(result, tuple) and all(a is b for a, b in zip(result, out, strict=True))
    for item in result:
        assert _reach(kit, item, [tensor]) == [False]
    np.testing.assert_array_equal(kit.numpy(tensor), array)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shapes", "dim"),
    [([(2, 3), (1, 3), (4, 3)], 0), ([(2, 1), (2, 0), (2, 3)], 1), ([(2, 2, 2), (2, 2, 1)], -1)],
)
def test_gather(kit: Kit, dtype: str, shapes: list[tuple[int, ...]], dim: int) -> None:
    arrays = [_data(shape) + 10 * index for index, shape in enumerate(shapes)]
    tensors = [kit.tensor(array, dtype) for array in arrays]
    expected = np.concatenate(arrays, axis=dim)
    for destination in [None, -1, *kit.cpu_names]:
        result = compat.comm.gather(tensors, dim, destination)
        _check_result(kit, (result,), [expected], dtype)
    out = kit.full(expected.shape, dtype)
    assert compat.comm.gather(tensors, dim=dim, out=out) is out
    _check_result(kit, (out,), [expected], dtype)


def test_gather_returns_a_new_tensor(kit: Kit) -> None:
    # comm.cpp gather: at::empty, then a copy of each tensor; also of one tensor on destination.
    array = _data((3, 2))
    tensor = kit.tensor(array, "int64")
    for destination in [None, kit.cpu_names[0]]:
        result = compat.comm.gather([tensor], destination=destination)
        assert result is not tensor and _ptr(result) != _ptr(tensor)
        assert _reach(kit, result, [tensor]) == [False]
        np.testing.assert_array_equal(kit.numpy(tensor), array)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 2), (5,), (), (2, 0)])
def test_broadcast(kit: Kit, dtype: str, shape: tuple[int, ...]) -> None:
    array = _data(shape)
    tensor = kit.tensor(array, dtype)
    result = compat.comm.broadcast(tensor, kit.cpu_names)
    # comm.cpp broadcast: the tensor itself for each device that is its own (CPU here), in a
    # tuple (compat's API, as torch.cuda.comm's docstring says; its binding gives a list).
    assert isinstance(result, tuple)
    _check_result(kit, tuple(result), [array] * len(kit.cpu_names), dtype)
    assert all(item is tensor for item in result)
    out = [kit.full(shape, dtype), kit.full(shape, dtype)]
    result = compat.comm.broadcast(tensor, out=out)
    assert isinstance(result, tuple) and all(a is b for a, b in zip(result, out, strict=True))
    _check_result(kit, tuple(result), [array, array], dtype)
    assert [_reach(kit, item, [tensor]) for item in out] == [[False], [False]]  # copies
    np.testing.assert_array_equal(kit.numpy(tensor), array)
    assert compat.comm.broadcast(tensor, []) == ()  # empty, as torch.cuda.comm.broadcast


@pytest.mark.parametrize("buffer_size", [10485760, 1])
def test_broadcast_coalesced(kit: Kit, buffer_size: int) -> None:
    # Several dtypes and shapes in one call: torch.cuda.comm coalesces them by dtype.
    specs = [((3, 2), "float32"), ((5,), "int64"), ((), "bfloat16"), ((2, 0), "int32")]
    arrays = [_data(shape) + index for index, (shape, _) in enumerate(specs)]
    tensors = [kit.tensor(array, dtype) for array, (_, dtype) in zip(arrays, specs, strict=True)]
    result = compat.comm.broadcast_coalesced(tensors, kit.cpu_names, buffer_size)
    assert isinstance(result, list) and len(result) == len(kit.cpu_names)  # as torch.cuda.comm
    for row in result:
        assert isinstance(row, list)
        _check_result(kit, tuple(row), arrays, "")
        assert [kit.dtype(copy) for copy in row] == [dtype for _, dtype in specs]
    # devices[0]: the tensors themselves. Every device is CPU, devices[0] again: each tensor is
    # alone of its dtype, so its flat buffer is a view of it, and so are the results; the empty
    # one is a new tensor (at::unflatten_dense_tensors' at::empty).
    views = [True, True, True, False]
    assert all(a is b for a, b in zip(result[0], tensors, strict=True))
    for row in result[1:]:
        assert all(a is not b for a, b in zip(row, tensors, strict=True))
        assert [_ptr(a) == _ptr(b) for a, b in zip(row[:3], tensors, strict=False)] == views[:3]
        for index, item in enumerate(row):
            others = [tensors[index], *(other[index] for other in result if other is not row)]
            assert _reach(kit, item, others) == [views[index]] * len(others)
    # No tensor: one empty list per device, as torch.cuda.comm.
    assert compat.comm.broadcast_coalesced([], kit.cpu_names) == [[] for _ in kit.cpu_names]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 2), (5,), (), (2, 0)])
def test_reduce_add(kit: Kit, dtype: str, shape: tuple[int, ...]) -> None:
    arrays = [_data(shape) + index for index in range(3)]  # sums stay exact in bfloat16
    tensors = [kit.tensor(array, dtype) for array in arrays]
    for destination in [None, -1, *kit.cpu_names]:
        result = compat.comm.reduce_add(tensors, destination)
        _check_result(kit, (result,), [np.sum(arrays, axis=0)], dtype)
        assert _reach(kit, result, tensors) == [False] * 3  # a new tensor
    for tensor, array in zip(tensors, arrays, strict=True):
        np.testing.assert_array_equal(kit.numpy(tensor), array)
    # One input on destination: the input itself (nn/parallel/comm.py reduce_add).
    for destination in [None, -1, *kit.cpu_names]:
        assert compat.comm.reduce_add(tensors[:1], destination) is tensors[0]


@pytest.mark.parametrize("buffer_size", [10485760, 1])
def test_reduce_add_coalesced(kit: Kit, buffer_size: int) -> None:
    specs = [((3, 2), "float32"), ((4,), "int64"), ((), "bfloat16"), ((0, 3), "int32")]
    inputs = [
        [kit.tensor(_data(shape) + 2 * device, dtype) for shape, dtype in specs]
        for device in range(3)
    ]
    expected = [np.sum([_data(shape) + 2 * d for d in range(3)], axis=0) for shape, _ in specs]
    for destination in [None, -1, kit.cpu_names[0]]:
        result = compat.comm.reduce_add_coalesced(inputs, destination, buffer_size)
        assert isinstance(result, tuple)  # as torch.cuda.comm
        _check_result(kit, result, expected, "")
        assert [kit.dtype(item) for item in result] == [dtype for _, dtype in specs]
        everything = [item for row in inputs for item in row]
        for item in result:  # new tensors: the sums of several lists
            assert _reach(kit, item, everything) == [False] * len(everything)
    for device, row in enumerate(inputs):  # unchanged
        for tensor, (shape, _) in zip(row, specs, strict=True):
            np.testing.assert_array_equal(kit.numpy(tensor), _data(shape) + 2 * device)
    # No lists, or empty ones: an empty tuple, as torch.cuda.comm.
    assert compat.comm.reduce_add_coalesced([]) == ()
    assert compat.comm.reduce_add_coalesced([[], []]) == ()


# -- what each result is: torch.cuda.comm's flat buffers ----------------------------------------

# The coalesced functions flatten each bucket of same-dtype tensors into one buffer, which is the
# tensor itself (a view) when the bucket holds one contiguous tensor. Tensors: a, b float32,
# c int64, d float32 and not contiguous, e float32 and empty.
_BUCKET_SPECS = [((2, 3), "float32"), ((4,), "float32"), ((3,), "int64"), ((3, 2), "float32")]


def _bucket_tensors(kit: Kit, offset: int = 0) -> list[Any]:
    tensors = [kit.tensor(_data(shape) + offset, dtype) for shape, dtype in _BUCKET_SPECS]
    tensors[3] = kit.adapter.movedim(kit.tensor(_data((2, 3)) + offset, "float32"), 0, 1)
    tensors.append(kit.tensor(np.zeros((0,)), "float32"))
    return tensors


# Per buffer_size, which of a..e come back as views of themselves (the others are copies, the
# empty one a new tensor). broadcast_coalesced's buckets (torch::utils::take_tensors) close once
# they reach buffer_size bytes, reduce_add_coalesced's (torch._utils._take_tensors) before they
# would pass it: with 30 bytes, a (24) and b (16) share a bucket in the first, not the second;
# with 24, a is closed alone in both; with 40, a and b share one in both.
_BROADCAST_VIEWS = {
    10485760: [False, False, True, False, False],
    1: [True, True, True, False, False],
    30: [False, False, True, False, False],
    24: [True, False, True, False, False],
    40: [False, False, True, False, False],
}
_REDUCE_VIEWS = {
    10485760: [False, False, True, False, False],
    1: [True, True, True, False, False],
    30: [True, True, True, False, False],
    24: [True, True, True, False, False],
    40: [False, False, True, False, False],
}


@pytest.mark.parametrize("buffer_size", list(_BROADCAST_VIEWS))
def test_broadcast_coalesced_to_devices_0_again(kit: Kit, buffer_size: int) -> None:
    tensors = _bucket_tensors(kit)
    arrays = [kit.numpy(tensor).copy() for tensor in tensors]
    home = kit.cpu_names[0]
    mine, again, more = compat.comm.broadcast_coalesced(tensors, [home] * 3, buffer_size)
    assert all(a is b for a, b in zip(mine, tensors, strict=True))
    _check_result(kit, tuple(again), arrays, "")
    _check_result(kit, tuple(more), arrays, "")
    for index, view in enumerate(_BROADCAST_VIEWS[buffer_size]):
        tensor, item, other = tensors[index], again[index], more[index]
        assert item is not tensor and item is not other
        empty = index == 4  # an empty tensor has no address to compare (torch: 0)
        assert empty or (_ptr(item) == _ptr(tensor)) is view
        # A view writes the tensor (and the other list's view); a copy is one both lists view.
        assert _reach(kit, item, [tensor, other]) == [view, not empty], index
    # A tensor that shares a bucket is copied once, for every list: the copy is not the tensor.
    if not _BROADCAST_VIEWS[buffer_size][0]:
        assert _reach(kit, again[1], [tensors[1], more[1], again[0]]) == [False, True, False]


@pytest.mark.parametrize("buffer_size", list(_REDUCE_VIEWS))
def test_reduce_add_coalesced_of_one_list(kit: Kit, buffer_size: int) -> None:
    # nn/parallel/comm.py: reduce_add of one flat buffer returns it; the results are its views.
    tensors = _bucket_tensors(kit)
    arrays = [kit.numpy(tensor).copy() for tensor in tensors]
    for destination in [None, kit.cpu_names[0]]:
        result = compat.comm.reduce_add_coalesced([tensors], destination, buffer_size)
        assert isinstance(result, tuple)
        _check_result(kit, result, arrays, "")
        for index, view in enumerate(_REDUCE_VIEWS[buffer_size]):
            assert result[index] is not tensors[index]
            assert index == 4 or (_ptr(result[index]) == _ptr(tensors[index])) is view
            assert _reach(kit, result[index], [tensors[index]]) == [view], index
            arrays[index] = kit.numpy(tensors[index]).copy()


def test_results_for_another_device_are_new_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    # Another device than the input's own, without CUDA: torch's "meta" device (no data, so
    # identity and device only), made one of the process's devices for the adapter path.
    torch = pytest.importorskip("torch")
    adapter = compat.comm._adapter("torch")
    monkeypatch.setattr(adapter, "available_devices", lambda: ["cpu", "meta"])
    x = torch.arange(12.0).reshape(4, 3)
    here, there = compat.comm.scatter(x, ["cpu", "meta"])
    assert _ptr(here) == _ptr(x) and there.device.type == "meta"
    first, other, again = compat.comm.broadcast(x, ["meta", "cpu", "meta"])
    assert other is x and first is not again and first.device.type == again.device.type == "meta"
    a, b = torch.ones(2), torch.ones(3)
    mine, there_, again_ = compat.comm.broadcast_coalesced([a, b], ["cpu", "meta", "cpu"], 1)
    assert mine[0] is a and mine[1] is b and [t.device.type for t in there_] == ["meta", "meta"]
    assert [_ptr(t) for t in again_] == [_ptr(a), _ptr(b)]
    # A sum on a device that is not the inputs' (torch.cuda.comm refuses it): a new tensor.
    assert compat.comm.reduce_add([x], "meta").device.type == "meta"
    assert [t.device.type for t in compat.comm.reduce_add_coalesced([[a, b]], "meta", 1)] == [
        "meta",
        "meta",
    ]


# -- the delegation to torch.cuda.comm, on CPU ---------------------------------------------------


def _cpu_index(device: Any = None, optional: bool = False, allow_cpu: bool = False) -> int:
    """torch._utils._get_device_index with CPU allowed: -1, what Tensor.get_device() is for a CPU
    tensor, and what comm.cpp compares device indices with. None, the current device, is CPU."""
    from torch._utils import _get_device_index

    return -1 if device is None else _get_device_index(device, optional, allow_cpu=True)


class _CommCpp:
    """torch/csrc/cuda/comm.cpp (torch 2.13) in Python, device index -1 being CPU: the bindings
    torch.nn.parallel.comm calls (torch._C._broadcast, ...), which a CPU build lacks. Each
    function is the C++ one statement by statement; the flat buffers are ATen's own
    (torch._utils._flatten_dense_tensors, at::flatten_dense_tensors)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch

    def device(self, index: int) -> Any:
        return self.torch.device("cpu") if index == -1 else self.torch.device("cuda", index)

    def _broadcast(self, tensor: Any, devices: list[int]) -> list[Any]:
        # diff_device_dst_tensors: at::empty per other device, copied into; `tensor` itself else.
        return [
            tensor
            if device == tensor.get_device()
            else self.torch.empty(
                tensor.shape, dtype=tensor.dtype, device=self.device(device)
            ).copy_(tensor)
            for device in devices
        ]

    def _broadcast_out(self, tensor: Any, out: list[Any]) -> list[Any]:
        for item in out:
            item.copy_(tensor)
        return list(out)

    def _take_tensors(self, tensors: list[Any], size_limit: int) -> list[list[Any]]:
        # torch/csrc/utils/tensor_flatten.cpp take_tensors, fine_grained false.
        results: list[list[Any]] = []
        groups: dict[Any, tuple[list[Any], int]] = {}
        for tensor in tensors:
            group, size = groups.get(tensor.dtype, ([], 0))
            group.append(tensor)
            size += tensor.numel() * tensor.element_size()
            if size >= size_limit:
                results.append(group)
                group, size = [], 0
            groups[tensor.dtype] = (group, size)
        return results + [group for group, _ in groups.values() if group]

    def _broadcast_coalesced(
        self, tensors: list[Any], devices: list[int], buffer_size: int
    ) -> list[list[Any]]:
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        outputs: list[list[Any]] = [list(tensors)] + [[] for _ in devices[1:]]
        for chunk in self._take_tensors(tensors, buffer_size):
            results = self._broadcast(_flatten_dense_tensors(chunk), devices)
            for i in range(1, len(devices)):
                # make_variable(var.tensor_data(), false): .data
                outputs[i] += [t.data for t in _unflatten_dense_tensors(results[i], chunk)]
        # reorder_tensors_like: per dtype, in the order of `tensors`.
        for i, row in enumerate(outputs):
            by_type: dict[Any, Iterator[Any]] = {}
            for dtype in {t.dtype for t in row}:
                by_type[dtype] = iter([t for t in row if t.dtype == dtype])
            outputs[i] = [next(by_type[t.dtype]) for t in tensors]
        return outputs

    def _scatter(
        self, tensor: Any, devices: list[int], chunk_sizes: Any, dim: int, streams: Any
    ) -> list[Any]:
        if chunk_sizes is not None:
            chunks = list(tensor.split_with_sizes(chunk_sizes, dim))
        else:
            chunks = list(tensor.chunk(len(devices), dim))
        for i, chunk in enumerate(chunks):
            if devices[i] != tensor.get_device():
                chunks[i] = chunk.to(
                    self.device(devices[i]),
                    non_blocking=True,
                    copy=False,
                    memory_format=self.torch.preserve_format,
                )
        return chunks

    def _scatter_out(self, tensor: Any, out: list[Any], dim: int, streams: Any) -> list[Any]:
        chunks = tensor.split_with_sizes([item.size(dim) for item in out], dim)
        for item, chunk in zip(out, chunks, strict=True):
            item.copy_(chunk)
        return list(out)

    def _gather_out(self, tensors: list[Any], out: Any, dim: int) -> Any:
        pieces = out.split_with_sizes([tensor.size(dim) for tensor in tensors], dim)
        for piece, tensor in zip(pieces, tensors, strict=True):
            piece.copy_(tensor)
        return out

    def _gather(self, tensors: list[Any], dim: int, destination_index: int | None) -> Any:
        size = list(tensors[0].shape)
        size[dim] = sum(tensor.size(dim) for tensor in tensors)
        device = self.device(-1 if destination_index is None else destination_index)
        result = self.torch.empty(size, dtype=tensors[0].dtype, device=device)
        return self._gather_out(tensors, result, dim)


def _reduce_add(inputs: Sequence[Any], destination: Any = None) -> Any:
    """torch/nn/parallel/comm.py reduce_add, statement by statement, without its refusal of CPU
    inputs and without NCCL (which takes no CPU tensor)."""
    destination = _cpu_index(destination, optional=True)
    root_index = None
    for i, inp in enumerate(inputs):
        if inp.get_device() == destination:
            root_index = i
    if root_index is None:
        raise RuntimeError(
            "reduce_add expects destination to be on the same GPU with one of the tensors"
        )
    if len(inputs) == 1:
        return inputs[0]
    root = inputs[root_index]
    nonroot = [t for i, t in enumerate(inputs) if i != root_index]
    result = root + nonroot[0].to(device=root.device, non_blocking=True)
    for other in nonroot[1:]:
        result.add_(other.to(device=root.device, non_blocking=True))
    return result


@pytest.fixture
def cpu_native(monkeypatch: pytest.MonkeyPatch) -> Any:
    """compat.comm delegating torch CPU calls to torch.nn.parallel.comm (torch.cuda.comm's code)
    over _CommCpp."""
    torch = pytest.importorskip("torch")
    import torch.nn.parallel.comm as native

    cpp = _CommCpp(torch)
    for name in [
        "_broadcast",
        "_broadcast_out",
        "_broadcast_coalesced",
        "_scatter",
        "_scatter_out",
        "_gather",
        "_gather_out",
    ]:
        monkeypatch.setattr(torch._C, name, getattr(cpp, name), raising=False)
    monkeypatch.setattr(native, "_get_device_index", _cpu_index)
    monkeypatch.setattr(native, "reduce_add", _reduce_add)  # reduce_add_coalesced's too
    calls: list[str] = []

    def native_comm(framework: str, devices: Sequence[str]) -> Any:
        calls.append(framework)
        return native if framework == "torch" and devices else None

    monkeypatch.setattr(compat.comm, "_native_comm", native_comm)
    return calls


def _structure(result: Any, inputs: list[Any], outs: list[Any]) -> Any:
    """What ``result`` is, to compare two calls by: its containers, and for each tensor its
    values, whether it is one of ``inputs`` or ``outs``, its address relative to each input,
    and which inputs, outs and other results a write into it changes."""
    import torch

    leaves: list[Any] = []

    def shape(obj: Any) -> Any:
        if isinstance(obj, (list, tuple)):
            return (type(obj).__name__, [shape(item) for item in obj])
        leaves.append(obj)
        return len(leaves) - 1

    layout = shape(result)
    described = []
    for leaf in leaves:
        described.append(
            (
                leaf.dtype,
                leaf.tolist(),
                [leaf is item for item in inputs + outs],
                [leaf.numel() > 0 and leaf.data_ptr() == item.data_ptr() for item in inputs],
            )
        )
    everything = inputs + outs + leaves
    for index, leaf in enumerate(leaves):
        before = [item.clone() for item in everything]
        leaf.fill_(next(_MARKS))
        changed = [not torch.equal(a, b) for a, b in zip(everything, before, strict=True)]
        described[index] += (changed,)
    return layout, described


def _torch_tensors(*shapes: tuple[int, ...]) -> list[Any]:
    import torch

    return [torch.from_numpy(_data(shape) + index).float() for index, shape in enumerate(shapes)]


def _torch_outs(*shapes: tuple[int, ...]) -> list[Any]:
    import torch

    return [torch.full(shape, float(SENTINEL)) for shape in shapes]


def _bucketed() -> list[Any]:
    """As _bucket_tensors: a, b float32, c int64, d float32 not contiguous, e empty."""
    made = _torch_tensors((2, 3), (4,), (3,), (2, 3), (0,))
    made[2], made[3] = made[2].long(), made[3].t()
    return made


def _none() -> list[Any]:
    return []


_CPU3 = ["cpu", "cpu:0", "cpu"]
comm = compat.comm
Run = Callable[[list[Any], list[Any]], Any]

#: (name, make inputs, make outs, call with them): torch CPU calls.
NATIVE_CASES: list[tuple[str, Callable[[], list[Any]], Callable[[], list[Any]], Run]] = [
    ("scatter", lambda: _torch_tensors((5, 3)), _none, lambda i, o: comm.scatter(i[0], _CPU3)),
    (
        "scatter dim 1",
        lambda: _torch_tensors((2, 5)),
        _none,
        lambda i, o: comm.scatter(i[0], _CPU3, [2, 0, 3], 1),
    ),
    (
        "scatter out",
        lambda: _torch_tensors((4, 3)),
        lambda: _torch_outs((1, 3), (3, 3)),
        lambda i, o: comm.scatter(i[0], out=o),
    ),
    ("gather", lambda: _torch_tensors((2, 3), (1, 3)), _none, lambda i, o: comm.gather(i)),
    ("gather one", lambda: _torch_tensors((2, 3)), _none, lambda i, o: comm.gather(i, 0, "cpu")),
    (
        "gather out",
        lambda: _torch_tensors((2, 3), (1, 3)),
        lambda: _torch_outs((3, 3)),
        lambda i, o: comm.gather(i, out=o[0]),
    ),
    ("broadcast", lambda: _torch_tensors((2, 3)), _none, lambda i, o: comm.broadcast(i[0], _CPU3)),
    (
        "broadcast out",
        lambda: _torch_tensors((2, 3)),
        lambda: _torch_outs((2, 3), (2, 3)),
        lambda i, o: comm.broadcast(i[0], out=o),
    ),
    *(
        (
            f"broadcast_coalesced {size}",
            _bucketed,
            _none,
            lambda i, o, size=size: comm.broadcast_coalesced(i, _CPU3, size),
        )
        for size in _BROADCAST_VIEWS
    ),
    ("reduce_add one", lambda: _torch_tensors((2, 3)), _none, lambda i, o: comm.reduce_add(i)),
    (
        "reduce_add",
        lambda: _torch_tensors((2, 3), (2, 3), (2, 3)),
        _none,
        lambda i, o: comm.reduce_add(i, "cpu"),
    ),
    *(
        (
            f"reduce_add_coalesced one list {size}",
            _bucketed,
            _none,
            lambda i, o, size=size: comm.reduce_add_coalesced([i], "cpu", size),
        )
        for size in _REDUCE_VIEWS
    ),
    (
        "reduce_add_coalesced",
        lambda: _torch_tensors((2, 3), (4,), (2, 3), (4,)),
        _none,
        lambda i, o: comm.reduce_add_coalesced([i[:2], i[2:]]),
    ),
]


@pytest.mark.parametrize(
    ("name", "make_inputs", "make_outs", "run"), NATIVE_CASES, ids=[c[0] for c in NATIVE_CASES]
)
def test_delegation_and_adapter_paths_give_the_same_results(
    cpu_native: list[str],
    name: str,
    make_inputs: Callable[[], list[Any]],
    make_outs: Callable[[], list[Any]],
    run: Run,
) -> None:
    inputs, outs = make_inputs(), make_outs()
    delegated = _structure(run(inputs, outs), inputs, outs)
    assert cpu_native == ["torch"]  # it did delegate, to torch.nn.parallel.comm
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compat.comm, "_native_comm", lambda framework, devices: None)
        inputs, outs = make_inputs(), make_outs()
        own = _structure(run(inputs, outs), inputs, outs)
    assert delegated == own


# -- rules ---------------------------------------------------------------------------------------

# Each case: (name, call(kit, out_buffers) -> None, exception, message fragments). ``out_buffers``
# is a list the call may fill with the sentinel-filled tensors it passes (out tensors, or inputs of
# the functions without out); they must be left untouched.
Case = tuple[str, Callable[[Kit, list[Any]], Any], type[Exception], list[str]]


def _t(kit: Kit, shape: tuple[int, ...] = (4, 3), dtype: str = "float32") -> Any:
    return kit.tensor(_data(shape), dtype)


def _outs(kit: Kit, keep: list[Any], *specs: tuple[tuple[int, ...], str]) -> list[Any]:
    out = [kit.full(shape, dtype) for shape, dtype in specs]
    keep.extend(out)
    return out


def _cpu(kit: Kit, n: int) -> list[Any]:
    return [kit.cpu_names[0]] * n


def _scatter_cases() -> Iterator[Case]:
    s = compat.comm.scatter
    f32 = ((2, 3), "float32")
    yield (
        "tensor",
        lambda k, o: s([1, 2], _cpu(k, 2)),
        TypeError,
        ["tensor: expected a tensor", "got list [1, 2]"],
    )
    yield (
        "neither",
        lambda k, o: s(_t(k)),
        ValueError,
        ["devices, out: expected exactly one", "got neither"],
    )
    yield (
        "both",
        lambda k, o: s(_t(k), _cpu(k, 2), out=_outs(k, o, f32, f32)),
        ValueError,
        ["devices, out: expected exactly one", "got both"],
    )
    yield (
        "devices str",
        lambda k, o: s(_t(k), "cpu"),
        TypeError,
        ["devices: expected a list of devices", "got str 'cpu'"],
    )
    yield (
        "devices empty",
        lambda k, o: s(_t(k), []),
        ValueError,
        ["devices: expected at least one device", "got an empty list"],
    )
    yield (
        "device missing",
        lambda k, o: s(_t(k), [k.cpu_names[0], k.missing_device]),
        ValueError,
        ["devices[1]: expected one of this process's", "devices [", "got"],
    )
    yield (
        "device type",
        lambda k, o: s(_t(k), [1.5]),
        TypeError,
        ["devices[0]: expected a", "device", "got float 1.5"],
    )
    yield (
        "chunk_sizes length",
        lambda k, o: s(_t(k), _cpu(k, 2), [1, 1, 2]),
        ValueError,
        ["chunk_sizes: expected 2 sizes", "got 3: [1, 1, 2]"],
    )
    yield (
        "chunk_sizes sum",
        lambda k, o: s(_t(k), _cpu(k, 2), [1, 2]),
        ValueError,
        ["chunk_sizes: expected sizes summing to 4", "got [1, 2] (sum 3)"],
    )
    yield (
        "chunk_sizes negative",
        lambda k, o: s(_t(k), _cpu(k, 2), [-1, 5]),
        ValueError,
        ["chunk_sizes: expected sizes >= 0", "got [-1, 5]"],
    )
    yield (
        "chunk_sizes item type",
        lambda k, o: s(_t(k), _cpu(k, 2), [2, 2.0]),
        TypeError,
        ["chunk_sizes[1]: expected an int", "got float 2.0"],
    )
    yield (
        "chunk_sizes type",
        lambda k, o: s(_t(k), _cpu(k, 2), 2),
        TypeError,
        ["chunk_sizes: expected a list of ints", "got int 2"],
    )
    yield (
        "chunk_sizes with out",
        lambda k, o: s(_t(k), chunk_sizes=[2, 2], out=_outs(k, o, f32, f32)),
        ValueError,
        ["chunk_sizes: expected None when out is given", "got list [2, 2]"],
    )
    yield (
        "dim range",
        lambda k, o: s(_t(k), _cpu(k, 2), dim=2),
        ValueError,
        ["dim: expected an int in [-2, 1]", "got 2"],
    )
    yield (
        "dim range out",
        lambda k, o: s(_t(k), dim=-3, out=_outs(k, o, f32, f32)),
        ValueError,
        ["dim: expected an int in [-2, 1]", "got -3"],
    )
    yield (
        "dim type",
        lambda k, o: s(_t(k), _cpu(k, 2), dim="0"),
        TypeError,
        ["dim: expected an int", "got str '0'"],
    )
    yield (
        "dim 0-d",
        lambda k, o: s(_t(k, ()), _cpu(k, 1)),
        ValueError,
        ["dim: expected a dimension of tensor", "0-d", "got 0"],
    )
    yield (
        "streams",
        lambda k, o: s(_t(k), streams=[None, None], out=_outs(k, o, f32, f32)),
        ValueError,
        ["streams: expected None", "got list [None, None]"],
    )
    yield (
        "out empty",
        lambda k, o: s(_t(k), out=[]),
        ValueError,
        ["out: expected at least one tensor", "got an empty list"],
    )
    yield (
        "out type",
        lambda k, o: s(_t(k), out=_t(k)),
        TypeError,
        ["out: expected a list of tensors", "got a"],
    )
    yield (
        "out item type",
        lambda k, o: s(_t(k), out=[*_outs(k, o, f32), np.zeros((2, 3), np.float32)]),
        TypeError,
        ["out[1]: expected a", "tensor (as tensor)", "got ndarray"],
    )
    yield (
        "out dtype",
        lambda k, o: s(_t(k), out=_outs(k, o, f32, ((2, 3), "int64"))),
        TypeError,
        ["out[1]: expected dtype float32", "got int64"],
    )
    yield (
        "out shape",
        lambda k, o: s(_t(k), out=_outs(k, o, f32, ((2, 2), "float32"))),
        ValueError,
        ["out[1]: expected shape (*, 3)", "got (2, 2)"],
    )
    yield (
        "out ndim",
        lambda k, o: s(_t(k), out=_outs(k, o, f32, ((2, 3, 1), "float32"))),
        ValueError,
        ["out[1]: expected shape (*, 3)", "got (2, 3, 1)"],
    )
    yield (
        "out sum",
        lambda k, o: s(_t(k), out=_outs(k, o, f32, ((1, 3), "float32"))),
        ValueError,
        ["out: expected sizes on dim 0 summing to 4", "got [2, 1] (sum 3)"],
    )


def _gather_cases() -> Iterator[Case]:
    g = compat.comm.gather
    out43 = ((4, 3), "float32")
    yield (
        "tensors tensor",
        lambda k, o: g(_t(k)),
        TypeError,
        ["tensors: expected a list of tensors", "got a"],
    )
    yield (
        "tensors empty",
        lambda k, o: g([]),
        ValueError,
        ["tensors: expected at least one tensor", "got an empty list"],
    )
    yield (
        "tensors[0]",
        lambda k, o: g([[1.0], _t(k)]),
        TypeError,
        ["tensors[0]: expected a tensor", "got list [1.0]"],
    )
    yield (
        "tensors[1] type",
        lambda k, o: g([_t(k, (2, 3)), np.zeros((2, 3))], out=_outs(k, o, out43)[0]),
        TypeError,
        ["tensors[1]: expected a", "tensor (as tensors[0])", "got ndarray"],
    )
    yield (
        "tensors[1] dtype",
        lambda k, o: g([_t(k, (2, 3)), _t(k, (2, 3), "int64")], out=_outs(k, o, out43)[0]),
        TypeError,
        ["tensors[1]: expected dtype float32 (the dtype of tensors[0]", "got int64"],
    )
    yield (
        "tensors[1] shape",
        lambda k, o: g([_t(k, (2, 3)), _t(k, (2, 2))], out=_outs(k, o, out43)[0]),
        ValueError,
        ["tensors[1]: expected shape (*, 3) (tensors[0]'s shape except on dim 0)", "got (2, 2)"],
    )
    yield (
        "tensors[1] ndim",
        lambda k, o: g([_t(k, (2, 3)), _t(k, (2,))]),
        ValueError,
        ["tensors[1]: expected shape (*, 3)", "got (2,)"],
    )
    yield (
        "dim",
        lambda k, o: g([_t(k)], 2, out=_outs(k, o, out43)[0]),
        ValueError,
        ["dim: expected an int in [-2, 1]", "got 2"],
    )
    yield (
        "dim type",
        lambda k, o: g([_t(k)], None),
        TypeError,
        ["dim: expected an int", "got NoneType None"],
    )
    yield (
        "destination with out",
        lambda k, o: g([_t(k)], destination=k.cpu_names[0], out=_outs(k, o, out43)[0]),
        ValueError,
        ["destination: expected None when out is given", "got"],
    )
    yield (
        "destination missing",
        lambda k, o: g([_t(k)], destination=k.missing_device),
        ValueError,
        ["destination: expected one of this process's", "got"],
    )
    yield (
        "destination type",
        lambda k, o: g([_t(k)], destination=[k.cpu_names[0]]),
        TypeError,
        ["destination: expected a", "device", "got list"],
    )
    yield (
        "out type",
        lambda k, o: g([_t(k)], out=[_t(k)]),
        TypeError,
        ["out: expected a", "tensor (as tensors)", "got list"],
    )
    yield (
        "out dtype",
        lambda k, o: g([_t(k)], out=_outs(k, o, ((4, 3), "bfloat16"))[0]),
        TypeError,
        ["out: expected dtype float32", "got bfloat16"],
    )
    yield (
        "out shape",
        lambda k, o: g([_t(k), _t(k)], out=_outs(k, o, out43)[0]),
        ValueError,
        ["out: expected shape (8, 3)", "got (4, 3)"],
    )


def _broadcast_cases() -> Iterator[Case]:
    b = compat.comm.broadcast
    f43 = ((4, 3), "float32")
    yield (
        "tensor",
        lambda k, o: b(3.0, _cpu(k, 1)),
        TypeError,
        ["tensor: expected a tensor", "got float 3.0"],
    )
    yield (
        "neither",
        lambda k, o: b(_t(k)),
        ValueError,
        ["devices, out: expected exactly one", "got neither"],
    )
    yield (
        "both",
        lambda k, o: b(_t(k), _cpu(k, 1), out=_outs(k, o, f43)),
        ValueError,
        ["devices, out: expected exactly one", "got both"],
    )
    yield (
        "devices type",
        lambda k, o: b(_t(k), k.cpu_names[0]),
        TypeError,
        ["devices: expected a list of devices", "got"],
    )
    yield (
        "device missing",
        lambda k, o: b(_t(k), [k.missing_device]),
        ValueError,
        ["devices[0]: expected one of this process's", "got"],
    )
    yield (
        "out type",
        lambda k, o: b(_t(k), out=_outs(k, o, f43)[0]),
        TypeError,
        ["out: expected a list of tensors", "got a"],
    )
    yield (
        "out dtype",
        lambda k, o: b(_t(k), out=_outs(k, o, f43, ((4, 3), "int32"))),
        TypeError,
        ["out[1]: expected dtype float32", "got int32"],
    )
    yield (
        "out shape",
        lambda k, o: b(_t(k), out=_outs(k, o, f43, ((3, 4), "float32"))),
        ValueError,
        ["out[1]: expected shape (4, 3) (tensor's shape)", "got (3, 4)"],
    )


def _broadcast_coalesced_cases() -> Iterator[Case]:
    bc = compat.comm.broadcast_coalesced
    f23, i5 = ((2, 3), "float32"), ((5,), "int64")
    yield (
        "tensors type",
        lambda k, o: bc(_outs(k, o, f23)[0], _cpu(k, 2)),
        TypeError,
        ["tensors: expected a list of tensors", "got a"],
    )
    yield (
        "tensors[0]",
        lambda k, o: bc([1.0], _cpu(k, 2)),
        TypeError,
        ["tensors[0]: expected a tensor", "got float 1.0"],
    )
    yield (
        "tensors[1] type",
        lambda k, o: bc([*_outs(k, o, f23), np.zeros(2)], _cpu(k, 2)),
        TypeError,
        ["tensors[1]: expected a", "tensor (as tensors[0])", "got ndarray"],
    )
    yield (
        "devices empty",
        lambda k, o: bc(_outs(k, o, f23, i5), []),
        ValueError,
        ["devices: expected at least one device", "got an empty list"],
    )
    yield (
        "devices empty without tensors",
        lambda k, o: bc([], []),
        ValueError,
        ["devices: expected at least one device", "got an empty list"],
    )
    yield (
        "devices type",
        lambda k, o: bc(_outs(k, o, f23), "cpu"),
        TypeError,
        ["devices: expected a list of devices", "got str 'cpu'"],
    )
    yield (
        "device missing",
        lambda k, o: bc(_outs(k, o, f23, i5), [k.cpu_names[0], k.missing_device]),
        ValueError,
        ["devices[1]: expected one of this process's", "got"],
    )
    yield (
        "buffer_size 0",
        lambda k, o: bc(_outs(k, o, f23, i5), _cpu(k, 2), 0),
        ValueError,
        ["buffer_size: expected an int > 0", "got 0"],
    )
    yield (
        "buffer_size without tensors",
        lambda k, o: bc([], _cpu(k, 2), -1),
        ValueError,
        ["buffer_size: expected an int > 0", "got -1"],
    )
    yield (
        "buffer_size type",
        lambda k, o: bc(_outs(k, o, f23), _cpu(k, 2), 1.5),
        TypeError,
        ["buffer_size: expected an int", "got float 1.5"],
    )


def _reduce_add_cases() -> Iterator[Case]:
    ra = compat.comm.reduce_add
    f43 = ((4, 3), "float32")
    yield (
        "inputs tensor",
        lambda k, o: ra(_outs(k, o, f43)[0]),
        TypeError,
        ["inputs: expected a list of tensors", "got a"],
    )
    yield (
        "inputs empty",
        lambda k, o: ra([]),
        ValueError,
        ["inputs: expected at least one tensor", "got an empty list"],
    )
    yield (
        "inputs[0]",
        lambda k, o: ra([[1.0], *_outs(k, o, f43)]),
        TypeError,
        ["inputs[0]: expected a tensor", "got list [1.0]"],
    )
    yield (
        "inputs[1] type",
        lambda k, o: ra([*_outs(k, o, f43), np.zeros((4, 3), np.float32)]),
        TypeError,
        ["inputs[1]: expected a", "tensor (as inputs[0])", "got ndarray"],
    )
    yield (
        "inputs[1] dtype",
        lambda k, o: ra(_outs(k, o, f43, ((4, 3), "int64"))),
        TypeError,
        [
            "inputs[1]: expected dtype float32 (the dtype of inputs[0]; compat does not cast)",
            "int64",
        ],
    )
    yield (
        "inputs[2] shape",
        lambda k, o: ra(_outs(k, o, f43, f43, ((3, 4), "float32"))),
        ValueError,
        ["inputs[2]: expected shape (4, 3) (inputs[0]'s shape)", "got (3, 4)"],
    )
    yield (
        "destination missing",
        lambda k, o: ra(_outs(k, o, f43, f43), k.missing_device),
        ValueError,
        ["destination: expected one of this process's", "got"],
    )
    yield (
        "destination -2",
        lambda k, o: ra(_outs(k, o, f43, f43), -2),
        ValueError,
        ["destination: expected one of this process's", "got -2"],
    )
    yield (
        "destination type",
        lambda k, o: ra(_outs(k, o, f43, f43), [k.cpu_names[0]]),
        TypeError,
        ["destination: expected a", "device", "got list"],
    )


def _reduce_add_coalesced_cases() -> Iterator[Case]:
    rac = compat.comm.reduce_add_coalesced
    f43, i2 = ((4, 3), "float32"), ((2,), "int64")
    yield (
        "inputs tensor",
        lambda k, o: rac(_outs(k, o, f43)[0]),
        TypeError,
        ["inputs: expected a list of lists of tensors", "got a"],
    )
    yield (
        "inputs[1] tensor",
        lambda k, o: rac([_outs(k, o, f43), _outs(k, o, f43)[0]]),
        TypeError,
        ["inputs[1]: expected a list of tensors", "got a"],
    )
    yield (
        "inputs[1] length",
        lambda k, o: rac([_outs(k, o, f43, i2), _outs(k, o, f43)]),
        ValueError,
        ["inputs[1]: expected 2 tensors (as inputs[0])", "got 1"],
    )
    yield (
        "inputs[0][0]",
        lambda k, o: rac([[1.0], _outs(k, o, f43)]),
        TypeError,
        ["inputs[0][0]: expected a tensor", "got float 1.0"],
    )
    yield (
        "inputs[0][1] type",
        lambda k, o: rac([[*_outs(k, o, f43), np.zeros(2)], _outs(k, o, f43, i2)]),
        TypeError,
        ["inputs[0][1]: expected a", "tensor (as inputs[0][0])", "got ndarray"],
    )
    yield (
        "inputs[1][1] dtype",
        lambda k, o: rac([_outs(k, o, f43, i2), _outs(k, o, f43, ((2,), "int32"))]),
        TypeError,
        ["inputs[1][1]: expected dtype int64 (the dtype of inputs[0][1]", "got int32"],
    )
    yield (
        "inputs[1][0] shape",
        lambda k, o: rac([_outs(k, o, f43, i2), _outs(k, o, ((3, 4), "float32"), i2)]),
        ValueError,
        ["inputs[1][0]: expected shape (4, 3) (inputs[0][0]'s shape)", "got (3, 4)"],
    )
    yield (
        "destination missing",
        lambda k, o: rac([_outs(k, o, f43), _outs(k, o, f43)], k.missing_device),
        ValueError,
        ["destination: expected one of this process's", "got"],
    )
    yield (
        "buffer_size bool",
        lambda k, o: rac([_outs(k, o, f43), _outs(k, o, f43)], buffer_size=True),
        TypeError,
        ["buffer_size: expected an int", "got bool True"],
    )
    yield (
        "buffer_size without tensors",
        lambda k, o: rac([], buffer_size=0),
        ValueError,
        ["buffer_size: expected an int > 0", "got 0"],
    )


CASES = [
    *(("scatter", *case) for case in _scatter_cases()),
    *(("gather", *case) for case in _gather_cases()),
    *(("broadcast", *case) for case in _broadcast_cases()),
    *(("broadcast_coalesced", *case) for case in _broadcast_coalesced_cases()),
    *(("reduce_add", *case) for case in _reduce_add_cases()),
    *(("reduce_add_coalesced", *case) for case in _reduce_add_coalesced_cases()),
]


@pytest.mark.parametrize(
    ("function", "name", "call", "error", "fragments"),
    CASES,
    ids=[f"{function}-{name}" for function, name, *_ in CASES],
)
def test_rule_violation(
    kit: Kit,
    function: str,
    name: str,
    call: Callable[[Kit, list[Any]], Any],
    error: type[Exception],
    fragments: list[str],
) -> None:
    out_buffers: list[Any] = []
    with pytest.raises(Exception) as info:
        call(kit, out_buffers)
    assert type(info.value) is error, f"{type(info.value).__name__}: {info.value}"
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    for buffer in out_buffers:  # checks run before anything is written
        assert (kit.numpy(buffer) == SENTINEL).all(), f"out written: {kit.numpy(buffer)}"


def test_mixed_frameworks_are_refused() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("mindspore")
    ms_kit = MindSporeKit()
    with pytest.raises(
        TypeError, match=r"tensors\[1\]: expected a torch tensor .* got a mindspore"
    ):
        compat.comm.gather([torch.ones(2), ms_kit.tensor([1.0, 2.0], "float32")])
    out = [ms_kit.full((2,), "float32")]
    with pytest.raises(TypeError, match=r"out\[0\]: expected a torch tensor .* got a mindspore"):
        compat.comm.broadcast(torch.ones(2), out=out)
    assert (ms_kit.numpy(out[0]) == SENTINEL).all()
    with pytest.raises(TypeError, match=r"inputs\[1\]: expected a torch tensor .* got a mindspore"):
        compat.comm.reduce_add([torch.ones(2), out[0]])
    with pytest.raises(TypeError, match=r"inputs\[1\]\[0\]: expected a torch tensor .* got a"):
        compat.comm.reduce_add_coalesced([[torch.ones(2)], out])
    with pytest.raises(
        TypeError, match=r"tensors\[1\]: expected a torch tensor .* got a mindspore"
    ):
        compat.comm.broadcast_coalesced([torch.ones(2), out[0]], ["cpu"])
    assert (ms_kit.numpy(out[0]) == SENTINEL).all()


def test_coalesced_tensors_must_share_their_device() -> None:
    # torch.cuda.comm's rules: broadcast_coalesced's tensors on devices[0], each list of
    # reduce_add_coalesced on one device. A "meta" tensor is on another device than the CPU.
    torch = pytest.importorskip("torch")
    cpu, meta = torch.ones(2), torch.ones(2, device="meta")
    with pytest.raises(
        ValueError, match=r"tensors\[1\]: expected a tensor on devices\[0\] \(cpu\)"
    ):
        compat.comm.broadcast_coalesced([cpu, meta], ["cpu"])
    with pytest.raises(ValueError, match=r"inputs\[0\]\[1\]: expected a tensor on cpu, as inputs"):
        compat.comm.reduce_add_coalesced([[cpu, meta], [cpu, cpu]])


def test_import_compat_loads_comm_without_a_framework() -> None:
    code = (
        "import sys, compat; compat.comm.scatter; "
        "loaded = [m for m in ('torch', 'mindspore') if m in sys.modules]; "
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, f"import compat imported {result.stdout} {result.stderr}"


# -- compat port ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        ("comm.broadcast_coalesced([a, b], [0, 1], 1024)", "broadcast_coalesced"),
        ("comm.reduce_add([a, b], destination=0)", "reduce_add"),
        ("comm.reduce_add_coalesced([[a], [b]], 0, buffer_size=4096)", "reduce_add_coalesced"),
    ],
)
def test_port_rewrites_every_torch_cuda_comm_function(call: str, name: str) -> None:
    pytest.importorskip("libcst")
    from compat.tools import port

    for imports, prefix in [
        ("import torch.cuda.comm as comm", "comm."),
        ("import torch", "torch.cuda.comm."),
        ("from torch.cuda import comm", "comm."),
    ]:
        source = f"{imports}\n{call.replace('comm.', prefix, 1)}\n"
        result = port.port_source(source)
        assert [f.compat for f in result.findings] == [f"compat.comm.{name}"], source
        assert f"{call.replace('comm.', 'compat.comm.', 1)}\n" in result.rewritten, result.rewritten
        assert "torch.cuda" not in result.rewritten


# -- CUDA: delegation to torch.cuda.comm -----------------------------------------------------------


@pytest.fixture(scope="module")
def cuda() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the delegation to torch.cuda.comm cannot run here")
    return torch


def test_cuda_scatter_gather_broadcast_match_torch_cuda_comm(cuda: Any) -> None:
    import torch.cuda.comm as native

    torch = cuda
    devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())] * 2
    tensor = torch.arange(24.0).reshape(8, 3)
    ours = compat.comm.scatter(tensor, devices)
    theirs = native.scatter(tensor, devices)
    assert [(t.device, t.tolist()) for t in ours] == [(t.device, t.tolist()) for t in theirs]
    gathered = compat.comm.gather(ours, destination="cpu")
    assert torch.equal(gathered, tensor)
    assert torch.equal(compat.comm.gather(ours).cpu(), tensor)
    copies = compat.comm.broadcast(tensor, devices)
    assert [c.device for c in copies] == [torch.device(d) for d in devices]
    assert all(torch.equal(c.cpu(), tensor) for c in copies)
    with pytest.raises(ValueError, match=r"chunk_sizes: expected sizes summing to 8"):
        compat.comm.scatter(tensor, devices, chunk_sizes=[1] * len(devices))
    # On the tensor's own GPU, torch.cuda.comm's views and the tensor itself, as compat's.
    for run in [
        lambda comm, x: comm.scatter(x, devices),
        lambda comm, x: comm.broadcast(x, devices),
        lambda comm, x: comm.gather([x, x], destination=devices[0]),
    ]:
        mine = torch.arange(24.0, device=devices[0]).reshape(8, 3)
        theirs_ = torch.arange(24.0, device=devices[0]).reshape(8, 3)
        assert _structure(run(compat.comm, mine), [mine], []) == _structure(
            run(native, theirs_), [theirs_], []
        )


def test_cuda_coalesced_and_reduce_add_match_torch_cuda_comm(cuda: Any) -> None:
    import torch.cuda.comm as native

    torch = cuda
    devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    first = [torch.arange(6.0, device=devices[0]).reshape(2, 3), torch.arange(3, device=devices[0])]
    ours = compat.comm.broadcast_coalesced(first, devices)
    theirs = native.broadcast_coalesced(first, devices)
    assert [[(t.device, t.tolist()) for t in row] for row in ours] == [
        [(t.device, t.tolist()) for t in row] for row in theirs
    ]
    assert all(mine is tensor for mine, tensor in zip(ours[0], first, strict=True))
    for size in [10485760, 1]:  # devices[0] again: flat-buffer views, as torch.cuda.comm's
        mine, theirs_ = _bucketed(), _bucketed()
        mine, theirs_ = [t.to(devices[0]) for t in mine], [t.to(devices[0]) for t in theirs_]
        again = [devices[0], *devices, devices[0]]
        assert _structure(compat.comm.broadcast_coalesced(mine, again, size), mine, []) == (
            _structure(native.broadcast_coalesced(theirs_, again, size), theirs_, [])
        )
        assert _structure(compat.comm.reduce_add_coalesced([mine], devices[0], size), mine, []) == (
            _structure(native.reduce_add_coalesced([theirs_], devices[0], size), theirs_, [])
        )
    alone = first[0]
    assert compat.comm.reduce_add([alone], devices[0]) is native.reduce_add([alone], devices[0])
    inputs = [[t.to(device) + i for t in first] for i, device in enumerate(devices)]
    for destination in [None, devices[-1], "cpu"]:
        summed = compat.comm.reduce_add([row[0] for row in inputs], destination)
        expected = sum(row[0].cpu() for row in inputs)
        assert torch.equal(summed.cpu(), expected)
        sums = compat.comm.reduce_add_coalesced(inputs, destination)
        assert [s.cpu().tolist() for s in sums] == [
            sum(row[j].cpu() for row in inputs).tolist() for j in range(len(first))
        ]
    with pytest.raises(TypeError, match=r"inputs\[1\]: expected dtype float32"):
        compat.comm.reduce_add([inputs[0][0], inputs[0][0].long()])
