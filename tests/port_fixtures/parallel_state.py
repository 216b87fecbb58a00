"""Model-parallel state in the style of Megatron-LM's parallel_state.py. NOT ported: the ported
modules (megatron_mappings, funcol) get torch ProcessGroups from here."""

from __future__ import annotations

import torch.distributed as dist

_TENSOR_MODEL_PARALLEL_GROUP: dist.ProcessGroup | None = None
_DATA_PARALLEL_GROUP: dist.ProcessGroup | None = None


def initialize_model_parallel(tensor_model_parallel_size: int = 1) -> None:
    """Tensor-parallel groups of consecutive ranks; data-parallel groups across them. Every rank
    creates every group (new_group is collective)."""
    global _TENSOR_MODEL_PARALLEL_GROUP, _DATA_PARALLEL_GROUP
    if _TENSOR_MODEL_PARALLEL_GROUP is not None:
        return
    world_size = dist.get_world_size()
    rank = dist.get_rank()
    num_tp_groups = world_size // tensor_model_parallel_size
    for i in range(num_tp_groups):
        ranks = range(i * tensor_model_parallel_size, (i + 1) * tensor_model_parallel_size)
        group = dist.new_group(list(ranks))
        if rank in ranks:
            _TENSOR_MODEL_PARALLEL_GROUP = group
    for j in range(tensor_model_parallel_size):
        ranks = range(j, world_size, tensor_model_parallel_size)
        group = dist.new_group(list(ranks))
        if rank in ranks:
            _DATA_PARALLEL_GROUP = group


def get_tp_group() -> dist.ProcessGroup:
    assert _TENSOR_MODEL_PARALLEL_GROUP is not None, "model parallel group is not initialized"
    return _TENSOR_MODEL_PARALLEL_GROUP


def get_dp_group() -> dist.ProcessGroup:
    assert _DATA_PARALLEL_GROUP is not None, "data parallel group is not initialized"
    return _DATA_PARALLEL_GROUP


def get_device_meshes() -> tuple[object, object]:
    """A 1-D data-parallel DeviceMesh over every rank and a 2-D (1, world) mesh whose dim 1 spans
    every rank, as DTensor/FSDP2-era trainers build them and hand to their optimizers."""
    from torch.distributed.device_mesh import init_device_mesh

    world_size = dist.get_world_size()
    flat = init_device_mesh("cpu", (world_size,))
    grid = init_device_mesh("cpu", (1, world_size), mesh_dim_names=("shard", "replicate"))
    return flat, grid
