"""``compat port``: find ``torch.distributed`` and ``torch.cuda.comm`` calls in Python files,
report their compat and MindSpore counterparts, and rewrite them to compat calls.

Every fact about an API (its parameters, their order and defaults, its MindSpore counterparts and
how the parameters differ) comes from the mapping tables (``mapping_tables/api_*.toml``, through
:mod:`compat.tables`); this module holds only the rewriting rules. The rewriting uses libcst, an
optional dependency (``pip install collective-compat[port]``) imported when a file is ported, so
that formatting and comments are preserved and imports are resolved however they are aliased
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

import ast
import difflib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from compat import tables

# The torch modules whose calls are ported.
PORTED_MODULES = ("torch.distributed", "torch.cuda.comm")
# Where torch defines what torch.distributed re-exports.
_ALIASES = {"torch.distributed.distributed_c10d.": "torch.distributed."}
# Output-buffer form -> compat's functional form: torch's parameter -> compat's.
_RENAMES = {"output": "out", "input": "tensor", "output_tensor": "out", "input_tensor": "tensor"}
# The reduce_op table's behaviour rows worth repeating at a use of a member.
_REDUCE_OP_TOPICS = {"PRODUCT": ("type", "product")}
# compat.init takes only these of init_process_group's arguments; the rest are dropped (reported):
# the launcher's environment and the device choose rendezvous, rank, world size and backend.
_INIT_KEEPS = ("timeout",)


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


# -- the tables --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Params:
    """A signature: parameter names in order, which are keyword-only, and their defaults."""

    names: tuple[str, ...]
    keyword_only: frozenset[str]
    defaults: dict[str, str]  # source text of each default

    @property
    def required(self) -> list[str]:
        return [name for name in self.names if name not in self.defaults]


def _parse_signature(signature: str) -> _Params:
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
    return _Params(names, frozenset(arg.arg for arg in args.kwonlyargs), defaults)


@dataclass(frozen=True)
class _Api:
    torch: str
    family: str
    params: _Params | None  # None: not a function (ReduceOp)
    compat: str  # compat name, e.g. "reduce_scatter_tensor", "comm.scatter"
    compat_params: _Params | None
    pairs: tuple[dict[str, Any], ...]


@cache
def _apis() -> dict[str, _Api]:
    """Every torch API with a pair in the tables, by qualified name."""
    found: dict[str, _Api] = {}
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
            found[name] = _Api(
                torch=name,
                family=table["family"],
                params=_parse_signature(signature) if signature else None,
                compat=chosen["compat"],
                compat_params=_parse_signature(compat_signature) if compat_signature else None,
                pairs=(chosen, *(p for p in pairs if p is not chosen)),
            )
    return found


def _mindspore_names(api: _Api) -> list[str]:
    names: list[str] = []
    for pair in api.pairs:
        if pair.get("mindspore") and pair["mindspore"] not in names:
            names.append(pair["mindspore"])
    return names


def _differences(
    api: _Api, passed: Iterable[str], topics: Iterable[str] | None = None
) -> list[str]:
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


def _row(api: _Api, param: str) -> str:
    for row in api.pairs[0].get("rows", []):
        if row["kind"] == "param" and row.get("torch") == param:
            text: str = row.get("compat") or row.get("difference", "")
            return text
    return ""


def _qualified(name: str) -> str:
    for prefix, replacement in _ALIASES.items():
        if name.startswith(prefix):
            return replacement + name[len(prefix) :]
    return name


def _ported(name: str) -> bool:
    return any(name == module or name.startswith(module + ".") for module in PORTED_MODULES)


# -- the rewrite -------------------------------------------------------------------------------


def _libcst() -> Any:
    try:
        import libcst
    except ImportError:
        raise PortError(
            "compat port needs libcst: pip install 'collective-compat[port]' (or libcst)"
        ) from None
    return libcst


def port_source(source: str, path: str = "<string>") -> FileResult:
    """Port one file's text: the findings and the rewritten text (== source if nothing changed)."""
    cst = _libcst()
    from libcst import metadata

    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise PortError(f"{path}: not valid Python: {exc}") from None
    wrapper = metadata.MetadataWrapper(module)
    transformer = _make_transformer(cst, metadata, path)
    new_module = wrapper.visit(transformer)
    findings = sorted(transformer.findings, key=lambda f: f.line)
    if transformer.changes:
        new_module = _fix_imports(cst, metadata, new_module)
    return FileResult(path, source, new_module.code, findings)


def _walk(node: Any) -> Iterator[Any]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _make_transformer(cst: Any, metadata: Any, path: str) -> Any:
    qualified_names = metadata.QualifiedNameProvider
    positions = metadata.PositionProvider
    parents = metadata.ParentNodeProvider

    def code(node: Any) -> str:
        return str(cst.Module([]).code_for_node(node))

    def dotted(name: str) -> Any:
        node: Any = None
        for part in name.split("."):
            node = cst.Name(part) if node is None else cst.Attribute(node, cst.Name(part))
        return node

    class Transformer(cst.CSTTransformer):  # type: ignore[misc]
        METADATA_DEPENDENCIES = (qualified_names, positions, parents)

        def __init__(self) -> None:
            super().__init__()
            self.findings: list[Finding] = []
            self.changes = 0
            self._callees: set[int] = set()
            self._handled: set[int] = set()
            self._unported: set[int] = set()  # ReduceOp members compat lacks

        # -- helpers
        def name_of(self, node: Any) -> str | None:
            try:
                names = self.get_metadata(qualified_names, node, set())
            except KeyError:
                return None
            for qualified in names:
                full = _qualified(qualified.name)
                if _ported(full) or full == "builtins.hasattr":
                    return full
            return None

        def line(self, node: Any) -> int:
            return int(self.get_metadata(positions, node).start.line)

        def finding(self, node: Any, torch: str, written: str, **kwargs: Any) -> Finding:
            found = Finding(path, self.line(node), written, torch, **kwargs)
            self.findings.append(found)
            return found

        # -- imports are not uses
        def visit_Import(self, node: Any) -> bool:
            return False

        def visit_ImportFrom(self, node: Any) -> bool:
            return False

        def visit_Call(self, node: Any) -> None:
            self._callees.add(id(node.func))

        # -- ReduceOp.X and bare references
        def leave_Attribute(self, original: Any, updated: Any) -> Any:
            return self._reference(original, updated)

        def leave_Name(self, original: Any, updated: Any) -> Any:
            return self._reference(original, updated)

        def _reference(self, original: Any, updated: Any) -> Any:
            if id(original) in self._callees or id(original) in self._handled:
                return updated
            name = self.name_of(original)
            if name is None or name == "builtins.hasattr":
                return updated
            parent = self.get_metadata(parents, original, None)
            if isinstance(parent, cst.Attribute) and parent.value is original:
                return updated  # part of a longer name: handled at the longest
            prefix = "torch.distributed.ReduceOp."
            if name.startswith(prefix):
                member = name[len(prefix) :].removeprefix("RedOpType.")
                return self._reduce_op(original, updated, member)
            if name in PORTED_MODULES:
                return updated  # the module itself (hasattr(dist, ...) is handled there)
            api = _apis().get(name)
            self.finding(
                original,
                name,
                code(original),
                compat=f"compat.{api.compat}" if api else None,
                mindspore=_mindspore_names(api) if api else [],
                reason="referenced without a call; rewrite it by hand",
            )
            return updated

        def _reduce_op(self, original: Any, updated: Any, member: str) -> Any:
            from compat.types import ReduceOp

            api = _apis().get("torch.distributed.ReduceOp")
            ms = _mindspore_names(api) if api else []
            torch_name = f"torch.distributed.ReduceOp.{member}"
            if member not in ReduceOp.__members__:
                self._unported.add(id(original))
                self.finding(
                    original,
                    torch_name,
                    code(original),
                    mindspore=ms,
                    reason=f"compat.ReduceOp has no {member} (it has "
                    f"{', '.join(ReduceOp.__members__)})",
                )
                return updated
            self.finding(
                original,
                torch_name,
                code(original),
                compat=f"compat.ReduceOp.{member}",
                mindspore=ms,
                differences=_differences(api, (), _REDUCE_OP_TOPICS.get(member, ("type",)))
                if api
                else [],
            )
            self.changes += 1
            return dotted(f"compat.ReduceOp.{member}")

        # -- calls
        def leave_Call(self, original: Any, updated: Any) -> Any:
            name = self.name_of(original.func)
            if name is None:
                return updated
            if name == "builtins.hasattr":
                return self._hasattr(original, updated)
            if name.startswith("torch.distributed.ReduceOp"):
                return updated
            written = code(original.func)
            api = _apis().get(name)
            if api is None or api.params is None or api.compat_params is None:
                self.finding(
                    original,
                    name,
                    written,
                    reason=f"compat has no counterpart of {name} (no pair in the mapping tables)",
                )
                return updated
            found = self.finding(
                original,
                name,
                written,
                compat=f"compat.{api.compat}",
                mindspore=_mindspore_names(api),
            )
            return self._rewrite(api, original, updated, found)

        def _hasattr(self, original: Any, updated: Any) -> Any:
            args = original.args
            if len(args) != 2 or not isinstance(args[1].value, cst.SimpleString):
                return updated
            module = self.name_of(args[0].value)
            if module not in PORTED_MODULES:
                return updated
            self._handled.add(id(args[0].value))
            attribute = args[1].value.evaluated_value
            torch_name = f"{module}.{attribute}"
            written = f"hasattr({code(args[0].value)}, {args[1].value.value})"
            api = _apis().get(torch_name)
            if api is None:
                self.finding(
                    original,
                    torch_name,
                    written,
                    reason=f"compat has no counterpart of {torch_name}; the check stays on torch",
                )
                return updated
            target = api.compat.rsplit(".", 1)
            owner = "compat" if len(target) == 1 else f"compat.{target[0]}"
            string = args[1].value
            prefix, quote = string.prefix, string.quote
            renamed = f"{prefix}{quote}{target[-1]}{quote}"
            self.finding(original, torch_name, written, compat=f"hasattr({owner}, {renamed})")
            self.changes += 1
            new_args = [
                updated.args[0].with_changes(value=dotted(owner)),
                updated.args[1].with_changes(value=cst.SimpleString(renamed)),
            ]
            return updated.with_changes(args=new_args)

        def _rewrite(self, api: _Api, original: Any, updated: Any, found: Finding) -> Any:
            params, target = api.params, api.compat_params
            assert params is not None and target is not None
            # Bind the call's arguments to torch's parameters (from the tables' signature).
            bound: dict[str, Any] = {}
            positional = [n for n in params.names if n not in params.keyword_only]
            for index, arg in enumerate(updated.args):
                if arg.star:
                    found.reason = f"*args/**kwargs ({code(arg)}) cannot be matched to parameters"
                    return updated
                if arg.keyword is None:
                    if index >= len(positional):
                        found.reason = f"more positional arguments than {api.torch} takes"
                        return updated
                    bound[positional[index]] = arg
                elif arg.keyword.value in params.names:
                    bound[arg.keyword.value] = arg
                else:
                    found.reason = f"{api.torch} has no parameter {arg.keyword.value}"
                    return updated
            found.differences = _differences(api, bound)
            bad = [code(n) for n in _walk(original) if id(n) in self._unported]
            if bad:
                found.reason = f"compat has no {', '.join(bad)}"
                return updated
            # Map each to compat's parameter.
            mapped: dict[str, Any] = {}
            is_init = api.compat == "init"
            for param, arg in bound.items():
                value = code(arg.value)
                if is_init and param not in _INIT_KEEPS:
                    found.dropped.append(
                        f"{param}={value} (compat.init takes it from the launcher's "
                        "environment and the device)"
                    )
                    continue
                if param in target.names:
                    mapped[param] = arg
                elif _RENAMES.get(param) in target.names:
                    mapped[_RENAMES[param]] = arg
                elif params.defaults.get(param) == value:
                    found.dropped.append(f"{param}={value} (torch's default)")
                else:
                    why = _row(api, param)
                    found.reason = f"compat.{api.compat} has no {param}" + (
                        f" ({why})" if why else ""
                    )
                    return updated
            if "out" in mapped and "async_op" in mapped:
                if code(mapped["async_op"].value) != "False":
                    found.reason = (
                        f"async_op: compat.{api.compat} then returns (tensor, Work) where torch "
                        "returns a Work; rewrite by hand"
                    )
                    return updated
            missing = [p for p in target.required if p not in mapped]
            if missing:
                found.reason = f"compat.{api.compat} needs {', '.join(missing)}, not given"
                return updated
            self.changes += 1
            return updated.with_changes(
                func=dotted(f"compat.{api.compat}"), args=self._arguments(updated, target, mapped)
            )

        def _arguments(self, updated: Any, target: _Params, mapped: dict[str, Any]) -> list[Any]:
            ordered: list[Any] = []
            keywords = False
            for param in target.names:
                if param not in mapped:
                    keywords = True
                    continue
                arg = mapped[param]
                if keywords or param in target.keyword_only or arg.keyword is not None:
                    keywords = True
                    if arg.keyword is None or arg.keyword.value != param:
                        arg = arg.with_changes(
                            keyword=cst.Name(param),
                            equal=cst.AssignEqual(
                                whitespace_before=cst.SimpleWhitespace(""),
                                whitespace_after=cst.SimpleWhitespace(""),
                            ),
                        )
                ordered.append(arg)
            # An argument keeps its comma (and the comment after it); the last one takes the
            # call's closing (trailing comma, line break before the parenthesis).
            commas = [arg.comma for arg in updated.args]
            closing = commas[-1] if commas else cst.MaybeSentinel.DEFAULT
            result = []
            for index, arg in enumerate(ordered):
                own = arg.comma
                if index == len(ordered) - 1:
                    comma = closing
                    if _has_comment(own) and isinstance(closing, cst.Comma):
                        after = closing.whitespace_after
                        if isinstance(after, cst.ParenthesizedWhitespace):
                            comma = own.with_changes(
                                whitespace_after=own.whitespace_after.with_changes(
                                    last_line=after.last_line
                                )
                            )
                elif isinstance(own, cst.Comma) and own is not closing:
                    comma = own
                elif isinstance(commas[index], cst.Comma):
                    comma = commas[index]
                else:
                    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                result.append(arg.with_changes(comma=comma))
            return result

    def _has_comment(comma: Any) -> bool:
        after = getattr(comma, "whitespace_after", None)
        return isinstance(after, cst.ParenthesizedWhitespace) and (
            after.first_line.comment is not None
        )

    return Transformer()


def _fix_imports(cst: Any, metadata: Any, module: Any) -> Any:
    """Remove torch.distributed / torch.cuda.comm imports with no use left; add ``import compat``
    after the last top-level import if it is missing."""
    wrapper = metadata.MetadataWrapper(module)
    scopes = wrapper.resolve(metadata.ScopeProvider)
    unused: set[tuple[int, str]] = set()  # (id(import node), bound name)
    for scope in set(scopes.values()):
        if scope is None:
            continue
        for assignment in scope.assignments:
            node = getattr(assignment, "node", None)
            if not isinstance(node, (cst.Import, cst.ImportFrom)) or assignment.references:
                continue
            qualified = {q.name for q in scope.get_qualified_names_for(assignment.name)}
            if any(_ported(_qualified(q)) for q in qualified):
                unused.add((id(node), assignment.name))

    def bound(alias: Any) -> str:
        if alias.asname is not None:
            return str(alias.asname.name.value)
        return str(cst.Module([]).code_for_node(alias.name)).split(".")[0]

    class Imports(cst.CSTTransformer):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.has_compat = False

        def _prune(self, original: Any, updated: Any) -> Any:
            if isinstance(updated.names, cst.ImportStar):
                return updated
            kept = [a for a in updated.names if (id(original), bound(a)) not in unused]
            if len(kept) == len(updated.names):
                return updated
            if not kept:
                return cst.RemoveFromParent()
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(names=kept)

        def leave_Import(self, original: Any, updated: Any) -> Any:
            if any(code_of(a.name) == "compat" and a.asname is None for a in updated.names):
                self.has_compat = True
            return self._prune(original, updated)

        def leave_ImportFrom(self, original: Any, updated: Any) -> Any:
            return self._prune(original, updated)

    def code_of(node: Any) -> str:
        return str(cst.Module([]).code_for_node(node))

    imports = Imports()
    module = wrapper.module.visit(imports)
    if imports.has_compat:
        return module
    body = list(module.body)
    last = -1
    for index, statement in enumerate(body):
        if isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
        ):
            last = index
    if last < 0:  # after the docstring, if any
        docstring = module.get_docstring() is not None
        last = 0 if docstring else -1
    line = cst.parse_statement("import compat\n")
    body.insert(last + 1, line)
    return module.with_changes(body=body)


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
