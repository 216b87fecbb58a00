"""Data-parallel training with ZeRO-style sharding, written once against compat.

Each rank computes the gradient of an MLP on its part of the batch; reduce_scatter_tensor (AVG)
gives it its shard of the averaged gradient; it updates its shard of the parameters with its
shard of Adam's state; all_gather_into_tensor rebuilds the parameters. Only `model_for` (the
loss and its gradient) differs per framework.

    compat launch -n 2 --framework torch examples/zero_training.py --steps 30 --out losses.json
    compat launch -n 2 --framework mindspore examples/zero_training.py --steps 30 --out ...
    python examples/zero_training.py --steps 30 --out single.json   # one process, whole batch
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import numpy as np

import compat

SIZES = (8, 16, 1)  # inputs, hidden units, outputs
BATCH = 32  # the global batch, split evenly across ranks


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic, seeded regression set: y = sin(x @ a) + noise."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    a = rng.standard_normal((SIZES[0], SIZES[2])).astype(np.float32)
    y = (np.sin(x @ a) + 0.05 * rng.standard_normal((BATCH, SIZES[2]))).astype(np.float32)
    return x, y


def initial_parameters(seed: int = 1) -> np.ndarray:
    """W1, b1, W2, b2 flattened into one vector."""
    rng = np.random.default_rng(seed)
    inputs, hidden, outputs = SIZES
    parts = [
        rng.standard_normal((inputs, hidden)) / np.sqrt(inputs),
        np.zeros(hidden),
        rng.standard_normal((hidden, outputs)) / np.sqrt(hidden),
        np.zeros(outputs),
    ]
    return np.concatenate([part.ravel() for part in parts]).astype(np.float32)


def unflatten(flat: Any) -> list[Any]:
    inputs, hidden, outputs = SIZES
    shapes = [(inputs, hidden), (hidden,), (hidden, outputs), (outputs,)]
    pieces, start = [], 0
    for shape in shapes:
        count = int(np.prod(shape))
        pieces.append(flat[start : start + count].reshape(shape))
        start += count
    return pieces


def mlp_loss(flat: Any, x: Any, y: Any, tanh: Callable[[Any], Any]) -> Any:
    w1, b1, w2, b2 = unflatten(flat)
    prediction = tanh(x @ w1 + b1) @ w2 + b2
    return ((prediction - y) ** 2).mean()


def model_for(framework: str) -> tuple[Callable[[np.ndarray], Any], Callable[..., Any]]:
    """(to_tensor, loss_and_grad) for the framework: the only per-framework code.

    loss_and_grad returns the loss as a float and its gradient as a numpy array.
    """
    if framework == "torch":
        import torch

        def to_tensor(array: np.ndarray) -> Any:
            return torch.from_numpy(np.ascontiguousarray(array))

        def loss_and_grad(flat: Any, x: Any, y: Any) -> tuple[float, Any]:
            flat = flat.detach().requires_grad_(True)
            loss = mlp_loss(flat, x, y, torch.tanh)
            loss.backward()
            return float(loss.detach()), flat.grad.numpy()

        return to_tensor, loss_and_grad

    import mindspore as ms
    from mindspore import mint

    def to_tensor(array: np.ndarray) -> Any:
        return ms.Tensor(np.ascontiguousarray(array))

    def loss_and_grad(flat: Any, x: Any, y: Any) -> tuple[float, Any]:
        loss, grad = ms.value_and_grad(lambda p: mlp_loss(p, x, y, mint.tanh))(flat)
        return float(loss.asnumpy()), grad.asnumpy()

    return to_tensor, loss_and_grad


def train(steps: int, lr: float = 0.02, log_every: int = 10) -> list[float]:
    """Train and return the global loss of each step (the same on every rank); rank 0 prints the
    loss of the first step and of every ``log_every``-th (0: none)."""
    compat.init()
    rank, world = compat.get_rank(), compat.get_world_size()
    to_tensor, loss_and_grad = model_for(compat.get_framework())
    x, y = data()
    rows = BATCH // world
    x_mine = to_tensor(x[rank * rows : (rank + 1) * rows])
    y_mine = to_tensor(y[rank * rows : (rank + 1) * rows])

    flat = initial_parameters()
    padded = -(-flat.size // world) * world  # a multiple of the world size, for equal shards
    start = np.pad(flat, (0, padded - flat.size))
    params = to_tensor(start)
    shard_size = padded // world
    shard = to_tensor(start[rank * shard_size : (rank + 1) * shard_size])
    m = to_tensor(np.zeros(shard_size, np.float32))
    v = to_tensor(np.zeros(shard_size, np.float32))
    beta1, beta2, eps = 0.9, 0.999, 1e-8

    losses = []
    for step in range(1, steps + 1):
        loss, grad = loss_and_grad(params[: flat.size], x_mine, y_mine)
        grad = to_tensor(np.pad(grad, (0, padded - flat.size)))
        # This rank's shard of the gradient, averaged over the ranks' batches.
        grad_shard = compat.reduce_scatter_tensor(grad, op="avg")
        # Adam on this rank's shard only.
        m = beta1 * m + (1 - beta1) * grad_shard
        v = beta2 * v + (1 - beta2) * grad_shard * grad_shard
        m_hat, v_hat = m / (1 - beta1**step), v / (1 - beta2**step)
        shard = shard - lr * m_hat / (v_hat**0.5 + eps)
        params = compat.all_gather_into_tensor(shard)
        # The global loss: the mean of the ranks' losses (equal batch sizes).
        total = to_tensor(np.array([loss], np.float32))
        compat.all_reduce(total, op="avg")
        losses.append(float(total.tolist()[0]))
        if rank == 0 and log_every > 0 and (step % log_every == 0 or step == 1):
            print(f"{compat.get_framework()} step {step:3d} loss {losses[-1]:.6f}", flush=True)
    compat.destroy()
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", help="write the loss curve (rank 0) to this JSON file")
    parser.add_argument(
        "--log-every", type=int, default=10, help="print the loss every N steps (0: never)"
    )
    args = parser.parse_args()
    losses = train(args.steps, log_every=args.log_every)
    if args.out and compat_rank_zero():
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(losses, handle)


def compat_rank_zero() -> bool:
    import os

    return os.environ.get("RANK", os.environ.get("MS_NODE_ID", "0")) == "0"


if __name__ == "__main__":
    main()
