"""Rank side of tests/test_docs.py: run every family's MindSpore snippets in one job.

Usage, under ``compat launch --framework mindspore``: ``tests/docs_snippets.py RESULTS_DIR``.
Writes ``RESULTS_DIR/rank<r>.json``: {family: {"mindspore": outcome, "compat": outcome}}, an outcome
being "ok", "error: <message>", or "skipped: <reason>".
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

# Measured on MCCL: a rank outside a new group gets a deferred error ("Group hccl_1_... doesn't
# contain the global rank 0") raised by its next collective, so group creation runs last.
LAST = ("new_group",)


def _run(code: str, namespace: dict[str, Any], label: str) -> str:
    # Progress on stdout, so that a hung snippet is named in the job's output.
    print(f"snippet {label}", flush=True)
    # With a __name__ the snippet's functions get a __module__, as in a user's script:
    # mindspore.grad fails ("Unable to cast ... NoneType ... std::string") without one.
    names = {"__name__": "__snippet__", **namespace}
    try:
        exec(code, names)
    except Exception as exc:  # the outcome is data for the test, which checks it
        return f"error: {type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        _keep_mindspore_stores(names)
    return "ok"


def _keep_mindspore_stores(names: dict[str, Any]) -> None:
    """Dropping MindSpore's own TCPStore can kill the process (SIGSEGV in its destructor:
    api_store.toml, lifetime), at the snippet's end or at exit: the native snippet's store is
    kept for the process's life, as compat keeps its own."""
    store_class = getattr(sys.modules.get("mindspore.mint.distributed"), "TCPStore", None)
    for value in names.values():
        if store_class is not None and isinstance(value, store_class):
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(value))


def main(results_dir: str) -> None:
    import mindspore as ms
    import mindspore.communication.comm_func as comm_func
    import mindspore.mint.distributed as dist
    from mindspore import mint

    import compat
    from compat.base import tables
    from compat.core import dispatch

    try:
        dispatch.load_adapter("mindspore")
        compat.init("mindspore")
        no_compat = None
    except ModuleNotFoundError as exc:
        # No MindSpore adapter yet: the native snippets still run, on MindSpore's own init.
        no_compat = f"the MindSpore adapter is not there yet ({exc})"
        ms.set_device("CPU")
        from mindspore.communication import init

        init()
    native = {"ms": ms, "mint": mint, "dist": dist, "comm_func": comm_func}
    with_compat = {"compat": compat, "Tensor": ms.Tensor}
    rank = dist.get_rank()
    output = Path(results_dir, f"rank{rank}.json")
    results: dict[str, dict[str, str]] = {family["family"]: {} for family in tables.families()}
    # All native snippets first, then compat's: a failure in one kind cannot disturb the other's
    # order of collectives. The file is rewritten after each snippet, so a hang leaves a trace.
    for family in tables.families():
        snippet = family["snippet"]
        name = family["family"]
        if "mindspore_not_run" in snippet:
            results[name]["mindspore"] = f"skipped: {snippet['mindspore_not_run']}"
        else:
            results[name]["mindspore"] = _run(snippet["mindspore"], native, f"{name}.mindspore")
        output.write_text(json.dumps(results), encoding="utf-8")
    for family in sorted(tables.families(), key=lambda family: family["family"] in LAST):
        snippet = family["snippet"]
        name = family["family"]
        required = snippet.get("compat_requires")
        if no_compat is not None:
            results[name]["compat"] = f"skipped: {no_compat}"
        elif required and importlib.util.find_spec(required) is None:
            results[name]["compat"] = f"skipped: {required} is not there yet"
        else:
            results[name]["compat"] = _run(snippet["compat"], with_compat, f"{name}.compat")
        output.write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
