"""Which framework a tensor belongs to, and the adapter registry.

Dispatch looks at the tensor's type through one cached look-up that consults only modules already
in ``sys.modules``: compat never imports a framework the user has not imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from functools import cache

from compat.base import tables
from compat.base.adapter import Adapter


def frameworks() -> list[str]:
    """The frameworks compat knows (``mapping_tables/frameworks.toml``)."""
    return list(tables.load("frameworks"))


#: tensor type -> framework (a look-up per call; filled on first sight of each type)
_FRAMEWORK_OF_TYPE: dict[type, str | None] = {}


def framework_of_type(cls: type) -> str | None:
    """The framework whose tensor type ``cls`` is (a subclass of), or None."""
    try:
        return _FRAMEWORK_OF_TYPE[cls]
    except KeyError:
        pass
    found = None
    for name, entry in tables.load("frameworks").items():
        module_name, class_name = entry["tensor"].split(":")
        module = sys.modules.get(module_name)
        if module is not None and issubclass(cls, getattr(module, class_name)):
            found = name
            break
    if len(_FRAMEWORK_OF_TYPE) < 128:
        _FRAMEWORK_OF_TYPE[cls] = found
    return found


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


def imported() -> list[str]:
    """The frameworks whose module the program has imported (``sys.modules``; imports nothing)."""
    modules = tables.load("frameworks")
    return [name for name, entry in modules.items() if entry["module"] in sys.modules]


def choose_framework(framework: str | None = None, *, first_if_several: bool = False) -> str:
    """The framework to run on, from the first of these that decides: ``framework``;
    ``COMPAT_FRAMEWORK`` (which ``compat launch`` sets); the one framework the program has
    imported (``sys.modules``, as einops and array-api-compat find theirs: a MindSpore script
    started by torchrun, ``torch.multiprocessing.spawn`` or Slurm has imported mindspore, not
    torch); a launcher that names one (any of its ``launcher_env`` variables set, in
    ``mapping_tables/frameworks.toml``: torchrun, msrun); a rendezvous convention in the
    environment (``rendezvous_env``: torch's ``MASTER_ADDR``); the one installed framework.

    When nothing decides and several frameworks are installed, ``first_if_several=True`` takes the
    first installed one in frameworks.toml's order (``compat launch`` and ``compat bench``, whose
    banner names the choice); without it that is a ValueError naming the choices (``compat.init``).
    A chosen framework that is unknown or not installed is a ValueError naming where the choice
    came from. Imports no framework.
    """
    known = frameworks()
    param = "framework"
    if framework is None:
        framework, param = os.environ.get("COMPAT_FRAMEWORK") or None, "COMPAT_FRAMEWORK"
    if framework is None:
        framework, param = _undecided(known), "the environment"
    if framework is None:
        present, loaded = installed(), imported()
        if len(present) == 1 or (first_if_several and present):
            return present[0]
        raise ValueError(
            f"framework: expected one of {known}, passed as compat.init(framework=...) or "
            "COMPAT_FRAMEWORK, because nothing else decides: "
            f"{'several are' if present else 'none is'} installed ({present}), the program has "
            f"imported {_listed(loaded)}, and no launcher's variable is set; got None"
        )
    if framework not in known:
        raise ValueError(f"{param}: expected one of {known}; got {framework!r}")
    if not is_available(framework):
        raise ValueError(f"{param}: {framework!r} is not installed; installed: {installed()}")
    return framework


def _undecided(known: list[str]) -> str | None:
    """The framework the program's imports, a launcher or a rendezvous convention names (in that
    order; see :func:`choose_framework`), or None."""
    loaded = imported()
    if len(loaded) == 1:
        return loaded[0]
    for name in known:
        if any(var in os.environ for var in tables.lookup("frameworks", name, "launcher_env")):
            return name
    for name in known:
        variables = tables.lookup("frameworks", name).get("rendezvous_env", [])
        if any(var in os.environ for var in variables):
            return name
    return None


def _listed(names: list[str]) -> str:
    return " and ".join(names) if names else "neither"
