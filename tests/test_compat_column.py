"""compat's column of the mapping tables, checked against compat itself: every parameter claim of a
compat cell agrees with compat's signature (recorded, and checked against ``inspect.signature`` by
tests/test_tables.py), "No difference" only where both sides' recorded types, defaults and async
handles agree, and every behaviour compat's cells describe names the tests that check it."""

from __future__ import annotations

import ast
import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from compat import tables
from compat.tools import docs

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = {family["family"]: family for family in tables.families()}

#: What an API returns with async_op=True, read from its recorded ``returns``.
HANDLES = ("CommHandle", "Work")


def _handle(api: dict[str, Any]) -> str | None:
    return next((handle for handle in HANDLES if handle in api["returns"]), None)


def _param_problems(
    where: str, pair: dict[str, Any], row: dict[str, Any], family: dict[str, Any]
) -> list[str]:
    """What a param row's compat cell says about compat's parameters that its signature denies."""
    params = docs.parse_signature(family["compat"][pair["compat"]].get("signature", "()"))
    own = docs.compat_param(pair, row, family)
    text = row.get("compat", "")
    found = []
    if row.get("compat_param") and row["compat_param"] not in params:
        found.append(
            f"{where}: compat_param {row['compat_param']!r} is no parameter of compat.{pair['compat']}"
        )
    if re.search(r"(?<!not )\brequired\b", text) and (own is None or own.default is not None):
        found.append(f"{where}: says required; compat.{pair['compat']} has {own and own.text()}")
    if "not offered" in text and own is not None:
        found.append(f"{where}: says not offered; compat.{pair['compat']} has {own.text()}")
    for match in re.finditer(r"keyword-only (\w+)|\b(\w+)= \(keyword", text):
        name = match.group(1) or match.group(2)
        if name not in params or not params[name].keyword_only:
            found.append(
                f"{where}: says {name} is keyword-only; compat.{pair['compat']}{family['compat'][pair['compat']]['signature']}"
            )
    for match in re.finditer(
        r"\b(\w+)=(\S+?) by default|\b(\w+)= \(keyword-only, default (\S+?)\)", text
    ):
        name, value = (
            (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        )
        if name not in params or params[name].default != value:
            found.append(f"{where}: says {name} defaults to {value}; compat has {params.get(name)}")
    return found


def _no_difference_problems(
    where: str, pair: dict[str, Any], row: dict[str, Any], apis: dict[str, Any]
) -> list[str]:
    """A row may say "No difference" only where both sides record the same type and default (and,
    for async_op, the same handle)."""
    if not row["difference"].startswith("No difference") or row["kind"] != "param":
        return []
    sides = {
        side: apis[pair[side]].get("params", {}).get(row.get(side, ""), {})
        for side in ("torch", "mindspore")
    }
    facts = {side: (param.get("type"), param.get("default")) for side, param in sides.items()}
    found = []
    if not all(sides.values()) or facts["torch"] != facts["mindspore"]:
        found.append(f"{where}: says No difference; recorded (type, default): {facts}")
    if row.get("torch") == "async_op":
        handles = {side: _handle(apis[pair[side]]) for side in ("torch", "mindspore")}
        if handles["torch"] != handles["mindspore"]:
            found.append(f"{where}: says No difference for async_op; the handles are {handles}")
    return found


@cache
def _test_functions(path: str) -> frozenset[str]:
    """Every function defined in test file ``path`` (nested ones too: rank cases)."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    )


def _link_problems(where: str, row: dict[str, Any]) -> list[str]:
    """A behaviour or return row with a compat cell names the tests that check it, which exist."""
    if row["kind"] == "param" or "compat" not in row:
        return []
    if not row.get("checked_by"):
        return [f"{where}: compat's cell describes behaviour; checked_by names no test"]
    found = []
    for link in row["checked_by"]:
        path, _, function = link.partition("::")
        if not (ROOT / path).is_file() or function not in _test_functions(path):
            found.append(f"{where}: checked_by {link!r}: no such test")
    return found


def problems(family: dict[str, Any]) -> list[str]:
    """Every disagreement between ``family``'s compat column and compat."""
    found: list[str] = []
    for index, pair in enumerate(family["pairs"]):
        for row_index, row in enumerate(pair["rows"]):
            where = f"api_{family['family']}.toml pairs[{index}] ({pair['torch']} -> {pair['mindspore']}) rows[{row_index}]"
            found += _no_difference_problems(where, pair, row, family["apis"])
            found += _link_problems(where, row)
            if row["kind"] == "param" and "compat" in pair:
                found += _param_problems(where, pair, row, family)
    return found


@pytest.mark.parametrize("name", list(FAMILIES))
def test_compat_column_agrees_with_compat(name: str) -> None:
    assert problems(FAMILIES[name]) == []
