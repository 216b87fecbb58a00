"""Which framework a tensor belongs to, and the adapter registry.

Dispatch looks at the tensor's type through one cached look-up that consults only modules already
in ``sys.modules``: compat never imports a framework the user has not imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from functools import cache, lru_cache

from compat import tables
from compat.adapter import Adapter


def frameworks() -> list[str]:
    """The frameworks compat knows (``mapping_tables/frameworks.toml``)."""
    return list(tables.load("frameworks"))


@lru_cache(128)
def framework_of_type(cls: type) -> str | None:
    """The framework whose tensor type ``cls`` is (a subclass of), or None."""
    for name, entry in tables.load("frameworks").items():
        module_name, class_name = entry["tensor"].split(":")
        module = sys.modules.get(module_name)
        if module is not None and issubclass(cls, getattr(module, class_name)):
            return name
    return None


def framework_of(obj: object) -> str | None:
    """The framework of the tensor ``obj``, or None if it is no tensor compat knows."""
    return framework_of_type(type(obj))


@cache
def is_available(framework: str) -> bool:
    """True if ``framework`` is installed (checked without importing it)."""
    module = tables.lookup("frameworks", framework, "module")
    return importlib.util.find_spec(module) is not None


def installed() -> list[str]:
    return [name for name in frameworks() if is_available(name)]


def load_adapter(framework: str) -> Adapter:
    """Import the adapter module of ``framework`` (and so the framework) and make its adapter."""
    module = importlib.import_module(tables.lookup("frameworks", framework, "adapter"))
    adapter: Adapter = module.ADAPTER_CLASS()
    return adapter
