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
