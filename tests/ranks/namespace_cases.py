"""compat.distributed, torch.distributed's names run by compat, used as torch code uses torch's
module (``import compat.distributed as dist``): positional calls in torch's order, torch's
functions for compat's other shapes (all_gather_into_tensor, reduce_scatter_tensor), async
results, the framework's own groups. Every tensor is a view in a sentinel-filled base, checked
whole against numpy. init_process_group runs in tests/test_port.py's DeepSpeed-style program."""

from __future__ import annotations

from typing import Any

import numpy as np

import compat
import compat.distributed as dist
from tests.ranks.cases import register, values, wait_if
from tests.ranks.layout_cases import Placed, sentinel_out


def _sum(seed: str, shape: tuple[int, ...], ranks: list[int]) -> np.ndarray:
    return np.sum([values(seed, r, shape) for r in ranks], axis=0)


def case_namespace_collectives(kit: Any) -> None:
    """all_reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single,
    gather with torch's positional group_dst, sync and async."""
    me, n = dist.get_rank(), dist.get_world_size()
    assert (me, n) == (compat.get_rank(), compat.get_world_size())
    for async_op in (False, True):
        seed = f"ns-all_reduce-{async_op}"
        x = Placed(kit, values(seed, me, (3, 2)), "float32", "interior")
        wait_if(dist.all_reduce(x.view, dist.ReduceOp.SUM, None, async_op), async_op)
        x.result(_sum(seed, (3, 2), list(range(n))))
        x.check("all_reduce")

        seed = f"ns-broadcast-{async_op}"
        b = Placed(kit, values(seed, me, (4,)), "float32", "strided")
        wait_if(dist.broadcast(b.view, n - 1, None, async_op), async_op)
        b.result(values(seed, n - 1, (4,)))
        b.check("broadcast")

        seed = f"ns-gather_into-{async_op}"
        part = Placed(kit, values(seed, me, (2, 3)), "float32", "column")
        out = sentinel_out(kit, (2 * n, 3), "float32", "interior")
        wait_if(dist.all_gather_into_tensor(out.view, part.view, None, async_op), async_op)
        out.result(np.concatenate([values(seed, r, (2, 3)) for r in range(n)]))
        out.check("all_gather_into_tensor output")
        part.check("all_gather_into_tensor input unchanged")

        seed = f"ns-reduce_scatter-{async_op}"
        whole = Placed(kit, values(seed, me, (2 * n, 2)), "float32", "interior")
        mine = sentinel_out(kit, (2, 2), "float32", "column")
        wait_if(
            dist.reduce_scatter_tensor(mine.view, whole.view, dist.ReduceOp.SUM, None, async_op),
            async_op,
        )
        mine.result(_sum(seed, (2 * n, 2), list(range(n)))[2 * me : 2 * me + 2])
        mine.check("reduce_scatter_tensor output")
        whole.check("reduce_scatter_tensor input unchanged")

        seed = f"ns-a2a-{async_op}"
        send = Placed(kit, values(seed, me, (2 * n,)), "float32", "interior")
        got = sentinel_out(kit, (2 * n,), "float32", "strided")
        wait_if(dist.all_to_all_single(got.view, send.view, None, None, None, async_op), async_op)
        got.result(
            np.concatenate([values(seed, r, (2 * n,))[2 * me : 2 * me + 2] for r in range(n)])
        )
        got.check("all_to_all_single output")
    # torch's positional group_dst (keyword-only in compat.gather)
    seed = "ns-gather"
    g = Placed(kit, values(seed, me, (3,)), "float32", "interior")
    outs = [sentinel_out(kit, (3,), "float32", "strided") for _ in range(n)] if me == 0 else []
    assert dist.gather(g.view, [o.view for o in outs] or None, None, None, False, 0) is None
    for r, o in enumerate(outs):
        o.result(values(seed, r, (3,)))
        o.check(f"gather_list[{r}]")


def case_namespace_p2p_and_groups(kit: Any) -> None:
    """send/recv and isend/irecv + wait around a ring, barrier (sync and async), group.WORLD,
    new_group in torch's positions (the framework's own group, taken by compat and by the
    framework's own functions)."""
    me, n = dist.get_rank(), dist.get_world_size()
    after, before = (me + 1) % n, (me - 1) % n
    seed = "ns-ring"
    out = Placed(kit, values(seed, me, (4,)), "float32", "interior")
    into = sentinel_out(kit, (4,), "float32", "strided")
    if me == 0:
        dist.send(out.view, after)
        assert dist.recv(into.view, before) == before
    else:
        assert dist.recv(into.view, before, None, 0) == before
        dist.send(out.view, after, None, 0)
    into.result(values(seed, before, (4,)))
    into.check("recv")
    out.check("send's input unchanged")
    into = sentinel_out(kit, (4,), "float32", "offset0")
    works = [dist.irecv(into.view, src=before), dist.isend(out.view, after)]
    for work in works:
        assert isinstance(work, dist.Work) and work.wait() is True
    into.result(values(seed, before, (4,)))
    into.check("irecv")
    assert dist.barrier() is None
    work = dist.barrier(None, True)
    assert work is not None and work.wait()
    world_group = dist.group.WORLD
    assert world_group is not None and dist.get_world_size(world_group) == n
    ranks = sorted({0, n - 1})
    made = dist.new_group(ranks, None, None, None, False, "ns_pair")
    assert made is not None
    if me in ranks:
        assert dist.get_process_group_ranks(made) == ranks
        seed = "ns-group"
        x = Placed(kit, values(seed, me, (2, 2)), "float32", "column")
        dist.all_reduce(x.view, group=made)
        x.result(_sum(seed, (2, 2), ranks))
        x.check("all_reduce on new_group")
        native = _native_rank(kit, made)
        assert native == ranks.index(me), (native, ranks)


def _native_rank(kit: Any, group: Any) -> int:
    """The framework's own answer for ``group``: it is the framework's own object."""
    if kit.framework == "torch":
        import torch.distributed

        return int(torch.distributed.get_rank(group))
    from mindspore import communication

    return int(communication.get_rank(group))


register("namespace_collectives", case_namespace_collectives, min_world=2)
register("namespace_p2p_and_groups", case_namespace_p2p_and_groups, min_world=2)
