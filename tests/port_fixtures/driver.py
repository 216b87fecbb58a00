"""Runs one job's fixtures on every rank and prints ``RESULT <label> <json>`` lines (not ported).

    python port_fixtures/driver.py (torch|torchvision) FIXTURE...

Started with torchrun's environment (``RANK``, ``WORLD_SIZE``, ...). ``torch``: this module,
which is never ported, joins the job with torch's own ``init_process_group`` and leaves it at the
end: the fixtures' ported calls must work on a process group they did not create.
``torchvision``: the ported ``torchvision_utils.init_distributed_mode`` joins and
``torchvision_utils.cleanup`` leaves, so the job can run on MindSpore too
(``PORT_FIXTURES_FRAMEWORK=mindspore``).

A step that raises prints its error as its result. The ranks then compare notes through files in
``PORT_FIXTURES_SYNC``: if every rank failed the same step the job goes on; if only some did (the
others may be waiting in a collective), or a rank does not report in time, the job stops.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parent
SYNC_SECONDS = 30.0


@dataclass(frozen=True)
class Ranks:
    """This rank, the world size, and the directory where the ranks compare notes."""

    rank: int
    world_size: int
    sync: Path

    def agree(self, label: str, failed: bool) -> None:
        """Wait until every rank has finished step ``label``; stop the job unless all agree."""
        draft = self.sync / f"{label}.{self.rank}.draft"
        draft.write_text("failed" if failed else "ok")
        draft.rename(self.sync / f"{label}.{self.rank}")  # atomic: never read half-written
        paths = [self.sync / f"{label}.{rank}" for rank in range(self.world_size)]
        deadline = time.monotonic() + SYNC_SECONDS
        while not all(path.exists() for path in paths):
            if time.monotonic() > deadline:
                print(f"STOP after {label}: a rank did not finish it in {SYNC_SECONDS} s")
                sys.stdout.flush()
                os._exit(3)
            time.sleep(0.01)
        if len({path.read_text() for path in paths}) > 1:
            print(f"STOP after {label}: it failed on some ranks only")
            sys.stdout.flush()
            os._exit(3)


def fixture(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE.name}.{name}")


def call(name: str, entry: str) -> Any:
    return getattr(fixture(name), entry)()


def step(ranks: Ranks, label: str, function: Callable[[], Any]) -> None:
    """Run one step, print its result (or error) as ``RESULT <label> <json>``, and agree."""
    try:
        result = fixture("tensors").describe(function())
    except Exception as exc:
        where = traceback.format_exc()
        print(where, file=sys.stderr, flush=True)
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": where[-1500:]}
    # One write (stdout is unbuffered under the launcher), so that MindSpore's logs, written to
    # the same pipe, cannot land inside the line.
    sys.stdout.write(f"RESULT {label} {json.dumps(result, sort_keys=True)}\n")
    sys.stdout.flush()
    ranks.agree(label, isinstance(result, dict) and "error" in result)


def torchvision_init() -> dict[str, Any]:
    """torchvision's way into the job, with what its helpers answer before and after."""
    utils = fixture("torchvision_utils")
    args = argparse.Namespace(dist_url="env://", dist_backend="gloo")
    before = [utils.is_dist_avail_and_initialized(), utils.get_world_size(), utils.get_rank()]
    utils.init_distributed_mode(args)
    after = [utils.is_dist_avail_and_initialized(), utils.get_world_size(), utils.get_rank()]
    return {"before": before, "after": after, "args": vars(args)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("init", choices=["torch", "torchvision"])
    parser.add_argument("fixtures", nargs="+")
    options = parser.parse_args()
    framework = os.environ.get("PORT_FIXTURES_FRAMEWORK", "torch")
    if framework != "torch":
        # torchrun's environment says torch: the ported compat.init is to run this framework.
        os.environ["COMPAT_FRAMEWORK"] = framework
    sys.path.insert(0, str(PACKAGE.parent))
    ranks = Ranks(
        int(os.environ["RANK"]),
        int(os.environ["WORLD_SIZE"]),
        Path(os.environ["PORT_FIXTURES_SYNC"]),
    )
    if options.init == "torch":
        import torch.distributed as dist

        dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    else:
        step(ranks, "torchvision_utils.init_distributed_mode", torchvision_init)
    for name in options.fixtures:
        step(ranks, name, partial(call, name, "run"))
    if options.init == "torch":
        dist.barrier()
        dist.destroy_process_group()
        # The fixtures still hold torch groups of their own (funcol's ranks+tag groups, new_group
        # results kept in modules); torch destroys those during interpreter teardown, where Gloo
        # can abort the process ("terminate called without an active exception", seen once in
        # about 20 runs of the unported fixtures, all results printed). Every result is out and
        # every rank has left the job, so the driver ends here instead of in that teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    else:
        step(ranks, "torchvision_utils.cleanup", partial(call, "torchvision_utils", "cleanup"))


if __name__ == "__main__":
    main()
