"""Comments and docstrings in the package say why, and link to docs for figures: none holds a
measurement (a time, a ratio "measured", "this machine"). The figures live in docs/performance.md
and in ``compat bench``'s output; their history in git."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What a measurement in prose looks like: the word, a duration in micro/milli/nanoseconds, a
#: bandwidth, or the machine it was taken on.
MEASUREMENT = re.compile(
    r"\bmeasured\b|\bmeasurements?\b|\d\s?(us|µs|ns|ms)\b|\d\s?[KMG]B/s\b|GB/s|this machine|"
    r"\d-core\b",
    re.IGNORECASE,
)


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each comment and string that stands alone as a statement (docstrings)."""
    found = []
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    for index, token in enumerate(tokens):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string))
        elif token.type == tokenize.STRING and token.string.lstrip("rbuf").startswith('"""'):
            before = tokens[index - 1].type if index else tokenize.NEWLINE
            if before in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
                found.append((token.start[0], token.string))
    return found


def test_no_comment_or_docstring_holds_a_measurement() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r}"
        for folder in ("compat", "adapters")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, text in _prose(path)
        for match in [MEASUREMENT.search(text)]
        if match
    ]
    assert not hits, f"{len(hits)} comments or docstrings hold figures:\n" + "\n".join(hits)
