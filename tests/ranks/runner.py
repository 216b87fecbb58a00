"""Rank-side entry point: run the named cases in order and record each result.

    python -m tests.ranks.runner RESULTS_DIR MODULE CASE [CASE ...]

Writes RESULTS_DIR/rank<R>.jsonl: a "start" line before each case (so a hang is attributable)
and an "end" line with ok/error after it; and RESULTS_DIR/rank<R>.npz: every result the cases
checked, keyed "<case>#<index>", for the cross-framework parity test.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback

import numpy as np

import compat
from tests.ranks import cases as recorded
from tests.ranks.kit import make_kit


def main(argv: list[str]) -> int:
    results_dir, module_name, *names = argv
    cases = importlib.import_module(module_name).CASES
    # The hardware suite names the backend (make test-gpu / test-npu); else the default.
    compat.init(backend=os.environ.get("COMPAT_TEST_BACKEND") or None)
    kit = make_kit(compat.get_framework())
    rank = compat.get_rank()
    path = os.path.join(results_dir, f"rank{rank}.jsonl")
    arrays: dict[str, np.ndarray] = {}
    with open(path, "w", encoding="utf-8") as log:
        for name in names:
            log.write(json.dumps({"case": name, "event": "start"}) + "\n")
            log.flush()
            started = time.perf_counter()
            try:
                cases[name].run(kit)
                error = None
            except BaseException:
                error = traceback.format_exc()
            seconds = round(time.perf_counter() - started, 3)
            for index, array in enumerate(recorded.RECORDS):
                arrays[f"{name}#{index}"] = array
            recorded.RECORDS.clear()
            record = {"case": name, "event": "end", "error": error, "seconds": seconds}
            log.write(json.dumps(record) + "\n")
            log.flush()
    np.savez(os.path.join(results_dir, f"rank{rank}.npz"), **arrays)
    compat.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
