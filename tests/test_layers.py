"""The package's layers import downward only, and no module imports itself back through others
(imports under ``TYPE_CHECKING`` and inside functions count too). The layers, from the bottom:
compat/base, adapters/ (installed as compat.adapters), compat/transport, compat/algorithms,
compat/core, the modules at compat/'s top level and compat/tensor (what users call),
compat/tools."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Module name prefixes, lowest layer first.
LAYERS = [
    ("base", ("compat.base",)),
    ("adapters", ("compat.adapters",)),
    ("transport", ("compat.transport",)),
    ("algorithms", ("compat.algorithms",)),
    ("core", ("compat.core",)),
    ("api", ("compat", "compat.tensor")),  # compat.tensor: torch.distributed.tensor's namesake
    ("tools", ("compat.tools", "compat.__main__")),
]


def _modules() -> dict[str, Path]:
    """Every module of the package by its import name."""
    found = {}
    for folder, package in ((ROOT / "compat", "compat"), (ROOT / "adapters", "compat.adapters")):
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports, wherever in the module the import is."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            submodules = [f"{base}.{alias.name}" for alias in node.names]
            targets = [m for m in submodules if m in modules] or [base]
        else:
            continue
        found.update(target for target in targets if target in modules and target != name)
    return found


def _layer(name: str) -> int:
    """The index in LAYERS of the longest prefix that names ``name``'s layer."""
    best, index = -1, -1
    for position, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = name == prefix or name.startswith(prefix + ".")
            if matches and len(prefix) > best:
                best, index = len(prefix), position
    assert index >= 0, f"{name} is in no layer"
    return index


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_every_import_goes_to_the_same_layer_or_a_lower_one() -> None:
    upward = [
        f"{name} ({LAYERS[_layer(name)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
        for name, targets in _graph().items()
        for target in sorted(targets)
        if _layer(target) > _layer(name)
    ]
    assert not upward, "\n".join(upward)


def test_no_module_imports_itself_back() -> None:
    graph = _graph()
    circles = []
    for start in sorted(graph):
        # A path from each import of start back to start is a circle through start.
        seen: set[str] = set()
        stack = [(target, [start, target]) for target in sorted(graph[start])]
        while stack:
            current, path = stack.pop()
            if current == start:
                circles.append(" -> ".join(path))
                break
            if current in seen:
                continue
            seen.add(current)
            stack.extend((target, [*path, target]) for target in sorted(graph[current]))
    assert not circles, "\n".join(circles)


def test_each_folder_of_compat_is_a_layer() -> None:
    folders = {path.name for path in (ROOT / "compat").iterdir() if any(path.glob("*.py"))}
    layers = {
        prefix.split(".")[1] for _, prefixes in LAYERS for prefix in prefixes if "." in prefix
    }
    assert folders == layers - {"adapters", "__main__"}
