"""Helpers in the usual torch.distributed style, before `compat port` (docs/examples.md's
example). It runs as it is: `compat launch -n 2 --framework torch examples/port_example.py`;
`compat port --diff examples/port_example.py` shows its rewrite to compat.
"""

import torch
import torch.distributed as dist


def init_distributed() -> None:
    dist.init_process_group(backend="gloo")
    if dist.is_torchelastic_launched():
        print("started by torchrun")


def shard_gradients(flat: torch.Tensor) -> torch.Tensor:
    # ZeRO-style: each rank keeps the sum over ranks of its 1/world part of the gradient
    shard = torch.empty(flat.numel() // dist.get_world_size())
    dist.reduce_scatter_tensor(shard, flat, op=dist.ReduceOp.SUM)
    return shard


if __name__ == "__main__":
    init_distributed()
    rank = dist.get_rank()
    shard = shard_gradients(torch.arange(4.0) * (rank + 1))
    print(f"rank {rank} of {dist.get_world_size()}: gradient shard {shard.tolist()}")
    dist.destroy_process_group()
