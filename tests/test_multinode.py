"""Multi-node launches on one machine: two launcher processes as two "nodes" of two ranks each.

torchrun (``--nnodes 2 --node-rank 0/1 --nproc-per-node 2``, c10d or static rendezvous on
127.0.0.1) runs the program on torch and on MindSpore (``compat.init("mindspore")`` under
torchrun: rank 0 starts MindSpore's scheduler itself, on ``MASTER_PORT + 1``), and msrun
(``--worker_num 4 --local_worker_num 2 --node_rank 0/1``) runs it on MindSpore. Every rank checks
its global and local rank against the launcher's variables, the layout of the whole job (two
consecutive ranks per node, local ranks 0 and 1 on each), sub-groups that span both nodes
([1, 2] and [0, 3]), and both reduce_scatter styles with values checked against numpy, each
output a view inside a sentinel-filled buffer that must stay untouched outside it. Each test
starts both nodes as separate processes under one hard timeout and checks that both exit 0 and
that every rank printed its OK line.

One thing differs from separate machines: msrun starts a scheduler on every node whose
``--master_addr`` is one of its own addresses (``_is_local_ip``), here on both; the second cannot
bind the port, and its msrun fails the job although every worker succeeded (measured). So the
program, run by msrun as the scheduler of node 1, exits at once, as if on another machine.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from compat.base.net import free_port

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

#: Variables a launcher sets: each node starts without any of them.
LAUNCHER_VARIABLES = (
    "COMPAT_FRAMEWORK", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "LOCAL_WORLD_SIZE", "GROUP_RANK", "MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT",
    "MS_WORKER_NUM", "MS_NODE_ID", "RANK_ID", "RANK_SIZE", "DEVICE_ID", "TORCHELASTIC_RUN_ID",
)  # fmt: skip

#: The variable that marks every process of one test's job, so that all of them (the launchers'
#: workers run in sessions of their own) can be found and stopped however the job ends.
MARKER = "COMPAT_MULTINODE_JOB"

# Run by every rank: argv = framework, launcher ("torchrun" or "msrun"), node (0 or 1: which of
# the two launcher processes started it), rendezvous ("c10d", "static": is node the node rank?).
PROGRAM = """
import os
import sys

import numpy as np

import compat

SENTINEL = -7.0
framework, launcher, node, rendezvous = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

if launcher == "msrun" and os.environ.get("MS_ROLE") == "MS_SCHED" and node != 0:
    # msrun starts a scheduler (this script, as MS_SCHED) on every node whose --master_addr is
    # one of its own addresses: on one machine, on both nodes. The second cannot bind the port
    # and its msrun then fails the job. On real nodes only the master node's msrun starts one.
    print("node 1: no scheduler here, as on a separate machine", flush=True)
    sys.exit(0)
# torchrun: env:// (on MindSpore, rank 0 starts the scheduler); msrun: its MS_* variables (msrun
# also runs this script as its scheduler, in which init serves the job and exits).
compat.init(framework)
rank, world = compat.get_rank(), compat.get_world_size()
assert compat.get_backend() == {"torch": "gloo", "mindspore": "mccl"}[framework]
if launcher == "torchrun":
    local = int(os.environ["LOCAL_RANK"])
    assert (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) == (rank, world), (
        os.environ["RANK"], os.environ["WORLD_SIZE"], rank, world)
    assert os.environ["LOCAL_WORLD_SIZE"] == "2", os.environ["LOCAL_WORLD_SIZE"]
    node_rank = int(os.environ["GROUP_RANK"])  # c10d: the order in which the nodes joined
else:
    local = int(os.environ["DEVICE_ID"])  # msrun's local rank
    assert int(os.environ["RANK_ID"]) == rank, (os.environ["RANK_ID"], rank)
    node_rank = node  # --node_rank
if rendezvous == "static":
    assert node_rank == node, (node_rank, node)
assert world == 4, world
assert local in (0, 1) and rank == 2 * node_rank + local, (rank, node_rank, local)

if framework == "torch":
    import torch

    make = lambda a: torch.from_numpy(np.array(a, dtype=np.float32))
    read = lambda t: t.numpy()
else:
    import mindspore as ms

    make = lambda a: ms.Tensor(np.array(a, dtype=np.float32))
    read = lambda t: t.asnumpy()


class Placed:
    # rows x 3 at rows [1, 1 + rows) of a sentinel-filled (rows + 3) x 3 buffer.
    def __init__(self, rows):
        self.expected = np.full((rows + 3, 3), SENTINEL, dtype=np.float32)
        self.base = make(self.expected)
        self.view = self.base[1 : 1 + rows]

    def check(self, data, what):
        self.expected[1 : 1 + len(data)] = data
        got = read(self.base)
        assert np.array_equal(got, self.expected), (what, rank, got, self.expected)


# The job's layout, from every rank: (node, local rank, rank) of each.
table = [make(np.zeros(3)) for _ in range(world)]
compat.all_gather(table, make([node, local, rank]))
rows = [read(t).astype(int).tolist() for t in table]
assert [row[1:] for row in rows] == [[r % 2, r] for r in range(world)], rows
assert rows[0][0] == rows[1][0] != rows[2][0] == rows[3][0], f"ranks by node: {rows}"

# Sub-groups with one rank on each node. Every rank creates each group, as in torch.
for members in ([1, 2], [0, 3]):
    group = compat.new_group(members)
    assert compat.get_process_group_ranks(group) == members
    if rank not in members:
        assert compat.get_rank(group) == -1
        continue
    me = members.index(rank)
    assert (compat.get_rank(group), compat.get_world_size(group)) == (me, 2)
    x = make(np.full(3, rank + 1.0))
    compat.all_reduce(x, group=group)
    assert np.array_equal(read(x), np.full(3, sum(m + 1.0 for m in members))), (members, read(x))
    full = np.arange(4 * 3, dtype=np.float32).reshape(4, 3) + 100 * members[0]
    out = Placed(2)
    got = compat.reduce_scatter_tensor(make(full * (rank + 1)), group=group, out=out.view)
    expected = sum(m + 1 for m in members) * full[2 * me : 2 * me + 2]
    assert np.array_equal(read(got), expected), (members, read(got))
    out.check(expected, f"reduce_scatter_tensor in {members}")
    pieces = [np.full((me_ + 1, 3), 10.0 * me_ + rank, dtype=np.float32) for me_ in range(2)]
    out = Placed(me + 1)
    compat.reduce_scatter(out.view, [make(p) for p in pieces], op="max", group=group)
    out.check(np.full((me + 1, 3), 10.0 * me + max(members)), f"reduce_scatter max in {members}")

total = sum(range(1, world + 1))
# reduce_scatter_tensor (MindSpore's functional style): a new tensor, into out, uneven splits,
# along dim 1, and asynchronous.
full = np.arange(2 * world * 3, dtype=np.float32).reshape(2 * world, 3)
part = compat.reduce_scatter_tensor(make(full * (rank + 1)))
assert np.array_equal(read(part), total * full[2 * rank : 2 * rank + 2]), read(part)
out = Placed(2)
compat.reduce_scatter_tensor(make(full * (rank + 1)), out=out.view)
out.check(total * full[2 * rank : 2 * rank + 2], "reduce_scatter_tensor out=")
sizes = [1, 2, 3, 2]
start = sum(sizes[:rank])
out = Placed(sizes[rank])
compat.reduce_scatter_tensor(make(full * (rank + 1)), out=out.view, input_split_sizes=sizes)
out.check(total * full[start : start + sizes[rank]], "reduce_scatter_tensor input_split_sizes")
wide = np.arange(3 * 2 * world, dtype=np.float32).reshape(3, 2 * world)
part = compat.reduce_scatter_tensor(make(wide * (rank + 1)), dim=1)
assert np.array_equal(read(part), total * wide[:, 2 * rank : 2 * rank + 2]), read(part)
out = Placed(2)
part, work = compat.reduce_scatter_tensor(make(full * (rank + 1)), async_op=True, out=out.view)
work.wait()
out.check(total * full[2 * rank : 2 * rank + 2], "reduce_scatter_tensor async_op")

# reduce_scatter (torch's output-buffer style): rank i's piece has i + 1 rows.
def piece(i, source):
    return (np.arange((i + 1) * 3, dtype=np.float32).reshape(i + 1, 3) + 10 * i) * (source + 1)

pieces = [make(piece(i, rank)) for i in range(world)]
out = Placed(rank + 1)
assert compat.reduce_scatter(out.view, pieces) is None
out.check(total * piece(rank, 0), "reduce_scatter")
out = Placed(rank + 1)
compat.reduce_scatter(out.view, pieces, op=compat.ReduceOp.MAX)
out.check(piece(rank, world - 1), "reduce_scatter max")
out = Placed(rank + 1)
compat.reduce_scatter(out.view, pieces, async_op=True).wait()
out.check(total * piece(rank, 0), "reduce_scatter async_op")

compat.barrier()
compat.destroy()
# One write: print() writes the line and its newline separately, and MindSpore's threads log to
# the same file in between.
os.write(1, f"OK rank {rank} local {local} node {node}\\n".encode())
"""


def _environment(marker: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in LAUNCHER_VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    # msrun runs its workers as "python" from the PATH: this interpreter's.
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env.setdefault("GLOG_v", "3")
    env["PYTHONUNBUFFERED"] = "1"
    env[MARKER] = marker
    return env


def _port_pair() -> int:
    """A free port whose successor is free too (compat's MindSpore scheduler under torchrun)."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")


def _marked(marker: str) -> list[int]:
    """The processes whose environment carries ``marker``: this test's job, wherever it is."""
    needle = f"{MARKER}={marker}".encode()
    found: list[int] = []
    if not Path("/proc").is_dir():
        return found  # not Linux: the launchers' process groups are all that can be stopped
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _stop(processes: Sequence[subprocess.Popen[bytes]], marker: str) -> None:
    """Stop what is left of the job: the launchers' groups and every marked process."""
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid in _marked(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for process in processes:
        process.wait()


def run_nodes(
    commands: Sequence[Sequence[str]], logs: Sequence[Path], timeout: float, cwd: Path
) -> tuple[list[int], float]:
    """Start each command (a launcher for one node) at once and wait for all, for at most
    ``timeout`` seconds in all; their output goes to ``logs``. Returns the exit codes and the
    seconds the whole job took."""
    marker = uuid.uuid4().hex
    env = _environment(marker)
    processes: list[subprocess.Popen[bytes]] = []
    started = time.monotonic()
    try:
        for command, log in zip(commands, logs, strict=True):
            with log.open("wb") as sink:
                processes.append(
                    subprocess.Popen(
                        list(command),
                        stdout=sink,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        env=env,
                        cwd=str(cwd),
                        start_new_session=True,
                    )
                )
        deadline = started + timeout
        for process in processes:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"the job did not finish within {timeout} s\n" + _tails(logs)
                ) from None
        return [process.returncode for process in processes], time.monotonic() - started
    finally:
        _stop(processes, marker)


def _tails(logs: Sequence[Path], chars: int = 3000) -> str:
    parts = []
    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else "(no output)"
        parts.append(f"--- {log.name} ---\n{text[-chars:]}")
    return "\n".join(parts)


def _ok_lines(text: str) -> list[tuple[int, int, int]]:
    return [
        (int(m[1]), int(m[2]), int(m[3]))
        for m in re.finditer(r"\bOK rank (\d+) local (\d+) node (\d+)\b", text)
    ]


def _check_layout(oks: list[tuple[int, int, int]], where: str) -> None:
    """Every rank printed OK once; each node ran two consecutive ranks, local ranks 0 and 1."""
    assert sorted(rank for rank, _, _ in oks) == [0, 1, 2, 3], f"OK lines {oks}\n{where}"
    for node in (0, 1):
        mine = sorted((rank, local) for rank, local, n in oks if n == node)
        assert [local for _, local in mine] == [0, 1], f"node {node}: {mine}\n{where}"
        assert mine[1][0] == mine[0][0] + 1 and mine[0][0] % 2 == 0, f"node {node}: {mine}"


def _program(tmp_path: Path) -> Path:
    script = tmp_path / "multinode_job.py"
    script.write_text(PROGRAM)
    return script


def _torchrun_nodes(script: Path, framework: str, rendezvous: str, port: int) -> list[list[str]]:
    meeting = (
        ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "job"]
        if rendezvous == "c10d"
        else ["--master-addr", "127.0.0.1", "--master-port", str(port)]
    )
    return [
        [str(BIN / "torchrun"), "--nnodes", "2", "--node-rank", str(node),
         "--nproc-per-node", "2", *meeting, str(script), framework, "torchrun", str(node),
         rendezvous]
        for node in (0, 1)
    ]  # fmt: skip


#: Seconds a whole job may take (both nodes) before it is stopped.
JOB_TIMEOUT = {"torch": 120.0, "mindspore": 300.0}


# torch over c10d costs ~5 s here (2 cores): it stays in make test; the rest are long.
@pytest.mark.parametrize(
    ("framework", "rendezvous"),
    [
        ("torch", "c10d"),
        pytest.param("torch", "static", marks=pytest.mark.long),
        pytest.param("mindspore", "c10d", marks=pytest.mark.long),
        pytest.param("mindspore", "static", marks=pytest.mark.long),
    ],
)
def test_torchrun_two_nodes(tmp_path: Path, framework: str, rendezvous: str) -> None:
    """Two torchrun invocations as nodes 0 and 1. c10d: one agent hosts the rendezvous store
    (the other finds the port taken and joins as a client), the nodes get their ranks in the
    order they joined, and MASTER_PORT is the store rank 0's agent opened on a port of its own;
    static: node 0's agent hosts the store on --master-port. On MindSpore, compat's scheduler
    takes MASTER_PORT + 1."""
    logs = [tmp_path / f"node{node}.log" for node in (0, 1)]
    commands = _torchrun_nodes(_program(tmp_path), framework, rendezvous, _port_pair())
    codes, seconds = run_nodes(commands, logs, JOB_TIMEOUT[framework], tmp_path)
    output = _tails(logs)
    assert codes == [0, 0], f"exit codes {codes}\n{output}"
    oks = []
    for node, log in enumerate(logs):
        found = _ok_lines(log.read_text(errors="replace"))
        assert all(n == node for _, _, n in found), f"{log.name}: {found}"
        oks += found
    _check_layout(oks, output)
    print(f"torchrun, 2 nodes x 2 ranks, {framework}, {rendezvous}: {seconds:.1f} s")


@pytest.mark.long
def test_msrun_two_nodes_mindspore(tmp_path: Path) -> None:
    script = _program(tmp_path)
    port = free_port()
    logs = [tmp_path / f"node{node}.log" for node in (0, 1)]
    commands = [
        [str(BIN / "msrun"), "--worker_num", "4", "--local_worker_num", "2", "--node_rank",
         str(node), "--master_addr", "127.0.0.1", "--master_port", str(port), "--join", "True",
         "--cluster_time_out", "120", "--log_dir", str(tmp_path / f"logs{node}"), str(script),
         "mindspore", "msrun", str(node), "static"]
        for node in (0, 1)
    ]  # fmt: skip
    codes, seconds = run_nodes(commands, logs, JOB_TIMEOUT["mindspore"], tmp_path)
    worker_logs = sorted(tmp_path.glob("logs*/*.log"))
    output = _tails([*logs, *worker_logs])
    assert codes == [0, 0], f"exit codes {codes}\n{output}"
    oks = []
    for node in (0, 1):
        for log in sorted((tmp_path / f"logs{node}").glob("worker_*.log")):
            found = _ok_lines(log.read_text(errors="replace"))
            assert all(n == node for _, _, n in found), f"{log}: {found}"
            oks += found
    _check_layout(oks, output)
    print(f"msrun, 2 nodes x 2 ranks, mindspore: {seconds:.1f} s")
