"""``compat bench``: time compat's collectives against the framework's own, like nccl-tests.

The CLI starts N ranks of this module through :func:`compat.tools.launch.launch`; each rank runs
:func:`main`. Per op and size, compat's call and the native one alternate call by call for several
rounds (each goes first equally often; each round starts after a barrier), each call timed on
its own, on the same buffers. A rank's time for a size is the median of its calls; the time
printed is the slowest rank's (a rooted op's root can return before the others have their
data). Rank 0 prints a row as each size completes and, with ``--csv``, writes the table. Once
every op's rows are done, compat's own work per call is timed for every op at once, the ops
taking turns (:func:`own_work`).

Ops (``--op``, one name, a comma-separated list, or ``all``): every collective of compat's API,
isend/irecv pairs, blocking send/recv pairs, barrier and monitored_barrier (:data:`OPS`). What a
size is (``--sizes``, in bytes of ``--dtype`` data, rounded down to a multiple of n elements, at
least n):

- the whole buffer, as in nccl-tests: all_reduce, broadcast and reduce: the tensor;
  all_reduce_coalesced: its n tensors together; reduce_scatter and reduce_scatter_tensor: the
  input (n parts); all_gather and all_gather_into_tensor: the output (n parts);
  all_to_all_single and all_to_all: each rank's input (n parts); scatter: the root's list,
  scatter_tensor: the root's tensor, gather: the root's list (n parts each; root 0);
- isend_irecv and batch_isend_irecv: the message each rank sends to the next rank while
  receiving one from the previous (nccl-tests' sendrecv), as two calls or one batch;
  send_recv: the same ring with blocking calls (even ranks send first, odd ranks receive
  first, so no cycle of blocking calls forms);
- object collectives: the bytes they carry, as their tensor counterpart's size (each object a
  ``bytes`` of that many bytes): all_gather_object and gather_object n objects of size/n,
  scatter_object_list n objects of size/n, broadcast_object_list one object of size;
- barrier and monitored_barrier: no data: one row, size 0, no bandwidth.

Bandwidths follow nccl-tests (``doc/PERFORMANCE.md``): ``algbw = size / time`` and
``busbw = algbw * factor``: ``2(n-1)/n`` for all_reduce (and all_reduce_coalesced);
``(n-1)/n`` for reduce_scatter, all_gather, all_to_all, scatter (and scatter_tensor) and
gather; 1 for broadcast, reduce and sendrecv (isend_irecv, batch_isend_irecv, send_recv).
nccl-tests has no object collectives: they take their tensor counterpart's factor.

On MindSpore a line under the header says how it launches ops (:meth:`Adapter.execution_note`):
asynchronously, its default, whose pipeline threads spin while an MCCL message travels, or
synchronously (``mindspore.runtime.launch_blocking()``), much faster for small calls on few
cores (docs/performance.md); compat's and the native call share the launch.

"native" is the framework's own call. Where the backend has none (MindSpore on MCCL:
reduce_scatter, all_gather_into_tensor, reduce, all_to_all, batch_isend_irecv; torch:
scatter_tensor; MindSpore: all_reduce_coalesced, monitored_barrier, and scatter_tensor,
deprecated there), it is the best-known plain approach, and the header says which.

Run time: a size costs about ``rounds * 4 * max(budget, time per call)`` (twice that with
``--control``). For one op the default is 10 rounds of 0.1 s; for several ops (``--op all``, the
default) 5 rounds of 0.02 s, which keeps every op within a few minutes per framework, plus
``--own-work-spread`` seconds per op whose own work is timed (6 by default). A full sweep of
every op, as docs/performance.md's tables: ``compat bench --rounds 10 --budget 0.1 --control``
(at least 8 s per op and size: 20 minutes or more per framework); or one op at a time with its
defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import inspect
import os
import statistics
import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import compat
from compat import algorithms
from compat.base import tables
from compat.base.adapter import Adapter
from compat.collectives import BARRIER_DTYPE
from compat.core import capabilities, recorder, state
from compat.tools import bench_cases, launch_styles
from compat.tools._sizes import format_size
from compat.transport import shared_memory

# -- the ops -----------------------------------------------------------------------------------


# nccl-tests' busbw factors, one definition with the comms log's (compat.core.recorder).
_all_reduce_factor, _parts_factor, _whole_factor = (
    recorder.all_reduce_factor,
    recorder.parts_factor,
    recorder.whole_factor,
)


@dataclass(frozen=True)
class OpSpec:
    """How bench treats one op.

    ``bus_factor``: busbw = algbw * bus_factor(n) (None: no data, no bandwidth).
    ``collectives``: the capability-table entries whose choice the ``algorithm`` column shows,
    for ``dtype`` (None: ``--dtype``; the object collectives carry uint8 bytes).
    ``noop``: the collectives replaced by no-ops to time compat's own work (empty: not
    measurable that way; the object collectives need what their first collective returns).
    ``peers``: the op needs a rank other than this one.
    ``gathered``: the row's size is n times what each rank gives (gathers) or gets (scatters),
    which is what the capability table chooses by.
    ``unmeasured``: why compat's own work is not timed, where ``noop`` is empty.
    """

    bus_factor: Callable[[int], float] | None
    collectives: tuple[str, ...]
    noop: tuple[str, ...]
    dtype: str | None = None
    peers: bool = False
    gathered: bool = False
    unmeasured: str = (
        "pickling and several collectives; compare compat us with native us at world size 1"
    )


SPECS: dict[str, OpSpec] = {
    "reduce_scatter_tensor": OpSpec(
        _parts_factor, ("reduce_scatter_tensor",), ("reduce_scatter_tensor",)
    ),
    "reduce_scatter": OpSpec(_parts_factor, ("reduce_scatter",), ("reduce_scatter",)),
    "all_reduce": OpSpec(_all_reduce_factor, ("all_reduce",), ("all_reduce",)),
    "all_gather_into_tensor": OpSpec(
        _parts_factor,
        ("all_gather_into_tensor",),
        ("all_gather_into_tensor",),
        gathered=True,
    ),
    "all_gather": OpSpec(_parts_factor, ("all_gather",), ("all_gather",), gathered=True),
    "broadcast": OpSpec(_whole_factor, ("broadcast",), ("broadcast",)),
    "reduce": OpSpec(_whole_factor, ("reduce",), ("reduce",)),
    "scatter": OpSpec(_parts_factor, ("scatter",), ("scatter",), gathered=True),
    "scatter_tensor": OpSpec(_parts_factor, ("scatter",), ("scatter",), gathered=True),
    "gather": OpSpec(_parts_factor, ("gather",), ("gather",), gathered=True),
    "all_to_all_single": OpSpec(_parts_factor, ("all_to_all_single",), ("all_to_all_single",)),
    "all_to_all": OpSpec(_parts_factor, ("all_to_all",), ("all_to_all",)),
    "all_reduce_coalesced": OpSpec(_all_reduce_factor, ("all_reduce",), ("all_reduce",)),
    "isend_irecv": OpSpec(_whole_factor, ("isend", "irecv"), ("isend", "irecv"), peers=True),
    "batch_isend_irecv": OpSpec(
        _whole_factor,
        ("batch_isend_irecv",),
        (),
        peers=True,
        unmeasured="its choice returns a Work per op, which a no-op in its place does not; "
        "isend_irecv's own work is that of the same ops issued one by one",
    ),
    "send_recv": OpSpec(_whole_factor, ("send", "recv"), ("send", "recv"), peers=True),
    # The barriers carry no tensor: their capability entries are looked up with compat's
    # stand-in.
    "barrier": OpSpec(None, ("barrier",), ("barrier",), BARRIER_DTYPE),
    "monitored_barrier": OpSpec(
        None, ("monitored_barrier",), ("monitored_barrier",), BARRIER_DTYPE
    ),
    "all_gather_object": OpSpec(
        _parts_factor, ("all_gather_into_tensor",), (), "uint8", gathered=True
    ),
    "broadcast_object_list": OpSpec(_whole_factor, ("broadcast",), (), "uint8"),
    "gather_object": OpSpec(_parts_factor, ("gather",), (), "uint8", gathered=True),
    "scatter_object_list": OpSpec(_parts_factor, ("scatter",), (), "uint8", gathered=True),
}

OPS = tuple(SPECS)

#: busbw = algbw * factor(n), as nccl-tests computes it (ops that move data).
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    op: spec.bus_factor for op, spec in SPECS.items() if spec.bus_factor is not None
}


def collective_of(op: str, joins: bool) -> str:
    """The capability-table entry whose algorithm choice the op's row reports: the list form on
    parts of one buffer (``x.chunk(n)``) runs as the tensor form where the adapter ``joins``
    them without a copy (torch; MindSpore on CPU)."""
    if op == "reduce_scatter" and joins:
        return "reduce_scatter_tensor"
    return op


def forced_entries(op: str, joins: bool) -> list[str]:
    """The capability-table entries ``--algorithm`` forces for ``op``: those whose choice its
    rows report (scatter_tensor and scatter_object_list run scatter's, all_reduce_coalesced
    all_reduce's, isend_irecv both isend's and irecv's)."""
    return list(dict.fromkeys(collective_of(name, joins) for name in SPECS[op].collectives))


def check_algorithm(
    op: str, name: str, joins: bool | None = None, ranks: int | None = None
) -> None:
    """Raise ValueError unless ``name`` can run every entry ``--algorithm`` forces for ``op``
    (:func:`forced_entries`) on ``ranks`` ranks (None: on some number of them). ``joins``
    None, before any rank has its adapter: for one of :func:`adapter_joins`'s answers at least
    (the ranks check again with theirs)."""
    problems: list[str] = []
    for answer in (False, True) if joins is None else (joins,):
        found = [
            f"{entry}: {problem}"
            for entry in forced_entries(op, answer)
            if (problem := capabilities.problem(entry, name, ranks)) is not None
        ]
        if not found:
            return
        problems += found
    raise ValueError(
        f"--algorithm: expected 'native' or a compat.algorithms function that runs --op {op}'s "
        f"collective; got {name!r} ({'; '.join(dict.fromkeys(problems))})"
    )


def adapter_joins(adapter: Adapter, dtype: str) -> bool:
    """Whether the adapter joins the equal parts of one buffer into one tensor (asked, not
    assumed: it depends on the device), on a buffer such as the timed calls use."""
    sample = bench_cases.native_case(adapter, "all_reduce", 2, dtype).input
    total = adapter.shape(sample)[0]
    return adapter.joined(adapter.split(sample, [total // 2, total - total // 2])) is not None


def default_sizes(framework: str) -> str:
    """The sizes bench sweeps on ``framework`` by default (``bench_sizes`` in frameworks.toml)."""
    sizes: str = tables.lookup("frameworks", framework, "bench_sizes")
    return sizes


def common_sizes(frameworks: Sequence[str]) -> str:
    """The default sizes every one of ``frameworks`` sweeps (``--framework both``): from the
    largest of their first sizes to the smallest of their last."""
    ranges = [default_sizes(name).partition("..") for name in frameworks]
    low = max(parse_size(first) for first, _, _ in ranges)
    high = min(parse_size(last or first) for first, _, last in ranges)
    return f"{format_size(low)}..{format_size(max(low, high))}"


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
    "own_work_us",
    "own_work_median_round_us",
    "own_work_after_collective_us",
)

#: The columns the own-work phase fills in, once every op's rows are done.
OWN_WORK_COLUMNS = COLUMNS[-3:]

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


def parse_ops(text: str) -> tuple[str, ...]:
    """``--op``: ``"all"``, one op, or a comma-separated list of ops, in the order given."""
    if text == "all":
        return OPS
    names = tuple(name.strip() for name in text.split(","))
    unknown = [name for name in names if name not in SPECS]
    if unknown or not names:
        raise ValueError(
            f"--op: expected 'all' or op names separated by commas, from {', '.join(OPS)}; "
            f"got {text!r}"
        )
    return names


def _op_list(text: str) -> str:
    """argparse's check of --op (the value stays the text: it is forwarded to the ranks)."""
    try:
        parse_ops(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


#: compat's own work back to back: the fastest of this many rounds of this many calls, the ops
#: taking turns over about this many seconds each, so that a slow spell of a shared machine (they
#: last seconds) falls on every op alike and not on one op's rounds (docs/performance.md, "How to
#: measure").
OWN_WORK_ROUNDS, OWN_WORK_CALLS, OWN_WORK_SPREAD_S = 60, 500, 6.0
#: Untimed calls after each pause: a round right after one would start with cold caches, which
#: the back-to-back figure is not.
OWN_WORK_WARM_CALLS = 50
#: compat's own work is timed on tensors of at most this size: the phase holds every op's at
#: once (a sweep of 64 MB and up would hold gigabytes), and only the choice by size depends on
#: it.
OWN_WORK_MOST_BYTES = 2**20


@dataclass(frozen=True)
class Settings:
    """The rank-side options, defaults resolved."""

    ops: tuple[str, ...]
    rounds: int
    budget: float
    own_work_spread: float = OWN_WORK_SPREAD_S


def settings(args: argparse.Namespace, ranks: int | None = None) -> Settings:
    """``args`` checked for a run on ``ranks`` ranks (None: not yet known), with the defaults
    that depend on how many ops run: 10 rounds of 0.1 s for one op, 5 of 0.02 s for several
    (every op within a few minutes per framework).

    Raises
    ------
    ValueError
        An option out of range, or ``--algorithm`` with more than one op or one that cannot
        run the op's collective (:func:`check_algorithm`).
    """
    ops = parse_ops(args.op)
    single = len(ops) == 1
    rounds = args.rounds if args.rounds is not None else (10 if single else 5)
    budget = args.budget if args.budget is not None else (0.1 if single else 0.02)
    if rounds < 1:
        raise ValueError(f"--rounds: expected an int >= 1; got {rounds}")
    if not 0 < budget < float("inf"):
        raise ValueError(f"--budget: expected seconds > 0; got {budget}")
    if not 0 <= args.own_work_spread < float("inf"):
        raise ValueError(f"--own-work-spread: expected seconds >= 0; got {args.own_work_spread}")
    if args.algorithm is not None:
        if not single:
            raise ValueError(
                f"--algorithm: expected one --op (an algorithm runs one collective); got "
                f"{args.op!r}"
            )
        check_algorithm(ops[0], args.algorithm, ranks=ranks)
    return Settings(ops, rounds, budget, args.own_work_spread)


#: The rank-side options: (flag, argparse's keywords); ``{sizes}`` in a help is each framework's
#: default sizes.
OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--op",
        {
            "type": _op_list,
            "default": "all",
            "help": "'all' (default), an op or a comma-separated list of ops: " + ", ".join(OPS),
        },
    ),
    (
        "--sizes",
        {
            "default": None,
            "help": "LOW..HIGH in bytes, K/M/G suffixes (default: {sizes}). A size is the whole "
            "buffer, as in nccl-tests: all_reduce's, broadcast's and reduce's tensor, "
            "reduce_scatter's input, all_gather's output, scatter's and gather's root list, "
            "all_to_all's input per rank; isend_irecv: the message; the object collectives: "
            "their bytes in all",
        },
    ),
    ("--factor", {"type": int, "choices": (2, 4), "default": 4, "help": "step between sizes (4)"}),
    (
        "--rounds",
        {"type": int, "default": None, "help": "rounds per size (10 for one op, 5 for several)"},
    ),
    (
        "--budget",
        {
            "type": float,
            "default": None,
            "help": "seconds per timed loop (0.1 for one op, 0.02 for several)",
        },
    ),
    (
        "--own-work-spread",
        {
            "type": float,
            "default": OWN_WORK_SPREAD_S,
            "help": f"seconds per op of the phase timing compat's own work, over which every "
            f"op's {OWN_WORK_ROUNDS} rounds are spread, the ops taking turns "
            f"({OWN_WORK_SPREAD_S:g}; this machine slows for seconds at a time)",
        },
    ),
    (
        "--launch",
        {
            "choices": launch_styles.STYLES,
            "default": "compat",
            "help": "how the ranks are started: compat launch (default; OMP_NUM_THREADS=1), "
            "torchrun (the same), spawn (torch.multiprocessing.spawn with init_method) or env "
            "(RANK, WORLD_SIZE, MASTER_ADDR as Slurm scripts set them); spawn and env keep this "
            "process's thread settings, as users of those launchers run. The header says which, "
            "and the threads each rank ran with",
        },
    ),
    ("--dtype", {"default": "float32", "help": "dtype of the tensors (float32)"}),
    ("--csv", {"default": None, "help": "also write the table to this CSV file"}),
    (
        "--control",
        {
            "action": "store_true",
            "help": "also time the native call against itself, the same way, per size: the "
            "ratio this machine's noise alone gives (column 'control')",
        },
    ),
    (
        "--algorithm",
        {
            "default": None,
            "help": "run this compat.algorithms function (or 'native') for the op at every size "
            "instead of the capability table's choice: how the table's thresholds are measured "
            "(one --op only; for the table entry the op runs: scatter's for scatter_tensor and "
            "scatter_object_list, all_reduce's for all_reduce_coalesced; checked before any "
            "rank starts)",
        },
    ),
)


def build_parser() -> argparse.ArgumentParser:
    """The rank-side options (:data:`OPTIONS`); ``compat bench`` adds -n and --framework (see
    compat.tools.cli)."""
    parser = argparse.ArgumentParser(prog="compat bench", add_help=False)
    sizes = ", ".join(f"{default_sizes(name)} on {name}" for name in tables.load("frameworks"))
    for flag, options in OPTIONS:
        parser.add_argument(flag, **(options | {"help": options["help"].replace("{sizes}", sizes)}))
    return parser


# -- the calls timed ---------------------------------------------------------------------------


@dataclass
class Case:
    """One op at one size: the buffers (made by :func:`compat.tools.bench_cases.native_case`),
    the native call on them, and the ranks."""

    op: str
    input: Any
    output: Any
    native: Callable[[], object]
    description: str
    rank: int
    world: int
    parts: list[Any] = field(default_factory=list)


#: compat's call for each op on the case's buffers (roots: rank 0).
COMPAT_CALLS: dict[str, Callable[[Case], Callable[[], object]]] = {
    # Keyword arguments through a lambda: a partial that holds them costs more a call, which
    # compat's own work would include.
    "reduce_scatter_tensor": lambda c: lambda: compat.reduce_scatter_tensor(c.input, out=c.output),
    "reduce_scatter": lambda c: partial(compat.reduce_scatter, c.output, c.parts),
    "all_reduce": lambda c: partial(compat.all_reduce, c.input),
    "all_gather_into_tensor": lambda c: (
        lambda: compat.all_gather_into_tensor(c.input, out=c.output)
    ),
    "all_gather": lambda c: partial(compat.all_gather, c.output, c.input),
    "broadcast": lambda c: partial(compat.broadcast, c.input, 0),
    "reduce": lambda c: partial(compat.reduce, c.input, 0),
    "scatter": lambda c: partial(compat.scatter, c.output, c.input, 0),
    "scatter_tensor": lambda c: lambda: compat.scatter_tensor(c.input, 0, out=c.output),
    "gather": lambda c: partial(compat.gather, c.input, c.output, 0),
    "all_to_all_single": lambda c: partial(compat.all_to_all_single, c.output, c.input),
    "all_to_all": lambda c: partial(compat.all_to_all, c.output, c.input),
    "all_reduce_coalesced": lambda c: partial(compat.all_reduce_coalesced, c.input),
    "isend_irecv": lambda c: bench_cases.ring_pairs(compat, c.input, c.output, c.rank, c.world),
    "batch_isend_irecv": lambda c: bench_cases.ring_batch(
        compat, (compat.isend, compat.irecv), c.input, c.output, c.rank, c.world
    ),
    "send_recv": lambda c: bench_cases.ring_send_recv(compat, c.input, c.output, c.rank, c.world),
    "barrier": lambda c: compat.barrier,
    "monitored_barrier": lambda c: compat.monitored_barrier,
    "all_gather_object": lambda c: partial(compat.all_gather_object, c.output, c.input),
    "broadcast_object_list": lambda c: partial(compat.broadcast_object_list, c.output, 0),
    "gather_object": lambda c: partial(compat.gather_object, c.input, c.output, 0),
    "scatter_object_list": lambda c: partial(compat.scatter_object_list, c.output, c.input, 0),
}


@dataclass
class Pair:
    """One op at one size: compat's call, the native call, and what the native one is."""

    compat: Callable[[], Any]
    native: Callable[[], Any]
    description: str = ""


def make_case(adapter: Adapter, op: str, rows: int, dtype: str) -> Case:
    """The buffers and native call of ``op`` with ``rows`` elements per rank."""
    native = bench_cases.native_case(adapter, op, rows, dtype)
    rank, world = compat.get_rank(), compat.get_world_size()
    case = Case(op, native.input, native.output, native.call, native.description, rank, world)
    if op == "reduce_scatter":  # the list form on the parts of one buffer (x.chunk(n))
        case.parts = adapter.split(native.input, [rows] * world)
    return case


def make_pair(adapter: Adapter, op: str, rows: int, dtype: str) -> Pair:
    """compat's call for ``op`` on the buffers of the adapter's native one, and that native
    call."""
    case = make_case(adapter, op, rows, dtype)
    return Pair(COMPAT_CALLS[op](case), case.native, case.description)


# -- timing --------------------------------------------------------------------------------------


def _agree(value: float) -> float:
    """Rank 0's ``value`` on every rank (so every rank runs the same number of calls)."""
    adapter = state.current().adapter
    tensor = adapter.bytes_tensor(struct.pack("<d", value))
    compat.broadcast(tensor, 0)
    adapter.synchronize()
    agreed: float = struct.unpack("<d", adapter.to_bytes(tensor))[0]
    return agreed


def _slowest(values: Sequence[float]) -> list[float]:
    """Each of ``values`` (the same count on every rank), its largest over the ranks."""
    adapter = state.current().adapter
    mine = adapter.bytes_tensor(struct.pack(f"<{len(values)}d", *values))
    gathered = adapter.to_bytes(compat.all_gather_into_tensor(mine))
    per_rank = [
        struct.unpack_from(f"<{len(values)}d", gathered, offset)
        for offset in range(0, len(gathered), 8 * len(values))
    ]
    return [max(column) for column in zip(*per_rank, strict=True)]


def _loop(call: Callable[[], Any], iterations: int) -> float:
    """Seconds per call of ``iterations`` calls, started together on every rank."""
    compat.barrier()
    started = time.perf_counter()
    for _ in range(iterations):
        call()
    state.current().adapter.synchronize()
    return (time.perf_counter() - started) / iterations


def measure(pair: Pair, rounds: int, budget: float) -> tuple[float, float]:
    """(compat, native) seconds per call on this rank: the medians of calls timed one by one,
    compat and native alternating call by call (so a change in the machine's load hits both
    alike) and each going first equally often, over ``rounds`` rounds that each start after a
    barrier."""
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


class _Completed:
    """The handle of a collective replaced by a no-op: already complete."""

    def wait(self, timeout: object = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


#: One handle for every no-op call: making one per call would count its making as compat's.
_COMPLETED = _Completed()


def _no_op(*args: object) -> _Completed:
    return _COMPLETED


@dataclass(frozen=True)
class OwnWorkCase:
    """One op whose own work :func:`own_work` times: its pair of calls, the collectives it
    replaces by no-ops, and their dtype."""

    pair: Pair
    collectives: tuple[str, ...]
    dtype: str


@dataclass(frozen=True)
class OwnWork:
    """Seconds per call of one op's own work (:func:`own_work`)."""

    fastest: float  # back to back: the fastest round (the figure)
    median: float  # back to back: the median round (how much the machine slowed the others)
    after: float  # right after a native call: the median call


def own_work(cases: Sequence[OwnWorkCase], spread: float = OWN_WORK_SPREAD_S) -> list[OwnWork]:
    """Seconds per call of compat's own work for each of ``cases``: the call with its
    collectives replaced by a no-op where compat reaches them (every choice of the capability
    table, at the table's sizes, so the call still chooses by size; and the adapter's method),
    so only the checks, dispatch and choice remain. Per case:

    - back to back: the fastest of OWN_WORK_ROUNDS rounds of OWN_WORK_CALLS calls (as timeit
      advises, the fastest: the others were slowed by the machine's other work), with warm
      caches (OWN_WORK_WARM_CALLS untimed calls before each round). The cases take turns, one
      round each, then a pause, so that the rounds of every case span the whole phase, about
      ``spread`` seconds per case (OWN_WORK_SPREAD_S says why); the median round is kept too;
    - after a collective: the median of 100 calls each timed right after a native call of the op
      (on every rank, so the ranks stay in step), as in a real sequence of calls, where the
      collective has just filled the caches with its own code and data. This is what a timed
      call adds on each rank.
    """
    runtime = state.current()
    rounds: list[list[float]] = [[] for _ in cases]
    pause = spread * len(cases) / OWN_WORK_ROUNDS
    for case in cases:
        with _no_ops(runtime, case):
            for _ in range(100):
                case.pair.compat()
    for _ in range(OWN_WORK_ROUNDS):
        time.sleep(pause)
        for case, timed in zip(cases, rounds, strict=True):
            with _no_ops(runtime, case):
                for _ in range(OWN_WORK_WARM_CALLS):
                    case.pair.compat()
                started = time.perf_counter()
                for _ in range(OWN_WORK_CALLS):
                    case.pair.compat()
                timed.append((time.perf_counter() - started) / OWN_WORK_CALLS)
    results = []
    for case, timed in zip(cases, rounds, strict=True):
        after = []
        with _no_ops(runtime, case):
            for _ in range(100):
                case.pair.native()
                started = time.perf_counter()
                case.pair.compat()
                after.append(time.perf_counter() - started)
        results.append(OwnWork(min(timed), statistics.median(timed), statistics.median(after)))
    return results


@contextlib.contextmanager
def _no_ops(runtime: state.State, case: OwnWorkCase) -> Iterator[None]:
    """``case``'s collectives replaced by :func:`_no_op` while the block runs."""
    adapter = runtime.adapter
    for name in case.collectives:
        runtime.stand_in(name, case.dtype, _no_op)
        setattr(adapter, name, _no_op)  # what compat calls directly (barrier)
    try:
        yield
    finally:
        for name in case.collectives:
            runtime.stand_in(name, case.dtype, None)
            delattr(adapter, name)


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
    """One table row; bandwidths are None where the op moves no data (barrier)."""
    factor = SPECS[op].bus_factor

    def bandwidth(seconds: float, scale: float) -> float | None:
        return None if factor is None else round(size / seconds / 1e9 * scale, 3)

    bus = 0.0 if factor is None else factor(n)
    values: dict[str, Any] = {"op": op, "bytes": size, "elements": elements}
    values["algorithm"] = algorithm
    for name, seconds in (("compat", compat_s), ("native", native_s)):
        values[f"{name}_us"] = round(seconds * 1e6, 1)
        values[f"{name}_algbw_GBps"] = bandwidth(seconds, 1.0)
        values[f"{name}_busbw_GBps"] = bandwidth(seconds, bus)
    values["compat_minus_native_us"] = round((compat_s - native_s) * 1e6, 1)
    # Significant digits, not decimals: a ratio far below 1 keeps its digits.
    values["ratio"] = float(f"{compat_s / native_s:.4g}")
    values["control"] = None if control is None else round(control, 3)
    return values | dict.fromkeys(OWN_WORK_COLUMNS)


#: The algorithm column: as wide as the longest name compat.algorithms has (rows are printed as
#: each size completes, before every algorithm a sweep will print is known).
ALGORITHM_WIDTH = max(
    len(name) for name, value in vars(algorithms).items() if inspect.isfunction(value)
)
HEADER = (
    f"{'size':>7} {'elements':>10} {'algorithm':<{ALGORITHM_WIDTH}} {'compat us':>11} {'algbw':>7} "
    f"{'busbw':>7} {'native us':>11} {'algbw':>7} {'busbw':>7} {'diff us':>9} {'ratio':>6}"
)
CONTROL_HEADER = f"{HEADER} {'control':>7}"


def _number(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.3f}"


def format_row(values: dict[str, Any]) -> str:
    return (
        f"{format_size(values['bytes']):>7} {values['elements']:>10} "
        f"{values['algorithm']:<{ALGORITHM_WIDTH}} "
        f"{values['compat_us']:>11.1f} {_number(values['compat_algbw_GBps'], 7)} "
        f"{_number(values['compat_busbw_GBps'], 7)} {values['native_us']:>11.1f} "
        f"{_number(values['native_algbw_GBps'], 7)} {_number(values['native_busbw_GBps'], 7)} "
        f"{values['compat_minus_native_us']:>9.1f} {values['ratio']:>6.3f}"
        + ("" if values["control"] is None else f" {values['control']:>7.3f}")
    )


def algorithm_of(
    runtime: state.State, op: str, joins: bool, dtype: str, nbytes: int, world: int
) -> str:
    """What runs the op: the capability table's choice for each of its collectives ("+" joins
    different ones: isend_irecv), for the tensor each rank passes (a gathered row's size over
    the number of ranks). A choice for one host counts where the world group has its
    shared-memory window (made by the first collective that could use it)."""
    spec = SPECS[op]
    given = nbytes // world if spec.gathered else nbytes
    one_host = shared_memory.made(runtime.adapter, None) is not None
    names = [
        runtime.algorithm(
            collective_of(name, joins),
            spec.dtype or dtype,
            given,
            one_host,
            world,
        )
        for name in spec.collectives
    ]
    return "+".join(dict.fromkeys(names))


def rows_per_rank(size: int, itemsize: int, n: int) -> int:
    """:func:`make_pair`'s ``rows`` (elements in each rank's part) for ``size`` bytes: at least
    one."""
    return max(1, size // itemsize // n)


def _sweep_sizes(op: str, sizes: list[int]) -> list[int]:
    """The barriers move no data: one row (size 0)."""
    return sizes if SPECS[op].bus_factor is not None else [0]


@dataclass(frozen=True)
class Run:
    """One rank's run: its options and what ``init`` gave."""

    args: argparse.Namespace
    chosen: Settings
    runtime: state.State
    sizes: list[int]
    n: int
    joins: bool  # adapter_joins' answer
    itemsize: int
    lead: bool  # rank 0, which prints


def main(argv: Sequence[str] | None = None, init: dict[str, Any] | None = None) -> int:
    """One rank's run; ``init``: compat.init's arguments (the spawn style gives them)."""
    args = build_parser().parse_args(argv)
    chosen = settings(args)
    compat.init(**(init or {}))
    framework, backend = compat.get_framework(), compat.get_backend()
    runtime = state.current()
    sizes = parse_sizes(args.sizes or default_sizes(framework), args.factor)
    joins = adapter_joins(runtime.adapter, args.dtype)
    n, lead = compat.get_world_size(), compat.get_rank() == 0
    run = Run(args, chosen, runtime, sizes, n, joins, int(tables_bytes(args.dtype)), lead)
    if lead:
        _print_header(run, framework, backend)
    rows_written: list[dict[str, Any]] = []
    timed_ops: list[tuple[str, list[dict[str, Any]]]] = []  # own work timed once every op ran
    for op in chosen.ops:
        op_rows = _sweep(run, op)
        if op_rows and SPECS[op].noop:
            timed_ops.append((op, op_rows))
        rows_written += op_rows
    if timed_ops:
        _time_own_work(
            timed_ops, runtime.adapter, joins, args.dtype, chosen.own_work_spread, n, lead
        )
    if lead and args.csv:
        write_csv(args.csv, rows_written, framework, backend, n, args.dtype)
        print(f"# wrote {args.csv}", flush=True)
    compat.destroy()
    return 0


def _print_header(run: Run, framework: str, backend: str) -> None:
    args, chosen, sizes = run.args, run.chosen, run.sizes
    noise = "control = native/native timed the same way (the noise floor); "
    print(
        f"# compat bench: {framework}/{backend}, {run.n} rank(s), {args.dtype}, sizes "
        f"{format_size(sizes[0])}..{format_size(sizes[-1])}; per size the slowest rank's "
        f"median over {chosen.rounds} rounds of {chosen.budget} s, compat and native "
        f"alternating call by call; {noise if args.control else ''}GB/s as nccl-tests "
        "(busbw = algbw * 2(n-1)/n for all_reduce, 1 for broadcast, reduce, sendrecv, "
        "(n-1)/n otherwise); ratio = compat/native",
        flush=True,
    )
    print(f"# launch: {launch_styles.DESCRIPTIONS[args.launch]}; {threads_note(run.n)}", flush=True)
    note = run.runtime.adapter.execution_note()
    if note is not None:
        print(f"# {framework}: {note}", flush=True)


def _sweep(run: Run, op: str) -> list[dict[str, Any]]:
    """``op``'s rows, one per size, each printed as it completes (none: the op needs more ranks).
    With ``--algorithm``, every entry the op's calls reach runs it meanwhile."""
    spec, args = SPECS[op], run.args
    if spec.peers and run.n < 2:
        if run.lead:
            print(f"# {op}: needs 2 ranks or more; skipped", flush=True)
        return []
    forced: list[str] = []
    if args.algorithm is not None:
        check_algorithm(op, args.algorithm, run.joins, run.n)
        forced = forced_entries(op, run.joins)
    for entry in forced:
        run.runtime.force(entry, spec.dtype or args.dtype, args.algorithm)
    op_rows = [
        _size_row(run, op, index, size) for index, size in enumerate(_sweep_sizes(op, run.sizes))
    ]
    for entry in forced:
        run.runtime.force(entry, spec.dtype or args.dtype, None)
    if not spec.noop and run.lead:
        print(
            f"# {op}: compat's own work per call is not separable here ({spec.unmeasured})",
            flush=True,
        )
    return op_rows


def _size_row(run: Run, op: str, index: int, size: int) -> dict[str, Any]:
    """``op`` at ``size`` timed (the slowest rank's figures) and its row, printed by rank 0
    (the first size after the op's header)."""
    args, chosen, n = run.args, run.chosen, run.n
    rows = rows_per_rank(size, run.itemsize, n)
    elements = rows * n if size else 0
    pair = make_pair(run.runtime.adapter, op, rows, args.dtype)
    if run.lead and index == 0:
        print(f"# {op}: native = {pair.description}", flush=True)
        print(CONTROL_HEADER if args.control else HEADER, flush=True)
    timed = list(measure(pair, chosen.rounds, chosen.budget))
    if args.control:
        timed += measure(Pair(pair.native, pair.native), chosen.rounds, chosen.budget)
    slowest = _slowest(timed)
    control = slowest[2] / slowest[3] if args.control else None
    nbytes = elements * run.itemsize
    algorithm = algorithm_of(run.runtime, op, run.joins, args.dtype, nbytes, n)
    values = row(op, nbytes, elements, algorithm, slowest[0], slowest[1], n, control)
    values["native"] = pair.description
    if run.lead:
        print(format_row(values), flush=True)
    return values


def threads_note(ranks: int) -> str:
    """The threads a rank's framework kernels run with, as the report's header says them."""
    torch = sys.modules.get("torch")
    team = f"{torch.get_num_threads()} (torch.get_num_threads())" if torch is not None else "-"
    variable = os.environ.get("OMP_NUM_THREADS")
    setting = "unset" if variable is None else variable
    return (
        f"threads per rank: {team}, OMP_NUM_THREADS {setting}; {ranks} ranks on "
        f"{os.cpu_count()} cores"
    )


def _time_own_work(
    timed_ops: Sequence[tuple[str, list[dict[str, Any]]]],
    adapter: Adapter,
    joins: bool,
    dtype: str,
    spread: float,
    n: int,
    lead: bool,
) -> None:
    """Time compat's own work for every op of ``timed_ops`` at once (:func:`own_work`), on
    tensors made for it, of each op's first row's size (the smallest: cheap calls) up to
    OWN_WORK_MOST_BYTES, record it in the op's rows and print it."""
    itemsize = tables_bytes(dtype)
    cases, sizes = [], []
    for op, op_rows in timed_ops:
        spec = SPECS[op]
        rows = rows_per_rank(min(op_rows[0]["bytes"], OWN_WORK_MOST_BYTES), itemsize, n)
        sizes.append(rows * n * itemsize if op_rows[0]["bytes"] else 0)
        noops = tuple(collective_of(name, joins) for name in spec.noop)
        cases.append(OwnWorkCase(make_pair(adapter, op, rows, dtype), noops, spec.dtype or dtype))
    if lead:
        print(
            f"# compat's own work per call (checks, dispatch, choice; the collective replaced by "
            f"a no-op): the fastest of {OWN_WORK_ROUNDS} rounds of {OWN_WORK_CALLS} calls, the "
            f"{len(cases)} ops taking turns over about {spread * len(cases):.0f} s",
            flush=True,
        )
    measured_ops = zip(timed_ops, sizes, own_work(cases, spread), strict=True)
    for (op, op_rows), size, measured in measured_ops:
        for values in op_rows:
            values["own_work_us"] = round(measured.fastest * 1e6, 2)
            values["own_work_median_round_us"] = round(measured.median * 1e6, 2)
            values["own_work_after_collective_us"] = round(measured.after * 1e6, 2)
        if lead:
            print(
                f"# {op}: compat's own work per call, {format_size(size)}: "
                f"{measured.fastest * 1e6:.2f} us back to back, {measured.after * 1e6:.2f} us "
                f"right after a native call (median round {measured.median * 1e6:.2f} us)",
                flush=True,
            )


CSV_FIELDS = ("framework", "backend", "world_size", "dtype", *COLUMNS, "native")


def write_csv(
    path: str, rows: Iterable[dict[str, Any]], framework: str, backend: str, n: int, dtype: str
) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for values in rows:
            writer.writerow(
                {"framework": framework, "backend": backend, "world_size": n, "dtype": dtype}
                | values
            )


def tables_bytes(dtype: str) -> int:
    size: int = tables.lookup("dtypes", "dtypes", dtype, "bytes")
    return size


# -- --framework both: the frameworks side by side ------------------------------------------------


def read_csv(path: str) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def merge_csv(path: str, sources: Iterable[str]) -> None:
    """One CSV of every row of ``sources`` (the per-framework tables)."""
    records = [record for source in sources for record in read_csv(source)]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(records)


def side_by_side(tables_by_framework: dict[str, list[dict[str, str]]]) -> list[str]:
    """Lines of one table per op: each framework's compat and native time per size, their
    ratio (and control ratio, if timed), and the two natives' ratio (second framework over
    first: what the second framework's backend costs against the first's). Fits 100 columns."""
    names = list(tables_by_framework)
    records = {
        name: {(r["op"], int(r["bytes"])): r for r in rows}
        for name, rows in tables_by_framework.items()
    }
    labels = {
        name: next((r["backend"] for r in rows), name) for name, rows in tables_by_framework.items()
    }
    with_control = any(r.get("control") for rows in tables_by_framework.values() for r in rows)
    ops = list(dict.fromkeys(r["op"] for rows in tables_by_framework.values() for r in rows))
    title, head = _side_by_side_heads(names, labels, with_control)
    lines = [title]
    for op in ops:
        lines += [f"# {op}", head]
        keys = sorted({key for name in names for key in records[name] if key[0] == op})
        lines += [
            _side_by_side_line(key, [records[name] for name in names], with_control) for key in keys
        ]
    return lines


def _side_by_side_heads(
    names: list[str], labels: dict[str, str], with_control: bool
) -> tuple[str, str]:
    """:func:`side_by_side`'s title line and its tables' column heads."""
    first, last = names[0], names[-1]
    title = (
        f"# side by side: {', '.join(f'{n}/{labels[n]}' for n in names)}; us per call; "
        "ratio = compat/native"
        + ("; ctl = native/native" if with_control else "")
        + f"; {labels[last]}/{labels[first]} = native over native"
    )
    control_head = f" {'ctl':>5}" if with_control else ""
    head = f"{'size':>7}" + "".join(
        f" {labels[name] + ' compat':>12} {labels[name] + ' native':>12} {'ratio':>6}"
        + control_head
        for name in names
    )
    return title, head + f" {labels[last] + '/' + labels[first]:>10}"


def _side_by_side_line(
    key: tuple[str, int], records: list[dict[tuple[str, int], dict[str, str]]], with_control: bool
) -> str:
    """One size of :func:`side_by_side`: each framework's cells, then the last framework's
    native over the first's."""
    cells = [f"{format_size(key[1]):>7}"]
    for found in (framework.get(key) for framework in records):
        if found is None:
            cells.append(f" {'-':>12} {'-':>12} {'-':>6}" + (f" {'-':>5}" * with_control))
            continue
        cells.append(
            f" {float(found['compat_us']):>12.1f} {float(found['native_us']):>12.1f} "
            f"{float(found['ratio']):>6.3f}"
        )
        if with_control:
            control = found.get("control")
            cells.append(f" {float(control):>5.2f}" if control else f" {'-':>5}")
    pair = [records[0].get(key), records[-1].get(key)]
    if pair[0] is not None and pair[1] is not None:
        times = float(pair[1]["native_us"]) / float(pair[0]["native_us"])
        cells.append(f" {times:>10.2f}")
    return "".join(cells)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
