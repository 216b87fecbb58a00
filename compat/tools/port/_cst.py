"""The rewrite of ``compat port``, on libcst's concrete syntax trees (formatting and comments kept).

Imported only when a file is ported (:func:`compat.tools.port.port_source`), so that ``import
compat`` and the rest of the CLI never import libcst, an optional dependency.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst
from libcst.metadata import (
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    ScopeProvider,
)

from compat.tools.port._model import (
    INIT_KEEPS,
    PORTED_MODULES,
    REDUCE_OP_TOPICS,
    RENAMES,
    Api,
    FileResult,
    Finding,
    Params,
    PortError,
    apis,
    differences,
    mindspore_names,
    ported,
    qualified,
    row_text,
)
from compat.types import ReduceOp

_REDUCE_OP = "torch.distributed.ReduceOp."


def port_source(source: str, path: str) -> FileResult:
    """Port one file's text: the findings and the rewritten text (== source if nothing changed)."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise PortError(f"{path}: not valid Python: {exc}") from None
    rewriter = Rewriter(path)
    new_module = MetadataWrapper(module).visit(rewriter)
    findings = sorted(rewriter.findings, key=lambda f: f.line)
    if rewriter.changes:
        new_module = fix_imports(new_module)
    return FileResult(path, source, new_module.code, findings)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _dotted(name: str) -> cst.Name | cst.Attribute:
    """``"compat.ReduceOp.SUM"`` as an expression."""
    first, *rest = name.split(".")
    node: cst.Name | cst.Attribute = cst.Name(first)
    for part in rest:
        node = cst.Attribute(node, cst.Name(part))
    return node


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _has_comment(comma: cst.Comma | cst.MaybeSentinel) -> bool:
    """Whether a comment follows the comma on its line."""
    if not isinstance(comma, cst.Comma):
        return False
    after = comma.whitespace_after
    return isinstance(after, cst.ParenthesizedWhitespace) and after.first_line.comment is not None


class Rewriter(cst.CSTTransformer):
    """Finds the uses of the ported torch modules and rewrites those compat can take.

    ``findings`` is the report (one per use); ``changes`` counts the rewrites.
    """

    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider, ParentNodeProvider)

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.findings: list[Finding] = []
        self.changes = 0
        self._callees: set[int] = set()
        self._handled: set[int] = set()
        self._unported: set[int] = set()  # ReduceOp members compat lacks

    # -- helpers

    def _name_of(self, node: cst.CSTNode) -> str | None:
        """The qualified name of ``node`` if it is in a ported module (or is ``hasattr``)."""
        try:
            names = self.get_metadata(QualifiedNameProvider, node, set())
        except KeyError:
            return None
        for name in names:
            full = qualified(name.name)
            if ported(full) or full == "builtins.hasattr":
                return full
        return None

    def _finding(
        self,
        node: cst.CSTNode,
        torch: str,
        written: str,
        *,
        compat: str | None = None,
        mindspore: list[str] | None = None,
        differences: list[str] | None = None,
        reason: str | None = None,
    ) -> Finding:
        line = self.get_metadata(PositionProvider, node).start.line
        found = Finding(
            self.path,
            line,
            written,
            torch,
            compat=compat,
            mindspore=mindspore or [],
            differences=differences or [],
            reason=reason,
        )
        self.findings.append(found)
        return found

    # -- imports are not uses

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        self._callees.add(id(node.func))

    # -- ReduceOp.X and bare references

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        return self._reference(original_node, updated_node)

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return self._reference(original_node, updated_node)

    def _reference(
        self, original: cst.Name | cst.Attribute, updated: cst.Name | cst.Attribute
    ) -> cst.BaseExpression:
        """A name that is not called: a ReduceOp member is rewritten, anything else reported."""
        if id(original) in self._callees or id(original) in self._handled:
            return updated
        name = self._name_of(original)
        if name is None or name == "builtins.hasattr":
            return updated
        parent = self.get_metadata(ParentNodeProvider, original, None)
        if isinstance(parent, cst.Attribute) and parent.value is original:
            return updated  # part of a longer name: handled at the longest
        if name.startswith(_REDUCE_OP):
            member = name[len(_REDUCE_OP) :].removeprefix("RedOpType.")
            return self._reduce_op(original, updated, member)
        if name in PORTED_MODULES:
            return updated  # the module itself (hasattr(dist, ...) is handled there)
        api = apis().get(name)
        self._finding(
            original,
            name,
            _code(original),
            compat=f"compat.{api.compat}" if api else None,
            mindspore=mindspore_names(api) if api else [],
            reason="referenced without a call; rewrite it by hand",
        )
        return updated

    def _reduce_op(
        self, original: cst.Name | cst.Attribute, updated: cst.BaseExpression, member: str
    ) -> cst.BaseExpression:
        api = apis().get("torch.distributed.ReduceOp")
        ms = mindspore_names(api) if api else []
        torch_name = f"{_REDUCE_OP}{member}"
        if member not in ReduceOp.__members__:
            self._unported.add(id(original))
            self._finding(
                original,
                torch_name,
                _code(original),
                mindspore=ms,
                reason=f"compat.ReduceOp has no {member} (it has "
                f"{', '.join(ReduceOp.__members__)})",
            )
            return updated
        topics = REDUCE_OP_TOPICS.get(member, ("type",))
        self._finding(
            original,
            torch_name,
            _code(original),
            compat=f"compat.ReduceOp.{member}",
            mindspore=ms,
            differences=differences(api, (), topics) if api else [],
        )
        self.changes += 1
        return _dotted(f"compat.ReduceOp.{member}")

    # -- calls

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = self._name_of(original_node.func)
        if name is None:
            return updated_node
        if name == "builtins.hasattr":
            return self._hasattr(original_node, updated_node)
        if name.startswith("torch.distributed.ReduceOp"):
            return updated_node
        written = _code(original_node.func)
        api = apis().get(name)
        if api is None or api.params is None or api.compat_params is None:
            self._finding(
                original_node,
                name,
                written,
                reason=f"compat has no counterpart of {name} (no pair in the mapping tables)",
            )
            return updated_node
        found = self._finding(
            original_node,
            name,
            written,
            compat=f"compat.{api.compat}",
            mindspore=mindspore_names(api),
        )
        return self._rewrite(api, api.params, api.compat_params, original_node, updated_node, found)

    def _hasattr(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """``hasattr(dist, "name")`` -> ``hasattr(compat, "compat_name")``."""
        args = original.args
        if len(args) != 2 or not isinstance(args[1].value, cst.SimpleString):
            return updated
        module = self._name_of(args[0].value)
        if module not in PORTED_MODULES:
            return updated
        self._handled.add(id(args[0].value))
        string = args[1].value
        torch_name = f"{module}.{string.evaluated_value!s}"
        written = f"hasattr({_code(args[0].value)}, {string.value})"
        api = apis().get(torch_name)
        if api is None:
            self._finding(
                original,
                torch_name,
                written,
                reason=f"compat has no counterpart of {torch_name}; the check stays on torch",
            )
            return updated
        target = api.compat.rsplit(".", 1)
        owner = "compat" if len(target) == 1 else f"compat.{target[0]}"
        renamed = f"{string.prefix}{string.quote}{target[-1]}{string.quote}"
        self._finding(original, torch_name, written, compat=f"hasattr({owner}, {renamed})")
        self.changes += 1
        new_args = [
            updated.args[0].with_changes(value=_dotted(owner)),
            updated.args[1].with_changes(value=cst.SimpleString(renamed)),
        ]
        return updated.with_changes(args=new_args)

    def _rewrite(
        self,
        api: Api,
        params: Params,
        target: Params,
        original: cst.Call,
        updated: cst.Call,
        found: Finding,
    ) -> cst.Call:
        """The compat call for a torch call, or ``updated`` with ``found.reason`` saying why not."""
        bound = self._bind(api, params, updated, found)
        if bound is None:
            return updated
        found.differences = differences(api, bound)
        bad = [_code(n) for n in _walk(original) if id(n) in self._unported]
        if bad:
            found.reason = f"compat has no {', '.join(bad)}"
            return updated
        mapped = self._map(api, params, target, bound, found)
        if mapped is None:
            return updated
        if "out" in mapped and "async_op" in mapped and _code(mapped["async_op"].value) != "False":
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
        ordered = _ordered(target, mapped)
        return updated.with_changes(
            func=_dotted(f"compat.{api.compat}"), args=_with_commas(ordered, updated.args)
        )

    def _bind(
        self, api: Api, params: Params, call: cst.Call, found: Finding
    ) -> dict[str, cst.Arg] | None:
        """The call's arguments by torch's parameter (from the tables' signature); None (and
        ``found.reason``) if they cannot be matched."""
        bound: dict[str, cst.Arg] = {}
        positional = [n for n in params.names if n not in params.keyword_only]
        for index, arg in enumerate(call.args):
            if arg.star:
                found.reason = f"*args/**kwargs ({_code(arg)}) cannot be matched to parameters"
                return None
            if arg.keyword is None:
                if index >= len(positional):
                    found.reason = f"more positional arguments than {api.torch} takes"
                    return None
                bound[positional[index]] = arg
            elif arg.keyword.value in params.names:
                bound[arg.keyword.value] = arg
            else:
                found.reason = f"{api.torch} has no parameter {arg.keyword.value}"
                return None
        return bound

    def _map(
        self,
        api: Api,
        params: Params,
        target: Params,
        bound: dict[str, cst.Arg],
        found: Finding,
    ) -> dict[str, cst.Arg] | None:
        """The bound arguments by compat's parameter; what compat does without is dropped (and
        reported); None (and ``found.reason``) if an argument has no compat parameter."""
        mapped: dict[str, cst.Arg] = {}
        is_init = api.compat == "init"
        for param, arg in bound.items():
            value = _code(arg.value)
            if is_init and param not in INIT_KEEPS:
                found.dropped.append(
                    f"{param}={value} (compat.init takes it from the launcher's "
                    "environment and the device)"
                )
                continue
            renamed = RENAMES.get(param)
            if param in target.names:
                mapped[param] = arg
            elif renamed is not None and renamed in target.names:
                mapped[renamed] = arg
            elif params.defaults.get(param) == value:
                found.dropped.append(f"{param}={value} (torch's default)")
            else:
                why = row_text(api, param)
                found.reason = f"compat.{api.compat} has no {param}" + (f" ({why})" if why else "")
                return None
        return mapped


def _ordered(target: Params, mapped: dict[str, cst.Arg]) -> list[cst.Arg]:
    """The arguments in compat's parameter order: positional while they can be, then keywords
    (``name=value``, spelled as compat names the parameter)."""
    ordered: list[cst.Arg] = []
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
    return ordered


def _with_commas(ordered: list[cst.Arg], written: Sequence[cst.Arg]) -> list[cst.Arg]:
    """Commas for the reordered arguments. An argument keeps its comma (and the comment after
    it); the last one takes the call's closing (trailing comma, line break before the
    parenthesis); an argument that had none takes the comma written at its position."""
    commas = [arg.comma for arg in written]
    closing: cst.Comma | cst.MaybeSentinel = commas[-1] if commas else cst.MaybeSentinel.DEFAULT
    result = []
    for index, arg in enumerate(ordered):
        own = arg.comma
        comma: cst.Comma | cst.MaybeSentinel
        if index == len(ordered) - 1:
            comma = closing
            if _has_comment(own) and isinstance(own, cst.Comma) and isinstance(closing, cst.Comma):
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


# -- imports -------------------------------------------------------------------------------------


def fix_imports(module: cst.Module) -> cst.Module:
    """Remove torch.distributed / torch.cuda.comm imports with no use left; add ``import compat``
    after the last top-level import if it is missing."""
    wrapper = MetadataWrapper(module)
    pruner = ImportPruner(_unused_imports(wrapper))
    module = wrapper.module.visit(pruner)
    if pruner.has_compat:
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
    body.insert(last + 1, cst.parse_statement("import compat\n"))
    return module.with_changes(body=body)


def _unused_imports(wrapper: MetadataWrapper) -> set[tuple[int, str]]:
    """(id of the import node, bound name) of each ported-module import nothing refers to."""
    scopes = wrapper.resolve(ScopeProvider)
    unused: set[tuple[int, str]] = set()
    for scope in set(scopes.values()):
        if scope is None:
            continue
        for assignment in scope.assignments:
            node = getattr(assignment, "node", None)
            if not isinstance(node, (cst.Import, cst.ImportFrom)) or assignment.references:
                continue
            names = {q.name for q in scope.get_qualified_names_for(assignment.name)}
            if any(ported(qualified(name)) for name in names):
                unused.add((id(node), assignment.name))
    return unused


def _bound_name(alias: cst.ImportAlias) -> str:
    """The name an import alias binds: ``as`` name, else the first part of the dotted name."""
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return _code(alias.name).split(".")[0]


class ImportPruner(cst.CSTTransformer):
    """Drops the ``unused`` names from imports (the import if none is left) and notes whether
    ``import compat`` is there."""

    def __init__(self, unused: set[tuple[int, str]]) -> None:
        super().__init__()
        self.unused = unused
        self.has_compat = False

    def _prune(
        self, original: cst.Import | cst.ImportFrom, updated: cst.Import | cst.ImportFrom
    ) -> cst.Import | cst.ImportFrom | cst.RemovalSentinel:
        if isinstance(updated.names, cst.ImportStar):
            return updated
        kept = [a for a in updated.names if (id(original), _bound_name(a)) not in self.unused]
        if len(kept) == len(updated.names):
            return updated
        if not kept:
            return cst.RemoveFromParent()
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(names=kept)

    def leave_Import(
        self, original_node: cst.Import, updated_node: cst.Import
    ) -> cst.Import | cst.ImportFrom | cst.RemovalSentinel:
        if any(_code(a.name) == "compat" and a.asname is None for a in updated_node.names):
            self.has_compat = True
        return self._prune(original_node, updated_node)

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.Import | cst.ImportFrom | cst.RemovalSentinel:
        return self._prune(original_node, updated_node)
