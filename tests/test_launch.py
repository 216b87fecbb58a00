"""compat launch: environment, rank-prefixed output, failure propagation, timeouts, torchrun."""

from __future__ import annotations

import io
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from compat.tools.launch import TIMEOUT_EXIT_CODE, free_port, launch
from tests.processes import run_bounded

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "reduce_scatter_styles.py"


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


def test_cli_launch_runs_the_user_script_on_mindspore() -> None:
    result = run_bounded(
        [
            sys.executable,
            "-m",
            "compat",
            "launch",
            "-n",
            "2",
            "--framework",
            "mindspore",
            "--timeout",
            "150",
            str(EXAMPLE),
        ],
        timeout=200,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "mindspore/mccl rank 0: reduce_scatter -> [3. 6.]" in result.stdout, result.stdout
    assert "mindspore/mccl rank 1: reduce_scatter -> [ 9. 12.]" in result.stdout, result.stdout


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
    from compat.tools.launch import rank_environments

    assert rank_environments("torch", 2, 1234) == [
        {
            "COMPAT_FRAMEWORK": "torch",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "1234",
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "GROUP_RANK": "0",
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
        }
        for rank in range(2)
    ]
    common = {
        "COMPAT_FRAMEWORK": "mindspore",
        "MS_SCHED_HOST": "127.0.0.1",
        "MS_SCHED_PORT": "1234",
        "MS_WORKER_NUM": "2",
    }
    assert rank_environments("mindspore", 2, 1234) == [
        {**common, "MS_ROLE": "MS_WORKER", "MS_NODE_ID": "0", "RANK_ID": "0", "LOCAL_RANK": "0"},
        {**common, "MS_ROLE": "MS_WORKER", "MS_NODE_ID": "1", "RANK_ID": "1", "LOCAL_RANK": "1"},
        {**common, "MS_ROLE": "MS_SCHED", "MS_NODE_ID": "sched"},
    ]
    with pytest.raises(ValueError, match="framework: expected one of"):
        rank_environments("jax", 2, 1234)


def test_launch_and_init_share_one_framework_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from compat import dispatch

    for var in ("COMPAT_FRAMEWORK", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MS_ROLE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(dispatch, "installed", lambda: ["torch", "mindspore"])
    # Several installed, nothing chosen: the launcher takes the first (and says so), init asks.
    assert dispatch.choose_framework(None, first_if_several=True) == "torch"
    with pytest.raises(ValueError, match="because several are installed"):
        dispatch.choose_framework(None)
    monkeypatch.setenv("MS_ROLE", "MS_WORKER")
    assert dispatch.choose_framework(None) == "mindspore"
    monkeypatch.setenv("COMPAT_FRAMEWORK", "torch")
    assert dispatch.choose_framework(None, first_if_several=True) == "torch"
    monkeypatch.setenv("COMPAT_FRAMEWORK", "jax")
    with pytest.raises(ValueError, match="COMPAT_FRAMEWORK: expected one of"):
        dispatch.choose_framework(None, first_if_several=True)
