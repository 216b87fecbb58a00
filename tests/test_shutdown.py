"""Clean shutdown: Ctrl-C (SIGINT to the launcher's process group) or ``kill`` (SIGTERM to the
launcher alone) while the ranks wait in a collective stops every rank and MindSpore's scheduler
and exits 130 / 143; the scheduler that ``compat.init(init_method="tcp://...")`` starts outlives
neither an interrupted program nor a killed rank 0; a rank that dies inside batch_isend_irecv or
an object collective ends the job, named. Every process a test starts carries a marker in its
environment, and the process table is read for it afterwards: nothing may be left. Each test has
a hard timeout, and kills whatever it left before failing."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat.base.net import free_port

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = str(Path(__file__).resolve().parent / "shutdown_scripts.py")
MARK = "COMPAT_SHUTDOWN_MARK"
#: Variables a launcher sets: the jobs here start without them, as from a user's shell.
LAUNCHER_VARIABLES = (
    "COMPAT_FRAMEWORK", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM", "MS_NODE_ID", "RANK_ID",
    "TORCHELASTIC_RUN_ID",
)  # fmt: skip


def marked(token: str) -> dict[int, dict[str, str]]:
    """The live processes whose environment has MARK=token: pid -> environment."""
    found = {}
    needle = f"{MARK}={token}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdecimal():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as file:
                variables = file.read().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or a zombie (whose environment reads as empty anyway)
        if needle in variables:
            pairs = (v.decode(errors="replace").partition("=") for v in variables if v)
            found[int(entry)] = {name: value for name, _, value in pairs}
    return found


def left_behind(token: str, within: float) -> dict[int, dict[str, str]]:
    """The marked processes still alive after ``within`` seconds (polled: a process being reaped
    is given that long)."""
    deadline = time.monotonic() + within
    while (alive := marked(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def describe(processes: dict[int, dict[str, str]]) -> str:
    def cmdline(pid: int) -> str:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                return file.read().replace(b"\0", b" ").decode(errors="replace")[:200]
        except OSError:
            return "?"

    return "; ".join(
        f"pid {pid} MS_ROLE={env.get('MS_ROLE', '-')}: {cmdline(pid)}"
        for pid, env in processes.items()
    )


class Job:
    """A command started as a terminal starts a foreground job (a process group of its own), its
    output read line by line as it comes."""

    def __init__(self, argv: list[str], env: dict[str, str], token: str) -> None:
        self.token = token
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        self.popen = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=env,
            cwd=str(ROOT),
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, needles: list[str], timeout: float) -> list[str]:
        """The first line containing each needle; fails if the output ends or time runs out."""
        deadline = time.monotonic() + timeout
        found: dict[str, str] = {}
        while len(found) < len(needles):
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no {needles} within {timeout} s:\n{self.text()}", pytrace=False)
            if line is None:
                pytest.fail(f"the output ended before {needles}:\n{self.text()}", pytrace=False)
            self.output.append(line)
            for needle in needles:
                if needle in line and needle not in found:
                    found[needle] = line
        return [found[needle] for needle in needles]

    def finish(self, timeout: float) -> int:
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {timeout} s after the signal:\n{self.text()}")
        return code

    def text(self, whole: bool = False) -> str:
        """The job's output so far: its last 4000 characters (for a failure's message), or
        ``whole`` (to search: a rank's long traceback can push the launcher's lines out)."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.output.append(line)
        text = "".join(self.output)
        return text if whole else text[-4000:]

    def kill_everything(self) -> None:
        """Whatever a failed test left: the job's group and every marked process."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in marked(self.token):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.popen.wait(10)


@pytest.fixture
def token() -> str:
    return uuid.uuid4().hex


@pytest.fixture
def jobs(token: str) -> Iterator[list[Job]]:
    started: list[Job] = []
    yield started
    for job in started:
        job.kill_everything()


def environment(token: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in LAUNCHER_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.setdefault("GLOG_v", "3")
    env[MARK] = token
    return env


def launch_job(framework: str, scenario: str, token: str, jobs: list[Job]) -> Job:
    argv = [sys.executable, "-m", "compat", "launch", "-n", "2", "--framework", framework]
    job = Job([*argv, "--timeout", "200", SCRIPT, scenario], environment(token), token)
    jobs.append(job)
    return job


#: How long a job may take to start its ranks and reach the collective.
READY_WITHIN = {"torch": 60.0, "mindspore": 120.0}
#: Once both ranks are ready, how long to wait before signalling, so that rank 0 is inside the
#: all_reduce (on MCCL well within its fixed 30 s bound, after which the all_reduce would fail).
SETTLE = 1.0


def interrupt_launch(framework: str, how: signal.Signals, token: str, jobs: list[Job]) -> None:
    started = time.monotonic()
    job = launch_job(framework, "collective", token, jobs)
    job.wait_for(["[rank 0] READY", "[rank 1] READY"], READY_WITHIN[framework])
    time.sleep(SETTLE)
    before = marked(token)
    # Ranks 0 and 1, the launcher and, on MindSpore, the scheduler: the marker finds them all.
    assert len(before) >= (4 if framework == "mindspore" else 3), describe(before)
    signalled = time.monotonic()
    if how == signal.SIGINT:
        os.killpg(job.popen.pid, how)  # Ctrl-C: the terminal signals the foreground group
    else:
        os.kill(job.popen.pid, how)  # kill: the launcher alone
    code = job.finish(30)
    stopped = time.monotonic() - signalled
    output = job.text(whole=True)
    assert code == 128 + how, f"exit code {code}:\n{output[-4000:]}"
    assert f"compat launch: got {how.name}; stopping the job" in output, output[-4000:]
    alive = left_behind(token, 2)
    assert not alive, f"left behind: {describe(alive)}"
    print(f"{framework} {how.name}: stopped in {stopped:.1f} s, {time.monotonic() - started:.1f} s")


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "how",
    [signal.SIGINT, signal.SIGTERM, pytest.param(signal.SIGHUP, marks=pytest.mark.long)],
    ids=lambda s: s.name,
)
def test_a_signal_to_compat_launch_stops_every_torch_rank(
    how: signal.Signals, token: str, jobs: list[Job]
) -> None:
    interrupt_launch("torch", how, token, jobs)


@pytest.mark.timeout(200)
@pytest.mark.long  # 15 s: make test's budget (make test-long runs it)
def test_ctrl_c_to_compat_launch_stops_every_mindspore_rank_and_the_scheduler(
    token: str, jobs: list[Job]
) -> None:
    interrupt_launch("mindspore", signal.SIGINT, token, jobs)


@pytest.mark.long
@pytest.mark.timeout(200)
def test_sigterm_to_compat_launch_stops_every_mindspore_rank_and_the_scheduler(
    token: str, jobs: list[Job]
) -> None:
    interrupt_launch("mindspore", signal.SIGTERM, token, jobs)


def spawn_job(token: str, jobs: list[Job]) -> tuple[Job, list[int]]:
    """The spawn-style MindSpore program, ranks ready: (job, pids of ranks 0 and 1)."""
    argv = [sys.executable, SCRIPT, "spawn", str(free_port()), "mindspore"]
    job = Job(argv, environment(token), token)
    jobs.append(job)
    ready = job.wait_for(["READY rank 0", "READY rank 1"], READY_WITHIN["mindspore"])
    time.sleep(SETTLE)
    assert len(schedulers(token)) == 1, describe(marked(token))
    return job, [int(line.split(" pid ")[1]) for line in ready]


def schedulers(token: str) -> list[int]:
    return [pid for pid, env in marked(token).items() if env.get("MS_ROLE") == "MS_SCHED"]


def scheduler_outlives(token: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while schedulers(token):
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.long
@pytest.mark.timeout(300)
def test_ctrl_c_to_a_spawn_style_mindspore_program_leaves_no_scheduler(
    token: str, jobs: list[Job]
) -> None:
    """The program, its two ranks and the scheduler rank 0 started all get SIGINT, as from the
    terminal, while rank 0 is inside an all_reduce. MindSpore ends rank 0 at once (its own
    handler) and ignores SIGINT in the scheduler: before the fix the scheduler outlived rank 0 by
    30-35 s. Rank 1 leaves through compat's exit barrier, which waits for MCCL's 30 s bound."""
    job, _ = spawn_job(token, jobs)
    signalled = time.monotonic()
    os.killpg(job.popen.pid, signal.SIGINT)
    assert not scheduler_outlives(token, 10), (
        f"the scheduler outlived Ctrl-C by 10 s:\n{job.text()}"
    )
    ended = time.monotonic() - signalled
    job.finish(120)
    alive = left_behind(token, 5)
    assert not alive, f"left behind: {describe(alive)}\n{job.text()}"
    print(
        f"scheduler gone {ended:.1f} s, program {time.monotonic() - signalled:.1f} s after Ctrl-C"
    )


@pytest.mark.long
@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_the_scheduler_ends_with_the_rank_that_started_it(
    how: signal.Signals, token: str, jobs: list[Job]
) -> None:
    """Rank 0 ended by a signal Python does not turn into an exception (as
    torch.multiprocessing.spawn and torchrun stop ranks: SIGTERM, then SIGKILL) runs no atexit
    and no compat.destroy: its scheduler must go by itself."""
    job, (rank0, _) = spawn_job(token, jobs)
    os.kill(rank0, how)
    signalled = time.monotonic()
    assert not scheduler_outlives(token, 10), (
        f"the scheduler outlived rank 0 by 10 s:\n{job.text()}"
    )
    print(f"the scheduler ended {time.monotonic() - signalled:.1f} s after rank 0")


#: (operation, how rank 1 dies). On torch DEATHS run in make test (~6 s a job), MORE_DEATHS are
#: long; on MindSpore every one is long.
DEATHS = [("batch_isend_irecv", "kill"), ("all_gather_object", "exit")]
MORE_DEATHS = [
    ("batch_isend_irecv", "exit"),
    ("all_gather_object", "kill"),
    ("broadcast_object_list", "exit"),
    ("broadcast_object_list", "kill"),
]


def dies_inside(framework: str, op: str, death: str, token: str, jobs: list[Job]) -> None:
    started = time.monotonic()
    job = launch_job(framework, f"{op}:{death}", token, jobs)
    code = job.finish(120)
    output = job.text(whole=True)
    assert "[rank 1] dying" in output, output[-4000:]
    how = "exited with code 3" if death == "exit" else "was killed by signal SIGKILL"
    assert f"compat launch: rank 1 {how}; stopping the other ranks" in output, output[-4000:]
    assert code == (3 if death == "exit" else 128 + signal.SIGKILL), f"exit code {code}"
    alive = left_behind(token, 2)
    assert not alive, f"left behind: {describe(alive)}"
    print(f"{framework} {op} {death}: {time.monotonic() - started:.1f} s")


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("op", "death"),
    [pytest.param(*d, marks=pytest.mark.long) for d in DEATHS + MORE_DEATHS],
)
def test_a_torch_rank_that_dies_inside_an_operation_is_named(
    op: str, death: str, token: str, jobs: list[Job]
) -> None:
    dies_inside("torch", op, death, token, jobs)


@pytest.mark.long
@pytest.mark.timeout(200)
@pytest.mark.parametrize(("op", "death"), DEATHS + MORE_DEATHS)
def test_a_mindspore_rank_that_dies_inside_an_operation_is_named(
    op: str, death: str, token: str, jobs: list[Job]
) -> None:
    dies_inside("mindspore", op, death, token, jobs)
