"""compat.tensor: tests/ranks/dtensor_cases.py on real ranks (Gloo and MCCL at 2 and 3 ranks),
read from the collective jobs that run them; and what needs no ranks: the names' resolution
per framework and compat's placements."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from compat.tensor import dtensor, placements
from tests.jobs import BACKGROUND, JOB_TIMEOUT, JobSpec, collective_job
from tests.ranks.cases import CASES


@pytest.mark.parametrize(
    ("framework", "world"),
    [
        pytest.param(framework, world, marks=pytest.mark.job(collective_job(framework, world)))
        for framework, world in (("torch", 2), ("torch", 3), ("mindspore", 2), ("mindspore", 3))
    ],
)
def test_dtensor_on_real_ranks(framework: str, world: int) -> None:
    job = collective_job(framework, world)
    names = [name for name in job.cases if name.startswith("dtensor-")]
    assert len(names) == (11 if framework == "torch" else 7), names
    result = BACKGROUND.result(job)
    failures = [failure for name in names if (failure := result.failure(name)) is not None]
    assert not failures, "\n\n".join(failures)


@pytest.mark.long
@pytest.mark.parametrize("framework", ["torch", "mindspore"])
def test_dtensor_on_a_two_by_two_mesh(framework: str) -> None:
    """The rank cases at 4 ranks, where the (2, 2) mesh shards one tensor dim on both mesh
    dims: every layout to every other, compared with numpy (and, on torch, torch's own)."""
    names = tuple(
        name for name, case in CASES.items()
        if name.startswith("dtensor-") and framework in case.frameworks
    )  # fmt: skip
    result = JobSpec(framework, 4, "tests.ranks.cases", names, JOB_TIMEOUT[framework]).run()
    failures = [failure for name in names if (failure := result.failure(name)) is not None]
    assert not failures, "\n\n".join(failures)


def _run(script: str) -> str:
    """What ``script`` prints in a fresh process (imports decide compat.tensor's names)."""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout.strip()


def test_names_are_the_imported_frameworks() -> None:
    """torch: torch's own objects; MindSpore: compat's emulation."""
    names = ("DTensor", "Shard", "Replicate", "Partial", "Placement", "distribute_tensor")
    on_torch = (
        "import torch.distributed.tensor as native, compat.tensor as t\n"
        f"print(all(getattr(t, n) is getattr(native, n) for n in {names}))"
    )
    assert _run(on_torch) == "True"
    on_mindspore = (
        "import mindspore, compat.tensor as t\n"
        "from compat.tensor import dtensor, placements\n"
        f"print([getattr(t, n).__module__ for n in {names}])"
    )
    own = ["compat.tensor.dtensor"] + ["compat.tensor.placements"] * 4 + ["compat.tensor.dtensor"]
    assert _run(on_mindspore) == str(own)


def test_unknown_name_is_an_attribute_error() -> None:
    import compat.tensor

    with pytest.raises(AttributeError, match=r"'compat\.tensor' has no attribute 'zeros'"):
        compat.tensor.zeros  # noqa: B018
    assert {"DTensor", "Shard", "distribute_tensor"} <= set(dir(compat.tensor))


def test_chunk_sizes_are_torch_chunks() -> None:
    import torch

    for size in range(0, 12):
        for count in range(1, 5):
            pieces = torch.chunk(torch.arange(size), count) if size else ()
            expected = [len(piece) for piece in pieces]
            expected += [0] * (count - len(expected))
            assert dtensor.chunk_sizes(size, count) == expected, (size, count)


def test_placements_as_torchs() -> None:
    from torch.distributed.tensor import Partial, Replicate, Shard

    pairs = [
        (placements.Shard(0), Shard(0)),
        (placements.Shard(-1), Shard(-1)),
        (placements.Replicate(), Replicate()),
        (placements.Partial(), Partial()),
        (placements.Partial("max"), Partial("max")),
    ]
    for ours, theirs in pairs:
        assert (repr(ours), str(ours), hash(ours)) == (repr(theirs), str(theirs), hash(theirs))
        assert [ours.is_shard(), ours.is_replicate(), ours.is_partial()] == [
            theirs.is_shard(), theirs.is_replicate(), theirs.is_partial()
        ]  # fmt: skip
        assert pickle.loads(pickle.dumps(ours)) == ours
    assert placements.Shard(1) == placements.Shard(1) != placements.Shard(0)
    assert placements.Partial() != placements.Replicate()
    with pytest.raises(TypeError, match=r"^dim: expected an int; got"):
        placements.Shard("0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^reduce_op: expected one of"):
        placements.Partial("mean")
