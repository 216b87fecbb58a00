"""Starting a MindSpore job the way torch's programs start theirs: the device bound for the
backend, and, for a tcp:// or env:// init without msrun, the scheduler msrun would have started
(rank 0 starts it; it ends with rank 0). DESIGN.md: a job is one MS_SCHED process and N
MS_WORKER ones meeting at MS_SCHED_HOST:MS_SCHED_PORT."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import threading

import mindspore as ms
from mindspore import communication
from mindspore._c_expression import DeviceManagerConf

from compat.base import tables
from compat.base.adapter import Rendezvous
from compat.base.environment import environment, local_rank
from compat.base.errors import UnsupportedError


def join(rendezvous: Rendezvous) -> subprocess.Popen[bytes] | None:
    """mindspore.communication.init, after translating torch's way of meeting (tcp://, or
    MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE) into MindSpore's: rank 0 starts the scheduler
    (what msrun would start) at that address and returns it."""
    meeting = torch_meeting(rendezvous)
    scheduler = None
    if meeting is not None and "MS_ROLE" not in os.environ:
        host, port, rank, world = meeting
        common = {
            "MS_SCHED_HOST": socket.gethostbyname(host),
            "MS_SCHED_PORT": str(port),
            "MS_WORKER_NUM": str(world),
        }
        if rank == 0:
            check_scheduler_port(common["MS_SCHED_HOST"], port)
            scheduler = start_scheduler(common)
        os.environ.update(common, MS_ROLE="MS_WORKER", MS_NODE_ID=str(rank))
        os.environ.setdefault("RANK_ID", str(rank))
    communication.init()
    return scheduler


def bind_device(target: str, device_id: int | None) -> None:
    """``ms.set_device`` for the backend's device target: ``device_id`` if given, else the
    device msrun or another launcher gives this rank (``local_rank_env``; msrun's DEVICE_ID is
    the local rank), else MindSpore's default (0). A device the script set itself is kept: a
    second ``ms.set_device`` with another id fails ("can not be modified")."""
    conf = DeviceManagerConf.get_instance()
    if conf.is_device_enable():
        chosen = (conf.get_device_target(), conf.get_device_id())
        if chosen[0] != target:
            raise ValueError(
                f"backend: it runs on {target}; the script set the device to {chosen[0]} "
                "(ms.set_device)"
            )
        if device_id is not None and device_id != chosen[1]:
            raise ValueError(
                f"device_id: the script set device {chosen[1]} (ms.set_device); got {device_id}"
            )
        return
    if device_id is None and target != "CPU":
        device_id = local_rank("mindspore")
    ms.set_device(target, device_id)


def backend_of_target(target: str) -> str:
    for key, entry in tables.load("capabilities").items():
        if entry["framework"] == "mindspore" and entry.get("device_target") == target:
            name: str = entry.get("backend", key)
            return name
    raise UnsupportedError(
        f"device target {target!r} has no MindSpore backend in capabilities.toml"
    )


def torch_meeting(rendezvous: Rendezvous) -> tuple[str, int, int, int] | None:
    """(host, port, rank, world size) from torch's init_process_group arguments: tcp://host:port
    with rank and world_size, or env:// (or nothing) with MASTER_ADDR, MASTER_PORT, RANK and
    WORLD_SIZE set; None when neither gives them (msrun's variables, or a world of one)."""
    method = rendezvous.init_method
    if method is not None and method.startswith("file://"):
        raise UnsupportedError(
            f"init_method: MindSpore meets over TCP only; expected env:// or tcp://host:port, "
            f"got {method!r}"
        )
    if method is not None and method.startswith("tcp://"):
        where = method.removeprefix("tcp://").split("?")[0].rstrip("/")
        host, _, port = where.rpartition(":")
        assert rendezvous.rank is not None and rendezvous.world_size is not None  # compat.init
        return host, int(port), rendezvous.rank, rendezvous.world_size
    names = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
    if not all(name in os.environ for name in names):
        return None
    rank = rendezvous.rank if rendezvous.rank is not None else int(os.environ["RANK"])
    world = rendezvous.world_size
    world = world if world is not None else int(os.environ["WORLD_SIZE"])
    master_port = int(os.environ["MASTER_PORT"])
    if "TORCHELASTIC_RUN_ID" in os.environ:
        # torchrun's agent serves its own store on MASTER_PORT, which the scheduler cannot bind
        # (see check_scheduler_port): the scheduler takes the next port.
        master_port += 1
    return os.environ["MASTER_ADDR"], master_port, rank, world


def check_scheduler_port(address: str, port: int) -> None:
    """Raise where another process holds ``port`` at ``address``, so that MindSpore's scheduler
    could not listen there. Its output is not shown, and every rank would then wait in
    mindspore.communication.init, silently retrying to reach it, for MS_TOPO_TIMEOUT seconds
    (MindSpore's default: 30 minutes). Raised here, rank 0 ends at once; the other ranks, which
    cannot know, wait those 30 minutes, as torch's ranks wait for a missing master for
    init_process_group's timeout (30 minutes by default on Gloo, 2.13). A launcher's free port
    can be taken before rank 0 gets here: by another job, or as the local port of any outgoing
    connection (both draw from the same range)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                return  # MindSpore's scheduler meets it too, and says so
            raise RuntimeError(
                f"MASTER_PORT: MindSpore's scheduler, which compat starts on rank 0 at the "
                f"address the job meets at (init_method's tcp://host:port, else MASTER_ADDR and "
                f"MASTER_PORT, the next port under torchrun), cannot listen on {address}:{port}: "
                f"another process holds that port; expected a free port, got {port}"
            ) from error


#: Run in the scheduler rank 0 starts, before frameworks.toml's code: the kernel kills the
#: scheduler when rank 0 ends, however it ends. Rank 0 ended by a signal Python does not turn into
#: an exception (SIGTERM, as torch.multiprocessing.spawn and torchrun stop ranks; SIGKILL; or
#: MindSpore's own exit on Ctrl-C) runs neither atexit nor destroy(), and its scheduler outlived
#: it. Not a thread polling getppid(): the scheduler's init() holds the GIL until the job ends,
#: so no other Python thread runs. Linux only (prctl).
_END_WITH_PARENT = """
import ctypes, os, signal, sys
if sys.platform.startswith("linux"):
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != int(sys.argv[1]):
        os._exit(1)  # rank 0 ended before prctl took effect
"""


def start_scheduler(common: dict[str, str]) -> subprocess.Popen[bytes]:
    """MindSpore's scheduler process, as compat launch and msrun start it (frameworks.toml), ending
    with this process (``_END_WITH_PARENT``)."""
    scheduler = tables.lookup("frameworks", "mindspore", "launch", "scheduler")
    inherited = environment()
    env = {**inherited, **common, **scheduler["env"], "GLOG_v": inherited.get("GLOG_v", "3")}
    argv = [sys.executable, "-c", _END_WITH_PARENT + scheduler["code"], str(os.getpid())]
    if not sys.platform.startswith("linux"):
        return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started: list[subprocess.Popen[bytes] | BaseException] = []
    ready = threading.Event()

    def start_and_stay() -> None:
        # The parent-death signal follows the thread that started the child, not the process:
        # started from compat.init's thread, a scheduler would be killed when that thread ends
        # (an init from a worker thread). This thread stays until the scheduler has exited.
        try:
            popen = subprocess.Popen(
                argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        except BaseException as error:  # the caller raises it
            started.append(error)
            ready.set()
            return
        started.append(popen)
        ready.set()
        popen.wait()  # reaped here: destroy() does not wait for it

    threading.Thread(target=start_and_stay, name="compat-mindspore-scheduler", daemon=True).start()
    ready.wait()
    if isinstance(started[0], BaseException):
        raise started[0]
    return started[0]
