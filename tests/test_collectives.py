"""Every public collective on real ranks, checked against numpy: torch/Gloo and MindSpore/MCCL
at world sizes 1-3 (tests.jobs.WORLDS).

Each case runs inside a multi-rank job (see tests/ranks/cases.py); this file reports each as a
test of its own.
"""

from __future__ import annotations

import re

import pytest

from tests.jobs import (
    BACKGROUND,
    FOREIGN_TENSORS_WORLD,
    JOB_ENVIRONMENT,
    WORLDS,
    JobSpec,
    collective_job,
)
from tests.ranks.cases import case_names
from tests.ranks.kit import FOREIGN_TENSORS

PARAMS = [
    pytest.param(
        framework,
        world,
        name,
        id=f"{framework}-ws{world}-{name}",
        marks=pytest.mark.job(collective_job(framework, world)),
    )
    for framework, worlds in WORLDS.items()
    for world in worlds
    for name in case_names(framework, world)
]


@pytest.mark.parametrize(("framework", "world", "case"), PARAMS)
def test_case(jobs, framework: str, world: int, case: str) -> None:
    failure = jobs.get(framework, world).failure(case)
    if failure is not None:
        pytest.fail(failure, pytrace=False)


def test_one_collective_job_per_framework_passes_the_other_frameworks_tensors() -> None:
    """The bad-input cases about the other framework's tensors, and the fuzz's foreign
    arguments, pass real ones in the collective job at FOREIGN_TENSORS_WORLD, and only there
    (tests/ranks/kit.py foreign_tensors: elsewhere a numpy array stands in, and no rank pays the
    other framework's import); that job runs every one of those cases."""
    flag = (FOREIGN_TENSORS, "1")
    for framework, worlds in WORLDS.items():
        passing = [world for world in worlds if flag in collective_job(framework, world).env]
        assert passing == [FOREIGN_TENSORS_WORLD], (framework, passing)
        cases = collective_job(framework, FOREIGN_TENSORS_WORLD).cases
        for name in ("other_framework_tensor", "irecv_other_framework_tensor"):
            assert f"bad_input[{name}]" in cases, name
    assert flag not in own_transport_job("torch").env


#: The cases not run again without shared memory: those about shared memory itself (its
#: algorithms, the mailbox, its windows), and the algorithms called directly (algorithm[...]),
#: which take the adapter's own calls whatever the setting (the suite above runs them), the
#: stores, which use no collective of their own, and the device meshes (their groups' layout;
#: their one all_reduce a dim is the collective cases').
NOT_REPEATED = re.compile(r"(algorithm\[|mailbox-|shared_memory-|store-|mesh-)")
#: Every group without a shared-memory window (compat.transport.shared_memory.ENVIRONMENT).
BACKEND_TRANSPORT = {"COMPAT_SHARED_MEMORY": "0"}


def own_transport_job(framework: str) -> JobSpec:
    names = tuple(name for name in case_names(framework, 2) if not NOT_REPEATED.match(name))
    return JobSpec(framework, 2, "tests.ranks.cases", names, 600, tuple(BACKEND_TRANSPORT.items()))


@pytest.mark.parametrize(
    "framework",
    [pytest.param(f, marks=pytest.mark.job(own_transport_job(f))) for f in WORLDS],
)
def test_every_case_on_the_backends_own_transport(framework: str) -> None:
    """Every case but those of NOT_REPEATED, with COMPAT_SHARED_MEMORY=0: the backend's own
    calls (torch: the process group's methods, Gloo's send/recv; MCCL's collectives, its sends
    with deferred receives), which ranks on several hosts take, and NCCL and HCCL always, while
    the suite above runs through shared memory wherever the capability table chooses it."""
    spec = own_transport_job(framework)
    job = BACKGROUND.result(spec)
    failures = [failure for name in spec.cases if (failure := job.failure(name)) is not None]
    assert not failures, failures[0]


#: MCCL through MindSpore's ops primitives, the path MindSpore's GPU backend takes
#: (capabilities.toml [mccl_primitives], [mindspore_nccl]): the collective cases, without those
#: about shared memory and the algorithms called directly (NOT_REPEATED), and the cases that
#: check which implementation and primitive ran.
PRIMITIVES = {"COMPAT_MINDSPORE_PRIMITIVES": "1"}


#: The cases of the switch's job in make test: each collective per dtype (sum for the reducing
#: ones), its group and async forms, one layout each, uneven and empty parts, all_to_all, the
#: soak's short sequences, the fuzz, values wider than 32 bits, the bitwise ops, float8 and
#: complex; the whole suite runs with the switch in make test-long
#: (test_primitives_path_every_case): 2 jobs of it took minutes more than make test's budget.
PRIMITIVES_SHORT = re.compile(
    r"(all_reduce|reduce_scatter|reduce_scatter_tensor|reduce_scatter_into|reduce)\[sum-"
    r"|(all_gather|all_gather_into_tensor|all_gather_into|broadcast|scatter|scatter_tensor|gather"
    r"|all_to_all_single)\["
    r"|layout-[a-z_]+\[strided\]|a2a_all_to_all\[(float32|int64|uneven|even-group-async)\]"
    r"|(all_gather|reduce_scatter|all_to_all_single)_uneven$|empty|barrier$|random-sequence\[seed1\]"
    r"|fuzz\[|wide\[|bitwise\[|float8\[|complex\["
)


def primitives_job(world: int, every_case: bool = False) -> JobSpec:
    """One job: the cases that check which implementation and primitive ran, then the suite's."""
    names = tuple(
        name
        for name in case_names("mindspore", world)
        if not NOT_REPEATED.match(name) and (every_case or PRIMITIVES_SHORT.match(name))
    )
    environment = (*PRIMITIVES.items(), *JOB_ENVIRONMENT.get(("mindspore", world), ()))
    cases = (*PRIMITIVE_CASES, *names)
    return JobSpec("mindspore", world, "tests.ranks.primitive_cases", cases, 900, environment)


PRIMITIVE_CASES = ("primitive-path", "primitive-all_reduce")


@pytest.mark.parametrize("world", [2, 3])
def test_primitives_job_holds_the_layouts_the_short_soak_and_the_fuzz(world: int) -> None:
    """The switch's job runs the layout cases, the soak's short sequences and the fuzz cases
    (tests/test_fuzz.py reads the fuzz counts of this same job)."""
    cases = primitives_job(world).cases
    for prefix in ("layout-", "random-sequence[", "fuzz["):
        assert any(name.startswith(prefix) for name in cases), prefix


#: Where COMPAT_TEST_FRAMEWORKS leaves MindSpore out (make test-versions' torch environments,
#: which have no MindSpore), the switch's jobs cannot start: skipped, with that reason.
NO_MINDSPORE = pytest.mark.skip(reason="COMPAT_TEST_FRAMEWORKS leaves out mindspore")


@pytest.mark.parametrize(
    "world",
    [
        pytest.param(w, marks=pytest.mark.job(primitives_job(w)))
        if "mindspore" in WORLDS
        else pytest.param(w, marks=NO_MINDSPORE)
        for w in (2, 3)
    ],
)
def test_primitives_path(world: int) -> None:
    """With COMPAT_MINDSPORE_PRIMITIVES=1 every case passes on MCCL at 2 and 3 ranks, each
    collective resolved to [mccl_primitives]' implementation and run over ops.AllGather and
    ops.Broadcast (primitive-path), and MindSpore GPU's ops.AllReduce call is right."""
    spec = primitives_job(world)
    job = BACKGROUND.result(spec)
    failures = [failure for name in spec.cases if (failure := job.failure(name)) is not None]
    assert not failures, f"{len(failures)} failed; the first:\n{failures[0]}"


@pytest.mark.long
@pytest.mark.parametrize(
    "world", [pytest.param(w, marks=() if "mindspore" in WORLDS else NO_MINDSPORE) for w in (2, 3)]
)
def test_primitives_path_every_case(world: int) -> None:
    """Every case of the suite (but NOT_REPEATED's) with COMPAT_MINDSPORE_PRIMITIVES=1 on MCCL:
    2 ranks took 140 s, 3 ranks longer, on 2 shared cores (make test-long)."""
    spec = primitives_job(world, every_case=True)
    job = spec.run()
    failures = [failure for name in spec.cases if (failure := job.failure(name)) is not None]
    assert not failures, f"{len(failures)} failed; the first:\n{failures[0]}"
