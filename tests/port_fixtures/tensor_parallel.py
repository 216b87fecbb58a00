"""Tensor parallelism in the style of LLaMA inference and training code: each block's layers
parallelized by its own ``distribute(device_mesh)`` method (attention's wq/wk/wv column-wise, wo
row-wise; the feed-forward's w1/w3 column-wise, w2 row-wise), the model's output layer
column-wise with a replicated output (``Replicate`` from the old ``torch.distributed._tensor``),
and a second model parallelized at once by a plan with ``*`` paths, whose output layer takes a
subclass of ColwiseParallel overriding its private partition method (diffusers' pattern). Heads
are split across the tensor-parallel ranks as the local head count says."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed._tensor import Replicate
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    RowwiseParallel,
    parallelize_module,
)

DIM, HEADS, HIDDEN, VOCAB = 8, 4, 12, 6


class CheckedColwiseParallel(ColwiseParallel):
    """Refuses what is not a linear layer before torch's own partitioning, and counts them."""

    partitioned: ClassVar[list[str]] = []

    def _partition_linear_fn(self, name: str, module: nn.Module, device_mesh: DeviceMesh) -> None:
        if not isinstance(module, nn.Linear):
            raise TypeError(f"expected nn.Linear, got {type(module).__name__}")
        self.partitioned.append(f"{type(module).__name__}({module.in_features})")
        super()._partition_linear_fn(name, module, device_mesh)


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n_local_heads = HEADS
        self.head_dim = DIM // HEADS
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)

    def distribute(self, device_mesh: DeviceMesh) -> None:
        self.n_local_heads = self.n_local_heads // device_mesh.size()
        parallelize_module(self.wq, device_mesh, ColwiseParallel())
        parallelize_module(self.wk, device_mesh, ColwiseParallel())
        parallelize_module(self.wv, device_mesh, ColwiseParallel())
        parallelize_module(self.wo, device_mesh, RowwiseParallel())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q, k, v = (w(x).view(batch, seq, self.n_local_heads, self.head_dim).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))  # fmt: skip
        mixed = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(mixed.transpose(1, 2).reshape(batch, seq, -1))


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, DIM, bias=False)
        self.w3 = nn.Linear(DIM, HIDDEN, bias=False)

    def distribute(self, device_mesh: DeviceMesh) -> None:
        parallelize_module(self.w1, device_mesh, ColwiseParallel())
        parallelize_module(self.w2, device_mesh, RowwiseParallel())
        parallelize_module(self.w3, device_mesh, ColwiseParallel())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = Attention()
        self.feed_forward = FeedForward()

    def distribute(self, device_mesh: DeviceMesh) -> None:
        self.attention.distribute(device_mesh)
        self.feed_forward.distribute(device_mesh)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(x)
        return h + self.feed_forward(h)


class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block(), Block()])
        self.output = nn.Linear(DIM, VOCAB, bias=True)

    def distribute(self, device_mesh: DeviceMesh) -> None:
        for layer in self.layers:
            layer.distribute(device_mesh)
        parallelize_module(self.output, device_mesh, ColwiseParallel(output_layouts=Replicate()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.output(x)


def _local(tensor: Any) -> torch.Tensor:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def _step(model: nn.Module) -> dict[str, Any]:
    """One forward and backward on the same input on every rank: the output, the loss and each
    parameter's gradient (this rank's piece)."""
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, DIM, generator=generator, requires_grad=True)
    out = model(x)
    loss = (out * torch.linspace(-1.0, 1.0, VOCAB)).square().sum()
    loss.backward()
    grads = {name: _local(p.grad) for name, p in model.named_parameters()}
    return {"out": out.detach(), "loss": loss.detach(), "x_grad": x.grad, "grads": grads}


def run() -> dict[str, Any]:
    world = dist.get_world_size()
    mesh = init_device_mesh("cpu", (1, world), mesh_dim_names=("dp", "tp"))
    tp_mesh = mesh["tp"]
    torch.manual_seed(0)
    model = Transformer()
    torch.manual_seed(0)
    planned = Transformer()
    model.distribute(tp_mesh)
    plan = {
        "layers.*.attention.wq": ColwiseParallel(),
        "layers.*.attention.wk": ColwiseParallel(),
        "layers.*.attention.wv": ColwiseParallel(),
        "layers.*.attention.wo": RowwiseParallel(),
        "layers.*.feed_forward.w1": ColwiseParallel(),
        "layers.*.feed_forward.w2": RowwiseParallel(),
        "layers.*.feed_forward.w3": ColwiseParallel(),
        "output": CheckedColwiseParallel(output_layouts=Replicate()),
    }
    assert all(isinstance(style, ParallelStyle) for style in plan.values())
    for block in planned.layers:
        block.attention.n_local_heads = HEADS // tp_mesh.size()
    parallelize_module(planned, tp_mesh, plan, src_data_rank=0)
    steps = {"distribute": _step(model), "plan": _step(planned)}
    return {**steps, "partitioned": CheckedColwiseParallel.partitioned}
