"""The object collectives' bytes, without communication: objects pickled back to back into one
stream, padded, unpickled from views; and the adapters' byte tensors over that memory without a
copy (torch) or over a copy (bytes, read-only views, MindSpore), and read back through views.
The collectives themselves run on real ranks in tests/ranks/object_cases.py."""

from __future__ import annotations

import pickle

import numpy as np
import torch
from compat.adapters import torch as torch_adapter

from compat import objects

OBJECTS = [{"lr": 0.1}, "adam", None, b"\xff" * 70_000, list(range(1000))]


def test_objects_pickled_back_to_back_come_back_from_a_view_of_the_stream() -> None:
    stream, sizes = objects._dumps_all(OBJECTS, "object_list")
    assert len(sizes) == len(OBJECTS) and all(size > 0 for size in sizes)
    assert sum(sizes) == stream.tell()
    view = objects._writable(stream)
    assert len(view) == sum(sizes) and not view.readonly
    assert objects._split(view, sizes) == OBJECTS


def test_a_stream_padded_to_a_size_ends_in_zeros_and_its_object_reads_back() -> None:
    stream = objects._dumps("tail", "obj")
    size = stream.tell()
    view = objects._writable(stream, size + 37)
    assert len(view) == size + 37
    assert bytes(view[size:]) == bytes(37)
    assert pickle.loads(view[:size]) == "tail"
    unpadded = objects._writable(objects._dumps("tail", "obj"), 1)  # smaller: left as it is
    assert len(unpadded) == size


def test_an_object_that_cannot_be_pickled_names_the_list_entry() -> None:
    try:
        objects._dumps_all([1, lambda: 0], "object_list")
    except Exception as error:  # pickle raises PicklingError or AttributeError by version
        assert "object_list[1]: could not be pickled" in "".join(getattr(error, "__notes__", []))
    else:
        raise AssertionError("a lambda was pickled")


def test_torch_byte_tensors_take_a_writable_view_as_it_is_and_copy_anything_else() -> None:
    adapter = torch_adapter.TorchAdapter()
    stream = objects._dumps(b"abc", "obj")
    view = objects._writable(stream, stream.tell() + 8)
    tensor = adapter.bytes_tensor(view)
    assert tensor.dtype == torch.uint8 and tensor.shape == (len(view),)
    tensor[-1] = 7  # the stream's own memory: no copy
    assert view[-1] == 7

    data = b"\x01\x02\x03"
    copied = adapter.bytes_tensor(data)
    copied[0] = 9
    assert data == b"\x01\x02\x03" and copied.tolist() == [9, 2, 3]
    readonly = memoryview(bytes(data))
    from_readonly = adapter.bytes_tensor(readonly)
    from_readonly[0] = 9
    assert bytes(readonly) == data
    assert adapter.bytes_tensor(b"").shape == (0,)


def test_torch_bytes_view_reads_the_tensor_where_it_lies() -> None:
    adapter = torch_adapter.TorchAdapter()
    base = torch.full((16,), 0xEE, dtype=torch.uint8)
    tensor = base[4:12]
    tensor.copy_(torch.arange(8, dtype=torch.uint8))
    view = adapter.bytes_view(tensor)
    assert bytes(view) == bytes(range(8))
    tensor[0] = 200  # no copy: the view sees it
    assert view[0] == 200
    assert bytes(adapter.bytes_view(base[:4])) == b"\xee" * 4  # the sentinels around it
    assert len(adapter.bytes_view(torch.empty(0, dtype=torch.uint8))) == 0


def test_mindspore_byte_tensors_hold_the_bytes_and_read_back_through_a_view() -> None:
    import mindspore as ms
    from compat.adapters import mindspore as ms_adapter

    adapter = ms_adapter.MindSporeAdapter()
    stream, sizes = objects._dumps_all(OBJECTS, "object_list")
    view = objects._writable(stream)
    tensor = adapter.bytes_tensor(view)
    assert tensor.dtype == ms.uint8 and tuple(tensor.shape) == (len(view),)
    assert objects._split(adapter.bytes_view(tensor), sizes) == OBJECTS
    view[0] ^= 0xFF  # MindSpore's tensor holds a copy
    assert adapter.bytes_view(tensor)[0] == view[0] ^ 0xFF
    data = np.frombuffer(adapter.bytes_view(adapter.bytes_tensor(b"xyz")), dtype=np.uint8)
    assert data.tobytes() == b"xyz"
