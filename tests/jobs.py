"""Run rank-side cases as real multi-process jobs (through compat.launch) and read the results.

One job per (framework, world size) runs many cases, since starting ranks is the slow part.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compat.tools.launch import launch

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
