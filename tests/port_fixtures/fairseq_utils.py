"""Distributed helpers in the style of fairseq (fairseq/distributed/utils.py): a summing
``all_reduce`` wrapper, ``all_reduce_dict`` (stack, reduce, unstack), ``broadcast_object``,
``all_gather_list`` over picklable objects and ``broadcast_tensors`` that first broadcasts the
tensors' metadata. Framework-neutral: tensors come from ``.tensors``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch.distributed as dist

from .tensors import dtype_name, is_tensor, stack, tensor, zeros


def get_rank(group: Any = None) -> int:
    return dist.get_rank(group=group)


def get_world_size(group: Any = None) -> int:
    if dist.is_initialized():
        return dist.get_world_size(group=group)
    else:
        return 1


def all_reduce(tensor: Any, group: Any, op: str = "sum") -> Any:
    if op == "sum":
        op = dist.ReduceOp.SUM
    elif op == "max":
        op = dist.ReduceOp.MAX
    else:
        raise NotImplementedError
    dist.all_reduce(tensor, op=op, group=group)
    return tensor


def all_reduce_dict(data: Mapping[str, Any], group: Any = None) -> dict[str, Any]:
    """AllReduce a dictionary of values across workers. We separately reduce items that are
    already tensors and the Python numbers, which are first turned into tensors."""
    data_keys = list(data.keys())
    tensor_data: OrderedDict[str, Any] = OrderedDict()
    number_data: OrderedDict[str, Any] = OrderedDict()
    for k in data_keys:
        t = data[k]
        if not is_tensor(t):
            number_data[k] = tensor(t)
        else:
            tensor_data[k] = t

    def _all_reduce_dict(data: OrderedDict[str, Any]) -> OrderedDict[str, Any]:
        if len(data) == 0:
            return data
        buf = stack(list(data.values()))
        all_reduce(buf, group=group)
        return OrderedDict(zip(data.keys(), buf, strict=True))

    tensor_data = _all_reduce_dict(tensor_data)
    number_data = _all_reduce_dict(number_data)

    def get_from_stack(key: str) -> Any:
        if key in tensor_data:
            return tensor_data[key]
        elif key in number_data:
            return number_data[key]
        raise KeyError

    return OrderedDict([(key, get_from_stack(key)) for key in data_keys])


def broadcast_object(obj: Any, src_rank: int, group: Any = None) -> Any:
    """Broadcast an arbitrary Python object to other workers."""
    object_list = [obj if get_rank() == src_rank else None]
    dist.broadcast_object_list(object_list, src=src_rank, group=group)
    return object_list[0]


def all_gather_list(data: Any, group: Any = None, max_size: int = 16384) -> list[Any]:
    """Gathers arbitrary data from all nodes into a list (picklable objects)."""
    results: list[Any] = [None] * get_world_size(group=group)
    dist.all_gather_object(results, data, group=group)
    return results


def broadcast_tensors(tensors: list[Any] | None, src_rank: int, group: Any = None) -> list[Any]:
    """Broadcast a list of tensors without other (non-src) ranks needing to know the dtypes or
    shapes of the tensors."""
    is_src_rank = get_rank(group) == src_rank
    if is_src_rank:
        assert tensors is not None
        metadata = [{"size": list(t.shape), "dtype": dtype_name(t)} for t in tensors]
    else:
        metadata = None
    metadata = broadcast_object(metadata, src_rank, group)

    out_tensors = []
    for i, meta in enumerate(metadata):
        if is_src_rank:
            assert tensors is not None
            tensor = tensors[i]
        else:
            tensor = zeros(meta["size"], meta["dtype"])
        dist.broadcast(tensor, src=src_rank, group=group)
        out_tensors.append(tensor)
    return out_tensors


def run() -> dict[str, Any]:
    rank = get_rank()
    group = dist.new_group(list(range(get_world_size())))
    stats = {"loss": tensor(2.0 + rank), "nll_loss": 1.5, "ntokens": tensor(100.0 * (rank + 1))}
    sources = [tensor([[1.0, 2.0], [3.0, 4.0]]), tensor([7, 8, 9], "int64")]
    return {
        "all_reduce_dict": all_reduce_dict(stats),
        "all_reduce_dict group": all_reduce_dict(stats, group=group),
        "max": all_reduce(tensor([float(rank), 5.0 - rank]), group=None, op="max"),
        "broadcast_object": broadcast_object({"epoch": 3, "rank": rank}, src_rank=1),
        "all_gather_list": all_gather_list({"rank": rank, "sizes": (rank, rank * 2)}),
        "broadcast_tensors": broadcast_tensors(sources if rank == 0 else None, src_rank=0),
        "broadcast_tensors group": broadcast_tensors(
            sources if rank == 1 else None, src_rank=1, group=group
        ),
    }
