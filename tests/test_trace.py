"""The flight recorder (compat.core.recorder) on real ranks, both frameworks: a rank that skips a
collective, a rank killed while the other waits for it, mismatched shapes under the pre-flight
check; each leaves dumps that `compat trace` reads and names the culprit rank and call in, and
that torch's own analyzer reads. The comms log's counts and bytes against a known sequence."""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from compat.tools import trace_report
from compat.tools.cli import main as cli_main
from compat.tools.launch import launch

SCRIPT = str(Path(__file__).resolve().parent / "trace_scripts.py")


def run(
    framework: str, scenario: str, folder: Path, ranks: int = 2, env: dict[str, str] | None = None
) -> str:
    sink = io.StringIO()
    launch(
        ranks,
        [SCRIPT, scenario],
        framework,
        timeout=150,
        env={"COMPAT_TRACE_DIR": str(folder), **(env or {})},
        sink=sink,
    )
    return sink.getvalue()


@pytest.fixture(scope="module")
def agree_then_comms_log(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], tuple[str, Path]]:
    """The job of trace_scripts' ``agree,comms_log`` on a framework (its output and its dump
    folder), run once for both tests that read it: one start of the ranks, not two."""
    done: dict[str, tuple[str, Path]] = {}

    def get(framework: str) -> tuple[str, Path]:
        if framework not in done:
            folder = tmp_path_factory.mktemp(f"agree-{framework}")
            output = run(framework, "agree,comms_log", folder, env={"COMPAT_TRACE_SIGNAL": "USR1"})
            done[framework] = (output, folder)
        return done[framework]

    return get


def trace(folder: Path) -> tuple[int, str]:
    out = io.StringIO()
    code = trace_report.report(str(folder), out)
    return code, out.getvalue()


def torch_analyzer(folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.parametrize("framework", ["torch", pytest.param("mindspore", marks=pytest.mark.long)])
def test_a_rank_that_skips_a_collective_is_named_with_the_call(
    framework: str, tmp_path: Path
) -> None:
    """Rank 1 never makes call #3: rank 0 times out in it and dumps; the launcher stops rank 1,
    which dumps on SIGTERM while it sleeps. (MindSpore: MCCL's fixed 30 s bound.)"""
    output = run(framework, "skip", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank_0", "rank_1"], output[-3000:]
    code, said = trace(tmp_path)
    assert code == 1
    assert "rank 1 never reached call #3 all_reduce float32 [4]" in said, said
    assert re.search(
        r"rank 0: #3 all_reduce float32 \[4\] CollectiveTimeout at trace_scripts", said
    )
    assert "rank 1: signal SIGTERM at trace_scripts.py" in said, said
    analysed = torch_analyzer(tmp_path)
    assert "Not all ranks joining collective, sequence number: 3" in analysed, analysed
    assert "missing ranks: {1}" in analysed, analysed


@pytest.mark.parametrize("framework", ["torch", "mindspore"])
def test_a_killed_rank_is_named_with_the_call_the_other_waited_in(
    framework: str, tmp_path: Path
) -> None:
    """Rank 1 is SIGKILLed while rank 0 waits for it in call #3 (through shared memory): rank 0
    raises PeerLostError and dumps; rank 1 cannot."""
    output = run(framework, "killed", tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["rank_0"], output[-3000:]
    code, said = trace(tmp_path)
    assert code == 1
    assert "rank 1 left no dump" in said, said
    assert "rank 0 found rank 1 gone (PeerLostError) in call #3 all_reduce float32 [4]" in said
    assert "#3 all_reduce float32 [4] PeerLostError" in said, said


# On MindSpore under make test-long: the check is the fault jobs' mismatch cases
# (tests/test_faults.py) and the dump is read as in the tests beside this one.
@pytest.mark.parametrize("framework", ["torch", pytest.param("mindspore", marks=pytest.mark.long)])
def test_mismatched_shapes_are_named_with_the_odd_rank(framework: str, tmp_path: Path) -> None:
    """COMPAT_CHECK=1, 3 ranks: rank 2's call #3 has shape [8], the others' [4]; every rank
    raises CollectiveMismatchError and dumps the refused call."""
    output = run(framework, "mismatch", tmp_path, ranks=3, env={"COMPAT_CHECK": "1"})
    assert output.count("CollectiveMismatchError: all_reduce") == 3, output[-3000:]
    code, said = trace(tmp_path)
    assert code == 1
    assert "the ranks' calls #3 differ; rank 2 made the odd one" in said, said
    assert "rank 2: #3 all_reduce float32 [8] CollectiveMismatchError" in said, said
    assert "rank 0: #3 all_reduce float32 [4] CollectiveMismatchError" in said, said


@pytest.mark.parametrize("framework", ["torch", "mindspore"])
def test_dumps_that_agree_say_so_and_torch_reads_them(
    framework: str, agree_then_comms_log: Callable[[str], tuple[str, Path]]
) -> None:
    """Collectives and a send/recv, a dump on SIGUSR1 (COMPAT_TRACE_SIGNAL) then on demand
    (compat.trace.dump_trace()): compat trace finds nothing wrong, torch's analyzer neither."""
    output, tmp_path = agree_then_comms_log(framework)
    for rank in (0, 1):
        assert f"[rank {rank}] signal dump: signal SIGUSR1" in output, output[-3000:]
        assert f"[rank {rank}] dumped {tmp_path}/rank_{rank}" in output, output[-3000:]
    code, said = trace(tmp_path)
    assert code == 0, said
    assert "the dumps agree: every rank of every group made the same calls, and every" in said
    with open(tmp_path / "rank_0", "rb") as file:
        dump = pickle.load(file)
    ops = [entry["profiling_name"] for entry in dump["entries"]]
    backend = "gloo" if framework == "torch" else "mccl"
    assert ops == [
        f"{backend}:{name}"
        for name in (
            "all_reduce", "broadcast", "all_gather", "all_reduce", "send 0->1", "barrier",
            "barrier",
        )
    ]  # fmt: skip
    entry = dump["entries"][2]
    assert entry["input_sizes"] == [[4]] and entry["output_sizes"] == [[8]]
    assert entry["input_dtypes"] == ["Float"] and entry["state"] == "completed"
    assert [e["collective_seq_id"] for e in dump["entries"]] == [1, 2, 3, 4, 4, 5, 6]
    assert [e["p2p_seq_id"] for e in dump["entries"]] == [0, 0, 0, 0, 1, 1, 1]
    assert all(e["how"] in ("native", "emulated", "shared memory") for e in dump["entries"])
    assert all(e["algorithm"] for e in dump["entries"])
    analysed = torch_analyzer(tmp_path)
    assert "error" not in analysed.lower().replace("no errors found", ""), analysed
    assert "Not all ranks joining" not in analysed, analysed


@pytest.mark.parametrize("framework", ["torch", "mindspore"])
def test_the_comms_log_counts_a_known_sequence_exactly(
    framework: str, agree_then_comms_log: Callable[[str], tuple[str, Path]]
) -> None:
    """The log counts the calls made after compat.trace.comms_log() (the job's others before it
    are not counted), exactly."""
    output, _ = agree_then_comms_log(framework)
    for rank in (0, 1):
        line = next(x for x in output.splitlines() if x.startswith(f"[rank {rank}] rows "))
        rows = sorted(tuple(row) for row in json.loads(line.split("rows ", 1)[1]))
        assert rows == sorted(
            [("all_reduce", 4096, 4), ("broadcast", 1024, 2), ("all_gather", 800, 1),
             ("barrier", 0, 1)]
        ), line  # fmt: skip
        assert f"[rank {rank}] csv header op,bytes,algorithm,count,total_s" in output
        assert f"[rank {rank}] json rows 4" in output
        assert f"[rank {rank}] compat comms log, rank {rank}" in output  # printed at destroy()


def test_compat_trace_on_a_folder_without_dumps_is_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert cli_main(["trace", str(tmp_path)]) == 1
    assert "compat trace: DIR: no flight-recorder dump (rank_<N>)" in capsys.readouterr().err


TORCH_DUMP = """
import os, sys, time
import torch, torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace
dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
dist.broadcast(t, 0)
if dist.get_rank() == 0:
    dist.all_reduce(t, async_op=True)  # rank 1 never makes its third call
else:
    time.sleep(3)  # while rank 0 writes its dump
with open(os.path.join(sys.argv[1], f"rank_{dist.get_rank()}"), "wb") as out:
    out.write(_dump_fr_trace())
os._exit(0)
"""


def test_compat_trace_reads_torchs_own_dumps(tmp_path: Path) -> None:
    """Dumps torch's flight recorder wrote (Gloo, TORCH_FR_BUFFER_SIZE): rank 1 never made the
    third all_reduce, and compat trace says so."""
    script = tmp_path / "job.py"
    script.write_text(TORCH_DUMP)
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "100", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         str(script), str(dumps)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert sorted(p.name for p in dumps.iterdir()) == ["rank_0", "rank_1"], done.stderr[-3000:]
    code, said = trace(dumps)
    assert code == 1, said
    assert "rank 0: written by torch" in said, said
    assert "rank 1 never reached call #3 all_reduce Float [4]" in said, said


def test_the_ring_keeps_the_last_calls_with_their_sequence_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COMPAT_TRACE_ENTRIES=4, ten calls at world size 1: the dump holds the last four, numbered
    7-10 on the world, an asynchronous one completed only once waited for."""
    torch = pytest.importorskip("torch")
    import compat
    import compat.core.recorder

    monkeypatch.setenv("COMPAT_TRACE_ENTRIES", "4")
    compat.init("torch")
    try:
        tensor = torch.ones(3)
        for _ in range(8):
            compat.all_reduce(tensor)
        compat.broadcast(tensor, 0)
        work = compat.all_reduce(torch.ones(2, 5), async_op=True)
        pending = pickle.loads(Path(compat.trace.dump_trace(directory=str(tmp_path))).read_bytes())
        work.wait()
        done = pickle.loads(Path(compat.trace.dump_trace(directory=str(tmp_path))).read_bytes())
    finally:
        compat.destroy()
    entries = done["entries"]
    assert [e["collective_seq_id"] for e in entries] == [7, 8, 9, 10]
    assert [e["profiling_name"] for e in entries] == ["gloo:all_reduce"] * 2 + [
        "gloo:broadcast",
        "gloo:all_reduce",
    ]
    assert entries[-1]["input_sizes"] == [[2, 5]] and entries[0]["input_sizes"] == [[3]]
    assert pending["entries"][-1]["state"] == "started"  # until its Work was waited for
    assert all(e["state"] == "completed" for e in entries)
    assert done["compat"]["calls"] == 10 and done["compat"]["capacity"] == 4


def test_a_tracked_handle_probed_before_it_is_made_raises_attribute_error() -> None:
    """torch.compile (dynamo) and copy look at an object's attributes before its __init__ ran:
    the recorder's handle then answers AttributeError, not a RecursionError through
    __getattr__ (a ported collective inside a compiled function crashed so)."""
    import copy

    from compat.core.recorder import _Tracked

    bare = object.__new__(_Tracked)
    with pytest.raises(AttributeError):
        bare.get_future  # noqa: B018
    handle = _Tracked(SimpleNamespace(get_future=lambda: "future"), lambda error: None)
    assert copy.copy(handle).get_future() == "future"
