"""Every collective with views for its tensors: each view lies in a larger tensor filled with a
sentinel, and the whole of that tensor is checked afterwards (results exactly in the view's
elements, nothing written outside it, inputs unchanged). Plus empty tensors, and sequences of
overlapping groups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

import compat
from tests.ranks.cases import (
    SENTINEL,
    assert_close,
    rank,
    reduce_np,
    register,
    values,
    wait_if,
    world,
)

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Layout:
    """A view of ``shape`` cut by ``index`` from a base of ``base_shape(shape)``."""

    base_shape: Callable[[Shape], Shape]
    index: Callable[[Any, Shape], Any]


LAYOUTS = {
    "dense": Layout(lambda s: s, lambda t, s: t),
    "offset0": Layout(lambda s: (s[0] * 2 + 1, *s[1:]), lambda t, s: t[: s[0]]),
    "interior": Layout(lambda s: (s[0] + 3, *s[1:]), lambda t, s: t[1 : 1 + s[0]]),
    "strided": Layout(lambda s: (s[0] * 2, *s[1:]), lambda t, s: t[::2]),
    "transposed": Layout(lambda s: (s[1], s[0]), lambda t, s: t.T),
    "column": Layout(lambda s: (s[0], s[1] + 3), lambda t, s: t[:, 1 : 1 + s[1]]),
}


class Placed:
    """A view holding ``data`` inside a sentinel-filled base, and the base's expected values."""

    def __init__(self, kit: Any, data: np.ndarray, dtype: str, layout: str) -> None:
        self.kit, self.dtype, self.layout = kit, dtype, LAYOUTS[layout]
        self.shape: Shape = tuple(data.shape)
        self.expected = np.full(self.layout.base_shape(self.shape), SENTINEL, dtype=np.float64)
        self.layout.index(self.expected, self.shape)[...] = data
        self.base = kit.tensor(self.expected, dtype)
        self.view = self.layout.index(self.base, self.shape)
        assert tuple(self.view.shape) == self.shape, (self.view.shape, self.shape)

    def result(self, data: np.ndarray) -> None:
        """The view should now hold ``data``."""
        self.layout.index(self.expected, self.shape)[...] = data

    def check(self, what: str) -> None:
        assert_close(self.kit.numpy(self.base), self.expected, self.dtype, what)


def sentinel_out(kit: Any, shape: Shape, dtype: str, layout: str) -> Placed:
    return Placed(kit, np.full(shape, SENTINEL, dtype=np.float64), dtype, layout)


def _wait(returned: Any, async_op: bool) -> None:
    """Wait for a functional form's result: ``(tensor, Work)`` if async, else the tensor."""
    if async_op:
        assert isinstance(returned, tuple), f"expected (tensor, Work), got {returned!r}"
        wait_if(returned[1], True)


# -- one function per collective: (kit, layout, dtype, async_op) --------------------------------


def layout_all_reduce(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-all_reduce"
    x = Placed(kit, values(seed, rank(), (3, 4)), dtype, layout)
    wait_if(compat.all_reduce(x.view, async_op=async_op), async_op)
    x.result(reduce_np([values(seed, r, (3, 4)) for r in range(world())], "sum"))
    x.check("all_reduce")


def layout_broadcast(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-broadcast"
    for src in range(world()):
        x = Placed(kit, values(seed, rank(), (3, 4)), dtype, layout)
        wait_if(compat.broadcast(x.view, src, async_op=async_op), async_op)
        x.result(values(seed, src, (3, 4)))
        x.check(f"broadcast from {src}")


def layout_reduce(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-reduce"
    dst = world() - 1
    x = Placed(kit, values(seed, rank(), (3, 4)), dtype, layout)
    wait_if(compat.reduce(x.view, dst, async_op=async_op), async_op)
    if rank() == dst:
        x.result(reduce_np([values(seed, r, (3, 4)) for r in range(world())], "sum"))
    x.check("reduce")


def layout_all_gather(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-all_gather"
    x = Placed(kit, values(seed, rank(), (3, 4)), dtype, layout)
    outs = [sentinel_out(kit, (3, 4), dtype, layout) for _ in range(world())]
    work = compat.all_gather([out.view for out in outs], x.view, async_op=async_op)
    wait_if(work, async_op)
    for r, out in enumerate(outs):
        out.result(values(seed, r, (3, 4)))
        out.check(f"all_gather entry {r}")
    x.check("all_gather input")


def layout_all_gather_chunks(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    """The bucketing pattern: the output list is ``buf.chunk(n)`` of one (placed) buffer."""
    seed = "layout-all_gather_chunks"
    n = world()
    x = Placed(kit, values(seed, rank(), (2, 4)), dtype, layout)
    buf = sentinel_out(kit, (2 * n, 4), dtype, layout)
    chunks = [buf.view[2 * r : 2 * r + 2] for r in range(n)]
    wait_if(compat.all_gather(chunks, x.view, async_op=async_op), async_op)
    buf.result(np.concatenate([values(seed, r, (2, 4)) for r in range(n)]))
    buf.check("all_gather into chunks")
    x.check("all_gather input")


def layout_all_gather_into_tensor(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-all_gather_into_tensor"
    n = world()
    x = Placed(kit, values(seed, rank(), (2, 4)), dtype, layout)
    out = sentinel_out(kit, (2 * n, 4), dtype, layout)
    returned = compat.all_gather_into_tensor(x.view, async_op=async_op, out=out.view)
    _wait(returned, async_op)
    out.result(np.concatenate([values(seed, r, (2, 4)) for r in range(n)]))
    out.check("all_gather_into_tensor out")
    x.check("all_gather_into_tensor input")


def layout_all_gather_into(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    """torch's form, by torch's keywords: None, or a Work whose wait() fills the view."""
    seed = "layout-all_gather_into"
    n = world()
    x = Placed(kit, values(seed, rank(), (2, 4)), dtype, layout)
    out = sentinel_out(kit, (2 * n, 4), dtype, layout)
    work = compat.all_gather_into(output_tensor=out.view, input_tensor=x.view, async_op=async_op)
    wait_if(work, async_op)
    out.result(np.concatenate([values(seed, r, (2, 4)) for r in range(n)]))
    out.check("all_gather_into output_tensor")
    x.check("all_gather_into input_tensor")


def layout_reduce_scatter(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-reduce_scatter"
    n, me = world(), rank()
    inputs = [Placed(kit, values(seed, rank() * 10 + i, (2, 4)), dtype, layout) for i in range(n)]
    out = sentinel_out(kit, (2, 4), dtype, layout)
    work = compat.reduce_scatter(out.view, [x.view for x in inputs], async_op=async_op)
    wait_if(work, async_op)
    out.result(reduce_np([values(seed, r * 10 + me, (2, 4)) for r in range(n)], "sum"))
    out.check("reduce_scatter out")
    for x in inputs:
        x.check("reduce_scatter input")


def layout_reduce_scatter_chunks(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    """The bucketing pattern: the input list is ``buf.chunk(n)`` of one (placed) buffer."""
    seed = "layout-reduce_scatter_chunks"
    n, me = world(), rank()
    buf = Placed(kit, values(seed, rank(), (2 * n, 4)), dtype, layout)
    out = sentinel_out(kit, (2, 4), dtype, layout)
    chunks = [buf.view[2 * r : 2 * r + 2] for r in range(n)]
    wait_if(compat.reduce_scatter(out.view, chunks, async_op=async_op), async_op)
    full = reduce_np([values(seed, r, (2 * n, 4)) for r in range(n)], "sum")
    out.result(full[2 * me : 2 * me + 2])
    out.check("reduce_scatter out")
    buf.check("reduce_scatter input")


def layout_reduce_scatter_tensor(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-reduce_scatter_tensor"
    n, me = world(), rank()
    x = Placed(kit, values(seed, rank(), (2 * n, 4)), dtype, layout)
    out = sentinel_out(kit, (2, 4), dtype, layout)
    returned = compat.reduce_scatter_tensor(x.view, async_op=async_op, out=out.view)
    _wait(returned, async_op)
    full = reduce_np([values(seed, r, (2 * n, 4)) for r in range(n)], "sum")
    out.result(full[2 * me : 2 * me + 2])
    out.check("reduce_scatter_tensor out")
    x.check("reduce_scatter_tensor input")


def layout_reduce_scatter_into(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    """torch's form, by torch's keywords: None, or a Work whose wait() fills the view."""
    seed = "layout-reduce_scatter_into"
    n, me = world(), rank()
    x = Placed(kit, values(seed, rank(), (2 * n, 4)), dtype, layout)
    out = sentinel_out(kit, (2, 4), dtype, layout)
    work = compat.reduce_scatter_into(output=out.view, input=x.view, op="sum", async_op=async_op)
    wait_if(work, async_op)
    full = reduce_np([values(seed, r, (2 * n, 4)) for r in range(n)], "sum")
    out.result(full[2 * me : 2 * me + 2])
    out.check("reduce_scatter_into output")
    x.check("reduce_scatter_into input")


def layout_scatter(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-scatter"
    for src in range(world()):
        out = sentinel_out(kit, (3, 4), dtype, layout)
        parts = None
        if rank() == src:
            parts = [Placed(kit, values(seed, src * 10 + i, (3, 4)), dtype, layout)
                     for i in range(world())]  # fmt: skip
        views = None if parts is None else [part.view for part in parts]
        wait_if(compat.scatter(out.view, views, src, async_op=async_op), async_op)
        out.result(values(seed, src * 10 + rank(), (3, 4)))
        out.check(f"scatter from {src}")
        for part in parts or []:
            part.check("scatter input")


def layout_scatter_tensor(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-scatter_tensor"
    n, me = world(), rank()
    for src in range(n):
        x = Placed(kit, values(seed, rank(), (2 * n, 4)), dtype, layout)
        out = sentinel_out(kit, (2, 4), dtype, layout)
        returned = compat.scatter_tensor(x.view, src, async_op=async_op, out=out.view)
        _wait(returned, async_op)
        out.result(values(seed, src, (2 * n, 4))[2 * me : 2 * me + 2])
        out.check(f"scatter_tensor from {src}")
        x.check("scatter_tensor input")


def layout_gather(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-gather"
    for dst in range(world()):
        x = Placed(kit, values(seed, rank(), (3, 4)), dtype, layout)
        outs = [sentinel_out(kit, (3, 4), dtype, layout) for _ in range(world())]
        views = [out.view for out in outs] if rank() == dst else None
        wait_if(compat.gather(x.view, views, dst, async_op=async_op), async_op)
        if rank() == dst:
            for r, out in enumerate(outs):
                out.result(values(seed, r, (3, 4)))
                out.check(f"gather to {dst}, entry {r}")
        x.check("gather input")


def layout_all_to_all_single(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-all_to_all_single"
    n, me = world(), rank()
    x = Placed(kit, values(seed, rank(), (2 * n, 4)), dtype, layout)
    out = sentinel_out(kit, (2 * n, 4), dtype, layout)
    wait_if(compat.all_to_all_single(out.view, x.view, async_op=async_op), async_op)
    out.result(np.concatenate([values(seed, r, (2 * n, 4))[2 * me : 2 * me + 2] for r in range(n)]))
    out.check("all_to_all_single out")
    x.check("all_to_all_single input")


def layout_send_recv(kit: Any, layout: str, dtype: str, async_op: bool) -> None:
    seed = "layout-send_recv"
    last = world() - 1
    if rank() == 0:
        x = Placed(kit, values(seed, 0, (3, 4)), dtype, layout)
        compat.send(x.view, last)
        x.check("send input")
    elif rank() == last:
        out = sentinel_out(kit, (3, 4), dtype, layout)
        compat.recv(out.view, 0)
        out.result(values(seed, 0, (3, 4)))
        out.check("recv")
    compat.barrier()


COLLECTIVES: dict[str, Callable[..., None]] = {
    "all_reduce": layout_all_reduce,
    "broadcast": layout_broadcast,
    "reduce": layout_reduce,
    "all_gather": layout_all_gather,
    "all_gather_chunks": layout_all_gather_chunks,
    "all_gather_into_tensor": layout_all_gather_into_tensor,
    "all_gather_into": layout_all_gather_into,
    "reduce_scatter": layout_reduce_scatter,
    "reduce_scatter_chunks": layout_reduce_scatter_chunks,
    "reduce_scatter_tensor": layout_reduce_scatter_tensor,
    "reduce_scatter_into": layout_reduce_scatter_into,
    "scatter": layout_scatter,
    "scatter_tensor": layout_scatter_tensor,
    "gather": layout_gather,
    "all_to_all_single": layout_all_to_all_single,
    "send_recv": layout_send_recv,
}

for _name, _check in COLLECTIVES.items():
    _min_world = 2 if _name == "send_recv" else 1
    for _layout in LAYOUTS:
        register(
            f"layout-{_name}[{_layout}]",
            partial(_check, layout=_layout, dtype="float32", async_op=False),
            min_world=_min_world,
        )
    register(
        f"layout-{_name}[strided-int64]",
        partial(_check, layout="strided", dtype="int64", async_op=False),
        min_world=_min_world,
    )
    if _name != "send_recv":
        register(
            f"layout-{_name}[transposed-async]",
            partial(_check, layout="transposed", dtype="float32", async_op=True),
        )


# -- a buffer the user wrote by slice assignment ------------------------------------------------


def case_slice_assigned_buffers(kit: Any) -> None:
    """MindSpore 2.10's broadcast, all_gather, scatter and gather leave a tensor that was written
    by slice assignment unchanged (measured); compat receives into a tensor of its own."""
    seed = "slice-assigned"
    n, me = world(), rank()

    def written(shape: Shape) -> Any:
        tensor = kit.tensor(np.zeros(shape), "float32")
        tensor[:] = kit.tensor(np.full(shape, SENTINEL), "float32")
        return tensor

    tensor = written((4,)) if me else kit.tensor(values(seed, 0, (4,)), "float32")
    compat.broadcast(tensor, 0)
    assert_close(kit.numpy(tensor), values(seed, 0, (4,)), "float32", "broadcast")
    outs = [written((4,)) for _ in range(n)]
    compat.all_gather(outs, kit.tensor(values(seed, me, (4,)), "float32"))
    for r, out in enumerate(outs):
        assert_close(kit.numpy(out), values(seed, r, (4,)), "float32", f"all_gather {r}")
    out = written((4,))
    parts = [kit.tensor(values(seed, 10 + i, (4,)), "float32") for i in range(n)]
    compat.scatter(out, parts if me == 0 else None, 0)
    assert_close(kit.numpy(out), values(seed, 10 + me, (4,)), "float32", "scatter")
    outs = [written((4,)) for _ in range(n)]
    compat.gather(kit.tensor(values(seed, me, (4,)), "float32"), outs if me == 0 else None, 0)
    if me == 0:
        for r, out in enumerate(outs):
            assert_close(kit.numpy(out), values(seed, r, (4,)), "float32", f"gather {r}")


register("layout-slice-assigned-buffers", case_slice_assigned_buffers)


# -- empty tensors: every collective returns at once, on every rank ----------------------------


def case_empty(kit: Any, async_op: bool) -> None:
    n = world()
    e = kit.tensor(np.zeros((0, 3)), "float32")

    def empty() -> Any:
        return kit.tensor(np.zeros((0, 3)), "float32")

    def empties() -> list[Any]:
        return [empty() for _ in range(n)]

    calls: list[tuple[str, Callable[[], Any]]] = [
        ("all_reduce", lambda: compat.all_reduce(e, async_op=async_op)),
        ("broadcast", lambda: compat.broadcast(e, 0, async_op=async_op)),
        ("reduce", lambda: compat.reduce(e, 0, async_op=async_op)),
        ("all_gather", lambda: compat.all_gather(empties(), e, async_op=async_op)),
        ("all_gather_into_tensor", lambda: compat.all_gather_into_tensor(e, async_op=async_op)),
        ("reduce_scatter", lambda: compat.reduce_scatter(empty(), [empty() for _ in range(n)],
                                                         async_op=async_op)),
        ("reduce_scatter_tensor", lambda: compat.reduce_scatter_tensor(e, async_op=async_op)),
        ("scatter", lambda: compat.scatter(empty(), [empty() for _ in range(n)] if rank() == 0
                                           else None, 0, async_op=async_op)),
        ("scatter_tensor", lambda: compat.scatter_tensor(e, 0, async_op=async_op)),
        ("gather", lambda: compat.gather(e, [empty() for _ in range(n)] if rank() == 0 else None,
                                         0, async_op=async_op)),
        ("all_to_all_single", lambda: compat.all_to_all_single(empty(), e, async_op=async_op)),
    ]  # fmt: skip
    for name, call in calls:
        returned = call()
        if name.endswith("_tensor"):
            result = returned[0] if async_op else returned
            assert tuple(result.shape)[1:] == (3,) and result.shape[0] == 0, (name, result.shape)
            _wait(returned, async_op)
        else:
            wait_if(returned, async_op)
    if n > 1:
        if rank() == 0:
            compat.send(e, 1)
        elif rank() == 1:
            compat.recv(empty(), 0)
    # The job is still usable: a collective with data.
    x = kit.tensor(np.full((2,), rank() + 1), "float32")
    compat.all_reduce(x)
    assert_close(kit.numpy(x), np.full((2,), n * (n + 1) / 2), "float32", "after the empty calls")


def case_empty_parts(kit: Any) -> None:
    """Uneven splits with empty parts: ranks with nothing to receive still take part."""
    seed = "empty-parts"
    n, me = world(), rank()
    sizes = [0] + [2] * (n - 1)
    x = kit.tensor(values(seed, me, (sum(sizes), 3)), "float32")
    result = compat.reduce_scatter_tensor(x, input_split_sizes=sizes)
    full = reduce_np([values(seed, r, (sum(sizes), 3)) for r in range(n)], "sum")
    start = sum(sizes[:me])
    assert_close(kit.numpy(result), full[start : start + sizes[me]], "float32", "reduce_scatter")
    mine = kit.tensor(values(seed, me, (sizes[me], 3)), "float32")
    gathered = compat.all_gather_into_tensor(mine, output_split_sizes=sizes)
    expected = np.concatenate([values(seed, r, (sizes[r], 3)) for r in range(n)])
    assert_close(kit.numpy(gathered), expected, "float32", "all_gather uneven")
    outs = [kit.tensor(np.full((size, 3), SENTINEL), "float32") for size in sizes]
    compat.all_gather(outs, mine)
    for r, out in enumerate(outs):
        assert_close(kit.numpy(out), values(seed, r, (sizes[r], 3)), "float32", f"entry {r}")


register("empty[sync]", partial(case_empty, async_op=False))
register("empty[async]", partial(case_empty, async_op=True))
register("empty-parts", case_empty_parts, min_world=2)


# -- groups: any subsets, in any order, every rank calling new_group ----------------------------


def case_overlapping_groups(kit: Any) -> None:
    """Every rank creates overlapping groups in the same order (torch's rule); each group's
    collectives then run over its members only."""
    n = world()
    subsets = [[0, 1], [1, 2], [0, 2], [0, 1, 2], [0, 1], [2], list(range(n))]
    groups = [(ranks, compat.new_group(ranks)) for ranks in subsets if max(ranks) < n]
    for ranks, group in groups:
        if rank() not in ranks:
            assert compat.get_rank(group) == -1
            continue
        x = kit.tensor(np.full((3,), 10 ** rank()), "float32")
        compat.all_reduce(x, group=group)
        expected = float(sum(10**r for r in ranks))
        assert_close(kit.numpy(x), np.full((3,), expected), "float32", f"group {ranks}")
    compat.barrier()


register("groups-overlapping", case_overlapping_groups, min_world=3)


def case_barrier_completes_unwaited(kit: Any) -> None:
    """Async collectives whose Work no one keeps or waits for, then a barrier on their group: their
    results are in place once it returns, as torch's Gloo and NCCL order them (code that times
    async collectives with a barrier after them, DeepSpeed's benchmarks). Strided and interior
    views, parts of any shape, coalesced tensors: compat writes those results through stand-ins
    or copies after the call."""
    seed = "unwaited-all_reduce"
    x = Placed(kit, values(seed, rank(), (3, 2)), "float32", "strided")
    compat.all_reduce(x.view, async_op=True)
    y = Placed(kit, values("unwaited-broadcast", rank(), (4,)), "float32", "interior")
    compat.broadcast(y.view, world() - 1, async_op=True)
    out = sentinel_out(kit, (2 * world(),), "float32", "strided")
    compat.all_gather_into(out.view, kit.tensor(values("unwaited-gather", rank(), (2,)), "float32"))
    parts = [sentinel_out(kit, (1, r + 1), "float32", "interior") for r in range(world())]
    mine = kit.tensor(values("unwaited-parts", rank(), (1, rank() + 1)), "float32")
    compat.all_gather([p.view for p in parts], mine, async_op=True)  # parts of any shape
    pair = [
        Placed(kit, values(f"unwaited-pair{i}", rank(), (2,)), "float32", "strided") for i in (0, 1)
    ]
    compat.all_reduce_coalesced([p.view for p in pair], async_op=True)
    compat.barrier()
    for r, part in enumerate(parts):
        part.result(values("unwaited-parts", r, (1, r + 1)))
        part.check(f"all_gather part {r} not waited, then barrier")
    for i, p in enumerate(pair):
        p.result(reduce_np([values(f"unwaited-pair{i}", r, (2,)) for r in range(world())], "sum"))
        p.check(f"all_reduce_coalesced tensor {i} not waited, then barrier")
    x.result(reduce_np([values(seed, r, (3, 2)) for r in range(world())], "sum"))
    x.check("all_reduce not waited, then barrier")
    y.result(values("unwaited-broadcast", world() - 1, (4,)))
    y.check("broadcast not waited, then barrier")
    out.result(np.concatenate([values("unwaited-gather", r, (2,)) for r in range(world())]))
    out.check("all_gather_into (sync) after the unwaited ones")


register("barrier-completes-unwaited", case_barrier_completes_unwaited)
