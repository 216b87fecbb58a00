"""Tensor-parallel mappings in the style of Megatron-LM (megatron/core/tensor_parallel/
mappings.py): autograd Functions whose forward and backward are collectives over the
tensor-parallel group, which ``parallel_state`` (not ported) creates with torch's new_group. The
all-gather and reduce-scatter use the tensor APIs where torch has them, else the old private
ones."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from .parallel_state import get_tp_group, initialize_model_parallel


def get_tensor_model_parallel_world_size() -> int:
    return dist.get_world_size(group=get_tp_group())


def get_tensor_model_parallel_rank() -> int:
    return dist.get_rank(group=get_tp_group())


def _reduce(input_: torch.Tensor) -> torch.Tensor:
    """All-reduce the input tensor across model parallel group."""
    # Bypass the function if we are using only 1 GPU.
    if get_tensor_model_parallel_world_size() == 1:
        return input_
    dist.all_reduce(input_.contiguous(), group=get_tp_group())
    return input_


def _split_along_last_dim(input_: torch.Tensor) -> torch.Tensor:
    """Split the tensor along its last dimension and keep the corresponding slice."""
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    last_dim_size = input_.size(-1) // world_size
    input_list = torch.split(input_, last_dim_size, dim=-1)
    return input_list[get_tensor_model_parallel_rank()].contiguous()


def _split_along_first_dim(input_: torch.Tensor) -> torch.Tensor:
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    local_dim_size = input_.size(0) // world_size
    dim_offset = get_tensor_model_parallel_rank() * local_dim_size
    return input_[dim_offset : dim_offset + local_dim_size].contiguous()


def _gather_along_first_dim(input_: torch.Tensor) -> torch.Tensor:
    """Gather tensors and concatenate along the first dimension."""
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    dim_size = list(input_.size())
    dim_size[0] = dim_size[0] * world_size
    output = torch.empty(dim_size, dtype=input_.dtype, device=input_.device)
    if hasattr(dist, "all_gather_into_tensor"):
        dist.all_gather_into_tensor(output, input_.contiguous(), group=get_tp_group())
    else:
        dist._all_gather_base(output, input_.contiguous(), group=get_tp_group())
    return output


def _gather_along_last_dim(input_: torch.Tensor) -> torch.Tensor:
    """Gather tensors and concatenate along the last dimension."""
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    output = _gather_along_first_dim(input_)
    tensor_list = output.chunk(world_size, dim=0)
    return torch.cat(tensor_list, dim=-1).contiguous()


def _reduce_scatter_along_first_dim(input_: torch.Tensor) -> torch.Tensor:
    """Reduce-scatter the input tensor across model parallel group."""
    world_size = get_tensor_model_parallel_world_size()
    if world_size == 1:
        return input_
    dim_size = list(input_.size())
    assert dim_size[0] % world_size == 0, "First dimension must be divisible by world size"
    dim_size[0] = dim_size[0] // world_size
    output = torch.empty(dim_size, dtype=input_.dtype, device=input_.device)
    if hasattr(dist, "reduce_scatter_tensor"):
        dist.reduce_scatter_tensor(output, input_.contiguous(), group=get_tp_group())
    else:
        dist._reduce_scatter_base(output, input_.contiguous(), group=get_tp_group())
    return output


class _CopyToModelParallelRegion(torch.autograd.Function):
    """Pass the input to the model parallel region."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor) -> torch.Tensor:
        return input_

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        return _reduce(grad_output)


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    """All-reduce the input from the model parallel region."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor) -> torch.Tensor:
        return _reduce(input_)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        return grad_output


class _ScatterToModelParallelRegion(torch.autograd.Function):
    """Split the input and keep only the chunk corresponding to the rank."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor) -> torch.Tensor:
        return _split_along_last_dim(input_)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        return _gather_along_last_dim(grad_output)


class _GatherFromModelParallelRegion(torch.autograd.Function):
    """Gather the input from model parallel region and concatenate."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor) -> torch.Tensor:
        return _gather_along_last_dim(input_)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        return _split_along_last_dim(grad_output)


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    """Gather the input from the sequence parallel region; reduce-scatter the gradient."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor) -> torch.Tensor:
        return _gather_along_first_dim(input_)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        return _reduce_scatter_along_first_dim(grad_output)


class _ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    """Reduce scatter the input from the model parallel region."""

    @staticmethod
    def forward(ctx: Any, input_: torch.Tensor) -> torch.Tensor:
        return _reduce_scatter_along_first_dim(input_)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        return _gather_along_first_dim(grad_output)


def copy_to_tensor_model_parallel_region(input_: torch.Tensor) -> Any:
    return _CopyToModelParallelRegion.apply(input_)


def reduce_from_tensor_model_parallel_region(input_: torch.Tensor) -> Any:
    return _ReduceFromModelParallelRegion.apply(input_)


def scatter_to_tensor_model_parallel_region(input_: torch.Tensor) -> Any:
    return _ScatterToModelParallelRegion.apply(input_)


def gather_from_tensor_model_parallel_region(input_: torch.Tensor) -> Any:
    return _GatherFromModelParallelRegion.apply(input_)


def gather_from_sequence_parallel_region(input_: torch.Tensor) -> Any:
    return _GatherFromSequenceParallelRegion.apply(input_)


def reduce_scatter_to_sequence_parallel_region(input_: torch.Tensor) -> Any:
    return _ReduceScatterToSequenceParallelRegion.apply(input_)


def run() -> dict[str, Any]:
    initialize_model_parallel(tensor_model_parallel_size=dist.get_world_size())
    rank = dist.get_rank()
    mappings = {
        "copy": copy_to_tensor_model_parallel_region,
        "reduce": reduce_from_tensor_model_parallel_region,
        "scatter": scatter_to_tensor_model_parallel_region,
        "gather": gather_from_tensor_model_parallel_region,
        "gather_sp": gather_from_sequence_parallel_region,
        "reduce_scatter_sp": reduce_scatter_to_sequence_parallel_region,
    }
    results: dict[str, Any] = {
        "tp": [get_tensor_model_parallel_world_size(), get_tensor_model_parallel_rank()]
    }
    for name, mapping in mappings.items():
        leaf = (torch.arange(8, dtype=torch.float32).reshape(2, 4) + 10 * rank).requires_grad_()
        out = mapping(leaf * 1.0)
        weight = torch.arange(out.numel(), dtype=torch.float32).reshape(out.shape) - rank
        (out * weight).sum().backward()
        results[name] = {"out": out, "grad": leaf.grad}
    # a column-parallel then row-parallel linear pair, forward and backward
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0]], requires_grad=True)
    w1 = torch.arange(4, dtype=torch.float32).reshape(2, 2) + rank
    w2 = torch.tensor([[0.5, -1.0], [2.0, 1.0]]) * (rank + 1)
    hidden = copy_to_tensor_model_parallel_region(x) @ w1
    y = reduce_from_tensor_model_parallel_region(torch.relu(hidden) @ w2)
    y.sum().backward()
    results["mlp"] = {"y": y, "x.grad": x.grad}
    return results
