"""The rewrite of ``compat port``, on libcst's concrete syntax trees (formatting and comments kept).

Imported only when a file is ported (:func:`compat.tools.port.port_source`), so that ``import
compat`` and the rest of the CLI never import libcst, an optional dependency.

The rules, each for a way a rewrite could change what the program does:

- a call is rewritten only if every argument maps to a parameter of compat's function, its
  result is the same as torch's (or unused), and ``*args``/``**kwargs`` can only carry names
  compat's function takes under the same names;
- an argument of a call that stays on torch stays torch's (``ReduceOp.SUM``, ``group.WORLD``):
  torch rejects compat's objects;
- a name that is not called is rewritten where compat's object can stand in for torch's: a
  function whose compat counterpart takes the same arguments and returns the same, a function
  handed to ``P2POp``, ``group.WORLD``, and the types in annotations.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator, Sequence
from functools import cache

import libcst as cst
from libcst.metadata import (
    Assignment,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    QualifiedNameSource,
    ScopeProvider,
)

import compat
from compat import distributed as distributed_namespace
from compat.base.types import ReduceOp, parse_op
from compat.lifecycle import check_backend
from compat.tools.port._model import (
    PORTED_MODULES,
    REDUCE_OP_TOPICS,
    RENAMES,
    Api,
    FileResult,
    Finding,
    Params,
    PortError,
    apis,
    candidates,
    differences,
    left_out_names,
    mindspore_names,
    no_counterpart,
    ported,
    qualified,
    row_text,
)
from compat.tools.port._names import ASSUMED, StarNames, star_names

_REDUCE_OP = "torch.distributed.ReduceOp."
_P2POP = "torch.distributed.P2POp"
_FRAMEWORK_GROUP = "compat.framework_group()"
_SOURCES = (QualifiedNameSource.IMPORT, QualifiedNameSource.BUILTIN)
# The parameters through which torch's functions take a ReduceOp or a group.
_VALUE_PARAMS = frozenset({"op", "reduceOp", "group", "process_group", "pg"})


def port_source(source: str, path: str) -> FileResult:
    """Port one file's text: the findings and the rewritten text (== source if nothing changed)."""
    tree, module = _parse(source, path)
    stars = star_names(tree, path)
    rewriter = Rewriter(path, stars)
    new_module = MetadataWrapper(module).visit(rewriter)
    staying = [f"{found.written} (line {found.line})" for found in rewriter.receivers]
    staying += rewriter.sinks
    if staying and rewriter.values:
        # Part of the file stays on torch, and values flow through variables where no reading
        # of the text follows them: torch's ReduceOp members and group.WORLD, which compat
        # takes too, stay torch's so that the calls left on torch still get torch's objects.
        rewriter = Rewriter(path, stars, keep_values=staying[0])
        new_module = MetadataWrapper(module).visit(rewriter)
    findings = sorted(rewriter.findings, key=lambda f: f.line)
    if rewriter.changes:
        new_module = fix_imports(module, new_module)
    text = new_module.code
    if text != source:
        _check_compiles(text, path)
    return FileResult(path, source, text, findings, _notes(rewriter, stars, findings, path))


def _sets_reduce_op(target: cst.BaseExpression) -> bool:
    """``opts.reduceOp = ...``: the attribute of torch's option objects (AllreduceOptions and
    its kin, which compat has no counterpart of) that takes torch's ReduceOp only."""
    return isinstance(target, cst.Attribute) and target.attr.value == "reduceOp"


def _parse(source: str, path: str) -> tuple[ast.Module, cst.Module]:
    """Python's tree and libcst's, or a PortError saying where the text is not valid."""
    # Python's parser first: it says where the error is as an editor counts (line, column from
    # 1), where libcst's message names the position of the token after it.
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        where = f":{exc.lineno}:{exc.offset}" if exc.lineno and exc.offset else ""
        raise PortError(f"{path}{where}: not valid Python: {exc.msg}") from None
    except ValueError as exc:  # a NUL byte
        raise PortError(f"{path}: not valid Python: {exc}") from None
    try:
        return tree, cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        # Python parses it and libcst does not (syntax newer than libcst's grammar).
        at = f":{exc.editor_line}:{exc.editor_column}"
        raise PortError(f"{path}{at}: libcst cannot parse it: {exc.message}") from None


def _check_compiles(text: str, path: str) -> None:
    try:
        compile(text, path, "exec")
    except SyntaxError as exc:  # a bug of the rewriter, never the user's: say so, write nothing
        raise PortError(f"{path}: the rewrite does not compile ({exc}); please report it") from None


def _notes(rewriter: Rewriter, stars: StarNames, findings: list[Finding], path: str) -> list[str]:
    """The report's notes: uses of packages compat does not cover, and star imports assumed."""
    outside = [
        f"{count} uses of torch.distributed.{package} ({rewriter.outside_calls.get(package, 0)} of "
        "them calls), which compat does not cover (not counted)"
        for package, count in sorted(rewriter.outside.items())
    ]
    return outside + [
        f"from {name} import *: not found beside {path}; `torch` and `dist` were assumed to be "
        "torch and torch.distributed where the file uses them without binding them"
        for name in stars.unresolved
        if any(f.assumed for f in findings)
    ]


#: torch's _coalescing_manager, and the calls it collects (torch 2.13's names and their aliases).
_COALESCING = "torch.distributed._coalescing_manager"
_COLLECTED = frozenset(
    f"torch.distributed.{name}"
    for name in (
        "all_reduce",
        "all_gather_into_tensor",
        "all_gather_single",
        "reduce_scatter_tensor",
        "reduce_scatter_single",
    )
)


_OP_OWNERS = ("ReduceOp", "RedOpType")


def _literal_op(value: cst.BaseExpression) -> str | None:
    """The reduce op a literal names, upper-case (``"max"``, ``ReduceOp.MAX``, compat's or
    torch's): its compat.ReduceOp member where compat has one; None for a computed op."""
    if isinstance(value, cst.Attribute) and value.attr.value == "name":
        value = value.value  # `ReduceOp.MAX.name`: the member's name, a string
    if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
        name = value.evaluated_value
    elif isinstance(value, cst.Attribute) and _code(value.value).endswith(_OP_OWNERS):
        name = value.attr.value
    else:
        return None
    try:
        return parse_op(name).name
    except (TypeError, ValueError):
        return name.upper()


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _dotted(name: str) -> cst.Name | cst.Attribute:
    """``"compat.ReduceOp.SUM"`` as an expression."""
    first, *rest = name.split(".")
    node: cst.Name | cst.Attribute = cst.Name(first)
    for part in rest:
        node = cst.Attribute(node, cst.Name(part))
    return node


#: methods of Python's containers: a value passed to them is stored or returned, not used
_CONTAINER_METHODS = frozenset(
    name for kind in (dict, list, set) for name in dir(kind) if not name.startswith("_")
)


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _chain(node: cst.CSTNode) -> tuple[cst.Name, list[str]] | None:
    """``a.b.c`` -> (the Name ``a``, ["b", "c"]); None for anything but a dotted name."""
    attributes: list[str] = []
    while isinstance(node, cst.Attribute):
        attributes.insert(0, node.attr.value)
        node = node.value
    return (node, attributes) if isinstance(node, cst.Name) else None


def _has_comment(comma: cst.Comma | cst.MaybeSentinel) -> bool:
    """Whether a comment follows the comma on its line."""
    if not isinstance(comma, cst.Comma):
        return False
    after = comma.whitespace_after
    return isinstance(after, cst.ParenthesizedWhitespace) and after.first_line.comment is not None


def _compat_object(compat_name: str) -> object:
    """compat's object of that name; in a module that resolves its names per framework
    (compat.tensor), compat's own object, so the port neither chooses nor imports one."""
    target: object = compat
    for part in compat_name.split("."):
        own = getattr(target, "own_object", None)
        target = own(part) if callable(own) else getattr(target, part, None)
    return target


def _is_type(compat_name: str) -> bool:
    """Whether compat's object of that name is a class (used in annotations, not as a value)."""
    return isinstance(_compat_object(compat_name), type)


def _answers_isinstance(compat_name: str) -> bool:
    """Whether compat's class answers ``isinstance`` for the framework's own objects too (its
    metaclass says so: compat.Store and its kinds), so it can stand in for torch's there."""
    target = _compat_object(compat_name)
    return isinstance(target, type) and type(target).__instancecheck__ is not (
        type.__instancecheck__
    )


def _torchs_own(compat_name: str) -> bool:
    """Whether compat's name is torch's own object on torch (compat.tensor's names): then it
    stands for torch's everywhere (isinstance, subclasses, attributes, values)."""
    target: object = compat
    for part in compat_name.split(".")[:-1]:
        if callable(getattr(target, "own_object", None)):
            return True
        target = getattr(target, part, None)
    return callable(getattr(target, "own_object", None))


class Rewriter(cst.CSTTransformer):
    """Finds the uses of the ported torch modules and rewrites those compat can take.

    ``findings`` is the report (one per use); ``changes`` counts the rewrites.
    """

    METADATA_DEPENDENCIES = (
        QualifiedNameProvider,
        PositionProvider,
        ParentNodeProvider,
        ScopeProvider,
    )

    def __init__(
        self, path: str, stars: StarNames | None = None, keep_values: str | None = None
    ) -> None:
        super().__init__()
        self.path = path
        self.stars = stars or StarNames()
        #: a use left on torch, for which values compat and torch both take stay torch's
        self.keep_values = keep_values
        self.values = 0  # values (ReduceOp members, group.WORLD) rewritten
        self._value_nodes: set[int] = set()
        #: uses left on torch that may be handed those values through a variable
        self.receivers: list[Finding] = []
        #: attributes of torch's objects that take a ReduceOp (`opts.reduceOp = op`)
        self.sinks: list[str] = []
        self.findings: list[Finding] = []
        self.changes = 0
        self._callees: set[int] = set()
        self._handled: set[int] = set()
        self._unported: set[int] = set()  # ReduceOp members compat lacks
        #: variables holding a context manager of torch's that stays on torch -> how it is written
        self._torch_managers: dict[str, str] = {}
        self._by_node: dict[int, Finding] = {}  # the finding of each rewritten node
        self._aliases: dict[int, str] = {}  # `dist = torch.distributed`: target -> module
        self._assumed: str | None = None  # what the last _name_of assumed
        self._seen: set[int] = set()  # names reported as a whole
        #: uses of torch.distributed's other packages (DTensor, FSDP, ...), by package
        self.outside: dict[str, int] = {}
        #: of those, the calls (what the report's call-site count would include)
        self.outside_calls: dict[str, int] = {}
        #: the first assignment to a name of torch.distributed (`dist.get_rank = wrap(...)`)
        self._patch: str | None = None
        self._patched_names: set[str] = set()  # every torch name the file sets
        #: the ReduceOp members the file names anywhere (`ReduceOp.BAND`, `RedOpType.MAX`)
        self._named_ops: set[str] = set()
        #: names bound to torch.distributed and to another library's module, whose torch uses
        #: run through compat.distributed: name -> None, or why they cannot (they stay)
        self._namespace: dict[str, str | None] = {}
        self._namespace_imports: set[int] = set()  # torch imports of those names
        #: the names of the functions and classes the file defines (its own, ported code)
        self._defined: set[str] = set()
        #: names the file binds to an instance of a class it defines (`backend = TorchBackend()`)
        self._instances: set[str] = {"self", "cls"}

    # -- names

    def _name_of(self, node: cst.CSTNode) -> str | None:
        """The qualified name of ``node`` if it is in a ported module (or is ``hasattr``), as
        Python will bind it: imports (however aliased, at any scope), ``x = torch.distributed``
        and star imports."""
        self._assumed = None
        if _chain(node) is None:  # `comm.gather(x).mean`: a method of a result, not torch's
            return None
        try:
            names = self.get_metadata(QualifiedNameProvider, node, set())
        except KeyError:
            return None
        for name in names:
            full = qualified(name.name)
            if name.source in _SOURCES and (ported(full) or full == "builtins.hasattr"):
                return full
        chain = _chain(node)
        if chain is None:
            return None
        root, attributes = chain
        base = self._binding(root)
        if base is None:
            return None
        full = qualified(".".join([base, *attributes]))
        return full if ported(full) else None

    def _shared_with(self, node: cst.CSTNode) -> str | None:
        """The other library's name ``node`` may be, where the file also imports a module that
        is not torch's under the same name (open-instruct: ``import deepspeed.comm as dist``
        in a try, then ``import torch.distributed as dist``): which one a use reaches is up to
        the run, so the use is not rewritten as torch's."""
        try:
            names = self.get_metadata(QualifiedNameProvider, node, set())
        except KeyError:
            return None
        others = sorted(
            n.name for n in names if n.source is QualifiedNameSource.IMPORT and not ported(n.name)
        )
        return others[0] if others and not self._torch_binds_last(node) else None

    def _torch_binds_last(self, node: cst.CSTNode) -> bool:
        """Whether a use inside a function reaches torch's module whatever the run: every
        binding of its name is an import run on importing the module (none in a function), and
        the last one, a statement of the module's own body (no condition, no try), is torch's."""
        chain = _chain(node)
        scope = None if chain is None else self.get_metadata(ScopeProvider, chain[0], None)
        if chain is None or scope is None or scope is scope.globals:
            return False
        bindings = list(scope[chain[0].value])
        imports = [
            a.node
            for a in bindings
            if isinstance(a, Assignment) and isinstance(a.node, (cst.Import, cst.ImportFrom))
        ]
        if (
            not imports
            or len(imports) < len(bindings)
            or any(a.scope is not scope.globals for a in bindings)
        ):
            return False
        if any(self._in_function(imported) for imported in imports):
            return False
        last = max(
            imports, key=lambda imported: self.get_metadata(PositionProvider, imported).start.line
        )
        statement = self.get_metadata(ParentNodeProvider, last)
        return isinstance(
            self.get_metadata(ParentNodeProvider, statement, None), cst.Module
        ) and not _imports_other_library(last, chain[0].value)

    def _in_function(self, node: cst.CSTNode) -> bool:
        while not isinstance(node, cst.Module):
            if isinstance(node, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return True
            node = self.get_metadata(ParentNodeProvider, node)
        return False

    def _left_shared(self, node: cst.CSTNode, name: str, written: str, other: str) -> None:
        reason = f"`{written}` may also be `{other}` here: the file imports both as that name"
        chain = _chain(node.func if isinstance(node, cst.Call) else node)
        why = None if chain is None else self._namespace.get(chain[0].value)
        if why is not None:
            reason += f", and {why}"
        self._finding(node, name, written, left=("shared name", reason))

    # -- a name shared with another library: `import compat.distributed as dist`

    def _plan_namespace(self, module: cst.Module) -> None:
        """Where the file binds a name both to torch.distributed and to another library's module
        (``import deepspeed.comm as dist`` in one branch), its torch uses can run through
        compat.distributed, which has torch's names and signatures: then the torch imports of
        that name become ``import compat.distributed as dist`` and the uses stay as written.
        Only if compat.distributed has every torch name used through it."""
        lacking: dict[str, list[str]] = {}
        values: dict[str, list[str]] = {}
        for node in _walk(module):
            if not isinstance(node, cst.Attribute) or not isinstance(node.value, cst.Name):
                continue
            root, attribute = node.value.value, node.attr.value
            if self._shared_with(node) is None or not self._torch_module_imports(node.value):
                continue
            self._namespace.setdefault(root, None)
            self._namespace_imports |= self._torch_module_imports(node.value)
            line = self.get_metadata(PositionProvider, node).start.line
            if attribute not in _torch_distributed_names():
                continue  # the other library's own name (deepspeed.comm.allgather_fn)
            if attribute not in distributed_namespace.__all__:
                lacking.setdefault(root, []).append(f"`{self._whole_name(node)}` (line {line})")
            elif attribute in _NAMESPACE_VALUES or not self._called(node):
                values.setdefault(root, []).append(f"`{_code(node)}` (line {line})")
        for root, missing in lacking.items():
            self._namespace[root] = f"compat.distributed has no counterpart of {missing[0]}"
        if self.keep_values is not None:
            # compat.distributed's values (ReduceOp members, P2POp, a function passed on) are
            # compat's: wrong for the calls the file keeps on torch, which may be handed them.
            for root, used in values.items():
                self._namespace[root] = self._namespace[root] or (
                    f"through compat.distributed {used[0]} would be compat's, and the file keeps "
                    f"torch.distributed for {self.keep_values}"
                )

    def _whole_name(self, node: cst.Attribute) -> str:
        """``dist.distributed_c10d._get_default_store`` for its ``dist.distributed_c10d``."""
        parent = self.get_metadata(ParentNodeProvider, node, None)
        while isinstance(parent, cst.Attribute) and parent.value is node:
            node, parent = parent, self.get_metadata(ParentNodeProvider, parent, None)
        return _code(node)

    def _called(self, node: cst.Attribute) -> bool:
        parent = self.get_metadata(ParentNodeProvider, node, None)
        return isinstance(parent, cst.Call) and parent.func is node

    def _torch_module_imports(self, root: cst.Name) -> set[int]:
        """The imports binding ``root`` to torch.distributed itself (``import torch.distributed
        as dist``, ``from torch import distributed as dist``) that a use of it may reach."""
        scope = self.get_metadata(ScopeProvider, root, None)
        if scope is None:
            return set()
        found = set()
        for assignment in scope[root.value]:
            node = getattr(assignment, "node", None)
            if isinstance(node, (cst.Import, cst.ImportFrom)) and _imports_torch_module(
                node, root.value
            ):
                found.add(id(node))
        return found

    def _through_namespace(self, node: cst.CSTNode, name: str) -> bool:
        """Whether a use of a shared name is handled through compat.distributed: reported as
        rewritten (its text stays), or not torch's at all (the other library's own name)."""
        chain = _chain(node.func if isinstance(node, cst.Call) else node)
        if chain is None or chain[0].value not in self._namespace or not chain[1]:
            return False
        if chain[1][0] not in _torch_distributed_names():
            return True  # not a torch.distributed name: the other library's, no torch use
        if self._namespace[chain[0].value] is not None:
            return False
        written = _code(node.func if isinstance(node, cst.Call) else node)
        target = "compat.distributed." + ".".join(chain[1])
        found = self._finding(node, name, written, compat=target)
        self._rewritten(node, found)
        if chain[1][0] in _NAMESPACE_VALUES or not isinstance(node, cst.Call):
            self.values += 1
        return True

    def leave_Import(
        self, original_node: cst.Import, updated_node: cst.Import
    ) -> cst.Import | cst.ImportFrom:
        return self._namespace_import(original_node, updated_node)

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.Import | cst.ImportFrom:
        return self._namespace_import(original_node, updated_node)

    def _namespace_import(
        self, original: cst.Import | cst.ImportFrom, updated: cst.Import | cst.ImportFrom
    ) -> cst.Import | cst.ImportFrom:
        """``import torch.distributed as dist`` -> ``import compat.distributed as dist`` where
        ``dist`` runs through compat.distributed."""
        if id(original) not in self._namespace_imports or isinstance(updated.names, cst.ImportStar):
            return updated
        ported = [
            alias
            for alias in updated.names
            if self._namespace.get(_bound_name(alias), "") is None
            and _imports_torch_module(original, _bound_name(alias))
        ]
        if not ported:
            return updated
        self.changes += 1
        compat_module = _dotted("compat.distributed")
        if isinstance(updated, cst.Import):
            names = [
                a.with_changes(name=compat_module) if a in ported else a for a in updated.names
            ]
            return updated.with_changes(names=names)
        alias = ported[0]  # `from torch import distributed as dist`: its only name (checked)
        return cst.Import(
            names=[alias.with_changes(name=compat_module, comma=cst.MaybeSentinel.DEFAULT)]
        )

    def _binding(self, root: cst.Name) -> str | None:
        """The module ``root`` names when imports do not say: an assignment of a ported module,
        or a star import (read from its file, else assumed)."""
        scope = self.get_metadata(ScopeProvider, root, None)
        if scope is None:
            return None
        assignments = list(scope[root.value])
        if assignments:
            targets = {self._aliases.get(id(getattr(a, "node", None))) for a in assignments}
            if len(targets) == 1 and None not in targets:
                return targets.pop()
            return None
        if root.value in self.stars.bound:
            return self.stars.bound[root.value]
        for module in self.stars.modules:
            full = qualified(f"{module}.{root.value}")
            if full in candidates() or full.startswith(_REDUCE_OP.rstrip(".")):
                return full
        if self.stars.unresolved and root.value in ASSUMED:
            self._assumed = (
                f"`{root.value}` is {ASSUMED[root.value]}, from "
                f"`from {self.stars.unresolved[0]} import *`"
            )
            return ASSUMED[root.value]
        return None

    def visit_Assign(self, node: cst.Assign) -> None:
        """``dist = torch.distributed``: later uses of ``dist`` are torch.distributed's. ``cm =
        dist._coalescing_manager(...)``: a later ``with cm:`` block stays on torch."""
        choices = (
            [node.value.body, node.value.orelse]
            if isinstance(node.value, cst.IfExp)
            else [node.value]
        )
        made = [self._torch_manager(value) for value in choices if isinstance(value, cst.Call)]
        written = next((found for found in made if found is not None), None)
        if written is not None:
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    self._torch_managers[target.target.value] = written
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        module = self._name_of(node.value)
        if module is not None and module in _modules():
            self._aliases[id(node.targets[0].target)] = module

    def visit_Module(self, node: cst.Module) -> None:
        """Whether the file replaces torch.distributed's own names (``dist.all_reduce =
        wrap(dist.all_reduce)``): then its references to torch's functions stay torch's."""
        self._plan_namespace(node)
        for target in _walk(node):
            self._note_lacking_op(target)
            if isinstance(target, (cst.FunctionDef, cst.ClassDef)):
                self._defined.add(target.name.value)
            if isinstance(target, cst.AssignTarget) and _sets_reduce_op(target.target):
                line = self.get_metadata(PositionProvider, target).start.line
                self.sinks.append(f"{_code(target.target)} (line {line})")
            if isinstance(target, (cst.AssignTarget, cst.AugAssign)) and isinstance(
                target.target, cst.Attribute
            ):  # `name = ...` rebinds a name of the file's, never torch's
                name = self._name_of(target.target)
                if name is not None and name not in _modules():
                    self._patched_names.add(name)
                if name is not None and name not in _modules() and self._patch is None:
                    line = self.get_metadata(PositionProvider, target).start.line
                    self._patch = f"{_code(target.target)} (line {line})"
        self._note_instances(node)

    def _note_instances(self, node: cst.Module) -> None:
        """The names bound to an instance of a class the file defines (``b = TorchBackend()``)."""
        classes = {c.name.value for c in _walk(node) if isinstance(c, cst.ClassDef)}
        for assign in _walk(node):
            if (
                isinstance(assign, cst.Assign)
                and isinstance(assign.value, cst.Call)
                and isinstance(assign.value.func, cst.Name)
                and assign.value.func.value in classes
            ):
                self._instances.update(
                    t.target.value for t in assign.targets if isinstance(t.target, cst.Name)
                )

    def _note_lacking_op(self, node: cst.CSTNode) -> None:
        """A ReduceOp member compat lacks, named anywhere in the file: an op the file computes
        (``op_map[name]``) may then be that member."""
        if isinstance(node, cst.Attribute):
            name = self._name_of(node) or ""
            if not name.startswith(_REDUCE_OP):
                return
            parts = name[len(_REDUCE_OP) :].split(".")  # `MAX.name` names MAX
            self._named_ops.add(".".join(parts[:2]) if parts[0] == "RedOpType" else parts[0])

    @property
    def _lacking_ops(self) -> set[str]:
        """The ReduceOp members the file names that compat.ReduceOp has no counterpart of."""
        return {member for member in self._named_ops if member not in ReduceOp.__members__}

    def _op_compat_takes(self, arg: cst.Arg | None) -> bool:
        """Whether an ``op`` argument is one compat takes for sure: none (the default), a
        string, or a ReduceOp member compat has; any op where the file names no member compat
        lacks."""
        if arg is None or not self._lacking_ops or isinstance(arg.value, cst.SimpleString):
            return True
        value = arg.value  # written already (`compat.ReduceOp.SUM`): read as written
        return (
            isinstance(value, cst.Attribute)
            and value.attr.value in ReduceOp.__members__
            and _code(value.value).endswith("ReduceOp")
        )

    # -- findings

    def _finding(
        self,
        node: cst.CSTNode,
        torch: str,
        written: str,
        *,
        compat: str | None = None,
        mindspore: list[str] | None = None,
        differences: list[str] | None = None,
        left: tuple[str, str] | None = None,
        record: bool = True,
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
            assumed=self._assumed,
            call=isinstance(node, cst.Call),
        )
        if left is not None:
            found.leave(*left)
        if record:
            self.findings.append(found)
        return found

    def _rewritten(self, node: cst.CSTNode, found: Finding) -> None:
        self.changes += 1
        self._by_node[id(node)] = found

    def _keep_torch_arguments(self, call: cst.Call, written: str) -> None:
        """The arguments of ``call``, which stays on torch, stay torch's: un-count their
        rewrites (the caller puts the original arguments back)."""
        for node in _walk(call):
            if node is call.func:
                continue
            found = self._by_node.pop(id(node), None)
            if id(node) in self._value_nodes:
                self._value_nodes.discard(id(node))
                self.values -= 1
            if found is not None and found.rewritten:
                found.leave(
                    "inside a torch call", f"an argument of {written}, which stays on torch"
                )
                self.changes -= 1

    # -- imports are not uses

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        self._callees.add(id(node.func))

    # -- names that are not called

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        return self._reference(original_node, updated_node)

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return self._reference(original_node, updated_node)

    def _reference(
        self, original: cst.Name | cst.Attribute, updated: cst.Name | cst.Attribute
    ) -> cst.BaseExpression:
        """A name that is not called: rewritten where compat's object can stand in for torch's,
        else reported."""
        if id(original) in self._callees or id(original) in self._handled:
            return updated
        if isinstance(original, cst.Attribute) and id(original.value) in self._seen:
            return updated  # `ReduceOp.SUM.name`: reported at `ReduceOp.SUM`
        parent = self.get_metadata(ParentNodeProvider, original, None)
        if isinstance(parent, (cst.Import, cst.ImportFrom)) or self._assigned(original):
            return updated
        name = self._name_of(original)
        if name is None or name == "builtins.hasattr" or name in _modules():
            return updated
        if isinstance(parent, cst.Attribute) and parent.value is original:
            longer = self._name_of(parent)
            if not _known(name) or (longer is not None and _known(longer)):
                return updated  # part of a longer name: handled at the longest known one
        if _outside_scope(name):
            self.outside[name.split(".")[2]] = self.outside.get(name.split(".")[2], 0) + 1
            return updated
        self._seen.add(id(original))
        other = self._shared_with(original)
        if other is not None and self._through_namespace(original, name):
            return updated
        if other is not None:
            self._left_shared(original, name, _code(original), other)
            return updated
        if name.startswith(_REDUCE_OP):
            member = name[len(_REDUCE_OP) :].removeprefix("RedOpType.")
            return self._reduce_op(original, updated, member)
        written = _code(original)
        options = candidates().get(name, ())
        patched = self._patch is not None and not self._in_annotation(original)
        if patched and options and not self._stays_torchs_own(name, options[0]):
            if options[0].params is not None or _is_type(options[0].compat):
                found = self._finding(original, name, written, left=("patched", self._patched()))
                self.receivers.append(found)
                return updated
        if not options:
            found = self._finding(
                original,
                name,
                written,
                left=("no counterpart", no_counterpart(name)),
            )
            if _function_like(name):
                self.receivers.append(found)
            return updated
        attempts: list[Finding] = []
        for api in options:
            found = self._finding(
                original,
                name,
                written,
                compat=f"compat.{api.compat}",
                mindspore=mindspore_names(api),
                record=False,
            )
            why = self._why_not_replaced(original, api)
            value = api.params is None and not _is_type(api.compat)
            if why is None and value and api.template is not None:
                # The framework's own object, written as a call (compat.framework_group()): it
                # stays usable by calls left on torch, so it is no value to keep for them.
                found.compat = api.template
                self.findings.append(found)
                self._rewritten(original, found)
                return cst.parse_expression(api.template)
            if why is None and value and self.keep_values is not None:
                found.leave("kept for torch", self._kept_reason())
                self.findings.append(found)
                return updated
            if why is None:
                if value:
                    self.values += 1
                    self._value_nodes.add(id(original))
                self.findings.append(found)
                self._rewritten(original, found)
                return _dotted(f"compat.{api.compat}")
            found.leave("reference", why)
            attempts.append(found)
        self.findings.append(attempts[0])  # the reason the preferred form could not be used
        if options[0].params is not None:
            self.receivers.append(attempts[0])  # a torch function stored: any call may follow
        return updated

    def _stays_torchs_own(self, name: str, api: Api) -> bool:
        """Whether a reference in a file that sets torch's names can still be rewritten: to
        compat.tensor's name (torch's own object) where the file does not set that name itself
        (compat.tensor resolves it once)."""
        return _torchs_own(api.compat) and not any(
            patched == name or patched.startswith(name + ".") for patched in self._patched_names
        )

    def _assigned(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is what an assignment binds, or the object it sets an attribute or
        an item of (``dist.P2POp`` in ``dist.P2POp.__init__ = ...``): torch's, never rewritten."""
        while True:
            parent = self.get_metadata(ParentNodeProvider, node, None)
            if isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is node:
                node = parent
                continue
            if isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
                return parent.target is node
            return False

    def _patched(self) -> str:
        return (
            f"this file replaces torch.distributed's own names ({self._patch}): a reference "
            "here is torch's function, which a replacement may wrap or be compared with; "
            "compat calls torch's functions, so a replacement wrapping compat's would call itself"
        )

    def _may_receive(self, call: cst.Call, params: Params | None) -> bool:
        """Whether a variable may hand ``call`` (left on torch) a ReduceOp or a group: an
        argument other than a literal or torch's own object, at a parameter taking one (by
        torch's signature; without it, any keyword of that name or positional after the
        first). ``*args``/``**kwargs`` reach only the parameters torch's function has: into
        ``new_group(**kwargs)``, which takes neither, nothing can be handed."""
        positional = (
            [] if params is None else [n for n in params.names if n not in params.keyword_only]
        )
        takes_value = params is None or not _VALUE_PARAMS.isdisjoint(params.names)
        for index, arg in enumerate(call.args):
            if arg.star:
                if takes_value:
                    return True
                continue
            if not self._variable(arg.value):
                continue
            if arg.keyword is not None:
                name: str | None = arg.keyword.value
            elif params is None:
                name = "op" if index > 0 else None
            else:
                name = positional[index] if index < len(positional) else None
            if name in _VALUE_PARAMS:
                return True
        return False

    def _variable(self, value: cst.BaseExpression) -> bool:
        literals = (cst.SimpleString, cst.Integer, cst.Float, cst.ConcatenatedString)
        if isinstance(value, literals):
            return False
        if isinstance(value, cst.Name) and value.value in ("True", "False", "None"):
            return False
        return self._name_of(value) is None  # torch's own ReduceOp.MAX is not a variable

    def _kept_reason(self) -> str:
        return (
            f"the file keeps torch.distributed for {self.keep_values}, and compat takes "
            "torch's value too: kept torch's, which the calls left on torch need"
        )

    def _why_not_replaced(self, original: cst.CSTNode, api: Api) -> str | None:
        """Why compat's object cannot replace this reference to torch's (None: it can)."""
        if _torchs_own(api.compat):
            return None
        if _answers_isinstance(api.compat):
            if self._in_annotation(original) or self._isinstance_class(original):
                return None
            return (
                f"compat.{api.compat} stands for {api.torch} in annotations and isinstance "
                "only (a subclass of it, or type(x) is, needs torch's class)"
            )
        if api.params is None:
            if (
                _is_type(api.compat)
                and not self._in_annotation(original)
                and not self._getattr_on(original)
            ):
                return (
                    f"compat.{api.compat} stands for {api.torch} only in annotations "
                    "(isinstance and other uses see torch's objects too)"
                )
            return None
        if self._handed_to_p2pop(original) or api.drop_in:
            return None
        detail = api.result or f"it takes {_signature(api.compat_params)}"
        return f"referenced without a call, and compat.{api.compat} differs ({detail})"

    def _argument_of(self, node: cst.CSTNode) -> tuple[cst.Arg, cst.Call] | None:
        """The argument and the call when ``node`` is passed to a call, else None."""
        arg = self.get_metadata(ParentNodeProvider, node, None)
        call = self.get_metadata(ParentNodeProvider, arg, None) if arg is not None else None
        if isinstance(arg, cst.Arg) and isinstance(call, cst.Call):
            return arg, call
        return None

    def _isinstance_class(self, node: cst.CSTNode) -> bool:
        """``isinstance(x, dist.TCPStore)``, or the class in a tuple there."""
        parent = self.get_metadata(ParentNodeProvider, node, None)
        if isinstance(parent, cst.Element):
            node = self.get_metadata(ParentNodeProvider, parent)
        passed = self._argument_of(node)
        return (
            passed is not None
            and len(passed[1].args) == 2
            and passed[1].args[1] is passed[0]
            and isinstance(passed[1].func, cst.Name)
            and passed[1].func.value == "isinstance"
        )

    def _getattr_on(self, node: cst.CSTNode) -> bool:
        """``getattr(dist.ReduceOp, name)``: a member by name, which compat's type has too."""
        passed = self._argument_of(node)
        return (
            passed is not None
            and passed[1].args[0] is passed[0]
            and isinstance(passed[1].func, cst.Name)
            and passed[1].func.value == "getattr"
        )

    def _in_annotation(self, node: cst.CSTNode) -> bool:
        current: cst.CSTNode | None = node
        while current is not None and not isinstance(current, cst.BaseStatement):
            if isinstance(current, cst.Annotation):
                return True
            current = self.get_metadata(ParentNodeProvider, current, None)
        return False

    def _handed_to_p2pop(self, node: cst.CSTNode) -> bool:
        """``P2POp(dist.isend, ...)``: compat.P2POp takes compat.isend/irecv."""
        passed = self._argument_of(node)
        return passed is not None and self._name_of(passed[1].func) == _P2POP

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
                left=(
                    "reduce op",
                    f"compat.ReduceOp has no {member} (it has {', '.join(ReduceOp.__members__)})",
                ),
            )
            return updated
        topics = REDUCE_OP_TOPICS.get(member, ("type",))
        found = self._finding(
            original,
            torch_name,
            _code(original),
            compat=f"compat.ReduceOp.{member}",
            mindspore=ms,
            differences=differences(api, (), topics) if api else [],
        )
        if self.keep_values is not None:
            found.leave("kept for torch", self._kept_reason())
            return updated
        callee = self._default_handed_on(original)
        if callee is not None:
            found.leave(
                "kept for torch",
                f"the default of a parameter the function hands on to {callee}, code that "
                "is neither torch's nor compat's and may call torch's functions, which refuse "
                "compat.ReduceOp; compat takes torch's value too",
            )
            return updated
        callee = self._passed_elsewhere(original)
        if callee is not None:
            found.leave(
                "kept for torch",
                f"passed to {callee}, code that is neither torch's nor compat's nor this "
                "file's and may call torch's functions, which refuse compat.ReduceOp; compat "
                "takes torch's value too",
            )
            return updated
        self.values += 1
        self._value_nodes.add(id(original))
        self._rewritten(original, found)
        return _dotted(f"compat.ReduceOp.{member}")

    def _passed_elsewhere(self, node: cst.CSTNode) -> str | None:
        """``SyncTimer(reduce_op=dist.ReduceOp.MAX)``, or ``op = ReduceOp.MAX if p else
        ReduceOp.SUM`` and then ``SyncTimer(reduce_op=op)`` (or ``ops[k]``) in the same function:
        the callee the member reaches where that is another module's code, else None."""
        passed = self._argument_of(node)
        if passed is not None:
            return _code(passed[1].func) if self._other_code(passed[1].func) else None
        target = self._stored_in(node)
        if target is None:
            return None
        scope = self.get_metadata(ParentNodeProvider, node, None)
        while scope is not None and not isinstance(scope, (cst.FunctionDef, cst.Module)):
            scope = self.get_metadata(ParentNodeProvider, scope, None)
        for call in _walk(scope) if scope is not None else ():
            if not isinstance(call, cst.Call) or not self._other_code(call.func):
                continue
            for arg in call.args:
                value = arg.value.value if isinstance(arg.value, cst.Subscript) else arg.value
                if isinstance(value, cst.Name) and value.value == target:
                    return _code(call.func)
        return None

    def _stored_in(self, node: cst.CSTNode) -> str | None:
        """The name ``node`` is stored in: ``op = <expression holding node>``, else None."""
        parent = self.get_metadata(ParentNodeProvider, node, None)
        while parent is not None and not isinstance(parent, cst.BaseSmallStatement):
            if isinstance(parent, (cst.Call, cst.Lambda, cst.BaseSuite)):
                return None
            parent = self.get_metadata(ParentNodeProvider, parent, None)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            return target.value if isinstance(target, cst.Name) else None
        return None

    def _other_code(self, func: cst.BaseExpression) -> bool:
        """Whether a call of ``func`` runs another module's code: neither torch's, compat's, a
        builtin, a container's method (which stores the value), nor a function, class or
        method this file defines, called on ``self`` or an instance of the file's class."""
        if self._name_of(func) is not None:
            return False
        if isinstance(func, cst.Name):
            return func.value not in self._defined and func.value not in vars(builtins)
        chain = _chain(func)
        mine = chain is not None and (
            chain[0].value == "compat"
            or chain[1][-1] in _CONTAINER_METHODS  # `kwargs.pop("op", ReduceOp.MAX)`
            or (
                chain[0].value in self._instances
                and len(chain[1]) == 1
                and chain[1][0] in self._defined
            )
        )
        return not mine

    def _default_handed_on(self, node: cst.CSTNode) -> str | None:
        """``def f(op=ReduceOp.SUM): return self.comm.all_reduce(x, op=op)``: the callee that
        the parameter whose default ``node`` is gets passed to, where that callee is neither
        torch's nor a builtin (another module's code, e.g. an overriding method, which may hand
        it to torch), else None."""
        param = self.get_metadata(ParentNodeProvider, node, None)
        if not isinstance(param, cst.Param) or param.default is not node:
            return None
        function = self.get_metadata(ParentNodeProvider, param, None)
        while function is not None and not isinstance(function, (cst.FunctionDef, cst.Lambda)):
            function = self.get_metadata(ParentNodeProvider, function, None)
        if function is None:
            return None
        # `reduce_fn = dist.all_reduce`: names the function binds to torch's (or compat's)
        bound = {
            target.target.value
            for node in _walk(function.body)
            if isinstance(node, cst.Assign) and self._name_of(node.value) is not None
            for target in node.targets
            if isinstance(target.target, cst.Name)
        }
        for call in _walk(function.body):
            if not isinstance(call, cst.Call) or self._name_of(call.func) is not None:
                continue
            if isinstance(call.func, cst.Name) and (
                call.func.value in vars(builtins) or call.func.value in bound
            ):
                continue
            passed = (arg.value for arg in call.args)
            if any(isinstance(v, cst.Name) and v.value == param.name.value for v in passed):
                return _code(call.func)
        return None

    def leave_Comparison(
        self, original_node: cst.Comparison, updated_node: cst.Comparison
    ) -> cst.Comparison:
        """``pg is dist.group.WORLD`` -> ``pg == compat.framework_group()``: on MindSpore each
        call returns a new group name (equal, not the same object); a torch ProcessGroup's
        ``==`` is ``is``. ``op is dist.ReduceOp.SUM`` -> ``op == compat.ReduceOp.SUM``: the op
        may be torch's member (a default kept for torch, an unported caller's), which equals
        compat's but is not it. ``is None`` stays."""
        operands = [original_node.left, *(c.comparator for c in original_node.comparisons)]
        targets = list(updated_node.comparisons)
        for index, target in enumerate(targets):
            old = target.operator
            pair = operands[index : index + 2]
            none = any(isinstance(node, cst.Name) and node.value == "None" for node in pair)
            if not isinstance(old, (cst.Is, cst.IsNot)) or none:
                continue
            if any(map(self._fresh_object, pair)):
                before, after = old.whitespace_before, old.whitespace_after
                operator: cst.BaseCompOp = (
                    cst.Equal(whitespace_before=before, whitespace_after=after)
                    if isinstance(old, cst.Is)
                    else cst.NotEqual(whitespace_before=before, whitespace_after=after)
                )
                targets[index] = target.with_changes(operator=operator)
        return updated_node.with_changes(comparisons=targets)

    def _fresh_object(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` was rewritten to ``compat.framework_group()`` or to a member of
        compat.ReduceOp (equal to torch's member, not the same object)."""
        found = self._by_node.get(id(node))
        if found is None or not found.rewritten or found.compat is None:
            return False
        return found.compat == _FRAMEWORK_GROUP or found.compat.startswith("compat.ReduceOp.")

    # -- calls

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        name = self._name_of(original_node.func)
        if name is None:
            return updated_node
        if name == "builtins.hasattr":
            return self._hasattr(original_node, updated_node)
        if name.startswith("torch.distributed.ReduceOp") or name in _modules():
            return updated_node
        if _outside_scope(name):
            package = name.split(".")[2]
            self.outside[package] = self.outside.get(package, 0) + 1
            self.outside_calls[package] = self.outside_calls.get(package, 0) + 1
            return updated_node
        written = _code(original_node.func)
        other = self._shared_with(original_node.func)
        if other is not None and self._through_namespace(original_node, name):
            return updated_node
        if other is not None:
            self._left_shared(original_node, name, written, other)
            return self._stays_on_torch(original_node, updated_node, written)
        options = [
            (api, api.params)
            for api in candidates().get(name, ())
            if api.params is not None and (api.compat_params is not None or api.template)
        ]
        if not options:
            return self._no_counterpart(name, written, original_node, updated_node)
        return self._call_of(options, name, written, original_node, updated_node)

    def _no_counterpart(
        self, name: str, written: str, original: cst.Call, updated: cst.Call
    ) -> cst.Call:
        found = self._finding(
            original, name, written, left=("no counterpart", no_counterpart(name))
        )
        if self._may_receive(original, None):
            self.receivers.append(found)
        return self._stays_on_torch(original, updated, written)

    def _call_of(
        self,
        options: list[tuple[Api, Params]],
        name: str,
        written: str,
        original: cst.Call,
        updated: cst.Call,
    ) -> cst.BaseExpression:
        """The call written with the first candidate that takes it, else left on torch with the
        reason the preferred one could not."""
        attempts: list[Finding] = []
        for api, params in options:
            found = self._finding(
                original,
                name,
                written,
                compat=f"compat.{api.compat}",
                mindspore=mindspore_names(api),
                record=False,
            )
            rewritten = self._rewrite(api, params, api.compat_params, original, updated, found)
            if rewritten is not None:
                self.findings.append(found)
                self._rewritten(original, found)
                return rewritten
            attempts.append(found)
        self.findings.append(attempts[0])  # the reason the preferred form could not be used
        if self._may_receive(original, options[0][1]):
            self.receivers.append(attempts[0])
        return self._stays_on_torch(original, updated, written)

    def leave_With(self, original_node: cst.With, updated_node: cst.With) -> cst.With:
        """A block under a context manager of torch.distributed that stays on torch (the private
        ``_coalescing_manager``, which batches the torch calls made inside it and waits for them
        as one): the calls in it stay torch's, or they would run apart from its batch."""
        for item in original_node.items:
            written = self._torch_manager(item.item) or self._coalescing_kept(
                item.item, original_node.body
            )
            if written is None:
                continue
            self._undo(
                original_node.body,
                "inside a torch block",
                f"inside the block of {written}, which stays on torch and batches the torch calls "
                "made in it",
            )
            return updated_node.with_changes(items=original_node.items, body=original_node.body)
        return updated_node

    def _coalescing_kept(self, expression: cst.BaseExpression, body: cst.CSTNode) -> str | None:
        """``dist._coalescing_manager(...)`` (rewritten to compat.coalescing_manager) where its
        block stays on torch after all: the call was left, or a call of a kind torch's manager
        collects is left in the block, which compat's block would run at once, out of the batch
        (then the manager's rewrite is undone too). None: the block moves to compat."""
        if not isinstance(expression, cst.Call) or self._name_of(expression.func) != _COALESCING:
            return None
        found = self._by_node.get(id(expression))
        if found is None or not found.rewritten:
            return _code(expression.func)
        left = [
            _code(node.func)
            for node in _walk(body)
            if isinstance(node, cst.Call)
            and self._name_of(node.func) in _COLLECTED
            and not (id(node) in self._by_node and self._by_node[id(node)].rewritten)
        ]
        if not left:
            return None
        self._undo(
            expression,
            "inside a torch block",
            f"{left[0]} in its block stays on torch, and torch's manager batches it",
        )
        return _code(expression.func)

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        """A function compiled whole (``@torch.compile(fullgraph=True)``) stays on torch: dynamo
        captures torch's collectives in the graph, and compat's calls would break the graph,
        which fullgraph refuses."""
        if not any(self._whole_graph(decorator) for decorator in original_node.decorators):
            return updated_node
        self._undo(
            original_node.body,
            "compiled",
            "inside a function compiled with torch.compile(fullgraph=True), whose graph captures "
            "torch's collectives and not compat's",
        )
        return updated_node.with_changes(body=original_node.body)

    def _whole_graph(self, decorator: cst.Decorator) -> bool:
        """``@torch.compile(..., fullgraph=<anything but False>)``."""
        call = decorator.decorator
        if not isinstance(call, cst.Call):
            return False
        names = self.get_metadata(QualifiedNameProvider, call.func, set())
        if not any(name.name == "torch.compile" for name in names):
            return False
        return any(
            arg.keyword is not None
            and arg.keyword.value == "fullgraph"
            and not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
            for arg in call.args
        )

    def _undo(self, body: cst.CSTNode, category: str, reason: str) -> None:
        """The rewrites inside ``body``, which stays as written, are left with that reason."""
        for node in _walk(body):
            found = self._by_node.pop(id(node), None)
            if id(node) in self._value_nodes:
                self._value_nodes.discard(id(node))
                self.values -= 1
            if found is not None and found.rewritten:
                found.leave(category, reason)
                self.changes -= 1

    def _torch_manager(self, expression: cst.BaseExpression) -> str | None:
        """How ``expression`` names a context manager of torch.distributed that stays on torch
        (a call of one, or a variable a call of one was assigned to in this file), or None."""
        if isinstance(expression, cst.Name):
            return self._torch_managers.get(expression.value)
        if not isinstance(expression, cst.Call):
            return None
        name = self._name_of(expression.func)
        if name is None or not ported(name) or candidates().get(name):
            return None
        return _code(expression.func)

    def _stays_on_torch(self, original: cst.Call, updated: cst.Call, written: str) -> cst.Call:
        self._keep_torch_arguments(original, written)
        return updated.with_changes(args=original.args)

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
                left=(
                    "no counterpart",
                    f"compat has no counterpart of {torch_name}; the check stays on torch",
                ),
            )
            return updated
        if self._patch is not None:
            # The file sets torch.distributed's names from others (`if hasattr(dist, "_base"):
            # dist.new = dist._base`), which stay torch's: its check of them stays torch's too.
            self._finding(original, torch_name, written, left=("patched", self._patched()))
            return updated
        target = api.compat.rsplit(".", 1)
        owner = "compat" if len(target) == 1 else f"compat.{target[0]}"
        renamed = f"{string.prefix}{string.quote}{target[-1]}{string.quote}"
        found = self._finding(original, torch_name, written, compat=f"hasattr({owner}, {renamed})")
        self._rewritten(original, found)
        new_args = [
            updated.args[0].with_changes(value=_dotted(owner)),
            updated.args[1].with_changes(value=cst.SimpleString(renamed)),
        ]
        return updated.with_changes(args=new_args)

    def _rewrite(
        self,
        api: Api,
        params: Params,
        target: Params | None,
        original: cst.Call,
        updated: cst.Call,
        found: Finding,
    ) -> cst.BaseExpression | None:
        """The compat call for a torch call, or None with ``found``'s reason saying why not."""
        bad = [_code(n) for n in _walk(original) if id(n) in self._unported]
        if bad:
            found.leave("reduce op", f"compat has no {', '.join(bad)}")
            return None
        if api.template is not None or target is None:
            return self._templated(api, params, original, updated, found)
        if api.result is not None and self._result_used(original):
            found.leave("result", f"its result is used, and the results differ: {api.result}")
            return None
        if any(arg.star for arg in updated.args):
            return self._rewrite_unpacked(api, params, target, updated, found)
        bound = self._bind(api, params, updated, found)
        if bound is None:
            return None
        if not self._op_compat_takes(bound.get("op")):
            lacking = ", ".join(f"ReduceOp.{member}" for member in sorted(self._lacking_ops))
            found.leave("reduce op", f"its op is computed, and the file uses {lacking}, which "
                        "compat.ReduceOp has no counterpart of")  # fmt: skip
            return None
        if not self._backend_taken(api, bound.get("backend"), found):
            return None
        if not self._op_ported(api, bound, found):
            return None
        found.differences = differences(api, bound)
        mapped = self._map(api, params, target, bound, found)
        if mapped is None:
            return None
        if "out" in mapped and "async_op" in mapped and _code(mapped["async_op"].value) != "False":
            found.leave(
                "async",
                f"async_op: compat.{api.compat} then returns (tensor, Work) where torch returns "
                "a Work",
            )
            return None
        needs = api.pairs[0].get("needs_one_of", [])
        if needs and not any(p in mapped for p in needs):
            found.leave(
                "argument",
                f"compat.{api.compat} needs {' or '.join(needs)} ({row_text(api, needs[0])})",
            )
            return None
        missing = [p for p in target.required if p not in mapped]
        if missing:
            found.leave("argument", f"compat.{api.compat} needs {', '.join(missing)}, not given")
            return None
        ordered = _ordered(target, mapped)
        call = updated.with_changes(
            func=_dotted(f"compat.{api.compat}"), args=_with_commas(ordered, updated.args)
        )
        if not ordered:
            call = call.with_changes(whitespace_before_args=cst.SimpleWhitespace(""))
        return call

    def _templated(
        self, api: Api, params: Params, original: cst.Call, updated: cst.Call, found: Finding
    ) -> cst.BaseExpression | None:
        """The pair's ``template`` filled with the call's arguments (schema.py: PAIR), in
        parentheses where it is not a plain call or name and its place needs them."""
        template, _, omitted = (api.template or "").partition("|")
        if any(arg.star for arg in updated.args):
            found.leave(
                "argument",
                f"*args/**kwargs: {template.strip()} is written from the arguments the call names",
            )
            return None
        bound = self._bind(api, params, updated, found)
        if bound is None:
            return None
        found.differences = differences(api, bound)
        values = dict(item.strip().split("=", 1) for item in omitted.split(",") if item.strip())
        values.update({param: _code(arg.value) for param, arg in bound.items()})
        written = template.strip().format_map(values)
        found.compat = written
        expression = cst.parse_expression(written)
        parent = self.get_metadata(ParentNodeProvider, original, None)
        bare = (cst.Name, cst.Attribute, cst.Call)
        if not isinstance(expression, bare) and not isinstance(parent, _WHOLE_EXPRESSION):
            expression = expression.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return expression

    def _result_used(self, call: cst.Call) -> bool:
        return not isinstance(self.get_metadata(ParentNodeProvider, call, None), cst.Expr)

    def _rewrite_unpacked(
        self, api: Api, params: Params, target: Params, call: cst.Call, found: Finding
    ) -> cst.Call | None:
        """``f(a, *args, **kwargs)``: rewritten only where whatever they carry reaches the same
        parameter of compat's function as of torch's. Without ``*args`` the plain positional
        arguments are known, and from the first one compat takes elsewhere on they are passed by
        torch's name. What ``**kwargs`` carries is assumed not to be torch's private
        parameters (``_ranks``), and the finding says so."""
        private = sorted(name for name in params.names if name.startswith("_"))
        missing = sorted(set(params.names) - set(target.names) - set(private))
        if missing:
            return self._leave_unpacked(
                call, found, f"compat.{api.compat} has no {', '.join(missing)}"
            )
        torch_positional = [n for n in params.names if n not in params.keyword_only]
        compat_positional = [n for n in target.names if n not in target.keyword_only]
        if any(arg.star == "*" for arg in call.args):
            # a parameter named by keyword: *args reaches only those ahead of it (more would
            # pass it twice, which torch refuses)
            named = [a.keyword.value for a in call.args if a.keyword is not None]
            reach = min(
                (torch_positional.index(n) for n in named if n in torch_positional),
                default=len(torch_positional),
            )
            if compat_positional[:reach] != torch_positional[:reach]:
                return self._leave_unpacked(
                    call, found, f"compat.{api.compat} takes its arguments in another order"
                )
            args: list[cst.Arg] | None = list(call.args)
        else:
            args = self._by_name_from_first_moved(torch_positional, compat_positional, call)
        if args is None:
            found.leave("argument", f"more positional arguments than {api.torch} takes")
            return None
        for arg in args:
            if arg.keyword is not None and arg.keyword.value not in target.names:
                found.leave("argument", f"compat.{api.compat} has no {arg.keyword.value}")
                return None
        backend = next((a for a in args if a.keyword and a.keyword.value == "backend"), None)
        if not self._backend_taken(api, backend, found):
            return None
        if private and any(arg.star == "**" for arg in call.args):
            found.assumed = f"**kwargs carries none of torch's private {', '.join(private)}"
        return call.with_changes(func=_dotted(f"compat.{api.compat}"), args=args)

    def _op_ported(self, api: Api, bound: dict[str, cst.Arg], found: Finding) -> bool:
        """False (and ``found``'s reason) when the call passes an op outside the pair's ``ops``
        (schema.py: PAIR), the ops with which compat's function behaves as torch's:
        torch.distributed.nn.functional.all_reduce all-reduces the gradient with MAX where
        compat.autograd.all_reduce's backward raises. A computed op counts as outside where
        the file names a ReduceOp member outside them (torchtitan's
        ``reduceOp=ReduceOp.MAX.name`` handed down to a helper); elsewhere it is rewritten, and
        the finding says what it assumes."""
        ops = api.pairs[0].get("ops")
        param = "op" if "op" in bound else "reduceOp"
        arg = bound.get(param)
        if arg is None or ops is None:
            return True
        op = _literal_op(arg.value)
        listed = " and ".join(ops)
        why = f"compat port rewrites {api.torch} with {listed} only ({row_text(api, param)})"
        outside = sorted({m.rsplit(".", 1)[-1] for m in self._named_ops} - set(ops))
        if op is None and outside:
            named = ", ".join(f"ReduceOp.{member}" for member in outside)
            found.leave(
                "differentiable op", f"its op is computed, and the file names {named}: {why}"
            )
            return False
        if op is None:
            assumed = f"its op is {' or '.join(ops)} ({row_text(api, param)})"
            found.assumed = f"{found.assumed}; {assumed}" if found.assumed else assumed
            return True
        if op in ops:
            return True
        found.leave("differentiable op", f"op {op}: {why}")
        return False

    @staticmethod
    def _backend_taken(api: Api, arg: cst.Arg | None, found: Finding) -> bool:
        """False (and ``found``'s reason) when ``backend=`` is a literal not of the form torch
        parses (a name, or ``device:backend`` pairs): compat passes every other string to the
        framework as torch does (``"cpu:gloo,cuda:nccl"``, ``"ccl"``, a plugin's ``"cncl"``)."""
        if arg is None or not isinstance(arg.value, cst.SimpleString):
            return True
        value = arg.value.evaluated_value
        try:
            check_backend(value, "backend")
        except (TypeError, ValueError) as error:
            found.leave("argument", f"compat.{api.compat}: {error}")
            return False
        return True

    @staticmethod
    def _leave_unpacked(call: cst.Call, found: Finding, why: str) -> None:
        found.leave(
            "unpacked arguments",
            f"{', '.join(a.star + _code(a.value) for a in call.args if a.star)} may carry what "
            f"compat cannot take: {why}",
        )

    @staticmethod
    def _by_name_from_first_moved(
        torch_positional: list[str], compat_positional: list[str], call: cst.Call
    ) -> list[cst.Arg] | None:
        """The call's arguments, its plain positional ones passed by torch's name from the first
        whose position in compat's function differs; None if there are more than torch takes."""
        args: list[cst.Arg] = []
        moved = False
        for index, arg in enumerate(call.args):
            if arg.keyword is None and not arg.star:
                if index >= len(torch_positional):
                    return None
                name = torch_positional[index]
                moved = moved or index >= len(compat_positional) or compat_positional[index] != name
                if moved:
                    arg = arg.with_changes(
                        keyword=cst.Name(name),
                        equal=cst.AssignEqual(
                            whitespace_before=cst.SimpleWhitespace(""),
                            whitespace_after=cst.SimpleWhitespace(""),
                        ),
                    )
            args.append(arg)
        return args

    def _bind(
        self, api: Api, params: Params, call: cst.Call, found: Finding
    ) -> dict[str, cst.Arg] | None:
        """The call's arguments by torch's parameter (from the tables' signature); None (and
        ``found``'s reason) if they cannot be matched."""
        bound: dict[str, cst.Arg] = {}
        positional = [n for n in params.names if n not in params.keyword_only]
        for index, arg in enumerate(call.args):
            if arg.keyword is None:
                if index >= len(positional):
                    found.leave("argument", f"more positional arguments than {api.torch} takes")
                    return None
                bound[positional[index]] = arg
            elif arg.keyword.value in params.names:
                bound[arg.keyword.value] = arg
            else:
                found.leave("argument", f"{api.torch} has no parameter {arg.keyword.value}")
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
        """The bound arguments by compat's parameter; torch's defaults compat lacks are dropped
        (and reported); None (and ``found``'s reason) if another argument has no compat
        parameter."""
        mapped: dict[str, cst.Arg] = {}
        for param, arg in bound.items():
            value = _code(arg.value)
            renamed = RENAMES.get(param)
            if param in target.names:
                mapped[param] = arg
            elif renamed is not None and renamed in target.names:
                mapped[renamed] = arg
            elif params.defaults.get(param) == value:
                found.dropped.append(f"{param}={value} (torch's default)")
            else:
                why = row_text(api, param)
                found.leave(
                    "argument",
                    f"compat.{api.compat} has no {param}" + (f" ({why})" if why else ""),
                )
                return None
        return mapped


# torch.distributed's packages that are not collective communication (sharded tensors, FSDP,
# elastic launch, RPC, checkpoints, pipelining): compat does not cover them, and the report
# counts their uses apart from the uses of the collectives.
OUTSIDE_SCOPE = (
    "tensor",
    "_tensor",
    "device_mesh",
    "fsdp",
    "_composable",
    "elastic",
    "rpc",
    "checkpoint",
    "pipelining",
    "optim",
    "algorithms",
    "launcher",
    "run",
    "autograd",
    "nn.parallel",
    "_shard",
    "_sharded_tensor",
    "_spmd",
    "_symmetric_memory",
)


# Where an expression stands whole, needing no parentheses of its own.
_WHOLE_EXPRESSION = (
    cst.If,
    cst.While,
    cst.Assign,
    cst.AnnAssign,
    cst.Return,
    cst.Arg,
    cst.Expr,
    cst.DictElement,
    cst.Element,
)


def _function_like(name: str) -> bool:
    """A name that may be a function (``all_reduce_coalesced``), not a constant or a class
    (``Backend.NCCL``, ``_GLOO_AVAILABLE``, ``ProcessGroup``)."""
    last = name.rsplit(".", 1)[-1].lstrip("_")
    return bool(last) and last[0].islower()


def _known(name: str) -> bool:
    """A name the tables pair, or a ReduceOp member."""
    member = name.removeprefix(_REDUCE_OP).removeprefix("RedOpType.")
    return name in apis() or (name.startswith(_REDUCE_OP) and "." not in member)


def _outside_scope(name: str) -> bool:
    """A name of a package compat does not cover, except the names the tables pair (DTensor's
    in torch.distributed.tensor)."""
    rest = name.removeprefix("torch.distributed.")
    if rest == name or name in candidates():
        return False
    return any(rest == p or rest.startswith(p + ".") for p in OUTSIDE_SCOPE)


def _modules() -> set[str]:
    """The ported modules and their submodules that are modules, not APIs."""
    return {
        *PORTED_MODULES,
        "torch.distributed.nn",
        "torch.distributed.nn.functional",
        "torch.distributed._functional_collectives",
        "torch.distributed.distributed_c10d",
        "torch.distributed.group",
        "torch.distributed.GroupMember",
    }


def _signature(params: Params | None) -> str:
    if params is None:
        return "no arguments"
    return "(" + ", ".join(params.names) + ")"


def _ordered(target: Params, mapped: dict[str, cst.Arg]) -> list[cst.Arg]:
    """The arguments for compat's function: positional while compat's parameter order allows,
    then keywords (``name=value``, spelled as compat names the parameter) in the order written."""
    ordered: list[cst.Arg] = []
    for param in target.names:
        arg = mapped.get(param)
        if arg is None or param in target.keyword_only or arg.keyword is not None:
            break
        ordered.append(arg)
    for param, arg in mapped.items():
        if any(arg is done for done in ordered):
            continue
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


def fix_imports(original: cst.Module, module: cst.Module) -> cst.Module:
    """Remove the torch.distributed / torch.cuda.comm imports (and ``import torch``) the rewrite
    left unused; make sure a top-level ``import compat`` runs before the first statement that
    reads ``compat`` while the module is imported (``if compat.is_available():`` above the
    file's last import), after the last import before that statement."""
    unused_before = {name for _, name in _unused_imports(MetadataWrapper(original))}
    wrapper = MetadataWrapper(module)
    exported = _exported(wrapper.module)
    unused = {
        (node, name)
        for node, name in _unused_imports(wrapper)
        if name not in unused_before and (node, name) not in exported
    }
    pruner = ImportPruner(unused)
    module = wrapper.module.visit(pruner)
    if not _uses_ported(module):
        # `import torch.distributed.nn` kept for `torch.cat`: only `torch` is still needed
        module = module.visit(DottedImportNarrower())
    if not _reads_compat(module):
        return module  # the rewrite wrote `import compat.distributed as dist` only
    return _with_compat_import(module)


def _with_compat_import(module: cst.Module) -> cst.Module:
    """``module`` with a top-level ``import compat`` before its first use at import time."""
    body = list(module.body)
    first_use = next(
        (i for i, s in enumerate(body) if not _is_import(s) and _reads_compat_on_import(s)),
        len(body),
    )
    at = next((i for i, s in enumerate(body) if _is_import(s, "compat")), None)
    if at is not None:
        if at < first_use:
            return module
        del body[at]
    last = max((i for i, s in enumerate(body[:first_use]) if _is_import(s)), default=-1)
    if last < 0:  # after the docstring and `from __future__` imports, if any
        docstring = module.get_docstring() is not None
        last = 0 if docstring else -1
    body.insert(last + 1, cst.parse_statement("import compat\n"))
    return module.with_changes(body=body)


def _is_import(statement: cst.BaseStatement, name: str | None = None) -> bool:
    """Whether a top-level statement is an import line (of ``name`` alone, if given)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    if name is None:
        return any(isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body)
    return any(
        isinstance(small, cst.Import)
        and any(_code(a.name) == name and a.asname is None for a in small.names)
        for small in statement.body
    )


class _ImportTimeReads(cst.CSTVisitor):
    """Whether ``compat`` is read while the module is imported: anywhere but inside a function
    body (a def's decorators, defaults and annotations run when the def does)."""

    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "compat":
            self.found = True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        for part in (*node.decorators, node.params, node.returns):
            if part is not None:
                part.visit(self)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        node.params.visit(self)
        return False


class _CompatReads(cst.CSTVisitor):
    """Whether the name ``compat`` is read anywhere outside imports."""

    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.found = self.found or node.value == "compat"


def _reads_compat(module: cst.Module) -> bool:
    reads = _CompatReads()
    module.visit(reads)
    return reads.found


def _reads_compat_on_import(statement: cst.BaseStatement) -> bool:
    reads = _ImportTimeReads()
    statement.visit(reads)
    return reads.found


class _PortedUses(cst.CSTVisitor):
    """Counts the names outside imports that still resolve into a ported module."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        names = self.get_metadata(QualifiedNameProvider, node, set())
        self.count += any(ported(qualified(name.name)) for name in names)


def _uses_ported(module: cst.Module) -> bool:
    counter = _PortedUses()
    MetadataWrapper(module).visit(counter)
    return counter.count > 0


class DottedImportNarrower(cst.CSTTransformer):
    """``import torch.distributed[.x]`` (no ``as``) -> ``import torch``, once per block: the file
    uses nothing of the ported modules any more, only ``torch``."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: list[set[str]] = [set()]

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._seen.append(set())

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        self._seen.pop()
        return updated_node

    def leave_Import(
        self, original_node: cst.Import, updated_node: cst.Import
    ) -> cst.Import | cst.RemovalSentinel:
        names: list[cst.ImportAlias] = []
        for alias in updated_node.names:
            dotted = _code(alias.name)
            if alias.asname is None and dotted != "torch" and ported(qualified(dotted)):
                alias = alias.with_changes(name=cst.Name("torch"))
                dotted = "torch"
            if alias.asname is None and dotted == "torch" and "torch" in self._seen[-1]:
                continue
            if alias.asname is None:
                self._seen[-1].add(dotted)
            names.append(alias)
        if not names:
            return cst.RemoveFromParent()
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(names=names)


def _unused_imports(wrapper: MetadataWrapper) -> set[tuple[int, str]]:
    """(id of the import node, bound name) of each ported-module (or ``torch``) import nothing
    refers to, through it or another import of that name (``import torch`` beside ``import
    torch.distributed``, to which the references are counted)."""
    scopes = wrapper.resolve(ScopeProvider)
    unused: set[tuple[int, str]] = set()
    for scope in set(scopes.values()):
        if scope is None:
            continue
        for assignment in scope.assignments:
            node = getattr(assignment, "node", None)
            root = assignment.name.split(".")[0]
            if not isinstance(node, (cst.Import, cst.ImportFrom)) or any(
                same.references for same in scope.assignments if same.name.split(".")[0] == root
            ):
                continue
            if _imports_other_library(node, assignment.name):
                continue  # `import deepspeed.comm as dist` beside torch's: not the tool's
            names = {q.name for q in scope.get_qualified_names_for(assignment.name)}
            if any(ported(qualified(name)) or name == "torch" for name in names):
                unused.add((id(node), assignment.name))
    return unused


def _imports_other_library(node: cst.Import | cst.ImportFrom, bound: str) -> bool:
    """Whether ``node`` binds ``bound`` to a module or name outside torch (the scope's
    qualified names merge every import of one name, so they cannot tell)."""
    if isinstance(node, cst.ImportFrom):
        module = "." * len(node.relative) + ("" if node.module is None else _code(node.module))
        return not module.startswith("torch") or module.startswith(".")
    for alias in node.names:
        if _bound_name(alias) == bound:
            dotted = _code(alias.name)
            return dotted != "torch" and not dotted.startswith("torch.")
    return False


# compat.distributed's names whose uses make values compat takes and torch does not (a member
# of compat.ReduceOp, a P2POp of compat's functions).
_NAMESPACE_VALUES = frozenset({"ReduceOp", "P2POp"})
# torch.distributed's submodules the tables do not name (their uses are torch's, not the other
# library's).
_SUBMODULES = ("c10d_logger", "constants", "launch", "logging_handlers", "rendezvous", "utils")


def _imports_torch_module(node: cst.Import | cst.ImportFrom, bound: str) -> bool:
    """Whether ``node`` binds ``bound`` to torch.distributed itself; an ImportFrom only as its
    one name (``from torch import distributed as dist``), which a plain import can replace."""
    if isinstance(node, cst.ImportFrom):
        if node.relative or node.module is None or _code(node.module) != "torch":
            return False
        names = node.names
        return (
            not isinstance(names, cst.ImportStar)
            and len(names) == 1
            and _code(names[0].name) == "distributed"
            and _bound_name(names[0]) == bound
        )
    return any(
        _code(alias.name) == "torch.distributed"
        and alias.asname is not None
        and _bound_name(alias) == bound
        for alias in node.names
    )


@cache
def _torch_distributed_names() -> frozenset[str]:
    """Every name of torch.distributed's own: what the tables pair or left_out.toml records
    (which together account for every public name; tests/test_tables.py checks it), and its
    submodules."""
    names = {*OUTSIDE_SCOPE, *_SUBMODULES}
    for full in [*candidates(), *left_out_names(), *_modules()]:
        rest = full.removeprefix("torch.distributed.")
        if rest != full:
            names.add(rest.split(".")[0])
    return frozenset(names)


def _exported(module: cst.Module) -> set[tuple[int, str]]:
    """(id of the import node, bound name) of the module's top-level imports that the module
    exports: on a line marked ``# noqa`` (bare, or naming F401) or named in ``__all__``. Other
    modules may import them from it, so they stay when the rewrite stops using them."""
    listed: set[str] = set()
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Assign, cst.AugAssign)):
                    listed |= _all_names(small)
    exported: set[tuple[int, str]] = set()
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        comment = statement.trailing_whitespace.comment
        marked = comment is not None and re.search(r"noqa(?!:)|noqa:.*F401", comment.value)
        for small in statement.body:
            if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(
                small.names, cst.ImportStar
            ):
                names = {_bound_name(alias) for alias in small.names}
                exported |= {(id(small), name) for name in names if marked or name in listed}
    return exported


def _all_names(statement: cst.Assign | cst.AugAssign) -> set[str]:
    """The strings of ``__all__ = [...]`` (or ``+=``, a tuple)."""
    targets = (
        [t.target for t in statement.targets]
        if isinstance(statement, cst.Assign)
        else [statement.target]
    )
    if not any(isinstance(t, cst.Name) and t.value == "__all__" for t in targets):
        return set()
    if not isinstance(statement.value, (cst.List, cst.Tuple)):
        return set()
    return {
        element.value.evaluated_value
        for element in statement.value.elements
        if isinstance(element.value, cst.SimpleString)
        and isinstance(element.value.evaluated_value, str)
    }


def _bound_name(alias: cst.ImportAlias) -> str:
    """The name an import alias binds: ``as`` name, else the first part of the dotted name."""
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return _code(alias.name).split(".")[0]


class ImportPruner(cst.CSTTransformer):
    """Drops the ``unused`` names from imports (the import if none is left; ``import compat`` in
    its place if it was alone in its block) and notes whether a top-level ``import compat`` is
    there."""

    def __init__(self, unused: set[tuple[int, str]]) -> None:
        super().__init__()
        self.unused = unused
        self.has_compat = False
        self._depth = 0
        self._removed: set[int] = set()  # statements whose every import was removed

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._depth += 1

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        self._depth -= 1
        if original_node.body and not updated_node.body:
            # The block held only imports the rewrite made unused: compat's, rather than `pass`.
            return updated_node.with_changes(body=[cst.parse_statement("import compat\n")])
        return updated_node.with_changes(body=self._closed_up(original_node, updated_node))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node.with_changes(
            body=self._closed_up(original_node, updated_node, add_compat=not self.has_compat)
        )

    def _closed_up(
        self,
        original: cst.IndentedBlock | cst.Module,
        updated: cst.IndentedBlock | cst.Module,
        add_compat: bool = False,
    ) -> list[cst.BaseStatement]:
        """Imports removed at the start of a block give their leading lines to the statement
        after them, in place of its blank lines (no blank line opens a block; its comments
        stay); elsewhere the spacing stays as written. With
        ``add_compat``, ``import compat`` takes the place of the first import removed."""
        kept = iter(updated.body)
        body: list[cst.BaseStatement] = []
        inherited: Sequence[cst.EmptyLine] | None = None
        for statement in original.body:
            if id(statement) in self._removed:
                if add_compat and isinstance(statement, cst.SimpleStatementLine):
                    body.append(
                        cst.parse_statement("import compat\n").with_changes(
                            leading_lines=statement.leading_lines
                        )
                    )
                    add_compat = False
                    self.has_compat = True
                elif (
                    not body
                    and inherited is None
                    and isinstance(statement, cst.SimpleStatementLine)
                ):
                    inherited = statement.leading_lines
                continue
            new = next(kept)
            if inherited is not None and isinstance(
                new, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
            ):
                # its own blank lines go, its comments stay
                own = list(new.leading_lines)
                while own and own[0].comment is None:
                    own.pop(0)
                new = new.with_changes(leading_lines=[*inherited, *own])
            inherited = None
            body.append(new)
        body.extend(kept)
        return body

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if original_node.body and not updated_node.body:
            self._removed.add(id(original_node))
            return cst.RemoveFromParent()
        return updated_node

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
        if self._depth == 0 and any(
            _code(a.name) == "compat" and a.asname is None for a in updated_node.names
        ):
            self.has_compat = True
        return self._prune(original_node, updated_node)

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.Import | cst.ImportFrom | cst.RemovalSentinel:
        return self._prune(original_node, updated_node)
