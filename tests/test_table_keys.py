"""The pair keys ``compat port`` reads (``port``, ``result``), the ``object`` kind and the
frameworks' ``initialized`` entry: what the shipped tables say, and that malformed uses are
rejected naming file and key."""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

import pytest

from compat.base import schema, tables
from compat.base.errors import TableError
from compat.base.types import ReduceOp

FAMILIES = tables.families()

#: compat's functional forms: torch's output-buffer APIs return None (or a Work), these a tensor.
FUNCTIONAL = {"all_gather_into_tensor", "reduce_scatter_tensor", "scatter_tensor"}


def _pairs() -> list[tuple[str, dict[str, Any]]]:
    return [(family["family"], pair) for family in FAMILIES for pair in family["pairs"]]


def _pair(torch: str, compat: str) -> dict[str, Any]:
    found = [
        pair for _, pair in _pairs() if pair["torch"] == torch and pair.get("compat") == compat
    ]
    assert len(found) >= 1, f"no pair {torch} -> compat.{compat}"
    return found[0]


def _ported(torch: str) -> dict[str, Any]:
    """The pair compat port rewrites ``torch`` with: the one marked, else the only one."""
    pairs = [pair for _, pair in _pairs() if pair["torch"] == torch and "compat" in pair]
    marked = [pair for pair in pairs if pair.get("port")]
    assert len(marked) == 1 or (len(pairs) == 1 and not marked), (torch, len(pairs), len(marked))
    return marked[0] if marked else pairs[0]


def test_every_torch_api_with_several_pairs_names_one_port_pair_across_families() -> None:
    # compat port rewrites only to a pair's compat function: pairs that name none (a torch API
    # compat does not offer) leave nothing to choose
    by_torch: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for family, pair in _pairs():
        if "compat" in pair:
            by_torch[pair["torch"]].append((family, pair))
    for torch, pairs in by_torch.items():
        marked = [pair for _, pair in pairs if pair.get("port")]
        assert len(marked) <= 1, f"{torch}: port = true on {len(marked)} pairs"
        if len(pairs) > 1:
            assert len(marked) == 1, f"{torch} has {len(pairs)} pairs and no port = true"
        for pair in marked:
            assert "compat" in pair, f"{torch}: the port pair names no compat function"


@pytest.mark.parametrize(
    ("torch", "compat", "mindspore"),
    [
        (
            "torch.distributed.reduce_scatter_single",
            "reduce_scatter_tensor",
            "mindspore.mint.distributed.reduce_scatter_tensor",
        ),
        (
            "torch.distributed.nn.functional.all_gather",
            "autograd.all_gather_tuple",
            "mindspore.ops.AllGather",
        ),
        ("torch.distributed.reduce_scatter", "reduce_scatter", None),
        ("torch.distributed.all_gather_single", "all_gather_into_tensor", None),
        ("torch.distributed.scatter", "scatter", None),
        ("torch.distributed.is_initialized", "is_initialized", None),
        ("torch.distributed._all_gather_base", "all_gather_into_tensor", None),
        ("torch.distributed._reduce_scatter_base", "reduce_scatter_tensor", None),
        ("torch.distributed.group.WORLD", "framework_group", None),
        ("torch.distributed.GroupMember.WORLD", "framework_group", None),
        ("torch.distributed.ProcessGroup", "Group", None),
        ("torch.distributed.ReduceOp", "ReduceOp", None),
        ("torch.distributed.Work", "Work", None),
    ],
)
def test_port_rewrites_to(torch: str, compat: str, mindspore: str | None) -> None:
    pair = _ported(torch)
    assert pair.get("compat") == compat, (torch, pair.get("compat"))
    if mindspore is not None:
        assert pair["mindspore"] == mindspore


def test_result_is_recorded_where_compat_returns_something_else() -> None:
    for family, pair in _pairs():
        where = f"api_{family}.toml {pair['torch']} -> {pair['mindspore']}"
        funcol = "._functional_collectives." in pair["torch"] and "compat" in pair
        if funcol:
            # an AsyncCollectiveTensor vs a plain tensor: recorded, but the same for the port
            assert "result" not in pair and _result_row(pair), where
        elif pair.get("compat") in FUNCTIONAL:
            assert "result" in pair, f"{where}: compat.{pair['compat']} returns a tensor"
    # compat.recv returns the source's rank as torch's does; a call must name the source
    recv = _pair("torch.distributed.recv", "recv")
    assert "result" not in recv and recv["needs_one_of"] == ["src", "group_src"]
    # a compat.Group works wherever the program uses the group: recorded, not a port blocker
    new_group = _pair("torch.distributed.new_group", "new_group")
    assert "result" not in new_group and "compat.Group" in _result_row(new_group)
    assert (
        "tuple"
        in _pair("torch.distributed.nn.functional.all_gather", "autograd.all_gather")["result"]
    )
    same = [
        ("torch.distributed.all_reduce", "all_reduce"),
        ("torch.distributed.barrier", "barrier"),
        ("torch.distributed.recv_object_list", "recv_object_list"),
        ("torch.distributed.nn.functional.all_gather", "autograd.all_gather_tuple"),
        ("torch.distributed.is_initialized", "is_initialized"),
    ]
    for torch, compat in same:
        assert "result" not in _pair(torch, compat), f"{torch} -> compat.{compat} returns the same"


def test_ops_are_recorded_where_compat_behaves_as_torch_with_some_ops_only() -> None:
    """A pair's ``ops`` (the compat.ReduceOp members compat port rewrites its calls with) names
    members of compat.ReduceOp. torch.distributed.nn.functional's all_reduce all-reduces the
    gradient with MAX too, and its reduce_scatter all-gathers it ignoring op, where
    compat.autograd's backward raises: SUM and AVG. funcol's all_reduce and reduce_scatter,
    whose backward raises for every op but sum, have none."""
    with_ops = [pair for _, pair in _pairs() if "ops" in pair]
    for pair in with_ops:
        assert set(pair["ops"]) <= set(ReduceOp.__members__), pair["ops"]
        assert pair["compat"] in {"autograd.all_reduce", "autograd.reduce_scatter"}, pair
    functional = "torch.distributed.nn.functional."
    funcol = "torch.distributed._functional_collectives."
    assert _pair(f"{functional}all_reduce", "autograd.all_reduce")["ops"] == ["SUM", "AVG"]
    assert "ops" not in _pair(f"{funcol}all_reduce", "autograd.all_reduce")
    assert _pair(f"{functional}reduce_scatter", "autograd.reduce_scatter")["ops"] == ["SUM", "AVG"]
    for name in ("single", "tensor", "single_autograd", "tensor_autograd"):
        assert "ops" not in _pair(f"{funcol}reduce_scatter_{name}", "autograd.reduce_scatter")


def _result_row(pair: dict[str, Any]) -> str:
    rows = [r for r in pair.get("rows", []) if r.get("topic") == "result"]
    return str(rows[0]["difference"]) if rows else ""


def _mutated(name: str, change: Any) -> dict[str, Any]:
    table = copy.deepcopy(tables.load(name))
    change(table)
    return table


def _pair_index(table: dict[str, Any], torch: str, mindspore: str) -> int:
    for index, pair in enumerate(table["pairs"]):
        if pair["torch"] == torch and pair["mindspore"] == mindspore:
            return index
    raise AssertionError(f"no pair {torch} -> {mindspore}")


RS = "torch.distributed.reduce_scatter_single"
MINT_RS = "mindspore.mint.distributed.reduce_scatter_tensor"
OPS_RS = "mindspore.ops.ReduceScatter"


def _set(torch: str, mindspore: str, key: str, value: Any) -> Any:
    def change(table: dict[str, Any]) -> None:
        pair = table["pairs"][_pair_index(table, torch, mindspore)]
        if value is None:
            del pair[key]
        else:
            pair[key] = value

    return change


def _without_compat(torch: str, mindspore: str) -> Any:
    def change(table: dict[str, Any]) -> None:
        del table["pairs"][_pair_index(table, torch, mindspore)]["compat"]

    return change


MALFORMED = [
    ("port = false", "api_reduce_scatter", _set(RS, MINT_RS, "port", False), ".port"),
    ("port as a string", "api_reduce_scatter", _set(RS, MINT_RS, "port", "true"), ".port"),
    ("no port among several", "api_reduce_scatter", _set(RS, MINT_RS, "port", None), ".port"),
    ("two ports", "api_reduce_scatter", _set(RS, OPS_RS, "port", True), ".port"),
    ("port without compat", "api_reduce_scatter", _without_compat(RS, MINT_RS), ".port"),
    ("result not text", "api_reduce_scatter", _set(RS, OPS_RS, "result", 1), ".result"),
    (
        "result without compat",
        "api_autograd",
        _without_compat(
            "torch.distributed.nn.functional.all_gather", "mindspore.mint.distributed.all_gather"
        ),
        ".result",
    ),
    (
        "ops without compat",
        "api_autograd",
        _without_compat(
            "torch.distributed.nn.functional.all_reduce", "mindspore.mint.distributed.all_reduce"
        ),
        ".ops",
    ),
    (
        "object with a signature",
        "api_new_group",
        lambda table: table["apis"]["torch.distributed.group.WORLD"].update(signature="()"),
        "apis.torch.distributed.group.WORLD",
    ),
    (
        "initialized not module:function",
        "frameworks",
        lambda table: table["torch"].update(initialized="torch.distributed.is_initialized"),
        "torch.initialized",
    ),
]


@pytest.mark.parametrize(
    ("name", "change", "key"),
    [pytest.param(name, change, key, id=label) for label, name, change, key in MALFORMED],
)
def test_malformed_key_is_rejected_naming_file_and_key(name: str, change: Any, key: str) -> None:
    with pytest.raises(TableError) as error:
        schema.validate(name, _mutated(name, change))
    message = str(error.value)
    assert f"{name}.toml" in message and key in message, message


def test_frameworks_say_how_to_ask_whether_their_process_group_is_initialised() -> None:
    frameworks = tables.load("frameworks")
    assert frameworks["torch"]["initialized"] == "torch.distributed:is_initialized"
    assert frameworks["mindspore"]["initialized"] == "mindspore.mint.distributed:is_initialized"
