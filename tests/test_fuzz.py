"""Argument fuzzing (issue 17): generated bad arguments for every public function of compat.

The rank-side trials are cases of the collective jobs (tests/ranks/fuzz_cases.py, one case per
function, reported by tests/test_collectives.py as ``fuzz[<function>]``); here their counts are
collected from the jobs' output and printed per function (``pytest -s -k fuzz`` shows the
table), the job is checked for fuzz cases that hung (none can: the trials never
communicate), and compat.comm, which needs no ranks, is fuzzed in this process on both frameworks.
Every public function is checked to have a generator. The long sweep (``make test-long``) runs
many more trials, with two bad arguments at once, in jobs of their own.
"""

from __future__ import annotations

import inspect
import json
import re
from collections import defaultdict
from functools import cache
from typing import Any

import pytest

import compat
from tests.jobs import BACKGROUND, WORLDS, JobResult, collective_job, run_job
from tests.ranks.cases import case_names
from tests.ranks.fuzz_cases import COMM_SPECS, REPORT_PREFIX, SPECS, Tally, run_spec
from tests.ranks.kit import FOREIGN_TENSORS
from tests.test_collectives import primitives_job

#: Public callables with nothing to fuzz: init cannot run twice in a process (its arguments
#: are tests/test_init_args.py's), the others take no arguments; classes are not functions
#: (but P2POp, whose constructor checks its op, is fuzzed).
#: Functions without arguments to fuzz (init's are bad_input_cases.py's).
NOT_FUZZED = {
    "init", "is_available", "is_backend_available", "is_initialized", "get_framework",
    "get_free_port", "get_socket_with_port",
}  # fmt: skip
COLUMNS = (
    "tried", "raised", "accepted", "unexpected", "modified", "control_failed",
    "generator_failed", "skipped", "controls",
)  # fmt: skip
FAILING = ("accepted", "unexpected", "modified", "control_failed", "generator_failed")


def public_functions() -> set[str]:
    names = {
        name
        for name in compat.__all__
        if inspect.isfunction(getattr(compat, name)) or name == "P2POp"
    }
    names |= {
        f"autograd.{name}"
        for name, value in vars(compat.autograd).items()
        if inspect.isfunction(value) and not name.startswith("_")
        and value.__module__ == "compat.autograd"
    }  # fmt: skip
    names |= {f"comm.{name}" for name in compat.comm.__all__}
    return names - NOT_FUZZED


def test_every_public_function_has_a_generator() -> None:
    fuzzed = {spec.name for spec in SPECS} | {spec.name for spec in COMM_SPECS}
    assert public_functions() == fuzzed, (
        f"without a generator: {sorted(public_functions() - fuzzed)}; "
        f"generators of no public function: {sorted(fuzzed - public_functions())}"
    )


def job_counts(job: JobResult) -> dict[str, list[dict[str, Any]]]:
    """function -> the counts each rank printed (``COMPAT-FUZZ {json}`` lines)."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in job.output.splitlines():
        match = re.search(re.escape(REPORT_PREFIX) + r"(\{.*\})\s*$", line)
        if match:
            counts = json.loads(match.group(1))
            found[counts["function"]].append(counts)
    return found


def table(title: str, rows: dict[str, dict[str, int]], columns: tuple[str, ...] = COLUMNS) -> str:
    """``rows`` (function -> counts) as a text table with a total line."""
    total = {column: sum(row.get(column, 0) for row in rows.values()) for column in columns}
    width = max([len("function"), *(len(name) for name in rows)])
    lines = [title, f"{'function':<{width}}  " + "  ".join(columns)]
    for name, row in [*sorted(rows.items()), ("total", total)]:
        cells = "  ".join(f"{row.get(column, 0):>{len(column)}}" for column in columns)
        lines.append(f"{name:<{width}}  {cells}")
    return "\n".join(lines)


def summed(per_rank: list[dict[str, Any]]) -> dict[str, int]:
    return {column: sum(counts.get(column, 0) for counts in per_rank) for column in COLUMNS}


def check_job(job: JobResult, framework: str, world: int) -> str:
    """The fuzz counts of ``job``: every function reported by every rank, nothing hung, no
    failure; returns the table."""
    expected = [name for name in case_names(framework, world) if name.startswith("fuzz[")]
    hung = [
        f"rank {rank}: {case}"
        for rank, results in enumerate(job.ranks)
        for case, error in results.items()
        if case.startswith("fuzz[") and error is not None and error.startswith("hung or crashed")
    ]
    counts = job_counts(job)
    missing = [name for name in expected if len(counts.get(name[len("fuzz[") : -1], [])) != world]
    rows = {name: summed(per_rank) for name, per_rank in counts.items()}
    report = table(f"fuzz counts, {framework} world {world} (summed over ranks)", rows)
    print("\n" + report + f"\nhung: {len(hung)}")
    assert not hung, f"fuzz cases hung: {hung}"
    assert not missing, f"no counts from every rank for {missing}\n{report}"
    failing = {name: row for name, row in rows.items() if any(row[c] for c in FAILING)}
    assert not failing, f"bad calls that went wrong (details: test_collectives):\n{report}"
    assert all(row["tried"] > 0 for row in rows.values()), report
    return report


@pytest.mark.parametrize(
    ("framework", "world"),
    [
        pytest.param(f, w, id=f"{f}-ws{w}", marks=pytest.mark.job(collective_job(f, w)))
        for f, worlds in WORLDS.items()
        for w in worlds
    ],
)
def test_fuzz_counts(jobs, framework: str, world: int) -> None:
    """The counts of the fuzz cases of the collective jobs (which test_collectives runs)."""
    check_job(jobs.get(framework, world), framework, world)


@pytest.mark.parametrize(
    "world",
    [pytest.param(w, marks=pytest.mark.job(primitives_job(w))) for w in (2, 3)],
)
def test_fuzz_counts_on_the_primitives_path(world: int) -> None:
    """The fuzz cases of the COMPAT_MINDSPORE_PRIMITIVES=1 job (MCCL through MindSpore's ops
    primitives, as on GPU; tests/test_collectives.py::test_primitives_path runs it)."""
    check_job(BACKGROUND.result(primitives_job(world)), "mindspore", world)


@pytest.mark.job(*(collective_job(f, w) for f, worlds in WORLDS.items() for w in worlds))
def test_fuzz_summary(jobs) -> None:
    """One table for both frameworks: bad calls tried per function, summed over
    the jobs' ranks (world sizes 1-3, tests.jobs.WORLDS), and what went wrong."""
    rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for framework, worlds in WORLDS.items():
        for world in worlds:
            job = jobs.get(framework, world)
            for name, per_rank in job_counts(job).items():
                counts = summed(per_rank)
                rows[name][framework] += counts["tried"]
                for column in ("accepted", "unexpected", "modified"):
                    rows[name][column] += counts[column]
            for results in job.ranks:
                for case, error in results.items():
                    hung = error is not None and error.startswith("hung or crashed")
                    if case.startswith("fuzz[") and hung:
                        rows[case[len("fuzz[") : -1]]["hangs"] += 1
    for framework in WORLDS:
        for tally in fuzz_comm(framework, rounds=3, combos=0):
            rows[tally.function][framework] += tally.tried
    columns = ("torch", "mindspore", "accepted", "unexpected", "modified", "hangs")
    print("\n" + table("bad calls per function (make test)", rows, columns))
    assert not any(rows[name][c] for name in rows for c in columns[2:])


def _kit(framework: str) -> Any:
    pytest.importorskip(framework)
    from tests.ranks.kit import make_kit

    return make_kit(framework)


@cache  # test_fuzz_comm and the summary read the same trials (a failed run is not kept)
def fuzz_comm(framework: str, rounds: int, combos: int) -> tuple[Tally, ...]:
    kit = _kit(framework)
    tallies = [run_spec(kit, spec, False, rounds, combos) for spec in COMM_SPECS]
    rows = {tally.function: tally.counts() for tally in tallies}
    print("\n" + table(f"fuzz counts, compat.comm on {framework}", rows))
    failures = [failure for tally in tallies for failure in tally.failures]
    assert not failures, f"{len(failures)} bad calls went wrong:\n" + "\n".join(failures[:10])
    assert all(tally.tried > 0 for tally in tallies)
    return tuple(tallies)


@pytest.mark.parametrize("framework", ["torch", "mindspore"])
def test_fuzz_comm(framework: str) -> None:
    """compat.comm is local: its trials run here, a few per generator."""
    fuzz_comm(framework, rounds=3, combos=0)


# -- the long sweep ---------------------------------------------------------------------------

#: The sweep's ranks pass the other framework's tensors too (kit.FOREIGN_TENSORS).
LONG_ENV = {
    "COMPAT_FUZZ_ROUNDS": "25", "COMPAT_FUZZ_COMBOS": "150", "COMPAT_FUZZ_SEED": "1717",
    FOREIGN_TENSORS: "1",
}  # fmt: skip
LONG_TIMEOUT = {"torch": 900.0, "mindspore": 1500.0}


@pytest.mark.long
@pytest.mark.parametrize(
    ("framework", "world"),
    [pytest.param(f, w, id=f"{f}-ws{w}") for f, worlds in WORLDS.items() for w in worlds],
)
def test_fuzz_sweep(framework: str, world: int) -> None:
    """Many more trials per generator, and trials with two bad arguments, in a job of their own
    (the fuzz cases alone)."""
    cases = [name for name in case_names(framework, world) if name.startswith("fuzz[")]
    job = run_job(
        framework, world, "tests.ranks.cases", cases, LONG_TIMEOUT[framework], env=LONG_ENV
    )
    problems = [problem for case in cases if (problem := job.failure(case)) is not None]
    assert not problems, "\n\n".join(problems[:5])
    check_job(job, framework, world)


@pytest.mark.long
@pytest.mark.parametrize("framework", ["torch", "mindspore"])
def test_fuzz_comm_sweep(framework: str) -> None:
    fuzz_comm(framework, rounds=int(LONG_ENV["COMPAT_FUZZ_ROUNDS"]) * 4, combos=600)
