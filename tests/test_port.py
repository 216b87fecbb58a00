"""compat port: detection (every import style), rewriting (formatting and comments kept), and real
torch snippets that, rewritten, run on torch and MindSpore with the original's results."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from compat.tools import cli, port
from compat.tools.launch import launch
from tests.processes import run_bounded

pytest.importorskip("libcst")

#: MindSpore is installed: its jobs start beside torch's (they mostly wait on their start-up).
MINDSPORE = importlib.util.find_spec("mindspore") is not None

# -- real snippets ------------------------------------------------------------------------------
# Only tensor creation (and, for CLIP, running a torch.autograd.Function) is framework-specific:
# it lives between the TENSORS markers, which the harness replaces for the MindSpore run. The
# block imports inside its functions so that `import compat` lands outside it.

BEGIN, END = "# --- tensors: replaced for MindSpore ---\n", "# --- end tensors ---\n"

TORCH_TENSORS = '''
def make(values):
    import torch

    return torch.tensor(values, dtype=torch.float32)


def zeros(*shape):
    import torch

    return torch.zeros(*shape)


def cat(tensors):
    import torch

    return torch.cat(tensors)


def function_base():
    import torch

    return torch.autograd.Function


def run_function(cls, x, grad):
    """Forward and backward through torch.autograd."""
    x = x.clone().requires_grad_(True)
    y = cls.apply(x)
    y.backward(grad)
    return y.detach(), x.grad
'''

MINDSPORE_TENSORS = '''
def make(values):
    import mindspore

    return mindspore.Tensor(values, mindspore.float32)


def zeros(*shape):
    from mindspore import mint

    return mint.zeros(tuple(shape))


def cat(tensors):
    from mindspore import mint

    return mint.cat(list(tensors))


def function_base():
    return object


class _Context:
    pass


def run_function(cls, x, grad):
    """The Function's forward and backward called directly (no torch.autograd here)."""
    context = _Context()
    return cls.forward(context, x), cls.backward(context, grad)
'''

HEADER = "import torch.distributed as dist\n\n" + BEGIN + TORCH_TENSORS + END

# 1. The reduce_scatter example with input lists (torch's output-buffer style).
REDUCE_SCATTER = HEADER + textwrap.dedent(
    """
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    # input_list[i] is reduced into rank i's output
    input_list = [make([float(rank + 1) * (i + 1), 10.0 * i]) for i in range(world)]
    output = zeros(2)
    dist.reduce_scatter(output, input_list, op=dist.ReduceOp.SUM)
    print("RESULT reduce_scatter", rank, output.tolist())
    dist.all_reduce(output, op=dist.ReduceOp.MAX)
    print("RESULT all_reduce", rank, output.tolist())
    dist.barrier()
    dist.destroy_process_group()
    """
)

# 2. CLIP's all_gather whose backward reduce-scatters the gradient (two variants: the tensor
# collectives and the list ones).
CLIP = HEADER + textwrap.dedent(
    """
    class AllGatherFunction(function_base()):
        \"\"\"Gather every rank's features; reduce-scatter the gradient.\"\"\"

        @staticmethod
        def forward(ctx, tensor):
            world_size = dist.get_world_size()
            ctx.world_size = world_size
            output = zeros(world_size * tensor.shape[0], *tensor.shape[1:])
            dist.all_gather_into_tensor(output, tensor)
            return output

        @staticmethod
        def backward(ctx, grad_output):
            grad_input = zeros(grad_output.shape[0] // ctx.world_size, *grad_output.shape[1:])
            dist.reduce_scatter_tensor(grad_input, grad_output.contiguous(), op=dist.ReduceOp.SUM)
            return grad_input


    class AllGatherListFunction(function_base()):
        @staticmethod
        def forward(ctx, tensor):
            world_size = dist.get_world_size()
            ctx.world_size = world_size
            gathered = [zeros(*tensor.shape) for _ in range(world_size)]
            dist.all_gather(gathered, tensor)
            return cat(gathered)

        @staticmethod
        def backward(ctx, grad_output):
            grad_input = zeros(grad_output.shape[0] // ctx.world_size, *grad_output.shape[1:])
            dist.reduce_scatter(grad_input, list(grad_output.chunk(ctx.world_size)))
            return grad_input


    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    features = make([[rank + 1.0, 2.0], [3.0, rank * 4.0]])
    grad = make([[float(i + rank), 1.0] for i in range(2 * world)])
    for function in (AllGatherFunction, AllGatherListFunction):
        gathered, grad_input = run_function(function, features, grad)
        print("RESULT clip", function.__name__, rank, gathered.tolist(), grad_input.tolist())
    dist.destroy_process_group()
    """
)

# 3. DeepSpeed's reduce_scatter_fn: the tensor API where torch has it, else the list fallback.
DEEPSPEED = HEADER + textwrap.dedent(
    """
    def reduce_scatter_fn(output_tensor, input_tensor, group=None, fallback=False):
        world_size = dist.get_world_size(group=group)
        if hasattr(dist, "reduce_scatter_tensor") and not fallback:
            return dist.reduce_scatter_tensor(output_tensor, input_tensor, group=group)
        else:
            # older torch: a list of per-rank chunks
            input_tensor_lst = list(input_tensor.chunk(world_size))
            return dist.reduce_scatter(output_tensor, input_tensor_lst, group=group)


    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    group = dist.new_group(list(range(world)))
    for fallback in (False, True):
        for chosen in (None, group):
            output = zeros(2)
            values = make([rank + i + 0.5 for i in range(2 * world)])
            reduce_scatter_fn(output, values, chosen, fallback)
            print("RESULT deepspeed", fallback, chosen is None, rank, output.tolist())
    dist.destroy_process_group()
    """
)

SNIPPETS = {"reduce_scatter": REDUCE_SCATTER, "clip": CLIP, "deepspeed": DEEPSPEED}

# Runs several rewritten scripts in one job (a MindSpore job costs ~15 s): the first
# compat.init sets up, the scripts' own init/destroy calls are skipped, the last destroy is real.
DRIVER = """
import runpy
import sys

import compat

init, destroy = compat.init, compat.destroy
compat.init = lambda *args, **kwargs: None if compat.is_initialized() else init(*args, **kwargs)
# The scripts leave with destroy_process_group (what port writes for torch's): the job goes on.
compat.destroy = compat.destroy_process_group = lambda *args, **kwargs: None
for script in sys.argv[1:]:
    runpy.run_path(script, run_name="__main__")
destroy()
"""

# The originals, likewise in one job: the same skipping around torch.distributed's own calls.
ORIGINALS_DRIVER = """
import runpy
import sys

import torch.distributed as dist

init, destroy = dist.init_process_group, dist.destroy_process_group
dist.init_process_group = lambda *args, **kwargs: (
    None if dist.is_initialized() else init(*args, **kwargs)
)
dist.destroy_process_group = lambda *args, **kwargs: None
for script in sys.argv[1:]:
    runpy.run_path(script, run_name="__main__")
destroy()
"""


def results(output: str) -> list[str]:
    lines = [line for line in output.splitlines() if "] RESULT " in line]
    return sorted(
        line.split("] RESULT ", 1)[0] + "] " + line.split("] RESULT ", 1)[1] for line in lines
    )


def run_job(framework: str, command: list[str], timeout: float) -> list[str]:
    sink = io.StringIO()
    code = launch(2, command, framework, timeout=timeout, sink=sink, env={"GLOG_v": "3"})
    assert code == 0, sink.getvalue()[-4000:]
    return results(sink.getvalue())


def test_rewritten_snippets_run_on_both_frameworks_with_the_originals_results(
    tmp_path: Path,
) -> None:
    original = tmp_path / "original"
    ported = tmp_path / "ported"
    original.mkdir()
    ported.mkdir()
    for name, source in SNIPPETS.items():
        (original / f"{name}.py").write_text(source)
        (ported / f"{name}.py").write_text(source)
    originals_driver = tmp_path / "originals_driver.py"
    originals_driver.write_text(ORIGINALS_DRIVER)
    originals = [str(original / f"{name}.py") for name in SNIPPETS]
    expected = run_job("torch", [str(originals_driver), *originals], 120)
    assert len(expected) == 2 * (2 + 2 + 4), expected

    result = run_bounded(
        [sys.executable, "-m", "compat", "port", "--write", str(ported)], timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = result.stdout
    assert "-> not rewritten" not in report, report
    assert (
        "29 uses of torch.distributed/torch.cuda.comm: 29 rewritten (100.0%), 0 left; "
        "rewrote 3 files" in report
    ), report
    for name in SNIPPETS:
        text = (ported / f"{name}.py").read_text()
        assert "dist." not in text and "torch.distributed" not in text, text
        assert "import compat\n" in text and text.index("import compat") < text.index(BEGIN)
    deepspeed = (ported / "deepspeed.py").read_text()
    assert 'if hasattr(compat, "reduce_scatter_tensor") and not fallback:' in deepspeed
    assert (
        "return compat.reduce_scatter_into(output_tensor, input_tensor, group=group)" in deepspeed
    )
    assert "# older torch: a list of per-rank chunks" in deepspeed
    clip = (ported / "clip.py").read_text()
    assert (
        "compat.reduce_scatter_tensor(grad_output.contiguous(), out=grad_input, "
        "op=compat.ReduceOp.SUM)" in clip
    )
    assert "compat.all_gather_into_tensor(tensor, out=output)" in clip

    scripts = [str(ported / f"{name}.py") for name in SNIPPETS]
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    mindspore_scripts = []
    for script in map(Path, scripts):
        text = script.read_text()
        head, rest = text.split(BEGIN)
        _, tail = rest.split(END)
        copy = tmp_path / f"ms_{script.name}"
        copy.write_text(head + BEGIN + MINDSPORE_TENSORS + END + tail)
        mindspore_scripts.append(str(copy))
    with ThreadPoolExecutor(2) as pool:
        on_mindspore = MINDSPORE and pool.submit(
            run_job, "mindspore", [str(driver), *mindspore_scripts], 240
        )
        assert run_job("torch", [str(driver), *scripts], 120) == expected
        pytest.importorskip("mindspore")
        assert on_mindspore and on_mindspore.result() == expected


# -- detection -----------------------------------------------------------------------------------


def findings(source: str) -> list[str]:
    result = port.port_source(textwrap.dedent(source), "f.py")
    return [
        f"{f.line}: {f.written} -> {f.compat if f.rewritten else 'no'}" for f in result.findings
    ]


@pytest.mark.parametrize(
    ("imports", "call", "written"),
    [
        ("import torch.distributed as dist", "dist.all_reduce(t)", "dist.all_reduce"),
        ("import torch", "torch.distributed.all_reduce(t)", "torch.distributed.all_reduce"),
        (
            "import torch.distributed",
            "torch.distributed.all_reduce(t)",
            "torch.distributed.all_reduce",
        ),
        ("from torch import distributed as d", "d.all_reduce(t)", "d.all_reduce"),
        ("from torch import distributed", "distributed.all_reduce(t)", "distributed.all_reduce"),
        ("from torch.distributed import all_reduce as ar", "ar(t)", "ar"),
        ("from torch.distributed import all_reduce", "all_reduce(t)", "all_reduce"),
        (
            "import torch.distributed.distributed_c10d as c10d",
            "c10d.all_reduce(t)",
            "c10d.all_reduce",
        ),
    ],
)
def test_every_import_style_is_found(imports: str, call: str, written: str) -> None:
    assert findings(f"{imports}\n{call}\n") == [f"2: {written} -> compat.all_reduce"]


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("import torch.cuda.comm as comm", "comm.scatter(t, devices=[0, 1])"),
        ("import torch", "torch.cuda.comm.scatter(t, devices=[0, 1])"),
        ("from torch.cuda import comm", "comm.scatter(t, devices=[0, 1])"),
    ],
)
def test_torch_cuda_comm_maps_to_compat_comm(imports: str, call: str) -> None:
    result = port.port_source(f"{imports}\n{call}\n")
    assert [f.compat for f in result.findings] == ["compat.comm.scatter"]
    assert "compat.comm.scatter(t, devices=[0, 1])\n" in result.rewritten
    assert "mindspore.mint.split" in result.findings[0].text()


def test_shadowed_names_and_other_modules_are_not_torch() -> None:
    assert (
        findings(
            """
        import torch.distributed as dist
        import mylib.distributed as other

        def f(dist):
            dist.all_reduce(t)

        other.all_reduce(t)
        """
        )
        == []
    )


def test_report_line_names_compat_mindspore_and_the_differences() -> None:
    result = port.port_source(
        "import torch.distributed as dist\n\n"
        "dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.AVG)\n",
        "path/to/file.py",
    )
    line = next(f.text() for f in result.findings if f.torch.endswith("reduce_scatter_tensor"))
    assert line.startswith(
        "path/to/file.py:3: dist.reduce_scatter_tensor -> compat.reduce_scatter_tensor "
        "(MindSpore: mindspore.mint.distributed.reduce_scatter_tensor); differences: "
    )
    assert "op: torch: a torch.distributed.ReduceOp member. MindSpore: a str." in line


def test_calls_without_an_exact_counterpart_are_reported_not_rewritten() -> None:
    source = textwrap.dedent(
        """
        import torch.distributed as dist

        dist.new_group([0, 1], device_id=device)
        sender = dist.recv(t)
        dist.all_reduce(t, op=dist.ReduceOp.PREMUL_SUM)
        handler = dist.init_process_group
        """
    )
    result = port.port_source(source, "f.py")
    assert result.rewritten == source  # nothing rewritten: no import compat either
    reasons = {(f.line, f.written): f.reason for f in result.findings}
    assert all(reason for reason in reasons.values())
    reasons = {written: reason for (line, written), reason in reasons.items()}
    assert "compat.new_framework_group has no device_id" in str(reasons["dist.new_group"])
    assert "compat.recv needs src or group_src" in str(reasons["dist.recv"])
    assert "compat.ReduceOp has no PREMUL_SUM" in str(reasons["dist.ReduceOp.PREMUL_SUM"])
    assert "compat has no dist.ReduceOp.PREMUL_SUM" in str(reasons["dist.all_reduce"])
    texts = [f.text() for f in result.findings]
    assert any(
        "f.py:7: dist.init_process_group -> not rewritten: referenced without a call" in t
        for t in texts
    )


def test_torchs_output_buffer_form_is_kept_where_its_result_or_the_function_is_used() -> None:
    result = port_text(
        """
        import torch.distributed as dist

        dist.reduce_scatter_tensor(out, inp)
        work = dist.reduce_scatter_tensor(out, inp, async_op=True)
        gather = dist.all_gather_into_tensor
        handle = dist._all_gather_base(out, inp, group=g, async_op=async_op)
        """
    )
    assert result.rewritten.splitlines()[3:] == [
        "compat.reduce_scatter_tensor(inp, out=out)",
        "work = compat.reduce_scatter_into(out, inp, async_op=True)",
        "gather = compat.all_gather_into",
        "handle = compat.all_gather_into(out, inp, group=g, async_op=async_op)",
    ]
    assert all(f.rewritten for f in result.findings)


def test_the_rest_of_torch_distributed_is_rewritten_where_compat_has_it() -> None:
    """The functions the mapping tables pair with compat's (point to point, objects, all_to_all,
    monitored_barrier, group-rank roots) are rewritten, each to its compat name."""
    source = textwrap.dedent(
        """
        import torch.distributed as dist

        dist.all_to_all(outs, ins)
        dist.isend(t, 1)
        dist.batch_isend_irecv(ops)
        dist.all_gather_object(objs, obj)
        dist.monitored_barrier()
        dist.broadcast(t, group_src=0, group=g)
        """
    )
    result = port.port_source(source, "f.py")
    for name in ("all_to_all", "isend", "batch_isend_irecv", "all_gather_object",
                 "monitored_barrier", "broadcast"):  # fmt: skip
        assert f"compat.{name}(" in result.rewritten, (name, result.rewritten)
    assert "group_src=0" in result.rewritten
    assert all(finding.rewritten for finding in result.findings), [
        finding.text() for finding in result.findings if not finding.rewritten
    ]


# -- rewriting -----------------------------------------------------------------------------------


def test_rewrite_keeps_formatting_and_comments_and_maps_argument_forms() -> None:
    source = textwrap.dedent(
        '''\
        """Training step."""
        import os

        import torch.distributed as dist
        from torch.distributed import ReduceOp, reduce_scatter as rs


        def step(out, inp, lst, group):
            dist.init_process_group("gloo", init_method="env://")  # join
            dist.reduce_scatter_tensor(out, inp, op=ReduceOp.AVG)  # average
            dist.all_gather_into_tensor(
                out,  # the output
                inp,
                group=group,
            )
            rs(out, lst)
            dist.all_reduce(lst[0], op=dist.ReduceOp.SUM)  # sum
            dist.recv(out, 0, tag=0)
            dist.send(out, dst=1)
            g = dist.new_group([0, 1])
            print(dist.get_rank(g), dist.get_world_size(), os.sep)
            dist.destroy_process_group()
        '''
    )
    result = port.port_source(source, "step.py")
    assert result.rewritten == textwrap.dedent(
        '''\
        """Training step."""
        import os

        import compat


        def step(out, inp, lst, group):
            compat.init(backend="gloo", init_method="env://")  # join
            compat.reduce_scatter_tensor(inp, out=out, op=compat.ReduceOp.AVG)  # average
            compat.all_gather_into_tensor(
                inp,
                out=out,  # the output
                group=group,
            )
            compat.reduce_scatter(out, lst)
            compat.all_reduce(lst[0], op=compat.ReduceOp.SUM)  # sum
            compat.recv(out, 0, tag=0)
            compat.send(out, dst=1)
            g = compat.new_framework_group([0, 1])
            print(compat.get_rank(g), compat.get_world_size(), os.sep)
            compat.destroy_process_group()
        '''
    )
    init = result.findings[0].text()
    assert init.startswith("step.py:9: dist.init_process_group -> compat.init (MindSpore: ")
    assert "dropped" not in init  # every argument torch took is passed on
    recv = next(f for f in result.findings if f.written == "dist.recv")
    assert recv.dropped == []  # compat.recv takes tag too


def test_torch_imports_still_used_are_kept_and_compat_is_imported_once() -> None:
    source = (
        "import compat\nimport torch.distributed as dist\n\ndist.all_reduce(t)\n"
        "dist.all_gather_coalesced([[t]], [t])\n"
    )
    result = port.port_source(source)
    assert result.rewritten == (
        "import compat\nimport torch.distributed as dist\n\n"
        "compat.all_reduce(t)\ndist.all_gather_coalesced([[t]], [t])\n"
    )


def test_cli_diff_prints_a_unified_diff_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "train.py"
    source = "import torch.distributed as dist\n\ndist.all_reduce(t, op=dist.ReduceOp.SUM)\n"
    script.write_text(source)
    assert cli.main(["port", "--diff", "--verbose", str(script)]) == 0
    out = capsys.readouterr().out
    assert f"{script}:3: dist.all_reduce -> compat.all_reduce (MindSpore: " in out
    assert (
        "-dist.all_reduce(t, op=dist.ReduceOp.SUM)\n+compat.all_reduce(t, op=compat.ReduceOp.SUM)"
        in out
    )
    assert script.read_text() == source
    assert cli.main(["port", "--write", str(script)]) == 0
    assert script.read_text() == "import compat\n\ncompat.all_reduce(t, op=compat.ReduceOp.SUM)\n"


def test_import_compat_comes_before_a_use_that_runs_while_the_module_is_imported() -> None:
    # diffusers' pattern: a torch.distributed check guards imports above the file's last import
    guarded = (
        "import torch\nimport torch.distributed as dist\n\n"
        "if torch.distributed.is_available():\n"
        "    import torch.distributed._functional_collectives as funcol\n\n"
        "import os\n\n\n"
        "def f(t, mesh: dist.device_mesh.DeviceMesh):\n"
        "    return dist.get_rank(), funcol.all_gather_tensor(t, 0, group=None), torch.ones(1)\n"
    )
    annotated = (
        "import torch\n\n"
        "if torch.distributed.is_available():\n"
        "    from torch.distributed.fsdp import FullyShardedDataParallel\n\n"
        "import os\n\n\n"
        "def g(group: torch.distributed.ProcessGroup = None):\n"
        "    return group, os.sep, torch.ones(1)\n"
    )
    for source in (guarded, annotated):
        rewritten = port.port_source(source, "m.py").rewritten
        assert rewritten is not None
        first_import = rewritten.index("import compat\n")
        assert first_import < rewritten.index("compat.is_available()")
        assert rewritten.count("\nimport compat\n") + rewritten.startswith("import compat\n") == 1
        exec(compile(rewritten, "m.py", "exec"), {})  # no NameError on import
    assert port.port_source(annotated, "m.py").rewritten == (
        "import torch\nimport compat\n\n"
        "if compat.is_available():\n"
        "    from torch.distributed.fsdp import FullyShardedDataParallel\n\n"
        "import os\n\n\n"
        "def g(group: compat.Group = None):\n"
        "    return group, os.sep, torch.ones(1)\n"
    )


def test_import_compat_does_not_import_libcst() -> None:
    code = "import sys, compat, compat.tools.port, compat.tools.cli; print('libcst' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


# -- real code's patterns --------------------------------------------------------------------


def port_text(source: str, path: str = "f.py") -> port.FileResult:
    return port.port_source(textwrap.dedent(source), path)


def test_an_argument_of_a_call_left_on_torch_stays_torchs() -> None:
    result = port_text(
        """
        import torch.distributed as dist

        dist.nn.reduce(a, 0, dist.ReduceOp.SUM, group=dist.group.WORLD)
        """
    )
    assert not result.changed
    left = {f.written: (f.category, f.reason) for f in result.findings}
    assert left["dist.ReduceOp.SUM"] == (
        "inside a torch call",
        "an argument of dist.nn.reduce, which stays on torch",
    )
    assert left["dist.group.WORLD"][0] == "inside a torch call"


def test_values_stay_torchs_where_a_call_left_on_torch_may_receive_them() -> None:
    """torch.distributed.nn.reduce stays on torch and takes an op through a variable: torch's
    ReduceOp (which compat takes too) stays wherever it is written in the file. group.WORLD
    becomes compat.framework_group(), torch's own world group, which that call takes too."""
    source = """
        import torch.distributed as dist

        dist.nn.reduce(a, 0, op, group=group)
        dist.all_reduce(a, dist.ReduceOp.SUM)
        dist.barrier(group=dist.group.WORLD)
        """
    result = port_text(source)
    assert "compat.all_reduce(a, dist.ReduceOp.SUM)" in result.rewritten
    assert "compat.barrier(group=compat.framework_group())" in result.rewritten
    left = {f.written: (f.category, f.reason) for f in result.findings if not f.rewritten}
    assert left["dist.ReduceOp.SUM"][0] == "kept for torch" and "dist.group.WORLD" not in left
    assert "keeps torch.distributed for dist.nn.reduce (line 4)" in str(
        left["dist.ReduceOp.SUM"][1]
    )
    # literals and torch's own objects cannot carry compat's values: those are rewritten
    result = port_text(source.replace("a, 0, op, group=group", "a, 0, dist.ReduceOp.MAX"))
    assert "compat.all_reduce(a, compat.ReduceOp.SUM)" in result.rewritten


def test_star_imports_assignments_and_function_imports_resolve_as_python_will(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "utils.py").write_text(
        "import torch\nimport torch.distributed as dist\n__all__ = ['torch', 'dist', 'helper']\n"
    )
    trainer = package / "trainer.py"
    trainer.write_text(
        textwrap.dedent(
            """
            from .utils import *

            c10d = torch.distributed


            def step(t):
                dist.all_reduce(t)
                c10d.barrier()
                return torch.distributed.get_rank()


            def local(t):
                import torch.distributed as d

                d.broadcast(t, 0)


            def shadowed(dist, t):
                dist.all_reduce(t)
            """
        )
    )
    result = port.port_file(trainer)
    assert [f.compat for f in result.findings] == [
        "compat.all_reduce",
        "compat.barrier",
        "compat.get_rank",
        "compat.broadcast",
    ]
    assert all(f.rewritten and f.assumed is None for f in result.findings)
    assert "def shadowed(dist, t):\n    dist.all_reduce(t)" in result.rewritten
    assert "def local(t):\n    compat.broadcast(t, 0)" in result.rewritten


def test_removed_imports_leave_no_blank_line_no_pass_and_no_unused_name() -> None:
    source = """\
\"\"\"Helpers.\"\"\"

import os

import torch
import torch.distributed as dist

try:
    import torch.distributed as c10d
except ImportError:
    c10d = None


def size():
    import torch.distributed as d

    return d.get_world_size() + len(os.sep)


def total(t):
    dist.all_reduce(t)
    return torch.distributed.get_rank() + c10d.get_rank()
"""
    result = port.port_source(source, "h.py")
    assert result.rewritten == (
        '"""Helpers."""\n\nimport os\n\nimport compat\n\n'
        "try:\n    import compat\nexcept ImportError:\n    c10d = None\n\n\n"
        "def size():\n    return compat.get_world_size() + len(os.sep)\n\n\n"
        "def total(t):\n    compat.all_reduce(t)\n"
        "    return compat.get_rank() + compat.get_rank()\n"
    )


def test_comments_after_an_import_removed_at_the_start_of_a_block_are_kept() -> None:
    """A function-level import opening a block, then a blank line and a comment on what
    follows (axolotl's fallback mesh): the blank line goes, the comment stays."""
    source = """\
import torch.distributed as dist


def mesh(shape):
    if dist.is_initialized():
        from torch.distributed.device_mesh import init_device_mesh

        # the fallback mesh: ep outermost
        # (accelerate's is preferred)
        return init_device_mesh("cpu", shape)
"""
    result = port.port_source(source, "m.py")
    assert result.rewritten == (
        "import compat\n\n\ndef mesh(shape):\n    if compat.is_initialized():\n"
        "        # the fallback mesh: ep outermost\n        # (accelerate's is preferred)\n"
        '        return compat.init_device_mesh("cpu", shape)\n'
    )


def test_a_star_import_that_cannot_be_read_is_assumed_and_the_report_says_so() -> None:
    result = port_text(
        """
        from megatron.utils import *

        def step(t):
            dist.all_reduce(t)
        """
    )
    (found,) = result.findings
    assert found.rewritten and found.assumed is not None
    assert "from megatron.utils import *" in found.assumed
    assert any("megatron.utils" in note for note in result.notes)


def test_unpacked_arguments_are_rewritten_only_where_compat_takes_every_keyword() -> None:
    result = port_text(
        """
        import torch.distributed as dist

        dist.all_reduce(t, **kwargs)
        dist.init_process_group(backend="gloo", **kwargs)
        dist.init_process_group(backend, init_method, **kwargs)
        dist.init_process_group(backend="cncl", **kwargs)
        dist.init_process_group(*args)
        dist.new_group(*args)
        """
    )
    reduce, *init, group = result.findings
    assert reduce.rewritten
    assert "compat.all_reduce(t, **kwargs)" in result.rewritten
    # torch's public keywords are all compat.init's; what **kwargs carries is assumed not to be
    # torch's private _ranks, and the finding says so
    assert init[0].rewritten and "_ranks" in str(init[0].assumed)
    assert 'compat.init(backend="gloo", **kwargs)' in result.rewritten
    # positional arguments before **kwargs go by torch's names: compat.init's first is framework
    assert init[1].rewritten
    assert "compat.init(backend=backend, init_method=init_method, **kwargs)" in result.rewritten
    # a backend compat has no table for (a plugin's): handed to torch, as torch's call did
    assert init[2].rewritten and 'compat.init(backend="cncl", **kwargs)' in result.rewritten
    assert init[3].category == "unpacked arguments" and "another order" in str(init[3].reason)
    assert group.category == "unpacked arguments"


def test_star_args_before_a_keyword_reach_only_the_parameters_ahead_of_it() -> None:
    """A group wrapper's ``dist.broadcast(*args, **kwargs, group=self.group)``: ``group`` by
    name means ``*args`` carries at most tensor and src (more would pass group twice), which
    compat.broadcast takes in torch's order; its ``group_src`` is keyword-only where torch's is
    the fifth positional, which ``*args`` alone could reach."""
    result = port_text(
        """
        import torch.distributed as dist

        def broadcast(self, *args, **kwargs):
            return dist.broadcast(*args, **kwargs, group=self.group)

        def broadcast_any(*args, **kwargs):
            return dist.broadcast(*args, **kwargs)
        """
    )
    named, anywhere = result.findings
    assert named.rewritten, named.text()
    assert "return compat.broadcast(*args, **kwargs, group=self.group)" in result.rewritten
    assert anywhere.category == "unpacked arguments"


def test_init_process_group_keeps_every_argument_compat_init_takes() -> None:
    result = port_text(
        """
        import torch.distributed as dist

        def main(rank, world):
            dist.init_process_group(
                "gloo", init_method="tcp://127.0.0.1:29500", world_size=world, rank=rank
            )
            dist.init_process_group(backend="nccl", store=store, rank=rank, world_size=world)
            dist.init_process_group(
            )
            dist.init_process_group(dist.Backend.NCCL, device_id=device, pg_options=options)
            dist.init_process_group("cpu:gloo,cuda:nccl", device_id=device)
            dist.init_process_group("gloo", _ranks=[0, 1])
        """
    )
    text = result.rewritten
    assert (
        'compat.init(\n        backend="gloo", init_method="tcp://127.0.0.1:29500", '
        "world_size=world, rank=rank\n    )" in text
    )
    assert 'compat.init(backend="nccl", store=store, rank=rank, world_size=world)' in text
    assert "compat.init()\n" in text  # no `compat.init(\n    )` leftover
    assert "compat.init(backend=compat.Backend.NCCL, device_id=device, pg_options=options)" in text
    # every string torch takes, a backend per device too
    assert 'compat.init(backend="cpu:gloo,cuda:nccl", device_id=device)' in text
    left = [f for f in result.findings if not f.rewritten]
    assert [f.category for f in left] == ["argument"], left
    assert "_ranks" in str(left[0].reason)


def test_references_are_rewritten_where_compat_stands_in_for_torch() -> None:
    result = port_text(
        """
        from typing import Optional

        import torch.distributed as dist
        from torch.distributed import ProcessGroup


        def run(t, group: Optional[ProcessGroup] = None, op: dist.ReduceOp = dist.ReduceOp.SUM):
            reduce_fn = dist.all_reduce
            reduce_fn(t, op, group or dist.group.WORLD)
            ops = [dist.P2POp(dist.isend, t, 1), dist.P2POp(dist.irecv, t, 1)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            gather_fn = dist.all_gather_into_tensor
            return isinstance(group, ProcessGroup), gather_fn
        """
    )
    text = result.rewritten
    assert "group: Optional[compat.Group] = None, op: compat.ReduceOp = compat.ReduceOp.SUM" in text
    assert "reduce_fn = compat.all_reduce" in text
    assert "reduce_fn(t, op, group or compat.framework_group())" in text
    assert "[compat.P2POp(compat.isend, t, 1), compat.P2POp(compat.irecv, t, 1)]" in text
    # torch's signature and result: compat.all_gather_into
    assert "gather_fn = compat.all_gather_into" in text
    left = {f.written: f.category for f in result.findings if not f.rewritten}
    assert left == {"ProcessGroup": "reference"}  # isinstance sees torch's groups too


def test_torch_distributed_nn_is_nn_functional_and_its_all_gather_stays_a_tuple() -> None:
    result = port_text(
        """
        import torch
        import torch.distributed.nn
        from torch.distributed.nn.functional import all_gather

        def gather_features(features):
            everything = torch.cat(torch.distributed.nn.all_gather(features), dim=0)
            stacked = torch.stack(all_gather(features))
            summed = torch.distributed.nn.all_reduce(features)
            return everything, stacked, summed
        """
    )
    assert [f.compat for f in result.findings] == [
        "compat.autograd.all_gather_tuple",
        "compat.autograd.all_gather_tuple",
        "compat.autograd.all_reduce",
    ]
    assert "torch.cat(compat.autograd.all_gather_tuple(features), dim=0)" in result.rewritten
    assert "import torch.distributed" not in result.rewritten


def test_differentiable_all_to_all_single_and_broadcast_are_rewritten() -> None:
    """funcol's all_to_all_single_autograd (MoE dispatch, Ulysses) and nn.functional's
    broadcast, all_to_all_single and all_to_all become compat.autograd's, their results used
    as torch's are."""
    result = port_text(
        """
        import torch
        import torch.distributed.nn.functional as dnn
        from torch.distributed._functional_collectives import all_to_all_single_autograd

        def dispatch(tokens, recv_splits, send_splits, group):
            routed = all_to_all_single_autograd(tokens, recv_splits, send_splits, group)
            even = all_to_all_single_autograd(tokens, None, None, group=group)
            shared = dnn.broadcast(tokens, src=0, group=group)
            mixed = dnn.all_to_all_single(torch.empty_like(tokens), tokens, group=group)
            dnn.all_to_all(outs, list(tokens.chunk(2)))
            return routed, even, shared, mixed, dnn.reduce(tokens, 0, op)
        """
    )
    text = result.rewritten
    assert (
        "routed = compat.autograd.all_to_all_single(tokens, recv_splits, send_splits, group)"
        in text
    )
    assert "even = compat.autograd.all_to_all_single(tokens, None, None, group=group)" in text
    assert "shared = compat.autograd.broadcast(tokens, src=0, group=group)" in text
    # torch's writes into output and returns it (a view), carrying the gradient
    assert (
        "mixed = torch.empty_like(tokens).copy_(compat.autograd.all_to_all_single(tokens, None, "
        "None, group))" in text
    )
    assert "compat.autograd.all_to_all(outs, list(tokens.chunk(2)))" in text
    # torch's reduce takes every op, compat.autograd.reduce SUM and AVG: left on torch
    left = [f.torch for f in result.findings if not f.rewritten]
    assert left == ["torch.distributed.nn.functional.reduce"], left


def test_results_that_differ_are_left_where_they_are_used() -> None:
    result = port_text(
        """
        import torch.distributed.nn.functional as F

        F.reduce_scatter(out, inputs)
        result = F.reduce_scatter(out, inputs)
        """
    )
    unused, used = result.findings
    # the result is checked first: where it is kept, that is the reason given
    assert unused.category == "argument" and used.category == "result"


def test_uses_of_torch_distributed_packages_compat_does_not_cover_are_counted_apart() -> None:
    result = port_text(
        """
        import torch.distributed as dist
        from torch.distributed.tensor import zeros

        def f(t, mesh):
            dist.all_reduce(t)
            return dist.tensor.randn(t, device_mesh=mesh), zeros
        """
    )
    assert [f.torch for f in result.findings] == ["torch.distributed.all_reduce"]
    assert any(
        "torch.distributed.tensor (1 of them calls), which compat does not cover" in n
        for n in result.notes
    )


def test_the_note_on_packages_compat_does_not_cover_counts_their_calls_too() -> None:
    # a checkpoint helper in the style of the training codebases: two calls and a reference
    result = port_text(
        """
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp

        def save(state, path):
            writer = dcp.FileSystemWriter(path)
            dcp.save(state, storage_writer=writer)
            dist.barrier()

        def load(state, path):
            reader_type = dcp.FileSystemReader
            dcp.load(state, storage_reader=reader_type(path))
        """
    )
    assert [f.torch for f in result.findings] == ["torch.distributed.barrier"]
    assert result.notes == [
        "4 uses of torch.distributed.checkpoint (3 of them calls), which compat does not cover"
        " (not counted)"
    ]


def test_report_counts_per_file_groups_reasons_and_check_and_json_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.py").write_text(
        "import torch.distributed as dist\n\n"
        "dist.all_reduce(t)\ndist.all_gather_coalesced([[t]], [t])\n"
    )
    (tmp_path / "b.py").write_text("import compat\n\ncompat.all_reduce(t)\n")
    assert cli.main(["port", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'a.py'}: 2 uses, 1 rewritten, 1 left" in out
    assert "a.py:4: dist.all_gather_coalesced -> not rewritten: compat has no counterpart" in out
    assert "2 files, 2 uses of torch.distributed/torch.cuda.comm: 1 rewritten (50.0%), 1 left" in (
        out
    )
    assert "   1 left: no counterpart: keep it on torch" in out
    assert cli.main(["port", "--check", str(tmp_path)]) == 1
    capsys.readouterr()
    assert cli.main(["port", "--check", str(tmp_path / "b.py")]) == 0
    capsys.readouterr()
    assert cli.main(["port", "--json", str(tmp_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"] == {"files": 2, "uses": 2, "rewritten": 1, "left": 1}
    assert report["left_by_reason"] == {"no counterpart": 1}
    assert report["files"][0]["findings"][1]["hint"].startswith("keep it on torch")
    assert (tmp_path / "a.py").read_text().startswith("import torch.distributed")


def test_private_helpers_with_an_exact_compat_form_are_written_as_that_expression() -> None:
    """_rank_not_in_group(g) -> compat.get_rank(g) < 0 (in parentheses where an operator
    binds it), _get_default_group() -> compat.framework_group(); a call that unpacks stays on
    torch."""
    result = port_text(
        """
        import torch.distributed as dist
        from torch.distributed.distributed_c10d import _get_default_group, _rank_not_in_group


        def members_only(group=None, **kw):
            if _rank_not_in_group(group):
                return -1
            assert not _rank_not_in_group(group) and dist.get_world_size(group) > 0
            pg = group or _get_default_group()
            skip = _rank_not_in_group(**kw)
            return pg.rank(), _rank_not_in_group(group=pg) == False, _rank_not_in_group(None)
        """
    )
    assert result.rewritten == textwrap.dedent(
        """
        import compat
        from torch.distributed.distributed_c10d import _rank_not_in_group


        def members_only(group=None, **kw):
            if compat.get_rank(group) < 0:
                return -1
            assert not (compat.get_rank(group) < 0) and compat.get_world_size(group) > 0
            pg = group or compat.framework_group()
            skip = _rank_not_in_group(**kw)
            return pg.rank(), (compat.get_rank(pg) < 0) == False, compat.get_rank(None) < 0
        """
    )
    left = [f for f in result.findings if not f.rewritten]
    assert [(f.line, f.category) for f in left] == [(11, "argument")]
    assert "*args/**kwargs" in str(left[0].reason)
    written = {f.line: f.compat for f in result.findings if f.written == "_rank_not_in_group"}
    assert written[7] == "compat.get_rank(group) < 0"


def test_all_reduce_coalesced_is_rewritten_with_its_arguments() -> None:
    result = port_text(
        """
        import torch.distributed as dist

        dist.all_reduce_coalesced(grads, dist.ReduceOp.SUM, group=pg, async_op=True).wait()
        """
    )
    assert "compat.all_reduce_coalesced(grads, compat.ReduceOp.SUM, group=pg, async_op=True)" in (
        result.rewritten
    )
    assert all(f.rewritten for f in result.findings)


def test_availability_subgroups_and_teardown_are_rewritten_to_compats_counterparts() -> None:
    """is_*_available -> compat.is_backend_available("<name>"); new_subgroups* and new_group ->
    compat's forms that return the framework's own groups; destroy_process_group -> compat's,
    which ends the process group as torch's does."""
    result = port_text(
        """
        import torch.distributed as dist

        backend = "nccl" if dist.is_nccl_available() else "gloo"
        use_mpi = dist.is_mpi_available() or dist.is_gloo_available()
        cur, subs = dist.new_subgroups(group_size=2)
        mine, every = dist.new_subgroups_by_enumeration([[0, 1], [2, 3]])
        pg = dist.new_group([0, 1], group_desc="tp")
        dist.destroy_process_group()
        """
    )
    text = result.rewritten
    assert 'backend = "nccl" if compat.is_backend_available("nccl") else "gloo"' in text
    assert (
        'use_mpi = compat.is_backend_available("mpi") or compat.is_backend_available("gloo")'
        in text
    )
    assert "cur, subs = compat.new_subgroups(group_size=2)" in text
    assert "mine, every = compat.new_subgroups_by_enumeration([[0, 1], [2, 3]])" in text
    assert 'pg = compat.new_framework_group([0, 1], group_desc="tp")' in text
    assert "compat.destroy_process_group()" in text
    assert "import torch" not in text
    assert all(finding.rewritten for finding in result.findings)


def test_member_only_groups_and_split_group_are_rewritten() -> None:
    """new_group(..., use_local_synchronization=True) (by keyword or position) and split_group
    (imported or through the module, by keyword or position) -> compat's member-only forms,
    which return the framework's own groups, split_group's backend= (torch 2.13's) included."""
    result = port_text(
        """
        import torch.distributed as dist
        from torch.distributed import split_group

        def build(ranks, parent):
            tp = dist.new_group(ranks, use_local_synchronization=True, group_desc="tp")
            dp = dist.new_group(ranks, None, None, None, True)
            pp = dist.split_group(parent, [[0, 1], [2, 3]], group_desc="pp")
            ep = split_group(split_ranks=[[0], [1]], timeout=None)
            cp = dist.split_group(split_ranks=[[0, 1]], backend="nccl")
            return tp, dp, pp, ep, cp
        """
    )
    text = result.rewritten
    assert (
        'tp = compat.new_framework_group(ranks, use_local_synchronization=True, group_desc="tp")'
        in text
    )
    assert "dp = compat.new_framework_group(ranks, None, None, None, True)" in text
    assert 'pp = compat.split_group(parent, [[0, 1], [2, 3]], group_desc="pp")' in text
    assert "ep = compat.split_group(split_ranks=[[0], [1]], timeout=None)" in text
    assert 'cp = compat.split_group(split_ranks=[[0, 1]], backend="nccl")' in text
    assert "dist." not in text
    assert len(result.findings) == 5 and all(finding.rewritten for finding in result.findings)


def test_coalescing_manager_blocks_of_an_optimizer_move_to_compat() -> None:
    """A sharded optimizer's blocks under torch's _coalescing_manager (gradients all-reduced
    asynchronously, parameters all-gathered, gradients reduce-scattered; a manager held in a
    variable) become compat.coalescing_manager blocks with their calls rewritten: compat's
    block collects compat's calls as torch's collects torch's."""
    result = port_text(
        """
        import torch
        import torch.distributed as dist


        class ShardedOptimizer:
            def __init__(self, params, dp_group):
                self.params = [p for p in params if p.requires_grad]
                self.dp_group = dp_group
                self.dp_size = dist.get_world_size(dp_group)

            def reduce_gradients(self):
                grads = [p.grad for p in self.params if p.grad is not None]
                dev = grads[0].device
                with dist._coalescing_manager(group=self.dp_group, device=dev, async_ops=True) as h:
                    for grad in grads:
                        dist.all_reduce(grad, group=self.dp_group)
                h.wait()
                torch._foreach_div_(grads, self.dp_size)

            def gather_parameters(self, shards, full):
                with dist._coalescing_manager(self.dp_group, shards[0].device):
                    for shard, flat in zip(shards, full):
                        dist.all_gather_into_tensor(flat, shard, group=self.dp_group)

            def scatter_gradients(self, flat_grads, grad_shards, overlap):
                manager = dist._coalescing_manager(group=self.dp_group, async_ops=overlap)
                with manager as cm:
                    for flat, shard in zip(flat_grads, grad_shards):
                        dist.reduce_scatter_tensor(
                            shard, flat, op=dist.ReduceOp.AVG, group=self.dp_group
                        )
                return cm
        """
    )
    text = result.rewritten
    assert (
        "with compat.coalescing_manager(group=self.dp_group, device=dev, async_ops=True) "
        "as h:" in text
    )
    assert "compat.all_reduce(grad, group=self.dp_group)" in text
    assert "with compat.coalescing_manager(self.dp_group, shards[0].device):" in text
    assert "compat.all_gather_into_tensor(shard, out=flat, group=self.dp_group)" in text
    assert "manager = compat.coalescing_manager(group=self.dp_group, async_ops=overlap)" in text
    assert "compat.reduce_scatter_tensor(" in text and "op=compat.ReduceOp.AVG" in text
    assert "dist." not in text and "import torch.distributed" not in text
    assert all(finding.rewritten for finding in result.findings)


def test_a_coalescing_manager_block_with_a_call_left_on_torch_stays_on_torch() -> None:
    """A call torch's manager collects that compat cannot take (ReduceOp.PREMUL_SUM) keeps the whole
    block on torch, its manager included: compat's block would run that torch call at once,
    out of torch's batch. The calls outside the block are rewritten."""
    result = port_text(
        """
        import torch.distributed as dist

        def sync_flags(flags, grads, group):
            with dist._coalescing_manager(group=group, async_ops=True) as cm:
                for flag in flags:
                    dist.all_reduce(flag, op=dist.ReduceOp.PREMUL_SUM, group=group)
                dist.broadcast(grads[0], 0, group=group)
            cm.wait()
            dist.barrier(group=group)
        """
    )
    text = result.rewritten
    assert "with dist._coalescing_manager(group=group, async_ops=True) as cm:" in text
    assert "dist.all_reduce(flag, op=dist.ReduceOp.PREMUL_SUM, group=group)" in text
    assert "dist.broadcast(grads[0], 0, group=group)" in text
    assert "compat.barrier(group=group)" in text
    left = {f.written: (f.category, f.reason) for f in result.findings if not f.rewritten}
    category, reason = left["dist._coalescing_manager"]
    assert category == "inside a torch block"
    assert reason.startswith("dist.all_reduce in its block stays on torch")
    assert left["dist.broadcast"][0] == "inside a torch block"


def test_identity_with_the_world_group_is_compared_by_value() -> None:
    """``pg is dist.group.WORLD``: compat.framework_group() returns, on MindSpore, a new group
    name at each call (equal, not the same object), so ``is`` becomes ``==`` (a torch
    ProcessGroup's ``==`` is ``is``); ``is None`` stays."""
    result = port_text(
        """
        import torch.distributed as dist
        from torch.distributed.distributed_c10d import _get_default_group


        class Team:
            def __init__(self, pg=None):
                self.pg = pg if pg is not None else dist.group.WORLD

            def subteam(self, ranks):
                if self.pg is not dist.group.WORLD:
                    raise ValueError("only the world team splits")
                return Team(dist.new_group(ranks))

            def is_world(self):
                return _get_default_group() is self.pg is not None
        """
    )
    text = result.rewritten
    assert "self.pg = pg if pg is not None else compat.framework_group()" in text
    assert "if self.pg != compat.framework_group():" in text
    assert "return compat.framework_group() == self.pg is not None" in text
    assert all(f.rewritten for f in result.findings)
    from compat.lifecycle import GroupName

    # why: two calls give equal names that are not the same object
    assert GroupName("mccl_world_group") == GroupName("mccl_world_group")
    assert GroupName("mccl_world_group") is not GroupName("mccl_world_group")


def test_identity_with_a_reduce_op_member_is_compared_by_value() -> None:
    """``op is dist.ReduceOp.SUM`` where op may be torch's member (here the default, kept for
    torch because the function hands it on to code that is neither torch's nor compat's):
    compat's member equals torch's but is not it, so ``is`` becomes ``==``; run, both
    comparisons keep their answers for torch's members and for compat's."""
    result = port_text(
        """
        import enum

        import torch
        import torch.distributed as dist


        class LibOp(enum.IntEnum):
            SUM = 0
            MAX = 3


        def to_lib_op(op):
            if op is torch.distributed.ReduceOp.SUM:
                return LibOp.SUM
            elif op is not dist.ReduceOp.MAX:
                raise ValueError(op)
            return LibOp.MAX


        def lib_all_reduce(tensor, op=dist.ReduceOp.SUM):
            return Bridge.apply(op, tensor)
        """
    )
    text = result.rewritten
    assert "if op == compat.ReduceOp.SUM:" in text
    assert "elif op != compat.ReduceOp.MAX:" in text
    assert "def lib_all_reduce(tensor, op=dist.ReduceOp.SUM):" in text
    import torch.distributed as dist

    namespace: dict[str, object] = {}
    exec(compile(text, "ported.py", "exec"), namespace)
    to_lib_op = namespace["to_lib_op"]
    assert to_lib_op(dist.ReduceOp.SUM) == 0 and to_lib_op(dist.ReduceOp.MAX) == 3  # type: ignore[operator]
    assert to_lib_op(compat_op("SUM")) == 0 and to_lib_op(compat_op("MAX")) == 3  # type: ignore[operator]
    with pytest.raises(ValueError):
        to_lib_op(dist.ReduceOp.MIN)  # type: ignore[operator]


def compat_op(name: str) -> object:
    import compat

    return getattr(compat.ReduceOp, name)


def test_import_torch_beside_import_torch_distributed_goes_when_nothing_uses_torch() -> None:
    """Python counts ``torch.distributed.x`` as a use of ``import torch.distributed`` only; once
    it is rewritten, the plain ``import torch`` beside it is unused too and goes (and stays
    where ``torch`` is still used)."""
    gone = port_text(
        """
        import torch
        import torch.distributed


        def world_size():
            return torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
        """
    ).rewritten
    assert "import torch" not in gone
    kept = port_text(
        """
        import torch
        import torch.distributed


        def ones():
            return torch.ones(torch.distributed.get_world_size())
        """
    ).rewritten
    assert kept.startswith("\nimport torch\nimport compat\n")
    assert "torch.ones(compat.get_world_size())" in kept


def test_a_function_compiled_whole_stays_on_torch() -> None:
    """``@torch.compile(fullgraph=True)`` captures torch's collectives in its graph; compat's
    calls would break the graph, which fullgraph refuses: the function stays torch's. Without
    fullgraph (or with ``fullgraph=False``) the calls are rewritten: they run between graphs."""
    result = port_text(
        """
        import torch
        import torch.distributed as dist


        @torch.compile(dynamic=False, fullgraph=True)
        def mean_loss(loss, group=None):
            dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=group)
            return loss


        @torch.compile(fullgraph=False)
        def total(x):
            dist.all_reduce(x)
            return x


        @torch.compile
        def share(counts):
            out = torch.empty_like(counts)
            dist.all_to_all_single(out, counts)
            return out
        """
    )
    text = result.rewritten
    assert "    dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=group)" in text
    assert "    compat.all_reduce(x)" in text
    assert "    compat.all_to_all_single(out, counts)" in text
    assert "import torch.distributed as dist" in text
    left = {f.written: f.category for f in result.findings if not f.rewritten}
    assert left == {"dist.all_reduce": "compiled", "dist.ReduceOp.AVG": "compiled"}


def test_the_world_group_before_init_is_none_where_torchs_helper_raises() -> None:
    """What ``_get_default_group()`` is ported to, ``compat.framework_group()``, returns None
    before any process group (as ``dist.group.WORLD`` is then) where torch's helper raises: the
    table records it, and the report shows it on that use."""
    code = (
        "import compat, torch.distributed as dist\n"
        "try:\n"
        "    dist.distributed_c10d._get_default_group()\n"
        "except ValueError:\n"
        "    print('torch raises', compat.framework_group())\n"
    )
    done = run_bounded([sys.executable, "-c", code], timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "torch raises None", done.stdout + done.stderr
    finding = port_text(
        """
        import torch.distributed as dist

        world = dist.distributed_c10d._get_default_group()
        """
    ).findings[0]
    assert finding.rewritten and any("before init" in d for d in finding.differences)


PATCHING_MODULE = '''
import torch.distributed as dist


class Wrapped:
    """A group handed out in place of torch's; the patched functions unwrap it."""

    def __init__(self, group):
        self.group = group


def unwrapping(function):
    def call(*args, **kwargs):
        args = tuple(a.group if isinstance(a, Wrapped) else a for a in args)
        kwargs = {k: v.group if isinstance(v, Wrapped) else v for k, v in kwargs.items()}
        return function(*args, **kwargs)

    return call


def patch_torch():
    send = dist.isend
    dist.get_rank = unwrapping(dist.get_rank)
    dist.all_reduce = unwrapping(dist.all_reduce)
    dist.barrier = unwrapping(dist.barrier)
    dist.P2POp.__init__ = unwrapping(dist.P2POp.__init__)
    return send


def world():
    return Wrapped(dist.group.WORLD) if dist.is_initialized() else None
'''

PATCHED_PROGRAM = """
import sys

import torch
import torch.distributed as dist

import compat
import patching

dist.init_process_group("gloo", init_method=sys.argv[1], rank=0, world_size=1)
send = patching.patch_torch()
t = torch.ones(2)
dist.all_reduce(t, group=patching.world())
compat.all_reduce(t)
op = dist.P2POp(dist.isend, t, 0, patching.world())
print(dist.get_rank(patching.world()), t.tolist(), send is dist.isend, op.group is not None)
dist.destroy_process_group()
"""


def test_a_file_that_patches_torch_distributed_keeps_the_torch_functions_it_wraps(
    tmp_path: Path,
) -> None:
    """A module that replaces torch.distributed's functions by wrappers (``dist.all_reduce =
    unwrapping(dist.all_reduce)``, as a reloadable-group layer does) keeps torch's functions
    in them: compat calls torch's, so a wrapper of compat's would call itself. What it assigns
    (``dist.P2POp.__init__``) stays torch's; its calls are still rewritten. Run on Gloo, the
    ported module gives the original's output."""
    result = port_text(PATCHING_MODULE, "patching.py")
    text = result.rewritten
    for kept in (
        "    send = dist.isend",
        "    dist.get_rank = unwrapping(dist.get_rank)",
        "    dist.all_reduce = unwrapping(dist.all_reduce)",
        "    dist.P2POp.__init__ = unwrapping(dist.P2POp.__init__)",
    ):
        assert kept in text
    assert "compat.framework_group()" in text and "compat.is_initialized()" in text
    left = {f.written: f.category for f in result.findings if not f.rewritten}
    assert set(left.values()) == {"patched"}, left
    outputs = []
    for source in (PATCHING_MODULE, text):
        (tmp_path / "patching.py").write_text(source, encoding="utf-8")
        (tmp_path / "program.py").write_text(PATCHED_PROGRAM, encoding="utf-8")
        init = f"file://{tmp_path}/store-{len(outputs)}"
        done = run_bounded([sys.executable, "program.py", init], timeout=120, cwd=str(tmp_path))
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] == "0 [1.0, 1.0] True True\n"


def test_names_a_module_exports_stay_imported_when_the_rewrite_stops_using_them() -> None:
    """A hub module re-exports torch's names for the rest of its project (``from hub import
    ReduceOp``): an import marked ``# noqa`` (F401) or named in ``__all__`` stays whole after the
    rewrite, though the module itself no longer uses it; unmarked imports still go."""
    result = port_text(
        """
        from torch import distributed as dist
        from torch.distributed import ProcessGroup, ReduceOp, Work  # noqa: F401
        from torch.distributed import ReduceOp as Op
        from torch.distributed import get_rank

        __all__ = ["Op", "all_reduce"]


        def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
            return dist.all_reduce(tensor, op, group, async_op)


        def reduce_max(tensor):
            return dist.all_reduce(tensor, Op.MAX), get_rank()
        """,
        "hub.py",
    )
    text = result.rewritten
    assert "from torch.distributed import ProcessGroup, ReduceOp, Work  # noqa: F401\n" in text
    assert "from torch.distributed import ReduceOp as Op\n" in text
    assert "from torch" + " import distributed" not in text and "import get_rank" not in text
    assert "def all_reduce(tensor, op=compat.ReduceOp.SUM, group=None, async_op=False):" in text
    assert "return compat.all_reduce(tensor, compat.ReduceOp.MAX), compat.get_rank()" in text
    namespace: dict[str, object] = {}
    exec(compile(text, "hub.py", "exec"), namespace)  # the test's own module, ported
    assert namespace["ReduceOp"] is namespace["Op"] is __import__("torch").distributed.ReduceOp


def test_a_computed_op_stays_on_torch_where_the_file_names_an_op_compat_lacks() -> None:
    """A helper's op map holding ReduceOp.PREMUL_SUM and RedOpType.PREMUL_SUM (which
    compat.ReduceOp lacks) and a call whose op comes from the map: the call stays on torch
    (compat would refuse "PREMUL" where torch runs), saying why; calls with an op compat has, or
    none, are rewritten. In a file naming no such member a computed op is rewritten as before."""
    result = port_text(
        """
        import torch.distributed as dist

        OPS = {
            "SUM": dist.ReduceOp.SUM,
            "PREMUL": dist.ReduceOp.PREMUL_SUM,
            "RAW": dist.ReduceOp.RedOpType.PREMUL_SUM,
        }

        def sync(tensor, op="SUM", group=None):
            dist.all_reduce(tensor, OPS[op], group=group)
            dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
            dist.reduce(tensor, 0)
            return tensor
        """
    )
    text = result.rewritten
    assert "    dist.all_reduce(tensor, OPS[op], group=group)" in text
    assert "compat.all_reduce(tensor, op=dist.ReduceOp.MAX)" in text
    assert "compat.reduce(tensor, 0)" in text
    left = [f for f in result.findings if not f.rewritten and f.torch.endswith("all_reduce")]
    assert len(left) == 1
    assert left[0].reason is not None and "ReduceOp.PREMUL_SUM" in left[0].reason
    plain = port_text(
        """
        import torch.distributed as dist

        def sync(tensor, op):
            dist.all_reduce(tensor, op=op)
        """
    )
    assert "compat.all_reduce(tensor, op=op)" in plain.rewritten


def test_bitwise_ops_are_rewritten_to_compat() -> None:
    """compat.ReduceOp has BAND, BOR and BXOR: a call passing one is rewritten, its member
    becomes compat's, and a call whose op comes from ignite's/mmengine's kind of op map
    (SUM, BAND, BOR) is rewritten too, since compat takes every member of the map."""
    result = port_text(
        """
        import torch.distributed as dist

        OPS = {"SUM": dist.ReduceOp.SUM, "AND": dist.ReduceOp.BAND, "OR": dist.ReduceOp.BOR}

        def sync(flags, tensor, op="SUM"):
            dist.all_reduce(flags, op=dist.ReduceOp.BXOR)
            dist.all_reduce(tensor, OPS[op])
        """
    )
    text = result.rewritten
    assert "compat.all_reduce(flags, op=compat.ReduceOp.BXOR)" in text
    assert "compat.all_reduce(tensor, OPS[op])" in text
    assert '"AND": compat.ReduceOp.BAND' in text
    assert all(finding.rewritten for finding in result.findings), [
        f.text() for f in result.findings if not f.rewritten
    ]


def test_a_functional_all_reduce_is_rewritten_with_every_op() -> None:
    """funcol's all_reduce runs its forward with every op (torchao's NVFP4 tensor-parallel
    linear syncs amaxes with "MAX") and its backward raises for every op but sum;
    compat.autograd.all_reduce, what it is rewritten to, reduces with every op and its backward
    raises for every op but SUM and AVG: every call is rewritten, a computed op too (torchtitan
    hands ``ReduceOp.MAX.name`` down to a helper), with no assumption to report."""
    result = port_text(
        """
        from torch.distributed._functional_collectives import all_reduce

        def amax(x, bias, y, op, group):
            col = all_reduce(x, "MAX", group)
            row = all_reduce(x, reduceOp="min", group=group)
            prod = all_reduce(x, "product", group)
            grad = all_reduce(bias, "SUM", group)
            mean = all_reduce(bias, "avg", group)
            other = all_reduce(y, op, group)
            return col, row, prod, grad, mean, other
        """
    )
    text = result.rewritten
    assert 'col = compat.autograd.all_reduce(x, "MAX", group)' in text
    assert 'row = compat.autograd.all_reduce(x, op="min", group=group)' in text
    assert 'prod = compat.autograd.all_reduce(x, "product", group)' in text
    assert 'grad = compat.autograd.all_reduce(bias, "SUM", group)' in text
    assert 'mean = compat.autograd.all_reduce(bias, "avg", group)' in text
    assert "other = compat.autograd.all_reduce(y, op, group)" in text
    assert all(f.rewritten and not f.assumed for f in result.findings if f.call), [
        f.text() for f in result.findings
    ]
    helper = port_text(
        """
        import torch.distributed as dist
        import torch.distributed._functional_collectives as funcol

        def _reduce(x, reduceOp, group):
            return funcol.all_reduce(x, reduceOp=reduceOp, group=group)

        def dist_max(x, group):
            return _reduce(x, reduceOp=dist.ReduceOp.MAX.name, group=group)

        def dist_min(x, group):
            return funcol.all_reduce(x, reduceOp=dist.ReduceOp.MIN.name, group=group)
        """
    )
    text = helper.rewritten
    assert "return compat.autograd.all_reduce(x, op=reduceOp, group=group)" in text
    assert "_reduce(x, reduceOp=compat.ReduceOp.MAX.name, group=group)" in text
    assert "compat.autograd.all_reduce(x, op=compat.ReduceOp.MIN.name, group=group)" in text
    assert all(f.rewritten for f in helper.findings), [f.text() for f in helper.findings]


def test_nn_functional_all_reduce_stays_on_torch_with_an_op_whose_backward_differs() -> None:
    """torch.distributed.nn.functional.all_reduce's backward all-reduces the gradient with the
    forward's op, MAX too, where compat.autograd.all_reduce's raises: a literal op other than
    SUM and AVG (the pair's ops) keeps the call on torch, saying why; SUM and AVG are
    rewritten; a computed op is left where the file names another member (MAX), else rewritten
    with the assumption said; funcol's all_reduce in the same file is rewritten whatever op."""
    result = port_text(
        """
        import torch.distributed as dist
        import torch.distributed._functional_collectives as funcol
        import torch.distributed.nn.functional as F

        def sync(x, op, group):
            peak = F.all_reduce(x, op=dist.ReduceOp.MAX)
            total = F.all_reduce(x)
            mean = F.all_reduce(x, dist.ReduceOp.AVG, group)
            other = F.all_reduce(x, op)
            same = funcol.all_reduce(x, op, group)
            return peak, total, mean, other, same
        """
    )
    text = result.rewritten
    assert "peak = F.all_reduce(x, op=dist.ReduceOp.MAX)" in text
    assert "total = compat.autograd.all_reduce(x)" in text
    assert "mean = compat.autograd.all_reduce(x, dist.ReduceOp.AVG, group)" in text
    assert "other = F.all_reduce(x, op)" in text
    assert "same = compat.autograd.all_reduce(x, op, group)" in text
    left = [f for f in result.findings if f.call and not f.rewritten]
    assert [f.line for f in left] == [7, 10], [f.text() for f in result.findings]
    for finding in left:
        assert finding.category == "differentiable op"
        assert finding.reason is not None and "with SUM and AVG only" in finding.reason
    assert left[0].reason is not None and left[0].reason.startswith("op MAX")
    assert left[1].reason is not None and "the file names ReduceOp.MAX" in left[1].reason
    unnamed = port_text(
        """
        import torch.distributed.nn.functional as F

        def sync(x, op):
            return F.all_reduce(x, op)
        """
    )
    (call,) = [f for f in unnamed.findings if f.call]
    assert call.rewritten and call.assumed is not None and "SUM or AVG" in call.assumed


def test_a_member_s_name_is_that_member_not_a_member_compat_lacks() -> None:
    """torchtitan passes ``dist.ReduceOp.MAX.name`` (the string "MAX") down to helpers: the
    file names MAX, which compat has, so an all_reduce whose op is computed is rewritten."""
    result = port_text(
        """
        import torch.distributed as dist

        def dist_max(x):
            return _reduce(x, dist.ReduceOp.MAX.name)

        def _reduce(x, op):
            dist.all_reduce(x, op=op)
            return x
        """
    )
    assert "compat.all_reduce(x, op=op)" in result.rewritten
    assert all(f.rewritten for f in result.findings), [f.text() for f in result.findings]


def test_values_stay_torchs_where_the_file_sets_a_torch_options_reduce_op() -> None:
    """torchft's pattern: ``opts = AllreduceOptions(); opts.reduceOp = op`` (left on torch,
    whose attribute takes torch's ReduceOp only) beside a ReduceOp the file compares and passes
    on. compat.ReduceOp there raised TypeError at the assignment: torch's members stay."""
    source = """
        from torch.distributed import AllreduceOptions, ReduceOp

        def allreduce(pg, tensor, reduce_op: ReduceOp = ReduceOp.AVG):
            op = ReduceOp.SUM if reduce_op == ReduceOp.AVG else reduce_op
            opts = AllreduceOptions()
            opts.reduceOp = op
            return pg.allreduce([tensor], opts)
        """
    result = port_text(source)
    assert "compat.ReduceOp." not in result.rewritten  # the annotation may say compat's type
    left = {f.written: (f.category, f.reason) for f in result.findings if not f.rewritten}
    assert left["ReduceOp.SUM"][0] == "kept for torch"
    assert "keeps torch.distributed for opts.reduceOp (line 7)" in str(left["ReduceOp.SUM"][1])
    # without the assignment, the members are compat's
    result = port_text(source.replace("opts.reduceOp = op", "opts.timeout = t"))
    assert "reduce_op: compat.ReduceOp = compat.ReduceOp.AVG" in result.rewritten


def test_a_default_op_handed_on_to_code_elsewhere_stays_torchs() -> None:
    """A group coordinator's ``all_reduce(x, op=ReduceOp.SUM)`` hands ``op`` on to a device
    communicator whose class lives in another module (not ported) and calls torch's
    all_reduce: compat.ReduceOp as the default raised TypeError there on every call."""
    source = """
        import torch.distributed as dist
        from torch.distributed import ReduceOp

        class Coordinator:
            def all_reduce(self, x, op: ReduceOp = ReduceOp.SUM):
                return self.communicator.all_reduce(x, op=op)

            def local(self, x, op: ReduceOp = ReduceOp.MAX):
                print(op)
                dist.all_reduce(x, op=op)
                return x
        """
    result = port_text(source)
    assert "op: compat.ReduceOp = ReduceOp.SUM" in result.rewritten
    assert "from torch.distributed import ReduceOp" in result.rewritten
    left = {f.written: (f.category, f.reason) for f in result.findings if not f.rewritten}
    assert left["ReduceOp.SUM"][0] == "kept for torch"
    assert "hands on to self.communicator.all_reduce" in str(left["ReduceOp.SUM"][1])
    # handed only to builtins and to calls that become compat's: compat's member
    assert "op: compat.ReduceOp = compat.ReduceOp.MAX" in result.rewritten
    assert "compat.all_reduce(x, op=op)" in result.rewritten


def test_a_ported_query_before_init_raises_what_torchs_raises() -> None:
    """``try: return dist.get_rank() except ValueError: return 0`` (a helper that also runs
    without a process group): torch raises ValueError before init_process_group, and compat's
    NotInitializedError, a RuntimeError only, escaped that ``except`` once ported."""
    import torch.distributed as dist

    import compat

    assert not dist.is_initialized() and not compat.is_initialized()
    for name in ("get_rank", "get_world_size", "get_backend", "barrier"):
        with pytest.raises(Exception) as torchs:
            getattr(dist, name)()
        with pytest.raises(compat.NotInitializedError) as compats:
            getattr(compat, name)()
        assert isinstance(compats.value, type(torchs.value)), (name, torchs.value)
    result = port_text(
        """
        import torch.distributed as dist

        def get_rank():
            try:
                return dist.get_rank()
            except ValueError:
                return 0

        def get_world_size():
            try:
                return dist.get_world_size()
            except (RuntimeError, ValueError):
                return 1
        """
    )
    assert "return compat.get_rank()" in result.rewritten
    namespace: dict[str, object] = {}
    exec(compile(result.rewritten, "ported.py", "exec"), namespace)
    assert namespace["get_rank"]() == 0 and namespace["get_world_size"]() == 1  # type: ignore[operator]


def test_an_op_passed_to_code_elsewhere_stays_torchs() -> None:
    """A trainer hands ``reduce_op=dist.ReduceOp.MAX`` to a timer class from another module
    (not ported), which stores it and calls torch's all_reduce with it: compat.ReduceOp there
    raised TypeError on every sync. Passed to a function or class of this file, or a builtin,
    the member is compat's (the file's calls are compat's, and compat takes torch's too)."""
    source = """
        import torch.distributed as dist
        from utils import SyncTimer

        def reduce_max(t, op):
            dist.all_reduce(t, op=op)

        class Comm:
            def all_reduce(self, t, op):
                dist.all_reduce(t, op=op)

        class Trainer:
            def __init__(self, t):
                self.timer = SyncTimer(reduction="mean", reduce_op=dist.ReduceOp.MAX)
                self.comm.all_reduce(t, dist.ReduceOp.MIN)
                reduce_max(t, dist.ReduceOp.SUM)
                comm = Comm()
                comm.all_reduce(t, dist.ReduceOp.BOR)
                self.ops = dict(avg=dist.ReduceOp.AVG)
                self.op = kwargs.pop("reduce_op", dist.ReduceOp.BAND)
                dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
        """
    result = port_text(source)
    left = {f.written: (f.category, f.reason) for f in result.findings if not f.rewritten}
    assert set(left) == {"dist.ReduceOp.MAX", "dist.ReduceOp.MIN"}, left
    assert left["dist.ReduceOp.MAX"][0] == "kept for torch"
    assert "passed to SyncTimer" in str(left["dist.ReduceOp.MAX"][1])
    assert "passed to self.comm.all_reduce" in str(left["dist.ReduceOp.MIN"][1])
    assert 'SyncTimer(reduction="mean", reduce_op=dist.ReduceOp.MAX)' in result.rewritten
    assert "reduce_max(t, compat.ReduceOp.SUM)" in result.rewritten
    assert "comm.all_reduce(t, compat.ReduceOp.BOR)" in result.rewritten  # the file's class
    assert "dict(avg=compat.ReduceOp.AVG)" in result.rewritten
    assert 'kwargs.pop("reduce_op", compat.ReduceOp.BAND)' in result.rewritten
    assert "compat.all_reduce(t, op=compat.ReduceOp.PRODUCT)" in result.rewritten


def test_an_op_stored_in_a_variable_then_passed_to_code_elsewhere_stays_torchs() -> None:
    """``op = dist.ReduceOp.MAX if ... else dist.ReduceOp.SUM`` (or a dict of members), then
    ``Timer(reduce_op=op)`` from another module: the members stay torch's. A variable used
    only by this file's calls keeps compat's."""
    source = """
        import torch.distributed as dist
        from metrics import Timer

        def timer(peak):
            op = dist.ReduceOp.MAX if peak else dist.ReduceOp.SUM
            return Timer(reduce_op=op)

        def sync(t, how):
            ops = {"min": dist.ReduceOp.MIN}
            self.comm.all_reduce(t, ops[how])

        def local(t, peak):
            op = dist.ReduceOp.PRODUCT if peak else dist.ReduceOp.AVG
            dist.all_reduce(t, op=op)
            return print(op)
        """
    result = port_text(source)
    left = {f.written: (f.category, f.reason) for f in result.findings if not f.rewritten}
    assert set(left) == {"dist.ReduceOp.MAX", "dist.ReduceOp.SUM", "dist.ReduceOp.MIN"}, left
    assert "passed to Timer" in str(left["dist.ReduceOp.MAX"][1])
    assert "passed to self.comm.all_reduce" in str(left["dist.ReduceOp.MIN"][1])
    assert "op = compat.ReduceOp.PRODUCT if peak else compat.ReduceOp.AVG" in result.rewritten


def test_a_check_guarding_a_patch_of_torchs_names_stays_torchs() -> None:
    """flash-attention's shim for older torch: ``if hasattr(dist, "_all_gather_base"):
    dist.all_gather_into_tensor = dist._all_gather_base``. The assignment's source stays
    torch's; the check guarding it became ``hasattr(compat, "all_gather_into_tensor")``, a
    check of another module than the one the next line reads."""
    source = """
        import torch

        if "all_gather_into_tensor" not in dir(torch.distributed):
            if hasattr(torch.distributed, "_all_gather_base"):
                torch.distributed.all_gather_into_tensor = torch.distributed._all_gather_base

        def gather(out, x, group):
            torch.distributed.all_gather_into_tensor(out, x, group=group)
        """
    result = port_text(source)
    assert 'if hasattr(torch.distributed, "_all_gather_base"):' in result.rewritten
    assert "compat.all_gather_into_tensor(x, out=out, group=group)" in result.rewritten
    left = {f.written: f.category for f in result.findings if not f.rewritten}
    assert left['hasattr(torch.distributed, "_all_gather_base")'] == "patched"


# A weight-sync helper: rank 0 serves a key-value store, the others connect; the trainer
# publishes versions of its weights, the workers wait for each and read it.
WEIGHT_SYNC = textwrap.dedent(
    """
    import pickle
    import socket
    from datetime import timedelta

    import torch.distributed as dist
    from torch.distributed import Store


    def weight_store(port: int, timeout: timedelta = timedelta(seconds=60)) -> dist.Store:
        rank, world = dist.get_rank(), dist.get_world_size()
        if rank == 0:
            store = dist.TCPStore("127.0.0.1", port, world, True, timeout)
        else:
            store = dist.TCPStore(host_name="127.0.0.1", port=port, world_size=world,
                                  is_master=False, timeout=timeout)
        return dist.PrefixStore("weights", store)


    def publish(store: Store, version: int, weights: dict) -> int:
        store.set(f"v{version}", pickle.dumps(weights))
        return store.add("published", 1)


    def fetch(store: Store, version: int) -> dict:
        store.wait([f"v{version}"], timedelta(seconds=60))
        return pickle.loads(store.get(f"v{version}"))


    dist.init_process_group("gloo")
    rank = dist.get_rank()
    chosen = [None]
    if rank == 0:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            chosen = [probe.getsockname()[1]]
    dist.broadcast_object_list(chosen, src=0)
    store = weight_store(chosen[0])
    assert isinstance(store, (dist.PrefixStore, dist.TCPStore))
    if rank == 0:
        for version in (1, 2):
            publish(store, version, {"w": [float(version), 2.0 * version], "step": version})
    for version in (1, 2):
        print("RESULT weights", rank, version, sorted(fetch(store, version).items()))
    dist.barrier()
    print("RESULT published", rank, int(store.get("published")))
    dist.barrier()  # rank 0's store serves until every rank has read
    dist.destroy_process_group()
    """
)


def test_a_weight_sync_store_helper_is_ported_and_runs_as_before(tmp_path: Path) -> None:
    original, ported = tmp_path / "sync.py", tmp_path / "ported_sync.py"
    original.write_text(WEIGHT_SYNC)
    result = port.port_source(WEIGHT_SYNC, str(ported))
    assert all(f.rewritten for f in result.findings), [f.text() for f in result.findings]
    text = result.rewritten
    assert "torch" not in text, text
    assert 'store = compat.TCPStore("127.0.0.1", port, world, True, timeout)' in text
    assert "store = compat.TCPStore(host_name=" in text
    assert 'return compat.PrefixStore("weights", store)' in text
    assert "-> compat.Store:" in text and "def publish(store: compat.Store," in text
    assert "isinstance(store, (compat.PrefixStore, compat.TCPStore))" in text
    ported.write_text(text)
    with ThreadPoolExecutor(2) as pool:
        on_mindspore = MINDSPORE and pool.submit(run_job, "mindspore", [str(ported)], 240)
        expected = run_job("torch", [str(original)], 120)
        assert len(expected) == 2 * 3 and expected == run_job("torch", [str(ported)], 120)
        pytest.importorskip("mindspore")
        assert on_mindspore and on_mindspore.result() == expected


def test_store_uses_compat_cannot_stand_in_for_stay_on_torch_with_the_reason() -> None:
    result = port_text(
        """
        import torch.distributed as dist


        class LoggingStore(dist.Store):
            pass


        def stores(path, store):
            exact = type(store) is dist.TCPStore
            files = dist.FileStore(path, 2)
            return exact, files, dist.distributed_c10d._get_default_store()
        """
    )
    assert result.rewritten == result.source
    left = {f.written: f.reason or "" for f in result.findings}
    assert "in annotations and isinstance only" in left["dist.Store"]
    assert "in annotations and isinstance only" in left["dist.TCPStore"]
    assert "A file-backed key-value store" in left["dist.FileStore"]
    assert "no counterpart" in left["dist.distributed_c10d._get_default_store"]


def test_a_name_also_bound_to_another_library_stays_as_written() -> None:
    """open-instruct's utils imports ``deepspeed.comm as dist`` in a try, then
    ``torch.distributed as dist``; a trainer may import one or the other by a flag. The other
    library's imports stay (they were replaced by ``import compat``); a use of a name the run
    may bind to either is left with the reason, and its torch arguments stay torch's."""
    result = port_text(
        """
        import torch

        try:
            import deepspeed.comm as dist
        except ImportError:
            pass
        import torch.distributed as dist
        if USE_TORCH:
            from torch.distributed import all_reduce
        else:
            from deepspeed.comm import all_reduce


        def rank(t):
            all_reduce(t, op=dist.ReduceOp.SUM)
            return dist.get_rank() + torch.distributed.get_world_size()
        """
    )
    text = result.rewritten
    assert "    import deepspeed.comm as dist\n" in text
    assert "import torch.distributed as dist\n" in text
    assert "from deepspeed.comm import all_reduce\n" in text
    assert "all_reduce(t, op=dist.ReduceOp.SUM)\n" in text
    assert "return compat.get_rank() + compat.get_world_size()\n" in text
    left = {(f.written, f.category) for f in result.findings if not f.rewritten}
    assert left == {("all_reduce", "shared name"), ("dist.ReduceOp.SUM", "inside a torch call")}, (
        left
    )


def test_a_use_in_a_function_after_torch_rebinds_the_name_for_good_is_torchs() -> None:
    """open-instruct's order: the module's own last statement binding ``dist`` imports torch's,
    so every function reaches torch's module: ported; the other library's import stays. Where
    the other library's import comes last, the uses are left."""
    result = port_text(
        """
        try:
            import deepspeed.comm as dist
        except ImportError:
            pass
        import torch.distributed as dist


        def rank():
            return dist.get_rank()
        """
    )
    assert result.rewritten == (
        "\ntry:\n    import deepspeed.comm as dist\nexcept ImportError:\n    pass\n"
        "import compat\n\n\ndef rank():\n    return compat.get_rank()\n"
    )
    last = port_text(
        """
        import torch.distributed as dist
        import deepspeed.comm as dist


        def rank():
            return dist.get_rank()
        """
    )
    # The uses reach either module, both torch-shaped: torch's import becomes compat.distributed.
    assert last.rewritten.startswith(
        "\nimport compat.distributed as dist\nimport deepspeed.comm as dist\n"
    )
    assert [(f.written, f.compat) for f in last.findings] == [
        ("dist.get_rank", "compat.distributed.get_rank")
    ]


@pytest.mark.parametrize(
    "lacking", ["dist.get_node_local_rank()", "dist.distributed_c10d._get_default_store()"]
)
def test_a_shared_name_stays_where_compat_distributed_lacks_a_torch_name_used(lacking: str) -> None:
    """One torch name compat.distributed has no counterpart of, used through the shared name:
    every use stays as today, and the reason names what is lacking."""
    result = port_text(
        f"""
        def run(flag, t):
            if flag:
                import torch.distributed as dist
            else:
                import otherlib.comm as dist
            dist.all_reduce(t)
            return {lacking}
        """
    )
    assert "import torch.distributed as dist\n" in result.rewritten
    assert "compat" not in result.rewritten
    left = [f for f in result.findings if not f.rewritten]
    assert len(left) == 2 and {f.category for f in left} == {"shared name"}
    assert all(lacking.split("(")[0] in f.reason for f in left), [f.reason for f in left]


# A parallel-dims module in the style of recent trainers: the groups come from a device mesh
# (torch.distributed.device_mesh.init_device_mesh), and every result goes through objects, so
# that the ported file runs unchanged on MindSpore too.
MESH_TRAINER = textwrap.dedent(
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh


    def build_mesh(shape: tuple) -> DeviceMesh:
        mesh = init_device_mesh("cpu", shape, mesh_dim_names=("dp", "tp"))
        assert isinstance(mesh, DeviceMesh)
        return mesh


    def dim_facts(mesh: DeviceMesh, name: str) -> tuple:
        group = mesh.get_group(name)
        gathered = [None] * dist.get_world_size(group)
        dist.all_gather_object(gathered, dist.get_rank() * 10, group=group)
        size = mesh.size(mesh.mesh_dim_names.index(name))
        return dist.get_process_group_ranks(group), mesh.get_local_rank(name), size, gathered


    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for shape in ((1, world), (world, 1)):
        mesh = build_mesh(shape)
        print("RESULT mesh", rank, shape, mesh.shape, mesh.get_coordinate(), mesh.mesh.tolist())
        for name in mesh.mesh_dim_names:
            print("RESULT dim", rank, shape, name, *dim_facts(mesh, name), mesh[name].mesh.tolist())
        flat = mesh["dp", "tp"]._flatten("dp_tp")
        print("RESULT flat", rank, shape, dist.get_process_group_ranks(flat.get_group()),
              flat.get_local_rank())
    # a 1-D world mesh unflattened into the named dims, as recent trainers build theirs
    world_mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("world",))
    dense = world_mesh._unflatten(0, (1, world, 1), ("pp", "dp", "tp"))
    print("RESULT unflatten", rank, dense.shape, dense.get_coordinate(),
          *(dim_facts(dense, name) for name in dense.mesh_dim_names))
    dist.barrier()
    dist.destroy_process_group()
    """
)


def test_a_mesh_built_trainer_is_ported_and_runs_as_before(tmp_path: Path) -> None:
    """init_device_mesh and DeviceMesh (annotations, isinstance) become compat's: torch's own
    mesh on torch, compat's on MindSpore, with the same groups and answers."""
    original, ported = tmp_path / "mesh.py", tmp_path / "ported_mesh.py"
    original.write_text(MESH_TRAINER)
    result = port.port_source(MESH_TRAINER, str(ported))
    assert all(f.rewritten for f in result.findings), [f.text() for f in result.findings]
    text = result.rewritten
    assert "torch" not in text, text
    assert 'mesh = compat.init_device_mesh("cpu", shape, mesh_dim_names=("dp", "tp"))' in text
    assert "def build_mesh(shape: tuple) -> compat.DeviceMesh:" in text
    assert "isinstance(mesh, compat.DeviceMesh)" in text
    ported.write_text(text)
    with ThreadPoolExecutor(2) as pool:
        on_mindspore = MINDSPORE and pool.submit(run_job, "mindspore", [str(ported)], 240)
        expected = run_job("torch", [str(original)], 120)
        assert len(expected) == 2 * (2 * 4 + 1) and expected == run_job("torch", [str(ported)], 120)
        pytest.importorskip("mindspore")
        assert on_mindspore and on_mindspore.result() == expected


# On torch the ported mesh is torch's own, and so are compat.tensor's DTensor names: DTensor,
# placements and funcol accept it as before; a name compat.tensor does not cover (zeros) stays
# torch's, split out of the mixed import.
MESH_DTENSOR = textwrap.dedent(
    """
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from torch.distributed import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor, zeros
    from torch.distributed._tensor import Partial, Placement


    def layout(placements: tuple[Placement, ...]) -> str:
        return "".join(str(p) for p in placements)


    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    sharded = distribute_tensor(torch.arange(10.0).reshape(5, 2), mesh, [Shard(0)])
    print("RESULT local", rank, sharded.to_local().tolist(), sharded.full_tensor().tolist())
    piece = torch.full((2, 3), rank + 1.0)
    made = DTensor.from_local(piece, mesh, [Shard(1)], run_check=True)
    moved = made.redistribute(mesh, [Shard(0)])
    print("RESULT moved", rank, layout(moved.placements), moved.shape, moved.to_local().tolist())
    summed = DTensor.from_local(piece, mesh, [Partial("sum")]).redistribute(mesh, [Replicate()])
    print("RESULT summed", rank, isinstance(summed, DTensor), summed.to_local().tolist())
    weight = torch.nn.Parameter(DTensor.from_local(piece, mesh, [Replicate()]))
    print("RESULT parameter", rank, type(weight).__name__, zeros(2, device_mesh=mesh).shape)
    total = funcol.all_reduce(torch.full((2,), rank + 1.0), "sum", mesh)
    print("RESULT funcol", rank, total.tolist())
    x = torch.full((3,), rank + 1.0)
    dist.all_reduce(x, group=mesh.get_group("dp"))
    print("RESULT group", rank, x.tolist())
    dist.destroy_process_group()
    """
)


def test_a_ported_mesh_and_dtensor_are_torchs_own(tmp_path: Path) -> None:
    original, ported = tmp_path / "dtensor.py", tmp_path / "ported_dtensor.py"
    original.write_text(MESH_DTENSOR)
    result = port.port_source(MESH_DTENSOR, str(ported))
    assert all(f.rewritten for f in result.findings), [f.text() for f in result.findings]
    text = result.rewritten
    assert 'mesh = compat.init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))' in text
    assert (
        "compat.tensor.distribute_tensor(torch.arange(10.0).reshape(5, 2), mesh, "
        "[compat.tensor.Shard(0)])" in text
    )
    assert "compat.tensor.DTensor.from_local(piece, mesh, [compat.tensor.Shard(1)]" in text
    assert 'compat.tensor.DTensor.from_local(piece, mesh, [compat.tensor.Partial("sum")])' in text
    assert "def layout(placements: tuple[compat.tensor.Placement, ...]) -> str:" in text
    assert "isinstance(summed, compat.tensor.DTensor)" in text
    assert "from torch.distributed.tensor import zeros\n" in text
    assert "torch.distributed._tensor" not in text and "Replicate, Shard" not in text
    assert 'compat.all_reduce(x, group=mesh.get_group("dp"))' in text
    ported.write_text(text)
    expected = run_job("torch", [str(original)], 120)
    assert len(expected) == 2 * 6 and expected == run_job("torch", [str(ported)], 120)


# -- a name bound to torch.distributed or to another torch-shaped library by a flag -------------
# A communication benchmark in the style of DeepSpeed's (each function imports torch.distributed
# or the other library as `dist` by a flag; a helper module keeps `global dist`). The other
# library is played by OTHER_COMM, a torch-shaped module of the test's own.

OTHER_COMM = '''"""A torch-shaped communication library (as deepspeed.comm is), the test's."""
import torch.distributed as _torch_dist


def allgather_fn(output, tensor, group=None, async_op=False):
    """A name of this library's own, which torch.distributed does not have."""
    return _torch_dist.all_gather_into_tensor(output, tensor, group=group, async_op=async_op)


def __getattr__(name):
    return getattr(_torch_dist, name)
'''

NS_TORCH = """
def make(values):
    import torch

    return torch.tensor(values, dtype=torch.float32)


def numpy(tensor):
    return tensor.numpy()
"""

NS_MINDSPORE = """
def make(values):
    import mindspore

    return mindspore.Tensor(values, mindspore.float32)


def numpy(tensor):
    return tensor.asnumpy()
"""

COMM_BENCH = (
    "import sys\n\nimport numpy as np\n\n"
    + BEGIN
    + NS_TORCH
    + END
    + textwrap.dedent(
        """

        def init_processes(flag):
            global dist
            if flag == "torch":
                import torch.distributed as dist
            else:
                import othercomm as dist
            dist.init_process_group("gloo")


        def sync_all():
            dist.barrier()


        def expect(tensor, values, what):
            got = numpy(tensor)
            assert np.array_equal(got, np.array(values, dtype=np.float32)), (what, got, values)
            return got.tolist()


        def run(flag):
            if flag == "torch":
                import torch.distributed as dist
            elif flag == "other":
                import othercomm as dist
            rank, world = dist.get_rank(), dist.get_world_size()
            seen = []
            x = make([rank + 1.0] * 4)
            dist.all_reduce(x, op=dist.ReduceOp.SUM)
            seen.append(expect(x, [world * (world + 1) / 2] * 4, "all_reduce"))
            later = make([rank + 2.0] * 3)
            dist.all_reduce(later, async_op=True)  # not waited: the barrier below follows it
            sync_all()
            seen.append(expect(later, [sum(r + 2.0 for r in range(world))] * 3, "async"))
            y = make([float(rank)] * 3)
            work = dist.broadcast(y, world - 1, async_op=True)
            work.wait()
            seen.append(expect(y, [world - 1.0] * 3, "broadcast"))
            out = make([-7.0] * (2 * world))
            dist.all_gather_into_tensor(out, make([rank, rank + 0.5]))
            seen.append(expect(out, [v for r in range(world) for v in (r, r + 0.5)], "gather"))
            mine = make([-7.0] * 2)
            dist.reduce_scatter_tensor(mine, make([float(i + rank) for i in range(2 * world)]))
            whole = [sum(i + r for r in range(world)) for i in range(2 * world)]
            seen.append(expect(mine, whole[2 * rank : 2 * rank + 2], "reduce_scatter"))
            swapped = make([-7.0] * world)
            dist.all_to_all_single(swapped, make([rank * 10.0 + i for i in range(world)]))
            seen.append(expect(swapped, [r * 10.0 + rank for r in range(world)], "all_to_all"))
            after, before = (rank + 1) % world, (rank - 1) % world
            got = make([-7.0] * 2)
            if rank == 0:
                dist.send(make([rank, 1.0]), after)
                dist.recv(got, before)
            else:
                dist.recv(got, src=before)
                dist.send(make([rank, 1.0]), after)
            seen.append(expect(got, [before, 1.0], "send/recv"))
            got = make([-7.0] * 2)
            works = [dist.irecv(got, src=before), dist.isend(make([rank, 2.0]), after)]
            for work in works:
                work.wait()
            seen.append(expect(got, [before, 2.0], "isend/irecv"))
            group = dist.new_group(list(range(world)))
            z = make([1.0, rank])
            dist.all_reduce(z, group=group)
            seen.append(expect(z, [world, sum(range(world))], "group"))
            if flag == "other":
                seen.append(dist.allgather_fn.__name__)
            sync_all()
            print("RESULT", flag, rank, seen)


        if __name__ == "__main__":
            init_processes(sys.argv[1])
            for flag in sys.argv[1:]:
                run(flag)
            dist.destroy_process_group()
        """
    )
)


# Runs the original and the ported benchmark in one job, each with the flags given: the
# original's teardown is skipped, so that the ported one adopts its process group and ends it.
BENCH_DRIVER = """
import contextlib
import io
import runpy
import sys
from pathlib import Path

flags, scripts = sys.argv[1].split(","), sys.argv[2:]
for index, script in enumerate(scripts):
    last = index == len(scripts) - 1
    if not last:
        import torch.distributed

        destroy = torch.distributed.destroy_process_group
        torch.distributed.destroy_process_group = lambda *args, **kwargs: None
    elif len(scripts) > 1:
        torch.distributed.destroy_process_group = destroy
    sys.argv = [script, *flags]
    sys.path.insert(0, str(Path(script).parent))  # its othercomm, as `python script` finds it
    sys.modules.pop("othercomm", None)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        runpy.run_path(script, run_name="__main__")
    for line in printed.getvalue().splitlines():
        print("RESULT", Path(script).parent.name, line.removeprefix("RESULT "), flush=True)
"""


def _bench_job(framework: str, driver: Path, flags: str, scripts: list[Path]) -> list[str]:
    sink = io.StringIO()
    command = [str(driver), flags, *map(str, scripts)]
    code = launch(2, command, framework, timeout=240, sink=sink, env={"GLOG_v": "3"})
    assert code == 0, sink.getvalue()[-4000:]
    return results(sink.getvalue())


def test_a_name_shared_with_another_library_runs_through_compat_distributed(
    tmp_path: Path,
) -> None:
    """Every torch use of the shared `dist` is one compat.distributed has: torch's imports of it
    become `import compat.distributed as dist`, the uses stay as written, the other library's
    own name (`dist.allgather_fn`) is no torch use; the file runs as before with either flag, and
    its torch branch runs on MindSpore."""
    original, ported, ms = tmp_path / "original", tmp_path / "ported", tmp_path / "ms"
    for folder in (original, ported, ms):
        folder.mkdir()
        (folder / "othercomm.py").write_text(OTHER_COMM)
    (original / "bench.py").write_text(COMM_BENCH)
    result = port.port_source(COMM_BENCH, "bench.py")
    assert result.rewritten == COMM_BENCH.replace(
        "import torch.distributed as dist", "import compat.distributed as dist"
    )
    assert all(f.rewritten for f in result.findings), [f.text() for f in result.findings]
    assert not any("allgather_fn" in f.written for f in result.findings)
    assert {f.compat for f in result.findings} >= {
        "compat.distributed.all_gather_into_tensor",
        "compat.distributed.ReduceOp.SUM",
        "compat.distributed.init_process_group",
    }
    (ported / "bench.py").write_text(result.rewritten)
    head, rest = result.rewritten.split(BEGIN)
    (ms / "bench.py").write_text(head + BEGIN + NS_MINDSPORE + rest.split(END)[1])
    driver = tmp_path / "driver.py"
    driver.write_text(BENCH_DRIVER)
    with ThreadPoolExecutor(2) as pool:
        on_mindspore = MINDSPORE and pool.submit(
            _bench_job, "mindspore", driver, "torch", [ms / "bench.py"]
        )
        both = [original / "bench.py", ported / "bench.py"]
        # One flag per job, as the benchmark runs: with both in one process, the ported file's
        # `sync_all` (compat's barrier) would follow torch's own async all_reduce, issued through
        # the other library, whose completion only torch's barrier waits for. The other flag
        # initialises torch itself: one job per script.
        found = _bench_job("torch", driver, "torch", both)
        for script in both:
            found += _bench_job("torch", driver, "other", [script])
        by_script = {
            name: sorted(line.replace(f" {name} ", " ", 1) for line in found if f" {name} " in line)
            for name in ("original", "ported")
        }
        assert len(by_script["original"]) == 4, found  # 2 ranks x 2 flags
        assert by_script["ported"] == by_script["original"]
        pytest.importorskip("mindspore")
        on_torch = [line for line in by_script["original"] if "] torch " in line]
        assert (
            on_mindspore
            and [line.replace(" ms ", " ", 1) for line in on_mindspore.result()] == on_torch
        )


def test_a_shared_name_stays_where_its_values_may_reach_a_use_left_on_torch() -> None:
    """Through compat.distributed, `dist.ReduceOp` is compat's: where the file keeps a torch
    function that may be handed it (a stored one), the shared uses stay, saying why."""
    result = port_text(
        """
        import torch

        hook = torch.distributed.get_node_local_rank


        def run(flag, t, op_name):
            if flag:
                import torch.distributed as dist
            else:
                import otherlib.comm as dist
            op = getattr(dist.ReduceOp, op_name)
            dist.all_reduce(t, op)
            hook(op)
        """
    )
    assert "import torch.distributed as dist\n" in result.rewritten
    left = {f.written: f.reason or "" for f in result.findings if not f.rewritten}
    assert set(left) == {
        "torch.distributed.get_node_local_rank",
        "dist.ReduceOp",
        "dist.all_reduce",
    }
    assert "`dist.ReduceOp` (line 12) would be compat's" in left["dist.all_reduce"]


def test_unpacked_arguments_of_a_call_left_on_torch_reach_only_its_parameters() -> None:
    """``new_group(**kwargs)`` stays on torch (its keys may be ones compat's function lacks), but
    torch's new_group has no op or group parameter: nothing the file passes through ``**kwargs``
    can be a ReduceOp it needs as torch's, so the file's members become compat's. A
    ``barrier(group, **kwargs)`` left on torch still keeps them (its group may come through)."""
    source = """
        import torch.distributed as dist

        def make(ranks, **kwargs):
            return dist.new_group(ranks, **kwargs)

        def top(x):
            dist.all_reduce(x, op=dist.ReduceOp.MAX)
        """
    result = port_text(source)
    left = {f.written: f.category for f in result.findings if not f.rewritten}
    assert left == {"dist.new_group": "unpacked arguments"}
    assert "compat.all_reduce(x, op=compat.ReduceOp.MAX)" in result.rewritten
    assert "dist.new_group(ranks, **kwargs)" in result.rewritten

    kept = port_text(
        source.replace("dist.new_group(ranks, **kwargs)", "dist.barrier(ranks, **kwargs)")
    )
    kept_left = {f.written: f.category for f in kept.findings if not f.rewritten}
    assert kept_left["dist.ReduceOp.MAX"] == "kept for torch"


def test_dtensor_names_become_compat_tensor_names_and_the_rest_is_counted_apart() -> None:
    """torch.distributed.tensor's and torch.distributed._tensor's DTensor names (by any module
    that defines them) become compat.tensor's, torch's own objects on torch, so subclasses,
    isinstance and stored references keep working; the names compat.tensor lacks stay torch's
    and the report counts them apart."""
    result = port_text(
        """
        import torch.distributed._tensor as dt
        from torch.distributed.tensor.placement_types import Shard
        from torch.distributed.tensor import DTensor, ones
        from torch.distributed.tensor.parallel import SequenceParallel


        class Rows(Shard):
            pass


        make = DTensor.from_local
        layout = [dt.Shard(0), dt.Replicate()]
        ready = isinstance(make, DTensor) and ones(2) and SequenceParallel()
        """
    )
    assert all(f.rewritten for f in result.findings), [f.text() for f in result.findings]
    assert len(result.findings) == 5
    text = result.rewritten
    assert "class Rows(compat.tensor.Shard):" in text
    assert "make = compat.tensor.DTensor.from_local\n" in text
    assert "layout = [compat.tensor.Shard(0), compat.tensor.Replicate()]" in text
    assert "isinstance(make, compat.tensor.DTensor) and ones(2)" in text
    assert "from torch.distributed.tensor import ones\n" in text
    assert "_tensor" not in text.replace("compat.tensor", "")
    assert any("2 uses of torch.distributed.tensor" in note for note in result.notes), result.notes


def test_a_device_mesh_built_by_its_constructor_becomes_compats() -> None:
    """HSDP's mesh of a submesh's ranks reshaped (prime-rl's and torchtitan's pattern): torch's
    constructor becomes compat.DeviceMesh's, torch's own mesh of that layout on torch; a call
    passing what compat lacks (backend_override) stays torch's."""
    result = port_text(
        """
        from torch.distributed.device_mesh import DeviceMesh

        def hsdp(device_type, parent, replicas):
            ranks = parent.mesh.reshape(replicas, -1)
            return DeviceMesh(device_type, ranks, mesh_dim_names=("dp_replicate", "dp_shard"))

        def tuned(ranks):
            return DeviceMesh("cuda", ranks, backend_override=(("nccl", None),))
        """
    )
    assert "return compat.DeviceMesh(device_type, ranks, mesh_dim_names=(" in result.rewritten
    left = {f.written: f.category for f in result.findings if not f.rewritten}
    assert left == {"DeviceMesh": "argument"}, left


def test_dtensor_names_in_a_file_that_sets_torchs_names() -> None:
    """A file that sets one of torch.distributed's names keeps references to torch's functions;
    compat.tensor's names are torch's own objects, so their references are rewritten there,
    except the very name the file sets (compat.tensor would have resolved it once)."""
    result = port_text(
        """
        import torch.distributed as dist
        import torch.distributed.tensor as dt
        from torch.distributed.tensor import DTensor, Shard

        dist.get_rank = lambda group=None: 0
        dt.Shard = type("Shard", (Shard,), {})
        kinds = (DTensor, Shard)
        """
    )
    by_name = {f.torch: f for f in result.findings}
    assert by_name["torch.distributed.tensor.DTensor"].rewritten
    assert by_name["torch.distributed.tensor.Shard"].category == "patched"
    assert "kinds = (compat.tensor.DTensor, Shard)" in result.rewritten


def test_elastics_port_helpers_become_compats() -> None:
    """torch elastic's port helpers, as fairchem, torchtnt and torchsnapshot choose a rendezvous
    port before init, become compat's; the rest of torch.distributed.elastic (the record
    decorator) stays torch's and is counted apart."""
    result = port_text(
        """
        import os
        from torch.distributed.elastic.utils.distributed import get_free_port, get_socket_with_port
        from torch.distributed.elastic.multiprocessing.errors import record

        @record
        def main():
            os.environ["MASTER_PORT"] = str(get_free_port())
            sock = get_socket_with_port()
            return sock.getsockname()[1]
        """
    )
    text = result.rewritten
    assert 'os.environ["MASTER_PORT"] = str(compat.get_free_port())' in text
    assert "sock = compat.get_socket_with_port()" in text
    assert "from torch.distributed.elastic.multiprocessing.errors import record\n" in text
    assert "elastic.utils" not in text
    assert all(f.rewritten for f in result.findings), [f.text() for f in result.findings]
    assert any("torch.distributed.elastic" in note for note in result.notes), result.notes
