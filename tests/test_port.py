"""compat port: detection (every import style), rewriting (formatting and comments kept), and real
torch snippets that, rewritten, run on torch and MindSpore with the original's results."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compat.tools import cli, port
from compat.tools.launch import launch
from tests.processes import run_bounded

pytest.importorskip("libcst")

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
compat.destroy = lambda: None
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
    expected: list[str] = []
    for name, source in SNIPPETS.items():
        (original / f"{name}.py").write_text(source)
        (ported / f"{name}.py").write_text(source)
        expected += run_job("torch", [str(original / f"{name}.py")], 120)
    assert len(expected) == 2 * (2 + 2 + 4), expected

    result = run_bounded(
        [sys.executable, "-m", "compat", "port", "--write", str(ported)], timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = result.stdout
    assert "-> not rewritten" not in report, report
    assert "rewrote 29 uses in 3 files; 0 not rewritten" in report, report
    for name in SNIPPETS:
        text = (ported / f"{name}.py").read_text()
        assert "dist." not in text and "torch.distributed" not in text, text
        assert "import compat\n" in text and text.index("import compat") < text.index(BEGIN)
    deepspeed = (ported / "deepspeed.py").read_text()
    assert 'if hasattr(compat, "reduce_scatter_tensor") and not fallback:' in deepspeed
    assert (
        "return compat.reduce_scatter_tensor(input_tensor, group=group, out=output_tensor)"
        in deepspeed
    )
    assert "# older torch: a list of per-rank chunks" in deepspeed
    clip = (ported / "clip.py").read_text()
    assert (
        "compat.reduce_scatter_tensor(grad_output.contiguous(), op=compat.ReduceOp.SUM, "
        "out=grad_input)" in clip
    )
    assert "compat.all_gather_into_tensor(tensor, out=output)" in clip

    scripts = [str(ported / f"{name}.py") for name in SNIPPETS]
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    expected.sort()
    assert run_job("torch", [str(driver), *scripts], 120) == expected

    pytest.importorskip("mindspore")
    mindspore_scripts = []
    for script in map(Path, scripts):
        text = script.read_text()
        head, rest = text.split(BEGIN)
        _, tail = rest.split(END)
        copy = tmp_path / f"ms_{script.name}"
        copy.write_text(head + BEGIN + MINDSPORE_TENSORS + END + tail)
        mindspore_scripts.append(str(copy))
    assert run_job("mindspore", [str(driver), *mindspore_scripts], 240) == expected


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

        dist.send(t, 1, tag=7)
        dist.reduce_scatter_tensor(out, inp, async_op=True)
        dist.all_reduce(t, op=dist.ReduceOp.BAND)
        handler = dist.all_reduce
        """
    )
    result = port.port_source(source, "f.py")
    assert result.rewritten == source  # nothing rewritten: no import compat either
    reasons = {(f.line, f.written): f.reason for f in result.findings}
    assert all(reason for reason in reasons.values())
    reasons = {written: reason for (line, written), reason in reasons.items() if line != 7}
    assert "compat.send has no tag" in str(reasons["dist.send"])
    assert "returns (tensor, Work)" in str(reasons["dist.reduce_scatter_tensor"])
    assert "compat.ReduceOp has no BAND" in str(reasons["dist.ReduceOp.BAND"])
    assert "compat has no dist.ReduceOp.BAND" in str(reasons["dist.all_reduce"])
    texts = [f.text() for f in result.findings]
    assert any(
        "f.py:7: dist.all_reduce -> not rewritten: referenced without a call" in t for t in texts
    )


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
            compat.init()  # join
            compat.reduce_scatter_tensor(inp, op=compat.ReduceOp.AVG, out=out)  # average
            compat.all_gather_into_tensor(
                inp,
                group=group,
                out=out,  # the output
            )
            compat.reduce_scatter(out, lst)
            compat.all_reduce(lst[0], op=compat.ReduceOp.SUM)  # sum
            compat.recv(out, 0)
            compat.send(out, dst=1)
            g = compat.new_group([0, 1])
            print(compat.get_rank(g), compat.get_world_size(), os.sep)
            compat.destroy()
        '''
    )
    init = result.findings[0].text()
    assert init.startswith("step.py:9: dist.init_process_group -> compat.init (MindSpore: ")
    assert 'dropped: backend="gloo"' in init and 'init_method="env://"' in init
    recv = next(f for f in result.findings if f.written == "dist.recv")
    assert recv.dropped == ["tag=0 (torch's default)"]


def test_torch_imports_still_used_are_kept_and_compat_is_imported_once() -> None:
    source = (
        "import compat\nimport torch.distributed as dist\n\ndist.all_reduce(t)\n"
        "dist.send(t, 1, tag=7)\n"
    )
    result = port.port_source(source)
    assert result.rewritten == (
        "import compat\nimport torch.distributed as dist\n\n"
        "compat.all_reduce(t)\ndist.send(t, 1, tag=7)\n"
    )


def test_cli_diff_prints_a_unified_diff_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "train.py"
    source = "import torch.distributed as dist\n\ndist.all_reduce(t, op=dist.ReduceOp.SUM)\n"
    script.write_text(source)
    assert cli.main(["port", "--diff", str(script)]) == 0
    out = capsys.readouterr().out
    assert f"{script}:3: dist.all_reduce -> compat.all_reduce (MindSpore: " in out
    assert (
        "-dist.all_reduce(t, op=dist.ReduceOp.SUM)\n+compat.all_reduce(t, op=compat.ReduceOp.SUM)"
        in out
    )
    assert script.read_text() == source
    assert cli.main(["port", "--write", str(script)]) == 0
    assert script.read_text() == "import compat\n\ncompat.all_reduce(t, op=compat.ReduceOp.SUM)\n"


def test_import_compat_does_not_import_libcst() -> None:
    code = "import sys, compat, compat.tools.port, compat.tools.cli; print('libcst' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
