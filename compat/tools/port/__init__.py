"""``compat port``: find the uses of ``torch.distributed`` and ``torch.cuda.comm`` in Python
files, rewrite those compat can take without changing what the program does, and report the
rest with the reason and what to do by hand.

Every fact about an API (its parameters, their order and defaults, its MindSpore and compat
counterparts, how their results differ) comes from the mapping tables
(``mapping_tables/api_*.toml``, read in :mod:`._model`); this package holds only the rules. Names
are resolved as Python will bind them (:mod:`._names` reads the files star imports come from);
the rewrite (:mod:`._cst`) uses libcst, an optional dependency (``pip install
'collective-compat[port]'``) imported when a file is ported, so that formatting and comments are
preserved. The rules are listed in docs/porting.md.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from compat.tools.port._model import HINTS, PORTED_MODULES, FileResult, Finding, PortError

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


def run(
    paths: Sequence[str],
    write: bool = False,
    diff: bool = False,
    check: bool = False,
    as_json: bool = False,
    verbose: bool = False,
) -> int:
    """The ``compat port`` command: the report (and the diff); with ``write``, rewrite the files.

    Exit status: 0; 1 with ``check`` when a file would change or a use is left on torch; 2 when
    a file cannot be read or parsed.
    """
    results, errors = _port_all(paths)
    writes = write and not (diff or check)
    for result in results:
        if result.changed and writes:
            Path(result.path).write_text(result.rewritten, encoding="utf-8")
    if as_json:
        print(json.dumps(report_json(results, errors), indent=1))
    else:
        for error in errors:
            print(f"compat port: {error}", file=sys.stderr)
        for result in results:
            if diff and result.changed:
                print(result.diff(), end="")
        print(report_text(results, [], written=writes, verbose=verbose))
    if errors:
        return 2
    if check and any(r.changed or any(not f.rewritten for f in r.findings) for r in results):
        return 1
    return 0


def _port_all(paths: Sequence[str]) -> tuple[list[FileResult], list[str]]:
    """Each Python file's result, and the files that could not be read or parsed."""
    results: list[FileResult] = []
    errors: list[str] = []
    for path in python_files(paths):
        try:
            results.append(port_file(path))
        except (OSError, UnicodeDecodeError, PortError) as exc:
            errors.append(str(exc))
    return results, errors


def _counts(findings: Sequence[Finding]) -> tuple[int, int, int]:
    rewritten = sum(f.rewritten for f in findings)
    return len(findings), rewritten, len(findings) - rewritten


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _left_by_reason(findings: Sequence[Finding]) -> list[tuple[str | None, int]]:
    """The uses left on torch, counted per reason, the most frequent first."""
    return Counter(f.category for f in findings if not f.rewritten).most_common()


def report_text(
    results: Sequence[FileResult], errors: Sequence[str], written: bool, verbose: bool = False
) -> str:
    """Per file: its counts and each use left on torch (every use with ``verbose``); then the
    totals and the reasons grouped, each with what to do by hand."""
    lines: list[str] = [f"compat port: {error}" for error in errors]
    for result in results:
        if result.findings:
            lines += _file_lines(result, verbose)
    everything = [f for r in results for f in r.findings]
    uses, rewritten, left = _counts(everything)
    calls, calls_rewritten, _ = _counts([f for f in everything if f.call])
    changed = sum(r.changed for r in results)
    action = "rewrote" if written else "would rewrite"
    lines.append(
        f"compat port: {len(results)} files, {uses} uses of torch.distributed/torch.cuda.comm: "
        f"{rewritten} rewritten ({_share(rewritten, uses)}), {left} left; {action} {changed} "
        "files"
    )
    lines.append(
        f"  of them {calls} call sites: {calls_rewritten} rewritten "
        f"({_share(calls_rewritten, calls)})"
    )
    for category, count in _left_by_reason(everything):
        hint = HINTS.get(category or "", "")
        lines.append(f"  {count:4d} left: {category}: {hint}")
    return "\n".join(lines)


def _file_lines(result: FileResult, verbose: bool) -> list[str]:
    """One file's part of the report: its counts, the uses left on torch (every use with
    ``verbose``) and its notes."""
    uses, rewritten, left = _counts(result.findings)
    lines = [f"{result.path}: {uses} uses, {rewritten} rewritten, {left} left"]
    lines += ["  " + found.text() for found in result.findings if verbose or not found.rewritten]
    lines += [f"  note: {note}" for note in result.notes]
    return lines


def report_json(results: Sequence[FileResult], errors: Sequence[str]) -> dict[str, object]:
    everything = [f for r in results for f in r.findings]
    uses, rewritten, left = _counts(everything)
    calls, calls_rewritten, calls_left = _counts([f for f in everything if f.call])
    files = []
    for result in results:
        file_uses, file_rewritten, file_left = _counts(result.findings)
        files.append(
            {
                "path": result.path,
                "uses": file_uses,
                "rewritten": file_rewritten,
                "left": file_left,
                "changed": result.changed,
                "notes": result.notes,
                "findings": [f.as_json() for f in result.findings],
            }
        )
    return {
        "files": files,
        "errors": list(errors),
        "total": {"files": len(results), "uses": uses, "rewritten": rewritten, "left": left},
        "call_sites": {"calls": calls, "rewritten": calls_rewritten, "left": calls_left},
        "left_by_reason": dict(_left_by_reason(everything)),
    }
