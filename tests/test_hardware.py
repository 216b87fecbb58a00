"""The multi-rank suite on devices: every case of tests/ranks (both reduce_scatter styles, every
op and dtype, layouts, groups, async, bad input) on 2 GPUs (torch NCCL) or 2 NPUs (MindSpore
HCCL) with the pre-flight check on, and a short ``compat bench``. MindSpore on GPU takes the ops
primitives path (capabilities.toml): all_reduce runs there, point to point says it is
unsupported.

Run by ``make test-gpu`` / ``make test-npu`` (``COMPAT_HARDWARE``); in ``make test``, and where
the devices are absent, each test skips and says why (``-rs`` prints it)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.jobs import ROOT, run_job
from tests.ranks.cases import case_names

#: (hardware, framework, backend) the suite runs; the device counts come from the frameworks'
#: own view (torch) or the Ascend driver's device files (/dev/davinciN).
TARGETS = [("gpu", "torch", "nccl"), ("npu", "mindspore", "hccl")]
WORLD = 2
JOB_TIMEOUT = 1800.0


def _devices(hardware: str) -> int:
    if hardware == "gpu":
        import torch

        return torch.cuda.device_count()
    return len(glob.glob("/dev/davinci[0-9]*"))


def _skip_unless_present(hardware: str) -> None:
    found = _devices(hardware)
    if found < WORLD:
        pytest.skip(f"needs {WORLD} {hardware.upper()}s; this machine has {found}")
    if os.environ.get("COMPAT_HARDWARE") != hardware:
        pytest.skip(f"{found} {hardware.upper()}s here: run the suite with `make test-{hardware}`")


@pytest.mark.parametrize(("hardware", "framework", "backend"), TARGETS)
def test_every_rank_case_passes_on_devices(hardware: str, framework: str, backend: str) -> None:
    _skip_unless_present(hardware)
    cases = case_names(framework, WORLD)
    env = {"COMPAT_TEST_BACKEND": backend, "COMPAT_CHECK": "1"}
    result = run_job(framework, WORLD, "tests.ranks.cases", cases, JOB_TIMEOUT, env=env)
    failures = {case: result.failure(case) for case in cases}
    failed = {case: text for case, text in failures.items() if text is not None}
    assert not failed, f"{len(failed)} of {len(cases)} cases failed:\n" + "\n".join(
        f"--- {case}\n{text}" for case, text in list(failed.items())[:10]
    )


@pytest.mark.parametrize(("hardware", "framework", "backend"), TARGETS)
def test_bench_runs_on_devices(hardware: str, framework: str, backend: str) -> None:
    _skip_unless_present(hardware)
    command = [
        sys.executable, "-m", "compat", "bench", "-n", str(WORLD), "--framework", framework,
        "--sizes", "1K..64K", "--rounds", "2", "--budget", "0.01", "--timeout", "600",
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**os.environ, "COMPAT_TEST_BACKEND": backend},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


UNSUPPORTED_ON_MINDSPORE_GPU = """
import numpy as np
import mindspore as ms
import compat

compat.init("mindspore", "nccl")
tensor = ms.Tensor(np.ones(4, np.float32))
compat.all_reduce(tensor)  # ops.AllReduce: the primitives path (capabilities.toml)
assert np.allclose(tensor.asnumpy(), compat.get_world_size()), tensor
try:
    compat.send(tensor, (compat.get_rank() + 1) % compat.get_world_size())
except compat.UnsupportedError as error:
    assert "nccl" in str(error), error
else:
    raise AssertionError("send ran on MindSpore's GPU backend: update capabilities.toml")
print("UNSUPPORTED AS RECORDED", flush=True)
"""


def test_mindspore_gpu_collectives_say_they_are_unsupported(tmp_path: Path) -> None:
    _skip_unless_present("gpu")
    script = tmp_path / "mindspore_gpu.py"
    script.write_text(UNSUPPORTED_ON_MINDSPORE_GPU)
    command = [
        sys.executable, "-m", "compat", "launch", "-n", str(WORLD), "--framework", "mindspore",
        "--timeout", "600", str(script),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("UNSUPPORTED AS RECORDED") == WORLD, done.stdout[-3000:]


# -- make test-gpu1: one NVIDIA GPU, whatever torch it has ------------------------------------
# Each part skips, naming itself and why, where there is no GPU or COMPAT_HARDWARE is not gpu1;
# `make test-gpu1` runs them with -rA, so the summary lists what ran and what was skipped.


def _skip_unless_one_gpu() -> Any:
    torch = pytest.importorskip("torch")
    found = torch.cuda.device_count()
    if found < 1:
        pytest.skip(f"needs 1 NVIDIA GPU; none here (torch {torch.__version__}, CUDA available: "
                    f"{torch.cuda.is_available()})")  # fmt: skip
    if os.environ.get("COMPAT_HARDWARE") != "gpu1":
        pytest.skip(f"{found} GPU(s) here: run this check with `make test-gpu1`")
    return torch


def test_gpu1_nccl_world_of_one_runs_every_case() -> None:
    """NCCL at world size 1: every rank case on cuda:0 (the kit's tensors go to the home
    device), with the pre-flight check on."""
    _skip_unless_one_gpu()
    cases = case_names("torch", 1)
    env = {"COMPAT_TEST_BACKEND": "nccl", "COMPAT_CHECK": "1"}
    result = run_job("torch", 1, "tests.ranks.cases", cases, 360.0, env=env)
    failed = {case: text for case in cases if (text := result.failure(case)) is not None}
    assert not failed, f"{len(failed)} of {len(cases)} cases failed:\n" + "\n".join(
        f"--- {case}\n{text}" for case, text in list(failed.items())[:10]
    )


GLOO_WITH_CUDA_TENSORS = """
import torch
import torch.distributed as dist
import compat

compat.init("torch", "gloo")
me, world = compat.get_rank(), compat.get_world_size()
# torch's Gloo takes CUDA tensors for all_reduce, broadcast and all_gather (both ranks on cuda:0).
tensor = torch.full((4,), float(me + 1), device="cuda:0")
dist.all_reduce(tensor)
assert tensor.tolist() == [world * (world + 1) / 2] * 4, tensor
# compat on Gloo communicates from the CPU (its home device): a CUDA tensor is refused before
# any communication, naming the parameter and both devices, and the next call works.
try:
    compat.all_reduce(tensor)
except TypeError as error:
    assert "tensor" in str(error) and "cpu" in str(error) and "cuda:0" in str(error), error
else:
    raise AssertionError("compat took a CUDA tensor on Gloo")
host = torch.full((4,), float(me + 1))
compat.all_reduce(host)
assert host.tolist() == [world * (world + 1) / 2] * 4, host
print("GLOO CUDA OK", flush=True)
"""

NCCL_DEVICE_RULES = """
import torch
import compat

compat.init("torch", "nccl")  # a world of one, no launcher
assert compat.get_backend() == "nccl" and compat.get_world_size() == 1
home = torch.device("cuda", torch.cuda.current_device())
tensor = torch.arange(4.0, device=home)
compat.all_reduce(tensor)
assert tensor.tolist() == [0.0, 1.0, 2.0, 3.0], tensor
for where in ("cpu", "meta"):
    other = torch.zeros(4, device=where)
    try:
        compat.all_reduce(other)
    except TypeError as error:
        assert str(home) in str(error) and where in str(error), error
    else:
        raise AssertionError(f"compat took a {where} tensor on NCCL")
out = compat.all_gather_into_tensor(tensor)
assert out.device == home and out.tolist() == tensor.tolist(), out
print("DEVICE RULES OK", flush=True)
"""


def _run_script(tmp_path: Path, text: str, ranks: int) -> str:
    script = tmp_path / "script.py"
    script.write_text(text)
    command = [sys.executable, str(script)]
    if ranks > 1:
        command = [
            sys.executable, "-m", "compat", "launch", "-n", str(ranks), "--framework", "torch",
            "--timeout", "120", str(script),
        ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_gpu1_gloo_at_two_ranks_with_cuda_tensors(tmp_path: Path) -> None:
    _skip_unless_one_gpu()
    assert _run_script(tmp_path, GLOO_WITH_CUDA_TENSORS, 2).count("GLOO CUDA OK") == 2


def test_gpu1_device_rules_on_nccl(tmp_path: Path) -> None:
    _skip_unless_one_gpu()
    assert "DEVICE RULES OK" in _run_script(tmp_path, NCCL_DEVICE_RULES, 1)


def test_gpu1_comm_delegates_to_torch_cuda_comm(monkeypatch: pytest.MonkeyPatch) -> None:
    """compat.comm on CUDA tensors is torch.cuda.comm's own call (after compat's checks), with
    torch's results."""
    torch = _skip_unless_one_gpu()
    import torch.cuda.comm as cuda_comm

    import compat.comm

    called: list[str] = []
    for name in ("broadcast", "scatter", "gather", "reduce_add"):
        original = getattr(cuda_comm, name)

        def spy(*args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            called.append(_name)
            return _original(*args, **kw)

        monkeypatch.setattr(cuda_comm, name, spy)
    tensor = torch.arange(8.0, device="cuda:0").reshape(4, 2)
    (copy,) = compat.comm.broadcast(tensor, [0])
    assert torch.equal(copy, tensor)
    parts = compat.comm.scatter(tensor, [0])
    assert torch.equal(parts[0], tensor)
    assert torch.equal(compat.comm.gather([tensor], destination=0), tensor)
    assert torch.equal(compat.comm.reduce_add([tensor], destination=0), tensor)
    assert called == ["broadcast", "scatter", "gather", "reduce_add"], called


def test_gpu1_bench_prints_compats_own_work_on_cuda_tensors() -> None:
    _skip_unless_one_gpu()
    command = [
        sys.executable, "-m", "compat", "bench", "-n", "1", "--framework", "torch",
        "--op", "all_reduce,all_gather_into_tensor,broadcast", "--sizes", "1K..64K",
        "--rounds", "2", "--budget", "0.01", "--timeout", "300",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(done.stdout)  # the figures, for the docs
    assert "torch/nccl" in done.stdout, done.stdout[-3000:]
    assert "compat's own work per call" in done.stdout, done.stdout[-3000:]
