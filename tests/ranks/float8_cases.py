"""float8 tensors (float8_e4m3fn, float8_e5m2) through every non-reducing collective: moved
exactly, bit for bit, on every backend (Gloo and MCCL lack the dtypes: compat moves their bytes,
capabilities.toml's ``as_bytes``), and refused by every reduction before any communication.

Each rank's values are all 256 byte patterns of the dtype (NaNs, infinities, negative zero
included), rotated by the rank, so every element a rank receives says where it came from. They
are compared as bytes (the tensors' uint8 views) against numpy, each output inside a base filled
with a sentinel byte, checked whole.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import compat
from tests.ranks.bad_input_cases import bad_case, refused_reduction
from tests.ranks.cases import RECORDS, follow_up, rank, register, world

FLOAT8 = ("float8_e4m3fn", "float8_e5m2")
#: The sentinel byte around every output (a finite value of both dtypes).
SENTINEL = 0x5A
#: Bytes of sentinel before each view in its base.
PAD = 3


def pattern(who: int, count: int, salt: int = 0) -> np.ndarray:
    """Rank ``who``'s bytes: the 256 byte values from an offset of the rank's, repeated."""
    start = (97 * who + 31 * salt) % 256
    return ((np.arange(count) + start) % 256).astype(np.uint8)


def as_float8(kit: Any, data: np.ndarray, dtype: str) -> Any:
    """A tensor of ``dtype`` holding the bytes ``data`` (its shape), made from uint8."""
    if kit.framework == "torch":
        torch = kit.torch
        return torch.from_numpy(data.copy()).to(kit.home).view(getattr(torch, dtype))
    return kit.ms.Tensor(data.copy()).view(getattr(kit.ms, dtype))


def bytes_of(kit: Any, tensor: Any) -> np.ndarray:
    """``tensor``'s bytes (its uint8 view) as numpy, of its shape."""
    uint8 = kit.torch.uint8 if kit.framework == "torch" else kit.ms.uint8
    view = tensor.view(uint8)
    if kit.framework == "torch":
        return view.detach().cpu().numpy().copy()
    return np.array(view.asnumpy(), copy=True)


class Out:
    """An output view of ``shape`` inside a base of sentinel bytes, PAD before it and after."""

    def __init__(self, kit: Any, shape: tuple[int, ...], dtype: str) -> None:
        self.kit, self.shape = kit, shape
        count = int(np.prod(shape))
        self.base = as_float8(kit, np.full(count + 2 * PAD, SENTINEL, np.uint8), dtype)
        self.view = self.base[PAD : PAD + count].reshape(shape)
        self.expected = np.full(count + 2 * PAD, SENTINEL, np.uint8)

    def result(self, data: np.ndarray) -> None:
        self.expected[PAD : PAD + data.size] = data.reshape(-1)

    def check(self, what: str) -> None:
        """The whole base, bytes compared (and recorded: tests/test_parity.py compares the
        frameworks' records)."""
        found = bytes_of(self.kit, self.base)
        np.testing.assert_array_equal(found, self.expected, what)
        RECORDS.append(found)


def check_dtype(kit: Any, tensor: Any, dtype: str, what: str) -> None:
    """A functional form's result keeps the input's dtype."""
    given = str(tensor.dtype).lower().replace("torch.", "")
    assert given.replace("_", "") == dtype.replace("_", ""), f"{what}: dtype {given}"


def each_dtype(check: Callable[[Any, str], None]) -> Callable[[Any], None]:
    def run(kit: Any) -> None:
        for dtype in FLOAT8:
            check(kit, dtype)
        follow_up(kit)

    return run


def case_all_gather(kit: Any, dtype: str) -> None:
    parts = [Out(kit, (4, 8), dtype) for _ in range(world())]
    mine = pattern(rank(), 32).reshape(4, 8)
    source = as_float8(kit, mine, dtype)
    compat.all_gather([part.view for part in parts], source)
    for who, part in enumerate(parts):
        part.result(pattern(who, 32))
        part.check(f"all_gather {dtype}, part {who}")
    np.testing.assert_array_equal(bytes_of(kit, source), mine, "the input changed")


def case_all_gather_into_tensor(kit: Any, dtype: str) -> None:
    source = as_float8(kit, pattern(rank(), 256).reshape(64, 4), dtype)
    expected = np.concatenate([pattern(who, 256) for who in range(world())])
    result = compat.all_gather_into_tensor(source)
    check_dtype(kit, result, dtype, "all_gather_into_tensor")
    np.testing.assert_array_equal(bytes_of(kit, result).reshape(-1), expected, dtype)
    out = Out(kit, (64 * world(), 4), dtype)
    work = compat.all_gather_into(out.view, source, async_op=True)
    work.wait()
    out.result(expected)
    out.check(f"all_gather_into async {dtype}")


def case_all_to_all_single(kit: Any, dtype: str) -> None:
    count = world()
    # Uneven splits: rank r sends r + i + 1 rows of 4 to rank i.
    send = [rank() + i + 1 for i in range(count)]
    receive = [who + rank() + 1 for who in range(count)]
    mine = pattern(rank(), 4 * sum(send)).reshape(-1, 4)
    out = Out(kit, (sum(receive), 4), dtype)
    compat.all_to_all_single(out.view, as_float8(kit, mine, dtype), receive, send)
    expected = []
    for who in range(count):
        theirs = pattern(who, 4 * sum(who + i + 1 for i in range(count))).reshape(-1, 4)
        start = sum(who + i + 1 for i in range(rank()))
        expected.append(theirs[start : start + who + rank() + 1])
    out.result(np.concatenate(expected))
    out.check(f"all_to_all_single {dtype}")


def case_all_to_all(kit: Any, dtype: str) -> None:
    count = world()
    inputs = [as_float8(kit, pattern(rank(), 16, salt=i), dtype) for i in range(count)]
    outputs = [Out(kit, (16,), dtype) for _ in range(count)]
    compat.all_to_all([out.view for out in outputs], inputs)
    for who, out in enumerate(outputs):
        out.result(pattern(who, 16, salt=rank()))
        out.check(f"all_to_all {dtype}, from {who}")


def case_broadcast(kit: Any, dtype: str) -> None:
    root = world() - 1
    out = Out(kit, (256,), dtype)
    if rank() == root:  # the root's view holds its bytes, which stay
        out = Out(kit, (256,), dtype)
        out.base = as_float8(
            kit,
            np.concatenate([out.expected[:PAD], pattern(root, 256), out.expected[-PAD:]]),
            dtype,
        )
        out.view = out.base[PAD : PAD + 256]
    compat.broadcast(out.view, src=root)
    out.result(pattern(root, 256))
    out.check(f"broadcast {dtype}")


def case_scatter(kit: Any, dtype: str) -> None:
    parts = [as_float8(kit, pattern(i, 8, salt=5), dtype) for i in range(world())]
    out = Out(kit, (8,), dtype)
    compat.scatter(out.view, parts if rank() == 0 else None, src=0)
    out.result(pattern(rank(), 8, salt=5))
    out.check(f"scatter {dtype}")
    whole = as_float8(kit, np.concatenate([pattern(i, 8) for i in range(world())]), dtype)
    result = compat.scatter_tensor(whole, src=0)
    check_dtype(kit, result, dtype, "scatter_tensor")
    np.testing.assert_array_equal(bytes_of(kit, result), pattern(rank(), 8), "scatter_tensor")


def case_gather(kit: Any, dtype: str) -> None:
    outs = [Out(kit, (2, 8), dtype) for _ in range(world())] if rank() == 0 else []
    source = as_float8(kit, pattern(rank(), 16, salt=3).reshape(2, 8), dtype)
    compat.gather(source, [out.view for out in outs] if outs else None, dst=0)
    for who, out in enumerate(outs):
        out.result(pattern(who, 16, salt=3))
        out.check(f"gather {dtype}, from {who}")


def case_point_to_point(kit: Any, dtype: str) -> None:
    """send/recv, isend/irecv and batch_isend_irecv around a ring, 256 bytes a message."""
    after, before = (rank() + 1) % world(), (rank() - 1) % world()
    mine = as_float8(kit, pattern(rank(), 256), dtype)
    for way in ("blocking", "async", "batch"):
        out = Out(kit, (256,), dtype)
        if way == "batch":
            ops = [
                compat.P2POp(compat.isend, mine, after),
                compat.P2POp(compat.irecv, out.view, before),
            ]
            for work in compat.batch_isend_irecv(ops):
                work.wait()
        elif way == "async":
            works = [compat.isend(mine, after), compat.irecv(out.view, before)]
            for work in works:
                work.wait()
        elif rank() % 2 == 0:
            compat.send(mine, after)
            compat.recv(out.view, before)
        else:
            compat.recv(out.view, before)
            compat.send(mine, after)
        out.result(pattern(before, 256))
        out.check(f"{way} point to point {dtype}")


def case_autograd(kit: Any, dtype: str) -> None:
    """compat.autograd's non-reducing forms, forward only (float8 has no gradients)."""
    source = as_float8(kit, pattern(rank(), 8 * world()).reshape(-1, 2), dtype)
    gathered = compat.autograd.all_gather(source)
    check_dtype(kit, gathered, dtype, "autograd.all_gather")
    expected = np.concatenate([pattern(who, 8 * world()) for who in range(world())])
    np.testing.assert_array_equal(bytes_of(kit, gathered).reshape(-1), expected, "all_gather")
    mixed = compat.autograd.all_to_all_single(source)
    check_dtype(kit, mixed, dtype, "autograd.all_to_all_single")
    rows = [
        pattern(who, 8 * world()).reshape(-1, 2)[4 * rank() : 4 * rank() + 4]
        for who in range(world())
    ]
    np.testing.assert_array_equal(bytes_of(kit, mixed), np.concatenate(rows), "all_to_all_single")


def case_strided(kit: Any, dtype: str) -> None:
    """Views the backend cannot serve as they are (staged through dense copies of their bytes):
    a column of a base as input and output, and all_gather's parts of different trailing dims
    (one buffer of their elements) from a column too."""
    count = world()
    base = as_float8(kit, pattern(rank(), 64 * count).reshape(-1, 2), dtype)
    column = base[:, 1]  # every other byte
    whole = Out(kit, (32 * count, 2), dtype)
    compat.all_to_all_single(whole.view[:, 0], column)
    expected = whole.expected[PAD:-PAD].reshape(-1, 2).copy()
    rows = [pattern(who, 64 * count).reshape(-1, 2)[:, 1] for who in range(count)]
    expected[:, 0] = np.concatenate([r[32 * rank() : 32 * rank() + 32] for r in rows])
    whole.result(expected)
    whole.check(f"all_to_all_single of columns {dtype}")
    parts = [Out(kit, (1, who + 1, 4), dtype) for who in range(count)]
    pairs = as_float8(kit, pattern(rank(), 8 * (rank() + 1)).reshape(1, -1, 4, 2), dtype)
    mine = pairs[:, :, :, 1]  # every other byte
    work = compat.all_gather([part.view for part in parts], mine, async_op=True)
    work.wait()
    for who, part in enumerate(parts):
        part.result(pattern(who, 8 * (who + 1))[1::2])
        part.check(f"all_gather of any shape {dtype}, part {who}")


for _name, _check in (
    ("strided", case_strided),
    ("all_gather", case_all_gather),
    ("all_gather_into_tensor", case_all_gather_into_tensor),
    ("all_to_all_single", case_all_to_all_single),
    ("all_to_all", case_all_to_all),
    ("broadcast", case_broadcast),
    ("scatter", case_scatter),
    ("gather", case_gather),
    ("autograd", case_autograd),
):
    register(f"float8[{_name}]", each_dtype(_check))
register("float8[point_to_point]", each_dtype(case_point_to_point), min_world=2)


#: A float8 reduction refused, the buffers compared as bytes.
_refused = partial(refused_reduction, reason="no ReduceOp applies to float8", snapshot=bytes_of)


def _float8_reduction(family: str, run: Callable[[Any, str, Any, Any], None]) -> None:
    """A bad-input case: ``run(kit, dtype, tensor, out)`` refuses every reduction of the
    family, on float8 tensors of both dtypes, before any communication."""

    @bad_case(f"float8_{family}")
    def _(kit: Any) -> None:
        for dtype in FLOAT8:
            tensor = as_float8(kit, pattern(rank(), 4 * world()), dtype)
            out = as_float8(kit, np.full(4, SENTINEL, np.uint8), dtype)
            run(kit, dtype, tensor, out)


def _all_reduce(kit: Any, dtype: str, tensor: Any, out: Any) -> None:
    for op in ("sum", "max"):
        _refused(
            kit,
            dtype,
            op.upper(),
            lambda op=op: compat.all_reduce(tensor, op=op),
            "tensor",
            [tensor],
        )
    _refused(
        kit, dtype, "SUM", lambda: compat.all_reduce(tensor, async_op=True), "tensor", [tensor]
    )
    _refused(kit, dtype, "SUM", lambda: compat.autograd.all_reduce(tensor), "tensor", [tensor])


def _reduce(kit: Any, dtype: str, tensor: Any, out: Any) -> None:
    _refused(kit, dtype, "SUM", lambda: compat.reduce(tensor, dst=0), "tensor", [tensor])
    _refused(kit, dtype, "MIN", lambda: compat.reduce(tensor, 0, "min"), "tensor", [tensor])


def _reduce_scatter(kit: Any, dtype: str, tensor: Any, out: Any) -> None:
    parts = list(tensor.split(4))
    calls = (
        ("output", lambda: compat.reduce_scatter(out, parts)),
        ("tensor", lambda: compat.reduce_scatter_tensor(tensor, out=out)),
        ("input", lambda: compat.reduce_scatter_into(out, tensor)),
        ("tensor", lambda: compat.autograd.reduce_scatter(tensor)),
    )
    for param, call in calls:
        _refused(kit, dtype, "SUM", call, param, [tensor, out])


def _all_reduce_coalesced(kit: Any, dtype: str, tensor: Any, out: Any) -> None:
    call = lambda: compat.all_reduce_coalesced([tensor, out])  # noqa: E731
    _refused(kit, dtype, "SUM", call, "tensors", [tensor, out])


_float8_reduction("all_reduce", _all_reduce)
_float8_reduction("reduce", _reduce)
_float8_reduction("reduce_scatter", _reduce_scatter)
_float8_reduction("all_reduce_coalesced", _all_reduce_coalesced)
