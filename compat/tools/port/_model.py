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

from compat.base import tables

# The torch modules whose calls are ported.
PORTED_MODULES = ("torch.distributed", "torch.cuda.comm")
# Other spellings of the same torch names, by prefix: where torch defines what torch.distributed
# re-exports, and torch.distributed.nn, which re-exports torch.distributed.nn.functional.
ALIASES = {
    "torch.distributed.distributed_c10d.": "torch.distributed.",
    "torch._C._distributed_c10d.": "torch.distributed.",
    "torch.distributed.nn.functional.": "torch.distributed.nn.functional.",
    "torch.distributed.nn.api.": "torch.distributed.nn.functional.",
    "torch.distributed.nn.": "torch.distributed.nn.functional.",
    # DTensor's names compat.tensor has, by their other spellings (torch's old _tensor package,
    # the modules that define them); the rest of torch.distributed.tensor stays outside scope
    "torch.distributed._tensor.placement_types.": "torch.distributed.tensor.",
    "torch.distributed._tensor.api.": "torch.distributed.tensor.",
    "torch.distributed._tensor.": "torch.distributed.tensor.",
    "torch.distributed.tensor.placement_types.": "torch.distributed.tensor.",
    "torch.distributed.tensor._api.": "torch.distributed.tensor.",
    # tensor parallelism's names compat.tensor.parallel has, by the modules that define them
    "torch.distributed.tensor.parallel.api.": "torch.distributed.tensor.parallel.",
    "torch.distributed.tensor.parallel.style.": "torch.distributed.tensor.parallel.",
    # the mesh's two names compat has (the rest of device_mesh stays outside compat's scope)
    "torch.distributed.device_mesh.init_device_mesh": "torch.distributed.init_device_mesh",
    "torch.distributed.device_mesh.DeviceMesh": "torch.distributed.DeviceMesh",
}
# Output-buffer form -> compat's functional form: torch's parameter -> compat's.
RENAMES = {
    "output": "out",
    "input": "tensor",
    "output_tensor": "out",
    "input_tensor": "tensor",
    "self": "tensor",  # funcol
    "reduceOp": "op",  # funcol
    "gather_dim": "dim",  # funcol
    "scatter_dim": "dim",  # funcol
    "rank": "group_rank",  # _get_global_rank
}
# The reduce_op table's behaviour rows worth repeating at a use of a member.
REDUCE_OP_TOPICS = {"PRODUCT": ("type", "product")}

# Why a use is left on torch: category -> what to do by hand. The report groups by category.
HINTS = {
    "no counterpart": "keep it on torch (the file then still imports torch.distributed) or "
    "replace it by hand with compat calls",
    "argument": "compat has no such parameter: drop it if it is a default or a hint, else keep "
    "the call on torch",
    "unpacked arguments": "pass the arguments by name, or check that compat's function takes "
    "every one of them, then rewrite by hand",
    "result": "compat returns something else here: rewrite by hand where the result is used",
    "async": "with async_op, compat's functional form returns (tensor, Work) where torch returns "
    "a Work: rewrite by hand",
    "reference": "compat's object does not stand in for torch's here (a function of another "
    "signature, or a type compat replaces in annotations only): call compat's function where "
    "this name is called, or keep torch's type",
    "inside a torch call": "an argument of a call left on torch stays torch's: port that call "
    "first",
    "reduce op": "compat.ReduceOp lacks this member: keep the call on torch",
    "differentiable op": "with this op compat.autograd's function is not torch's (it refuses "
    "the op, or its backward differs): keep the call on torch, or reduce a copy in place with "
    "compat.all_reduce, which takes every op",
    "inside a torch block": "the block's context manager stays on torch and acts on the torch "
    "calls made in it (_coalescing_manager batches them): port the block by hand",
    "compiled": "torch.compile(fullgraph=True) captures torch's collectives, not compat's: keep "
    "the function on torch, or drop fullgraph (compat's calls then run between graphs)",
    "kept for torch": "compat takes torch's value as it is: it goes once the uses left on torch "
    "(or the other module it is passed to) are ported",
    "patched": "the file replaces torch.distributed's functions: keep the functions it wraps or "
    "compares with on torch (compat calls torch's, which then run the replacements)",
    "shared name": "the file binds this name to another library's module too (`import "
    "deepspeed.comm as dist` beside `import torch.distributed as dist`): give each its own name, "
    "then port the uses that are torch's",
}


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
    category: str | None = None  # the reason's key in HINTS
    assumed: str | None = None  # what name resolution assumed to find this use
    call: bool = False  # a call site (else a reference, an attribute, an annotation)

    @property
    def rewritten(self) -> bool:
        return self.reason is None

    def leave(self, category: str, reason: str) -> None:
        """Mark the use as left on torch, for ``reason`` (grouped under ``category``)."""
        self.category = category
        self.reason = reason

    @property
    def hint(self) -> str:
        return HINTS.get(self.category or "", "")

    def as_json(self) -> dict[str, object]:
        return {
            "line": self.line,
            "written": self.written,
            "call": self.call,
            "torch": self.torch,
            "compat": self.compat,
            "rewritten": self.rewritten,
            "category": self.category,
            "reason": self.reason,
            "hint": self.hint if self.reason else None,
            "mindspore": self.mindspore,
            "differences": self.differences,
            "dropped": self.dropped,
            "assumed": self.assumed,
        }

    def text(self) -> str:
        where = f"{self.path}:{self.line}: {self.written}"
        ms = f" (MindSpore: {' / '.join(self.mindspore)})" if self.mindspore else ""
        assumed = f" (assumed {self.assumed})" if self.assumed else ""
        if self.reason is not None:
            return f"{where} -> not rewritten: {self.reason}{ms}{assumed}"
        parts = [f"{where} -> {self.compat}{ms}{assumed}"]
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
    notes: list[str] = field(default_factory=list)  # what name resolution could not know

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
    result: str | None = None  # how compat's result differs from torch's; None: the same
    template: str | None = None  # the compat expression written for a call (schema.py: PAIR)

    @property
    def drop_in(self) -> bool:
        """compat's function takes every call torch's takes, by position and by name, and
        returns the same: a reference to it can replace a reference to torch's."""
        if self.result is not None or self.params is None or self.compat_params is None:
            return False
        torch_positional = [n for n in self.params.names if n not in self.params.keyword_only]
        compat_positional = [
            n for n in self.compat_params.names if n not in self.compat_params.keyword_only
        ]
        return compat_positional[: len(torch_positional)] == torch_positional and set(
            self.params.names
        ) <= set(self.compat_params.names)


@cache
def candidates() -> dict[str, tuple[Api, ...]]:
    """Every torch API with a pair in the tables, by qualified name: the compat functions a use
    can become, in the order the port tries them. First the pair marked ``port = true``, else
    the one whose compat function has the torch name (reduce_scatter -> reduce_scatter, not
    reduce_scatter_tensor); then the other pairs (a drop-in form where the first returns
    something else)."""
    found: dict[str, tuple[Api, ...]] = {}
    for table in tables.families():
        by_torch: dict[str, list[dict[str, Any]]] = {}
        for pair in table.get("pairs", []):
            if "torch" in pair and pair.get("compat"):
                by_torch.setdefault(pair["torch"], []).append(pair)
        for name, pairs in by_torch.items():
            short = name.rsplit(".", 1)[1]
            pairs.sort(
                key=lambda p: (not p.get("port"), p["compat"].split(".")[-1] != short)
            )  # stable: the tables' order otherwise
            found[qualified(name)] = _options(table, name, pairs)
    return found


def _options(table: dict[str, Any], name: str, pairs: list[dict[str, Any]]) -> tuple[Api, ...]:
    """One Api per compat function the pairs of torch's ``name`` name, in the pairs' order."""
    signature = table["apis"].get(name, {}).get("signature")
    options: list[Api] = []
    for pair in pairs:
        if any(option.compat == pair["compat"] for option in options):
            continue
        compat_signature = table.get("compat", {}).get(pair["compat"], {}).get("signature")
        options.append(
            Api(
                torch=name,
                family=table["family"],
                params=parse_signature(signature) if signature else None,
                compat=pair["compat"],
                compat_params=parse_signature(compat_signature) if compat_signature else None,
                pairs=(pair, *(p for p in pairs if p is not pair)),
                result=pair.get("result"),
                template=pair.get("template"),
            )
        )
    return tuple(options)


def apis() -> dict[str, Api]:
    """The first of :func:`candidates` of each torch API."""
    return _first()


@cache
def _first() -> dict[str, Api]:
    return {name: options[0] for name, options in candidates().items()}


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


def no_counterpart(name: str) -> str:
    """Why a use of torch's ``name`` stays on torch: compat has nothing for it, and the reason
    mapping_tables/left_out.toml records where it records one."""
    reason = _left_out().get(name)
    return f"compat has no counterpart of {name}" + (f" ({reason})" if reason else "")


def left_out_names() -> set[str]:
    """The names mapping_tables/left_out.toml records as left out, with their module."""
    return set(_left_out())


@cache
def _left_out() -> dict[str, str]:
    return {
        f"{entry['module']}.{name}": entry["reason"]
        for entry in tables.load("left_out").get("left_out", [])
        for name in entry["names"]
    }


def qualified(name: str) -> str:
    """torch's name for ``name``: the first of :data:`ALIASES` that prefixes it, replaced."""
    for prefix, replacement in ALIASES.items():
        if name.startswith(prefix):
            return replacement + name[len(prefix) :]
    return name


def ported(name: str) -> bool:
    return any(name == module or name.startswith(module + ".") for module in PORTED_MODULES)
