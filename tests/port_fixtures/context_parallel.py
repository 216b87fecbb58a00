"""Sequence (context) parallel attention helpers in the style of diffusion pipelines: a module
that imports funcol only where torch.distributed is available, above its last import; Ulysses
all-to-all with uneven split sizes, agreed through a size all_gather whose device follows the
group's backend string; a differentiable gather on the sequence dim."""

from __future__ import annotations

import torch
import torch.distributed as dist

if torch.distributed.is_available():
    import torch.distributed._functional_collectives as funcol

from typing import Any


def _wait(tensor: torch.Tensor) -> torch.Tensor:
    if isinstance(tensor, funcol.AsyncCollectiveTensor):
        tensor = tensor.wait()
    return tensor


def sizes_by_comm(size: int, group: dist.ProcessGroup) -> list[int]:
    backend = str(dist.get_backend(group=group))
    device = "cpu" if "cpu" in backend or "gloo" in backend else None
    world = dist.get_world_size(group=group)
    sizes = [torch.empty((1,), dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([size], dtype=torch.int64, device=device), group=group)
    return [int(t.item()) for t in sizes]


def ulysses_exchange(group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    rank, world = dist.get_rank(group=group), dist.get_world_size(group=group)
    send = [rank + peer + 1 for peer in range(world)]  # rows this rank sends each peer
    receive = [peer + 1 + rank for peer in sizes_by_comm(rank, group)]
    rows = torch.arange(sum(send) * 2, dtype=torch.float32).reshape(-1, 2) + 100 * rank
    rows.requires_grad_(True)
    exchanged = _wait(funcol.all_to_all_single(rows, receive, send, group))
    weights = torch.arange(exchanged.numel(), dtype=torch.float32).reshape(exchanged.shape)
    (exchanged * weights).sum().backward()
    assert rows.grad is not None
    return exchanged, rows.grad


def gather_sequence(group: dist.ProcessGroup) -> tuple[torch.Tensor, torch.Tensor]:
    local = torch.full((2, 3), float(dist.get_rank(group) + 1), requires_grad=True)
    full = funcol.all_gather_tensor(local, 1, group=group)
    (full * torch.arange(full.numel(), dtype=torch.float32).reshape(full.shape)).sum().backward()
    assert local.grad is not None
    return _wait(full), local.grad


def shard(tensor: torch.Tensor, dim: int, mesh: dist.device_mesh.DeviceMesh) -> torch.Tensor:
    return tensor.chunk(mesh.size(), dim=dim)[dist.get_rank(mesh.get_group())]


def run() -> dict[str, Any]:
    group = dist.new_group(list(range(dist.get_world_size())))
    exchanged, exchanged_grad = ulysses_exchange(group)
    full, full_grad = gather_sequence(group)
    return {
        "sizes": sizes_by_comm(dist.get_rank() + 2, group),
        "exchanged": exchanged,
        "exchanged_grad": exchanged_grad,
        "full": full,
        "full_grad": full_grad,
    }
