"""Parity: the same seeded inputs through torch/Gloo and MindSpore/MCCL give the same results.

Every result the collective cases check is recorded per rank; here each framework's record is
compared with the other's: equal for integer dtypes, allclose for floating ones. The random-float
cases (parity_random[...]) make the floating comparison a real one.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.jobs import collective_job
from tests.ranks.cases import case_names


@pytest.mark.parametrize(
    "world",
    [
        pytest.param(
            w, marks=pytest.mark.job(collective_job("torch", w), collective_job("mindspore", w))
        )
        for w in (2, 3)
    ],
)
def test_torch_and_mindspore_agree(jobs, world: int) -> None:
    torch_job, ms_job = jobs.get("torch", world), jobs.get("mindspore", world)
    shared = set(case_names("torch", world)) & set(case_names("mindspore", world))
    compared = 0
    for rank in range(world):
        torch_records, ms_records = torch_job.records[rank], ms_job.records[rank]
        keys = {key for key in torch_records if key.split("#")[0] in shared}
        assert keys, f"rank {rank}: torch recorded nothing"
        missing = keys ^ {key for key in ms_records if key.split("#")[0] in shared}
        assert not missing, f"rank {rank}: recorded by one framework only: {sorted(missing)[:10]}"
        for key in sorted(keys):
            ours, theirs = torch_records[key], ms_records[key]
            message = f"rank {rank}, {key}"
            if np.issubdtype(ours.dtype, np.floating):
                np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-6, err_msg=message)
            else:
                np.testing.assert_array_equal(theirs, ours, err_msg=message)
            compared += 1
    assert compared >= 300 * world, f"only {compared} results compared"
