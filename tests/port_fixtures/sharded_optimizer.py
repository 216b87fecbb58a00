"""A sharded data-parallel optimizer in the style of ZeRO-like optimizers: gradients all-reduced
in one asynchronous ``_coalescing_manager`` block, overlapped with local work, then averaged;
flat gradient buckets reduce-scattered into this rank's shards and parameters all-gathered back,
each in a block of its own; the manager held in a variable where overlap is optional."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


class ShardedOptimizer:
    def __init__(self, params: list[torch.Tensor], dp_group: Any = None, lr: float = 0.5) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.dp_group = dp_group
        self.dp_size = dist.get_world_size(dp_group)
        self.dp_rank = dist.get_rank(dp_group)
        self.lr = lr

    def reduce_gradients(self) -> list[torch.Tensor]:
        grads = [p.grad for p in self.params if p.grad is not None]
        with dist._coalescing_manager(group=self.dp_group, async_ops=True) as cm:
            for grad in grads:
                dist.all_reduce(grad, group=self.dp_group)
        norms = [float(p.detach().norm()) for p in self.params]  # overlapped with the batch
        cm.wait()
        for grad in grads:
            grad.div_(self.dp_size)
        return norms

    def shard_step(self, buckets: list[torch.Tensor], overlap: bool) -> list[torch.Tensor]:
        """Reduce-scatter each flat bucket of gradients, step this rank's shard, gather back."""
        shards = [torch.empty(b.numel() // self.dp_size, dtype=b.dtype) for b in buckets]
        manager = dist._coalescing_manager(group=self.dp_group, async_ops=overlap)
        with manager as cm:
            for bucket, shard in zip(buckets, shards, strict=True):
                dist.reduce_scatter_tensor(shard, bucket, group=self.dp_group)
        if overlap:
            cm.wait()
        updated = [shard * -self.lr for shard in shards]
        full = [torch.full((b.numel(),), -7.0, dtype=b.dtype) for b in buckets]
        with dist._coalescing_manager(self.dp_group):
            for shard, flat in zip(updated, full, strict=True):
                dist.all_gather_into_tensor(flat, shard, group=self.dp_group)
        return full


def run() -> dict[str, Any]:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    results: dict[str, Any] = {}
    for name, group in (("world", None), ("group", dist.new_group(list(range(world_size))))):
        weight = torch.arange(6, dtype=torch.float32).reshape(2, 3).requires_grad_()
        bias = torch.ones(4, dtype=torch.float32).requires_grad_()
        loss = (weight * (rank + 1)).sum() + (bias * bias * (rank + 2)).sum()
        loss.backward()
        optimizer = ShardedOptimizer([weight, bias], group)
        norms = optimizer.reduce_gradients()
        results[f"{name} grads"] = [weight.grad, bias.grad, norms]
        buckets = [
            torch.arange(2 * world_size, dtype=torch.float32) * (rank + 1),
            # one dtype: torch's Gloo gathers a block of several dtypes into garbage
            torch.arange(3 * world_size, dtype=torch.float32) - rank,
        ]
        for overlap in (False, True):
            results[f"{name} shard_step overlap={overlap}"] = optimizer.shard_step(
                [b.clone() for b in buckets], overlap
            )
    return results
