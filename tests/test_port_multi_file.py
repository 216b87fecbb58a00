"""Porting one file of a project whose other modules stay on torch (tests/port_fixtures/multi_file):
``compat port --write`` on the process-group manager alone, then the project (a trainer and a
checkpoint helper that call torch.distributed on the manager's groups) runs the same before and
after on 2 and 3 Gloo ranks; the ported manager also runs on MindSpore (MCCL)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.processes import run_bounded
from tests.test_interop import _environment

FIXTURE = Path(__file__).resolve().parent / "port_fixtures" / "multi_file"
PACKAGE = Path("tests", "port_fixtures", "multi_file")


def _project(root: Path, ported: bool) -> Path:
    """A copy of the project under ``root`` (its own ``tests`` package), its manager ported."""
    target = root / PACKAGE
    shutil.copytree(FIXTURE, target, ignore=shutil.ignore_patterns("__pycache__"))
    for package in (root / "tests", root / "tests" / "port_fixtures"):
        (package / "__init__.py").write_text("")
    if ported:
        done = run_bounded(
            [sys.executable, "-m", "compat", "port", "--write", str(target / "groups.py")],
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        text = (target / "groups.py").read_text()
        assert "import torch" not in text and "compat.new_framework_group(" in text, text
    return root


def _run(root: Path, script: str, world: int, framework: str = "torch") -> list[dict[str, object]]:
    env = _environment()
    env["PYTHONPATH"] = os.pathsep.join([str(root), env["PYTHONPATH"]])
    done = run_bounded(
        [sys.executable, "-m", "compat", "launch", "-n", str(world), "--framework", framework,
         "--timeout", "240", str(root / PACKAGE / script)],
        timeout=300,
        env=env,
        cwd=str(root),
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    lines = [
        line.split("MULTI-FILE ", 1)[1] for line in output.splitlines() if "MULTI-FILE " in line
    ]
    # A framework's log line written meanwhile can follow the result on the same line: read the
    # JSON object and nothing after it.
    decoded = [json.JSONDecoder().raw_decode(line)[0] for line in lines]
    found = sorted(decoded, key=lambda result: result["rank"])
    assert [result["rank"] for result in found] == list(range(world)), output[-4000:]
    return found


@pytest.mark.parametrize("world", [2, 3])
def test_one_ported_module_keeps_the_project_working(tmp_path: Path, world: int) -> None:
    before = _run(_project(tmp_path / "original", ported=False), "run.py", world)
    after = _run(_project(tmp_path / "ported", ported=True), "run.py", world)
    assert after == before
    # What the run computed, as torch computes it (the same before and after).
    for rank, result in enumerate(after):
        tp_start = rank - rank % 2
        assert result["tp_members"] == list(range(tp_start, min(tp_start + 2, world)))
        assert result["weights"] == [[float(tp_start)] * 3] * 2
        assert result["states"] == [[[[r + 0.5] * 2] * 3] for r in range(world)]
        assert result["total"] == world and result["backend"] == "gloo"
        assert result["checkpoint"]["owner"] == tp_start
        assert result["initialized_after_destroy"] is False


def test_the_ported_module_runs_on_mindspore(tmp_path: Path) -> None:
    on_torch = _run(_project(tmp_path / "original", ported=False), "mccl_check.py", 2)
    on_mindspore = _run(_project(tmp_path / "ported", ported=True), "mccl_check.py", 2, "mindspore")
    assert on_mindspore == on_torch
    assert on_torch[1]["dp"] == [3.0] * 3 and on_torch[1]["tp"] == [11.0] * 2
    # `group is dist.group.WORLD`, ported, holds on MindSpore too (there it compares names)
    assert on_torch[0]["world_is_world"] is True and on_torch[0]["dp_is_world"] is False
