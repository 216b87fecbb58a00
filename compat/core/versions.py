"""The framework releases compat is tested with (frameworks.toml ``tested_versions``), and the one
warning a process running another release gets."""

from __future__ import annotations

import re
import sys
import warnings
from importlib import metadata

from compat.base import tables

#: The frameworks this process was already warned about (one warning per framework).
_warned: set[str] = set()


class UntestedVersionWarning(UserWarning):
    """The framework's release is outside the range compat is tested with."""


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string: ``"2.13.0+cpu"`` and ``"2.13.0rc1"`` give
    ``(2, 13, 0)``."""
    found = re.match(r"\d+(?:\.\d+)*", version)
    if found is None:
        raise ValueError(f"version: expected a release such as '2.7.1'; got {version!r}")
    return tuple(int(part) for part in found.group().split("."))


def tested_range(framework: str) -> tuple[str, str]:
    """The oldest and newest release of ``framework`` compat is tested with."""
    tested = tables.lookup("frameworks", framework, "tested_versions")
    return tested["oldest"], tested["newest"]


def untested_message(framework: str, version: str) -> str | None:
    """The warning for ``framework`` at ``version``, or None where that release is tested."""
    oldest, newest = tested_range(framework)
    if release(oldest) <= release(version)[:3] <= release(newest):
        return None
    return (
        f"compat is tested with {framework} {oldest} to {newest}; this process runs {framework} "
        f"{version}: compat may fail or behave differently here"
    )


def installed_version(framework: str) -> str:
    """The release of ``framework`` this process runs (its module's ``__version__`` once it is
    imported, else the installed distribution's)."""
    module_name = tables.lookup("frameworks", framework, "module")
    version = getattr(sys.modules.get(module_name), "__version__", None)
    return str(version) if version is not None else metadata.version(module_name)


def running_release(framework: str) -> tuple[int, ...] | None:
    """The release of ``framework`` this process runs (:func:`installed_version`), or None where
    it is not installed (``compat docs`` and ``compat info`` then read the newest facts)."""
    try:
        return release(installed_version(framework))
    except metadata.PackageNotFoundError:
        return None


def warn_if_untested(framework: str) -> None:
    """Warn once per process when ``framework``'s release is outside the tested range."""
    if framework in _warned:
        return
    _warned.add(framework)
    message = untested_message(framework, installed_version(framework))
    if message is not None:
        warnings.warn(message, UntestedVersionWarning, stacklevel=3)


def tested_releases() -> list[str]:
    """Each framework's oldest and newest tested release as a pip requirement (``torch==2.7.1``;
    each framework's name is its distribution's and its extra's), for make test-versions."""
    return [
        f"{framework}=={version}"
        for framework in tables.load("frameworks")
        for version in tested_range(framework)
    ]
