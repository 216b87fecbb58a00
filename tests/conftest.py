from __future__ import annotations

import pytest

from tests.jobs import JobResult, run_job
from tests.ranks.cases import case_names

# Seconds a whole job may take before it is stopped (no test can hang).
JOB_TIMEOUT = {"torch": 300.0, "mindspore": 600.0}


class Jobs:
    """Runs each (framework, world size) job once per session, on first use."""

    def __init__(self) -> None:
        self._results: dict[tuple[str, int], JobResult] = {}

    def get(self, framework: str, world: int) -> JobResult:
        key = (framework, world)
        if key not in self._results:
            cases = case_names(framework, world)
            self._results[key] = run_job(
                framework, world, "tests.ranks.cases", cases, JOB_TIMEOUT[framework]
            )
        return self._results[key]


@pytest.fixture(scope="session")
def jobs() -> Jobs:
    return Jobs()
