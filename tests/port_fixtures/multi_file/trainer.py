"""The trainer: calls torch.distributed directly on the groups the manager made."""

from __future__ import annotations

import torch
import torch.distributed as dist

from tests.port_fixtures.multi_file import groups


def step(seed: int) -> dict[str, object]:
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed + rank)
    grad = torch.randint(-4, 5, (6,)).float()
    # Data parallel: average the gradients.
    dist.all_reduce(grad, group=groups.get_data_parallel_group())
    grad /= dist.get_world_size(groups.get_data_parallel_group())
    # Tensor parallel: the group's first rank broadcasts its weights to the others.
    tp = groups.get_tensor_parallel_group()
    weights = torch.full((2, 3), float(rank))
    dist.broadcast(weights, src=groups.get_tensor_parallel_src_rank(), group=tp)
    members = dist.get_process_group_ranks(tp)
    # Hidden states gathered over the world group (Gloo's allgather takes equal shapes only).
    states = [torch.zeros(1, 3, 2) for _ in range(world)]
    dist.all_gather(states, torch.full((1, 3, 2), rank + 0.5), group=groups.get_world_group())
    work = dist.all_reduce(torch.ones(1), group=groups.get_world_group(), async_op=True)
    total = work.get_future().then(lambda fut: fut.value()[0].item()).wait()
    return {
        "grad": grad.tolist(),
        "weights": weights.tolist(),
        "tp_members": members,
        "tp_rank": groups.get_tensor_parallel_rank(),
        "tp_size": groups.get_tensor_parallel_world_size(),
        "states": [s.tolist() for s in states],
        "total": total,
        "backend": dist.get_backend(groups.get_data_parallel_group()),
    }
