"""``compat bench`` end to end at tiny sizes on both frameworks (every op, ``--framework both``,
and world size 1), its option parsing, and the capability table's algorithm choices (every named
algorithm exists and takes the right arguments). The algorithms' results are checked on real ranks
in tests/ranks/algorithm_cases.py; their speed is not tested here."""

from __future__ import annotations

import argparse
import ast
import csv
import inspect
import io
import math
import re
import sys
import types
from pathlib import Path

import pytest

from compat import algorithms
from compat.base import tables
from compat.tools import bench, bench_cases
from tests.jobs import BACKGROUND, CommandResult, CommandSpec

EXPECTED_COLUMNS = ["framework", "backend", "world_size", "dtype", *bench.COLUMNS, "native"]

#: The ops whose own work bench measures (the object collectives' and batch_isend_irecv's are not
#: separable).
MEASURED_OWN_WORK = [op for op, spec in bench.SPECS.items() if spec.noop]


def test_parse_sizes() -> None:
    assert bench.parse_sizes("1K..4K", 2) == [1024, 2048, 4096]
    assert bench.parse_sizes("1K..64M", 4)[-1] == 64 * 2**20
    assert len(bench.parse_sizes("1K..64M", 4)) == 9
    assert bench.parse_sizes("4096", 4) == [4096]
    with pytest.raises(ValueError, match="--sizes"):
        bench.parse_sizes("4K..1K", 2)
    with pytest.raises(ValueError, match="--sizes"):
        bench.parse_size("lots")


def test_parse_ops() -> None:
    assert bench.parse_ops("all") == bench.OPS
    assert bench.parse_ops("barrier") == ("barrier",)
    assert bench.parse_ops("all_reduce, broadcast") == ("all_reduce", "broadcast")
    with pytest.raises(ValueError, match=r"--op: expected .* got 'all_reduce,nope'"):
        bench.parse_ops("all_reduce,nope")


def _args(**given: object) -> argparse.Namespace:
    return bench.build_parser().parse_args([f"--{name}={value}" for name, value in given.items()])


def test_defaults_keep_a_sweep_of_every_op_short() -> None:
    assert bench.settings(_args(op="all_reduce")) == bench.Settings(("all_reduce",), 10, 0.1)
    assert bench.settings(_args()) == bench.Settings(bench.OPS, 5, 0.02)
    assert bench.settings(_args(op="all", rounds=3, budget=0.5)).rounds == 3
    with pytest.raises(ValueError, match="--algorithm: expected one --op"):
        bench.settings(_args(op="all", algorithm="native"))
    with pytest.raises(ValueError, match="--rounds: expected an int >= 1; got 0"):
        bench.settings(_args(rounds=0))
    assert bench.settings(_args()).own_work_spread == bench.OWN_WORK_SPREAD_S == 6.0
    assert bench.settings(_args(**{"own-work-spread": 0})).own_work_spread == 0
    with pytest.raises(ValueError, match=r"--own-work-spread: expected seconds >= 0; got -1\.0"):
        bench.settings(_args(**{"own-work-spread": -1}))


def test_own_work_rounds_are_spread_over_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rounds timing compat's own work are spread over the seconds asked per op, a pause
    before each (this machine's speed changes for seconds at a time: rounds one after another
    fall in one window), the ops taking turns within each round, so every op's rounds span the
    whole phase; each op's round starts with untimed calls that warm the caches the pause let
    go cold. An op's no-ops are in place while its calls run, and only then. compat's state is
    a stand-in here: the bench itself runs on real ranks below."""
    stood_in: dict[str, object] = {}
    adapter = types.SimpleNamespace()

    class Runtime:
        def __init__(self) -> None:
            self.adapter = adapter

        def stand_in(self, name: str, dtype: str, run: object) -> None:
            assert dtype == "float32"
            stood_in[name] = run

    pauses: list[float] = []
    calls = {name: {"compat": 0, "native": 0} for name in ("all_reduce", "broadcast")}
    # ("pause", None) and ("clock", (op, its compat calls so far)): where the rounds are timed
    events: list[tuple[str, tuple[str, int] | None]] = []
    clock = [0.0]
    running = [""]

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        events.append(("pause", None))

    def perf_counter() -> float:
        events.append(("clock", (running[0], calls[running[0]]["compat"])))
        clock[0] += 1.0 if running[0] == "all_reduce" else 2.0
        return clock[0]

    monkeypatch.setattr(bench.state, "current", Runtime)
    monkeypatch.setattr(bench.time, "sleep", pause)
    monkeypatch.setattr(bench.time, "perf_counter", perf_counter)

    def pair(name: str) -> bench.Pair:
        other = "broadcast" if name == "all_reduce" else "all_reduce"

        def compat_call() -> None:
            assert stood_in[name] is bench._no_op and getattr(adapter, name) is bench._no_op
            assert stood_in.get(other) is None and not hasattr(adapter, other)
            running[0] = name
            calls[name]["compat"] += 1

        def native_call() -> None:
            calls[name]["native"] += 1

        return bench.Pair(compat_call, native_call)

    cases = [bench.OwnWorkCase(pair(name), (name,), "float32") for name in calls]
    measured = bench.own_work(cases, 3.0)
    assert pauses == [3.0 * 2 / bench.OWN_WORK_ROUNDS] * bench.OWN_WORK_ROUNDS
    # Each round: a pause, then each op in turn: the untimed calls that warm the caches again,
    # then the timed calls.
    warming, timed = bench.OWN_WORK_WARM_CALLS, bench.OWN_WORK_CALLS
    rounds = [events[5 * index : 5 * index + 5] for index in range(bench.OWN_WORK_ROUNDS)]
    for index, (paused, *clocks) in enumerate(rounds):
        assert paused == ("pause", None), index
        done = 100 + index * (warming + timed)  # each op's calls before this round
        for name, (start, end) in zip(calls, [clocks[0:2], clocks[2:4]], strict=True):
            assert start == ("clock", (name, done + warming)), (index, name)
            assert end == ("clock", (name, done + warming + timed)), (index, name)
    rounds_calls = bench.OWN_WORK_ROUNDS * (warming + timed)
    assert calls == {name: {"compat": 100 + rounds_calls + 100, "native": 100} for name in calls}
    # all_reduce's rounds took 1 s on the stand-in clock, broadcast's 2 s.
    assert [(m.fastest, m.median) for m in measured] == [(1 / timed,) * 2, (2 / timed,) * 2]
    assert all(m.after > 0 for m in measured)
    assert stood_in == {"all_reduce": None, "broadcast": None}
    assert not hasattr(adapter, "all_reduce") and not hasattr(adapter, "broadcast")


def test_algorithm_must_run_the_ops_collective() -> None:
    """--algorithm is checked before any rank starts, against every table entry it forces: the
    op's own, or the one the op runs (scatter_tensor and the object collectives run scatter's
    entry, all_reduce_coalesced all_reduce's, isend_irecv isend's and irecv's)."""
    assert bench.forced_entries("scatter_tensor", True) == ["scatter"]
    assert bench.forced_entries("scatter_object_list", True) == ["scatter"]
    assert bench.forced_entries("all_reduce_coalesced", True) == ["all_reduce"]
    assert bench.forced_entries("isend_irecv", True) == ["isend", "irecv"]
    assert bench.forced_entries("reduce_scatter", False) == ["reduce_scatter"]
    assert bench.forced_entries("reduce_scatter", True) == ["reduce_scatter_tensor"]
    for op, name in [
        ("scatter_tensor", "shared_memory_p2p_scatter"),
        ("scatter_object_list", "native"),
        ("all_reduce_coalesced", "pairwise_all_gather_reduce"),
        ("isend_irecv", "native"),
        ("reduce_scatter", "buffered_send_reduce_scatter"),  # the list form, where not joined
        ("reduce_scatter", "buffered_send_reduce_scatter_tensor"),  # joined: the tensor form's
        ("monitored_barrier", "reported_barrier"),
    ]:
        assert bench.settings(_args(op=op, algorithm=name)).ops == (op,), (op, name)
    refused = [
        ("all_reduce", "pairwise_all_gather_reduc", "compat.algorithms has no function"),
        ("scatter_tensor", "gather_reduce_to_dst", "scatter: algorithm 'gather_reduce_to_dst'"),
        ("isend_irecv", "shared_memory_isend", "irecv: algorithm 'shared_memory_isend'"),
    ]
    for op, name, reason in refused:
        with pytest.raises(ValueError, match=rf"--algorithm: expected .* --op {op}'s .*; got "
                           rf"'{name}' \(.*{re.escape(reason)}"):  # fmt: skip
            bench.settings(_args(op=op, algorithm=name))
    # An algorithm of one rank on more, before any rank starts (it refused each call).
    assert bench.settings(_args(op="broadcast", algorithm="one_rank_broadcast"), 1).ops
    with pytest.raises(
        ValueError,
        match=r"got 'one_rank_broadcast' \(broadcast: "
        r"one_rank_broadcast runs groups of at most 1 rank; this group has 2 ranks\)",
    ):
        bench.settings(_args(op="broadcast", algorithm="one_rank_broadcast"), 2)
    # On the ranks, with the adapter's answer: the list form's algorithm where the parts are
    # joined (they run as the tensor form) is refused there.
    bench.check_algorithm("reduce_scatter", "buffered_send_reduce_scatter", joins=False)
    with pytest.raises(ValueError, match="reduce_scatter_tensor: algorithm"):
        bench.check_algorithm("reduce_scatter", "buffered_send_reduce_scatter", joins=True)


def test_both_frameworks_sweep_the_sizes_they_share() -> None:
    assert bench.common_sizes(["torch", "mindspore"]) == "1K..16M"
    assert bench.common_sizes(["torch"]) == bench.default_sizes("torch")


def test_bus_bandwidth_follows_nccl_tests() -> None:
    values = bench.row("all_reduce", 10**9, 1, "native", 1.0, 2.0, 4)
    assert values["compat_algbw_GBps"] == 1.0
    assert values["compat_busbw_GBps"] == 1.5  # 2(n-1)/n
    assert values["native_busbw_GBps"] == 0.75
    assert values["ratio"] == 0.5
    assert bench.row("all_reduce", 1024, 256, "native", 77e-6, 9013e-6, 2)["ratio"] == 0.008543
    values = bench.row("reduce_scatter_tensor", 10**9, 1, "native", 1.0, 1.0, 4)
    assert values["compat_busbw_GBps"] == 0.75  # (n-1)/n
    for op in ("all_to_all_single", "all_to_all", "scatter", "gather", "all_gather"):
        assert bench.row(op, 10**9, 1, "native", 1.0, 1.0, 4)["compat_busbw_GBps"] == 0.75, op
    for op in ("broadcast", "reduce", "isend_irecv"):
        assert bench.row(op, 10**9, 1, "native", 1.0, 1.0, 4)["compat_busbw_GBps"] == 1.0, op
    barrier = bench.row("barrier", 0, 0, "native", 1.0, 1.0, 4)
    assert barrier["compat_algbw_GBps"] is None and barrier["native_busbw_GBps"] is None


def _own_ops(framework: str) -> set[str]:
    """The ops a framework's bench_cases module builds itself, read from its source (without
    importing MindSpore here: seconds)."""
    path = Path(bench_cases.__file__).with_name(f"{framework}.py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_OWN":
            assert isinstance(node.value, ast.Dict)
            return {key.value for key in node.value.keys if isinstance(key, ast.Constant)}
    raise AssertionError(f"{path}: no _OWN")


def test_every_op_has_a_compat_call_and_a_native_one_on_each_framework() -> None:
    assert set(bench.COMPAT_CALLS) == set(bench.OPS)
    assert set(bench_cases.builders("torch")) == set(bench.OPS)
    assert set(bench_cases.SHARED) | _own_ops("mindspore") == set(bench.OPS)
    # A shared builder describes its call from DESCRIPTIONS; every framework names its own.
    assert set(bench_cases.DESCRIPTIONS) == set(bench_cases.SHARED)
    torch_cases = bench_cases.framework("torch")
    for op in bench.OPS:
        assert torch_cases.describe(op).startswith("torch.distributed."), op


def test_every_chosen_algorithm_exists() -> None:
    forms = {"reduce_scatter": "input_list", "reduce_scatter_tensor": "tensor"}
    for backend, entry in tables.load("capabilities").items():
        for op, cap in entry["ops"].items():
            for choice in cap.get("choose", []):
                name = choice["algorithm"]
                if name == "native":
                    continue
                function = getattr(algorithms, name, None)
                assert function is not None, f"{backend}.{op}: no compat.algorithms.{name}"
                params = list(inspect.signature(function).parameters)
                if op in forms:
                    assert params[2] == forms[op], f"{backend}.{op}: {name} takes {params}"


def bench_command(*options: str, timeout: float, outputs: tuple[str, ...] = ()) -> CommandSpec:
    """``compat bench`` with ``options``, stopped by its own --timeout 20 s before ours."""
    argv = (sys.executable, "-m", "compat", "bench", "--timeout", str(timeout - 20), *options)
    return CommandSpec(argv, timeout, outputs)


def succeeded(run: CommandResult) -> CommandResult:
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


#: The ops that move no data: one row, size 0.
BARRIERS = ("barrier", "monitored_barrier")


def _check_rows(records: list[dict[str, str]], framework: str, sizes: list[int]) -> None:
    """Every op's rows: one per size (barrier: one, size 0), with sane values."""
    for op in bench.OPS:
        rows = [r for r in records if r["framework"] == framework and r["op"] == op]
        expected = [0] if op in BARRIERS else sizes
        assert [int(r["bytes"]) for r in rows] == expected, (framework, op, rows)
        for record in rows:
            where = (framework, op, record["bytes"])
            assert record["world_size"] == "2" and record["algorithm"], where
            assert record["native"], where
            compat_us, native_us = float(record["compat_us"]), float(record["native_us"])
            # Positive and finite; how long they took is the machine's speed, not checked here.
            assert all(0 < t < math.inf for t in (compat_us, native_us)), where
            assert float(record["ratio"]) == pytest.approx(compat_us / native_us, rel=0.05)
            assert float(record["control"]) > 0, where
            if op in BARRIERS:
                assert record["compat_algbw_GBps"] == "" and record["elements"] == "0", where
            else:
                factor = bench.BUS_FACTOR[op](2)
                algbw, busbw = (
                    float(record["compat_algbw_GBps"]),
                    float(record["compat_busbw_GBps"]),
                )
                # compat_us is rounded to 0.1 us and algbw to 0.001 GB/s: both roundings allowed.
                rounding = 0.0005 + algbw * 0.05 / compat_us
                expected = int(record["bytes"]) / compat_us / 1e3
                assert algbw == pytest.approx(expected, abs=rounding + 1e-9), where
                assert busbw == pytest.approx(algbw * factor, abs=0.002), where
            for own in (record["own_work_us"], record["own_work_after_collective_us"]):
                assert (float(own) > 0) if op in MEASURED_OWN_WORK else own == "", where


#: Every op on both frameworks, run in the background while other tests run (tests/jobs.py).
BOTH_RUN = bench_command(
    "-n", "2", "--framework", "both", "--sizes", "1K..2K", "--factor", "2", "--rounds", "1",
    "--budget", "0.001", "--own-work-spread", "0.1", "--control", "--csv", "bench.csv",
    timeout=400, outputs=("bench.csv",),
)  # fmt: skip


@pytest.mark.job(BOTH_RUN)
def test_bench_every_op_on_both_frameworks_side_by_side() -> None:
    """One torch/Gloo job and one MindSpore/MCCL job of 2 ranks, every op, two sizes each."""
    run = succeeded(BACKGROUND.result(BOTH_RUN))
    out = run.stdout
    records = list(csv.DictReader(io.StringIO(run.files["bench.csv"], newline="")))
    assert list(records[0]) == EXPECTED_COLUMNS
    for framework in ("torch", "mindspore"):
        _check_rows(records, framework, [1024, 2048])
    lines = out.splitlines()
    # How MindSpore launched the ops timed: its default here (the case execution_note checks the
    # note against the process's threads, in both launches).
    assert sum(line.startswith("# mindspore: launch: asynchronous") for line in lines) == 1, out
    assert not any(line.startswith("# torch: ") for line in lines), out
    for op in bench.OPS:
        assert any(line.startswith(f"# {op}: native = ") for line in lines), op
    for op in MEASURED_OWN_WORK:
        assert sum(f"# {op}: compat's own work per call" in line for line in lines) == 2, op
    # The side-by-side table: a block per op, one row per size, within 100 columns.
    summary = lines[next(i for i, line in enumerate(lines) if line.startswith("# side by side")) :]
    assert all(len(line) <= 100 for line in summary[1:]), summary
    head = summary[2].split()
    assert head[:4] == ["size", "gloo", "compat", "gloo"] and head[-1] == "mccl/gloo", head
    for op in bench.OPS:
        block = summary[summary.index(f"# {op}") + 2 :][: 1 if op in BARRIERS else 2]
        assert [row.split()[0] for row in block] == (["0"] if op in BARRIERS else ["1K", "2K"])
        assert all(len(row.split()) == 10 for row in block), block


def test_algorithm_forces_the_entry_the_op_runs() -> None:
    """--algorithm native on ops that run another op's table entry (scatter_tensor and
    scatter_object_list run scatter's): the rows say native, where the table chooses shared
    memory on this host. Before, the entry forced was named after the op: native crashed the
    ranks (no such entry), and any other algorithm was forced where no call reads it."""
    for op in ("scatter_tensor", "scatter_object_list"):
        run = succeeded(bench_command(
            "-n", "2", "--framework", "torch", "--op", op, "--algorithm", "native", "--sizes",
            "1K", "--rounds", "1", "--budget", "0.001", "--own-work-spread", "0.1", "--csv",
            "rows.csv", timeout=120, outputs=("rows.csv",),
        ).run())  # fmt: skip
        records = list(csv.DictReader(io.StringIO(run.files["rows.csv"], newline="")))
        assert [record["algorithm"] for record in records] == ["native"], (op, records)
    refused = bench_command(
        "-n", "2", "--framework", "torch", "--op", "scatter_tensor", "--algorithm",
        "gather_reduce_to_dst", timeout=60,
    ).run()  # fmt: skip
    assert refused.returncode != 0
    assert "--algorithm: expected 'native' or a compat.algorithms function" in refused.stderr
    assert "[rank" not in refused.stdout + refused.stderr  # refused before any rank started


def test_bench_at_world_size_one_measures_compat_own_work() -> None:
    out = succeeded(bench_command(
        "-n", "1", "--framework", "torch", "--sizes", "1K", "--rounds", "1", "--budget", "0.001",
        "--own-work-spread", "0.1", timeout=120,
    ).run()).stdout  # fmt: skip
    assert "# isend_irecv: needs 2 ranks or more; skipped" in out
    for op in (op for op in MEASURED_OWN_WORK if not bench.SPECS[op].peers):
        line = next(line for line in out.splitlines() if line.startswith(f"# {op}: compat's own"))
        found = re.search(r": ([\d.]+) us back to back, ([\d.]+) us right after a native", line)
        assert found, line
        assert all(0 < float(value) < math.inf for value in found.groups()), line
