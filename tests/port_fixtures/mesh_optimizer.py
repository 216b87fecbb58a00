"""An orthogonalising optimizer's communication in the style of DTensor-era distributed
optimizers: funcol collectives whose ``group`` is a 1-D DeviceMesh or a ``(DeviceMesh, mesh dim)``
pair (funcol takes both), a ProcessGroup beside them, and a parameter broadcast over every group of
a mesh with ``group_src``. The meshes come from ``parallel_state``, which is not ported."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed import ProcessGroup

from .parallel_state import get_device_meshes


def replica_size(replicate: Any) -> int:
    if isinstance(replicate, ProcessGroup):
        return dist.get_world_size(replicate)
    return replicate.size()


def orthogonalise_step(update: torch.Tensor, replicate: Any, grid: Any) -> dict[str, Any]:
    # each replica orthogonalises one slice of the batch, then every replica gathers the others
    mine = funcol.reduce_scatter_tensor(update, reduceOp="avg", scatter_dim=0, group=replicate)
    mine = mine / (1.0 + mine.norm())
    whole = funcol.all_gather_tensor(mine, gather_dim=0, group=replicate)
    column_sq = funcol.all_reduce((update * update).sum(dim=0), reduceOp="sum", group=(grid, 1))
    return {"scattered": mine, "gathered": whole, "column_sq": column_sq}


def broadcast_params(params: list[torch.Tensor], mesh: Any) -> list[torch.Tensor]:
    for group in mesh.get_all_groups():
        for param in params:
            dist.broadcast(param, group=group, group_src=0)
    return params


def run() -> dict[str, Any]:
    rank = dist.get_rank()
    flat, grid = get_device_meshes()
    results: dict[str, Any] = {}
    for label, replicate in {"DeviceMesh": flat, "ProcessGroup": flat.get_group()}.items():
        update = torch.arange(8.0).reshape(4, 2) * (rank + 1)
        step = orthogonalise_step(update, replicate, grid)
        results[label] = {"size": replica_size(replicate), **step}
    params = [torch.full((3,), 1.0 + rank), torch.tensor([2.0 * rank, -1.0])]
    results["broadcast"] = broadcast_params(params, grid)
    return results
