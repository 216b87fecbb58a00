"""A communication backend in the style of DeepSpeed (deepspeed/comm/torch.py): a class that
stores references to torch's functions (picking the tensor APIs when torch has them), its own
ReduceOp translated to torch's, ``dist.group.WORLD`` as the default group, ``ProcessGroup``
annotations, and the destruction of a subgroup."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup


class ReduceOp(Enum):
    SUM = 0
    PRODUCT = 1
    MIN = 2
    MAX = 3
    BAND = 4
    BOR = 5
    BXOR = 6
    AVG = 7
    UNUSED = 8


class TorchBackend:
    """Light-weight wrapper over torch.distributed."""

    def __init__(self, name: str = "torch") -> None:
        self.name = name
        self.all_gather_function = self.get_all_gather_function()
        self.reduce_scatter_function = self.get_reduce_scatter_function()
        self.has_all_gather_into_tensor = self.all_gather_function is not None
        self.has_reduce_scatter_tensor = hasattr(dist, "reduce_scatter_tensor")
        self.all_reduce_function = dist.all_reduce

    @staticmethod
    def get_all_gather_function() -> Callable[..., Any] | None:
        if hasattr(dist, "all_gather_into_tensor"):
            return dist.all_gather_into_tensor
        elif hasattr(dist, "_all_gather_base"):
            return dist._all_gather_base
        return None

    @staticmethod
    def get_reduce_scatter_function() -> Callable[..., Any] | None:
        if hasattr(dist, "reduce_scatter_tensor"):
            return dist.reduce_scatter_tensor
        elif hasattr(dist, "_reduce_scatter_base"):
            return dist._reduce_scatter_base
        return None

    def _reduce_op(self, op: Any) -> Any:
        """If the op provided is not a torch.distributed.ReduceOp, convert it and return."""
        if not isinstance(op, dist.ReduceOp):
            if op == ReduceOp.SUM:
                op = dist.ReduceOp.SUM
            elif op == ReduceOp.PRODUCT:
                op = dist.ReduceOp.PRODUCT
            elif op == ReduceOp.AVG:
                op = dist.ReduceOp.AVG
            elif op == ReduceOp.MIN:
                op = dist.ReduceOp.MIN
            elif op == ReduceOp.MAX:
                op = dist.ReduceOp.MAX
        return op

    def get_rank(self, group: ProcessGroup | None = None) -> int:
        return dist.get_rank(group=group)

    def get_world_size(self, group: ProcessGroup | None = None) -> int:
        return dist.get_world_size(group=group)

    def new_group(self, ranks: list[int]) -> ProcessGroup:
        return dist.new_group(ranks)

    def get_global_rank(self, group: ProcessGroup, group_rank: int) -> int:
        return dist.get_global_rank(group, group_rank)

    def all_reduce(
        self,
        tensor: torch.Tensor,
        op: Any = ReduceOp.SUM,
        group: ProcessGroup | None = None,
        async_op: bool = False,
    ) -> Any:
        op = self._reduce_op(op)
        return self.all_reduce_function(tensor=tensor, op=op, group=group, async_op=async_op)

    def all_gather_into_tensor(
        self,
        output_tensor: torch.Tensor,
        input_tensor: torch.Tensor,
        group: ProcessGroup | None = None,
        async_op: bool = False,
    ) -> Any:
        if self.all_gather_function is not None:
            return self.all_gather_function(
                output_tensor=output_tensor,
                input_tensor=input_tensor,
                group=group,
                async_op=async_op,
            )
        output_list = list(output_tensor.chunk(self.get_world_size(group)))
        return dist.all_gather(output_list, input_tensor, group=group, async_op=async_op)

    def reduce_scatter_tensor(
        self,
        output_tensor: torch.Tensor,
        input_tensor: torch.Tensor,
        op: Any = ReduceOp.SUM,
        group: ProcessGroup | None = None,
        async_op: bool = False,
    ) -> Any:
        if self.reduce_scatter_function is not None:
            return self.reduce_scatter_function(
                output_tensor, input_tensor, op=self._reduce_op(op), group=group, async_op=async_op
            )
        input_list = list(input_tensor.chunk(self.get_world_size(group)))
        return dist.reduce_scatter(
            output_tensor, input_list, op=self._reduce_op(op), group=group, async_op=async_op
        )

    def barrier(
        self, group: ProcessGroup | None = dist.group.WORLD, device_ids: list[int] | None = None
    ) -> None:
        if group is None:
            group = dist.group.WORLD
        if device_ids is not None:
            # Gloo (CPU) accepts device_ids; NCCL uses it to pick the device
            dist.barrier(group=group, device_ids=device_ids)
        else:
            dist.barrier(group=group)

    def destroy_process_group(self, group: ProcessGroup | None = None) -> None:
        dist.destroy_process_group(group)


def run() -> dict[str, Any]:
    backend = TorchBackend()
    rank = backend.get_rank()
    world_size = backend.get_world_size()
    group = backend.new_group(list(range(world_size)))
    results: dict[str, Any] = {
        "has": [backend.has_all_gather_into_tensor, backend.has_reduce_scatter_tensor],
        "global_rank": backend.get_global_rank(group, world_size - 1),
        "group": [backend.get_rank(group), backend.get_world_size(group)],
    }
    for label, chosen in (("default", None), ("WORLD", dist.group.WORLD), ("group", group)):
        summed = torch.tensor([1.0 + rank, 2.0 * rank + 3.0])
        backend.all_reduce(summed, group=chosen)
        maxed = torch.tensor([1.0 + rank, 5.0 - rank])
        backend.all_reduce(maxed, op=ReduceOp.MAX, group=chosen)
        multiplied = torch.tensor([2.0 + rank, -1.0])
        backend.all_reduce(multiplied, op=dist.ReduceOp.PRODUCT, group=chosen)
        gathered = torch.zeros(2 * world_size)
        backend.all_gather_into_tensor(gathered, torch.tensor([rank, rank + 0.5]), group=chosen)
        scattered = torch.zeros(2)
        data = torch.arange(2.0 * world_size) * (rank + 1)
        backend.reduce_scatter_tensor(scattered, data, op=ReduceOp.MIN, group=chosen)
        backend.barrier(group=chosen, device_ids=[0])
        backend.barrier(group=chosen)
        results[label] = [summed, maxed, multiplied, gathered, scattered]
    backend.barrier()
    backend.destroy_process_group(group)
    return results
