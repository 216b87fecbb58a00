"""compat where users start their jobs: torch.multiprocessing.spawn with init_method, and a plain
environment (RANK, WORLD_SIZE, MASTER_ADDR as Slurm scripts set them), with the process's own
thread settings (no OMP_NUM_THREADS), on real Gloo and MCCL ranks (tests/style_scripts.py)."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compat.base.environment import environment
from compat.base.net import free_port
from tests.jobs import BACKGROUND, CommandSpec
from tests.processes import run_bounded

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = str(ROOT / "tests" / "style_scripts.py")
FRAMEWORKS = ["torch", "mindspore"]


def _own_environment(framework: str) -> dict[str, str]:
    """This process's environment less what a launcher would set: no framework choice, no
    thread setting, no launcher's variables."""
    env = environment()
    for name in list(env):
        if name.startswith(("OMP_", "MKL_", "COMPAT_", "TORCHELASTIC_", "MS_", "PMIX_", "SLURM_")):
            del env[name]
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    env["STYLE_FRAMEWORK"] = framework
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["GLOG_v"] = "3"  # MindSpore: errors only
    return env


#: Plain-environment jobs that run several scenarios, so that one start of the ranks serves the
#: tests of each: MindSpore's 3 ranks check the results, then lose their last rank in all_reduce
#: (a MindSpore job started this way waits for the scheduler rank 0 starts to import MindSpore).
SHARED_JOBS = {("mindspore", 3): "results,killed_all_reduce"}


def plain_environment_outputs(framework: str, world: int, scenario: str) -> list[str]:
    """The ranks' outputs of the job that runs ``scenario`` (its own, or a shared one: see
    SHARED_JOBS), run once per session."""
    shared = SHARED_JOBS.get((framework, world), "")
    if scenario in shared.split(","):
        return list(_plain_environment_once(framework, world, shared, 500))
    timeout = 400 if scenario == "results" else 200
    return run_plain_environment(framework, world, scenario, timeout)


@functools.cache
def _plain_environment_once(
    framework: str, world: int, scenarios: str, timeout: float
) -> tuple[str, ...]:
    return tuple(run_plain_environment(framework, world, scenarios, timeout))


def run_plain_environment(framework: str, world: int, scenario: str, timeout: float) -> list[str]:
    """Start ``world`` ranks as a scheduler's script does (each its own process, the rendezvous
    in the environment) and return each rank's output (stdout then stderr)."""
    port = free_port()
    processes = []
    for rank in range(world):
        env = _own_environment(framework)
        env.update(
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        processes.append(
            subprocess.Popen(
                [sys.executable, SCRIPT, "env", scenario],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                start_new_session=True,
            )
        )
    deadline = time.monotonic() + timeout
    outputs = []
    try:
        for process in processes:
            left = max(1.0, deadline - time.monotonic())
            outputs.append(process.communicate(timeout=left)[0])
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the {framework} ranks did not finish within {timeout} s") from None
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return outputs


def spawn_run(framework: str, world: int) -> CommandSpec:
    """The spawn-style program on ``framework``: one process that starts its ranks, run in the
    background queue (tests/jobs.py)."""
    env = {**_own_environment(framework), "PYTHONFAULTHANDLER": "1"}
    command = (sys.executable, SCRIPT, "spawn", framework, str(world), "results")
    return CommandSpec(command, timeout=400, env=tuple(env.items()))


@pytest.mark.parametrize(
    ("framework", "world"),
    [
        pytest.param(framework, world, marks=pytest.mark.job(spawn_run(framework, world)))
        for framework, world in (("torch", 3), ("mindspore", 2))
    ],
)
def test_spawn_style_job_with_default_threads_matches_numpy(framework: str, world: int) -> None:
    """torch.multiprocessing.spawn (multiprocessing's spawn for MindSpore) and
    compat.init(init_method="tcp://...", rank=r, world_size=n) in a script that imports only its
    framework, with both frameworks installed: compat takes the framework from the imports, and
    the shared-memory reductions (single-threaded kernels) give numpy's results, 3 ranks on 2
    cores included. On MindSpore (tests/style_scripts.py _mindspore_spawn_options) torch's
    store and pg_options are refused first, and destroy() does not wait for the scheduler rank 0
    started (it would not end before the program does)."""
    done = BACKGROUND.result(spawn_run(framework, world))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert sorted(re.findall(r"RESULTS OK rank (\d+)", output)) == [str(r) for r in range(world)]
    took = [float(t) for t in re.findall(r"rank \d destroyed in ([\d.]+) s", output)]
    assert len(took) == world and max(took) < 8, output[-4000:]


@pytest.mark.parametrize(("framework", "world"), [("torch", 2), ("mindspore", 3)])
def test_plain_environment_job_with_default_threads_matches_numpy(
    framework: str, world: int
) -> None:
    outputs = plain_environment_outputs(framework, world, "results")
    for rank, output in enumerate(outputs):
        assert f"RESULTS OK rank {rank}" in output, f"rank {rank}:\n{output[-4000:]}"


#: what the others wait in when the last rank dies -> what their error says they waited for
WAITS = {
    "all_reduce": "in all_reduce",
    "recv": "in a receive of 1048576 bytes from group rank 2",
    "barrier": "in barrier",
    "monitored_barrier": "in monitored_barrier",
}


@pytest.mark.parametrize(
    ("framework", "waits_in"),
    [
        *(("torch", waits_in) for waits_in in WAITS),
        ("mindspore", "all_reduce"),
        ("mindspore", "recv"),
    ],
)
def test_a_killed_peer_is_named_on_every_other_rank_without_a_launcher(
    framework: str, waits_in: str
) -> None:
    """3 ranks in a plain environment, the last SIGKILLed in a loop of a call that waits for it
    in shared memory (a round of a collective, a point-to-point channel, a barrier): both
    others raise PeerLostError within 10 s naming it (global and group rank) and what they
    waited in, and their next call raises at once."""
    outputs = plain_environment_outputs(framework, 3, f"killed_{waits_in}")
    for rank, output in enumerate(outputs[:2]):
        raised = re.search(r"RAISED (\w+) after ([\d.]+) s: (.*)", output)
        assert raised is not None, f"rank {rank}:\n{output[-4000:]}"
        kind, seconds, message = raised.group(1), float(raised.group(2)), raised.group(3)
        assert kind == "PeerLostError", output[-4000:]
        assert seconds < 10, f"rank {rank} raised after {seconds} s"
        assert "rank 2 (group rank 2) left the group" in message, message
        assert f"while rank {rank} waited for it {WAITS[waits_in]}" in message, message
        following = re.search(r"NEXT (\w+) after ([\d.]+) s", output)
        assert following is not None, f"rank {rank}:\n{output[-4000:]}"
        assert following.group(1) == "PeerLostError" and float(following.group(2)) < 1.0


@pytest.mark.parametrize(
    ("framework", "style"),
    [("torch", "spawn"), ("torch", "torchrun"), ("mindspore", "env")],
)
def test_bench_runs_in_each_launch_style_and_says_so(framework: str, style: str) -> None:
    """compat bench --launch starts the ranks the way users do; the header names the style and
    the threads each rank ran with (spawn and env: the process's own, OMP_NUM_THREADS unset)."""
    env = _own_environment(framework)
    command = [
        sys.executable, "-m", "compat", "bench", "-n", "2", "--framework", framework,
        "--launch", style, "--op", "all_reduce", "--sizes", "1M..1M", "--rounds", "1",
        "--budget", "0.01", "--own-work-spread", "0.05",
    ]  # fmt: skip
    done = run_bounded(command, 300, env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    header = re.search(r"# launch: (.*); threads per rank: (.*)", output)
    assert header is not None, output[-4000:]
    assert header.group(1).startswith(style if style != "env" else "plain environment")
    threads = "OMP_NUM_THREADS 1" if style == "torchrun" else "OMP_NUM_THREADS unset"
    assert threads in header.group(2), header.group(0)
    assert re.search(r"^\s+1M\s+\d+\s+shared_memory_all_reduce", output, re.M), output[-4000:]
