"""complex tensors (complex64, complex128) through every collective and point-to-point call:
Gloo and MCCL lack them, so compat moves their views as real numbers (capabilities.toml's
``as_real``), exactly, and reduces them with SUM and AVG elementwise on those views (the complex
sum and mean), as torch's own functions do on Gloo; every other ReduceOp is refused before any
communication.

Each rank's values are small integers in both parts, different per rank, element and part, so
sums are exact and every element says where it came from. Every output lies inside a base filled
with a sentinel, checked whole against complex numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import compat
from tests.ranks.bad_input_cases import bad_case, refused_reduction
from tests.ranks.cases import RECORDS, follow_up, rank, register, world

COMPLEX = ("complex64", "complex128")
#: The sentinel around every output.
SENTINEL = complex(-7.25, 3.5)
#: Elements of sentinel before each view in its base.
PAD = 3


def pattern(who: int, count: int, dtype: str, salt: int = 0) -> np.ndarray:
    """Rank ``who``'s values: real parts counting up from the rank's offset, imaginary parts
    counting down from another."""
    steps = np.arange(count)
    return ((steps + 10 * who + salt) + 1j * (-2 * steps - 3 * who - salt)).astype(dtype)


def make(kit: Any, data: np.ndarray) -> Any:
    """A tensor holding ``data`` (complex numpy), of its dtype and shape."""
    if kit.framework == "torch":
        return kit.torch.from_numpy(data.copy()).to(kit.home)
    return kit.ms.Tensor(data.copy())


class Out:
    """An output view of ``shape`` inside a base of sentinels, PAD before it and after."""

    def __init__(self, kit: Any, shape: tuple[int, ...], dtype: str) -> None:
        self.kit = kit
        count = int(np.prod(shape))
        self.expected = np.full(count + 2 * PAD, SENTINEL, dtype)
        self.base = make(kit, self.expected)
        self.view = self.base[PAD : PAD + count].reshape(shape)

    def result(self, data: np.ndarray) -> None:
        self.expected[PAD : PAD + data.size] = data.reshape(-1)

    def holding(self, data: np.ndarray) -> Out:
        """The view holding ``data`` (an input read and written in place)."""
        shape, self.expected[PAD : PAD + data.size] = self.view.shape, data.reshape(-1)
        self.base = make(self.kit, self.expected)
        self.view = self.base[PAD : PAD + data.size].reshape(shape)
        return self

    def check(self, what: str) -> None:
        """The whole base, compared exactly (and recorded for tests/test_parity.py)."""
        found = self.kit.numpy(self.base)
        assert found.dtype == self.expected.dtype, f"{what}: dtype {found.dtype}"
        np.testing.assert_array_equal(found, self.expected, what)
        RECORDS.append(found)


def each_dtype(check: Callable[[Any, str], None]) -> Callable[[Any], None]:
    def run(kit: Any) -> None:
        for dtype in COMPLEX:
            check(kit, dtype)
        follow_up(kit)

    return run


def total(count: int, dtype: str, salt: int = 0) -> np.ndarray:
    return np.sum([pattern(who, count, dtype, salt) for who in range(world())], axis=0)


def case_all_reduce(kit: Any, dtype: str) -> None:
    """SUM in place (a view inside a base, sync and async, and a column of a 2-d base), and AVG,
    which equals compat's AVG of the same parts as a real tensor, bit for bit."""
    for async_op in (False, True):
        out = Out(kit, (2, 5), dtype).holding(pattern(rank(), 10, dtype))
        work = compat.all_reduce(out.view, async_op=async_op)
        if async_op:
            work.wait()
        out.result(total(10, dtype))
        out.check(f"all_reduce sum {dtype} async={async_op}")
    grid = np.stack([pattern(rank(), 6, dtype, salt=1), np.full(6, SENTINEL, dtype)], axis=1)
    base = make(kit, grid)
    compat.all_reduce(base[:, 0], op="sum")
    grid[:, 0] = total(6, dtype, salt=1)
    np.testing.assert_array_equal(kit.numpy(base), grid, f"all_reduce of a column {dtype}")
    mean = make(kit, pattern(rank(), 7, dtype))
    compat.all_reduce(mean, op=compat.ReduceOp.AVG)
    real_dtype = {"complex64": "float32", "complex128": "float64"}[dtype]
    parts = pattern(rank(), 7, dtype)
    as_real = make(kit, np.stack([parts.real, parts.imag], axis=-1).astype(real_dtype))
    compat.all_reduce(as_real, op=compat.ReduceOp.AVG)
    found, real = kit.numpy(mean), kit.numpy(as_real)
    np.testing.assert_array_equal(found.real, real[:, 0], f"all_reduce avg {dtype}")
    np.testing.assert_array_equal(found.imag, real[:, 1], f"all_reduce avg {dtype}")
    np.testing.assert_allclose(found, total(7, dtype) / world(), rtol=1e-6)


def case_reduce(kit: Any, dtype: str) -> None:
    """SUM to the last rank; the others' tensors keep their values."""
    root = world() - 1
    out = Out(kit, (6,), dtype).holding(pattern(rank(), 6, dtype))
    compat.reduce(out.view, dst=root)
    out.result(total(6, dtype) if rank() == root else pattern(rank(), 6, dtype))
    out.check(f"reduce {dtype}")


def case_reduce_scatter(kit: Any, dtype: str) -> None:
    """The list form (parts of one buffer and separate parts), the tensor form into a view, and
    AVG."""
    whole = pattern(rank(), 4 * world(), dtype)
    expected = total(4 * world(), dtype)[4 * rank() : 4 * rank() + 4]
    source = make(kit, whole)
    for parts in (list(source.split(4)), [make(kit, part) for part in np.split(whole, world())]):
        out = Out(kit, (4,), dtype)
        compat.reduce_scatter(out.view, parts)
        out.result(expected)
        out.check(f"reduce_scatter {dtype}")
    out = Out(kit, (2, 2), dtype)
    compat.reduce_scatter_tensor(make(kit, whole.reshape(-1, 2)), out=out.view)
    out.result(expected)
    out.check(f"reduce_scatter_tensor {dtype}")
    mean = compat.reduce_scatter_tensor(source, op="avg")
    np.testing.assert_allclose(kit.numpy(mean), expected / world(), rtol=1e-6)
    assert kit.numpy(source).dtype == np.dtype(dtype), "reduce_scatter_tensor changed the input"


def case_all_reduce_coalesced(kit: Any, dtype: str) -> None:
    inputs = (pattern(rank(), 3, dtype), pattern(rank(), 4, dtype, salt=2))
    tensors = [make(kit, inputs[0]), make(kit, inputs[1].reshape(2, 2))]
    compat.all_reduce_coalesced(tensors)
    np.testing.assert_array_equal(kit.numpy(tensors[0]), total(3, dtype), "coalesced, first")
    np.testing.assert_array_equal(
        kit.numpy(tensors[1]).reshape(-1), total(4, dtype, salt=2), "coalesced, second"
    )


def case_gathered(kit: Any, dtype: str) -> None:
    """all_gather (into views, and parts of different trailing dims), all_gather_into_tensor
    (functional, and into a view asynchronously), gather."""
    parts = [Out(kit, (2, 3), dtype) for _ in range(world())]
    source = make(kit, pattern(rank(), 6, dtype).reshape(2, 3))
    compat.all_gather([part.view for part in parts], source)
    for who, part in enumerate(parts):
        part.result(pattern(who, 6, dtype))
        part.check(f"all_gather {dtype}, part {who}")
    shaped = [Out(kit, (1, who + 1, 2), dtype) for who in range(world())]
    mine = make(kit, pattern(rank(), 2 * (rank() + 1), dtype).reshape(1, -1, 2))
    compat.all_gather([part.view for part in shaped], mine)
    for who, part in enumerate(shaped):
        part.result(pattern(who, 2 * (who + 1), dtype))
        part.check(f"all_gather of any shape {dtype}, part {who}")
    everyone = np.concatenate([pattern(who, 6, dtype) for who in range(world())])
    result = compat.all_gather_into_tensor(source)
    np.testing.assert_array_equal(kit.numpy(result).reshape(-1), everyone, "into_tensor")
    out = Out(kit, (2 * world(), 3), dtype)
    compat.all_gather_into(out.view, source, async_op=True).wait()
    out.result(everyone)
    out.check(f"all_gather_into {dtype}")
    outs = [Out(kit, (2, 3), dtype) for _ in range(world())] if rank() == 0 else []
    compat.gather(source, [out.view for out in outs] if outs else None, dst=0)
    for who, out in enumerate(outs):
        out.result(pattern(who, 6, dtype))
        out.check(f"gather {dtype}, from {who}")


def case_spread(kit: Any, dtype: str) -> None:
    """broadcast (a 0-d tensor too), scatter, scatter_tensor, all_to_all_single (uneven splits,
    into a column of a 2-d base), all_to_all."""
    root = world() - 1
    out = Out(kit, (5,), dtype)
    if rank() == root:
        out.holding(pattern(root, 5, dtype))
    compat.broadcast(out.view, src=root)
    out.result(pattern(root, 5, dtype))
    out.check(f"broadcast {dtype}")
    scalar = make(kit, pattern(rank(), 1, dtype).reshape(()))
    compat.broadcast(scalar, src=root)
    assert kit.numpy(scalar) == pattern(root, 1, dtype)[0], "broadcast of a 0-d tensor"
    pieces = [make(kit, pattern(i, 4, dtype, salt=5)) for i in range(world())]
    out = Out(kit, (4,), dtype)
    compat.scatter(out.view, pieces if rank() == 0 else None, src=0)
    out.result(pattern(rank(), 4, dtype, salt=5))
    out.check(f"scatter {dtype}")
    whole = make(kit, np.concatenate([pattern(i, 4, dtype) for i in range(world())]))
    np.testing.assert_array_equal(
        kit.numpy(compat.scatter_tensor(whole, src=0)), pattern(rank(), 4, dtype), "scatter_tensor"
    )
    _all_to_all(kit, dtype)


def _all_to_all(kit: Any, dtype: str) -> None:
    count = world()
    send = [rank() + i + 1 for i in range(count)]  # rank r sends r + i + 1 elements to rank i
    receive = [who + rank() + 1 for who in range(count)]
    grid = np.full((sum(receive), 2), SENTINEL, dtype)
    base = make(kit, grid)
    compat.all_to_all_single(
        base[:, 1], make(kit, pattern(rank(), sum(send), dtype)), receive, send
    )
    expected = []
    for who in range(count):
        theirs = pattern(who, sum(who + i + 1 for i in range(count)), dtype)
        start = sum(who + i + 1 for i in range(rank()))
        expected.append(theirs[start : start + who + rank() + 1])
    grid[:, 1] = np.concatenate(expected)
    np.testing.assert_array_equal(kit.numpy(base), grid, f"all_to_all_single {dtype}")
    inputs = [make(kit, pattern(rank(), 3, dtype, salt=i)) for i in range(count)]
    outputs = [Out(kit, (3,), dtype) for _ in range(count)]
    compat.all_to_all([out.view for out in outputs], inputs)
    for who, out in enumerate(outputs):
        out.result(pattern(who, 3, dtype, salt=rank()))
        out.check(f"all_to_all {dtype}, from {who}")


def case_point_to_point(kit: Any, dtype: str) -> None:
    """send/recv, isend/irecv and batch_isend_irecv around a ring."""
    after, before = (rank() + 1) % world(), (rank() - 1) % world()
    mine = make(kit, pattern(rank(), 8, dtype).reshape(2, 4))
    for way in ("blocking", "async", "batch"):
        out = Out(kit, (2, 4), dtype)
        if way == "batch":
            ops = [
                compat.P2POp(compat.isend, mine, after),
                compat.P2POp(compat.irecv, out.view, before),
            ]
            for work in compat.batch_isend_irecv(ops):
                work.wait()
        elif way == "async":
            for work in [compat.isend(mine, after), compat.irecv(out.view, before)]:
                work.wait()
        elif rank() % 2 == 0:
            compat.send(mine, after)
            compat.recv(out.view, before)
        else:
            compat.recv(out.view, before)
            compat.send(mine, after)
        out.result(pattern(before, 8, dtype))
        out.check(f"{way} point to point {dtype}")


for _name, _check in (
    ("all_reduce", case_all_reduce),
    ("reduce", case_reduce),
    ("reduce_scatter", case_reduce_scatter),
    ("all_reduce_coalesced", case_all_reduce_coalesced),
    ("gathered", case_gathered),
    ("spread", case_spread),
):
    register(f"complex[{_name}]", each_dtype(_check))
register("complex[point_to_point]", each_dtype(case_point_to_point), min_world=2)


@bad_case("complex_reductions")
def _(kit: Any) -> None:
    """MAX, MIN, PRODUCT and the bitwise ops on complex tensors: refused by every reducing call
    before any communication, buffers untouched; a SUM then runs (and the follow-up)."""
    for dtype in COMPLEX:
        _refused_each(kit, dtype)


def _refused_each(kit: Any, dtype: str) -> None:
    tensor = make(kit, pattern(rank(), 2 * world(), dtype))
    out = make(kit, np.full(2, SENTINEL, dtype))
    calls = (
        ("MAX", "tensor", lambda: compat.all_reduce(tensor, op="max")),
        ("PRODUCT", "tensor", lambda: compat.all_reduce(tensor, op="prod")),
        ("BAND", "tensor", lambda: compat.all_reduce(tensor, op="band", async_op=True)),
        ("MIN", "tensor", lambda: compat.reduce(tensor, 0, "min")),
        ("MAX", "output", lambda: compat.reduce_scatter(out, list(tensor.split(2)), "max")),
        ("MIN", "tensor", lambda: compat.reduce_scatter_tensor(tensor, "min", out=out)),
        ("BXOR", "tensors", lambda: compat.all_reduce_coalesced([tensor, out], "bxor")),
        ("MAX", "tensor", lambda: compat.autograd.all_reduce(tensor, "max")),
    )
    for op, param, call in calls:
        # torch raises ValueError there: compat's error is one too (and an UnsupportedError)
        raised = refused_reduction(
            kit, dtype, op, call, param, [tensor, out], reason="only SUM and AVG apply",
            error=ValueError,
        )  # fmt: skip
        assert isinstance(raised, compat.UnsupportedReductionError), repr(raised)
    compat.all_reduce(tensor)
    np.testing.assert_array_equal(kit.numpy(tensor), total(2 * world(), dtype), "then SUM")
