"""Communication helpers in the style of detectron2 (detectron2/utils/comm.py): guarded
world-size/rank queries, a per-machine process group, object gathers, a seed shared by every
rank, and ``reduce_dict`` to the main process. Framework-neutral: tensors come from
``.tensors``."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch.distributed as dist

from .tensors import stack, tensor

_LOCAL_PROCESS_GROUP = None
"""A process group which only includes processes that are on the same machine as the current
process. This variable is set when processes are spawned by `launch()`."""


def get_world_size() -> int:
    if not dist.is_available():
        return 1
    if not dist.is_initialized():
        return 1
    return dist.get_world_size()


def get_rank() -> int:
    if not dist.is_available():
        return 0
    if not dist.is_initialized():
        return 0
    return dist.get_rank()


def create_local_process_group(num_workers_per_machine: int) -> None:
    """Create a process group that contains ranks within the same machine.

    Every rank calls new_group for every machine, as the collective requires."""
    global _LOCAL_PROCESS_GROUP
    assert _LOCAL_PROCESS_GROUP is None
    assert get_world_size() % num_workers_per_machine == 0
    num_machines = get_world_size() // num_workers_per_machine
    machine_rank = get_rank() // num_workers_per_machine
    for i in range(num_machines):
        ranks_on_i = list(range(i * num_workers_per_machine, (i + 1) * num_workers_per_machine))
        pg = dist.new_group(ranks_on_i)
        if i == machine_rank:
            _LOCAL_PROCESS_GROUP = pg


def get_local_rank() -> int:
    if get_world_size() == 1:
        return 0
    assert _LOCAL_PROCESS_GROUP is not None, "create_local_process_group was not called"
    return dist.get_rank(group=_LOCAL_PROCESS_GROUP)


def get_local_size() -> int:
    if get_world_size() == 1:
        return 1
    assert _LOCAL_PROCESS_GROUP is not None, "create_local_process_group was not called"
    return dist.get_world_size(group=_LOCAL_PROCESS_GROUP)


def is_main_process() -> bool:
    return get_rank() == 0


def synchronize() -> None:
    """Helper function to synchronize (barrier) among all processes when using distributed
    training."""
    if not dist.is_available():
        return
    if not dist.is_initialized():
        return
    world_size = dist.get_world_size()
    if world_size == 1:
        return
    dist.barrier()


@functools.lru_cache
def _get_global_gloo_group() -> Any:
    """Return a process group based on gloo backend, containing all the ranks. The result is
    cached."""
    if dist.get_backend() == "nccl":
        return dist.new_group(backend="gloo")
    else:
        return dist.group.WORLD


def all_gather(data: Any, group: Any = None) -> list[Any]:
    """Run all_gather on arbitrary picklable data (not necessarily tensors)."""
    if get_world_size() == 1:
        return [data]
    if group is None:
        group = _get_global_gloo_group()  # use CPU group by default, to reduce GPU RAM usage.
    world_size = dist.get_world_size(group)
    if world_size == 1:
        return [data]

    output = [None for _ in range(world_size)]
    dist.all_gather_object(output, data, group=group)
    return output


def gather(data: Any, dst: int = 0, group: Any = None) -> list[Any]:
    """Run gather on arbitrary picklable data (not necessarily tensors): the list of data
    gathered from each rank on ``dst``, an empty list on the other ranks."""
    if get_world_size() == 1:
        return [data]
    if group is None:
        group = _get_global_gloo_group()
    world_size = dist.get_world_size(group=group)
    if world_size == 1:
        return [data]
    rank = dist.get_rank(group=group)

    if rank == dst:
        output = [None for _ in range(world_size)]
        dist.gather_object(data, output, dst=dst, group=group)
        return output
    else:
        dist.gather_object(data, None, dst=dst, group=group)
        return []


def shared_random_seed() -> int:
    """A random number that is the same across all workers (the first worker's)."""
    ints = np.random.randint(2**31)
    all_ints = all_gather(ints)
    return int(all_ints[0])


def reduce_dict(input_dict: dict[str, Any], average: bool = True) -> dict[str, Any]:
    """Reduce the values in the dictionary from all processes so that the process with rank 0
    has the reduced results. Returns a dict with the same fields as input_dict."""
    world_size = get_world_size()
    if world_size < 2:
        return input_dict
    names = []
    values = []
    # sort the keys so that they are consistent across processes
    for k in sorted(input_dict.keys()):
        names.append(k)
        values.append(input_dict[k])
    stacked = stack(values)
    dist.reduce(stacked, dst=0)
    if dist.get_rank() == 0 and average:
        # only main process gets accumulated, so only divide by world_size in this case
        stacked /= world_size
    return {k: v for k, v in zip(names, stacked, strict=True)}


def run() -> dict[str, Any]:
    rank = get_rank()
    results: dict[str, Any] = {"world_size": get_world_size(), "rank": rank}
    create_local_process_group(1)
    results["local"] = [get_local_rank(), get_local_size(), is_main_process()]
    synchronize()
    np.random.seed(1234 + rank)
    results["seed"] = shared_random_seed()
    record = {"rank": rank, "boxes": (rank, 2.5), "labels": ["cat", "dog"][rank % 2]}
    results["all_gather"] = all_gather(record)
    results["gather"] = gather(record)
    results["gather_dst1"] = gather({"rank": rank}, dst=1)
    reduced = reduce_dict({"loss_mask": tensor(1.0 + rank), "loss_cls": tensor(3.0 * rank)})
    # only rank 0 holds the reduced values
    results["reduce_dict"] = reduced if rank == 0 else sorted(reduced)
    return results
