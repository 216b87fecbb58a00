"""How :mod:`compat.tensor` and :mod:`compat.tensor.parallel` resolve their public names
(PEP 562 module ``__getattr__``): one cached lookup per (framework, name). The framework is
compat's once initialised, else the one :func:`compat.init` would choose
(:func:`compat.core.dispatch.choose_framework`: the imported framework decides). Its adapter
hands the framework's own object (torch's ``torch.distributed.tensor`` names); where it has
none (MindSpore), compat's own emulation serves."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from compat.base.adapter import Adapter
from compat.core import dispatch, state


@cache
def _adapter(framework: str) -> Adapter:
    return dispatch.load_adapter(framework)


def framework() -> str:
    """The framework whose objects compat.tensor's names stand for now."""
    current = state.get_current()
    return current.framework if current is not None else dispatch.choose_framework()


@cache
def _lookup(framework: str, submodule: str, name: str, own_module: str) -> Any:
    native = _adapter(framework).tensor_api(name, submodule)
    if native is not None:
        return native
    return getattr(importlib.import_module(own_module), name)


def resolver(
    package: str, submodule: str, own: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for the names of ``own`` (name -> the module
    of compat's own object): the framework's object from ``torch.distributed.tensor`` (or its
    ``submodule``, e.g. "parallel") where the framework has one, else compat's own."""

    def __getattr__(name: str) -> Any:
        if name not in own:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return _lookup(framework(), submodule, name, own[name])

    def __dir__() -> list[str]:
        return sorted(own)

    return __getattr__, __dir__
