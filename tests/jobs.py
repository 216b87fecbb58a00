"""Run rank-side cases as real multi-process jobs (through compat.launch) and read the results.

One job per (framework, world size) runs many cases, since starting ranks is the slow part.

The suite's large jobs are :class:`JobSpec` values run by :data:`BACKGROUND`: tests that read
one carry ``pytest.mark.job(spec)``, and conftest.py moves them to the end of the session and
starts their jobs as the first test starts. The jobs then run one at a time in a thread while the
other tests run, most of which wait on ranks of their own: run one after another, the suite
kept two cores busy 58 % of its 15 minutes (17.4 CPU minutes); with the jobs beside the other
tests, 87 % of 10.8 minutes.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, overload

import numpy as np

from compat.tools.launch import launch
from tests.processes import run_bounded
from tests.ranks.cases import case_names
from tests.ranks.kit import FOREIGN_TENSORS

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class JobResult:
    framework: str
    world: int
    exit_code: int
    output: str
    # per rank: case -> None (passed) | error text; a case started but not ended is "hung"
    ranks: list[dict[str, str | None]] = field(default_factory=list)
    # per rank: "<case>#<index>" -> a result the case checked (for the parity test)
    records: list[dict[str, np.ndarray]] = field(default_factory=list)

    def failure(self, case: str) -> str | None:
        """None if every rank passed ``case``; else a description of what went wrong."""
        problems = []
        for rank, results in enumerate(self.ranks):
            if case not in results:
                problems.append(f"rank {rank}: the case never ran")
            elif results[case] is not None:
                problems.append(f"rank {rank}: {results[case]}")
        if not problems:
            return None
        tail = "\n".join(self.output.splitlines()[-40:])
        return (
            f"{self.framework} world {self.world}, job exit code {self.exit_code}\n"
            + "\n".join(problems)
            + f"\n--- last lines of the job's output ---\n{tail}"
        )


def run_job(
    framework: str,
    world: int,
    module: str,
    cases: list[str],
    timeout: float,
    env: dict[str, str] | None = None,
) -> JobResult:
    with tempfile.TemporaryDirectory(prefix="compat-job-") as results_dir:
        sink = io.StringIO()
        env = {
            **(env or {}),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        code = launch(
            world,
            ["-m", "tests.ranks.runner", results_dir, module, *cases],
            framework,
            timeout=timeout,
            env=env,
            sink=sink,
            python=sys.executable,
        )
        ranks, records = [], []
        for rank in range(world):
            arrays = Path(results_dir, f"rank{rank}.npz")
            if arrays.exists():
                with np.load(arrays) as loaded:
                    records.append({key: loaded[key] for key in loaded.files})
            else:
                records.append({})
            results: dict[str, str | None] = {}
            path = Path(results_dir, f"rank{rank}.jsonl")
            lines = path.read_text().splitlines() if path.exists() else []
            for line in lines:
                record = json.loads(line)
                if record["event"] == "start":
                    results[record["case"]] = "hung or crashed: started but never ended"
                else:
                    results[record["case"]] = record["error"]
            ranks.append(results)
        return JobResult(framework, world, code, sink.getvalue(), ranks, records)


@dataclass(frozen=True)
class JobSpec:
    """A job :func:`run_job` runs: which cases, where, how long it may take."""

    framework: str
    world: int
    module: str
    cases: tuple[str, ...]
    timeout: float
    env: tuple[tuple[str, str], ...] = ()

    def run(self) -> JobResult:
        return run_job(
            self.framework, self.world, self.module, list(self.cases), self.timeout,
            env=dict(self.env),
        )  # fmt: skip


@dataclass
class CommandResult:
    """A command's exit code and output, and the files it wrote."""

    returncode: int
    stdout: str
    stderr: str
    #: file name -> text, for each of :attr:`CommandSpec.outputs` the command wrote
    files: dict[str, str]


@dataclass(frozen=True)
class CommandSpec:
    """A command run to its end (killed after ``timeout`` seconds) in an empty directory of its
    own, from which the files named in ``outputs`` are read back. ``env``: its whole environment
    (default: this process's)."""

    argv: tuple[str, ...]
    timeout: float
    outputs: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] | None = None

    def run(self) -> CommandResult:
        env = None if self.env is None else dict(self.env)
        with tempfile.TemporaryDirectory(prefix="compat-command-") as directory:
            done = run_bounded(self.argv, self.timeout, env, cwd=directory)
            files = {
                name: Path(directory, name).read_text(encoding="utf-8")
                for name in self.outputs
                if Path(directory, name).exists()
            }
        return CommandResult(done.returncode, done.stdout, done.stderr, files)


class JobQueue:
    """Runs jobs (anything with a ``run()``: :class:`JobSpec`, :class:`CommandSpec`) in one
    background thread, one at a time, each once, in the order started."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="compat-test-jobs")
        self._futures: dict[JobSpec | CommandSpec, Future[Any]] = {}

    def start(self, spec: JobSpec | CommandSpec) -> None:
        if spec not in self._futures:
            self._futures[spec] = self._executor.submit(spec.run)

    @overload
    def result(self, spec: JobSpec) -> JobResult: ...
    @overload
    def result(self, spec: CommandSpec) -> CommandResult: ...
    def result(self, spec: JobSpec | CommandSpec) -> JobResult | CommandResult:
        """The job's result, once it has run (started now if it was not)."""
        self.start(spec)
        return self._futures[spec].result()

    def stop(self) -> None:
        """Drop the jobs not yet started (the one running ends within its timeout)."""
        self._executor.shutdown(wait=False, cancel_futures=True)


#: The queue the suite's large jobs run in.
BACKGROUND = JobQueue()

#: The world sizes of the collective jobs, per framework. MindSpore runs at 1 too: a world of
#: one takes paths the others do not (a list of one part is its part), and MCCL refused an
#: empty all_reduce there that compat had passed it (found that way).
#: COMPAT_TEST_FRAMEWORKS (comma-separated) limits them to those frameworks: make test-versions
#: runs each framework's suite in an environment that has only that framework.
WORLDS = {
    framework: worlds
    for framework, worlds in {"torch": (1, 2, 3), "mindspore": (1, 2, 3)}.items()
    if framework in os.environ.get("COMPAT_TEST_FRAMEWORKS", "torch,mindspore").split(",")
}

#: Seconds a collective job may take before it is stopped (no test can hang).
JOB_TIMEOUT = {"torch": 300.0, "mindspore": 600.0}


#: The environment of each collective job, by (framework, world size). MindSpore at 3 ranks
#: launches its ops synchronously (``mindspore.runtime.launch_blocking()``, which
#: MS_DEV_LAUNCH_BLOCKING=1 sets from the start): by default each rank's op pipeline (three queue
#: threads, and the caller waiting on them) spins while an MCCL message is on its way, and 3 ranks
#: on 2 cores then take 16 ms a send/recv ring where synchronous launch takes 0.7 ms (the job:
#: 125 s against 64 s). Users choose either launch; the 2-rank jobs run the default one.
JOB_ENVIRONMENT: dict[tuple[str, int], tuple[tuple[str, str], ...]] = {
    ("mindspore", 3): (("MS_DEV_LAUNCH_BLOCKING", "1"),),
}


#: The world size of the collective job whose ranks pass compat the other framework's tensors
#: (the bad-input cases about them, the fuzz's foreign arguments: tests/ranks/kit.py
#: FOREIGN_TENSORS); the other jobs' ranks never load the other framework. 2: the least world
#: that runs every one of those cases (a receive needs a peer).
FOREIGN_TENSORS_WORLD = 2


@cache
def collective_job(framework: str, world: int) -> JobSpec:
    """Every collective case of ``framework`` at ``world`` ranks, in one job."""
    cases = tuple(case_names(framework, world))
    environment = JOB_ENVIRONMENT.get((framework, world), ())
    if world == FOREIGN_TENSORS_WORLD:
        environment = (*environment, (FOREIGN_TENSORS, "1"))
    return JobSpec(
        framework, world, "tests.ranks.cases", cases, JOB_TIMEOUT[framework], environment
    )
