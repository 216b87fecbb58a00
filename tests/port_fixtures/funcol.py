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


def row_parallel_output(partial: torch.Tensor) -> torch.Tensor:
    return torch.distributed.nn.all_reduce(partial)


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
    return results
