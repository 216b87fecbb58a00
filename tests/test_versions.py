"""The tested framework releases (frameworks.toml ``tested_versions``): the package's extras allow
that range, and a process on a release outside it gets one warning naming it."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest

from compat.base import tables
from compat.core import dispatch, versions

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_release_reads_local_and_pre_release_versions() -> None:
    assert versions.release("2.13.0+cpu") == (2, 13, 0)
    assert versions.release("2.10.0rc1") == (2, 10, 0)
    expected = "version: expected a release such as '2.7.1'; got 'x'"
    with pytest.raises(ValueError, match=re.escape(expected)):
        versions.release("x")


@pytest.mark.parametrize(
    ("framework", "version", "tested"),
    [
        ("torch", "2.7.1", True),
        ("torch", "2.13.0+cpu", True),
        ("torch", "2.14.1", True),
        ("torch", "2.7.0", False),
        ("torch", "2.15.0", False),
        ("mindspore", "2.9.0", True),
        ("mindspore", "2.10.0", True),
        ("mindspore", "2.8.0", False),
        ("mindspore", "2.11.0", False),
    ],
)
def test_untested_releases_get_a_message_naming_the_tested_range(
    framework: str, version: str, tested: bool
) -> None:
    message = versions.untested_message(framework, version)
    if tested:
        assert message is None
    else:
        oldest, newest = versions.tested_range(framework)
        assert message == (
            f"compat is tested with {framework} {oldest} to {newest}; this process runs "
            f"{framework} {version}: compat may fail or behave differently here"
        )


def test_the_warning_is_given_once_per_framework(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(versions, "_warned", set())
    monkeypatch.setattr(versions, "installed_version", lambda framework: "2.6.0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        versions.warn_if_untested("torch")
        versions.warn_if_untested("torch")
    assert [str(w.message) for w in caught] == [versions.untested_message("torch", "2.6.0")]
    assert all(issubclass(w.category, versions.UntestedVersionWarning) for w in caught)


def test_the_installed_releases_here_are_tested() -> None:
    """The development environment (make setup) runs releases inside the range: no warning."""
    for framework in dispatch.installed():
        version = versions.installed_version(framework)
        assert versions.untested_message(framework, version) is None, (framework, version)


def test_the_extras_allow_exactly_the_tested_range() -> None:
    """``collective-compat[torch]`` installs from the oldest tested release to below the minor
    release after the newest (pyproject.toml), the range frameworks.toml records."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for framework in tables.load("frameworks"):
        oldest, newest = versions.tested_range(framework)
        major, minor, _ = versions.release(newest)
        requirement = next(
            entry for entry in project["optional-dependencies"][framework]
            if entry.startswith(framework)
        )  # fmt: skip
        specifiers = set(requirement[len(framework) :].split(","))
        lower = next(s for s in specifiers if s.startswith(">="))
        assert versions.release(lower[2:]) == versions.release(oldest), requirement
        assert specifiers - {lower} == {f"<{major}.{minor + 1}"}, requirement


def test_the_readme_states_the_tested_ranges() -> None:
    readme = (ROOT / "README.md").read_text()
    names = {"torch": "torch", "mindspore": "MindSpore"}
    for framework in tables.load("frameworks"):
        oldest, newest = versions.tested_range(framework)
        assert f"| {names[framework]} | {oldest} to {newest} |" in readme, framework


def test_make_test_versions_reads_the_tested_releases() -> None:
    """The Python line make test-versions runs for its list of releases runs here (it named a
    module the package no longer had once) and gives each framework's oldest and newest."""
    import subprocess

    makefile = (ROOT / "Makefile").read_text()
    code = re.search(r'\$\(PY\) -c "([^"]+)"', makefile.split("test-versions:", 1)[1])
    assert code is not None, "make test-versions has no $(PY) -c line"
    printed = subprocess.run(
        [sys.executable, "-c", code.group(1)], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    assert printed == versions.tested_releases()
    assert printed[:2] == ["torch==2.7.1", "torch==2.14.1"]
