"""compat.tensor.parallel: tests/ranks/tensor_parallel_cases.py on real ranks (Gloo and MCCL at 2
and 3 ranks), read from the collective jobs that run them (the names' resolution per framework
among them: case_tp_names_are_the_frameworks); and what needs no ranks: compat's styles'
arguments and reprs (torch's), torch.chunk's sizes, the capability records."""

from __future__ import annotations

import pytest

import compat
from compat.tensor.parallel import style
from compat.tensor.placements import Partial, Replicate, Shard
from tests.jobs import BACKGROUND, collective_job


@pytest.mark.parametrize(
    ("framework", "world"),
    [
        pytest.param(framework, world, marks=pytest.mark.job(collective_job(framework, world)))
        for framework, world in (("torch", 2), ("torch", 3), ("mindspore", 2), ("mindspore", 3))
    ],
)
def test_tensor_parallel_on_real_ranks(framework: str, world: int) -> None:
    job = collective_job(framework, world)
    names = [name for name in job.cases if name.startswith("tp-")]
    assert len(names) == (5 if framework == "torch" else 6), names
    result = BACKGROUND.result(job)
    failures = [failure for name in names if (failure := result.failure(name)) is not None]
    assert not failures, "\n\n".join(failures)


def test_reprs_and_defaults_are_torchs() -> None:
    import torch.distributed.tensor as theirs
    import torch.distributed.tensor.parallel as native

    for ours, torchs in [
        ({}, {}),
        ({"input_layouts": Shard(0), "output_layouts": Replicate()},
         {"input_layouts": theirs.Shard(0), "output_layouts": theirs.Replicate()}),
        ({"use_local_output": False}, {"use_local_output": False}),
    ]:  # fmt: skip
        for name in ("ColwiseParallel", "RowwiseParallel"):
            assert repr(getattr(style, name)(**ours)) == repr(getattr(native, name)(**torchs))
    assert style.ParallelStyle.src_data_rank == native.ParallelStyle.src_data_rank == 0
    assert style.ColwiseParallel().desired_input_layouts == (Replicate(),)


def test_bad_layouts_refused_when_the_style_is_made() -> None:
    with pytest.raises(compat.UnsupportedError, match=r"^input_layouts: expected None, Shard"):
        style.ColwiseParallel(input_layouts=Partial())
    with pytest.raises(TypeError, match=r"^output_layouts: expected None, Shard\(dim\) or Repl"):
        style.RowwiseParallel(output_layouts="replicate")  # type: ignore[arg-type]


def test_capability_records_name_the_emulation_that_runs() -> None:
    """capabilities.toml's emulated_apis on MindSpore's backends: each names the compat object
    that runs (the one compat.tensor.parallel gives on MindSpore); MCCL's is measured here."""
    import importlib

    import compat.tensor.parallel as tp
    from compat.base import tables

    found = 0
    for backend in ("mccl", "hccl", "mindspore_nccl"):
        entry = tables.lookup("capabilities", backend)
        assert entry["framework"] == "mindspore"
        for name, api in entry["emulated_apis"].items():
            module, _, attribute = api["implementation"].partition(":")
            runs = getattr(importlib.import_module(module), attribute)
            assert runs is tp.own_object(name.removeprefix("tensor.parallel.")), (backend, name)
            assert api.get("verified", "measured") == ("measured" if backend == "mccl" else "read")
            found += 1
    assert found == 9


def test_port_rewrites_the_covered_names_and_keeps_torchs_other_styles() -> None:
    """The covered names, from torch.distributed.tensor.parallel or the modules that define
    them, become compat.tensor.parallel's; a mixed import is split, torch's other styles stay."""
    from compat.tools.port import port_source

    source = (
        "import torch.distributed.tensor.parallel as tp\n"
        "from torch.distributed.tensor.parallel import ColwiseParallel, SequenceParallel\n"
        "from torch.distributed.tensor.parallel.style import RowwiseParallel\n"
        "from torch.distributed.tensor.parallel.api import parallelize_module\n"
        "\n"
        "\n"
        "def plan(model, mesh):\n"
        '    tp.parallelize_module(model, mesh, {"norm": SequenceParallel(), "w": tp.PrepareModuleInput()})\n'  # noqa: E501
        '    return parallelize_module(model, mesh, {"a": ColwiseParallel(), "b": RowwiseParallel()})\n'  # noqa: E501
    )  # fmt: skip
    result = port_source(source, "plan.py")
    assert result.rewritten == (
        "import torch.distributed.tensor.parallel as tp\n"
        "from torch.distributed.tensor.parallel import SequenceParallel\n"
        "import compat\n"
        "\n"
        "\n"
        "def plan(model, mesh):\n"
        '    compat.tensor.parallel.parallelize_module(model, mesh, {"norm": SequenceParallel(), "w": tp.PrepareModuleInput()})\n'  # noqa: E501
        '    return compat.tensor.parallel.parallelize_module(model, mesh, {"a": compat.tensor.parallel.ColwiseParallel(), "b": compat.tensor.parallel.RowwiseParallel()})\n'  # noqa: E501
    )  # fmt: skip
    assert all(finding.rewritten for finding in result.findings)
    assert len(result.findings) == 4
