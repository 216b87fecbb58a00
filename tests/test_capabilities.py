"""The contract between the capability table, the adapters and the algorithms, checked without
ranks: whatever the table chooses, for any backend, collective, dtype and size, exists and takes
the arguments the collectives pass."""

from __future__ import annotations

import copy
import importlib
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from compat import algorithms, capabilities, tables
from compat.adapter import Adapter
from compat.errors import TableError, UnsupportedError

SIZES = [0, 1, 1024, 4 * 2**20 - 1, 4 * 2**20, 64 * 2**20, 2**40]
BACKENDS = list(tables.load("capabilities"))


def _adapter_class(framework: str) -> type:
    module = importlib.import_module(tables.lookup("frameworks", framework, "adapter"))
    cls: type = module.ADAPTER_CLASS
    return cls


@pytest.mark.parametrize("key", BACKENDS)
def test_every_choice_is_a_real_callable_with_the_adapter_method_signature(key: str) -> None:
    entry = tables.lookup("capabilities", key)
    adapter_class = _adapter_class(entry["framework"])
    resolved = 0
    for collective, method in capabilities.COLLECTIVES.items():
        expected = list(inspect.signature(getattr(Adapter, method)).parameters)[1:]
        for dtype in entry["dtypes"]:
            for size in SIZES:
                try:
                    name = capabilities.resolve(key, collective, dtype, size)
                except UnsupportedError:
                    assert entry["ops"][collective]["impl"] == "unsupported"
                    continue
                if name == capabilities.NATIVE:
                    # The concrete adapter implements it (not only the abstract interface).
                    implementation = getattr(adapter_class, method)
                    assert not getattr(implementation, "__isabstractmethod__", False)
                    parameters = list(inspect.signature(implementation).parameters)[1:]
                else:
                    function = getattr(algorithms, name)
                    parameters = list(inspect.signature(function).parameters)[1:]
                assert parameters == expected, (key, collective, dtype, size, name)
                resolved += 1
    assert resolved > len(capabilities.COLLECTIVES) * len(SIZES)


def test_the_shipped_table_keeps_the_contract() -> None:
    capabilities.check_contract()


def _broken(key: str, collective: str, **change: object) -> dict[str, Any]:
    """A copy of the shipped table with one entry changed (or added)."""
    table = copy.deepcopy(tables.load("capabilities"))
    entry = table[key]["ops"].setdefault(collective, {"async": "native", "source": "x"})
    entry.update(change)
    return table


@pytest.mark.parametrize(
    ("table", "words"),
    [
        # A native entry for a collective no adapter method runs.
        (lambda: _broken("nccl", "all_gather_ragged", impl="native"), "unknown collective"),
        (lambda: _broken("gloo", "reduce", algorithm="reduce_by_magic"), "no function"),
        (lambda: _broken("gloo", "reduce", algorithm="all_gather_reduce"), "takes"),
        (
            lambda: _broken(
                "mccl", "all_reduce",
                choose=[{"algorithm": "nonexistent", "min_bytes": 0, "dtypes": ["float64"],
                         "reason": "x"}],
            ),
            "no function",
        ),
    ],
)  # fmt: skip
def test_a_table_naming_what_does_not_exist_is_rejected(
    table: Callable[[], dict[str, Any]], words: str
) -> None:
    with pytest.raises(TableError, match=words):
        capabilities.check_contract(table())


def test_a_table_missing_a_collective_is_rejected() -> None:
    table = copy.deepcopy(tables.load("capabilities"))
    del table["gloo"]["ops"]["all_gather_uneven"]
    with pytest.raises(TableError, match=r"gloo\.ops has no entry for \['all_gather_uneven'\]"):
        capabilities.check_contract(table)


def test_nccl_uneven_all_gather_runs_the_adapters_all_gather() -> None:
    """Was an AttributeError: the table said native, and no adapter has all_gather_uneven."""

    class Recorder:
        def all_gather(self, *args: object) -> str:
            return "all_gather called"

    name = capabilities.resolve("nccl", "all_gather_uneven", "float32", 1024)
    assert name == capabilities.NATIVE
    bound = capabilities.bind(Recorder(), "all_gather_uneven", name)  # type: ignore[arg-type]
    assert bound([], None, None, False) == "all_gather called"


def test_choices_by_dtype_and_size() -> None:
    assert capabilities.resolve("mccl", "all_reduce", "float32", 2**30) == "native"
    assert capabilities.resolve("mccl", "all_reduce", "float64", 0) == "all_gather_reduce"
    small = capabilities.resolve("mccl", "reduce_scatter", "float32", 1024)
    large = capabilities.resolve("mccl", "reduce_scatter", "float32", 64 * 2**20)
    assert (small, large) == ("all_reduce_slice", "buffered_send_reduce_scatter")
    assert capabilities.resolve("gloo", "reduce_scatter", "float32", 0) == "all_to_all_reduce"
