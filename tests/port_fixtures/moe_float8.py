"""A mixture-of-experts token dispatch in float8, in the style of torchao's mxfp8 MoE kernels:
each rank quantises its tokens to float8_e4m3fn with one float32 scale per block of them, and
exchanges both with the functional ``all_to_all_single`` (split sizes per expert rank), then
dequantises what it received.

``MOE_PAYLOAD_DTYPE`` (default float8_e4m3fn) names the payload's dtype as sent: "uint8" sends
its bytes, which is what torch's NCCL does with float8 (ncclUint8 where NCCL has no float8
type); Gloo refuses float8 itself, so the unported file runs on Gloo with "uint8" only."""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

BLOCK = 4


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float8_e4m3fn data and one float32 scale per row of BLOCK values."""
    rows = x.reshape(-1, BLOCK)
    scales = rows.abs().amax(dim=1).clamp(min=1e-6) / torch.finfo(torch.float8_e4m3fn).max
    data = (rows / scales[:, None]).to(torch.float8_e4m3fn)
    return data, scales.to(torch.float32)


def dispatch(
    data: torch.Tensor, scales: torch.Tensor, send: list[int], receive: list[int], group: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """Send ``send[i]`` rows of data and their scales to rank i; rows arrive in rank order."""
    payload = data
    if os.environ.get("MOE_PAYLOAD_DTYPE", "float8_e4m3fn") == "uint8":
        payload = data.view(torch.uint8)
    received = funcol.all_to_all_single(
        payload, output_split_sizes=receive, input_split_sizes=send, group=group
    )
    received_scales = funcol.all_to_all_single(
        scales, output_split_sizes=receive, input_split_sizes=send, group=group
    )
    # Explicit waits, as the funcol results are asynchronous
    received = torch.ops._c10d_functional.wait_tensor(received)
    received_scales = torch.ops._c10d_functional.wait_tensor(received_scales)
    return received.view(torch.float8_e4m3fn), received_scales


def run() -> dict[str, Any]:
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD
    # Rank r sends rank i r + i + 1 rows of BLOCK tokens.
    send = [rank + i + 1 for i in range(world)]
    receive = [r + rank + 1 for r in range(world)]
    tokens = torch.linspace(-3.0, 5.0, BLOCK * sum(send)) * (rank + 1.5)
    data, scales = quantize(tokens)
    received, received_scales = dispatch(data, scales, send, receive, group)
    restored = received.to(torch.float32) * received_scales[:, None]
    return {
        "dtype": str(received.dtype),
        "bytes": received.view(torch.uint8).reshape(-1).tolist(),
        "scales": received_scales.tolist(),
        "restored": restored.reshape(-1).tolist(),
    }
