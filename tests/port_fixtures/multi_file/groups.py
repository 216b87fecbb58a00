"""The process-group manager: joins the job, makes the data- and tensor-parallel groups, and
hands them to the rest of the project (which calls torch.distributed on them directly)."""

from __future__ import annotations

import os

import torch.distributed as dist

_TENSOR_PARALLEL_GROUP = None
_DATA_PARALLEL_GROUP = None
_TENSOR_PARALLEL_RANKS: list[int] = []


def initialize(tensor_parallel_size: int = 2) -> None:
    """Join the job from torchrun's environment and make the groups (every rank, same order)."""
    global _TENSOR_PARALLEL_GROUP, _DATA_PARALLEL_GROUP, _TENSOR_PARALLEL_RANKS
    if not dist.is_initialized():
        dist.init_process_group(backend=os.environ.get("BACKEND", "gloo"), init_method="env://")
    world, rank = dist.get_world_size(), dist.get_rank()
    for start in range(0, world, tensor_parallel_size):
        ranks = list(range(start, min(start + tensor_parallel_size, world)))
        group = dist.new_group(ranks, group_desc=f"tp{start}")
        if rank in ranks:
            _TENSOR_PARALLEL_GROUP, _TENSOR_PARALLEL_RANKS = group, ranks
    _DATA_PARALLEL_GROUP = dist.new_group(list(range(world)))


def get_tensor_parallel_group():
    assert _TENSOR_PARALLEL_GROUP is not None, "initialize() first"
    return _TENSOR_PARALLEL_GROUP


def get_data_parallel_group():
    assert _DATA_PARALLEL_GROUP is not None, "initialize() first"
    return _DATA_PARALLEL_GROUP


def get_world_group():
    return dist.group.WORLD


def is_world_group(group) -> bool:
    """Whether ``group`` is the world (by identity, as torch's group.WORLD is one object)."""
    return group is dist.group.WORLD and group is not None


def get_tensor_parallel_rank() -> int:
    return dist.get_rank(group=get_tensor_parallel_group())


def get_tensor_parallel_world_size() -> int:
    return dist.get_world_size(group=get_tensor_parallel_group())


def get_tensor_parallel_src_rank() -> int:
    """The global rank of the tensor-parallel group's first rank."""
    return dist.get_global_rank(get_tensor_parallel_group(), 0)


def barrier() -> None:
    dist.barrier(group=get_world_group())


def destroy() -> None:
    global _TENSOR_PARALLEL_GROUP, _DATA_PARALLEL_GROUP
    _TENSOR_PARALLEL_GROUP = _DATA_PARALLEL_GROUP = None
    if dist.is_initialized():
        dist.destroy_process_group()
