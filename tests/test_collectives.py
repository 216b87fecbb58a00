"""Every public collective on real ranks, checked against numpy: torch/Gloo at world sizes 1-3,
MindSpore/MCCL at 2 and 3.

Each case runs inside a multi-rank job (see tests/ranks/cases.py); this file reports each as a
test of its own.
"""

from __future__ import annotations

import pytest

from tests.ranks.cases import case_names

WORLDS = {"torch": (1, 2, 3), "mindspore": (2, 3)}

PARAMS = [
    pytest.param(framework, world, name, id=f"{framework}-ws{world}-{name}")
    for framework, worlds in WORLDS.items()
    for world in worlds
    for name in case_names(framework, world)
]


@pytest.mark.parametrize(("framework", "world", "case"), PARAMS)
def test_case(jobs, framework: str, world: int, case: str) -> None:
    failure = jobs.get(framework, world).failure(case)
    if failure is not None:
        pytest.fail(failure, pytrace=False)
