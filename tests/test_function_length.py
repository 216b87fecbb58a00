"""Every public function of the package reads at a glance: at most 30 code lines (its docstring,
comments and blank lines not counted), the way the API's functions are a spec, checks, then one
call. Longer work lives in named private steps."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOST_LINES = 30


def _code_lines(source: str) -> set[int]:
    """The lines holding a token of code (not a comment, not only indentation)."""
    skipped = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skipped and token.type != tokenize.ENDMARKER:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines


def _docstring_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    first = function.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):
            return set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return set()


def _long_public_functions(path: Path) -> list[str]:
    source = path.read_text()
    code = _code_lines(source)
    found = []

    def visit(node: ast.AST, public: bool, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                span = set(range(child.lineno, (child.end_lineno or child.lineno) + 1))
                count = len((span & code) - _docstring_lines(child))
                if public and not child.name.startswith("_") and count > MOST_LINES:
                    found.append(f"{path.relative_to(ROOT)}:{child.lineno} {prefix}{child.name}")
            elif isinstance(child, ast.ClassDef):
                visit(child, public and not child.name.startswith("_"), f"{child.name}.")

    visit(ast.parse(source), True, "")
    return found


def test_no_public_function_is_longer_than_30_code_lines() -> None:
    long = [
        entry
        for folder in ("compat", "adapters")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for entry in _long_public_functions(path)
    ]
    assert not long, f"public functions over {MOST_LINES} code lines:\n" + "\n".join(long)
