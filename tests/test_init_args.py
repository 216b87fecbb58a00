"""compat.init's rank and world_size: torch's default -1 means "not given" (as None); any other
negative value is a ValueError naming the parameter, raised before a framework is imported or a
process group is made. (tests/test_interop.py runs torchrun jobs that pass -1 on both
frameworks.)"""

from __future__ import annotations

import sys

import pytest

import compat
from compat.base.adapter import Rendezvous
from compat.lifecycle import _check_rendezvous


@pytest.mark.parametrize(
    ("init_method", "rank", "world_size", "expected"),
    [
        (None, -1, -1, Rendezvous(None, None, None)),
        ("env://", -1, -1, Rendezvous("env://", None, None)),
        (None, None, None, Rendezvous(None, None, None)),
        ("env://", 1, -1, Rendezvous("env://", 1, None)),
        ("env://", -1, 4, Rendezvous("env://", None, 4)),
        ("tcp://127.0.0.1:29500", 1, 2, Rendezvous("tcp://127.0.0.1:29500", 1, 2)),
    ],
)
def test_minus_one_means_not_given(
    init_method: str | None, rank: int | None, world_size: int | None, expected: Rendezvous
) -> None:
    assert _check_rendezvous(init_method, rank, world_size) == expected


@pytest.mark.parametrize(
    ("kwargs", "error", "fragments"),
    [
        ({"rank": -2}, ValueError, ["rank:", "-1 or None: not given", "got -2"]),
        ({"world_size": -2}, ValueError, ["world_size:", ">= 1", "got -2"]),
        ({"world_size": 0}, ValueError, ["world_size:", "got 0"]),
        ({"rank": 2, "world_size": 2}, ValueError, ["rank:", "[0, world_size=2)", "got 2"]),
        ({"rank": "0"}, TypeError, ["rank:", "expected an int"]),
        (
            {"init_method": "tcp://127.0.0.1:29500", "rank": -1, "world_size": 2},
            ValueError,
            ["rank:", "expected rank and world_size", "rank=None"],
        ),
        ({"store": object()}, ValueError, ["store:", "rank and world_size", "rank=None"]),
        (
            {"store": object(), "init_method": "env://", "rank": 0, "world_size": 1},
            ValueError,
            ["store:", "no init_method", "init_method='env://'"],
        ),
        ({"group_name": 1}, TypeError, ["group_name:", "expected a str", "int"]),
        ({"device_id": -1}, ValueError, ["device_id:", "index >= 0", "got -1"]),
        ({"device_id": True}, ValueError, ["device_id:", "got True"]),
    ],
)
def test_other_values_are_refused_before_anything_starts(
    kwargs: dict[str, object], error: type[Exception], fragments: list[str]
) -> None:
    before = {name for name in ("torch", "mindspore") if name in sys.modules}
    with pytest.raises(error) as raised:
        compat.init("torch", **kwargs)  # type: ignore[arg-type]
    message = str(raised.value)
    assert message.startswith(fragments[0]), message
    for fragment in fragments[1:]:
        assert fragment in message, message
    # the check runs before the adapter (and so torch) is imported
    assert {name for name in ("torch", "mindspore") if name in sys.modules} == before
