"""Argument checks that run on the calling rank before any communication.

Each failure names the parameter, what was expected and what was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compat.core.dispatch import framework_of


def describe(obj: object) -> str:
    """A short description of a value for error messages."""
    framework = framework_of(obj)
    if framework is not None:
        shape = tuple(getattr(obj, "shape", ()))
        return f"a {framework} tensor of shape {shape} and dtype {getattr(obj, 'dtype', '?')}"
    text = repr(obj)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(obj).__name__} {text}"


def check_bool(value: object, param: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{param}: expected a bool; got {describe(value)}")
    return value


def check_int(value: object, param: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{param}: expected an int; got {describe(value)}")
    return value


def check_list(value: object, param: str, length: int) -> list[Any]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{param}: expected a list of {length} tensors; got {describe(value)}")
    if len(value) != length:
        raise ValueError(
            f"{param}: expected a list of {length} tensors (one per rank of the group); "
            f"got {len(value)}"
        )
    return list(value)


def check_split_sizes(
    sizes: object, param: str, parts: int, total: int, dim_param: str, dim: int = 0
) -> list[int]:
    """Split sizes: a sequence of ``parts`` non-negative ints that sum to ``total`` (the size of
    dim ``dim`` of ``dim_param``)."""
    if not isinstance(sizes, Sequence) or isinstance(sizes, str):
        raise TypeError(f"{param}: expected a list of {parts} ints; got {describe(sizes)}")
    return check_sizes(
        sizes, param, parts, total, per="rank of the group", of=f"dim {dim} of {dim_param}"
    )


def check_sizes(
    items: Sequence[object], param: str, parts: int, total: int, *, per: str, of: str
) -> list[int]:
    """The rule for split sizes: ``parts`` ints (one per ``per``), each >= 0, summing to ``total``
    (``of`` says what that is). The caller checks which containers it takes."""
    values = [check_int(size, f"{param}[{i}]") for i, size in enumerate(items)]
    if len(values) != parts:
        raise ValueError(
            f"{param}: expected {parts} sizes (one per {per}); got {len(values)}: {values}"
        )
    if any(size < 0 for size in values):
        raise ValueError(f"{param}: expected sizes >= 0; got {values}")
    if sum(values) != total:
        raise ValueError(
            f"{param}: expected sizes summing to {total} ({of}); got {values} (sum {sum(values)})"
        )
    return values


def even_split(total: int, parts: int, param: str, dim: int = 0) -> list[int]:
    if total % parts:
        raise ValueError(
            f"{param}: expected dim {dim} divisible by the group size {parts}; got {total}"
        )
    return [total // parts] * parts


def check_absent(value: object, param: str, root_param: str, root: int, rank: int) -> None:
    """A root-only list on another rank: None or an empty list/tuple (torch's default), else the
    ValueError naming ``param``; never ``bool()`` of what was given (a tensor's raises)."""
    if value is not None and not (isinstance(value, (list, tuple)) and not value):
        raise ValueError(
            f"{param}: expected None on ranks other than {root_param}={root}; got "
            f"{describe(value)} on rank {rank}"
        )


def check_shape(actual: tuple[int, ...], expected: tuple[int, ...], param: str, why: str) -> None:
    if actual != expected and tuple(actual) != tuple(expected):
        raise ValueError(f"{param}: expected shape {tuple(expected)} ({why}); got {tuple(actual)}")


def check_dtype(actual: str, expected: str, param: str, why: str) -> None:
    if actual != expected:
        raise TypeError(f"{param}: expected dtype {expected} ({why}); got {actual}")
