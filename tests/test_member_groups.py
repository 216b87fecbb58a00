"""Groups made by their members only (``new_group(use_local_synchronization=True)``,
``split_group``): tests/ranks/member_group_cases.py on real ranks, Gloo at 2 and 3 ranks (3 also
without shared memory: the backend's own calls) and MindSpore MCCL at 2 and 3, each program
under a hard timeout, in jobs of their own (tests.ranks.cases.own_job_case_names says why)."""

from __future__ import annotations

import pytest

from tests.jobs import JOB_ENVIRONMENT, JobSpec
from tests.ranks.cases import own_job_case_names


@pytest.mark.parametrize(
    ("framework", "world", "environment"),
    [
        ("torch", 2, ()),
        ("torch", 3, ()),
        ("torch", 3, (("COMPAT_SHARED_MEMORY", "0"),)),
        ("mindspore", 2, ()),
        ("mindspore", 3, JOB_ENVIRONMENT.get(("mindspore", 3), ())),
    ],
)
def test_member_only_groups_on_real_ranks(
    framework: str, world: int, environment: tuple[tuple[str, str], ...]
) -> None:
    names = tuple(own_job_case_names("member_groups-", framework, world))
    assert len(names) == 4, names
    spec = JobSpec(framework, world, "tests.ranks.cases", names, 300, environment)
    result = spec.run()
    failures = [failure for name in spec.cases if (failure := result.failure(name)) is not None]
    assert not failures, "\n\n".join(failures)


def test_split_lists_out_of_order_refused_where_torch_keeps_the_listed_order() -> None:
    """compat's own check (no ranks): where the installed torch's split_group numbers a split's
    ranks as listed (2.14 on), a list out of increasing order is refused naming it, since
    compat's groups number their ranks in sorted order; up to 2.13 torch sorts, and so does
    compat. (The rank cases run the installed torch's rule.)"""
    from compat.lifecycle import _check_listed_order

    _check_listed_order([[2, 0], [1]], listed_order=False)
    with pytest.raises(ValueError, match=r"^split_ranks\[0\]: expected the ranks in increasing"):
        _check_listed_order([[2, 0], [1]], listed_order=True)
    _check_listed_order([[0, 2], [1]], listed_order=True)
