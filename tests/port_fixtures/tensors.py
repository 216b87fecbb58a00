"""Tensor helpers of the framework-neutral fixtures (not ported): the fixtures' collective calls
are ported, their tensor code is not, so the few tensor operations that differ between torch and
MindSpore (or that MindSpore's CPU kernels lack) live here. ``PORT_FIXTURES_FRAMEWORK`` chooses
the framework (default torch). ``describe`` turns a fixture's results into comparable JSON."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

FRAMEWORK = os.environ.get("PORT_FIXTURES_FRAMEWORK", "torch")


def tensor(values: Any, dtype: str = "float32") -> Any:
    if FRAMEWORK == "mindspore":
        import mindspore

        return mindspore.Tensor(values, getattr(mindspore, dtype))
    import torch

    return torch.tensor(values, dtype=getattr(torch, dtype))


def zeros(shape: Sequence[int], dtype: str = "float32") -> Any:
    if FRAMEWORK == "mindspore":
        import mindspore
        import numpy as np

        return mindspore.Tensor(np.zeros(tuple(shape), dtype=dtype))
    import torch

    return torch.zeros(tuple(shape), dtype=getattr(torch, dtype))


def zeros_like(like: Any) -> Any:
    return zeros(tuple(like.shape), dtype_name(like))


def clone(value: Any) -> Any:
    """A copy (MindSpore's CPU kernels have no Clone)."""
    return value + 0 if FRAMEWORK == "mindspore" else value.clone()


def stack(values: Sequence[Any]) -> Any:
    if FRAMEWORK == "mindspore":
        from mindspore import ops

        return ops.stack(list(values))
    import torch

    return torch.stack(list(values))


def pad_to(value: Any, shape: Sequence[int]) -> Any:
    """``value`` zero-padded at the end of each dim to ``shape``."""
    padded = zeros(shape, dtype_name(value))
    padded[tuple(slice(size) for size in value.shape)] = value
    return padded


def dtype_name(value: Any) -> str:
    """``float32``, ``int64``, ... for a torch or MindSpore tensor."""
    return str(value.dtype).removeprefix("torch.").lower()


def is_tensor(value: object) -> bool:
    return all(hasattr(value, name) for name in ("tolist", "dtype", "shape"))


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4) + 0.0  # -0.0 -> 0.0
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def describe(value: Any) -> Any:
    """JSON-able form of a result that keeps what a port must not change: values, Python types
    (tuple vs list vs tensor), dtypes and shapes."""
    if is_tensor(value):
        if hasattr(value, "detach"):
            value = value.detach()
        return {
            "tensor": _rounded(value.tolist()),
            "dtype": dtype_name(value),
            "shape": list(value.shape),
        }
    if isinstance(value, tuple):
        return {"tuple": [describe(item) for item in value]}
    if isinstance(value, list):
        return [describe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): describe(item) for key, item in value.items()}
    if isinstance(value, float):
        return _rounded(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return {"type": type(value).__name__}
