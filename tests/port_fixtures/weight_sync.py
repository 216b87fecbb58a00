"""A training loop that keeps its ranks' weights equal by hand, in the style of NVlabs' GAN and
diffusion trainers (stylegan3's and edm's training_loop.py): every parameter and buffer is
broadcast from rank 0 at the start, the gradients are summed through one flat all_reduce,
and the running statistics are averaged. The parameters require grad: the collectives write
into them in place, as torch's do."""

from __future__ import annotations

from typing import Any

import torch


def params_and_buffers(module: torch.nn.Module) -> list[torch.Tensor]:
    return list(module.parameters()) + list(module.buffers())


def sync_weights(module: torch.nn.Module, num_gpus: int) -> None:
    for param in params_and_buffers(module):
        if param.numel() > 0 and num_gpus > 1:
            torch.distributed.broadcast(param, src=0)


def accumulate_gradients(module: torch.nn.Module, num_gpus: int) -> None:
    params = [param for param in module.parameters() if param.grad is not None]
    if len(params) > 0:
        flat = torch.cat([param.grad.flatten() for param in params])
        if num_gpus > 1:
            torch.distributed.all_reduce(flat)
            flat /= num_gpus
        grads = flat.split([param.numel() for param in params])
        for param, grad in zip(params, grads, strict=True):
            param.grad.copy_(grad.reshape(param.shape))


def run() -> dict[str, Any]:
    rank = torch.distributed.get_rank()
    num_gpus = torch.distributed.get_world_size()
    torch.manual_seed(rank)  # each rank starts from different weights
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    sync_weights(model, num_gpus)
    x = torch.arange(8.0).reshape(2, 4) * (rank + 1)
    model(x).square().sum().backward()
    accumulate_gradients(model, num_gpus)
    state = {name: value.detach().clone() for name, value in model.state_dict().items()}
    grads = {name: param.grad.clone() for name, param in model.named_parameters()}
    return {"state": state, "grads": grads}
