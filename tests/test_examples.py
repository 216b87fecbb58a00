"""The users' job (a short ``make demo``): both reduce_scatter styles give the expected shards on
torch and MindSpore, the framework-agnostic ZeRO-style training agrees across torch, MindSpore
and a single process, and every line the demo prints is the demo's own (no framework logging,
no warning)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.jobs import BACKGROUND, CommandSpec

DEMO = Path(__file__).resolve().parent.parent / "examples" / "train_demo.py"
#: Framework logging ("[WARNING] DISTRIBUTED(...", "[ERROR] ME(...") or a Python warning.
NOISE = re.compile(r"\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\] [A-Z_]+\(|Warning\b")


#: The demo, run in the background while other tests run (tests/jobs.py).
DEMO_RUN = CommandSpec((sys.executable, str(DEMO), "--steps", "8"), timeout=400)


@pytest.mark.job(DEMO_RUN)
def test_the_demo_checks_both_styles_and_the_training_and_prints_only_its_own_lines() -> None:
    result = BACKGROUND.result(DEMO_RUN)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    lines = result.stdout.splitlines()
    noise = [line for line in lines + result.stderr.splitlines() if NOISE.search(line)]
    assert noise == [], noise
    assert result.stderr == "", result.stderr[-2000:]
    # The ranks' results, as numpy computed them: rank r gets [2r + 1, 2r + 2] * (1 + 2).
    for framework, backend in (("torch", "gloo"), ("mindspore", "mccl")):
        for rank, shard in ((0, "[3. 6.]"), (1, "[ 9. 12.]")):
            assert (
                f"[rank {rank}] {framework}/{backend} rank {rank}: reduce_scatter -> {shard}  "
                f"reduce_scatter_tensor -> {shard}  expected {shard}"
            ) in lines, result.stdout
    # The table: steps 1, 5 and the last; the single process and both 2-rank jobs per row.
    rows = [line.split() for line in lines if line[:4].strip().isdigit()]
    assert [row[0] for row in rows] == ["1", "5", "8"], rows
    assert all(len(row) == 4 for row in rows), rows
    assert float(rows[-1][1]) < float(rows[0][1]), "the loss must fall"
    # It ends with one line per check.
    assert lines[-3:] == [
        "reduce_scatter on torch x2: both styles gave the expected shards",
        "reduce_scatter on mindspore x2: both styles gave the expected shards",
        lines[-1],
    ], lines[-3:]
    assert lines[-1].startswith(
        "training on torch x2 and mindspore x2: the loss curves agree with one process at every "
        "step (largest difference "
    ), lines[-1]
    assert lines[-1].endswith("; within 0.0001 required)"), lines[-1]
    assert len(lines) < 40, result.stdout
