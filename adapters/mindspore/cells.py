"""MindSpore's Cells as compat's tensor-parallel emulation (compat.tensor.parallel) sees them:
their children, the linear cells it shards (mindspore.nn.Dense and mindspore.mint.nn.Linear,
weight shaped (out, in)), their parameters replaced by shards, and PyNative forward hooks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mindspore as ms
from mindspore import mint

from compat.base.adapter import LinearLayer


def children(module: object) -> list[tuple[str, object]] | None:
    if not isinstance(module, ms.nn.Cell):
        return None
    return list(module.name_cells().items())


def linear_layer(module: object) -> LinearLayer | None:
    if isinstance(module, ms.nn.Dense):
        activation = type(module.activation).__name__ if module.activation_flag else None
        bias = module.bias if module.has_bias else None
        return LinearLayer(module.weight, bias, activation)
    if isinstance(module, mint.nn.Linear):
        return LinearLayer(module.weight, module.bias, None)
    return None


def replace_parameter(module: Any, name: str, value: ms.Tensor) -> None:
    old = getattr(module, name)
    setattr(module, name, ms.Parameter(value, name=old.name, requires_grad=old.requires_grad))


def add_forward_hooks(
    module: Any,
    before: Callable[[ms.Tensor], ms.Tensor],
    after: Callable[[ms.Tensor], ms.Tensor],
) -> None:
    # A pre-hook returns the construct's new arguments; a hook its new output (MindSpore 2.10).
    module.register_forward_pre_hook(lambda cell, args: (before(args[0]), *args[1:]))
    module.register_forward_hook(lambda cell, args, output: after(output))
