"""``compat bench`` end to end at tiny sizes on both frameworks, its size parsing, and the
capability table's algorithm choices (every named algorithm exists and takes the right
arguments). The algorithms' results are checked on real ranks in tests/ranks/algorithm_cases.py;
their speed is not tested here."""

from __future__ import annotations

import csv
import inspect
import subprocess
import sys

import pytest

from compat import algorithms, tables
from compat.tools import bench

EXPECTED_COLUMNS = [
    "framework",
    "backend",
    "world_size",
    "dtype",
    *bench.COLUMNS,
    "native",
]


def test_parse_sizes() -> None:
    assert bench.parse_sizes("1K..4K", 2) == [1024, 2048, 4096]
    assert bench.parse_sizes("1K..64M", 4)[-1] == 64 * 2**20
    assert len(bench.parse_sizes("1K..64M", 4)) == 9
    assert bench.parse_sizes("4096", 4) == [4096]
    with pytest.raises(ValueError, match="--sizes"):
        bench.parse_sizes("4K..1K", 2)
    with pytest.raises(ValueError, match="--sizes"):
        bench.parse_size("lots")


def test_bus_bandwidth_follows_nccl_tests() -> None:
    values = bench.row("all_reduce", 10**9, 1, "native", 1.0, 2.0, 4)
    assert values["compat_algbw_GBps"] == 1.0
    assert values["compat_busbw_GBps"] == 1.5  # 2(n-1)/n
    assert values["native_busbw_GBps"] == 0.75
    assert values["ratio"] == 0.5
    values = bench.row("reduce_scatter_tensor", 10**9, 1, "native", 1.0, 1.0, 4)
    assert values["compat_busbw_GBps"] == 0.75  # (n-1)/n


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


@pytest.mark.parametrize("framework", ["torch", "mindspore"])
def test_bench_runs_end_to_end(framework: str, tmp_path) -> None:
    table = tmp_path / "bench.csv"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "compat",
            "bench",
            "-n",
            "2",
            "--framework",
            framework,
            "--sizes",
            "1K..4K",
            "--factor",
            "2",
            "--rounds",
            "1",
            "--budget",
            "0.001",
            "--op",
            "reduce_scatter_tensor",
            "--csv",
            str(table),
            "--control",
            "--timeout",
            "200",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "native = " in out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("size"))
    for column in ("compat us", "algbw", "busbw", "native us", "ratio", "algorithm", "control"):
        assert column in header, header
    rows = [
        line.split() for line in out.splitlines() if line.split()[:1] in (["1K"], ["2K"], ["4K"])
    ]
    assert [row[0] for row in rows] == ["1K", "2K", "4K"], out
    assert "compat's own work per call" in out
    with open(table, newline="", encoding="utf-8") as handle:
        records = list(csv.DictReader(handle))
    assert list(records[0]) == EXPECTED_COLUMNS
    assert [int(r["bytes"]) for r in records] == [1024, 2048, 4096]
    assert all(float(r["control"]) > 0 for r in records), records
    for record in records:
        assert record["framework"] == framework and record["world_size"] == "2"
        assert float(record["compat_us"]) > 0 and float(record["native_us"]) > 0
        assert float(record["ratio"]) == pytest.approx(
            float(record["compat_us"]) / float(record["native_us"]), rel=0.05
        )
