from __future__ import annotations

import pytest

from tests.jobs import BACKGROUND, JobResult, collective_job


class Jobs:
    """The collective jobs, each run once per session (in the background: tests/jobs.py)."""

    def get(self, framework: str, world: int) -> JobResult:
        return BACKGROUND.result(collective_job(framework, world))


@pytest.fixture(scope="session")
def jobs() -> Jobs:
    return Jobs()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "job(spec, ...): the test reads these jobs (tests/jobs.py runs them early)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that read a background job go last: the other tests run while the jobs do."""
    reads = [item for item in items if item.get_closest_marker("job") is not None]
    items[:] = [item for item in items if item.get_closest_marker("job") is None] + reads


def pytest_runtestloop(session: pytest.Session) -> None:
    """The jobs start as the tests do (not for --collect-only), in the order they are read."""
    if session.config.option.collectonly:
        return
    for item in session.items:
        for marker in item.iter_markers("job"):
            for spec in marker.args:
                BACKGROUND.start(spec)


def pytest_sessionfinish() -> None:
    """A session cut short (-x, Ctrl-C) drops the jobs not yet started."""
    BACKGROUND.stop()
