"""Training-loop helpers in the style of speech toolkits and communication libraries: a rank that
runs out of batches leaves the loop, and the others notice it through a monitored barrier on a
Gloo side group, whose timeout error they catch as torch raises it (a RuntimeError); and a
bridge from torch's reduce ops to a library's own codes that tests the op with ``is``, whose
default stays torch's member because the function hands it to code of its own."""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


def join(group: dist.ProcessGroup, seconds: float) -> bool:
    """True when a rank did not arrive in time: it has no batches left, so this one stops too."""
    try:
        dist.monitored_barrier(group=group, timeout=timedelta(seconds=seconds))
    except RuntimeError:
        return True
    return False


def train(batches: int) -> dict[str, Any]:
    join_group = dist.new_group(backend="gloo", timeout=timedelta(seconds=30))
    done = 0
    stopped_early = False
    for step in range(batches):
        # the first step is not checked: its time includes setting up the data loader
        if step > 0 and join(join_group, 1.0):
            stopped_early = True
            break
        done += 1
    dist.barrier()  # every rank leaves the loop before the group goes
    dist.destroy_process_group(join_group)
    return {"done": done, "stopped_early": stopped_early}


class LibraryOp(enum.IntEnum):
    SUM = 0
    MAX = 3


def to_library_op(op: Any) -> LibraryOp:
    if op is torch.distributed.ReduceOp.SUM:
        return LibraryOp.SUM
    elif op is dist.ReduceOp.MAX:
        return LibraryOp.MAX
    raise ValueError(f"unexpected reduce op {op}")


_TORCH_OP = {LibraryOp.SUM: dist.ReduceOp.SUM, LibraryOp.MAX: dist.ReduceOp.MAX}


class _LibraryAllReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, op: Any, tensor: torch.Tensor) -> torch.Tensor:
        code = to_library_op(op)
        out = tensor.clone()
        dist.all_reduce(out, op=_TORCH_OP[code])
        return out


def library_all_reduce(tensor: torch.Tensor, op: Any = dist.ReduceOp.SUM) -> torch.Tensor:
    return _LibraryAllReduce.apply(op, tensor)


def run() -> dict[str, Any]:
    rank = dist.get_rank()
    values = torch.tensor([1.0 + rank, 5.0 - rank])
    return {
        # rank 1 runs out after one batch; rank 0 notices at its second
        "train": train(3 if rank == 0 else 1),
        "sum": library_all_reduce(values),
        "max": library_all_reduce(values, op=dist.ReduceOp.MAX),
        "codes": [int(to_library_op(dist.ReduceOp.SUM)), int(to_library_op(dist.ReduceOp.MAX))],
    }
