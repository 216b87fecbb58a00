"""A model's parameters as outputs: tensors that require grad (torch's ``nn.Parameter``,
MindSpore's ``Parameter``), written in place by every collective that writes its argument, as
torch's collectives write them (``for p in model.parameters(): dist.broadcast(p, 0)``, the
pattern of training loops that sync their weights by hand). Autograd refuses an in-place write
into such a tensor unless it is made on a detached alias; a path of compat's that forgot it
raised where torch's runs. Small tensors and ones above the size where compat's copies and
reductions go through numpy, sync and async; each parameter is checked whole.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

import compat
from tests.ranks.cases import assert_close, follow_up, rank, reduce_np, register, values, world

#: a small shape, and one above compat's numpy grain (32768 elements)
SHAPES = ((3, 4), (64, 640))


def parameter(kit: Any, data: np.ndarray) -> Any:
    """``data`` as a float32 parameter that requires grad."""
    tensor = kit.tensor(data, "float32")
    if kit.framework == "torch":
        return kit.torch.nn.Parameter(tensor)
    return kit.ms.Parameter(tensor, name=f"p{id(tensor)}", requires_grad=True)


def check(kit: Any, param: Any, expected: np.ndarray, what: str) -> None:
    assert_close(kit.numpy(param), expected, "float32", what)
    if kit.framework == "torch":
        assert param.requires_grad and param.is_leaf, what


def finish(work: Any, async_op: bool) -> None:
    if async_op:
        work.wait()


def check_broadcast(kit: Any, shape: tuple[int, ...], async_op: bool) -> None:
    for src in range(world()):
        param = parameter(kit, values(f"pb{src}", rank(), shape))
        finish(compat.broadcast(param, src, async_op=async_op), async_op)
        check(kit, param, values(f"pb{src}", src, shape), f"broadcast from {src}")


def check_all_reduce(kit: Any, shape: tuple[int, ...], async_op: bool) -> None:
    for op in ("sum", "avg", "max"):
        param = parameter(kit, values(f"pr{op}", rank(), shape))
        finish(compat.all_reduce(param, op=op, async_op=async_op), async_op)
        arrays = [values(f"pr{op}", who, shape) for who in range(world())]
        check(kit, param, reduce_np(arrays, op), f"all_reduce {op}")


def check_all_gather(kit: Any, shape: tuple[int, ...], async_op: bool) -> None:
    params = [parameter(kit, np.full(shape, -7.0)) for _ in range(world())]
    mine = kit.tensor(values("pg", rank(), shape), "float32")
    finish(compat.all_gather(params, mine, async_op=async_op), async_op)
    for who, param in enumerate(params):
        check(kit, param, values("pg", who, shape), f"all_gather part {who}")
    whole = parameter(kit, np.full((world() * shape[0], *shape[1:]), -7.0))
    finish(compat.all_gather_into(whole, mine, async_op=async_op), async_op)
    gathered = np.concatenate([values("pg", who, shape) for who in range(world())])
    check(kit, whole, gathered, "all_gather_into")


def check_reduce_scatter(kit: Any, shape: tuple[int, ...], async_op: bool) -> None:
    n, me = world(), rank()
    param = parameter(kit, np.full(shape, -7.0))
    mine = kit.tensor(values("ps", me, (n * shape[0], *shape[1:])), "float32")
    finish(compat.reduce_scatter_into(param, mine, async_op=async_op), async_op)
    total = reduce_np([values("ps", who, (n * shape[0], *shape[1:])) for who in range(n)], "sum")
    check(kit, param, total[me * shape[0] : (me + 1) * shape[0]], "reduce_scatter_into")


def check_all_to_all_single(kit: Any, shape: tuple[int, ...], async_op: bool) -> None:
    n, me = world(), rank()
    rows = n * shape[0]
    param = parameter(kit, np.full((rows, *shape[1:]), -7.0))
    mine = kit.tensor(values("pa", me, (rows, *shape[1:])), "float32")
    finish(compat.all_to_all_single(param, mine, async_op=async_op), async_op)
    parts = [values("pa", who, (rows, *shape[1:])) for who in range(n)]
    sent = [part[me * shape[0] : (me + 1) * shape[0]] for part in parts]
    check(kit, param, np.concatenate(sent), "all_to_all_single")


def check_scatter_and_reduce(kit: Any, shape: tuple[int, ...], async_op: bool) -> None:
    root, me = world() - 1, rank()
    param = parameter(kit, np.full(shape, -7.0))
    parts = [kit.tensor(values("pc", who, shape), "float32") for who in range(world())]
    work = compat.scatter(param, parts if me == root else None, src=root, async_op=async_op)
    finish(work, async_op)
    check(kit, param, values("pc", me, shape), "scatter")
    param = parameter(kit, values("pd", me, shape))
    finish(compat.reduce(param, dst=root, async_op=async_op), async_op)
    if me == root:
        total = reduce_np([values("pd", who, shape) for who in range(world())], "sum")
        check(kit, param, total, "reduce at its destination")


def check_recv(kit: Any, shape: tuple[int, ...], async_op: bool) -> None:
    """Each rank sends to the next and receives from the one before, into a parameter (the
    ring's even ranks send first when blocking)."""
    n, me = world(), rank()
    if n < 2:
        return
    param = parameter(kit, np.full(shape, -7.0))
    mine = kit.tensor(values("pp", me, shape), "float32")
    if async_op:
        sends = [compat.P2POp(compat.isend, mine, (me + 1) % n)]
        recvs = [compat.P2POp(compat.irecv, param, (me - 1) % n)]
        for work in compat.batch_isend_irecv(sends + recvs):
            work.wait()
    elif me % 2 == 0:
        compat.send(mine, (me + 1) % n)
        compat.recv(param, (me - 1) % n)
    else:
        compat.recv(param, (me - 1) % n)
        compat.send(mine, (me + 1) % n)
    check(kit, param, values("pp", (me - 1) % n, shape), "recv" if not async_op else "irecv")


def each(kit: Any, check_one: Any) -> None:
    for shape in SHAPES:
        for async_op in (False, True):
            check_one(kit, shape, async_op)
    follow_up(kit)


CHECKS = {
    "broadcast": check_broadcast,
    "all_reduce": check_all_reduce,
    "all_gather": check_all_gather,
    "reduce_scatter": check_reduce_scatter,
    "all_to_all_single": check_all_to_all_single,
    "scatter_and_reduce": check_scatter_and_reduce,
    "recv": check_recv,
}

for _name, _check in CHECKS.items():
    register(f"parameter[{_name}]", partial(each, check_one=_check))
