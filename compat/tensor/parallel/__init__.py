"""Tensor parallelism, torch's ``torch.distributed.tensor.parallel`` surface:
:func:`parallelize_module`, :class:`ParallelStyle`, :class:`ColwiseParallel`,
:class:`RowwiseParallel`.

On torch every name IS torch's own object (``compat.tensor.parallel.ColwiseParallel is
torch.distributed.tensor.parallel.ColwiseParallel``), so ported code behaves as before, its
subclasses overriding torch's private methods included. On MindSpore, which has no tensor
parallelism in its communication modules (``mindspore.parallel``'s shard/Layout are graph-mode
auto-parallel), each name is compat's own emulation (:mod:`compat.tensor.parallel.style`,
:mod:`compat.tensor.parallel.api`) on ``mindspore.nn.Dense`` and ``mindspore.mint.nn.Linear``
Cells in PyNative mode, with DTensor's forward values and gradients.

The names are resolved on first use (PEP 562), once per framework, as :mod:`compat.tensor`'s.
"""

from __future__ import annotations

import importlib

from compat.tensor._resolve import resolver

_STYLE = "compat.tensor.parallel.style"

#: Each name this module resolves, with the module of compat's own object.
_OWN = {
    "parallelize_module": "compat.tensor.parallel.api",
    "ParallelStyle": _STYLE,
    "ColwiseParallel": _STYLE,
    "RowwiseParallel": _STYLE,
}

__all__ = ["ColwiseParallel", "ParallelStyle", "RowwiseParallel", "parallelize_module"]

_resolve_name, _resolved_names = resolver(__name__, "parallel", _OWN)


def __getattr__(name: str) -> object:
    return _resolve_name(name)


def own_object(name: str) -> object:
    """compat's own object for ``name`` (the emulation MindSpore programs get), whatever the
    framework: for tools that must not choose or import one (compat port, the tables' checks)."""
    if name not in _OWN:
        raise AttributeError(f"module {__name__!r} has no own object {name!r}")
    return getattr(importlib.import_module(_OWN[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_resolved_names()})
