"""compat port on distributed training code written in the styles of real codebases
(tests/port_fixtures): each fixture is ported with ``port_source``, and the original and the ported
copies run on 2 real Gloo ranks and must give the same results (values, Python types, dtypes,
shapes, gradients); the framework-neutral fixtures also run ported on MindSpore. The findings
(which torch names are rewritten, which are left on torch) are checked against the expectations
written below, and ported files must stay free of unused imports and undefined names.

Jobs (several fixtures each; starting ranks is the slow part):
- torch job: ``driver.py torch ...``: the driver, never ported, joins with torch's own
  ``init_process_group``; the fixtures run on a process group they did not create.
- neutral job: ``driver.py torchvision ...``: the ported torchvision helpers join and leave; the
  ported copy runs on torch and on MindSpore (torchrun's environment, ``COMPAT_FRAMEWORK``).
- spawn_tcp: a ``torch.multiprocessing.spawn`` program, run as a process of its own.
- weight_server: a server that makes and ends the process group once per update through prefix
  stores of its own TCPStore, run as a job of its own (its ranks start no driver).
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from compat.base.net import free_port
from compat.tools.launch import launch
from compat.tools.port import FileResult, port_source
from tests.processes import run_bounded

FIXTURES = Path(__file__).resolve().parent / "port_fixtures"
RUFF = Path(sys.executable).with_name("ruff")
# Harness files and the helper that stays on torch (megatron's parallel_state): copied, not ported.
NOT_PORTED = {"tensors.py", "driver.py", "parallel_state.py"}
# Fixtures with a test of their own (tests/test_port_multi_file.py ports one module of
# multi_file; tests/test_port_float8.py runs moe_float8, whose original Gloo refuses).
OWN_TEST = {"multi_file", "moe_float8.py"}

TORCH_JOB = [
    "init_elsewhere",
    "clip_loss",
    "megatron_mappings",
    "funcol",
    "deepspeed_comm",
    "left_on_torch",
    "sharded_optimizer",
    "mesh_optimizer",
    "weight_sync",
    "context_parallel",
    "uneven_join",
    "tensor_parallel",
]
NEUTRAL_JOB = [
    "timm_distributed",
    "detectron2_comm",
    "fairseq_utils",
    "lightning_sync",
    "pipeline_p2p",
    "star_import.trainer",
    "torchrec_groups",
    "torchvision_utils",
]
# The neutral job's own steps: torchvision's init_distributed_mode joins, cleanup leaves.
NEUTRAL_STEPS = [
    "torchvision_utils.init_distributed_mode",
    *NEUTRAL_JOB,
    "torchvision_utils.cleanup",
]
TORCH_TIMEOUT = 120.0
MINDSPORE_TIMEOUT = 300.0


# -- what the port must do, per file --------------------------------------------------------------
# One count per use of a torch name (a call, a reference, an attribute, an annotation, a
# ``hasattr(dist, "x")``), keyed by the name under ``torch.distributed.`` (``nn.X`` counts as
# ``nn.functional.X``). ``rewritten``: every use compat has a counterpart for, so that the ported
# file needs no torch.distributed and runs the same on torch and, for the neutral fixtures, on
# MindSpore: ``new_group`` (compat.new_framework_group: the framework's own group),
# ``group.WORLD`` (compat.framework_group()), ``ProcessGroup`` annotations (compat.Group), stored
# references called later with torch's signature (DeepSpeed's ``self.all_gather_function``),
# funcol calls (compat's results are complete tensors) and the old private ``_all_gather_base``.
# ``left``:
# what must stay on torch: names compat has no counterpart for, the arguments of those calls, and
# ``isinstance(op, dist.ReduceOp)`` (torch's members may come from callers not ported).


@dataclass(frozen=True)
class Expected:
    rewritten: dict[str, int]
    left: dict[str, int] = field(default_factory=dict)


EXPECTED: dict[str, Expected] = {
    "__init__.py": Expected({}),
    "clip_loss.py": Expected(
        {"nn.functional.all_gather": 3, "all_gather": 2, "get_rank": 1, "get_world_size": 1}
    ),
    "megatron_mappings.py": Expected(
        {
            "get_world_size": 2,
            "get_rank": 2,
            "all_reduce": 1,
            # hasattr(dist, "all_gather_into_tensor") and the call; then the old private name
            "all_gather_into_tensor": 2,
            "_all_gather_base": 1,
            "reduce_scatter_tensor": 2,
            "_reduce_scatter_base": 1,
        }
    ),
    "pipeline_p2p.py": Expected(
        {
            "P2POp": 4,
            "isend": 6,  # 2 as P2POp's op, 4 calls
            "irecv": 6,
            "batch_isend_irecv": 1,
            "get_rank": 3,
            "get_world_size": 4,
            "new_group": 1,
        }
    ),
    "deepspeed_comm.py": Expected(
        {
            # stored references (self.all_reduce_function = dist.all_reduce, return
            # dist.all_gather_into_tensor, ...) and the hasattr checks beside them
            "all_reduce": 1,
            "all_gather_into_tensor": 2,
            "_all_gather_base": 2,
            "reduce_scatter_tensor": 3,
            "_reduce_scatter_base": 2,
            "ReduceOp.SUM": 1,
            "ReduceOp.PRODUCT": 2,
            "ReduceOp.AVG": 1,
            "ReduceOp.MIN": 1,
            "ReduceOp.MAX": 1,
            "get_rank": 1,
            "get_world_size": 1,
            "new_group": 1,
            "get_global_rank": 1,
            "all_gather": 1,
            "reduce_scatter": 1,
            "barrier": 2,  # one with device_ids (CPU-safe: Gloo ignores it)
            "group.WORLD": 3,
            "destroy_process_group": 1,
            "ProcessGroup": 9,  # annotations: compat.Group
        },
        # isinstance(op, dist.ReduceOp): callers elsewhere may pass torch's members
        left={"ReduceOp": 1},
    ),
    "detectron2_comm.py": Expected(
        {
            "is_available": 3,
            "is_initialized": 3,
            "get_world_size": 5,
            "get_rank": 4,
            "new_group": 2,
            "barrier": 1,
            "get_backend": 1,
            "group.WORLD": 1,
            "all_gather_object": 1,
            "gather_object": 2,
            "reduce": 1,
        }
    ),
    "fairseq_utils.py": Expected(
        {
            "get_rank": 1,
            "is_initialized": 1,
            "get_world_size": 1,
            "ReduceOp.SUM": 1,
            "ReduceOp.MAX": 1,
            "all_reduce": 1,
            "broadcast_object_list": 1,
            "all_gather_object": 1,
            "broadcast": 1,
            "new_group": 1,
        }
    ),
    "lightning_sync.py": Expected(
        {
            "is_available": 1,
            "is_initialized": 1,
            "group.WORLD": 2,
            "get_backend": 1,
            "ReduceOp": 1,  # getattr(ReduceOp, reduce_op.upper()): only compat's members result
            "ReduceOp.SUM": 2,
            "ReduceOp.MAX": 1,
            "barrier": 2,
            "all_reduce": 1,
            "get_world_size": 2,
            "all_gather": 3,
            "get_rank": 1,
        }
    ),
    "uneven_join.py": Expected(
        {
            "monitored_barrier": 1,  # its timeout error caught as RuntimeError, as torch's
            "new_group": 1,
            "barrier": 1,
            "destroy_process_group": 1,
            "ProcessGroup": 1,
            "ReduceOp.SUM": 3,  # `op is ReduceOp.SUM` becomes ==: the op may be torch's member
            "ReduceOp.MAX": 4,
            "all_reduce": 1,
            "get_rank": 1,
        },
        # the default handed on to the autograd Function's apply, code that is not torch's
        left={"ReduceOp.SUM": 1},
    ),
    "timm_distributed.py": Expected(
        {"ReduceOp.SUM": 2, "all_reduce": 2, "broadcast": 1, "get_rank": 1, "get_world_size": 1}
    ),
    "torchvision_utils.py": Expected(
        {
            "is_available": 1,
            "is_initialized": 1,
            "get_world_size": 1,
            "get_rank": 1,
            "barrier": 2,
            "all_reduce": 2,
            "init_process_group": 1,
            "destroy_process_group": 1,
        }
    ),
    "spawn_tcp.py": Expected(
        {
            "init_process_group": 1,
            "Backend.GLOO": 2,
            "get_backend": 1,
            "ReduceOp.SUM": 1,
            "all_reduce": 1,
            "get_world_size": 2,
            "get_rank": 1,
            "barrier": 1,
            "destroy_process_group": 1,
        }
    ),
    "star_import/__init__.py": Expected({}),
    "star_import/utils.py": Expected(
        {
            "get_rank": 3,
            "get_world_size": 2,
            "ReduceOp.SUM": 1,
            "all_reduce": 1,
            "is_available": 1,
            "is_initialized": 1,
        }
    ),
    # dist and torch come from `from .utils import *`
    "star_import/trainer.py": Expected(
        {
            "get_rank": 1,
            "get_world_size": 1,
            "ReduceOp.MAX": 1,
            "all_reduce": 1,
            "all_gather_object": 1,
            "barrier": 1,
        }
    ),
    "init_elsewhere.py": Expected(
        {
            "is_available": 2,
            "is_initialized": 2,
            "get_world_size": 1,
            "get_rank": 1,
            "all_reduce": 1,
            "broadcast": 1,
            "all_gather_object": 1,
            "barrier": 1,
            "get_backend": 1,
        }
    ),
    "funcol.py": Expected(
        {
            "_functional_collectives.all_reduce": 3,  # "sum", "MAX" and "max"
            "_functional_collectives.all_gather_tensor": 1,
            "_functional_collectives.reduce_scatter_tensor": 1,
            "_functional_collectives.all_gather_single": 1,
            "_functional_collectives.reduce_scatter_single": 1,
            "_functional_collectives.all_gather_single_autograd": 1,
            "_functional_collectives.all_gather_tensor_autograd": 1,
            "_functional_collectives.reduce_scatter_single_autograd": 2,  # "sum" and "max"
            "_functional_collectives.reduce_scatter_tensor_autograd": 1,
            "nn.functional.all_reduce": 1,  # written torch.distributed.nn.all_reduce
            "_functional_collectives.all_to_all_single_autograd": 1,
            "nn.functional.all_to_all_single": 1,
            "nn.functional.all_to_all": 1,
            "nn.functional.broadcast": 1,
            "nn.functional.gather": 1,
            "nn.functional.scatter": 1,
            "get_world_size": 5,
            "get_rank": 4,
        }
    ),
    "context_parallel.py": Expected(
        {
            "is_available": 1,  # the guard above the file's last import: compat is imported first
            "ProcessGroup": 3,
            "get_backend": 1,
            "get_world_size": 3,
            "all_gather": 1,
            "get_rank": 4,
            "_functional_collectives.all_to_all_single": 1,
            "_functional_collectives.all_gather_tensor": 1,
            "new_group": 1,
            "DeviceMesh": 1,  # an annotation: compat.DeviceMesh is torch's mesh type on torch
        },
        left={"_functional_collectives.AsyncCollectiveTensor": 1},
    ),
    "weight_sync.py": Expected(
        {"broadcast": 1, "all_reduce": 1, "get_rank": 1, "get_world_size": 1}
    ),
    "left_on_torch.py": Expected(
        # the all_reduce whose op comes from a map holding PREMUL_SUM stays on torch, and so do
        # the file's ReduceOp members (any may reach it); the BAND and MAX calls are rewritten
        # and take torch's members as they are
        {"all_reduce": 2, "get_rank": 1, "all_reduce_coalesced": 1},
        left={
            "all_reduce": 1,  # op=_OPS[name]
            "ReduceOp.PREMUL_SUM": 1,
            "ReduceOp.SUM": 2,
            "ReduceOp.BAND": 1,
            "ReduceOp.MAX": 1,
        },
    ),
    "mesh_optimizer.py": Expected(
        # funcol's DeviceMesh and (DeviceMesh, dim) groups reach compat as they are
        {
            "_functional_collectives.reduce_scatter_tensor": 1,
            "_functional_collectives.all_gather_tensor": 1,
            "_functional_collectives.all_reduce": 1,
            "get_world_size": 1,
            "get_rank": 1,
            "broadcast": 1,
        },
        left={"ProcessGroup": 1},  # isinstance: callers hand torch's groups
    ),
    "sharded_optimizer.py": Expected(
        # the blocks become compat.coalescing_manager blocks with their calls
        {
            "_coalescing_manager": 3,
            "all_reduce": 1,
            "reduce_scatter_tensor": 1,
            "all_gather_into_tensor": 1,
            "get_world_size": 2,
            "get_rank": 2,
            "new_group": 1,
        }
    ),
    "tensor_parallel.py": Expected(
        # torchchat's pattern: every torch.distributed.tensor.parallel name (and Replicate from
        # the old torch.distributed._tensor) becomes compat.tensor's, torch's own objects on torch
        {
            "tensor.parallel.parallelize_module": 9,
            "tensor.parallel.ColwiseParallel": 12,  # one the base of a subclass
            "tensor.parallel.ParallelStyle": 1,  # isinstance
            "tensor.parallel.RowwiseParallel": 4,
            "tensor.Replicate": 2,
            "DeviceMesh": 5,
            "init_device_mesh": 1,
            "get_world_size": 1,
        }
    ),
    "torchrec_groups.py": Expected(
        # the private helpers become compat.WORLD and compat.get_rank(group) < 0
        {
            "_get_default_group": 1,
            "_rank_not_in_group": 2,
            "all_reduce": 1,
            "all_reduce_coalesced": 1,
            "ReduceOp.MAX": 1,
            "get_rank": 1,
        }
    ),
    # the communicator's barrier and new_group pass on **kwargs compat's may not take: they stay
    # on torch, and so do its ReduceOp defaults (the one at module level is handed on to the
    # instance's method) and the server's members passed to comm.py
    "weight_server/comm.py": Expected(
        {
            "TCPStore": 1,
            "init_process_group": 1,
            "destroy_process_group": 1,
            "is_initialized": 1,
            "all_gather_object": 1,
            "all_reduce": 1,
            "broadcast": 1,
        },
        left={
            "ReduceOp.RedOpType": 1,
            "ReduceOp.SUM": 2,
            "barrier": 1,
            "new_group": 1,
        },
    ),
    "weight_server/server.py": Expected(
        {"TCPStore": 1, "PrefixStore": 1},
        left={"_store_based_barrier": 1, "ReduceOp.MIN": 1, "ReduceOp.SUM": 1},
    ),
}


def short_name(torch_name: str) -> str:
    name = torch_name.removeprefix("torch.distributed.").removeprefix("distributed_c10d.")
    if name.startswith("nn.") and not name.startswith("nn.functional."):
        name = "nn.functional." + name.removeprefix("nn.")
    return name


def counts(result: FileResult, rewritten: bool) -> dict[str, int]:
    return dict(Counter(short_name(f.torch) for f in result.findings if f.rewritten == rewritten))


def torch_distributed_uses(source: str) -> list[str]:
    """Imports of torch.distributed (any form) and ``torch.distributed`` attribute chains."""
    uses = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            uses += [a.name for a in node.names if a.name.startswith("torch.distributed")]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [a.name for a in node.names]
            if node.module.startswith("torch.distributed") or (
                node.module == "torch" and "distributed" in names
            ):
                uses.append(f"line {node.lineno}: from {node.module} import {', '.join(names)}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "distributed"
            and isinstance(node.value, ast.Name)
            and node.value.id == "torch"
        ):
            uses.append(f"line {node.lineno}: torch.distributed")
    return uses


# -- porting and running ------------------------------------------------------------------------


@dataclass
class Run:
    """One job (or program): its exit code, its output, and its results by label and rank."""

    name: str
    code: int | None
    output: str
    results: dict[str, dict[int, object]]

    def tail(self, lines: int = 60) -> str:
        return f"--- {self.name}: exit code {self.code}; last lines ---\n" + "\n".join(
            self.output.splitlines()[-lines:]
        )


RESULT_LINE = re.compile(r"^(?:\[rank (\d+)\] )?RESULT (\S+) (.*)$")


def parse(name: str, code: int | None, output: str) -> Run:
    results: dict[str, dict[int, object]] = {}
    for line in output.splitlines():
        match = RESULT_LINE.match(line)
        if match is None:
            continue
        rank_text, label, text = match.groups()
        try:  # the JSON value; anything after it is another process's output
            value = json.JSONDecoder().raw_decode(text)[0]
        except json.JSONDecodeError:
            value = {"unreadable": text}
        # spawn_tcp's lines carry no rank prefix: the rank is in the result
        if rank_text is not None:
            rank = int(rank_text)
        else:
            rank = int(value["rank"]) if isinstance(value, dict) and "rank" in value else -1
        results.setdefault(label, {})[rank] = value
    return Run(name, code, output, results)


def run_job(name: str, root: Path, init: str, fixtures: list[str], framework: str) -> Run:
    sync = root.parent / f"sync-{name}"
    sync.mkdir()
    env = {"PORT_FIXTURES_SYNC": str(sync), "PORT_FIXTURES_FRAMEWORK": framework, "GLOG_v": "3"}
    sink = io.StringIO()
    timeout = MINDSPORE_TIMEOUT if framework == "mindspore" else TORCH_TIMEOUT
    # torchrun's environment on both frameworks: the ported compat.init starts MindSpore itself
    command = [str(root / "port_fixtures" / "driver.py"), init, *fixtures]
    code = launch(2, command, "torch", timeout=timeout, env=env, sink=sink)
    return parse(name, code, sink.getvalue())


def run_spawn(name: str, root: Path) -> Run:
    launcher = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MS_ROLE")
    env = {k: v for k, v in os.environ.items() if k not in launcher and not k.startswith("TORCH")}
    env["COMPAT_FRAMEWORK"] = "torch"
    script = root / "port_fixtures" / "spawn_tcp.py"
    try:
        done = run_bounded([sys.executable, str(script), str(free_port())], 60, env=env)
    except AssertionError as exc:  # it hung (e.g. ranks that never meet)
        return parse(name, None, str(exc))
    return parse(name, done.returncode, done.stdout + done.stderr)


def run_weight_server(name: str, root: Path) -> Run:
    sink = io.StringIO()
    script = root / "port_fixtures" / "weight_server" / "server.py"
    code = launch(2, [str(script)], "torch", timeout=TORCH_TIMEOUT, sink=sink)
    return parse(name, code, sink.getvalue())


def copy_fixtures(root: Path) -> Path:
    root.mkdir()
    shutil.copytree(FIXTURES, root / "port_fixtures", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def ported_paths(root: Path) -> Iterator[Path]:
    for path in sorted((root / "port_fixtures").rglob("*.py")):
        if path.name not in NOT_PORTED and not OWN_TEST.intersection(path.parts):
            yield path


@dataclass
class Ported:
    original: Path  # <tmp>/original/port_fixtures/...
    ported: Path
    files: dict[str, FileResult]  # by path relative to port_fixtures


@dataclass
class Runs:
    original_torch: Run
    original_neutral: Run
    original_spawn: Run
    ported_torch: Run
    ported_neutral: Run
    ported_spawn: Run
    mindspore_neutral: Run


@pytest.fixture(scope="module")
def ported(tmp_path_factory: pytest.TempPathFactory) -> Ported:
    base = tmp_path_factory.mktemp("port_fixtures")
    original = copy_fixtures(base / "original")
    ported = copy_fixtures(base / "ported")
    # Every file is ported from the original text (siblings on disk are still the originals);
    # the rewritten texts are written once all are ported.
    files: dict[str, FileResult] = {}
    for path in ported_paths(ported):
        relative = path.relative_to(ported / "port_fixtures").as_posix()
        files[relative] = port_source(path.read_text(), str(path))
    for relative, result in files.items():
        (ported / "port_fixtures" / relative).write_text(result.rewritten)
    return Ported(original, ported, files)


@pytest.fixture(scope="module")
def runs(ported: Ported) -> Runs:
    roots = {"original": ported.original, "ported": ported.ported}
    # Two at a time (2 cores): the MindSpore job, mostly waiting on its start-up and teardown,
    # beside the torch jobs and programs, which run one after another.
    with ThreadPoolExecutor(2) as pool:
        mindspore = pool.submit(
            run_job, "mindspore-neutral", ported.ported, "torchvision", NEUTRAL_JOB, "mindspore"
        )
        jobs = {
            f"{variant}_{job}": pool.submit(
                run_job, f"{variant}-{job}", roots[variant], init, fixtures, "torch"
            )
            for variant in roots
            for job, init, fixtures in (
                ("torch", "torch", TORCH_JOB),
                ("neutral", "torchvision", NEUTRAL_JOB),
            )
        }
        for variant in roots:
            jobs[f"{variant}_spawn"] = pool.submit(run_spawn, f"{variant}-spawn", roots[variant])
        return Runs(
            **{name: job.result() for name, job in jobs.items()},
            mindspore_neutral=mindspore.result(),
        )


def compare(label: str, expected: Run, actual: Run) -> None:
    want = expected.results.get(label)
    assert want is not None and len(want) == 2, expected.tail()
    got = actual.results.get(label)
    assert got == want, f"{label}: {actual.name} differs from {expected.name}\n{actual.tail()}"


# -- the originals run (the harness is right) -----------------------------------------------------


def test_the_original_fixtures_run_on_two_gloo_ranks(runs: Runs) -> None:
    for run, labels in (
        (runs.original_torch, TORCH_JOB),
        (runs.original_neutral, NEUTRAL_STEPS),
        (runs.original_spawn, ["spawn_tcp"]),
    ):
        assert run.code == 0, run.tail()
        assert sorted(run.results) == sorted(labels), run.tail()
        for label in labels:
            for rank in (0, 1):
                result = run.results[label][rank]
                assert not (isinstance(result, dict) and "error" in result), (label, result)
    spawned = runs.original_spawn.results["spawn_tcp"]
    assert spawned[0] == {"average": 15.0, "on_gloo": True, "rank": 0, "world_size": 2}


# -- ported: the same results ---------------------------------------------------------------------


@pytest.mark.parametrize("label", TORCH_JOB)
def test_ported_gives_the_originals_results_on_a_group_torch_created(
    runs: Runs, label: str
) -> None:
    compare(label, runs.original_torch, runs.ported_torch)


@pytest.mark.parametrize("label", NEUTRAL_STEPS)
def test_ported_gives_the_originals_results(runs: Runs, label: str) -> None:
    compare(label, runs.original_neutral, runs.ported_neutral)


def test_ported_spawn_program_forms_one_world_of_two(runs: Runs) -> None:
    compare("spawn_tcp", runs.original_spawn, runs.ported_spawn)
    assert runs.ported_spawn.code == 0, runs.ported_spawn.tail()


def test_ported_weight_server_makes_and_ends_the_group_per_update_as_torch(ported: Ported) -> None:
    original = run_weight_server("original-weight-server", ported.original)
    assert original.code == 0, original.tail()
    updates = original.results["weight_server"][0]["updates"]
    assert [u["ready"] for u in updates] == [[1], [2], [3]], original.tail()
    assert updates[1]["world_after_subgroup"] == 2.0, original.tail()
    ported_run = run_weight_server("ported-weight-server", ported.ported)
    assert ported_run.code == 0, ported_run.tail()
    compare("weight_server", original, ported_run)


@pytest.mark.parametrize("label", NEUTRAL_STEPS)
def test_ported_gives_the_originals_results_on_mindspore(runs: Runs, label: str) -> None:
    compare(label, runs.original_neutral, runs.mindspore_neutral)


def test_every_job_ends_cleanly(runs: Runs) -> None:
    for run in (runs.ported_torch, runs.ported_neutral, runs.mindspore_neutral):
        assert run.code == 0, run.tail()


# -- the findings, the imports, the names ---------------------------------------------------------


def test_every_ported_file_has_expectations(ported: Ported) -> None:
    assert sorted(ported.files) == sorted(EXPECTED)


@pytest.mark.parametrize("relative", sorted(EXPECTED))
def test_findings_are_what_the_file_needs(ported: Ported, relative: str) -> None:
    result = ported.files[relative]
    expected = EXPECTED[relative]
    report = "\n".join(f.text() for f in result.findings)
    assert counts(result, rewritten=True) == expected.rewritten, report
    assert counts(result, rewritten=False) == expected.left, report
    if not expected.rewritten and not expected.left:
        assert not result.changed, result.diff()


@pytest.mark.parametrize(
    "relative", sorted(name for name, expected in EXPECTED.items() if not expected.left)
)
def test_no_torch_distributed_remains_where_everything_is_rewritten(
    ported: Ported, relative: str
) -> None:
    result = ported.files[relative]
    assert torch_distributed_uses(result.rewritten) == [], result.diff()


def ruff_failures(root: Path) -> dict[str, list[str]]:
    files = [str(path) for path in ported_paths(root)]
    done = subprocess.run(
        [str(RUFF), "check", "--isolated", "--select", "F401,F821", "--output-format", "json",
         *files],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    failures: dict[str, list[str]] = {}
    for item in json.loads(done.stdout):
        relative = Path(item["filename"]).relative_to(root / "port_fixtures").as_posix()
        line = item["location"]["row"]
        failures.setdefault(relative, []).append(f"{line}: {item['code']} {item['message']}")
    return failures


def test_ported_files_have_no_unused_imports_or_undefined_names(ported: Ported) -> None:
    before = ruff_failures(ported.original)
    assert before == {}, before
    after = ruff_failures(ported.ported)
    assert after == {}, after
