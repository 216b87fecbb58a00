"""DTensor, torch's ``torch.distributed.tensor`` surface: :class:`DTensor` (``from_local``,
``to_local``, ``full_tensor``, ``redistribute``), the placements ``Placement``, ``Shard(dim)``,
``Replicate()``, ``Partial(reduce_op)``, and :func:`distribute_tensor`.

On torch every name IS torch's own object (``compat.tensor.DTensor is
torch.distributed.tensor.DTensor``), so ported code behaves as before: DTensors are torch's,
``nn.Parameter(DTensor.from_local(...))`` works, subclasses of torch's classes keep their
private hooks. On MindSpore, which has no DTensor in its communication modules, each name is
compat's own emulation (:mod:`compat.tensor.dtensor`, :mod:`compat.tensor.placements`) on
compat's collectives and :class:`compat.DeviceMesh`, with torch's semantics; it is not a Tensor
subclass (arithmetic on it is a TypeError naming ``to_local()`` / ``full_tensor()``).

The names are resolved on first use (PEP 562), once per framework: compat's framework once
initialised, else the one :func:`compat.init` would choose (the framework the program imported);
where nothing decides, that is :func:`compat.init`'s ValueError naming the choices.
"""

from __future__ import annotations

import importlib

from compat.mesh import DeviceMesh as DeviceMesh
from compat.mesh import init_device_mesh as init_device_mesh
from compat.tensor import parallel as parallel
from compat.tensor._resolve import resolver

_PLACEMENTS = "compat.tensor.placements"
_DTENSOR = "compat.tensor.dtensor"

#: Each name this module resolves, with the module of compat's own object.
_OWN = {
    "DTensor": _DTENSOR,
    "distribute_tensor": _DTENSOR,
    "Placement": _PLACEMENTS,
    "Shard": _PLACEMENTS,
    "Replicate": _PLACEMENTS,
    "Partial": _PLACEMENTS,
}

__all__ = [
    "DTensor",
    "DeviceMesh",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "distribute_tensor",
    "init_device_mesh",
]

_resolve_name, _resolved_names = resolver(__name__, "", _OWN)


def __getattr__(name: str) -> object:
    return _resolve_name(name)


def own_object(name: str) -> object:
    """compat's own object for ``name`` (the emulation MindSpore programs get), or the
    submodule ``name`` (``parallel``), whatever the framework: for tools that must not choose or
    import one (compat port, the tables' checks)."""
    if name in _OWN:
        return getattr(importlib.import_module(_OWN[name]), name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module {__name__!r} has no own object {name!r}") from None


def __dir__() -> list[str]:
    return sorted({*globals(), *_resolved_names()})
