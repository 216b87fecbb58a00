"""docs/port_corpus.tsv, the public files `compat port` is measured on: every row names a corpus,
a repository, a commit and a path; a held-out corpus shares no repository with the corpora
before it (it measures code the rules were not built on), and docs/porting.md reports each."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def rows() -> list[list[str]]:
    lines = (DOCS / "port_corpus.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t") for line in lines if line and not line.startswith("#")]


def test_every_row_names_a_corpus_repository_commit_and_path() -> None:
    bad = [
        row
        for row in rows()
        if len(row) != 4
        or not re.fullmatch(r"development|held_out(_\d+)?", row[0])
        or not re.fullmatch(r"[\w.-]+/[\w.-]+", row[1])
        or not re.fullmatch(r"[0-9a-f]{7,40}", row[2])
        or not row[3].endswith(".py")
    ]
    assert bad == []
    assert len({(row[1], row[3]) for row in rows()}) == len(rows()), "a file listed twice"


def test_a_held_out_corpus_shares_no_repository_with_the_corpora_before_it() -> None:
    seen: dict[str, str] = {}  # repository (case-folded) -> the corpus it first appears in
    shared = []
    for corpus, repository, _, _ in rows():
        first = seen.setdefault(repository.lower(), corpus)
        if first != corpus:
            shared.append((repository, first, corpus))
    assert shared == []


def test_porting_md_reports_every_corpus() -> None:
    text = (DOCS / "porting.md").read_text(encoding="utf-8")
    missing = sorted({row[0] for row in rows()} - set(re.findall(r"\w+", text)))
    assert missing == []
