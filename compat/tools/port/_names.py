"""What a star import brings into a file: ``from .utils import *`` where ``utils.py`` does
``import torch.distributed as dist`` binds ``dist`` here as Python will at run time.

Read with :mod:`ast` from the files beside the ported one (relative imports from its folder,
absolute ones from its folder and the folders above); a module that cannot be found is named in
:attr:`StarNames.unresolved`, and the rewriter then assumes the usual spellings (``torch``,
``dist``) and says so in the report.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

# How deep ``from a import *`` chains are followed (a imports * from b, which imports * from c).
MAX_DEPTH = 4
# What a star import from an unknown module is assumed to bind, when the file uses the name
# without binding it: the spellings real code uses for these modules.
ASSUMED = {"torch": "torch", "dist": "torch.distributed"}


@dataclass
class StarNames:
    """The names star imports bind: name -> qualified name (``"dist"`` -> torch.distributed)."""

    bound: dict[str, str] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)  # modules not found, as written
    #: torch modules imported with a star (``from torch.distributed import *``): their public
    #: names are bound, but only the tables know which those are
    modules: list[str] = field(default_factory=list)


def star_names(tree: ast.Module, path: str) -> StarNames:
    """The names the star imports of ``tree`` (the file at ``path``) bind, from the files they
    import."""
    found = StarNames()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            target = _module_file(node, Path(path))
            written = "." * node.level + (node.module or "")
            if target is None:
                if _external(node):
                    found.modules.append(node.module or "")
                else:
                    found.unresolved.append(written)
                continue
            found.bound.update(_exported(target, MAX_DEPTH))
    return found


def _external(node: ast.ImportFrom) -> bool:
    """A star import from torch itself or a library: nothing of the user's to read."""
    return node.level == 0 and (node.module or "").split(".")[0] in ("torch", "numpy", "typing")


def _module_file(node: ast.ImportFrom, path: Path) -> Path | None:
    parts = (node.module or "").split(".") if node.module else []
    if node.level:
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
        candidates = [base]
    else:
        candidates = [path.parent, *path.parent.parents][:6]
    for base in candidates:
        stem = base.joinpath(*parts) if parts else base
        for file in (stem.with_suffix(".py"), stem / "__init__.py"):
            if parts and file.is_file():
                return file
        if not parts and (stem / "__init__.py").is_file():
            return stem / "__init__.py"
    return None


def _exported(file: Path, depth: int) -> dict[str, str]:
    """The names ``from <file> import *`` binds that are (parts of) imported modules or their
    members: name -> qualified name. ``__all__`` is honoured when it is a literal."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    bound: dict[str, str] = {}
    names_all: set[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    first = alias.name.split(".")[0]
                    bound[first] = first
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ImportFrom) and depth > 1:
            if any(alias.name == "*" for alias in node.names):
                target = _module_file(node, file)
                if target is not None:
                    bound.update(_exported(target, depth - 1))
        elif isinstance(node, ast.Assign) and _assigns_all(node):
            names_all = _literal_names(node.value)
    if names_all is not None:
        return {name: value for name, value in bound.items() if name in names_all}
    return {name: value for name, value in bound.items() if not name.startswith("_")}


def _assigns_all(node: ast.Assign) -> bool:
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)


def _literal_names(value: ast.expr) -> set[str] | None:
    if isinstance(value, (ast.List, ast.Tuple)) and all(
        isinstance(item, ast.Constant) and isinstance(item.value, str) for item in value.elts
    ):
        return {
            item.value
            for item in value.elts
            if isinstance(item, ast.Constant) and isinstance(item.value, str)
        }
    return None
