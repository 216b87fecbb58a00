"""make demo: compat's two reduce_scatter styles on torch and on MindSpore (2 ranks each), then the
same ZeRO-style training on both and in one process; ends with one line per check: the styles
give the expected shards, and the loss curves agree within 1e-4.

    python examples/train_demo.py [--steps 30] [--verbose]
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

HERE = Path(__file__).resolve().parent
STYLES = HERE / "reduce_scatter_styles.py"
TRAINING = HERE / "zero_training.py"
FRAMEWORKS = ("torch", "mindspore")
TOLERANCE = 1e-4
#: The table shows the first step, every TABLE_EVERY-th and the last (the check compares all).
TABLE_EVERY = 5


def check_styles(framework: str, verbose: bool) -> tuple[bool, str]:
    """Run examples/reduce_scatter_styles.py on 2 ranks (each rank checks its own shards)."""
    print(
        f"== reduce_scatter, both styles: compat launch -n 2 --framework {framework} "
        f"examples/{STYLES.name}",
        flush=True,
    )
    code = launch(2, [str(STYLES)], framework, timeout=300, verbose=verbose)
    if code != 0:
        return False, f"reduce_scatter on {framework} x2: FAILED (exit code {code})"
    return True, f"reduce_scatter on {framework} x2: both styles gave the expected shards"


def run_training(steps: int, workdir: str, verbose: bool) -> dict[str, list[float]]:
    """The loss curves of one process (torch, the whole batch) and of 2 ranks per framework."""
    argv = [str(TRAINING), "--steps", str(steps), "--log-every", "0"]
    print(
        f"== ZeRO-style training, {steps} steps (examples/{TRAINING.name}): "
        "one process, the whole batch, on torch",
        flush=True,
    )
    single = os.path.join(workdir, "single.json")
    env = {**os.environ, "COMPAT_FRAMEWORK": "torch"}
    subprocess.run([sys.executable, *argv, "--out", single], env=env, check=True, timeout=300)
    curves = {"single process": json.loads(Path(single).read_text())}
    for framework in FRAMEWORKS:
        print(f"== ZeRO-style training: 2 ranks on {framework}", flush=True)
        out = os.path.join(workdir, f"{framework}.json")
        code = launch(2, [*argv, "--out", out], framework, timeout=600, verbose=verbose)
        if code != 0:
            raise SystemExit(f"the {framework} training job failed with exit code {code}")
        curves[f"{framework} x2"] = json.loads(Path(out).read_text())
    return curves


def print_table(curves: dict[str, list[float]]) -> None:
    """The curves side by side, at the first step, every TABLE_EVERY-th and the last."""
    print("\nstep  " + "  ".join(f"{name:>16}" for name in curves))
    rows = list(zip(*curves.values(), strict=True))
    for step, row in enumerate(rows, start=1):
        if step == 1 or step % TABLE_EVERY == 0 or step == len(rows):
            print(f"{step:4d}  " + "  ".join(f"{loss:16.6f}" for loss in row))


def check_curves(curves: dict[str, list[float]]) -> tuple[bool, str]:
    """Every curve against the single process's, at every step."""
    reference = curves["single process"]
    worst = max(
        abs(loss - expected)
        for curve in curves.values()
        for loss, expected in zip(curve, reference, strict=True)
    )
    ranks = " and ".join(name for name in curves if name != "single process")
    agree = worst <= TOLERANCE
    verdict = "agree" if agree else "DISAGREE"
    return agree, (
        f"training on {ranks}: the loss curves {verdict} with one process at every step "
        f"(largest difference {worst:.2e}; within {TOLERANCE:g} required)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument(
        "--verbose", action="store_true", help="let the frameworks log at their default levels"
    )
    args = parser.parse_args()
    checks = [check_styles(framework, args.verbose) for framework in FRAMEWORKS]
    with tempfile.TemporaryDirectory() as workdir:
        curves = run_training(args.steps, workdir, args.verbose)
    print_table(curves)
    checks.append(check_curves(curves))
    print()
    for _, summary in checks:
        print(summary)
    return 0 if all(passed for passed, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
