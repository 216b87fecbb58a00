"""Groups made by their members only (``new_group(use_local_synchronization=True)``,
``split_group``): tests/ranks/member_group_cases.py on real ranks, Gloo at 2 and 3 ranks and
MindSpore MCCL at 2 and 3, each program under a hard timeout."""

from __future__ import annotations

import pytest

from tests.jobs import JobSpec
from tests.ranks.cases import case_names


@pytest.mark.parametrize(
    ("framework", "world"),
    [("torch", 2), ("torch", 3), ("mindspore", 2), ("mindspore", 3)],
)
def test_member_only_groups_on_real_ranks(framework: str, world: int) -> None:
    names = tuple(name for name in case_names(framework, world) if name.startswith("member_groups"))
    spec = JobSpec(framework, world, "tests.ranks.cases", names, 300)
    result = spec.run()
    failures = [failure for name in spec.cases if (failure := result.failure(name)) is not None]
    assert not failures, "\n\n".join(failures)
