"""Packaging and import hygiene: compat imports no framework; the wheel ships adapters, tables."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import compat
from compat.base import tables

ROOT = Path(__file__).resolve().parent.parent


def test_import_compat_imports_no_framework() -> None:
    code = (
        "import sys, compat, compat.base.adapter, compat.core.dispatch, compat.tools.launch, "
        "compat.tools.cli; "
        "loaded = [m for m in ('torch', 'mindspore') if m in sys.modules]; "
        "print(loaded); sys.exit(1 if loaded else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, f"import compat imported {result.stdout}"


def test_collective_before_init_raises_not_initialized() -> None:
    torch = pytest.importorskip("torch")
    assert not compat.is_initialized()
    tensor = torch.ones(3)
    with pytest.raises(compat.NotInitializedError, match=r"call compat\.init"):
        compat.all_reduce(tensor)
    with pytest.raises(compat.NotInitializedError):
        compat.get_rank()
    assert tensor.tolist() == [1.0, 1.0, 1.0]


def test_init_single_process_world_and_destroy() -> None:
    torch = pytest.importorskip("torch")
    compat.init("torch")
    try:
        assert (compat.get_rank(), compat.get_world_size(), compat.get_backend()) == (0, 1, "gloo")
        with pytest.raises(RuntimeError, match="already initialised"):
            compat.init("torch")
        # torch's init_process_group called twice raises ValueError: code catching it runs the same.
        with pytest.raises(ValueError, match="already initialised"):
            compat.init("torch")
        tensor = torch.tensor([1.0, 2.0])
        assert compat.reduce_scatter_tensor(tensor).tolist() == [1.0, 2.0]
    finally:
        compat.destroy()
    assert not compat.is_initialized()


def test_init_takes_the_other_frameworks_name_for_the_cpu_backend() -> None:
    """A script ported from MindSpore (or to it) names the CPU backend as its framework does."""
    pytest.importorskip("torch")
    compat.init("torch", backend="mccl")
    try:
        assert compat.get_backend() == "gloo"
    finally:
        compat.destroy()


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"framework": "jax"}, ValueError, "framework: expected one of ['torch', 'mindspore']"),
        ({"framework": "torch", "backend": "cpu:"}, ValueError, "backend: expected a backend name"),
        ({"framework": "torch", "timeout": -1}, ValueError, "timeout: expected a positive"),
    ],
)
def test_init_rejects_bad_arguments(kwargs: dict, error: type, fragment: str) -> None:
    with pytest.raises(error) as info:
        compat.init(**kwargs)
    assert fragment in str(info.value)
    assert not compat.is_initialized()


def test_wheel_ships_adapters_and_tables(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = tmp_path.glob("collective_compat-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "compat/adapters/torch.py" in names
    assert "compat/adapters/mindspore/adapter.py" in names
    assert "compat/tools/bench_cases/torch.py" in names
    assert "compat/py.typed" in names
    assert "compat/tools/cli.py" in names and "compat/tools/port/_cst.py" in names
    # every module of the package (a new folder must be listed in pyproject's packages)
    for module in (ROOT / "compat").rglob("*.py"):
        assert f"compat/{module.relative_to(ROOT / 'compat').as_posix()}" in names, module
    for table in (ROOT / "mapping_tables").glob("*.toml"):
        assert f"compat/mapping_tables/{table.name}" in names
    assert not any(name.startswith("adapters/") for name in names), "adapters must not be top-level"


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The compat modules ``path`` imports, at any level (a lazy import closes a cycle too),
    except those for type hints only (``if TYPE_CHECKING:``), which never run."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hints_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hints_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules
            found |= submodules or {node.module}
    return found & modules


def test_no_import_cycles() -> None:
    files = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for path in (ROOT / "compat").rglob("*.py")
    }
    files |= {
        ".".join(("compat", *path.relative_to(ROOT).with_suffix("").parts)).removesuffix(
            ".__init__"
        ): path
        for path in (ROOT / "adapters").rglob("*.py")
    }
    graph = {name: _imports(path, set(files)) - {name} for name, path in files.items()}

    def cycle_from(start: str, path: list[str]) -> list[str] | None:
        for imported in sorted(graph[path[-1]]):
            if imported == start:
                return [*path, start]
            if imported not in path and imported > start:
                found = cycle_from(start, [*path, imported])
                if found:
                    return found
        return None

    cycles = [cycle for name in sorted(graph) if (cycle := cycle_from(name, [name]))]
    assert not cycles, [" -> ".join(cycle) for cycle in cycles]


def test_tables_load_from_the_package() -> None:
    assert set(tables.load("reduce_ops")["ops"]) == {op.value for op in compat.ReduceOp}
    assert "gloo" in tables.load("capabilities")
