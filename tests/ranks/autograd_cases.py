"""compat.autograd on real ranks: forward values and gradients against analytic expectations.

Rank r's loss is sum(result * w_r) with its own seeded weights w_r; the gradient compat must give
rank r is the sum over ranks of d(loss_q)/d(x_r), computed here in numpy from every rank's data.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

import compat
from tests.ranks.cases import RECORDS, members, random_floats, rank, register, subgroup, world

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def check(
    kit: Any, name: str, value: float, grad: np.ndarray, value_np: float, grad_np: np.ndarray
) -> None:
    np.testing.assert_allclose(value, value_np, **TOLERANCE, err_msg=f"{name}: forward")
    np.testing.assert_allclose(grad, grad_np, **TOLERANCE, err_msg=f"{name}: gradient")
    RECORDS.extend([np.array(value), grad])


def case_all_gather(kit: Any) -> None:
    n, me = world(), rank()
    xs = [random_floats("ag-x", r, (2, 3)) for r in range(n)]
    ws = [random_floats("ag-w", r, (2 * n, 3)) for r in range(n)]
    value, grad = kit.value_and_grad(
        lambda x: (compat.autograd.all_gather(x) * kit.tensor(ws[me], "float32")).sum(), xs[me]
    )
    expected_grad = sum(w[2 * me : 2 * me + 2] for w in ws)
    check(kit, "all_gather", value, grad, float((np.concatenate(xs) * ws[me]).sum()), expected_grad)


def case_reduce_scatter(kit: Any, op: str) -> None:
    n, me = world(), rank()
    xs = [random_floats("rs-x", r, (2 * n, 3)) for r in range(n)]
    ws = [random_floats("rs-w", r, (2, 3)) for r in range(n)]
    scale = 1.0 if op == "sum" else 1.0 / n
    value, grad = kit.value_and_grad(
        lambda x: (compat.autograd.reduce_scatter(x, op) * kit.tensor(ws[me], "float32")).sum(),
        xs[me],
    )
    mine = sum(x[2 * me : 2 * me + 2] for x in xs) * scale
    check(
        kit,
        f"reduce_scatter {op}",
        value,
        grad,
        float((mine * ws[me]).sum()),
        np.concatenate(ws) * scale,
    )


def case_all_reduce(kit: Any, op: str) -> None:
    n, me = world(), rank()
    xs = [random_floats("ar-x", r, (2, 3)) for r in range(n)]
    ws = [random_floats("ar-w", r, (2, 3)) for r in range(n)]
    scale = 1.0 if op == "sum" else 1.0 / n
    tensor = kit.tensor(xs[me], "float32")
    value, grad = kit.value_and_grad(
        lambda x: (compat.autograd.all_reduce(x, op) * kit.tensor(ws[me], "float32")).sum(), xs[me]
    )
    reduced = sum(xs) * scale
    check(kit, f"all_reduce {op}", value, grad, float((reduced * ws[me]).sum()), sum(ws) * scale)
    compat.autograd.all_reduce(tensor, op)
    np.testing.assert_array_equal(kit.numpy(tensor), xs[me], "the input must be left unchanged")


def case_all_reduce_group_as_ranks(kit: Any) -> None:
    """compat.autograd.all_reduce with funcol's group=[ranks]: the world's ranks, and the ranks
    of a group made before by compat.new_group (listed in reverse order)."""
    n = world()
    ranks = list(range(1, n)) if n > 1 else [0]
    compat.new_group(ranks)
    for name, spelled, who in (("world", list(range(n)), list(range(n))),
                               ("group", ranks[::-1], ranks)):  # fmt: skip
        if rank() not in who:
            continue
        me = who.index(rank())
        xs = [random_floats(f"ar-ranks-{name}-x", r, (2, 3)) for r in who]
        ws = [random_floats(f"ar-ranks-{name}-w", r, (2, 3)) for r in who]
        weights = kit.tensor(ws[me], "float32")

        def loss(x: Any, group: list[int] = spelled, weights: Any = weights) -> Any:
            return (compat.autograd.all_reduce(x, "sum", group=group) * weights).sum()

        value, grad = kit.value_and_grad(loss, xs[me])
        check(kit, f"all_reduce group={spelled}", value, grad,
              float((sum(xs) * ws[me]).sum()), sum(ws))  # fmt: skip


def case_clip(kit: Any) -> None:
    """CLIP's pattern: gather every rank's features, score the local ones against all of them.

    loss_r = sum((x_r @ G.T) * M_r) with G = all_gather(x). Then
    d(loss)/d(x_me) = M_me @ G (direct) + sum_r (M_r.T @ x_r)[rows of me] (through the gather).
    """
    n, me, batch = world(), rank(), 3
    xs = [random_floats("clip-x", r, (batch, 4)) for r in range(n)]
    ms_ = [random_floats("clip-m", r, (batch, n * batch)) for r in range(n)]
    gathered = np.concatenate(xs)

    def loss(x: Any) -> Any:
        everyone = compat.autograd.all_gather(x)
        return ((x @ everyone.T) * kit.tensor(ms_[me], "float32")).sum()

    value, grad = kit.value_and_grad(loss, xs[me])
    through_gather = sum(
        (m.T @ x)[batch * me : batch * (me + 1)] for m, x in zip(ms_, xs, strict=True)
    )
    expected = ms_[me] @ gathered + through_gather
    check(kit, "clip", value, grad, float(((xs[me] @ gathered.T) * ms_[me]).sum()), expected)


def case_all_gather_tuple(kit: Any, shape: tuple[int, ...], use_group: bool) -> None:
    """torch.distributed.nn.functional.all_gather's result: one tensor per rank, each shaped like
    the input; rank r's loss weighs slot i by w_r[i], so rank me's gradient is sum_r w_r[me]."""
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me = len(ranks), ranks.index(rank())
    seed = f"agt-{shape}-{use_group}"
    xs = [random_floats(f"{seed}-x", r, shape) for r in ranks]
    ws = [[random_floats(f"{seed}-w{i}", r, shape) for i in range(n)] for r in ranks]
    parts = compat.autograd.all_gather_tuple(kit.tensor(xs[me], "float32"), group)
    assert isinstance(parts, tuple) and len(parts) == n, parts
    for i, part in enumerate(parts):
        assert tuple(part.shape) == shape, (i, part.shape)
        np.testing.assert_array_equal(kit.numpy(part), xs[i], f"slot {i}")
        RECORDS.append(kit.numpy(part))

    def loss(x: Any) -> Any:
        gathered = compat.autograd.all_gather_tuple(x, group)
        total = (gathered[0] * kit.tensor(ws[me][0], "float32")).sum()
        for i in range(1, n):
            total = total + (gathered[i] * kit.tensor(ws[me][i], "float32")).sum()
        return total

    value, grad = kit.value_and_grad(loss, xs[me])
    value_np = float(sum((xs[i] * ws[me][i]).sum() for i in range(n)))
    grad_np = sum(ws[q][me] for q in range(n))
    check(kit, f"all_gather_tuple {shape}", value, grad, value_np, np.asarray(grad_np))


def case_unsupported_op(kit: Any) -> None:
    tensor = kit.tensor(np.ones((world(), 2)), "float32")
    try:
        compat.autograd.reduce_scatter(tensor, "max")
    except compat.UnsupportedError as error:
        assert str(error).startswith("op: compat.autograd differentiates SUM and AVG; got MAX")
    else:
        raise AssertionError("expected UnsupportedError for MAX")


register("autograd[all_gather]", case_all_gather)
for _shape, _name in (((), "0d"), ((2, 3), "2d"), ((4,), "1d-group")):
    register(
        f"autograd[all_gather_tuple-{_name}]",
        partial(case_all_gather_tuple, shape=_shape, use_group=_name.endswith("group")),
    )
register("autograd[all_reduce-group-as-ranks]", case_all_reduce_group_as_ranks)
register("autograd[clip]", case_clip)
register("autograd[unsupported_op]", case_unsupported_op)
for _op in ("sum", "avg"):
    register(f"autograd[reduce_scatter-{_op}]", partial(case_reduce_scatter, op=_op))
    register(f"autograd[all_reduce-{_op}]", partial(case_all_reduce, op=_op))
