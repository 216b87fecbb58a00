"""The users' job: framework-agnostic ZeRO-style training agrees across torch, MindSpore and a
single process (a short version of make demo)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.processes import run_bounded

DEMO = Path(__file__).resolve().parent.parent / "examples" / "train_demo.py"


def test_training_curves_agree_across_frameworks_and_with_one_process() -> None:
    result = run_bounded([sys.executable, str(DEMO), "--steps", "8"], timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "(agree, within 0.0001)" in result.stdout, result.stdout[-2000:]
    rows = [line for line in result.stdout.splitlines() if line[:4].strip().isdigit()]
    assert len(rows) == 8, rows
    first, last = (float(value) for value in (rows[0].split()[1], rows[-1].split()[1]))
    assert last < first, "the loss must fall"
