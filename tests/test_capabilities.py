"""The contract between the capability table, the adapters and the algorithms, checked without
ranks: whatever the table chooses, for any backend, collective, dtype and size, exists and takes
the arguments the collectives pass."""

from __future__ import annotations

import copy
import importlib
import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from compat import algorithms
from compat.base import schema, table_files, tables
from compat.base.adapter import Adapter
from compat.base.errors import TableError, UnsupportedError
from compat.base.types import ReduceOp
from compat.core import capabilities
from compat.transport import shared_memory

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
    # Every collective the backend runs resolves at every size (MindSpore's nccl runs none).
    supported = [c for c, cap in entry["ops"].items() if cap["impl"] != "unsupported"]
    assert resolved >= len(supported) * len(SIZES)


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


def _one_rank_choice(**bounds: int) -> dict[str, Any]:
    return {"algorithm": "one_rank_broadcast", "min_bytes": 0, "reason": "x", **bounds}


@pytest.mark.parametrize(
    ("table", "words"),
    [
        # A one-rank algorithm chosen for groups of any size, or of two ranks and more.
        (lambda: _broken("nccl", "broadcast", choose=[_one_rank_choice(min_ranks=1)]),
         r"nccl\.ops\.broadcast\.choose\[0\]: one_rank_broadcast runs groups of at most 1 "
         r"rank; expected max_ranks <= 1, got none"),
        (lambda: _broken("gloo", "broadcast", choose=[_one_rank_choice(max_ranks=2)]),
         r"gloo\.ops\.broadcast\.choose\[0\]: .* got 2"),
        # ... or as the default, which runs every group.
        (lambda: _broken("hccl", "barrier", impl="emulated", algorithm="one_rank_barrier"),
         r"hccl\.ops\.barrier\.algorithm: one_rank_barrier runs groups of at most 1 rank"),
    ],
)  # fmt: skip
def test_a_table_choosing_an_algorithm_beyond_its_group_size_is_rejected(
    table: Callable[[], dict[str, Any]], words: str
) -> None:
    with pytest.raises(TableError, match=words):
        capabilities.check_contract(table())
    within = _broken("nccl", "broadcast", choose=[_one_rank_choice(max_ranks=1)])
    capabilities.check_contract(within)


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
    assert capabilities.resolve("mccl", "all_reduce", "float32", 2**30, ranks=2) == "native"
    assert capabilities.resolve("mccl", "all_reduce", "float64", 0, ranks=2) == "all_gather_reduce"
    small = capabilities.resolve("mccl", "reduce_scatter", "float32", 1024, ranks=2)
    large = capabilities.resolve("mccl", "reduce_scatter", "float32", 64 * 2**20, ranks=2)
    assert (small, large) == ("all_reduce_slice", "buffered_send_reduce_scatter")
    assert capabilities.resolve("gloo", "reduce_scatter", "float32", 0, ranks=2) == (
        "all_to_all_reduce"
    )


#: The collectives a group of one rank runs locally, each by one_rank_<its adapter method>:
#: every collective but point to point (no peer) and monitored_barrier (its own, 4-6 us there).
ONE_RANK = {
    collective: method
    for collective, method in capabilities.COLLECTIVES.items()
    if collective not in capabilities.POINT_TO_POINT and collective != "monitored_barrier"
}


@pytest.mark.parametrize("key", ["gloo", "mccl"])
def test_a_group_of_one_rank_runs_every_collective_locally(key: str) -> None:
    """A group of one rank on Gloo and MCCL runs every collective by a one_rank_* algorithm, at
    every size and dtype, and never by a choice measured for more ranks (at world size 1 the
    backends took 33-71 us on Gloo and 1.0-2.0 ms on MCCL for a 1 KB call that moves nothing,
    compat 6-35 us this way): one choice, so the common path reads no size. From two ranks no
    one_rank algorithm is chosen, and the choices measured there stay."""
    dtypes = tables.lookup("capabilities", key, "dtypes")
    for collective, algorithm in ONE_RANK.items():
        sizes = {0, 1023, 2**30}
        for ranks in (1, 2, 3, 4):
            sizes |= set(capabilities.size_thresholds(key, collective, "float32", False, ranks))
        sizes |= {size - 1 for size in sizes if size}
        for dtype in dtypes:
            for size in sorted(sizes):
                chosen = capabilities.resolve(key, collective, dtype, size, ranks=1)
                assert chosen == f"one_rank_{algorithm}", (collective, dtype, size, chosen)
            for ranks in (2, 3, 4):
                for size in sorted(sizes):
                    chosen = capabilities.resolve(key, collective, dtype, size, ranks=ranks)
                    assert not chosen.startswith("one_rank_"), (collective, ranks, size, chosen)
    at_two = {
        ("mccl", "reduce_scatter_tensor"): "all_reduce_slice_tensor",
        ("mccl", "reduce_scatter"): "all_reduce_slice",
        ("mccl", "all_reduce"): "native",
        ("mccl", "all_gather_into_tensor"): "all_gather_concat",
        ("mccl", "reduce"): "all_gather_reduce_to_dst",
        ("mccl", "broadcast"): "native",
        ("gloo", "reduce"): "gather_reduce_to_dst",
        ("gloo", "all_reduce"): "pairwise_all_gather_reduce",
        ("gloo", "broadcast"): "native",
    }
    for (backend, collective), algorithm in at_two.items():
        if backend == key:
            chosen = capabilities.resolve(key, collective, "float32", 1024, ranks=2)
            assert chosen == algorithm, (collective, chosen)
    large = 64 * 2**20
    if key == "gloo":
        assert capabilities.resolve(key, "all_reduce", "float32", large, ranks=2) == "native"
        assert capabilities.resolve(key, "reduce", "float32", large, ranks=2) == (
            "reduce_keep_input"
        )
    else:
        assert capabilities.resolve(key, "reduce_scatter", "float32", large, ranks=2) == (
            "buffered_send_reduce_scatter"
        )


def test_a_choice_for_one_host_applies_only_there_and_wins() -> None:
    """Shared memory for ranks of one host: chosen only where the group has a window, and then
    over the size-dependent choices (Gloo's pairwise all_gather from 4 MB)."""
    for size in (0, 1024, 64 * 2**20):
        for ranks, algorithm in (
            (2, "shared_memory_all_reduce"),
            (3, "_in_shares"),
            (4, "_in_shares"),
        ):
            for backend in ("mccl", "gloo"):
                chosen = capabilities.resolve(backend, "all_reduce", "float32", size, True, ranks)
                assert chosen.endswith(algorithm), (backend, ranks, chosen)
        gathered = capabilities.resolve("gloo", "all_gather", "float32", size, one_host=True)
        assert gathered == "shared_memory_all_gather"
    assert capabilities.resolve("gloo", "all_gather", "float32", 64 * 2**20, ranks=2) == (
        "pairwise_all_gather"
    )
    assert capabilities.resolve("mccl", "all_reduce", "float64", 0, ranks=2) == (
        "all_gather_reduce"
    )
    assert capabilities.wants_one_host("mccl", "all_reduce")
    assert not capabilities.wants_one_host("nccl", "all_reduce")
    assert capabilities.size_thresholds("gloo", "all_gather", "float32", True, 2) == [
        0,
        4 * 2**20,
    ]


def test_choices_bounded_by_the_groups_size() -> None:
    """Gloo's gather on one host: through the window's channels, but from 1 MB per rank at 2
    ranks in rounds through the slots (measured faster there); min_ranks/max_ranks bound a
    choice by the group's size."""
    for ranks in (2, 3, 4, 8):
        assert capabilities.resolve("gloo", "gather", "float32", 1024, True, ranks) == (
            "shared_memory_p2p_gather"
        )
        large = capabilities.resolve("gloo", "gather", "float32", 2**20, True, ranks)
        expected = "shared_memory_gather" if ranks == 2 else "shared_memory_p2p_gather"
        assert large == expected, (ranks, large)
    assert capabilities.size_thresholds("gloo", "gather", "float32", True, 2) == [0, 2**20]
    assert capabilities.size_thresholds("gloo", "gather", "float32", True, 3) == [0]
    # Gloo's reduce across hosts: a gather plus the root's reduction up to a size that falls as
    # the ranks grow (the root takes in every rank's tensor), then Gloo's reduce from a copy.
    switch = {2: 16 * 2**20, 3: 10 * 2**20, 4: 7 * 2**20}
    for ranks in (2, 3, 4, 5, 8):
        for size in (1024, 4 * 2**20, 7 * 2**20, 10 * 2**20, 16 * 2**20, 64 * 2**20):
            found = capabilities.resolve("gloo", "reduce", "float32", size, False, ranks)
            gathers = ranks in switch and size < switch[ranks]
            assert found == ("gather_reduce_to_dst" if gathers else "reduce_keep_input"), (
                ranks, size, found,
            )  # fmt: skip
        assert capabilities.resolve("gloo", "reduce", "float32", 0, True, ranks) == (
            "shared_memory_reduce"
        )
    # Gloo across hosts at 2-4 ranks: one step of point-to-point messages where Gloo's ring
    # takes several (all_gather at every size; all_reduce below 768 KB, its own ring above).
    for ranks in (2, 3, 4, 5):
        few = ranks <= 4
        for size in (1024, 512 * 2**10, 2**20, 64 * 2**20):
            pairwise = {
                "all_gather": few or size >= 4 * 2**20,
                "all_gather_into_tensor": few or size >= 4 * 2**20,
                "all_reduce": few and size < 768 * 2**10,
            }
            for collective, expected in pairwise.items():
                found = capabilities.resolve("gloo", collective, "float32", size, False, ranks)
                assert (found != capabilities.NATIVE) == expected, (collective, ranks, size, found)
                assert found.startswith("pairwise_") or found == capabilities.NATIVE, found
    entry = {"impl": "native", "async": "native", "choose": [
        {"algorithm": "a", "min_bytes": 0, "max_ranks": 2, "reason": "r"},
        {"algorithm": "b", "min_bytes": 0, "min_ranks": 3, "max_ranks": 5, "reason": "r"},
    ]}  # fmt: skip
    chosen = {
        ranks: [
            choice["algorithm"] for choice in capabilities._choices(entry, "float32", False, ranks)
        ]
        for ranks in (None, 2, 3, 5, 6)
    }
    # A group of unknown size takes no choice bounded by the group's size.
    assert chosen == {None: [], 2: ["a"], 3: ["b"], 5: ["b"], 6: []}


def test_shared_memory_choices_say_how_async_calls_run_and_bind_accordingly() -> None:
    """On Gloo the shared-memory choices run async calls on the window's thread ("background":
    bound through shared_memory.in_issue_order); on MCCL they return a completed Work, as
    MindSpore's own async collectives on CPU wait in its one queue; the other choices keep
    their entry's async."""
    gloo_ops = tables.lookup("capabilities", "gloo", "ops")
    for collective, entry in gloo_ops.items():
        for choice in entry.get("choose", ()):
            if choice["algorithm"].startswith("shared_memory_"):
                # Where the choice applies: from its size, at its least number of ranks.
                size, ranks = choice["min_bytes"], choice.get("min_ranks", 2)
                found = capabilities.choice("gloo", collective, "float32", size, True, ranks)
                # Point to point moves on as waits make progress (compat.transport.mailbox), no
                # thread;
                # monitored_barrier is always blocking, and takes its turn in the window's
                # issue order itself (SharedWindow.run).
                how = "progress" if collective in capabilities.POINT_TO_POINT else "background"
                if collective == "monitored_barrier":
                    how = "completed"
                assert found == (choice["algorithm"], how), (collective, found)
    for backend in ("gloo", "mccl"):
        for collective in capabilities.POINT_TO_POINT:
            found = capabilities.choice(backend, collective, "float32", 0, True)
            assert found == (f"shared_memory_{collective}", "progress"), (backend, found)
            inline = capabilities.bind(object(), collective, found[0], found[1])  # type: ignore[arg-type]
            assert isinstance(inline, partial)
            assert inline.func is getattr(algorithms, found[0]), (collective, inline)
    assert capabilities.choice("mccl", "all_reduce", "float32", 0, True, 2) == (
        "shared_memory_all_reduce",
        "completed",
    )
    assert capabilities.choice("mccl", "all_reduce", "float32", 0, True, 3) == (
        "shared_memory_all_reduce_in_shares",
        "completed",
    )
    assert capabilities.choice("gloo", "all_gather", "float32", 64 * 2**20, ranks=2) == (
        "pairwise_all_gather",
        "native",
    )
    found = capabilities.choice("gloo", "reduce", "float32", 0, ranks=2)
    assert found == ("gather_reduce_to_dst", "native")
    adapter: Any = object()
    background = capabilities.bind(adapter, "all_reduce", "shared_memory_all_reduce", "background")
    assert isinstance(background, partial)
    assert background.func is shared_memory.in_issue_order
    assert background.args == (algorithms.shared_memory_all_reduce, adapter)
    inline = capabilities.bind(adapter, "all_reduce", "shared_memory_all_reduce", "completed")
    assert isinstance(inline, partial) and inline.func is algorithms.shared_memory_all_reduce


def test_hccl_pads_uneven_reduce_scatter_and_runs_even_parts_natively() -> None:
    """MindSpore's Ascend reduce_scatter kernel overruns its staging buffer for parts of
    different sizes (capabilities.toml, hccl.ops.reduce_scatter_uneven): those go through the
    padded algorithm; equal parts, in either form, through the native kernel."""
    for dtype in tables.lookup("capabilities", "hccl", "dtypes"):
        for size in SIZES:
            uneven = capabilities.resolve("hccl", "reduce_scatter_uneven", dtype, size)
            assert uneven == "padded_reduce_scatter", (dtype, size)
            for even in ("reduce_scatter", "reduce_scatter_tensor"):
                assert capabilities.resolve("hccl", even, dtype, size) == capabilities.NATIVE

    class Recorder:
        def reduce_scatter(self, *args: object) -> str:
            return "native list form"

    native = capabilities.bind(Recorder(), "reduce_scatter", capabilities.NATIVE)  # type: ignore[arg-type]
    assert native(None, [], None, None, False) == "native list form"
    padded = capabilities.bind(Recorder(), "reduce_scatter_uneven", "padded_reduce_scatter")  # type: ignore[arg-type]
    assert padded.func is algorithms.padded_reduce_scatter  # type: ignore[attr-defined]


def test_every_backend_keeps_its_reduce_scatter_for_uneven_parts_except_hccl() -> None:
    """reduce_scatter_uneven was split from reduce_scatter for HCCL; elsewhere it runs what the
    uneven parts ran before the split."""
    for key in BACKENDS:
        if key == "hccl":
            continue
        ops = tables.lookup("capabilities", key, "ops")
        for dtype in tables.lookup("capabilities", key, "dtypes"):
            for size in SIZES:
                try:
                    before = capabilities.resolve(key, "reduce_scatter", dtype, size)
                except UnsupportedError:
                    assert ops["reduce_scatter_uneven"]["impl"] == "unsupported", key
                    continue
                after = capabilities.resolve(key, "reduce_scatter_uneven", dtype, size)
                assert after == before, (key, dtype, size)


def test_unsupported_names_the_framework_and_the_reason() -> None:
    with pytest.raises(UnsupportedError) as raised:
        capabilities.resolve("mindspore_nccl", "send", "float32", 1024)
    message = str(raised.value)
    assert message.startswith("send is not supported by mindspore's nccl backend: ")
    assert "ops.Send and ops.Receive" in message


def _with_op(key: str, collective: str, **change: object) -> dict[str, Any]:
    table = copy.deepcopy(tables.load("capabilities"))
    table[key]["ops"][collective].update(change)
    return table


@pytest.mark.parametrize(
    ("table", "words"),
    [
        # Read entries cite what was read, measured ones name their test: neither passes as the
        # other.
        (lambda: _with_op("gloo", "all_reduce", verified="read"), "not 'read'"),
        (
            lambda: _with_op("nccl", "all_reduce", verified="measured"),
            "expected 'measured: ' and the test",
        ),
        (lambda: _with_op("hccl", "barrier", verified="guessed"), "one of 'measured', 'read'"),
    ],
)  # fmt: skip
def test_verified_must_agree_with_the_source(
    table: Callable[[], dict[str, Any]], words: str
) -> None:
    with pytest.raises(TableError, match=words):
        schema.validate("capabilities", table())


def test_entries_for_backends_not_run_here_are_all_read() -> None:
    """No GPU or NPU here: every nccl, hccl and mindspore_nccl entry says it was read, and cites
    what; gloo and mccl entries are measured."""
    for key, entry in tables.load("capabilities").items():
        for collective, cap in entry["ops"].items():
            read = entry["device"] != "cpu"
            assert (cap.get("verified") == "read") is read, (key, collective)
            assert cap["source"].startswith("measured: ") is not read, (key, collective)


def _choice(algorithm: str, **bounds: object) -> dict[str, Any]:
    return {"algorithm": algorithm, "min_bytes": 0, "reason": "r", **bounds}


@pytest.mark.parametrize(
    ("second", "ambiguous"),
    [
        (_choice("b", max_ranks=4), True),  # both apply to a group of one
        (_choice("b", min_ranks=2, max_ranks=4), False),
        (_choice("b", dtypes=["float64"]), True),  # every size, float64
        (_choice("b", one_host=True), False),  # one_host choices are chosen apart
        (_choice("b", min_ranks=2, min_bytes=1024), False),
    ],
)  # fmt: skip
def test_choices_that_would_tie_are_refused(second: dict[str, Any], ambiguous: bool) -> None:
    """Two choices of one collective that apply to some same call at the same min_bytes are
    refused: the table's order would decide between them (as it silently did for Gloo's
    pairwise all_reduce and the one-rank choice before they were bounded apart)."""
    table = _with_op("gloo", "broadcast", choose=[_choice("a", max_ranks=1), second])
    if ambiguous:
        with pytest.raises(TableError, match=r"broadcast\.choose\[1\].*choose\[0\] does \('a'"):
            schema.validate("capabilities", table)
    else:
        schema.validate("capabilities", table)


# -- facts that differ by framework release (capabilities.toml before) -------------------------


def test_gloo_facts_resolve_per_torch_release() -> None:
    """torch 2.7.1's Gloo: no AVG (emulated for all_reduce and reduce), a reduce_scatter that
    sums whatever the op (emulated for the others), no alltoall of a list; each fact ends at
    the release the table records, and the newest release takes the plain entry."""
    gloo = tables.lookup("capabilities", "gloo")
    releases = ((2, 7, 1), (2, 8, 0), (2, 10, 9), (2, 11, 0), (2, 12, 0), (2, 14, 1))
    rules = {
        release: {
            (rule["collective"], op)
            for rule in capabilities.at_release(gloo, release).get("emulate", ())
            for op in rule["ops"]
        }
        for release in releases
    }
    assert {("all_reduce", "avg"), ("reduce", "avg")} <= rules[(2, 7, 1)]
    assert ("reduce_scatter_tensor", "min") in rules[(2, 7, 1)]
    assert ("all_reduce", "avg") not in rules[(2, 8, 0)]
    assert ("reduce_scatter_tensor", "avg") in rules[(2, 10, 9)]
    assert rules[(2, 11, 0)] == rules[(2, 12, 0)] == rules[(2, 14, 1)] == set()
    all_to_all = {
        release: capabilities.at_release(gloo, release)["ops"]["all_to_all"]
        for release in ((2, 7, 1), (2, 11, 0), (2, 12, 0))
    }
    assert all_to_all[(2, 7, 1)]["algorithm"] == all_to_all[(2, 11, 0)]["algorithm"]
    assert all_to_all[(2, 11, 0)]["impl"] == "emulated"
    assert all_to_all[(2, 12, 0)] is gloo["ops"]["all_to_all"]
    assert gloo["ops"]["all_to_all"]["impl"] == "native"
    # the choices stay: only the keys the older facts name are replaced
    assert all_to_all[(2, 7, 1)]["choose"] == gloo["ops"]["all_to_all"]["choose"]
    assert capabilities.at_release(gloo, (2, 14, 1)) is gloo
    assert capabilities.at_release(gloo, None) is gloo  # torch not installed: the newest


def test_a_call_with_an_op_the_release_lacks_runs_the_rules_emulation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """bind on Gloo at torch 2.7.1: AVG goes to the rule's algorithm, every other op to the
    bound implementation; an implementation the rule does not replace is left as it is."""
    old = capabilities.at_release(tables.lookup("capabilities", "gloo"), (2, 7, 1))
    monkeypatch.setattr(capabilities, "capability_entry", lambda key: old)
    calls: list[str] = []

    class Native:
        def all_reduce(self, *args: Any) -> None:
            calls.append(f"native {args[1].value}")

    monkeypatch.setattr(
        algorithms,
        "pairwise_all_gather_reduce",
        lambda adapter, *args, **kwargs: calls.append("emulated"),
    )
    from compat.base.types import ReduceOp

    run = capabilities.bind(Native(), "all_reduce", "native", key="gloo")  # type: ignore[arg-type]
    for op in ("sum", "avg", "max"):
        run("tensor", ReduceOp(op), None, False)
    run("tensor", op=ReduceOp.AVG, group=None, async_op=False)
    assert calls == ["native sum", "emulated", "native max", "emulated"]
    assert inspect.unwrap(run).__name__ == "all_reduce"  # the bound native method, for the rest
    assert capabilities.lacked_ops("gloo", "all_reduce") == {"avg"}
    # a shared-memory choice reduces by itself: no rule replaces it
    assert capabilities.emulations("gloo", "all_reduce", "shared_memory_all_reduce") == []
    assert capabilities.emulations("gloo", "reduce", "reduce_keep_input") == [
        ("avg", "gather_reduce_to_dst")
    ]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda facts: facts.update(release="2.8"),
         r"'gloo\.before\[0\]\.release': expected a release"),
        (lambda facts: facts.update(release="2.0.0"), "from the newest down"),
        (lambda facts: facts.update(verified="measured"), r"'gloo\.before\[0\]\.source'"),
    ],
)  # fmt: skip
def test_older_facts_are_validated(change: Callable[[dict[str, Any]], None], words: str) -> None:
    table = copy.deepcopy(table_files.read("capabilities"))
    change(table["gloo"]["before"][0])
    with pytest.raises(TableError, match=words):
        schema.validate("capabilities", table)


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ({"collective": "broadcast"}, "broadcast takes no ReduceOp"),
        ({"algorithm": "no_such_algorithm"}, "no function 'no_such_algorithm'"),
        ({"replaces": ["native", "nothing"]}, "no function 'nothing'"),
        ({"algorithm": "one_rank_all_reduce"}, "runs groups of at most 1 rank"),
    ],
)  # fmt: skip
def test_an_emulation_naming_what_cannot_run_it_is_rejected(
    rule: dict[str, Any], words: str
) -> None:
    table = copy.deepcopy(tables.load("capabilities"))
    facts = next(f for f in table["gloo"]["before"] if f.get("emulate"))
    facts["emulate"][0].update(rule)
    with pytest.raises(TableError, match=words):
        capabilities.check_contract(table)


def test_a_backends_own_emulate_rules_hold_at_every_release() -> None:
    """MCCL has no bitwise op at any MindSpore release: its own emulate rules apply at the
    newest facts and add to an older release's (avg before 2.10.0)."""
    mccl = tables.lookup("capabilities", "mccl")
    newest = capabilities.at_release(mccl, None)
    older = capabilities.at_release(mccl, (2, 9, 0))
    for entry in (newest, older):
        bitwise = [rule for rule in entry["emulate"] if rule["ops"] == ["band", "bor", "bxor"]]
        assert {rule["collective"] for rule in bitwise} >= {"all_reduce", "reduce_scatter"}
    assert any(rule["ops"] == ["avg"] for rule in older["emulate"])
    assert not any(rule["ops"] == ["avg"] for rule in newest["emulate"])


@pytest.mark.parametrize(
    ("backend", "collective", "words"),
    [
        ("mccl", "all_reduce", r"mccl\.ops\.all_reduce: native would hand \[.band."),
        ("mccl", "reduce_scatter", r"all_reduce_slice would hand \['band', 'bor', 'bxor'\]"),
        ("hccl", "reduce_scatter_uneven", r"padded_reduce_scatter would hand"),
    ],
)  # fmt: skip
def test_a_bitwise_op_mindspore_lacks_must_be_emulated_wherever_it_would_reach_mindspore(
    backend: str, collective: str, words: str
) -> None:
    """A MindSpore backend's call that hands its op to MindSpore (native, all_reduce_slice,
    padded_reduce_scatter) must have an emulate rule for the ops MindSpore has no spelling
    for; without one the table is refused, rather than a KeyError at the call."""
    table = copy.deepcopy(tables.load("capabilities"))
    entry = table[backend]
    entry["emulate"] = [rule for rule in entry["emulate"] if rule["collective"] != collective]
    with pytest.raises(TableError, match=words):
        capabilities.check_contract(table)


def test_compat_info_reports_the_installed_releases_capabilities(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where torch is 2.7.1, compat info names what runs emulated there and its matrix shows
    Gloo's all_to_all emulated; at the installed (newest-facts) release it shows it native."""
    from compat.core import versions
    from compat.tools import cli

    def info() -> str:
        capabilities.capability_entry.cache_clear()
        try:
            assert cli.main(["info"]) == 0
        finally:
            capabilities.capability_entry.cache_clear()
        return capsys.readouterr().out

    def row(out: str, collective: str) -> list[str]:
        return next(line.split() for line in out.splitlines() if line.startswith(collective + " "))

    newest = info()
    assert "lacks what later releases have" not in newest
    assert row(newest, "all_to_all")[1] == "native*"
    # the rules that hold at every release (bitwise ops), whatever the release
    every_release = (
        "nccl reduces some ops itself: all_reduce with band/bor/bxor by all_gather_reduce"
    )
    assert every_release in " ".join(newest.split())
    older = {"torch": (2, 7, 1), "mindspore": (2, 10, 0)}
    monkeypatch.setattr(versions, "running_release", older.get)
    out = info()
    flat = " ".join(out.split())  # the lines are wrapped to the terminal
    assert "gloo at torch" in flat and "all_reduce with avg by pairwise_all_gather_reduce" in flat
    assert "all_to_all by concat_all_to_all" in flat
    assert every_release in flat
    assert row(out, "all_to_all")[1] == "emulated*"
    assert "mccl at" not in out  # MindSpore 2.10.0 has every fact of the table


def test_a_collective_lacked_at_a_release_must_not_run_native_there() -> None:
    """Gloo before torch 2.12 has no alltoall of a list: the table runs it emulated there; an
    entry that would still run Gloo's own call is refused, naming the release's facts."""
    table = copy.deepcopy(tables.load("capabilities"))
    facts = next(f for f in table["gloo"]["before"] if "all_to_all" in f.get("lacks", ()))
    del facts["ops"]["all_to_all"]
    with pytest.raises(TableError, match=r"gloo\.before\[0\]\.lacks: all_to_all lacks a call"):
        capabilities.check_contract(table)
    gloo = tables.lookup("capabilities", "gloo")
    assert "all_to_all" in capabilities.at_release(gloo, (2, 11, 0))["lacks"]
    assert "reduce_scatter" not in capabilities.at_release(gloo, (2, 8, 0))["lacks"]


def _as_bytes(key: str, dtypes: list[str]) -> dict[str, Any]:
    """A copy of the shipped table whose backend ``key`` moves ``dtypes`` as bytes."""
    table = copy.deepcopy(tables.load("capabilities"))
    table[key]["as_bytes"] = {"dtypes": dtypes, "reason": "x", "source": "measured: x"}
    return table


@pytest.mark.parametrize(
    ("table", "words"),
    [
        (lambda: _as_bytes("gloo", ["float16"]), "only dtypes of one byte and kind float8"),
        (lambda: _as_bytes("gloo", ["int8"]), "only dtypes of one byte and kind float8"),
        (lambda: _as_bytes("gloo", ["float9"]), "unknown dtypes"),
        (lambda: _as_bytes("nccl", ["float8_e5m2"]), "the backend moves it itself"),
        (lambda: _as_bytes("hccl", ["float8_e5m2"]), "hccl.dtypes lacks"),  # no uint8 there
    ],
)
def test_a_table_moving_as_bytes_what_cannot_travel_so_is_rejected(
    table: Callable[[], dict[str, Any]], words: str
) -> None:
    with pytest.raises(TableError, match=words):
        schema.validate("capabilities", table())


def test_float8_is_moved_on_every_backend_with_uint8_and_reduced_on_none() -> None:
    """Each backend that moves uint8 moves both float8 dtypes: itself (torch's NCCL) or as
    bytes (HCCL's table has no uint8: refused there); and the rank cases cover exactly the
    float8 dtypes."""
    from tests.ranks.float8_cases import FLOAT8

    float8 = {n for n, e in tables.lookup("dtypes", "dtypes").items() if e["kind"] == "float8"}
    assert float8 == set(FLOAT8)
    for key, entry in tables.load("capabilities").items():
        moved = set(entry["dtypes"]) | set(entry.get("as_bytes", {}).get("dtypes", ()))
        expected = float8 if "uint8" in entry["dtypes"] else set()
        assert moved & float8 == expected, key
    assert float8 <= set(tables.lookup("capabilities", "nccl", "dtypes"))


@pytest.mark.parametrize("key", ["gloo", "nccl", "mccl", "mindspore_nccl"])
def test_every_reduction_check_refuses_float8_naming_the_op_and_the_dtype(key: str) -> None:
    """compat's own checks (with stand-ins for the adapter and the world: no communication),
    for the backends not run here too: a float8 dtype passes the non-reducing check, natively or
    as bytes, and no ReduceOp takes it."""
    from types import SimpleNamespace

    from compat.core.checks import Checks

    entry = tables.lookup("capabilities", key)
    world = SimpleNamespace(size=lambda: 2)
    checks = Checks(SimpleNamespace(framework=entry["framework"]), key, entry, 0, world, {})  # type: ignore[arg-type]
    for dtype in ("float8_e4m3fn", "float8_e5m2"):
        if dtype not in checks.as_bytes:
            checks.dtype(dtype, "tensor")
        for op in ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND"):
            with pytest.raises(
                UnsupportedError,
                match=f"^tensor: {op} cannot reduce dtype {dtype}: no ReduceOp applies",
            ):
                checks.reduction(op.lower(), dtype, "tensor")


def _as_real(key: str, dtypes: list[str], ops: list[str]) -> dict[str, Any]:
    """A copy of the shipped table whose backend ``key`` moves ``dtypes`` as real numbers."""
    table = copy.deepcopy(tables.load("capabilities"))
    rule = {"dtypes": dtypes, "reduce_ops": ops, "reason": "x", "source": "measured: x"}
    table[key]["as_real"] = rule
    return table


@pytest.mark.parametrize(
    ("table", "words"),
    [
        (lambda: _as_real("gloo", ["float32"], ["sum"]), "only dtypes of kind complex"),
        (lambda: _as_real("gloo", ["complex32"], ["sum"]), "unknown dtypes"),
        (lambda: _as_real("hccl", ["complex128"], ["sum"]), "travels as float64, not in hccl"),
        (lambda: _as_real("gloo", ["complex64"], ["sum", "max2"]), "unknown ReduceOps"),
    ],
)
def test_a_table_moving_as_real_what_cannot_travel_so_is_rejected(
    table: Callable[[], dict[str, Any]], words: str
) -> None:
    with pytest.raises(TableError, match=words):
        schema.validate("capabilities", table())


def test_a_complex_dtype_names_a_real_dtype_of_half_its_size() -> None:
    table = copy.deepcopy(tables.load("dtypes"))
    table["dtypes"]["complex128"]["real"] = "float32"
    with pytest.raises(TableError, match="expected a float dtype of half its size"):
        schema.validate("dtypes", table)
    del table["dtypes"]["complex128"]["real"]
    with pytest.raises(TableError, match="expected exactly on the complex dtypes"):
        schema.validate("dtypes", table)


@pytest.mark.parametrize(
    "key", [k for k, e in tables.load("capabilities").items() if "as_real" in e]
)
def test_as_real_claims_hold_in_compat_s_checks(key: str) -> None:
    """What a backend's ``as_real`` claims, held against compat's own checks (stand-ins for the
    adapter and the world: no communication): each complex dtype passes the non-reducing check
    as real numbers, the table's ops reduce it (checked as its real dtype), every other ReduceOp
    is refused naming the parameter, the op and the dtype; the rank cases cover exactly these
    dtypes (tests/ranks/complex_cases.py, run on Gloo and MCCL)."""
    from types import SimpleNamespace

    from compat.core.checks import Checks
    from tests.ranks.complex_cases import COMPLEX

    entry = tables.lookup("capabilities", key)
    rule = entry["as_real"]
    assert set(rule["dtypes"]) == set(COMPLEX)
    world = SimpleNamespace(size=lambda: 2)
    checks = Checks(SimpleNamespace(framework=entry["framework"]), key, entry, 0, world, {})  # type: ignore[arg-type]
    for dtype in rule["dtypes"]:
        assert checks.as_real[dtype] == tables.lookup("dtypes", "dtypes", dtype, "real")
        with pytest.raises(UnsupportedError):
            checks.dtype(dtype, "tensor")  # not the backend's own: compat moves it
        for op in entry["reduce_ops"]:
            if op in rule["reduce_ops"]:
                assert checks.reduction(op, dtype, "tensor").value == op
                continue
            name = ReduceOp(op).name
            words = f"^tensor: {name} cannot reduce dtype {dtype}: on complex tensors only"
            with pytest.raises(UnsupportedError, match=words):
                checks.reduction(op, dtype, "tensor")


def test_complex_is_moved_where_its_real_dtypes_are_and_nowhere_else_unsaid() -> None:
    """The backends run here (Gloo, MCCL and its primitives path) move both complex dtypes as
    real numbers; the others either do too (torch's NCCL, read) or refuse complex, which no
    backend takes itself."""
    complex_dtypes = {
        n for n, e in tables.lookup("dtypes", "dtypes").items() if e["kind"] == "complex"
    }
    for key, entry in tables.load("capabilities").items():
        assert not complex_dtypes & set(entry["dtypes"]), key
        if key in ("gloo", "mccl", "mccl_primitives"):
            assert set(entry["as_real"]["dtypes"]) == complex_dtypes, key
            assert entry["as_real"]["source"].startswith("measured: tests/ranks/complex_cases.py")
