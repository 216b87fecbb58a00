"""The soak (``make soak``): the randomized differential check of tests/ranks/random_cases.py at
length, 10,000 calls per job on torch/Gloo and MindSpore/MCCL at 2 and 3 ranks, and on MCCL at 2
with COMPAT_MINDSPORE_PRIMITIVES=1 (its short sequences run in make test: test_collectives). Each
job says when it starts (and how long such jobs took here), then prints its calls, mismatches,
wall time and every rank's resident memory (VmRSS) at the start and end.

Marked long: ``make test`` deselects it. COMPAT_SOAK_CALLS and COMPAT_SOAK_SEED change the length
and the sequence (a failure names the seed and the call index to replay).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.jobs import run_job

CALLS = int(os.environ.get("COMPAT_SOAK_CALLS", "10000"))
# Seconds a job may take. 10,000 calls took 528 s on MindSpore with 3 ranks, 22 s on torch (this
# 2-core machine); generous, so that a slower or busier machine passes, while a hang still ends.
TIMEOUT = 3 * 3600.0


@pytest.mark.long
@pytest.mark.timeout(TIMEOUT + 300)
@pytest.mark.parametrize(
    ("framework", "world", "switch"),
    [
        ("torch", 2, ""), ("torch", 3, ""), ("mindspore", 2, ""), ("mindspore", 3, ""),
        # MCCL through MindSpore's ops primitives, the path its GPU backend takes
        ("mindspore", 2, "COMPAT_MINDSPORE_PRIMITIVES"),
    ],
    ids=lambda value: str(value),
)  # fmt: skip
def test_soak(framework: str, world: int, switch: str, tmp_path: Path) -> None:
    env = {"COMPAT_SOAK_REPORT": str(tmp_path), "COMPAT_SOAK_CALLS": str(CALLS)}
    if switch:
        env[switch] = "1"
    if "COMPAT_SOAK_SEED" in os.environ:
        env["COMPAT_SOAK_SEED"] = os.environ["COMPAT_SOAK_SEED"]
    # A job runs for minutes with its output collected: say which one, and since when.
    print(
        f"\nsoak {framework} {world} ranks: {CALLS} calls, started {time.strftime('%H:%M:%S')} "
        "(10,000 calls took 22 s on torch, 528 s on MindSpore with 3 ranks, on 2 cores)",
        flush=True,
    )
    started = time.monotonic()
    job = run_job(framework, world, "tests.ranks.random_cases", ["soak"], TIMEOUT, env)
    wall = time.monotonic() - started
    reports = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("rank*.json"))]
    mismatches = sum(report["mismatches"] for report in reports)
    print(
        f"soak {framework} {world} ranks: {CALLS} calls, {mismatches} mismatches, "
        f"wall {wall:.0f} s (job, with start-up)"
    )
    for report in reports:
        rss = report["rss_kb"]
        between = ", ".join(f"{kb / 1024:.0f}" for kb in rss[1:-1])
        print(
            f"  rank {report['rank']}: seed {report['seed']}, took part in "
            f"{report['took_part']} calls, {report['seconds']:.0f} s, "
            f"RSS {rss[0] / 1024:.0f} MB at the start, {rss[-1] / 1024:.0f} MB at the end"
            + (f" (every 1,000 calls: {between} MB)" if between else "")
        )
    failure = job.failure("soak")
    assert failure is None, failure
    assert len(reports) == world, f"{len(reports)} of {world} ranks reported"
    assert mismatches == 0
