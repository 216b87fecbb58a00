"""make demo: the same ZeRO-style training on torch and on MindSpore (2 ranks each) and in one
process; prints the loss curves side by side and checks that they agree within 1e-4.

    python examples/train_demo.py [--steps 30]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from compat.tools.launch import launch

SCRIPT = str(Path(__file__).resolve().parent / "zero_training.py")
TOLERANCE = 1e-4


def run_all(steps: int, workdir: str) -> dict[str, list[float]]:
    curves = {}
    single = os.path.join(workdir, "single.json")
    print("== one process, the whole batch (torch)", flush=True)
    env = {**os.environ, "COMPAT_FRAMEWORK": "torch"}
    argv = [sys.executable, SCRIPT, "--steps", str(steps), "--out", single]
    subprocess.run(argv, env=env, check=True, timeout=300)
    curves["single process"] = json.loads(Path(single).read_text())
    for framework in ("torch", "mindspore"):
        print(f"== 2 ranks on {framework}", flush=True)
        out = os.path.join(workdir, f"{framework}.json")
        code = launch(2, [SCRIPT, "--steps", str(steps), "--out", out], framework, timeout=600)
        if code != 0:
            raise SystemExit(f"the {framework} job failed with exit code {code}")
        curves[f"{framework} x2"] = json.loads(Path(out).read_text())
    return curves


def report(curves: dict[str, list[float]]) -> float:
    """Print the curves side by side; return the largest difference from the single process."""
    names = list(curves)
    print("\nstep  " + "  ".join(f"{name:>16}" for name in names))
    for step, row in enumerate(zip(*curves.values(), strict=True), start=1):
        print(f"{step:4d}  " + "  ".join(f"{loss:16.6f}" for loss in row))
    reference = curves["single process"]
    return max(
        abs(loss - expected)
        for name in names
        for loss, expected in zip(curves[name], reference, strict=True)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        curves = run_all(args.steps, workdir)
    worst = report(curves)
    agree = worst <= TOLERANCE
    verdict = "agree" if agree else "DISAGREE"
    print(
        f"\nlargest difference from the single process: {worst:.2e} "
        f"({verdict}, within {TOLERANCE:g})"
    )
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
