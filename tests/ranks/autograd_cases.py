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
    agree(name, value, grad, value_np, grad_np)
    RECORDS.extend([np.array(value), grad])


def agree(name: str, value: float, grad: np.ndarray, value_np: float, grad_np: np.ndarray) -> None:
    """check() without the record test_parity compares (for what only torch computes)."""
    np.testing.assert_allclose(value, value_np, **TOLERANCE, err_msg=f"{name}: forward")
    np.testing.assert_allclose(grad, grad_np, **TOLERANCE, err_msg=f"{name}: gradient")


def case_all_gather(kit: Any) -> None:
    n, me = world(), rank()
    xs = [random_floats("ag-x", r, (2, 3)) for r in range(n)]
    ws = [random_floats("ag-w", r, (2 * n, 3)) for r in range(n)]
    value, grad = kit.value_and_grad(
        lambda x: (compat.autograd.all_gather(x) * kit.tensor(ws[me], "float32")).sum(), xs[me]
    )
    expected_grad = sum(w[2 * me : 2 * me + 2] for w in ws)
    check(kit, "all_gather", value, grad, float((np.concatenate(xs) * ws[me]).sum()), expected_grad)


def case_all_gather_dim(kit: Any, dim: int) -> None:
    """Concatenated on ``dim`` (funcol's gather_dim): rank me's gradient is the sum over ranks of
    the slice of their weights that its tensor filled; on torch, funcol's
    all_gather_tensor_autograd gives the same value and gradient."""
    n, me = world(), rank()
    xs = [random_floats(f"ag-dim{dim}-x", r, (2, 3)) for r in range(n)]
    gathered = np.concatenate(xs, axis=dim)
    ws = [random_floats(f"ag-dim{dim}-w", r, gathered.shape) for r in range(n)]
    width = xs[me].shape[dim]
    mine = [slice(None)] * 2
    mine[dim] = slice(width * me, width * (me + 1))
    expected = sum(w[tuple(mine)] for w in ws)
    weights = kit.tensor(ws[me], "float32")
    value, grad = kit.value_and_grad(
        lambda x: (compat.autograd.all_gather(x, dim=dim) * weights).sum(), xs[me]
    )
    check(kit, f"all_gather dim={dim}", value, grad, float((gathered * ws[me]).sum()), expected)
    if kit.framework == "torch":
        import torch.distributed as dist
        import torch.distributed._functional_collectives as funcol

        theirs = kit.value_and_grad(
            lambda x: (funcol.all_gather_tensor_autograd(x, dim, dist.group.WORLD) * weights).sum(),
            xs[me],
        )
        agree(f"funcol all_gather_tensor_autograd {dim}", *theirs, value, grad)


def case_reduce_scatter_dim(kit: Any, op: str, dim: int) -> None:
    """This rank's part of ``dim`` (funcol's scatter_dim) of the reduction; every rank's input
    gets the gradient of the part its weights cover (divided by the world size for AVG); on
    torch, funcol's reduce_scatter_tensor_autograd gives the same value (and for SUM the same
    gradient; its backward raises for AVG)."""
    n, me = world(), rank()
    xs = [random_floats(f"rs-dim{dim}-{op}-x", r, (3, 2 * n)) for r in range(n)]
    ws = [random_floats(f"rs-dim{dim}-{op}-w", r, (3, 2)) for r in range(n)]
    scale = 1.0 if op == "sum" else 1.0 / n
    parts = [np.split(x, n, axis=dim)[me] for x in xs]
    weights = kit.tensor(ws[me], "float32")
    value, grad = kit.value_and_grad(
        lambda x: (compat.autograd.reduce_scatter(x, op, dim=dim) * weights).sum(), xs[me]
    )
    expected = np.concatenate(ws, axis=dim) * scale
    check(kit, f"reduce_scatter {op} dim={dim}", value, grad,
          float((sum(parts) * scale * ws[me]).sum()), expected)  # fmt: skip
    if kit.framework == "torch" and op == "sum":
        import torch.distributed as dist
        import torch.distributed._functional_collectives as funcol

        theirs = kit.value_and_grad(
            lambda x: (
                funcol.reduce_scatter_tensor_autograd(x, op, dim, dist.group.WORLD) * weights
            ).sum(),
            xs[me],
        )
        agree(f"funcol reduce_scatter_tensor_autograd {dim}", *theirs, value, grad)


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


def case_all_reduce_forward_only(kit: Any, op: str) -> None:
    """An op compat.autograd.all_reduce reduces with but does not differentiate: the forward
    gives the reduction (as numpy's, and on torch as funcol's all_reduce), the input left as it
    is; the backward raises on every rank before any communication, where funcol's raises too
    (torch's message checked beside compat's); then a collective runs."""
    n, me = world(), rank()
    xs = [random_floats(f"ar-{op}-x", r, (2, 3)) for r in range(n)]
    ws = [random_floats(f"ar-{op}-w", r, (2, 3)) for r in range(n)]
    expected = {"max": np.max, "min": np.min, "product": np.prod}[op](np.stack(xs), axis=0)
    tensor = kit.tensor(xs[me], "float32")
    reduced = compat.autograd.all_reduce(tensor, op)
    np.testing.assert_allclose(kit.numpy(reduced), expected, **TOLERANCE, err_msg=op)
    np.testing.assert_array_equal(kit.numpy(tensor), xs[me], "the input must be left unchanged")
    if kit.framework == "torch":
        _torch_funcol_all_reduce(kit, op, xs[me], reduced)
    weights = kit.tensor(ws[me], "float32")
    _refused(
        lambda: kit.value_and_grad(
            lambda x: (compat.autograd.all_reduce(x, op) * weights).sum(), xs[me]
        ),
        compat.UnsupportedError,
        f"op: all_reduce backward only supports 'sum' and 'avg' reduction, got '{op}'",
    )
    total = compat.autograd.all_reduce(kit.tensor(np.ones(2), "float32"))
    np.testing.assert_array_equal(kit.numpy(total), np.full(2, float(n)))


def _torch_funcol_all_reduce(kit: Any, op: str, mine: np.ndarray, reduced: Any) -> None:
    """torch's own funcol all_reduce on the same input: the same forward, and a backward that
    raises (torch 2.13's message)."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    x = kit.tensor(mine, "float32").requires_grad_(True)
    theirs = funcol.all_reduce(x, op, dist.group.WORLD)
    # compat may reduce in another order (shared memory): PRODUCT rounds differently
    np.testing.assert_allclose(kit.numpy(theirs), kit.numpy(reduced), **TOLERANCE,
                               err_msg=f"funcol {op}")  # fmt: skip
    _refused(lambda: theirs.sum().backward(), RuntimeError,
             f"all_reduce backward only supports 'sum' reduction, got '{op}'")  # fmt: skip


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


def _sizes(uneven: bool, sender: int, receiver: int) -> int:
    """Rows rank ``sender`` sends rank ``receiver`` (group ranks): 1 to 3, or 2 for all."""
    return (2 * sender + receiver) % 3 + 1 if uneven else 2


def _weighted(kit: Any, parts: Any, weights: list[np.ndarray]) -> Any:
    """sum_i sum(parts[i] * weights[i]), differentiable on both frameworks."""
    total = (parts[0] * kit.tensor(weights[0], "float32")).sum()
    for part, weight in zip(parts[1:], weights[1:], strict=True):
        total = total + (part * kit.tensor(weight, "float32")).sum()
    return total


def case_all_to_all_single(kit: Any, uneven: bool, use_group: bool) -> None:
    """Rank r's loss weighs what it received by w_r; the gradient of the rows rank me sent rank
    i is the rows of w_i where i placed them (after the parts of group ranks before me)."""
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me, seed = len(ranks), ranks.index(rank()), f"a2as-{uneven}-{use_group}"
    sent = [[_sizes(uneven, r, i) for i in range(n)] for r in range(n)]
    xs = [random_floats(f"{seed}-x", ranks[r], (sum(sent[r]), 3)) for r in range(n)]
    received = [sum(sent[r][i] for r in range(n)) for i in range(n)]
    ws = [random_floats(f"{seed}-w", ranks[i], (received[i], 3)) for i in range(n)]
    cut = lambda r, i: xs[r][sum(sent[r][:i]) : sum(sent[r][: i + 1])]  # noqa: E731
    mine = np.concatenate([cut(r, me) for r in range(n)])
    out_sizes = [sent[r][me] for r in range(n)] if uneven else None
    in_sizes = sent[me] if uneven else None

    def loss(x: Any) -> Any:
        result = compat.autograd.all_to_all_single(x, out_sizes, in_sizes, group)
        return (result * kit.tensor(ws[me], "float32")).sum()

    value, grad = kit.value_and_grad(loss, xs[me])
    start = lambda i: sum(sent[r][i] for r in range(me))  # noqa: E731
    expected = np.concatenate([ws[i][start(i) : start(i) + sent[me][i]] for i in range(n)])
    name = f"all_to_all_single uneven={uneven} group={use_group}"
    check(kit, name, value, grad, float((mine * ws[me]).sum()), expected)


def case_permute_tensor(kit: Any, shape: tuple[int, ...]) -> None:
    """A ring (group rank m sends to m+1): rank r receives rank r-1's tensor; the gradient of
    what rank me sent is the weights of the rank it went to. On torch, for a 1-D tensor (the
    only shape funcol's takes), funcol's permute_tensor gives the same value."""
    n, me = world(), rank()
    targets = [(m + 1) % n for m in range(n)]
    seed = f"permute-{len(shape)}"
    xs = [random_floats(f"{seed}-x", r, shape) for r in range(n)]
    ws = [random_floats(f"{seed}-w", r, shape) for r in range(n)]

    def loss(x: Any) -> Any:
        moved = compat.autograd.permute_tensor(x, targets)
        return (moved * kit.tensor(ws[me], "float32")).sum()

    value, grad = kit.value_and_grad(loss, xs[me])
    check(kit, f"permute_tensor {shape}", value, grad,
          float((xs[(me - 1) % n] * ws[me]).sum()), ws[targets[me]])  # fmt: skip
    if kit.framework == "torch" and len(shape) == 1:
        import torch.distributed as dist
        import torch.distributed._functional_collectives as funcol

        theirs = funcol.permute_tensor(kit.tensor(xs[me], "float32"), targets, dist.group.WORLD)
        np.testing.assert_allclose(kit.numpy(theirs), xs[(me - 1) % n], **TOLERANCE)


def case_all_to_all_list(kit: Any) -> None:
    """The list form with parts of different shapes per pair ((rows, 2 + receiver)): the loss
    reads output_tensor_list after the call (as torch's users do); the gradient of the part
    rank me sent rank i is w_i's slot for me."""
    n, me = world(), rank()
    shape = lambda r, i: (_sizes(True, r, i), 2 + i)  # noqa: E731
    xs = [[random_floats("a2a-x", r * n + i, shape(r, i)) for i in range(n)] for r in range(n)]
    ws = [[random_floats("a2a-w", i * n + r, shape(r, i)) for r in range(n)] for i in range(n)]
    flat = np.concatenate([part.reshape(-1) for part in xs[me]])
    bounds = [int(b) for b in np.cumsum([0] + [part.size for part in xs[me]])]

    def loss(x: Any) -> Any:
        inputs = [x[bounds[i] : bounds[i + 1]].reshape(shape(me, i)) for i in range(n)]
        outputs = [kit.tensor(np.zeros(shape(r, me)), "float32") for r in range(n)]
        returned = compat.autograd.all_to_all(outputs, inputs)
        assert all(a is b for a, b in zip(returned, outputs, strict=True)), "not the outputs"
        for r in range(n):
            np.testing.assert_array_equal(kit.numpy(outputs[r]), xs[r][me], f"from {r}")
        return _weighted(kit, outputs, ws[me])

    value, grad = kit.value_and_grad(loss, flat)
    expected = np.concatenate([ws[i][me].reshape(-1) for i in range(n)])
    value_np = float(sum((xs[r][me] * ws[me][r]).sum() for r in range(n)))
    check(kit, "all_to_all list", value, grad, value_np, expected)


def case_broadcast(kit: Any, use_group: bool) -> None:
    """From the group's last rank: its input gets the sum of every rank's weights, the other
    ranks' inputs zeros; the input is left unchanged."""
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    me, src = ranks.index(rank()), ranks[-1]
    xs = [random_floats(f"bc-{use_group}-x", r, (2, 3)) for r in ranks]
    ws = [random_floats(f"bc-{use_group}-w", r, (2, 3)) for r in ranks]
    tensor = kit.tensor(xs[me], "float32")
    weights = kit.tensor(ws[me], "float32")
    value, grad = kit.value_and_grad(
        lambda x: (compat.autograd.broadcast(x, src, group) * weights).sum(), xs[me]
    )
    expected = sum(ws) if rank() == src else np.zeros((2, 3), np.float32)
    check(kit, f"broadcast group={use_group}", value, grad, float((xs[-1] * ws[me]).sum()),
          np.asarray(expected))  # fmt: skip
    compat.autograd.broadcast(tensor, src, group)
    np.testing.assert_array_equal(kit.numpy(tensor), xs[me], "the input must be left unchanged")


def case_reduce(kit: Any, op: str) -> None:
    """To the last rank: there the reduction, elsewhere a copy of the input; every rank's input
    gets the last rank's weights (divided by the world size for AVG)."""
    n, me, dst = world(), rank(), world() - 1
    xs = [random_floats(f"rd-{op}-x", r, (2, 3)) for r in range(n)]
    ws = [random_floats(f"rd-{op}-w", r, (2, 3)) for r in range(n)]
    scale = 1.0 if op == "sum" else 1.0 / n
    result = sum(xs) * scale if me == dst else xs[me]
    value, grad = kit.value_and_grad(
        lambda x: (compat.autograd.reduce(x, dst, op) * kit.tensor(ws[me], "float32")).sum(),
        xs[me],
    )
    check(kit, f"reduce {op}", value, grad, float((result * ws[me]).sum()), ws[dst] * scale)


def case_gather(kit: Any, use_group: bool) -> None:
    """To the group's last rank: a tuple of every rank's tensor there, of zeros elsewhere; each
    rank's input gets the root's weights for its slot."""
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me, dst = len(ranks), ranks.index(rank()), ranks[-1]
    xs = [random_floats(f"ga-{use_group}-x", r, (2,)) for r in ranks]
    ws = [[random_floats(f"ga-{use_group}-w{i}", r, (2,)) for i in range(n)] for r in ranks]
    slots = xs if rank() == dst else [np.zeros(2, np.float32)] * n

    def loss(x: Any) -> Any:
        parts = compat.autograd.gather(x, dst, group)
        assert isinstance(parts, tuple) and len(parts) == n, parts
        return _weighted(kit, parts, ws[me])

    value, grad = kit.value_and_grad(loss, xs[me])
    value_np = float(sum((slot * w).sum() for slot, w in zip(slots, ws[me], strict=True)))
    check(kit, f"gather group={use_group}", value, grad, value_np, ws[-1][me])


def case_scatter(kit: Any, use_group: bool) -> None:
    """From the group's last rank: rank i gets the root's tensors[i]; the root's tensors[i]
    gets rank i's weights, the other ranks' tensors zeros."""
    group = subgroup() if use_group else None
    ranks = members(group)
    if rank() not in ranks:
        return
    n, me, src = len(ranks), ranks.index(rank()), ranks[-1]
    xs = [random_floats(f"sc-{use_group}-x", r, (n, 2)) for r in ranks]
    ws = [random_floats(f"sc-{use_group}-w", r, (2,)) for r in ranks]

    def loss(x: Any) -> Any:
        tensors = list(x.unbind(0))
        return (compat.autograd.scatter(tensors, src, group) * kit.tensor(ws[me], "float32")).sum()

    value, grad = kit.value_and_grad(loss, xs[me])
    expected = np.stack(ws) if rank() == src else np.zeros((n, 2), np.float32)
    check(kit, f"scatter group={use_group}", value, grad, float((xs[-1][me] * ws[me]).sum()),
          expected)  # fmt: skip


def _refused(call: Any, error: type[Exception], start: str) -> None:
    try:
        call()
    except error as raised:
        assert str(raised).startswith(start), str(raised)
    else:
        raise AssertionError(f"expected {error.__name__} starting {start!r}")


def case_bad_exchange(kit: Any) -> None:
    """Bad arguments refused on the calling rank before any communication (each rank raises
    alone; a collective started would hang), then a collective runs."""
    n = world()
    x = kit.tensor(np.ones((2 * n, 3)), "float32")
    _refused(lambda: compat.autograd.all_to_all_single(x, None, [1] * n), ValueError,
             "input_split_sizes: ")  # fmt: skip
    _refused(lambda: compat.autograd.all_to_all_single(x, [2] * (n + 1), None), ValueError,
             "output_split_sizes: expected")  # fmt: skip
    _refused(lambda: compat.autograd.all_to_all_single(x, "ab", None), TypeError,
             "output_split_sizes: expected")  # fmt: skip
    _refused(lambda: compat.autograd.all_to_all([x] * n, [x] * (n + 1)), ValueError,
             "input_tensor_list: expected a list of")  # fmt: skip
    wrong = kit.tensor(np.ones(2), "int32")
    _refused(lambda: compat.autograd.all_to_all([wrong] * n, [x] * n), TypeError,
             "output_tensor_list[0]: ")  # fmt: skip
    _refused(lambda: compat.autograd.broadcast(x, n), ValueError, "src: expected a global rank")
    _refused(lambda: compat.autograd.gather(x, -1), ValueError, "dst: expected a global rank")
    _refused(lambda: compat.autograd.reduce(x, 0, "max"), compat.UnsupportedError, "op: ")
    _refused(lambda: compat.autograd.scatter([x] * (n + 1)), ValueError, "tensors: expected")
    _refused(lambda: compat.autograd.permute_tensor(x, [0] * (n + 1)), TypeError, "src_dst: ")
    _refused(lambda: compat.autograd.permute_tensor(x, [n] * n), ValueError, "src_dst: expected")
    total = compat.autograd.all_reduce(kit.tensor(np.ones(2), "float32"))
    np.testing.assert_array_equal(kit.numpy(total), np.full(2, float(n)))


def case_reduce_scatter_forward_only(kit: Any, op: str) -> None:
    """An op compat.autograd.reduce_scatter reduces with but does not differentiate: this rank's
    part of the reduction (as numpy's, and on torch as funcol's reduce_scatter_tensor), then a
    backward that raises on every rank before any communication, where funcol's raises too
    (torch's message checked beside compat's); then a collective runs."""
    n, me = world(), rank()
    xs = [random_floats(f"rs-{op}-x", r, (2 * n, 3)) for r in range(n)]
    ws = [random_floats(f"rs-{op}-w", r, (2, 3)) for r in range(n)]
    reduce = {"max": np.max, "min": np.min, "product": np.prod}[op]
    expected = reduce(np.stack(xs), axis=0)[2 * me : 2 * me + 2]
    mine = compat.autograd.reduce_scatter(kit.tensor(xs[me], "float32"), op)
    np.testing.assert_allclose(kit.numpy(mine), expected, **TOLERANCE, err_msg=op)
    if kit.framework == "torch":
        import torch.distributed as dist
        import torch.distributed._functional_collectives as funcol

        x = kit.tensor(xs[me], "float32").requires_grad_(True)
        theirs = funcol.reduce_scatter_single(x, op, 0, dist.group.WORLD)
        np.testing.assert_allclose(kit.numpy(theirs), kit.numpy(mine), **TOLERANCE)
        said = f"reduce_scatter_tensor backward only supports 'sum' reduction, got '{op}'"
        _refused(lambda: theirs.sum().backward(), RuntimeError, said)
    weights = kit.tensor(ws[me], "float32")
    _refused(
        lambda: kit.value_and_grad(
            lambda x: (compat.autograd.reduce_scatter(x, op) * weights).sum(), xs[me]
        ),
        compat.UnsupportedError,
        f"op: reduce_scatter backward only supports 'sum' and 'avg' reduction, got '{op}'",
    )
    total = compat.autograd.all_reduce(kit.tensor(np.ones(2), "float32"))
    np.testing.assert_array_equal(kit.numpy(total), np.full(2, float(n)))


register("autograd[all_gather]", case_all_gather)
for _dim in (1, -1):
    register(f"autograd[all_gather-dim{_dim}]", partial(case_all_gather_dim, dim=_dim))
    for _op in ("sum", "avg"):
        register(
            f"autograd[reduce_scatter-{_op}-dim{_dim}]",
            partial(case_reduce_scatter_dim, op=_op, dim=_dim),
        )
for _shape, _name in (((), "0d"), ((2, 3), "2d"), ((4,), "1d-group")):
    register(
        f"autograd[all_gather_tuple-{_name}]",
        partial(case_all_gather_tuple, shape=_shape, use_group=_name.endswith("group")),
    )
register("autograd[all_reduce-group-as-ranks]", case_all_reduce_group_as_ranks)
register("autograd[clip]", case_clip)
register("autograd[bad-exchange]", case_bad_exchange)
register("autograd[all_to_all-list]", case_all_to_all_list)
for _shape in ((5,), (3, 2)):
    register(f"autograd[permute_tensor-{len(_shape)}d]", partial(case_permute_tensor, shape=_shape))
for _flag in (False, True):
    _kind = "group" if _flag else "world"
    register(f"autograd[broadcast-{_kind}]", partial(case_broadcast, use_group=_flag))
    register(f"autograd[gather-{_kind}]", partial(case_gather, use_group=_flag))
    register(f"autograd[scatter-{_kind}]", partial(case_scatter, use_group=_flag))
for _uneven, _flag in ((False, False), (True, False), (True, True)):
    register(
        f"autograd[all_to_all_single-{'uneven' if _uneven else 'even'}{'-group' if _flag else ''}]",
        partial(case_all_to_all_single, uneven=_uneven, use_group=_flag),
    )
for _op in ("max", "min", "product"):
    register(f"autograd[all_reduce-{_op}]", partial(case_all_reduce_forward_only, op=_op))
    register(f"autograd[reduce_scatter-{_op}]", partial(case_reduce_scatter_forward_only, op=_op))
for _op in ("sum", "avg"):
    register(f"autograd[reduce_scatter-{_op}]", partial(case_reduce_scatter, op=_op))
    register(f"autograd[all_reduce-{_op}]", partial(case_all_reduce, op=_op))
    register(f"autograd[reduce-{_op}]", partial(case_reduce, op=_op))
