"""A pluggable communicator, in the pattern of an inference engine's weight-update service: a
class whose methods hand their arguments on to torch.distributed (``**kwargs`` included), and
module-level functions that call the chosen instance. ``barrier`` and ``new_group`` pass on
``**kwargs`` that compat's functions may not take (torch's ``timeout``, ``device_id``), so
they stay on torch, as do the ``ReduceOp`` defaults a call on torch may be handed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch
import torch.distributed as torch_dist


class TorchCommunicator:
    def init_process_group(
        self, rank: int, world_size: int, store: torch_dist.TCPStore, **kwargs: Any
    ) -> None:
        torch_dist.init_process_group(
            backend=kwargs.get("backend", "gloo"),
            world_size=world_size,
            rank=rank,
            timeout=kwargs.get("timeout", timedelta(seconds=60)),
            store=store,
        )

    def destroy_process_group(self, group: Any = None) -> None:
        torch_dist.destroy_process_group(group)

    def is_initialized(self) -> bool:
        return torch_dist.is_initialized()

    def all_gather_object(self, object_list: list[Any], obj: Any, group: Any = None) -> None:
        torch_dist.all_gather_object(object_list, obj, group)

    def all_reduce(
        self,
        tensor: torch.Tensor,
        op: torch_dist.ReduceOp.RedOpType = torch_dist.ReduceOp.SUM,
        group: Any = None,
        **kwargs: Any,
    ) -> None:
        torch_dist.all_reduce(tensor, op, group, **kwargs)

    def broadcast(
        self, tensor: torch.Tensor, src: int = 0, group: Any = None, **kwargs: Any
    ) -> None:
        torch_dist.broadcast(tensor, src, group, **kwargs)

    def barrier(self, group: Any = None, **kwargs: Any) -> None:
        torch_dist.barrier(group, **kwargs)

    def new_group(self, ranks: list[int], **kwargs: Any) -> Any:
        return torch_dist.new_group(ranks, **kwargs)


_COMMUNICATOR = TorchCommunicator()


def init_process_group(rank: int, world_size: int, store: Any, **kwargs: Any) -> None:
    _COMMUNICATOR.init_process_group(rank, world_size, store, **kwargs)


def destroy_process_group(group: Any = None) -> None:
    _COMMUNICATOR.destroy_process_group(group)


def is_initialized() -> bool:
    return _COMMUNICATOR.is_initialized()


def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    _COMMUNICATOR.all_gather_object(object_list, obj, group)


def all_reduce(
    tensor: torch.Tensor, op: Any = torch_dist.ReduceOp.SUM, group: Any = None, **kwargs: Any
) -> None:
    _COMMUNICATOR.all_reduce(tensor, op, group, **kwargs)


def broadcast(tensor: torch.Tensor, src: int = 0, group: Any = None, **kwargs: Any) -> None:
    _COMMUNICATOR.broadcast(tensor, src, group, **kwargs)


def barrier(group: Any = None, **kwargs: Any) -> None:
    _COMMUNICATOR.barrier(group, **kwargs)


def new_group(ranks: list[int], **kwargs: Any) -> Any:
    return _COMMUNICATOR.new_group(ranks, **kwargs)
