"""compat's column of the mapping tables, checked against compat itself: every parameter claim of a
compat cell agrees with compat's signature (recorded, and checked against ``inspect.signature`` by
tests/test_tables.py), "No difference" only where both sides' recorded types, defaults and async
handles agree, and every behaviour compat's cells describe names the tests that check it."""

from __future__ import annotations

import ast
import copy
import re
import textwrap
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import compat
from compat.base import tables
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
            f"{where}: compat_param {row['compat_param']!r} is no parameter of "
            f"compat.{pair['compat']}"
        )
    if re.search(r"(?<!not )\brequired\b", text) and (own is None or own.default is not None):
        found.append(f"{where}: says required; compat.{pair['compat']} has {own and own.text()}")
    if "not offered" in text and own is not None:
        found.append(f"{where}: says not offered; compat.{pair['compat']} has {own.text()}")
    for match in re.finditer(r"keyword-only (\w+)|\b(\w+)= \(keyword", text):
        name = match.group(1) or match.group(2)
        if name not in params or not params[name].keyword_only:
            found.append(
                f"{where}: says {name} is keyword-only; compat.{pair['compat']} has "
                f"{params.get(name)}"
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
def _definitions(path: str) -> dict[str, str]:
    """The source of every function (nested ones too: rank cases) and module-level assignment
    of test file ``path``, by name."""
    text = (ROOT / path).read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = ast.get_source_segment(text, node) or ""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            found.setdefault(node.targets[0].id, ast.get_source_segment(text, node) or "")
    return found


def _linked_source(path: str, function: str) -> str:
    """The linked function's source, with the source of what it names from its own file (the
    helpers it calls, the scripts it runs)."""
    definitions = _definitions(path)
    linked, waiting = {function}, [function]
    while waiting:  # what it names, and what they name (a job spec, then the script it runs)
        tree = ast.parse(textwrap.dedent(definitions[waiting.pop()]))
        named = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        for name in sorted(named & definitions.keys() - linked):
            linked.add(name)
            waiting.append(name)
    return "\n".join(definitions[name] for name in [function, *sorted(linked - {function})])


#: Words of a parameter's compat cell that describe behaviour (what compat returns, its handle, a
#: group's order or answers), not only the parameter.
BEHAVIOUR = re.compile(r"\bWork\b|\breturns?\b|\border\b|\bsorted\b|rank\(\)|size\(\)")

#: Rank cases that check every collective of capabilities.toml (what the runtime runs is the
#: table's choice), so they name none: the link for a cell that says what the table chooses.
TABLE_WIDE = {
    "tests/ranks/algorithm_cases.py::case_choice",
    "tests/ranks/algorithm_cases.py::case_choice_by_group_size",
}


def _subjects(pair: dict[str, Any], row: dict[str, Any], path: str) -> set[str]:
    """The names of which a test that checks the row must mention one: the compat function's
    (a port fixture calls torch's; without one, torch's: what compat lacks) and those the cell
    names as compat.NAME."""
    cell_names = re.findall(r"\bcompat\.([\w.]*\w)", row["compat"])
    names = {name.rsplit(".", 1)[-1] for name in cell_names}
    if "compat" in pair:
        names.add(pair["compat"].rsplit(".", 1)[-1])
    if "compat" not in pair or path.startswith("tests/port_fixtures/"):
        names.add(pair["torch"].rsplit(".", 1)[-1])
    return names


def _link_problems(where: str, pair: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """A compat cell that describes behaviour (every behaviour or return row's, except one that
    only names the compat function to use; a parameter's with BEHAVIOUR's words) names the
    tests that check it; each exists and mentions what the cell is about."""
    if "compat" not in row or row["compat"] == pair.get("compat"):
        return []
    if row["kind"] == "param" and ("compat" not in pair or not BEHAVIOUR.search(row["compat"])):
        return []
    if not row.get("checked_by"):
        return [f"{where}: compat's cell describes behaviour; checked_by names no test"]
    found = []
    for link in row["checked_by"]:
        path, _, function = link.partition("::")
        if not (ROOT / path).is_file() or function not in _definitions(path):
            found.append(f"{where}: checked_by {link!r}: no such test")
            continue
        subjects = _subjects(pair, row, path)
        source = _linked_source(path, function)
        mentioned = any(re.search(rf"(?<!\w){re.escape(name)}(?!\w)", source) for name in subjects)
        if subjects and link not in TABLE_WIDE and not mentioned:
            found.append(f"{where}: checked_by {link!r} never mentions {sorted(subjects)}")
    return found


def problems(family: dict[str, Any]) -> list[str]:
    """Every disagreement between ``family``'s compat column and compat."""
    found: list[str] = []
    for index, pair in enumerate(family["pairs"]):
        for row_index, row in enumerate(pair["rows"]):
            where = (
                f"api_{family['family']}.toml pairs[{index}] "
                f"({pair['torch']} -> {pair['mindspore']}) rows[{row_index}]"
            )
            found += _no_difference_problems(where, pair, row, family["apis"])
            found += _link_problems(where, pair, row)
            if row["kind"] == "param" and "compat" in pair:
                found += _param_problems(where, pair, row, family)
    return found


@pytest.mark.parametrize("name", list(FAMILIES))
def test_compat_column_agrees_with_compat(name: str) -> None:
    assert problems(FAMILIES[name]) == []


def _pair(
    family: dict[str, Any], torch: str, mindspore: str, compat: str | None = None
) -> dict[str, Any]:
    """The pair of torch's and MindSpore's API (the one compat maps to ``compat``, where given:
    torch's new_group has two, compat.new_group and the port's compat.new_framework_group)."""
    return next(
        p
        for p in family["pairs"]
        if (p["torch"], p["mindspore"]) == (torch, mindspore) and compat in (None, p.get("compat"))
    )


def _row(pair: dict[str, Any], side: str, name: str) -> dict[str, Any]:
    return next(r for r in pair["rows"] if r["kind"] == "param" and r.get(side) == name)


def _put_back(mistake: str) -> dict[str, Any]:
    """A copy of the family the mistake was in, with the mistake as it was."""
    if mistake.startswith("new_group"):
        family = copy.deepcopy(FAMILIES["new_group"])
        pair = _pair(
            family,
            "torch.distributed.new_group",
            "mindspore.mint.distributed.new_group",
            compat="new_group",
        )
        if mistake == "new_group ranks required":
            _row(pair, "torch", "ranks")["compat"] = "ranks, required"
        elif mistake == "new_group timeout not offered":
            _row(pair, "torch", "timeout")["compat"] = "not offered"
        elif mistake == "new_group keeps the given order":
            row = _row(pair, "torch", "sort_ranks")
            row["compat"] = "not offered; Group.ranks keeps the given order"
            del row["checked_by"]
        else:  # rank() and size() said not to apply to a compat.Group, with no test behind it
            row = next(r for r in pair["rows"] if r.get("topic") == "result")
            del row["checked_by"]
        return family
    if mistake == "broadcast src required":
        family = copy.deepcopy(FAMILIES["broadcast"])
        pair = _pair(family, "torch.distributed.broadcast", "mindspore.mint.distributed.broadcast")
        _row(pair, "torch", "src")["compat"] = "src, required, a global rank"
        return family
    if mistake == "autograd broadcast linked to an all_reduce test":
        family = copy.deepcopy(FAMILIES["autograd"])
        pair = _pair(
            family,
            "torch.distributed.nn.functional.broadcast",
            "mindspore.ops.Broadcast",
            compat="autograd.broadcast",
        )
        row = next(r for r in pair["rows"] if r.get("topic") == "backward")
        row["checked_by"] = ["tests/ranks/autograd_cases.py::case_all_reduce"]
        return family
    if mistake == "all_to_all async_op no difference":
        family = copy.deepcopy(FAMILIES["all_to_all"])
        pair = _pair(
            family, "torch.distributed.all_to_all", "mindspore.mint.distributed.all_to_all"
        )
        _row(pair, "torch", "async_op")["difference"] = "No difference"
        return family
    name, param = mistake.split()[:2]  # "<family> <param> no difference": an _into pair's row
    family = copy.deepcopy(FAMILIES[name])
    into = {"reduce_scatter": "reduce_scatter_into", "all_gather": "all_gather_into"}[name]
    pair = next(p for p in family["pairs"] if p.get("compat") == into)
    _row(pair, "torch", param)["difference"] = "No difference"
    return family


MISTAKES = [
    "new_group ranks required",
    "new_group timeout not offered",
    "new_group keeps the given order",
    "new_group rank() and size() do not apply",
    "broadcast src required",
    "all_to_all async_op no difference",
    "reduce_scatter group no difference",
    "reduce_scatter op no difference",
    "all_gather group no difference",
    "autograd broadcast linked to an all_reduce test",
]


@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_mistake_the_tables_made_is_found_when_put_back(mistake: str) -> None:
    assert problems(_put_back(mistake)), mistake


@pytest.mark.parametrize("name", ["band", "bor", "bxor"])
def test_compat_has_bitwise_reduce_ops(name: str) -> None:
    """What the reduce_op table's bitwise row says: compat.ReduceOp has BAND, BOR and BXOR,
    spelled as compat's member, the string or torch's member; integer and bool dtypes only
    (the rank cases tests/ranks/bitwise_cases.py and bad_input[bitwise_on_float] run them)."""
    import torch.distributed as dist

    from compat.base import tables
    from compat.base.types import parse_op

    member = compat.ReduceOp[name.upper()]
    for given in (member, name, name.upper(), getattr(dist.ReduceOp, name.upper())):
        assert parse_op(given) is member
    assert tables.lookup("reduce_ops", "ops", name, "integer_only") is True
    assert "mindspore" not in tables.lookup("reduce_ops", "ops", name)


def test_compat_has_no_premul_sum() -> None:
    """What the reduce_op table's premul_sum row says: compat.ReduceOp has no PREMUL_SUM, and
    compat refuses it (spelled as a string or as torch's member) naming op."""
    import torch.distributed as dist

    from compat.base.types import parse_op

    assert "PREMUL_SUM" not in compat.ReduceOp.__members__
    for given in ("premul_sum", dist.ReduceOp.PREMUL_SUM):
        with pytest.raises(ValueError, match=r"^op: expected a compat\.ReduceOp"):
            parse_op(given)
