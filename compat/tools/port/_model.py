"""What ``compat port`` knows and reports, without libcst: the torch APIs the mapping tables pair
with compat and MindSpore (their signatures, counterparts and differences), and the findings."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from compat import tables

# The torch modules whose calls are ported.
PORTED_MODULES = ("torch.distributed", "torch.cuda.comm")
# Where torch defines what torch.distributed re-exports.
ALIASES = {"torch.distributed.distributed_c10d.": "torch.distributed."}
# Output-buffer form -> compat's functional form: torch's parameter -> compat's.
RENAMES = {"output": "out", "input": "tensor", "output_tensor": "out", "input_tensor": "tensor"}
# The reduce_op table's behaviour rows worth repeating at a use of a member.
REDUCE_OP_TOPICS = {"PRODUCT": ("type", "product")}
# compat.init takes only these of init_process_group's arguments; the rest are dropped (reported):
# the launcher's environment and the device choose rendezvous, rank, world size and backend.
INIT_KEEPS = ("timeout",)


class PortError(Exception):
    """A file that cannot be ported (not Python, or libcst is missing)."""


@dataclass
class Finding:
    """One use of a torch API in a file."""

    path: str
    line: int
    written: str  # the callee as written, e.g. "dist.reduce_scatter_tensor"
    torch: str  # its qualified name, e.g. "torch.distributed.reduce_scatter_tensor"
    compat: str | None = None  # e.g. "compat.reduce_scatter_tensor"; None: no counterpart
    mindspore: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # arguments the rewrite leaves out
    reason: str | None = None  # why it is not rewritten (None: rewritten)

    @property
    def rewritten(self) -> bool:
        return self.reason is None

    def text(self) -> str:
        where = f"{self.path}:{self.line}: {self.written}"
        ms = f" (MindSpore: {' / '.join(self.mindspore)})" if self.mindspore else ""
        if self.reason is not None:
            return f"{where} -> not rewritten: {self.reason}{ms}"
        parts = [f"{where} -> {self.compat}{ms}"]
        if self.dropped:
            parts.append("dropped: " + "; ".join(self.dropped))
        if self.differences:
            parts.append("differences: " + " ".join(self.differences))
        return "; ".join(parts)


@dataclass
class FileResult:
    path: str
    source: str
    rewritten: str
    findings: list[Finding]

    @property
    def changed(self) -> bool:
        return self.source != self.rewritten

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.source.splitlines(keepends=True),
                self.rewritten.splitlines(keepends=True),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            )
        )


# -- the tables ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Params:
    """A signature: parameter names in order, which are keyword-only, and their defaults."""

    names: tuple[str, ...]
    keyword_only: frozenset[str]
    defaults: dict[str, str]  # source text of each default

    @property
    def required(self) -> list[str]:
        return [name for name in self.names if name not in self.defaults]


def parse_signature(signature: str) -> Params:
    # Table signatures are str(inspect.signature(...)): defaults like <RedOpType.SUM: 0> are
    # not Python; the defaults' text matters only for comparing with literal arguments.
    text = re.sub(r"<[^<>]*>", "None", signature)
    tree = ast.parse(f"def f{text}: pass")
    args = tree.body[0].args  # type: ignore[attr-defined]
    positional = [*args.posonlyargs, *args.args]
    defaults = {
        arg.arg: ast.unparse(value)
        for arg, value in zip(
            positional[len(positional) - len(args.defaults) :], args.defaults, strict=True
        )
    }
    for arg, value in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if value is not None:
            defaults[arg.arg] = ast.unparse(value)
    names = tuple(arg.arg for arg in [*positional, *args.kwonlyargs])
    return Params(names, frozenset(arg.arg for arg in args.kwonlyargs), defaults)


@dataclass(frozen=True)
class Api:
    torch: str
    family: str
    params: Params | None  # None: not a function (ReduceOp)
    compat: str  # compat name, e.g. "reduce_scatter_tensor", "comm.scatter"
    compat_params: Params | None
    pairs: tuple[dict[str, Any], ...]


@cache
def apis() -> dict[str, Api]:
    """Every torch API with a pair in the tables, by qualified name."""
    found: dict[str, Api] = {}
    for table in tables.families():
        by_torch: dict[str, list[dict[str, Any]]] = {}
        for pair in table.get("pairs", []):
            if "torch" in pair:
                by_torch.setdefault(pair["torch"], []).append(pair)
        for name, pairs in by_torch.items():
            short = name.rsplit(".", 1)[1]
            # The pair whose compat function has the torch name (reduce_scatter ->
            # reduce_scatter, not reduce_scatter_tensor), else the first.
            chosen = next((p for p in pairs if p["compat"].split(".")[-1] == short), pairs[0])
            entry = table["apis"].get(name, {})
            signature = entry.get("signature")
            compat_entry = table.get("compat", {}).get(chosen["compat"], {})
            compat_signature = compat_entry.get("signature")
            found[name] = Api(
                torch=name,
                family=table["family"],
                params=parse_signature(signature) if signature else None,
                compat=chosen["compat"],
                compat_params=parse_signature(compat_signature) if compat_signature else None,
                pairs=(chosen, *(p for p in pairs if p is not chosen)),
            )
    return found


def mindspore_names(api: Api) -> list[str]:
    names: list[str] = []
    for pair in api.pairs:
        if pair.get("mindspore") and pair["mindspore"] not in names:
            names.append(pair["mindspore"])
    return names


def differences(api: Api, passed: Iterable[str], topics: Iterable[str] | None = None) -> list[str]:
    """The chosen pair's rows for the parameters passed, and its behaviour rows (those of
    ``topics`` if given)."""
    passed = set(passed)
    wanted = None if topics is None else set(topics)
    out: list[str] = []
    for row in api.pairs[0].get("rows", []):
        text = row.get("difference", "")
        if not text or text == "No difference":
            continue
        if row["kind"] == "behaviour" and wanted is not None and row.get("topic") not in wanted:
            continue
        if row["kind"] == "param" and row.get("torch") in passed:
            extra = f" (compat: {row['compat']})" if row.get("compat") else ""
            out.append(f"{row['torch']}: {text}{extra}")
        elif row["kind"] == "behaviour":
            out.append(f"{row.get('topic', 'behaviour')}: {text}")
    return out


def row_text(api: Api, param: str) -> str:
    for row in api.pairs[0].get("rows", []):
        if row["kind"] == "param" and row.get("torch") == param:
            text: str = row.get("compat") or row.get("difference", "")
            return text
    return ""


def qualified(name: str) -> str:
    for prefix, replacement in ALIASES.items():
        if name.startswith(prefix):
            return replacement + name[len(prefix) :]
    return name


def ported(name: str) -> bool:
    return any(name == module or name.startswith(module + ".") for module in PORTED_MODULES)
