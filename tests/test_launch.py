"""compat launch: environment (torchrun's and msrun's, compared with theirs), devices and their
refusals, rank-prefixed output, failure propagation, timeouts, torchrun."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from compat.base import tables
from compat.base.environment import environment
from compat.tools import launch as launch_module
from compat.tools.launch import (
    TIMEOUT_EXIT_CODE,
    Devices,
    LaunchError,
    assign_devices,
    available_devices,
    free_port,
    launch,
    rank_environments,
)
from tests.jobs import BACKGROUND, CommandSpec
from tests.processes import run_bounded

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "reduce_scatter_styles.py"
#: A line MindSpore's logging wrote ("[WARNING] DISTRIBUTED(...", "[ERROR] ME(...").
FRAMEWORK_LOG = re.compile(r"\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\] [A-Z_]+\(")


def write(tmp_path: Path, body: str) -> str:
    script = tmp_path / "script.py"
    script.write_text(body)
    return str(script)


def test_ranks_get_torchrun_environment_and_prefixed_output(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        "import os\nprint('hello', os.environ['RANK'], os.environ['WORLD_SIZE'], "
        "os.environ['MASTER_ADDR'])\n",
    )
    sink = io.StringIO()
    assert launch(3, [script], "torch", timeout=60, sink=sink) == 0
    lines = sorted(sink.getvalue().splitlines())
    assert lines == [f"[rank {r}] hello {r} 3 127.0.0.1" for r in range(3)]


def test_a_failing_rank_stops_the_others_and_the_exit_code_is_its_own(tmp_path: Path) -> None:
    script = write(
        tmp_path,
        "import os, sys, time\n"
        "if os.environ['RANK'] == '1':\n    print('failing'); sys.exit(3)\n"
        "time.sleep(120)\n",
    )
    sink = io.StringIO()
    started = time.monotonic()
    code = launch(3, [script], "torch", timeout=100, sink=sink)
    assert code == 3
    assert time.monotonic() - started < 30, "the other ranks were not stopped"
    assert "rank 1 exited with code 3; stopping the other ranks" in sink.getvalue()


def test_a_hanging_job_is_stopped_by_the_timeout(tmp_path: Path) -> None:
    script = write(tmp_path, "import time\ntime.sleep(120)\n")
    sink = io.StringIO()
    started = time.monotonic()
    assert launch(2, [script], "torch", timeout=3, sink=sink) == TIMEOUT_EXIT_CODE
    assert time.monotonic() - started < 20
    assert "timed out after 3 s; still running: rank 0, rank 1" in sink.getvalue()


def test_cli_launch_runs_the_user_script_on_three_ranks() -> None:
    result = run_bounded(
        [
            sys.executable,
            "-m",
            "compat",
            "launch",
            "-n",
            "3",
            "--framework",
            "torch",
            "--timeout",
            "120",
            str(EXAMPLE),
        ],
        timeout=180,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    for rank, expected in enumerate(["[ 6. 12.]", "[18. 24.]", "[30. 36.]"]):
        assert f"rank {rank}: reduce_scatter -> {expected}" in result.stdout, result.stdout


def test_the_same_script_runs_under_torchrun(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.fail("torchrun is missing beside the interpreter: torch ships it")
    env = {k: v for k, v in os.environ.items() if k != "COMPAT_FRAMEWORK"}
    # torchrun's own rendezvous needs a real port: with --master-port 0 it waits forever.
    result = run_bounded(
        [torchrun, "--nproc-per-node", "2", "--master-port", str(free_port()), str(EXAMPLE)],
        timeout=120,
        env=env,
        cwd=str(tmp_path),
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "torch/gloo rank 0: reduce_scatter -> [3. 6.]" in result.stdout
    assert "torch/gloo rank 1: reduce_scatter -> [ 9. 12.]" in result.stdout


#: compat launch of the example on 2 MindSpore ranks, quiet (the default) and verbose (with
#: MindSpore's default log level: no GLOG_ variable), each in the background queue (tests/jobs.py).
MINDSPORE_LAUNCH = (sys.executable, "-m", "compat", "launch", "-n", "2", "--framework",
                    "mindspore", "--timeout", "150")  # fmt: skip
QUIET_RUN = CommandSpec((*MINDSPORE_LAUNCH, str(EXAMPLE)), timeout=200)
VERBOSE_RUN = CommandSpec(
    (*MINDSPORE_LAUNCH, "--verbose", str(EXAMPLE)),
    timeout=200,
    env=tuple((k, v) for k, v in environment().items() if not k.startswith("GLOG_")),
)


@pytest.mark.job(QUIET_RUN)
def test_cli_launch_runs_the_user_script_on_mindspore() -> None:
    result = BACKGROUND.result(QUIET_RUN)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "mindspore/mccl rank 0: reduce_scatter -> [3. 6.]" in result.stdout, result.stdout
    assert "mindspore/mccl rank 1: reduce_scatter -> [ 9. 12.]" in result.stdout, result.stdout
    # Quiet by default: MindSpore's INFO/WARNING logging (about 50 lines a rank) stays out, and a
    # healthy job logs no error either (compat's shutdown used to make MindSpore log "CPU device
    # is not supported" on each rank).
    logged = [line for line in result.stdout.splitlines() if FRAMEWORK_LOG.search(line)]
    assert logged == [], logged
    assert result.stdout.count("\n") == 3, result.stdout  # the banner and one line a rank


@pytest.mark.job(VERBOSE_RUN)
def test_cli_launch_verbose_lets_mindspore_log_and_a_healthy_job_logs_no_error() -> None:
    result = BACKGROUND.result(VERBOSE_RUN)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "mindspore/mccl rank 1: reduce_scatter -> [ 9. 12.]" in result.stdout, result.stdout
    # MindSpore's default level (WARNING): its cluster start-up warnings reach the output.
    warnings = [line for line in result.stdout.splitlines() if "[WARNING]" in line]
    assert {line[: len("[rank 0]")] for line in warnings} == {"[rank 0]", "[rank 1]"}, warnings
    errors = [line for line in result.stdout.splitlines() if "[ERROR]" in line]
    assert errors == [], errors


def test_the_ranks_log_errors_only_unless_verbose_or_the_user_chose_a_level(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """launch() adds the framework's quiet_env (frameworks.toml), unless verbose or the user's
    environment (or ``env``) sets any of its variables. On torch ranks with a stand-in
    quiet_env: no framework import, ~1 s a job."""
    assert launch_module.quiet_environment("mindspore", {}) == {
        "GLOG_v": "3",
        "GLOG_minloglevel": "2",
    }
    assert launch_module.quiet_environment("mindspore", {"GLOG_v": "1"}) == {}
    assert launch_module.quiet_environment("mindspore", {"GLOG_minloglevel": "0"}) == {}
    assert launch_module.quiet_environment("torch", {}) == {}
    torch_launch = tables.lookup("frameworks", "torch", "launch")
    monkeypatch.setitem(torch_launch, "quiet_env", {"LEVEL": "error", "OTHER": "x"})
    for var in ("LEVEL", "OTHER"):
        monkeypatch.delenv(var, raising=False)
    script = write(tmp_path, "import os\nprint(os.environ.get('LEVEL'), os.environ.get('OTHER'))\n")

    def ranks_see(**options: Any) -> set[str]:
        sink = io.StringIO()
        assert launch(2, [script], "torch", timeout=60, sink=sink, **options) == 0
        return {line.split("] ", 1)[1] for line in sink.getvalue().splitlines()}

    assert ranks_see() == {"error x"}
    assert ranks_see(verbose=True) == {"None None"}
    assert ranks_see(env={"LEVEL": "debug"}) == {"debug None"}
    monkeypatch.setenv("OTHER", "mine")
    assert ranks_see() == {"None mine"}


@pytest.mark.long  # msrun's own startup, about 25 s; make test-long runs it
def test_the_same_script_runs_under_msrun(tmp_path: Path) -> None:
    """msrun starts its scheduler with the script too: compat.init() serves it and ends there."""
    bin_dir = Path(sys.executable).parent
    msrun = shutil.which("msrun", path=str(bin_dir))
    if msrun is None:
        pytest.fail("msrun is missing beside the interpreter: mindspore ships it")
    # msrun starts `python SCRIPT`: the venv's python must come first on PATH, as when activated.
    env = {k: v for k, v in os.environ.items() if k != "COMPAT_FRAMEWORK"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    logs = tmp_path / "logs"
    result = run_bounded(
        [
            msrun,
            "--worker_num=2",
            "--local_worker_num=2",
            f"--master_port={free_port()}",
            f"--log_dir={logs}",
            "--join=True",
            str(EXAMPLE),
        ],
        timeout=150,
        env=env,
        cwd=str(tmp_path),
    )
    workers = "".join(path.read_text() for path in sorted(logs.glob("worker_*.log")))
    assert result.returncode == 0, (result.stdout + workers)[-3000:]
    assert "mindspore/mccl rank 0: reduce_scatter -> [3. 6.]" in workers
    assert "mindspore/mccl rank 1: reduce_scatter -> [ 9. 12.]" in workers


def test_rank_environments_come_from_frameworks_toml() -> None:
    assert rank_environments("torch", 2, 1234) == [
        {
            "COMPAT_FRAMEWORK": "torch",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "1234",
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "ROLE_RANK": str(rank),
            "ROLE_NAME": "default",
            "GROUP_RANK": "0",
            "GROUP_WORLD_SIZE": "1",
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "ROLE_WORLD_SIZE": "2",
        }
        for rank in range(2)
    ]
    common = {
        "COMPAT_FRAMEWORK": "mindspore",
        "MS_SCHED_HOST": "127.0.0.1",
        "MS_SCHED_PORT": "1234",
        "MS_WORKER_NUM": "2",
        "RANK_SIZE": "2",
    }
    worker = {**common, "MS_ROLE": "MS_WORKER"}
    assert rank_environments("mindspore", 2, 1234) == [
        {**worker, "MS_NODE_ID": "0", "RANK_ID": "0", "DEVICE_ID": "0", "LOCAL_RANK": "0"},
        {**worker, "MS_NODE_ID": "1", "RANK_ID": "1", "DEVICE_ID": "1", "LOCAL_RANK": "1"},
        {**common, "MS_ROLE": "MS_SCHED", "MS_NODE_ID": "sched"},
    ]
    with pytest.raises(ValueError, match="framework: expected one of"):
        rank_environments("jax", 2, 1234)


def test_rank_environments_with_devices() -> None:
    # torch: torchrun names no device (local_elastic_agent.py, _set_local_rank_env: LOCAL_RANK,
    # and CUDA_VISIBLE_DEVICES only as inherited): every rank sees the ranks' devices in rank
    # order, so LOCAL_RANK i selects the i-th.
    envs = rank_environments("torch", 3, 1234, [3, 0, 5], environ={})
    assert [(e["LOCAL_RANK"], e["CUDA_VISIBLE_DEVICES"]) for e in envs] == [
        ("0", "3,0,5"),
        ("1", "3,0,5"),
        ("2", "3,0,5"),
    ]
    # Indexes are the framework's (torch.cuda.device_count() counts the inherited selection):
    # mapped through an inherited CUDA_VISIBLE_DEVICES, as torchrun --virtual-local-rank does.
    inherited = {"CUDA_VISIBLE_DEVICES": "4,5,GPU-1a2b,7"}
    envs = rank_environments("torch", 2, 1234, [2, 0], environ=inherited)
    assert {e["CUDA_VISIBLE_DEVICES"] for e in envs} == {"GPU-1a2b,4"}
    with pytest.raises(LaunchError, match=r"devices: expected indexes below 4.*got \[4, 0\]"):
        rank_environments("torch", 2, 1234, [4, 0], environ=inherited)
    # Without --devices torch's environment names no device at all.
    assert all("CUDA_VISIBLE_DEVICES" not in e for e in rank_environments("torch", 2, 1234))
    # MindSpore: DEVICE_ID, as msrun sets it (_api.py, _start_single_worker), here the listed
    # device; the scheduler gets none, and MindSpore's environment has no devices_env.
    envs = rank_environments("mindspore", 2, 1234, [3, 1], environ=inherited)
    assert [e.get("DEVICE_ID") for e in envs] == ["3", "1", None]
    assert [e.get("LOCAL_RANK") for e in envs] == ["0", "1", None]
    assert all("CUDA_VISIBLE_DEVICES" not in e for e in envs)
    with pytest.raises(ValueError, match="devices: expected one per rank"):
        rank_environments("mindspore", 2, 1234, [3])


DUMP_ENV = """\
import json, os, sys
name = os.environ.get("RANK") or os.environ.get("MS_NODE_ID") or os.environ["MS_ROLE"]
with open(os.path.join(sys.argv[1], name + ".json"), "w") as f:
    json.dump(dict(os.environ), f)
"""


def launcher_environments(out: Path, before: dict[str, str]) -> dict[str, dict[str, str]]:
    """What the launcher set or changed, per process (file name)."""
    envs = {path.stem: json.loads(path.read_text()) for path in out.glob("*.json")}
    return {
        name: {k: v for k, v in env.items() if before.get(k) != v} for name, env in envs.items()
    }


def test_the_torch_environment_is_torchruns(tmp_path: Path) -> None:
    """torchrun's own variables, read from its ranks (no torch imported there: ~1 s)."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    assert torchrun is not None, "torchrun is missing beside the interpreter: torch ships it"
    script, out = write(tmp_path, DUMP_ENV), tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH", "MASTER_"))}
    for name in ("COMPAT_FRAMEWORK", "RANK", "LOCAL_RANK", "WORLD_SIZE", "OMP_NUM_THREADS"):
        env.pop(name, None)
    port = free_port()
    result = run_bounded(
        [torchrun, "--nproc-per-node", "2", "--master-port", str(port), script, str(out)],
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = launcher_environments(out, env)
    ours = rank_environments("torch", 2, port)
    for rank in range(2):
        mine = {k: v for k, v in ours[rank].items() if k != "COMPAT_FRAMEWORK"}
        assert {k: theirs[str(rank)].get(k) for k in mine} == mine
        # Left out on purpose: torchelastic's own (its agent, store and restarts, which compat
        # launch does not run), TORCH_NCCL_ASYNC_ERROR_HANDLING (torch's NCCL default also ends
        # a failed rank) and OMP_NUM_THREADS (launch() sets it as torchrun does, outside the table).
        left_out = {k for k in theirs[str(rank)] if k not in mine and k != "_"}
        assert {k for k in left_out if not k.startswith("TORCHELASTIC_")} <= {
            "TORCH_NCCL_ASYNC_ERROR_HANDLING",
            "OMP_NUM_THREADS",
        }, left_out


def test_the_mindspore_environment_is_msruns(tmp_path: Path) -> None:
    """msrun's variables, read from its workers (which import no MindSpore: ~2 s, for msrun's own
    import of mindspore)."""
    bin_dir = Path(sys.executable).parent
    msrun = shutil.which("msrun", path=str(bin_dir))
    assert msrun is not None, "msrun is missing beside the interpreter: mindspore ships it"
    script, out = write(tmp_path, DUMP_ENV), tmp_path / "out"
    out.mkdir()
    launcher = ("MS_", "RANK", "DEVICE_ID", "LOCAL_RANK", "COMPAT_FRAMEWORK", "MASTER_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(launcher)}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"  # msrun starts `python`
    port = free_port()
    result = run_bounded(
        [
            msrun,
            "--worker_num=2",
            "--local_worker_num=2",
            f"--master_port={port}",
            f"--log_dir={tmp_path / 'logs'}",
            "--join=True",
            script,
            str(out),
        ],
        timeout=60,
        env=env,
        cwd=str(tmp_path),
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    theirs = launcher_environments(out, env)
    ours = rank_environments("mindspore", 2, port)
    for rank in range(2):
        # LOCAL_RANK is compat's addition, for scripts written for torchrun.
        mine = {k: v for k, v in ours[rank].items() if k not in ("COMPAT_FRAMEWORK", "LOCAL_RANK")}
        assert {k: theirs[str(rank)].get(k) for k in mine} == mine
        # Left out: MS_TOPO_TIMEOUT (msrun's --cluster_time_out; compat launch --timeout bounds
        # the job). The rest is what msrun's own `import mindspore` set in its environment, which
        # a rank's import sets too.
        left_out = {k for k in theirs[str(rank)] if k not in ours[rank] and k != "_"}
        assert left_out <= {
            "MS_TOPO_TIMEOUT",
            "LD_LIBRARY_PATH",
            "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION",
            "HCCL_CONNECT_TIMEOUT",
            "OMP_NUM_THREADS",
        }, left_out


class FakeAdapter:
    def __init__(self, kinds: set[str]) -> None:
        self.kinds = kinds

    def device_kinds(self) -> set[str]:
        return self.kinds


def test_devices_are_counted_by_the_framework_of_the_kind_init_would_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    # This machine: no device, so no limit (the real adapters say so).
    assert available_devices("torch") is None
    assert available_devices("mindspore") is None
    # Without a device file the framework is not even imported to ask.
    monkeypatch.setattr(launch_module.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(launch_module, "load_adapter", lambda name: pytest.fail("imported"))
    assert available_devices("torch") is None
    # A CUDA machine, as torch would count it (torch.cuda.device_count honours
    # CUDA_VISIBLE_DEVICES).
    monkeypatch.setattr(launch_module.glob, "glob", lambda pattern: [pattern])
    monkeypatch.setattr(launch_module, "load_adapter", lambda name: FakeAdapter({"cuda"}))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    found = available_devices("torch")
    assert found == Devices("torch", "cuda", 3, "CUDA_VISIBLE_DEVICES")
    assert found.describe() == "the 3 cuda devices torch sees (CUDA_VISIBLE_DEVICES selects them)"
    # MindSpore counts the devices of its device target (the adapter's device_kinds) with its
    # device_context API; other kinds are not asked (they would log that they are absent).
    monkeypatch.setattr(launch_module, "load_adapter", lambda name: FakeAdapter({"ascend"}))
    monkeypatch.setattr("mindspore.device_context.ascend.device_count", lambda: 8)
    monkeypatch.setattr("mindspore.device_context.gpu.device_count", lambda: pytest.fail("asked"))
    assert available_devices("mindspore") == Devices(
        "mindspore", "ascend", 8, "ASCEND_RT_VISIBLE_DEVICES"
    )
    # A device kind with none counted runs on CPU.
    monkeypatch.setattr("mindspore.device_context.ascend.device_count", lambda: 0)
    assert available_devices("mindspore") is None


CUDA = Devices("torch", "cuda", 4, "CUDA_VISIBLE_DEVICES")


@pytest.mark.parametrize(
    ("nprocs", "devices", "available", "expected"),
    [
        (4, None, CUDA, None),  # rank i on device i
        (2, [3, 1], CUDA, [3, 1]),
        (2, [3, 1, 0], CUDA, [3, 1]),  # extra entries unused
        (16, None, None, None),  # CPU: no limit
    ],
)
def test_assign_devices(
    monkeypatch: pytest.MonkeyPatch,
    nprocs: int,
    devices: list[int] | None,
    available: Devices | None,
    expected: list[int] | None,
) -> None:
    monkeypatch.setattr(launch_module, "available_devices", lambda framework: available)
    assert assign_devices("torch", nprocs, devices) == expected


REFUSALS = [
    (
        5,
        None,
        CUDA,
        "nprocs: expected at most 4 ranks, one per device: the 4 cuda devices torch sees "
        "(CUDA_VISIBLE_DEVICES selects them); got 5",
    ),
    (
        3,
        [0, 1],
        CUDA,
        "devices: expected a device for each of the 3 ranks (rank i runs on the i-th); "
        "got 2: [0, 1]",
    ),
    (2, [0, 0], CUDA, "devices: expected each device once; got [0, 0]"),
    (2, [0, -1], CUDA, "devices: expected device indexes (ints >= 0); got [0, -1]"),
    (2, [0, "1"], CUDA, "devices: expected device indexes (ints >= 0); got [0, '1']"),
    (2, [0, True], CUDA, "devices: expected device indexes (ints >= 0); got [0, True]"),
    (
        2,
        [0, 4],
        CUDA,
        "devices: expected indexes below 4: the 4 cuda devices torch sees "
        "(CUDA_VISIBLE_DEVICES selects them); got [0, 4]",
    ),
    (
        2,
        [0, 1],
        None,
        "devices: expected none: torch sees no device here, the ranks run on CPU; got [0, 1]",
    ),
    (0, None, None, "nprocs: expected an int >= 1; got 0"),
]


@pytest.mark.parametrize(("nprocs", "devices", "available", "message"), REFUSALS)
def test_refusals_come_before_any_process_starts(
    monkeypatch: pytest.MonkeyPatch,
    nprocs: int,
    devices: list[Any] | None,
    available: Devices | None,
    message: str,
) -> None:
    monkeypatch.setattr(launch_module, "available_devices", lambda framework: available)
    with pytest.raises(LaunchError, match=re.escape(message)):
        assign_devices("torch", nprocs, devices)

    def start(*args: object, **kwargs: object) -> None:
        pytest.fail("a process was started")

    monkeypatch.setattr(subprocess, "Popen", start)
    with pytest.raises(LaunchError, match=re.escape(message)):
        launch(nprocs, ["script.py"], "torch", devices=devices)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["-n", "5"],
            "compat launch: argument -n/--nprocs: expected at most 4 ranks, one per "
            "device: the 4 cuda devices torch sees (CUDA_VISIBLE_DEVICES selects them); got 5",
        ),
        (
            ["-n", "3", "--devices", "0,1"],
            "compat launch: argument --devices: expected a device for each of the 3 ranks",
        ),
        (["-n", "2", "--devices", "0,4"], "argument --devices: expected indexes below 4"),
        (["-n", "0"], "argument -n/--nprocs: expected an int >= 1; got 0"),
    ]
    + [
        (
            ["-n", "2", "--devices", text],
            "compat launch: argument --devices: expected comma-separated device indexes "
            f"(integers >= 0, each once), e.g. 0,1,3; got {text!r}",
        )
        for text in ("0,x", "0,-1", "0,1.5", "", "0,,1", "0,0")
    ],
)
def test_cli_refuses_bad_devices_as_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:

    monkeypatch.setattr(launch_module, "available_devices", lambda framework: CUDA)
    monkeypatch.setattr(launch_module, "launch", lambda *a, **k: pytest.fail("launched"))
    assert cli_exit_code(["launch", *argv, "--framework", "torch", "script.py"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before the banner
    assert message in captured.err
    # One line, as every user error of the CLI (argparse's usage errors included).
    assert captured.err.startswith("compat launch: ") and captured.err.count("\n") == 1


def cli_exit_code(argv: list[str]) -> object:
    """``compat ...``'s exit code: main's return value, or a usage error's SystemExit code."""
    from compat.tools import cli

    try:
        return cli.main(argv)
    except SystemExit as exit_info:
        return exit_info.code


def test_cli_refuses_devices_on_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    """This machine's real count (torch sees no CUDA device): --devices is refused, N is not."""

    assert (
        cli_exit_code(["launch", "-n", "2", "--devices", "0,1", "--framework", "torch", "x.py"])
        == 2
    )
    assert (
        "argument --devices: expected none: torch sees no device here, the ranks run on CPU; "
        "got [0, 1]" in capsys.readouterr().err
    )


def test_ranks_run_with_their_devices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The environment reaches the processes (which import no framework: cheap), as it was before
    the devices were counted."""

    def counted(framework: str) -> Devices:
        monkeypatch.setenv("SET_BY_IMPORT", "1")  # as importing MindSpore edits os.environ
        return CUDA

    monkeypatch.setattr(launch_module, "available_devices", counted)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    script = write(
        tmp_path,
        "import os\nprint(*(os.environ.get(k) for k in "
        "('RANK', 'LOCAL_RANK', 'CUDA_VISIBLE_DEVICES', 'DEVICE_ID', 'SET_BY_IMPORT')))\n",
    )
    sink = io.StringIO()
    assert launch(2, [script], "torch", devices=[3, 1], timeout=60, sink=sink) == 0
    assert sorted(sink.getvalue().splitlines()) == [
        "[rank 0] 0 0 3,1 None None",
        "[rank 1] 1 1 3,1 None None",
    ]


def test_launch_and_init_share_one_framework_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from compat.core import dispatch

    for var in ("COMPAT_FRAMEWORK", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MS_ROLE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(dispatch, "installed", lambda: ["torch", "mindspore"])
    monkeypatch.setattr(dispatch, "imported", lambda: [])
    # Several installed, nothing chosen: the launcher takes the first (and says so), init asks.
    assert dispatch.choose_framework(None, first_if_several=True) == "torch"
    with pytest.raises(ValueError, match="several are installed"):
        dispatch.choose_framework(None)
    # A plain environment (as Slurm's scripts set it) names no framework: the program's imports
    # decide (a spawn-style script has imported torch or mindspore), then torch's convention.
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    assert dispatch.choose_framework(None) == "torch"
    monkeypatch.setattr(dispatch, "imported", lambda: ["mindspore"])
    assert dispatch.choose_framework(None) == "mindspore"
    monkeypatch.setattr(dispatch, "imported", lambda: ["torch", "mindspore"])
    assert dispatch.choose_framework(None) == "torch"
    monkeypatch.delenv("MASTER_ADDR")
    with pytest.raises(ValueError, match="imported torch and mindspore"):
        dispatch.choose_framework(None)
    monkeypatch.setattr(dispatch, "imported", lambda: ["torch"])
    assert dispatch.choose_framework(None) == "torch"
    # A launcher's variable decides where the program's imports do not (none, or both) ...
    monkeypatch.setenv("MS_ROLE", "MS_WORKER")
    assert dispatch.choose_framework(None) == "torch"
    monkeypatch.setattr(dispatch, "imported", lambda: ["torch", "mindspore"])
    assert dispatch.choose_framework(None) == "mindspore"
    monkeypatch.setattr(dispatch, "imported", lambda: [])
    assert dispatch.choose_framework(None) == "mindspore"
    # ... and a MindSpore script started by torchrun runs on MindSpore.
    monkeypatch.delenv("MS_ROLE")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job")
    monkeypatch.setattr(dispatch, "imported", lambda: ["mindspore"])
    assert dispatch.choose_framework(None) == "mindspore"
    monkeypatch.setattr(dispatch, "imported", lambda: [])
    assert dispatch.choose_framework(None) == "torch"
    monkeypatch.setenv("COMPAT_FRAMEWORK", "torch")
    assert dispatch.choose_framework(None, first_if_several=True) == "torch"
    monkeypatch.setenv("COMPAT_FRAMEWORK", "jax")
    with pytest.raises(ValueError, match="COMPAT_FRAMEWORK: expected one of"):
        dispatch.choose_framework(None, first_if_several=True)


def test_free_port_is_below_the_local_ports_of_outgoing_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The launcher's port comes from below Linux's range for outgoing connections' local ports
    (which could take it before the job's server binds it), and is free; where that range cannot
    be read, or nothing below it is free, the OS chooses."""
    from compat.base import net

    lowest = int(Path(net._EPHEMERAL_RANGE).read_text().split()[0])
    for _ in range(20):
        port = net.free_port()
        assert net._LOWEST_PORT <= port < lowest, (port, lowest)
        assert net._bindable(port)
    monkeypatch.setattr(net, "_EPHEMERAL_RANGE", "/nonexistent/ip_local_port_range")
    assert net.free_port() >= lowest
    monkeypatch.undo()
    monkeypatch.setattr(net, "_bindable", lambda port: False)
    assert net.free_port() >= lowest
