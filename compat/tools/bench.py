"""``compat bench``: time compat's collectives against the framework's own, like nccl-tests.

The CLI starts N ranks of this module through :func:`compat.tools.launch.launch`; each rank runs
:func:`main`. Per op and size, compat's call and the native one alternate call by call for several
rounds (each goes first equally often; each round starts after a barrier), each call timed on
its own; the time of a size is the median of rank 0's calls. Rank 0 prints a row as each size
completes and, with ``--csv``, writes the table.

Bandwidths follow nccl-tests (``doc/PERFORMANCE.md``): ``algbw = size / time`` where size is the
whole buffer (reduce_scatter: the input, all_gather: the output, all_reduce: the tensor), and
``busbw = algbw * factor``: ``2(n-1)/n`` for all_reduce, ``(n-1)/n`` for reduce_scatter and
all_gather.

"native" is the framework's own call. Where the backend has none (MindSpore on MCCL:
reduce_scatter and all_gather_into_tensor), it is the best-known plain approach, and the header
says which.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from compat import tables
from compat.adapter import Adapter
from compat.tools._sizes import format_size

OPS = ("reduce_scatter_tensor", "reduce_scatter", "all_reduce", "all_gather_into_tensor")

#: busbw = algbw * factor(n), as nccl-tests computes it.
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "reduce_scatter_tensor": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather_into_tensor": lambda n: (n - 1) / n,
    "all_reduce": lambda n: 2 * (n - 1) / n,
}


def collective_of(op: str, joins: bool) -> str:
    """The capability-table entry whose algorithm choice the op's row reports: the list form on
    parts of one buffer (``x.chunk(n)``) runs as the tensor form where the adapter ``joins``
    them without a copy (torch; MindSpore on CPU)."""
    if op == "reduce_scatter" and joins:
        return "reduce_scatter_tensor"
    return op


def adapter_joins(adapter: Adapter, dtype: str) -> bool:
    """Whether the adapter joins the equal parts of one buffer into one tensor (asked, not
    assumed: it depends on the device), on a buffer such as the timed calls use."""
    sample = adapter.bench_native("all_reduce", 2, dtype)[0]
    total = adapter.shape(sample)[0]
    return adapter.joined(adapter.split(sample, [total // 2, total - total // 2])) is not None


def default_sizes(framework: str) -> str:
    """The sizes bench sweeps on ``framework`` by default (``bench_sizes`` in frameworks.toml)."""
    sizes: str = tables.lookup("frameworks", framework, "bench_sizes")
    return sizes


COLUMNS = (
    "op",
    "bytes",
    "elements",
    "algorithm",
    "compat_us",
    "compat_algbw_GBps",
    "compat_busbw_GBps",
    "native_us",
    "native_algbw_GBps",
    "native_busbw_GBps",
    "compat_minus_native_us",
    "ratio",
    "control",
)

_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "M": 2**20, "MB": 2**20, "G": 2**30, "GB": 2**30}


def parse_size(text: str) -> int:
    """``"64M"`` -> 67108864 (K, M, G are powers of 1024; a plain number is bytes)."""
    spelled = text.strip().upper()
    digits = spelled.rstrip("KMGB")
    unit = spelled[len(digits) :]
    if not digits.isdigit() or unit not in _UNITS:
        raise ValueError(f"--sizes: expected a size such as 1K, 64M or 4096; got {text!r}")
    return int(digits) * _UNITS[unit]


def parse_sizes(text: str, factor: int) -> list[int]:
    """``"1K..64M"`` -> the sizes from 1K, times ``factor`` each, up to 64M; ``"4K"`` -> [4096]."""
    low, sep, high = text.partition("..")
    first = parse_size(low)
    last = parse_size(high) if sep else first
    if first < 1 or last < first:
        raise ValueError(f"--sizes: expected LOW..HIGH with 1 <= LOW <= HIGH; got {text!r}")
    sizes = [first]
    while sizes[-1] * factor <= last:
        sizes.append(sizes[-1] * factor)
    return sizes


def build_parser() -> argparse.ArgumentParser:
    """The rank-side options; ``compat bench`` adds -n and --framework (see compat.tools.cli)."""
    parser = argparse.ArgumentParser(prog="compat bench", add_help=False)
    parser.add_argument(
        "--op", choices=(*OPS, "all"), default="all", help="the op to time (default: all four)"
    )
    parser.add_argument(
        "--sizes",
        default=None,
        help="LOW..HIGH in bytes, K/M/G suffixes (default: "
        + ", ".join(f"{default_sizes(name)} on {name}" for name in tables.load("frameworks"))
        + "); size is the whole buffer, as in nccl-tests",
    )
    parser.add_argument(
        "--factor", type=int, choices=(2, 4), default=4, help="step between sizes (4)"
    )
    parser.add_argument("--rounds", type=int, default=10, help="rounds per size; median (10)")
    parser.add_argument("--budget", type=float, default=0.1, help="seconds per timed loop (0.1)")
    parser.add_argument("--dtype", default="float32", help="dtype of the tensors (float32)")
    parser.add_argument("--csv", default=None, help="also write the table to this CSV file")
    parser.add_argument(
        "--control",
        action="store_true",
        help="also time the native call against itself, the same way, per size: the ratio "
        "this machine's noise alone gives (column 'control')",
    )
    parser.add_argument(
        "--algorithm",
        default=None,
        help="run this compat.algorithms function (or 'native') for the op at every size "
        "instead of the capability table's choice: how the table's thresholds are measured",
    )
    return parser


# -- the calls timed ---------------------------------------------------------------------------


@dataclass
class Pair:
    """One op at one size: compat's call, the native call, and what the native one is."""

    compat: Callable[[], Any]
    native: Callable[[], Any]
    description: str = ""


def make_pair(adapter: Adapter, op: str, rows: int, dtype: str) -> Pair:
    """compat's call for ``op`` on the buffers of the adapter's native one
    (:meth:`~compat.adapter.Adapter.bench_native`), and that native call."""
    import compat

    x, out, native, description = adapter.bench_native(op, rows, dtype)
    if op == "reduce_scatter_tensor":
        return Pair(lambda: compat.reduce_scatter_tensor(x, out=out), native, description)
    if op == "reduce_scatter":
        parts = adapter.split(x, [rows] * (adapter.shape(x)[0] // rows))
        return Pair(lambda: compat.reduce_scatter(out, parts), native, description)
    if op == "all_reduce":
        return Pair(lambda: compat.all_reduce(x), native, description)
    return Pair(lambda: compat.all_gather_into_tensor(x, out=out), native, description)


# -- timing --------------------------------------------------------------------------------------


def _agree(value: float) -> float:
    """Rank 0's ``value`` on every rank (so every rank runs the same number of calls)."""
    import compat
    from compat import state

    adapter = state.current().adapter
    tensor = adapter.bytes_tensor(struct.pack("<d", value))
    compat.broadcast(tensor, 0)
    adapter.synchronize()
    agreed: float = struct.unpack("<d", adapter.to_bytes(tensor))[0]
    return agreed


def _loop(call: Callable[[], Any], iterations: int) -> float:
    """Seconds per call of ``iterations`` calls, started together on every rank."""
    import compat
    from compat import state

    compat.barrier()
    started = time.perf_counter()
    for _ in range(iterations):
        call()
    state.current().adapter.synchronize()
    return (time.perf_counter() - started) / iterations


def measure(pair: Pair, rounds: int, budget: float) -> tuple[float, float]:
    """(compat, native) seconds per call: the medians of calls timed one by one, compat and
    native alternating call by call (so a change in the machine's load hits both alike) and each
    going first equally often, over ``rounds`` rounds that each start after a barrier."""
    import compat
    from compat import state

    for call in (pair.compat, pair.native, pair.compat, pair.native):
        call()  # warm-up: connections, caches, scratch buffers
    estimate = _agree(max(_loop(pair.compat, 1), _loop(pair.native, 1)))
    iterations = max(1, min(200, int(budget / max(estimate, 1e-7))))
    times: dict[str, list[float]] = {"compat": [], "native": []}
    clock = time.perf_counter
    forward = [(times["compat"], pair.compat), (times["native"], pair.native)]
    backward = forward[::-1]
    # Each call is timed until the device has done it: on a GPU a call only queues the work.
    settle = state.current().adapter.synchronize
    for index in range(rounds):
        compat.barrier()
        for step in range(2 * iterations):  # ABBA...: each goes first equally often
            for sink, call in forward if (index + step) % 2 == 0 else backward:
                started = clock()
                call()
                settle()
                sink.append(clock() - started)
    return statistics.median(times["compat"]), statistics.median(times["native"])


def force(collective: str, dtype: str, algorithm: str) -> None:
    """Make compat run ``algorithm`` for ``collective`` on ``dtype`` at every size."""
    from compat import state

    state.current().force(collective, dtype, algorithm)


def own_work(op: str, pair: Pair, collective: str, dtype: str) -> float:
    """Seconds per call of compat's own work for ``op``: the call with what it runs (native or
    algorithm) replaced by a no-op, so only the checks, dispatch and choice remain."""
    from compat import state

    runtime = state.current()
    runtime.force(collective, dtype, ("no-op", lambda *args: None))
    try:
        for _ in range(100):
            pair.compat()
        rounds = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(2000):
                pair.compat()
            rounds.append((time.perf_counter() - started) / 2000)
    finally:
        runtime.force(collective, dtype, None)
    return statistics.median(rounds)


def row(
    op: str,
    size: int,
    elements: int,
    algorithm: str,
    compat_s: float,
    native_s: float,
    n: int,
    control: float | None = None,
) -> dict[str, Any]:
    factor = BUS_FACTOR[op](n)
    compat_algbw, native_algbw = size / compat_s / 1e9, size / native_s / 1e9
    return {
        "op": op,
        "bytes": size,
        "elements": elements,
        "algorithm": algorithm,
        "compat_us": round(compat_s * 1e6, 1),
        "compat_algbw_GBps": round(compat_algbw, 3),
        "compat_busbw_GBps": round(compat_algbw * factor, 3),
        "native_us": round(native_s * 1e6, 1),
        "native_algbw_GBps": round(native_algbw, 3),
        "native_busbw_GBps": round(native_algbw * factor, 3),
        "compat_minus_native_us": round((compat_s - native_s) * 1e6, 1),
        "ratio": round(compat_s / native_s, 3),
        "control": None if control is None else round(control, 3),
    }


HEADER = (
    f"{'size':>7} {'elements':>10} {'algorithm':<26} {'compat us':>11} {'algbw':>7} "
    f"{'busbw':>7} {'native us':>11} {'algbw':>7} {'busbw':>7} {'diff us':>9} {'ratio':>6}"
)
CONTROL_HEADER = f"{HEADER} {'control':>7}"


def format_row(values: dict[str, Any]) -> str:
    return (
        f"{format_size(values['bytes']):>7} {values['elements']:>10} {values['algorithm']:<26} "
        f"{values['compat_us']:>11.1f} {values['compat_algbw_GBps']:>7.3f} "
        f"{values['compat_busbw_GBps']:>7.3f} {values['native_us']:>11.1f} "
        f"{values['native_algbw_GBps']:>7.3f} {values['native_busbw_GBps']:>7.3f} "
        f"{values['compat_minus_native_us']:>9.1f} {values['ratio']:>6.3f}"
        + ("" if values["control"] is None else f" {values['control']:>7.3f}")
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import compat
    from compat import state

    compat.init()
    framework, backend = compat.get_framework(), compat.get_backend()
    n, rank = compat.get_world_size(), compat.get_rank()
    sizes = parse_sizes(args.sizes or default_sizes(framework), args.factor)
    ops = OPS if args.op == "all" else (args.op,)
    runtime = state.current()
    adapter = runtime.adapter
    joins = adapter_joins(adapter, args.dtype)
    itemsize = int(tables_bytes(args.dtype))
    lead = rank == 0
    rows_written: list[dict[str, Any]] = []
    if lead:
        noise = "control = native/native timed the same way (the noise floor); "
        print(
            f"# compat bench: {framework}/{backend}, {n} rank(s), {args.dtype}, sizes "
            f"{format_size(sizes[0])}..{format_size(sizes[-1])}; per size the median of "
            f"rank 0's calls over {args.rounds} rounds, compat and native alternating call by "
            f"call; {noise if args.control else ''}GB/s as nccl-tests (busbw = algbw * "
            "2(n-1)/n for all_reduce, (n-1)/n otherwise); ratio = compat/native",
            flush=True,
        )
    for op in ops:
        if args.algorithm is not None:
            force(collective_of(op, joins), args.dtype, args.algorithm)
        for index, size in enumerate(sizes):
            # size is the whole buffer (nccl-tests): the input of reduce_scatter, the output of
            # all_gather; it is rounded down to a multiple of n elements (at least n).
            rows = max(1, size // itemsize // n)
            elements = rows * n
            pair = make_pair(adapter, op, rows, args.dtype)
            if lead and index == 0:
                print(f"# {op}: native = {pair.description}", flush=True)
                print(CONTROL_HEADER if args.control else HEADER, flush=True)
            compat_s, native_s = measure(pair, args.rounds, args.budget)
            control = None
            if args.control:
                first, second = measure(Pair(pair.native, pair.native), args.rounds, args.budget)
                control = first / second
            nbytes = elements * itemsize
            algorithm = runtime.algorithm(collective_of(op, joins), args.dtype, nbytes)
            values = row(op, nbytes, elements, algorithm, compat_s, native_s, n, control)
            values["native"] = pair.description
            rows_written.append(values)
            if lead:
                print(format_row(values), flush=True)
        own = own_work(op, pair, collective_of(op, joins), args.dtype)
        if lead:
            print(
                f"# {op}: compat's own work per call (checks, dispatch, choice; the collective "
                f"replaced by a no-op), {format_size(nbytes)}: {own * 1e6:.2f} us",
                flush=True,
            )
    if lead and args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as handle:
            fields = ["framework", "backend", "world_size", "dtype", *COLUMNS, "native"]
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            for values in rows_written:
                writer.writerow(
                    {
                        "framework": framework,
                        "backend": backend,
                        "world_size": n,
                        "dtype": args.dtype,
                        **values,
                    }
                )
        print(f"# wrote {args.csv}", flush=True)
    compat.destroy()
    return 0


def tables_bytes(dtype: str) -> int:
    size: int = tables.lookup("dtypes", "dtypes", dtype, "bytes")
    return size


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
