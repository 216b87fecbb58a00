"""``compat launch``: start N local ranks of a script with the environment its framework expects.

torch: the variables torchrun sets (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ...). MindSpore: a scheduler process plus N workers with ``MS_ROLE``,
``MS_NODE_ID``, ``MS_SCHED_HOST``, ``MS_SCHED_PORT``, ``MS_WORKER_NUM``, ``RANK_ID`` and
``DEVICE_ID``, as msrun sets them. Rank i runs on the i-th of ``devices`` (else on local device
i); where the ranks would run on devices, a job with more ranks than devices is refused before
anything starts. Each rank's output is prefixed with ``[rank i]``. When a rank fails, the others
are stopped and the launch returns that rank's exit code; ``timeout`` stops a job that hangs.
SIGINT (Ctrl-C), SIGTERM or SIGHUP to the launcher stops every rank and the scheduler too.
The framework's own logging is kept to errors (``quiet_env`` in frameworks.toml) unless
``verbose`` or the user sets its variables.
"""

from __future__ import annotations

import glob
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, TextIO

from compat.base import tables
from compat.base.environment import environment
from compat.base.net import free_port
from compat.core.dispatch import choose_framework, frameworks, load_adapter

__all__ = [
    "FAILURE_GRACE_SECONDS",
    "STOP_SIGNALS",
    "TIMEOUT_EXIT_CODE",
    "Devices",
    "LaunchError",
    "assign_devices",
    "available_devices",
    "free_port",
    "launch",
    "parse_devices",
    "quiet_environment",
    "rank_environments",
]

TIMEOUT_EXIT_CODE = 124
# After a rank fails, how long the others may take to fail too before they are stopped.
FAILURE_GRACE_SECONDS = 3.0
#: The signals that stop a job: the launcher passes the signal on to every rank (a rank's own
#: handlers run, as under torchrun, whose ranks share the terminal's process group), stops the
#: scheduler, and returns 128 + the signal's number, as a shell reports a process that signal
#: ended (130 SIGINT, 143 SIGTERM, 129 SIGHUP). The ranks run in sessions of their own (so that
#: stopping one stops its children), where neither Ctrl-C nor a closed terminal reaches them:
#: without this, SIGTERM or SIGHUP to the launcher left every rank running.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class LaunchError(ValueError):
    """A launch refused before any process starts.

    Parameters
    ----------
    param
        The argument at fault, as :func:`launch` names it (``"nprocs"``, ``"devices"``, ...):
        ``compat launch`` names its option instead.
    detail
        What was expected and what was given (``"expected ...; got ..."``).
    """

    def __init__(self, param: str, detail: str) -> None:
        super().__init__(f"{param}: {detail}")
        self.param = param
        self.detail = detail


@dataclass(frozen=True)
class Devices:
    """The devices the ranks of a framework would run on, as the framework counts them here.

    Attributes
    ----------
    framework
        The framework that counted them.
    kind
        The device kind, as the adapter's ``device_kinds()`` names it (``"cuda"``, ``"ascend"``).
    count
        How many it sees (after ``visible``'s selection).
    visible
        The variable that selects them (``CUDA_VISIBLE_DEVICES``, ``ASCEND_RT_VISIBLE_DEVICES``).
    """

    framework: str
    kind: str
    count: int
    visible: str

    def describe(self) -> str:
        """E.g. ``"the 2 cuda devices torch sees (CUDA_VISIBLE_DEVICES selects them)"``."""
        return (
            f"the {self.count} {self.kind} device{'s' if self.count != 1 else ''} "
            f"{self.framework} sees ({self.visible} selects them)"
        )


def _call(target: str) -> object:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)()


def available_devices(framework: str) -> Devices | None:
    """The devices the ranks of ``framework`` would run on, or None where they run on CPU.

    The kind is the first of ``[<framework>.launch] devices`` in ``mapping_tables/frameworks.toml``
    that the framework's adapter reports (``device_kinds()``, the rule by which ``compat.init``
    picks a device backend such as NCCL or HCCL, so the launcher and the ranks agree); its
    ``count`` function counts them. Both honour the framework's visibility variable in this
    process's environment. Imports the framework but makes no device context: torch's
    ``is_available()`` initialises the CUDA driver (``cuInit``) and its ``device_count()`` asks
    NVML, MindSpore asks its device runtime; the ranks are started by fork and exec, which that
    cannot affect.

    Parameters
    ----------
    framework
        A key of ``mapping_tables/frameworks.toml``.

    Returns
    -------
    Devices or None
        None when the adapter reports no device kind the table counts, or the count is 0.
    """
    spec: Mapping[str, Mapping[str, str]] = tables.lookup("frameworks", framework, "launch").get(
        "devices", {}
    )
    if not spec:
        return None  # a framework without devices: nothing to import
    if not any(glob.glob(entry["nodes"]) for entry in spec.values()):
        return None  # no device file of any kind: no device, and nothing to import to say so
    kinds = load_adapter(framework).device_kinds()
    for kind, entry in spec.items():
        if kind in kinds:
            count = _call(entry["count"])
            if not isinstance(count, int):
                raise TypeError(f"{entry['count']}: expected an int count; got {count!r}")
            if count > 0:
                return Devices(framework, kind, count, entry["visible"])
    return None


def parse_devices(text: str) -> list[int]:
    """``"0,1,3"`` -> ``[0, 1, 3]``: device indexes on this node, each once.

    Raises
    ------
    LaunchError
        ``devices``: an entry that is no integer >= 0, or one listed twice.
    """
    expected = "comma-separated device indexes (integers >= 0, each once), e.g. 0,1,3"
    entries = [entry.strip() for entry in text.split(",")]
    if not all(entry.isdecimal() for entry in entries):
        raise LaunchError("devices", f"expected {expected}; got {text!r}")
    devices = [int(entry) for entry in entries]
    if len(set(devices)) != len(devices):
        raise LaunchError("devices", f"expected {expected}; got {text!r} (a device twice)")
    return devices


def assign_devices(
    framework: str,
    nprocs: int,
    devices: Sequence[int] | None = None,
    available: Devices | None = None,
) -> list[int] | None:
    """Each rank's device, checked against the devices the framework sees, before any start.

    Parameters
    ----------
    framework
        A key of ``mapping_tables/frameworks.toml``.
    nprocs
        Number of ranks.
    devices
        Device indexes on this node (as the framework counts them, i.e. among the devices its
        visibility variable selects): rank i runs on ``devices[i]``; extra entries are unused.
        None: rank i runs on local device i.
    available
        The devices the ranks would run on (default: :func:`available_devices`).

    Returns
    -------
    list of int or None
        ``devices[:nprocs]``, or None when ``devices`` is None.

    Raises
    ------
    LaunchError
        ``nprocs``: not an int >= 1.
        ``devices``: entries that are no distinct ints >= 0, fewer than ``nprocs``, beyond the
        devices the framework sees, or given where the ranks run on CPU. ``nprocs``: more ranks
        than devices, where the ranks run on devices (each needs its own: NCCL and HCCL refuse
        two ranks on one device).
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise LaunchError("nprocs", f"expected an int >= 1; got {nprocs!r}")
    listed = None if devices is None else _check_device_list(devices, nprocs)
    if available is None:
        available = available_devices(framework)
    if available is None:
        if devices is not None:
            raise LaunchError(
                "devices",
                f"expected none: {framework} sees no device here, the ranks run on CPU; "
                f"got {list(devices)!r}",
            )
        return None
    return _check_available(nprocs, listed, available)


def _check_available(nprocs: int, listed: list[int] | None, available: Devices) -> list[int] | None:
    """The ranks' devices among those ``available``: one each (``listed[:nprocs]``, or the first
    ``nprocs`` where ``listed`` is None, which gives None)."""
    if listed is None:
        if nprocs > available.count:
            raise LaunchError(
                "nprocs",
                f"expected at most {available.count} ranks, one per device: "
                f"{available.describe()}; got {nprocs}",
            )
        return None
    beyond = [d for d in listed if d >= available.count]
    if beyond:
        raise LaunchError(
            "devices",
            f"expected indexes below {available.count}: {available.describe()}; got {listed!r}",
        )
    return listed[:nprocs]


def _check_device_list(devices: Sequence[int], nprocs: int) -> list[int]:
    """``devices`` as a list: distinct ints >= 0, at least one per rank."""
    listed = list(devices)
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in listed):
        raise LaunchError("devices", f"expected device indexes (ints >= 0); got {listed!r}")
    if len(set(listed)) != len(listed):
        raise LaunchError("devices", f"expected each device once; got {listed!r}")
    if len(listed) < nprocs:
        raise LaunchError(
            "devices",
            f"expected a device for each of the {nprocs} ranks (rank i runs on the i-th); "
            f"got {len(listed)}: {listed!r}",
        )
    return listed


def _fill(templates: Mapping[str, str], **fields: object) -> dict[str, str]:
    return {name: value.format(**fields) for name, value in templates.items()}


def _through(variable: str, devices: Sequence[int], environ: Mapping[str, str]) -> str:
    """``devices`` as ``variable`` names them: where the launcher's environment already sets
    it, index i is its i-th entry (what the framework counted as device i), as torchrun's
    --virtual-local-rank maps LOCAL_RANK through CUDA_VISIBLE_DEVICES."""
    inherited = environ.get(variable)
    if inherited is None:
        return ",".join(str(d) for d in devices)
    entries = [entry.strip() for entry in inherited.split(",")]
    if any(d >= len(entries) for d in devices):
        raise LaunchError(
            "devices",
            f"expected indexes below {len(entries)}, the entries of {variable}={inherited}; "
            f"got {list(devices)!r}",
        )
    return ",".join(entries[d] for d in devices)


def _rank_variables(
    spec: Mapping[str, Any], rank: int, device: int, nprocs: int, port: int
) -> dict[str, str]:
    """``rank_env`` of a framework's launch ``spec``, for ``rank`` on local ``device``."""
    fields = {"rank": rank, "local_rank": rank, "world": nprocs, "port": port, "device": device}
    return _fill(spec["rank_env"], **fields)


def _devices_environment(
    spec: Mapping[str, Any], devices: Sequence[int] | None, environ: Mapping[str, str]
) -> dict[str, str]:
    """``devices_env`` of a framework's launch ``spec``, filled with ``devices`` as ``environ``
    names them (none where ``devices`` is None)."""
    if devices is None:
        return {}
    return {
        name: value.format(devices=_through(name, devices, environ))
        for name, value in spec.get("devices_env", {}).items()
    }


def rank_environments(
    framework: str,
    nprocs: int,
    port: int,
    devices: Sequence[int] | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[dict[str, str]]:
    """The environment of each rank (and, for a framework with a scheduler, of the scheduler,
    last), from ``[<framework>.launch]`` in ``mapping_tables/frameworks.toml``.

    Parameters
    ----------
    framework
        A key of ``mapping_tables/frameworks.toml``.
    nprocs
        Number of ranks.
    port
        The rendezvous port.
    devices
        Each rank's device (see :func:`assign_devices`; unchecked here), which also adds
        ``devices_env``. None: rank i's device is its local rank i.
    environ
        The environment the ranks inherit, through which ``devices_env`` maps the devices
        (default ``os.environ``).
    """
    known = frameworks()
    if framework not in known:
        raise ValueError(f"framework: expected one of {known}; got {framework!r}")
    if devices is not None and len(devices) != nprocs:
        raise ValueError(f"devices: expected one per rank ({nprocs}); got {list(devices)!r}")
    spec = tables.lookup("frameworks", framework, "launch")
    common = _fill(spec["env"], world=nprocs, port=port)
    extra = _devices_environment(spec, devices, os.environ if environ is None else environ)
    homes = range(nprocs) if devices is None else devices
    envs = [
        {**common, **_rank_variables(spec, rank, home, nprocs, port), **extra}
        for rank, home in enumerate(homes)
    ]
    if "scheduler" in spec:
        envs.append({**common, **_fill(spec["scheduler"]["env"], world=nprocs, port=port)})
    return envs


def quiet_environment(framework: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that keep ``framework``'s own logging to errors (``[<framework>.launch]
    quiet_env`` in ``mapping_tables/frameworks.toml``, which says why each), or none
    when ``environ`` already sets any of them: the user's logging settings stand as they are.

    Parameters
    ----------
    framework
        A key of ``mapping_tables/frameworks.toml``.
    environ
        The environment the ranks would get without them.
    """
    quiet: dict[str, str] = tables.lookup("frameworks", framework, "launch").get("quiet_env", {})
    if any(name in environ for name in quiet):
        return {}
    return dict(quiet)


def _scheduler_code(framework: str) -> str | None:
    """The ``python -c`` code of the framework's scheduler process, if it has one."""
    scheduler = tables.lookup("frameworks", framework, "launch").get("scheduler")
    return None if scheduler is None else str(scheduler["code"])


@dataclass
class _Process:
    label: str
    popen: subprocess.Popen[str]
    is_rank: bool
    pump: threading.Thread = field(init=False)
    # When it last wrote (its traceback, if it failed), or when its output closed if it never
    # wrote: tells which rank failed first when several have failed by the time the launcher
    # looks. Exit times do not: a failing rank's teardown (e.g. destroying its process group)
    # can make the others fail and exit before it does.
    last_words: float = float("inf")


def _pump(process: _Process, sink: TextIO, lock: threading.Lock, quiet: bool) -> None:
    assert process.popen.stdout is not None
    for line in process.popen.stdout:
        process.last_words = time.monotonic()
        if quiet:
            continue
        with lock:
            sink.write(
                f"[{process.label}] {line}"
                if line.endswith("\n")
                else f"[{process.label}] {line}\n"
            )
            sink.flush()
    if process.last_words == float("inf"):
        process.last_words = time.monotonic()


def _stop(processes: Sequence[_Process], grace: float = 3.0, how: int = signal.SIGTERM) -> None:
    """Send ``how`` to every rank's process group (SIGTERM to the scheduler's), then SIGKILL to
    those still running after ``grace`` seconds: a rank blocked in a collective runs no Python
    signal handler until the collective returns."""
    for process in processes:
        if process.popen.poll() is None:
            try:
                os.killpg(process.popen.pid, how if process.is_rank else signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for process in processes:
        remaining = max(0.0, deadline - time.monotonic())
        try:
            process.popen.wait(remaining)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.popen.wait()


class _StopSignals:
    """While a job runs: records the first of :data:`STOP_SIGNALS` the launcher gets, which the
    launch loop acts on within one poll. The handler raises nothing, so a signal cannot cut the
    starting or the stopping of the ranks short and leave one running. Installed only from the
    main thread (where Python runs handlers) and only over Python's own handlers: a signal the
    launcher was started to ignore (nohup's SIGHUP, SIGINT in a background job) stays ignored.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Callable[[int, FrameType | None], Any] | int] = {}

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                previous = signal.getsignal(signum)
                if previous is None or previous == signal.SIG_IGN:
                    continue  # set outside Python (not restorable), or to be ignored
                self._previous[signum] = previous
                signal.signal(signum, self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def sets_omp_threads(nprocs: int, env: Mapping[str, str]) -> bool:
    """Whether the ranks get OMP_NUM_THREADS=1: several ranks and the variable unset, as
    torchrun does (each rank's thread pool would otherwise take every core)."""
    return nprocs > 1 and "OMP_NUM_THREADS" not in env


def _job_environment(
    framework: str, nprocs: int, requested: Mapping[str, str], verbose: bool
) -> dict[str, str]:
    """What every process of the job inherits: ``requested`` (the launcher's environment and
    the caller's ``env``), the framework's quiet logging unless ``verbose``, unbuffered output,
    one OpenMP thread where torchrun sets it, and a flight-recorder dump on stop."""
    quiet = {} if verbose else quiet_environment(framework, requested)
    base_env = {**quiet, **requested, "PYTHONUNBUFFERED": "1"}
    if sets_omp_threads(nprocs, requested):
        base_env["OMP_NUM_THREADS"] = "1"
    # Each rank writes its flight-recorder dump when the launcher stops it (compat.core.recorder).
    base_env.setdefault("COMPAT_TRACE_ON_STOP", "1")
    return base_env


def _plan(
    framework: str,
    nprocs: int,
    devices: Sequence[int] | None,
    rank_argv: list[str],
    python: str,
    env: Mapping[str, str],
    verbose: bool,
) -> list[tuple[list[str], dict[str, str]]]:
    """Each process's command line and environment, checked before any starts: the ranks',
    then the scheduler's if the framework has one."""
    # Counting the devices may import the framework, and importing MindSpore edits os.environ
    # (LD_LIBRARY_PATH, HCCL_CONNECT_TIMEOUT, ...): the ranks get the environment from before.
    inherited = environment()
    assigned = assign_devices(framework, nprocs, devices)
    port = free_port()
    base_env = _job_environment(framework, nprocs, {**inherited, **env}, verbose)
    environments = rank_environments(framework, nprocs, port, assigned, base_env)
    scheduler = _scheduler_code(framework)
    return [
        (
            rank_argv if index < nprocs or scheduler is None else [python, "-c", scheduler],
            {**base_env, **rank_env},
        )
        for index, rank_env in enumerate(environments)
    ]


@dataclass
class _Job:
    """A launch in progress: its processes, where their prefixed output goes, and the stop
    signal the launcher got, if any."""

    out: TextIO
    stop: _StopSignals
    lock: threading.Lock = field(default_factory=threading.Lock)
    processes: list[_Process] = field(default_factory=list)

    def start(self, is_rank: bool, index: int, argv: list[str], env: dict[str, str]) -> None:
        popen = subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        process = _Process(f"rank {index}" if is_rank else "scheduler", popen, is_rank)
        process.pump = threading.Thread(
            target=_pump, args=(process, self.out, self.lock, not is_rank), daemon=True
        )
        process.pump.start()
        self.processes.append(process)

    def say(self, text: str) -> None:
        with self.lock:
            self.out.write(text)
            self.out.flush()

    def ranks(self) -> list[_Process]:
        return [process for process in self.processes if process.is_rank]


def _watch(job: _Job, deadline: float | None, timeout: float | None) -> tuple[int, bool]:
    """Wait for the ranks: (exit code, whether every rank exited 0), on the first failure, the
    timeout, or a stop signal (its code is :func:`_wind_down`'s)."""
    ranks = job.ranks()
    while job.stop.received is None:
        if any(p.popen.poll() not in (None, 0) for p in ranks):
            return _first_failure(job, ranks), False
        if all(p.popen.poll() == 0 for p in ranks):
            return 0, True
        if deadline is not None and time.monotonic() > deadline:
            running = [p.label for p in ranks if p.popen.poll() is None]
            job.say(
                f"compat launch: timed out after {timeout:g} s; still running: "
                f"{', '.join(running)}; stopping the job\n"
            )
            return TIMEOUT_EXIT_CODE, False
        time.sleep(0.05)
    return 0, False


def _first_failure(job: _Job, ranks: list[_Process]) -> int:
    """The exit code of the rank that failed first, said on the output."""
    # The rank that failed first may still be tearing down while the ones its failure broke
    # have exited: let them all finish failing, briefly.
    _wait_while(job, time.monotonic() + FAILURE_GRACE_SECONDS, ranks)
    failed = [p for p in ranks if p.popen.poll() not in (None, 0)]
    for process in failed:
        process.pump.join(1)  # its output is complete
    first = min(failed, key=lambda p: p.last_words)
    returned = first.popen.returncode
    how = (
        f"exited with code {returned}"
        if returned > 0
        else f"was killed by signal {signal.Signals(-returned).name}"
    )
    job.say(f"compat launch: {first.label} {how}; stopping the other ranks\n")
    return returned if returned > 0 else 128 - returned


def _wait_while(job: _Job, until: float, processes: list[_Process]) -> None:
    """Wait until ``until`` (time.monotonic()), a stop signal, or ``processes`` all ended."""
    while (
        time.monotonic() < until
        and job.stop.received is None
        and any(p.popen.poll() is None for p in processes)
    ):
        time.sleep(0.05)


def _wind_down(job: _Job, finished: bool, code: int) -> int:
    """Stop whatever still runs and return the job's exit code: ``code``, unless a stop signal
    came (it wins over what the ranks did meanwhile: the user stopped the job)."""
    if finished:
        # A scheduler (MindSpore's) ends by itself once the workers have; give it a moment.
        _wait_while(job, time.monotonic() + 10, job.processes)
    if job.stop.received is not None:
        code = 128 + job.stop.received
        job.say(f"compat launch: got {signal.Signals(job.stop.received).name}; stopping the job\n")
    _stop(job.processes, how=job.stop.received or signal.SIGTERM)
    for process in job.processes:
        process.pump.join(5)
    return code


def launch(
    nprocs: int,
    command: Sequence[str],
    framework: str | None = None,
    *,
    devices: Sequence[int] | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    sink: TextIO | None = None,
    python: str = sys.executable,
    verbose: bool = False,
) -> int:
    """Run ``python command...`` as ``nprocs`` ranks and return the job's exit code.

    Parameters
    ----------
    nprocs
        Number of ranks (>= 1).
    command
        A script and its arguments, or ``["-m", module, *args]``.
    framework
        Whose launcher environment to set (a key of ``mapping_tables/frameworks.toml``). Default:
        as ``compat launch`` chooses (:func:`compat.core.dispatch.choose_framework` with
        ``first_if_several=True``).
    devices
        Device indexes on this node, as the framework counts them: rank i runs on the i-th
        (torch: every rank sees only these, as ``CUDA_VISIBLE_DEVICES``, so ``LOCAL_RANK`` i is
        the i-th; MindSpore: ``DEVICE_ID``). Default: rank i runs on device i.
    timeout
        Seconds after which a job still running is stopped (exit code 124).
    env
        Extra environment for every rank.
    sink
        Where the prefixed output goes (default ``sys.stdout``).
    python
        The interpreter the ranks run.
    verbose
        Leave the framework's logging at its own default (MindSpore: warnings and up) instead
        of errors only (:func:`quiet_environment`; a level the user's environment or ``env``
        sets is kept either way).

    Returns
    -------
    int
        0 if every rank exited 0; else the exit code of the first rank that failed, 124 on
        timeout, or 128 + the signal's number when one of :data:`STOP_SIGNALS` stopped the job
        (130 for SIGINT, 143 for SIGTERM); every rank and the scheduler have ended by then.

    Raises
    ------
    LaunchError
        Before any process starts: ``nprocs`` < 1, no ``command``, bad ``devices``, or (where
        the ranks would run on devices) more ranks than devices; see :func:`assign_devices`.
    """
    if not command:
        raise LaunchError("command", "expected a script (and its arguments); got nothing")
    framework = choose_framework(framework, first_if_several=True)
    planned = _plan(framework, nprocs, devices, [python, *command], python, env or {}, verbose)
    deadline = None if timeout is None else time.monotonic() + timeout
    with _StopSignals() as stop:
        job = _Job(sink if sink is not None else sys.stdout, stop)
        code, finished = 0, False  # finished: every rank exited 0
        try:
            for index, (argv, process_env) in enumerate(planned):
                if stop.received is not None:
                    break  # the ranks started so far are stopped below
                job.start(index < nprocs, index, argv, process_env)
            code, finished = _watch(job, deadline, timeout)
        finally:
            code = _wind_down(job, finished, code)
    return code
