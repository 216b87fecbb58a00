"""The mapping tables: every shipped table passes the schema, malformed ones are rejected naming
file and key, and every recorded signature equals the installed torch's and MindSpore's."""

from __future__ import annotations

import copy
import enum
import importlib
import importlib.util
import inspect
from typing import Any

import pytest

import compat
from compat.base import schema, tables
from compat.base.errors import TableError

FAMILIES = tables.families()
APIS = [
    (family["family"], path, api) for family in FAMILIES for path, api in family["apis"].items()
]
COMPAT = [
    (family["family"], name, entry)
    for family in FAMILIES
    for name, entry in family["compat"].items()
]


@pytest.mark.parametrize("name", tables.names())
def test_shipped_table_passes_the_schema(name: str) -> None:
    tables.load.cache_clear()
    schema.validate(name, tables.load(name))


def _mutate(name: str, keys: list[str | int], value: Any) -> dict[str, Any]:
    """A deep copy of shipped table ``name`` with ``keys`` set to ``value`` (deleted if None)."""
    table = copy.deepcopy(tables.load(name))
    node: Any = table
    for key in keys[:-1]:
        node = node[key]
    if value is None:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return table


MALFORMED = [
    ("capabilities", ["gloo", "ops", "reduce", "impl"], "emulatd", "gloo.ops.reduce.impl"),
    ("capabilities", ["gloo", "ops", "reduce", "algorithm"], None, "gloo.ops.reduce.algorithm"),
    (
        "capabilities",
        ["gloo", "ops", "all_reduce", "algoritm"],
        "x",
        "gloo.ops.all_reduce.algoritm",
    ),
    (
        "capabilities",
        ["gloo", "ops", "all_reduce", "choose"],
        [{"algorithm": "all_gather_reduce", "min_bytes": 0, "reason": "x"}],
        "gloo.ops.all_reduce.choose[0]",
    ),
    ("capabilities", ["gloo", "ops", "all_reduce", "async"], True, "gloo.ops.all_reduce.async"),
    (
        "capabilities",
        ["gloo", "ops", "all_reduce", "choose", 0, "one_host"],
        "yes",
        "gloo.ops.all_reduce.choose[0].one_host",
    ),
    ("capabilities", ["gloo", "dtypes"], ["float32", "float128"], "gloo.dtypes"),
    ("capabilities", ["gloo", "framework"], "jax", "gloo.framework"),
    ("capabilities", ["gloo", "source"], None, "gloo.source"),
    ("reduce_ops", ["ops", "sum", "aliases"], "sum", "ops.sum.aliases"),
    ("dtypes", ["dtypes", "float32", "bytes"], "4", "dtypes.float32.bytes"),
    ("frameworks", ["torch", "module"], None, "torch.module"),
    (
        "frameworks",
        ["torch", "default_backend"],
        [{"backend": "gloo", "when": "cuda"}],
        "torch.default_backend",
    ),
    (
        "frameworks",
        ["mindspore", "default_backend", 0, "backend"],
        "gloo",
        "mindspore.default_backend[0].backend",
    ),
    (
        "frameworks",
        ["torch", "launch", "rank_env", "RANK"],
        "{node}",
        "torch.launch.rank_env.RANK",
    ),
    ("api_reduce_scatter", ["family"], "reduce", "family"),
    ("api_reduce_scatter", ["pairs", 0, "rows", 3], None, "pairs[0].rows"),
    ("api_reduce_scatter", ["pairs", 0, "rows", 0, "torch"], "out", "pairs[0].rows[0].torch"),
    ("api_reduce_scatter", ["pairs", 0, "mindspore"], "mindspore.nope", "pairs[0].mindspore"),
    ("api_reduce_scatter", ["snippet", "torch"], 3, "snippet.torch"),
    ("api_all_reduce", ["apis", "torch.distributed.all_reduce", "kind"], "method", "kind"),
]


@pytest.mark.parametrize(("name", "keys", "value", "key"), MALFORMED)
def test_malformed_table_is_rejected_naming_file_and_key(
    name: str, keys: list[str | int], value: Any, key: str
) -> None:
    with pytest.raises(TableError) as error:
        schema.validate(name, _mutate(name, keys, value))
    message = str(error.value)
    assert f"{name}.toml" in message and key in message, message


def test_load_errors_are_table_errors() -> None:
    with pytest.raises(TableError, match=r"nope\.toml"):
        tables.load("nope")
    with pytest.raises(TableError, match="no schema"):
        schema.validate("nope", {})


#: compat's public submodules; their functions are recorded as "<submodule>.<name>".
SUBMODULES = ("comm", "autograd")


def _public_functions(module: Any) -> set[str]:
    """``module.__all__``, else the public functions the module defines itself."""
    if hasattr(module, "__all__"):
        return set(module.__all__)
    return {
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and inspect.isfunction(obj)
        and obj.__module__ == module.__name__
    }


def test_every_public_compat_name_has_a_table() -> None:
    recorded = {name for _, name, _ in COMPAT}
    public = {
        name
        for name in compat.__all__
        if not (
            inspect.isclass(getattr(compat, name)) and issubclass(getattr(compat, name), Exception)
        )
    }
    for submodule in SUBMODULES:
        functions = _public_functions(importlib.import_module(f"compat.{submodule}"))
        assert functions, f"compat.{submodule} has no public functions"
        public |= {f"{submodule}.{name}" for name in functions}
    assert public - recorded == set()
    assert {"comm.scatter", "comm.gather", "comm.broadcast"} <= recorded
    assert {"autograd.all_gather", "autograd.reduce_scatter", "autograd.all_reduce"} <= recorded


def _resolve(path: str) -> Any:
    """The object at dotted ``path``: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(path)


# torch.distributed.nn.functional binds `group=group.WORLD` as a default when it is first
# imported: None before any process group exists, the live WORLD group after one was made (as
# other tests do, in this same process). Import it now, at collection, so the recorded
# signature is the one every user importing it at the top of a script sees.
if importlib.util.find_spec("torch") is not None:
    import torch.distributed.nn.functional  # noqa: F401


def _framework_or_skip(framework: str) -> None:
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed; its recorded signatures cannot be checked")


@pytest.mark.parametrize(("family", "path", "api"), APIS, ids=[path for _, path, _ in APIS])
def test_recorded_api_matches_installed_framework(
    family: str, path: str, api: dict[str, Any]
) -> None:
    _framework_or_skip(api["framework"])
    obj = _resolve(path)
    where = f"api_{family}.toml apis.{path}"
    for method in api.get("methods", []):
        assert hasattr(obj, method), f"{where}: {path} has no {method}"
    for method in api.get("lacks", []):
        assert not hasattr(obj, method), f"{where}: {path} now has {method}; update the table"
    if api["kind"] in ("class", "object"):  # an object (group.WORLD): resolving it is the check
        return
    signature = inspect.signature(obj)
    assert str(signature) == api["signature"], where
    params = signature.parameters
    assert list(api["params"]) == list(params), f"{where}.params: names or order differ"
    for name, param in params.items():
        default = None if param.default is inspect.Parameter.empty else repr(param.default)
        assert api["params"][name].get("default") == default, f"{where}.params.{name}.default"
    # torch marks deprecations on the function (typing_extensions.deprecated), or warns from its
    # body (torch.distributed.nn.functional's _deprecated helper); so does the table.
    if api["framework"] == "torch":
        assert ("deprecated" in api) == _torch_deprecated(obj), f"{where}.deprecated"


def _torch_deprecated(obj: Any) -> bool:
    """Whether torch marks ``obj`` deprecated or it calls torch's ``_deprecated`` warning."""
    if hasattr(obj, "__deprecated__"):
        return True
    code = getattr(obj, "__code__", None)
    return code is not None and "_deprecated" in code.co_names


def _plain_signature(obj: Any) -> str:
    """``(a, b=1, *, c=None)``: the signature without annotations, enum defaults as Class.MEMBER."""
    parts = []
    star_done = False
    for param in inspect.signature(obj).parameters.values():
        if param.kind is inspect.Parameter.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = param.name
        if param.default is not inspect.Parameter.empty:
            default = param.default
            if isinstance(default, enum.Enum):
                text += f"={type(default).__name__}.{default.name}"
            else:
                text += f"={default!r}"
        parts.append(text)
    return "(" + ", ".join(parts) + ")"


@pytest.mark.parametrize(("family", "name", "entry"), COMPAT, ids=[name for _, name, _ in COMPAT])
def test_recorded_compat_signature_matches_compat(
    family: str, name: str, entry: dict[str, Any]
) -> None:
    obj: Any = importlib.import_module("compat")
    path = "compat"
    for part in name.split("."):
        path = f"{path}.{part}"
        if hasattr(obj, "own_object"):  # compat.tensor: compat's own object, not torch's
            obj = obj.own_object(part)
            continue
        if not hasattr(obj, part) and importlib.util.find_spec(path) is not None:
            importlib.import_module(path)  # a submodule (compat.comm) not imported yet
        assert hasattr(obj, part), f"api_{family}.toml records compat.{name}; {path} is missing"
        obj = getattr(obj, part)
    if "signature" in entry:
        assert _plain_signature(obj) == entry["signature"], f"api_{family}.toml compat.{name}"


def test_reduce_ops_table_matches_both_frameworks() -> None:
    _framework_or_skip("torch")
    _framework_or_skip("mindspore")
    import mindspore.ops
    import torch.distributed
    from mindspore import mint

    for value, entry in tables.lookup("reduce_ops", "ops").items():
        assert hasattr(torch.distributed.ReduceOp, entry["torch"]), value
        assert hasattr(torch, entry["elementwise"]), value
        if "mindspore" not in entry:
            # no MindSpore op of that kind (the bitwise ones): mindspore.ops.ReduceOp lacks it
            assert not hasattr(mindspore.ops.ReduceOp, entry["torch"]), value
        else:
            spelled = entry["mindspore"]
            assert getattr(mindspore.ops.ReduceOp, spelled.upper()) == spelled, value
        if "mindspore_elementwise" in entry:
            assert callable(getattr(mindspore.ops, entry["mindspore_elementwise"])), value
        else:
            assert callable(getattr(mint, entry["elementwise"])), value


def test_dtype_bytes_match_both_frameworks() -> None:
    """dtypes.toml's ``bytes`` is each framework's element size: the common path's choice by
    size multiplies a shape by it (compat.core.state.State.plain_implementation) where the full
    path reads the tensor's size, and the two must agree."""
    _framework_or_skip("torch")
    _framework_or_skip("mindspore")
    import mindspore
    import torch
    from mindspore import mint

    for name, entry in tables.lookup("dtypes", "dtypes").items():
        if "torch" in entry:
            made = torch.zeros((2, 3), dtype=getattr(torch, entry["torch"]))
            assert made.nbytes == 6 * entry["bytes"], (name, "torch", made.nbytes)
        if "mindspore" in entry:
            # empty: MindSpore's CPU kernels have no float8, not even a zeros
            made = mint.empty((2, 3), dtype=getattr(mindspore, entry["mindspore"]))
            assert made.nbytes == 6 * entry["bytes"], (name, "mindspore", made.nbytes)


#: The modules whose public API the tables account for: (module, what counts as its own). torch's
#: modules re-export helpers (typing.Any, datetime.timedelta); only what torch defines counts.
COMMUNICATION_MODULES = (
    ("torch.distributed", "torch."),
    ("torch.distributed._functional_collectives", "torch.distributed._functional_collectives"),
    ("mindspore.mint.distributed", ""),
    ("mindspore.ops.communication", ""),
    ("mindspore.communication.comm_func", ""),
)


def _public_api(module_name: str, own_prefix: str) -> set[str]:
    """Every public function and class of ``module_name`` (its ``__all__``, else its public
    names) defined under ``own_prefix``, as dotted paths."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    found = set()
    for name in names:
        obj = getattr(module, name, None)
        if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)):
            continue
        if str(getattr(obj, "__module__", "")).startswith(own_prefix):
            found.add(f"{module_name}.{name}")
    return found


def _communication_primitives() -> set[str]:
    """The ``mindspore.ops`` primitives of its communication module (ops.AllReduce, ...)."""
    import mindspore.ops
    from mindspore.ops.operations import comm_ops

    return {
        f"mindspore.ops.{name}"
        for name, obj in vars(comm_ops).items()
        if not name.startswith("_")
        and inspect.isclass(obj)
        and obj.__module__ == comm_ops.__name__
        and getattr(mindspore.ops, name, None) is obj
    }


def test_every_public_communication_api_is_recorded_or_left_out_with_a_reason() -> None:
    """Every public function and class of the installed torch.distributed, _functional_collectives,
    mint.distributed, ops.communication, comm_func and the ops communication primitives is in
    an api table or in left_out.toml, and left_out.toml names nothing that is recorded or gone."""
    _framework_or_skip("torch")
    _framework_or_skip("mindspore")
    recorded = {path for _, path, _ in APIS}
    left_out = {
        f"{entry['module']}.{name}": entry["reason"]
        for entry in tables.load("left_out")["left_out"]
        for name in entry["names"]
    }
    public = _communication_primitives()
    for module_name, own_prefix in COMMUNICATION_MODULES:
        found = _public_api(module_name, own_prefix)
        assert found, module_name
        public |= found
    assert public - recorded - set(left_out) == set()
    assert set(left_out) & recorded == set()
    assert set(left_out) - public == set()
