"""Pipeline-parallel point-to-point communication in the style of Megatron-LM
(megatron/core/pipeline_parallel/p2p_communication.py): batched ``P2POp`` lists run by
``batch_isend_irecv``, and ``isend``/``irecv`` pairs ordered by rank parity, each followed by a
loop of ``req.wait()``. Framework-neutral: tensors come from ``.tensors``."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from .tensors import tensor, zeros


def _batched_p2p_ops(
    *,
    tensor_send_prev: Any,
    tensor_recv_prev: Any,
    tensor_send_next: Any,
    tensor_recv_next: Any,
    prev_rank: int,
    next_rank: int,
    group: Any = None,
) -> list[Any]:
    ops = []
    if tensor_send_prev is not None:
        send_prev_op = dist.P2POp(dist.isend, tensor_send_prev, prev_rank, group)
        ops.append(send_prev_op)
    if tensor_recv_prev is not None:
        recv_prev_op = dist.P2POp(dist.irecv, tensor_recv_prev, prev_rank, group)
        ops.append(recv_prev_op)
    if tensor_send_next is not None:
        send_next_op = dist.P2POp(dist.isend, tensor_send_next, next_rank, group)
        ops.append(send_next_op)
    if tensor_recv_next is not None:
        recv_next_op = dist.P2POp(dist.irecv, tensor_recv_next, next_rank, group)
        ops.append(recv_next_op)
    if len(ops) > 0:
        reqs = dist.batch_isend_irecv(ops)
    else:
        reqs = []
    return reqs


def _p2p_ops(
    *,
    tensor_send_prev: Any,
    tensor_recv_prev: Any,
    tensor_send_next: Any,
    tensor_recv_next: Any,
    prev_rank: int,
    next_rank: int,
    group: Any = None,
) -> list[Any]:
    """Even ranks send first, odd ranks receive first, so that the pairs match."""
    reqs = []
    rank = dist.get_rank()
    if rank % 2 == 0:
        if tensor_send_next is not None:
            send_next_req = dist.isend(tensor=tensor_send_next, dst=next_rank, group=group)
            reqs.append(send_next_req)
        if tensor_recv_prev is not None:
            recv_prev_req = dist.irecv(tensor=tensor_recv_prev, src=prev_rank, group=group)
            reqs.append(recv_prev_req)
        if tensor_send_prev is not None:
            send_prev_req = dist.isend(tensor=tensor_send_prev, dst=prev_rank, group=group)
            reqs.append(send_prev_req)
        if tensor_recv_next is not None:
            recv_next_req = dist.irecv(tensor=tensor_recv_next, src=next_rank, group=group)
            reqs.append(recv_next_req)
    else:
        if tensor_recv_prev is not None:
            recv_prev_req = dist.irecv(tensor=tensor_recv_prev, src=prev_rank, group=group)
            reqs.append(recv_prev_req)
        if tensor_send_next is not None:
            send_next_req = dist.isend(tensor=tensor_send_next, dst=next_rank, group=group)
            reqs.append(send_next_req)
        if tensor_recv_next is not None:
            recv_next_req = dist.irecv(tensor=tensor_recv_next, src=next_rank, group=group)
            reqs.append(recv_next_req)
        if tensor_send_prev is not None:
            send_prev_req = dist.isend(tensor=tensor_send_prev, dst=prev_rank, group=group)
            reqs.append(send_prev_req)
    return reqs


def _communicate(
    *,
    tensor_send_next: Any,
    tensor_send_prev: Any,
    recv_prev: bool,
    recv_next: bool,
    shape: list[int],
    batch_p2p_comm: bool = True,
    group: Any = None,
) -> tuple[Any, Any]:
    """Communicate tensors between stages: the tensors received from the previous and the next
    stage (None where nothing was received)."""
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    prev_rank = (rank - 1) % world_size
    next_rank = (rank + 1) % world_size
    tensor_recv_prev = zeros(shape) if recv_prev else None
    tensor_recv_next = zeros(shape) if recv_next else None
    p2p_func = _batched_p2p_ops if batch_p2p_comm else _p2p_ops
    reqs = p2p_func(
        tensor_send_prev=tensor_send_prev,
        tensor_recv_prev=tensor_recv_prev,
        tensor_send_next=tensor_send_next,
        tensor_recv_next=tensor_recv_next,
        prev_rank=prev_rank,
        next_rank=next_rank,
        group=group,
    )
    for req in reqs:
        req.wait()
    return tensor_recv_prev, tensor_recv_next


def send_forward_recv_forward(output_tensor: Any, batch_p2p_comm: bool, group: Any = None) -> Any:
    input_tensor, _ = _communicate(
        tensor_send_next=output_tensor,
        tensor_send_prev=None,
        recv_prev=True,
        recv_next=False,
        shape=list(output_tensor.shape),
        batch_p2p_comm=batch_p2p_comm,
        group=group,
    )
    return input_tensor


def send_backward_recv_backward(input_grad: Any, batch_p2p_comm: bool, group: Any = None) -> Any:
    _, output_grad = _communicate(
        tensor_send_next=None,
        tensor_send_prev=input_grad,
        recv_prev=False,
        recv_next=True,
        shape=list(input_grad.shape),
        batch_p2p_comm=batch_p2p_comm,
        group=group,
    )
    return output_grad


def run() -> dict[str, Any]:
    rank = dist.get_rank()
    group = dist.new_group(list(range(dist.get_world_size())))
    results: dict[str, Any] = {}
    for batch in (True, False):
        for label, chosen in (("default", None), ("group", group)):
            activation = tensor([[rank + 0.5, 10.0 * rank], [1.0, -float(rank)]])
            received = send_forward_recv_forward(activation, batch, chosen)
            grad = tensor([100.0 + rank, 7.0])
            received_grad = send_backward_recv_backward(grad, batch, chosen)
            results[f"batch={batch} {label}"] = [received, received_grad]
    # work handles: what batch_isend_irecv returns, and how many
    reqs = _batched_p2p_ops(
        tensor_send_prev=None,
        tensor_recv_prev=zeros([1]),
        tensor_send_next=tensor([float(rank)]),
        tensor_recv_next=None,
        prev_rank=(rank - 1) % dist.get_world_size(),
        next_rank=(rank + 1) % dist.get_world_size(),
    )
    results["reqs"] = [type(reqs).__name__, len(reqs)]
    for req in reqs:
        req.wait()
    return results
