"""``compat port``: find ``torch.distributed`` and ``torch.cuda.comm`` calls in Python files,
report their compat and MindSpore counterparts, and rewrite them to compat calls.

Every fact about an API (its parameters, their order and defaults, its MindSpore counterparts and
how the parameters differ) comes from the mapping tables (``mapping_tables/api_*.toml``, through
:mod:`compat.tables`, read in :mod:`._model`); this package holds only the rewriting rules. The
rewriting (:mod:`._cst`) uses libcst, an optional dependency (``pip install
collective-compat[port]``) imported when a file is ported, so that formatting and comments are
preserved and imports are resolved however they are aliased
(``import torch.distributed as dist``, ``from torch.distributed import reduce_scatter as rs``,
``from torch import distributed``, ``import torch.cuda.comm as comm``, ...).

What is rewritten: calls whose torch API has a pair in the tables and whose every argument has a
compat parameter (renamed where compat's functional form differs: ``output`` -> ``out=``,
``input`` -> ``tensor``); ``ReduceOp.X`` -> ``compat.ReduceOp.X``; ``hasattr(dist, "name")`` ->
``hasattr(compat, "name")``. Everything else is reported with the reason. ``import compat`` is
added after the other imports; a ``torch.distributed``/``torch.cuda.comm`` import with no use left
is removed (``import torch`` is kept).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from compat.tools.port._model import PORTED_MODULES, FileResult, Finding, PortError

__all__ = [
    "PORTED_MODULES",
    "FileResult",
    "Finding",
    "PortError",
    "port_file",
    "port_source",
    "python_files",
    "run",
]


def port_source(source: str, path: str = "<string>") -> FileResult:
    """Port one file's text: the findings and the rewritten text (== source if nothing changed)."""
    try:
        from compat.tools.port import _cst
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] != "libcst":
            raise
        raise PortError(
            "compat port needs libcst: pip install 'collective-compat[port]' (or libcst)"
        ) from None
    return _cst.port_source(source, path)


# -- files and the command ---------------------------------------------------------------------


def python_files(paths: Sequence[str | Path]) -> Iterator[Path]:
    for path in map(Path, paths):
        if path.is_dir():
            yield from sorted(
                p for p in path.rglob("*.py") if not any(part.startswith(".") for part in p.parts)
            )
        else:
            yield path


def port_file(path: str | Path) -> FileResult:
    text = Path(path).read_text(encoding="utf-8")
    return port_source(text, str(path))


def run(paths: Sequence[str], write: bool = False, diff: bool = False) -> int:
    """The ``compat port`` command: print the report (and the diff); with ``write``, rewrite."""
    files = 0
    rewritten = 0
    remaining = 0
    failed = False
    for path in python_files(paths):
        try:
            result = port_file(path)
        except (OSError, UnicodeDecodeError, PortError) as exc:
            print(f"compat port: {exc}")
            failed = True
            continue
        for found in result.findings:
            print(found.text())
            rewritten += found.rewritten
            remaining += not found.rewritten
        if result.changed:
            files += 1
            if diff:
                print(result.diff(), end="")
            elif write:
                Path(path).write_text(result.rewritten, encoding="utf-8")
    action = "rewrote" if write and not diff else "can rewrite"
    print(
        f"compat port: {action} {rewritten} uses in {files} files; {remaining} not rewritten "
        "(the reasons are above)"
    )
    return 1 if failed else 0
