"""Functional collectives as DTensor/FSDP2-era code calls them
(``torch.distributed._functional_collectives``: they return new tensors and take the group as a
torch ProcessGroup or a list of ranks), plus ``torch.distributed.nn.all_reduce``, the alias of
``torch.distributed.nn.functional.all_reduce``. The ProcessGroup comes from ``parallel_state``,
which is not ported."""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.distributed.nn

from .parallel_state import get_tp_group, initialize_model_parallel


def tp_all_reduce(t: torch.Tensor, group: Any) -> torch.Tensor:
    return funcol.all_reduce(t, "sum", group)


def sp_all_gather(t: torch.Tensor, group: Any) -> torch.Tensor:
    return funcol.all_gather_tensor(t, 0, group)


def sp_reduce_scatter(t: torch.Tensor, group: Any) -> torch.Tensor:
    return funcol.reduce_scatter_tensor(t, "sum", 0, group)


def sp_all_gather_single(t: torch.Tensor, group: Any) -> torch.Tensor:
    return funcol.all_gather_single(t, 0, group)


def sp_reduce_scatter_single(t: torch.Tensor, group: Any) -> torch.Tensor:
    return funcol.reduce_scatter_single(t, "sum", 0, group)


def amax(t: torch.Tensor, group: Any) -> torch.Tensor:
    """torchao's tensor-parallel low-precision linear syncs the absolute maxima."""
    return funcol.all_reduce(t.abs().amax(dim=-1), "MAX", group)


def max_backward(group: Any) -> list[Any]:
    """funcol's all_reduce with MAX runs forward; its backward raises (on every rank)."""
    x = torch.tensor([1.0 + dist.get_rank(), -2.0], requires_grad=True)
    y = funcol.all_reduce(x * 1.0, "max", group)
    try:
        y.sum().backward()
    except RuntimeError as error:
        said = str(error)
        return [y, "all_reduce backward only supports 'sum'" in said, "got 'max'" in said, x.grad]
    return [y, "no error"]


def gather_columns(t: torch.Tensor, group: Any) -> torch.Tensor:
    return funcol.all_gather_single_autograd(t, 1, group)


def gather_last(t: torch.Tensor, group: Any) -> torch.Tensor:
    return funcol.all_gather_tensor_autograd(t, -1, group)


def scatter_columns(t: torch.Tensor, group: Any) -> torch.Tensor:
    return funcol.reduce_scatter_single_autograd(t, "sum", 1, group)


def scatter_rows(t: torch.Tensor, group: Any) -> torch.Tensor:
    return funcol.reduce_scatter_tensor_autograd(t, reduceOp="sum", scatter_dim=0, group=group)


def scatter_max(t: torch.Tensor, group: Any) -> torch.Tensor:
    return funcol.reduce_scatter_single_autograd(t, "max", 0, group)


def differentiable_on_dims(group: Any) -> dict[str, Any]:
    """funcol's *_autograd gathers and reduce-scatters on dims other than 0: each value and the
    gradient of a weighted sum of it."""
    rank, world = dist.get_rank(), dist.get_world_size()
    results: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the *_tensor_autograd names
        for name, function in (("gather_columns", gather_columns), ("gather_last", gather_last),
                               ("scatter_columns", scatter_columns),
                               ("scatter_rows", scatter_rows),
                               # the plain forms: torch 2.13 differentiates them too
                               ("gather_single", sp_all_gather_single),
                               ("gather_tensor", sp_all_gather),
                               ("scatter_single", sp_reduce_scatter_single),
                               ("scatter_tensor", sp_reduce_scatter)):  # fmt: skip
            x = torch.arange(6.0 * world).reshape(2 * world, 3)[:, :2] * (rank + 1.0)
            x.requires_grad_(True)
            wide = name in ("scatter_columns", "scatter_rows")
            y = function(torch.cat([x] * world, 1) if wide else x * 1.0, group)
            (y * torch.arange(float(y.numel())).reshape(y.shape)).sum().backward()
            results[name] = [y * 1.0, x.grad]
    results["scatter_max"] = scatter_max(torch.arange(2.0 * world) * (rank + 1.0), group)
    return results


def row_parallel_output(partial: torch.Tensor) -> torch.Tensor:
    return torch.distributed.nn.all_reduce(partial)


def ulysses_exchange(t: torch.Tensor, send: list[int], receive: list[int], group: Any) -> Any:
    return funcol.all_to_all_single_autograd(t, receive, send, group)


def exchange_single(out: torch.Tensor, t: torch.Tensor, group: Any) -> torch.Tensor:
    return torch.distributed.nn.functional.all_to_all_single(out, t, group=group)


def exchange_list(outs: list[torch.Tensor], ins: list[torch.Tensor], group: Any) -> Any:
    torch.distributed.nn.functional.all_to_all(outs, ins, group=group)
    return torch.cat([o.reshape(-1) for o in outs])


def rooted(t: torch.Tensor, root: int, group: Any) -> list[torch.Tensor]:
    shared = torch.distributed.nn.functional.broadcast(t, root, group=group)
    everyone = torch.stack(torch.distributed.nn.functional.gather(t, dst=root, group=group))
    parts = [t * (i + 1) for i in range(dist.get_world_size())]
    mine = torch.distributed.nn.functional.scatter(parts, src=root, group=group)
    return [shared, everyone, mine]


def differentiable_exchanges(group: Any) -> dict[str, Any]:
    """The differentiable all_to_alls (uneven parts: rank r sends rank i r + i + 1 rows) and
    nn.functional's broadcast, gather and scatter: each value, and the gradient of a weighted
    sum of them."""
    rank, world = dist.get_rank(), dist.get_world_size()
    send, receive = [rank + i + 1 for i in range(world)], [r + rank + 1 for r in range(world)]
    x = torch.arange(float(sum(send)) * 2, requires_grad=True)
    routed = ulysses_exchange(x.reshape(-1, 2) * 1.5, send, receive, group)
    (routed * (rank + 1.0)).sum().backward()
    results: dict[str, Any] = {"all_to_all_single_autograd": [routed * 1.0, x.grad]}
    x = torch.arange(4.0 * world, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated in torch 2.13
        out = torch.empty(4 * world)
        mixed = exchange_single(out, x * (rank + 2.0), group)
        (mixed * torch.arange(4.0 * world)).sum().backward()
        results["nn.all_to_all_single"] = [mixed * 1.0, out.detach().clone(), x.grad]
        # Equal parts: torch's list form on Gloo scatters each rank's list, which Gloo takes
        # only with every part of the output's size.
        x = torch.arange(2.0 * world, requires_grad=True)
        ins = list((x * (rank + 1.0)).split(2))
        flat = exchange_list([torch.empty(2) for _ in range(world)], ins, group)
        (flat * torch.arange(2.0 * world)).sum().backward()
        results["nn.all_to_all"] = [flat, x.grad]
        x = torch.tensor([1.0 + rank, -2.0], requires_grad=True)
        parts = rooted(x * 1.0, world - 1, group)
        sum((part * (k + 1.0 + rank)).sum() for k, part in enumerate(parts)).backward()
        results["nn.rooted"] = [parts[0] * 1.0, parts[1], parts[2], x.grad]
    return results


def run() -> dict[str, Any]:
    initialize_model_parallel(tensor_model_parallel_size=dist.get_world_size())
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    results: dict[str, Any] = {}
    groups = {"ProcessGroup": get_tp_group(), "ranks": list(range(world_size))}
    for label, group in groups.items():
        t = torch.tensor([[1.0 + rank, 2.0], [3.0, 4.0 * rank]])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # all_gather_tensor is deprecated
            gathered = sp_all_gather(t, group)
        results[label] = {
            "all_reduce": tp_all_reduce(t, group),
            "all_gather_tensor": gathered,
            "reduce_scatter_tensor": sp_reduce_scatter(t, group),
            "all_gather_single": sp_all_gather_single(t, group),
            "reduce_scatter_single": sp_reduce_scatter_single(t, group),
            "input": t,
        }
        x = torch.tensor([1.0, 2.0 + rank], requires_grad=True)
        y = tp_all_reduce(x * 1.0, group)
        (y * torch.tensor([1.0, 3.0 - rank])).sum().backward()
        results[label]["grad"] = [y, x.grad]
    x = torch.tensor([0.5 * rank, 1.0], requires_grad=True)
    y = row_parallel_output(x * 2.0)
    (y * torch.tensor([1.0 + rank, -1.0])).sum().backward()
    results["nn.all_reduce"] = [y, x.grad]
    results["differentiable"] = differentiable_exchanges(get_tp_group())
    results["amax"] = amax(torch.tensor([[1.0, -3.0 - rank], [2.0 * rank, 0.5]]), get_tp_group())
    results["max_backward"] = max_backward(get_tp_group())
    results["dims"] = differentiable_on_dims(get_tp_group())
    return results
