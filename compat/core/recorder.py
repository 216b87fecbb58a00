"""compat's flight recorder and comms log: what each rank's collectives were, for finding a hang,
and where their time went.

The recorder keeps, per rank, the last ``COMPAT_TRACE_ENTRIES`` calls (default 2,000; 0 turns it
off) in a ring allocated once: each call of a collective writes one tuple into it before it runs
and a time once it has completed. It records what torch's flight recorder records (a sequence id
per process group, the group's name and ranks, the op, input and output sizes and dtypes, the
state, timestamps, the timeout, the caller's Python frames) and what compat knows besides: the
algorithm the capability table chose and whether it ran natively, emulated or through shared
memory. :func:`compat.core.state.State` wraps each callable it chooses once (:meth:`Recorder.wrap`),
so every collective, on every backend of both frameworks, passes through it.

A dump (:meth:`Recorder.dump`) is a pickle in torch's flight-recorder format (version 2.10), one
file a rank, ``rank_<N>`` in ``COMPAT_TRACE_DIR`` (default: ``compat_trace`` in the system's
temporary folder), which ``python -m torch.distributed.flight_recorder.fr_trace`` reads and
``compat trace`` analyses. It is written on CollectiveTimeout, CollectiveMismatchError and
PeerLostError, on demand (:func:`compat.trace.dump_trace`, or a signal:
``COMPAT_TRACE_SIGNAL=USR1``), and on SIGTERM/SIGINT where ``compat launch`` started the rank
(``COMPAT_TRACE_ON_STOP=1``).

The comms log (``COMPAT_COMMS_LOG=1`` or :func:`compat.trace.comms_log`) counts, per op, size and
algorithm, the calls and their time, with algbw and busbw as nccl-tests computes them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from compat.base import tables
from compat.base.errors import CollectiveMismatchError, CollectiveTimeout, PeerLostError

#: torch's flight-recorder dump format that compat writes (what torch 2.13 writes for Gloo).
VERSION = "2.10"
DEFAULT_ENTRIES = 2000
#: Python frames kept per call (the caller's first ones outside compat): none by default, since
#: taking them (a frame object made per level) costs more than the rest of a record. A dump
#: gives the call in progress the stack it is waiting in instead (:func:`_live_frames`).
DEFAULT_FRAMES = 0
#: The errors that write a dump: a hang's or a desync's (the analysis needs every rank's).
FAILURES = (CollectiveTimeout, CollectiveMismatchError, PeerLostError)

#: compat's collective (a capability-table entry) -> torch's op name in a flight-recorder entry
#: (the analyzer knows only torch's names).
TORCH_OP = {
    "all_gather_into_tensor": "_all_gather_base",
    "all_gather_uneven": "all_gather_v",
    "reduce_scatter_tensor": "_reduce_scatter_base",
    "reduce_scatter_uneven": "reduce_scatter_v",
    "all_to_all_uneven": "all_to_all",
    "monitored_barrier": "barrier",
    "isend": "send",
    "irecv": "recv",
}
POINT_TO_POINT = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv"})
#: torch's ScalarType names, which the analyzer compares (canonical dtype -> name)
TORCH_DTYPE = {
    "float16": "Half",
    "bfloat16": "BFloat16",
    "float32": "Float",
    "float64": "Double",
    "int8": "Char",
    "uint8": "Byte",
    "int16": "Short",
    "int32": "Int",
    "int64": "Long",
    "bool": "Bool",
    "complex64": "ComplexFloat",
}
#: The backend names torch's analyzer accepts in an entry's profiling name.
ANALYZER_BACKENDS = ("nccl", "hccl", "mccl", "gloo")

Shape = tuple[int, ...]
Sizes = tuple[list[Shape], list[Shape], int | None]


def _parts(shape: Shape, count: int) -> list[Shape]:
    return [shape] * count


def _times(shape: Shape, count: int) -> Shape:
    """``count`` parts of ``shape`` joined along dim 0."""
    return (shape[0] * count, *shape[1:]) if shape else shape


def _shapes(tensors: Sequence[Any] | None) -> list[Shape]:
    return [] if tensors is None else [tensor.shape for tensor in tensors]


#: collective -> what a call keeps of its arguments (the adapter method's): one tensor's shape
#: where the others' follow from it (each shape read costs time on every call), a list's where
#: its parts may differ; never a tensor.
TAKE: dict[str, Callable[[tuple[Any, ...]], Any]] = {
    "all_reduce": lambda a: a[0].shape,
    "broadcast": lambda a: a[0].shape,
    "reduce": lambda a: a[0].shape,
    "all_gather": lambda a: a[1].shape,
    "all_gather_uneven": lambda a: (a[1].shape, _shapes(a[0])),
    "all_gather_into_tensor": lambda a: (a[1].shape, a[0].shape),
    "reduce_scatter": lambda a: a[0].shape,
    "reduce_scatter_uneven": lambda a: (_shapes(a[1]), a[0].shape),
    "reduce_scatter_tensor": lambda a: (a[1].shape, a[0].shape),
    "scatter": lambda a: (a[0].shape, a[2]),
    "gather": lambda a: (a[0].shape, a[2]),
    "all_to_all_single": lambda a: (a[1].shape, a[0].shape),
    "all_to_all": lambda a: (_shapes(a[1]), _shapes(a[0])),
    "all_to_all_uneven": lambda a: (_shapes(a[1]), _shapes(a[0])),
    "send": lambda a: (a[0].shape, a[1]),
    "recv": lambda a: (a[0].shape, a[1]),
    "isend": lambda a: (a[0].shape, a[1]),
    "irecv": lambda a: (a[0].shape, a[1]),
    "barrier": lambda a: None,
    "monitored_barrier": lambda a: None,
}


def sizes(collective: str, taken: Any, ranks: int, me: int) -> Sizes:
    """(input shapes, output shapes, peer) of a call, from what :data:`TAKE` kept, on a group of
    ``ranks`` ranks of which this rank is global rank ``me``."""
    if collective in ("all_reduce", "broadcast", "reduce"):
        return [taken], [taken], None
    if collective == "all_gather":
        return [taken], _parts(taken, ranks), None
    if collective == "reduce_scatter":
        return _parts(taken, ranks), [taken], None
    if collective in ("all_gather_uneven", "all_gather_into_tensor", "all_to_all_single"):
        return [taken[0]], list(taken[1]) if isinstance(taken[1], list) else [taken[1]], None
    if collective in ("reduce_scatter_uneven", "reduce_scatter_tensor"):
        first = taken[0] if isinstance(taken[0], list) else [taken[0]]
        return first, [taken[1]], None
    if collective == "scatter":
        return (_parts(taken[0], ranks) if taken[1] == me else []), [taken[0]], None
    if collective == "gather":
        return [taken[0]], (_parts(taken[0], ranks) if taken[1] == me else []), None
    if collective in ("all_to_all", "all_to_all_uneven"):
        return list(taken[0]), list(taken[1]), None
    if collective in POINT_TO_POINT:
        return [taken[0]], [taken[0]], taken[1]
    return [], [], None


#: Adapter methods by their number of arguments, where it is 4 or 5 (the group's handle third
#: of 4, fourth of 5): their calls are recorded with named arguments (Recorder._wrap_fixed).
ARITY = {
    **dict.fromkeys(
        (
            "all_reduce",
            "broadcast",
            "all_gather",
            "all_gather_into_tensor",
            "all_to_all",
            "send",
            "recv",
            "isend",
            "irecv",
        ),
        4,
    ),
    **dict.fromkeys(("reduce_scatter", "reduce_scatter_tensor", "scatter", "gather", "reduce"), 5),
}

#: Where the group's handle is among an adapter method's arguments (collectives: before async_op).
GROUP_AT = {
    "send": 2,
    "recv": 2,
    "isend": 2,
    "irecv": 2,
    "batch_isend_irecv": 1,
    "barrier": 0,
    "monitored_barrier": 0,
}


class GroupInfo:
    """A process group as the recorder names it, with its sequence ids."""

    __slots__ = ("collective_seq", "desc", "index", "name", "p2p_seq", "ranks")

    def __init__(self, index: int, name: str, desc: str, ranks: list[int]) -> None:
        self.index, self.name, self.desc, self.ranks = index, name, desc, ranks
        self.collective_seq = 0
        self.p2p_seq = 0


class _Tracked:
    """A pending handle whose completion the recorder notes (when ``wait`` returns, or
    ``is_completed`` first says so); anything else is the wrapped handle's."""

    __slots__ = ("_done", "_handle")

    def __init__(self, handle: Any, done: Callable[[object], None]) -> None:
        self._handle = handle
        self._done: Callable[[object], None] | None = done

    def wait(self, timeout: Any = None) -> Any:
        try:
            result = self._handle.wait() if timeout is None else self._handle.wait(timeout)
        except Exception as error:
            self._finish(error)
            raise
        self._finish(None)
        return result

    def is_completed(self) -> bool:
        completed = bool(self._handle.is_completed())
        if completed:
            self._finish(None)
        return completed

    def _finish(self, error: BaseException | None) -> None:
        done, self._done = self._done, None
        if done is not None:
            done(error)

    def __getattr__(self, name: str) -> Any:
        # The native handle's other methods (get_future, ...). A slot not yet set is not one of
        # them: copy and torch.compile probe an object before its __init__ ran.
        if name in _Tracked.__slots__:
            raise AttributeError(name)
        return getattr(self._handle, name)


class Recorder:
    """One rank's flight recorder and comms log (see the module's docstring)."""

    def __init__(
        self,
        adapter: Any,
        framework: str,
        backend: str,
        capacity: int,
        frames: int,
        log: bool,
    ) -> None:
        self.adapter = adapter
        self.framework, self.backend = framework, backend
        self.rank, self.world_size = adapter.rank(), adapter.world_size()
        self.capacity = capacity
        self.frames = frames
        self.recording = capacity > 0
        #: the ring: the call as it started, and its outcome (None: not completed; an int: the
        #: time.time_ns() it completed at; a str: the error it raised)
        self.entries: list[tuple[Any, ...] | None] = [None] * max(capacity, 1)
        self.outcomes: list[int | str | None] = [None] * max(capacity, 1)
        self.count = 0
        self.groups: dict[Any, GroupInfo] = {}
        self.timeout_ms = int(adapter.collective_timeout() * 1000)
        label = next((name for name in ANALYZER_BACKENDS if name in backend), "gloo")
        self.label = label
        self.log: dict[tuple[str, int, str], list[float]] | None = {} if log else None
        self.dumped: str | None = None

    # -- recording ---------------------------------------------------------------------------
    def active(self) -> bool:
        return self.recording or self.log is not None

    def group(self, handle: Any) -> GroupInfo:
        found = self.groups.get(handle)
        if found is None:
            if handle is None:
                ranks = list(range(self.world_size))
                name, desc = "0", "default_pg"
            else:
                ranks = list(self.adapter.group_ranks(handle))
                name = handle if isinstance(handle, str) else getattr(handle, "group_name", "")
                name, desc = name or f"ranks{ranks}", "undefined"
            found = self.groups[handle] = GroupInfo(len(self.groups), str(name), desc, ranks)
        return found

    def wrap(
        self,
        run: Callable[..., Any],
        collective: str,
        method: str,
        dtype: str,
        algorithm: str,
        how: str,
        hint: list[Any] | None = None,
    ) -> Callable[..., Any]:
        """``run`` (what the capability table chose for ``collective``, adapter method
        ``method``, on ``dtype``) recording each call; ``__wrapped__`` is ``run``
        (``inspect.unwrap`` finds it). ``hint``: where the caller leaves the
        shape of the tensor about to run, read by its checks already (taken and cleared)."""
        hint = [None] if hint is None else hint
        if method == "batch_isend_irecv":
            return self._wrap_batch(run, dtype, algorithm, how)
        fixed = (collective, dtype, algorithm, how)
        # The sequence ids are not kept per entry: a dump counts them back from the group's
        # latest (Recorder.snapshot), which saves work on every call.
        if method in ARITY and not self.frames and self.log is None:
            return self._wrap_fixed(run, fixed, method, TAKE[collective], hint)
        return self._wrap_any(run, fixed, method, hint)

    def _wrap_any(
        self,
        run: Callable[..., Any],
        fixed: tuple[str, str, str, str],
        method: str,
        hint: list[Any],
    ) -> Callable[..., Any]:
        """:meth:`wrap` for any call: arguments forwarded as ``*args``, the caller's frames kept
        if asked, the comms log fed if on (it makes every choice anew)."""
        take = TAKE[fixed[0]]
        group_at = GROUP_AT.get(method, -2)
        p2p = fixed[0] in POINT_TO_POINT
        # Whether a call returns a handle to wait for: async_op, the last argument, or always.
        waits_at = -1 if method not in GROUP_AT else 1 if method == "barrier" else None
        always_waits = method in ("isend", "irecv")
        entries, outcomes, frames = self.entries, self.outcomes, self.frames
        ring = len(entries)
        groups, group_of = self.groups, self.group
        time_ns = time.time_ns
        user_frames = _user_frames
        logs = self.log is not None
        ended, failed = self._ended, self._failed

        def recorded(*args: Any) -> Any:
            hint[0] = None
            handle = args[group_at]
            group = groups.get(handle)
            if group is None:
                group = group_of(handle)
            if p2p:
                group.p2p_seq += 1
            else:
                group.collective_seq += 1
            record_id = self.count
            self.count = record_id + 1
            slot = record_id % ring
            entries[slot] = (
                record_id,
                group,
                fixed,
                take(args),
                time_ns(),
                user_frames(frames) if frames else (),
            )
            outcomes[slot] = None
            try:
                result = run(*args)
            except BaseException as error:
                failed(slot, record_id, error)
                raise
            if result is not None and (
                always_waits or (waits_at is not None and args[waits_at] is True)
            ):
                return _Tracked(result, lambda error: ended(slot, record_id, error))
            if logs:
                ended(slot, record_id, None)
            else:
                outcomes[slot] = time_ns()
            return result

        return _standing_in(recorded, run)

    def _wrap_fixed(
        self,
        run: Callable[..., Any],
        fixed: tuple[str, str, str, str],
        method: str,
        take: Callable[[tuple[Any, ...]], Any],
        hint: list[Any],
    ) -> Callable[..., Any]:
        """:meth:`wrap` for the common calls (4 or 5 arguments, no frames kept, no comms log),
        with their arguments named: forwarding ``*args`` costs more than the record itself
        (docs/flight_recorder.md). The shape the checks read (``hint``) is taken where the first
        tensor's shape is every size (all_reduce, broadcast, reduce)."""
        entries, outcomes, groups, group_of = self.entries, self.outcomes, self.groups, self.group
        ring = len(entries)
        time_ns = time.time_ns
        ended, failed = self._ended, self._failed
        p2p = fixed[0] in POINT_TO_POINT
        always_waits = method in ("isend", "irecv")
        same = method in ("all_reduce", "broadcast", "reduce")

        # The record is written inline in each: a nested call would add to every collective.
        if ARITY[method] == 4:

            def recorded4(a: Any, b: Any, group: Any, d: Any) -> Any:
                kept = groups.get(group) or group_of(group)
                if p2p:
                    kept.p2p_seq += 1
                else:
                    kept.collective_seq += 1
                record_id = self.count
                self.count = record_id + 1
                slot = record_id % ring
                shape = hint[0]
                if shape is None or not same:
                    shape = take((a, b, group, d))
                hint[0] = None
                entries[slot] = (record_id, kept, fixed, shape, time_ns(), ())
                outcomes[slot] = None
                try:
                    result = run(a, b, group, d)
                except BaseException as error:
                    failed(slot, record_id, error)
                    raise
                if result is not None and (always_waits or (not p2p and d is True)):
                    return _Tracked(result, lambda error: ended(slot, record_id, error))
                outcomes[slot] = time_ns()
                return result

            return _standing_in(recorded4, run)

        def recorded5(a: Any, b: Any, c: Any, group: Any, async_op: Any) -> Any:
            kept = groups.get(group) or group_of(group)
            kept.collective_seq += 1
            record_id = self.count
            self.count = record_id + 1
            slot = record_id % ring
            shape = hint[0]
            if shape is None or not same:
                shape = take((a, b, c, group, async_op))
            hint[0] = None
            entries[slot] = (record_id, kept, fixed, shape, time_ns(), ())
            outcomes[slot] = None
            try:
                result = run(a, b, c, group, async_op)
            except BaseException as error:
                failed(slot, record_id, error)
                raise
            if result is not None and async_op is True:
                return _Tracked(result, lambda error: ended(slot, record_id, error))
            outcomes[slot] = time_ns()
            return result

        return _standing_in(recorded5, run)

    def _record(self, group: GroupInfo, fixed: tuple[str, str, str, str], taken: Any) -> int:
        """Write one call into the ring (the slow path's way: batches, refused calls)."""
        if fixed[0] in POINT_TO_POINT:
            group.p2p_seq += 1
        else:
            group.collective_seq += 1
        record_id = self.count
        self.count = record_id + 1
        slot = record_id % len(self.entries)
        self.entries[slot] = (
            record_id,
            group,
            fixed,
            taken,
            time.time_ns(),
            _user_frames(self.frames + 1)[1:] if self.frames else (),
        )
        self.outcomes[slot] = None
        return slot

    def _wrap_batch(
        self, run: Callable[..., Any], dtype: str, algorithm: str, how: str
    ) -> Callable[..., Any]:
        """batch_isend_irecv: one entry per op (torch's send and recv entries), each completed
        with its handle, or all with the batch's one handle."""

        def recorded(p2p_ops: list[Any], handle: Any) -> Any:
            group = self.group(handle)
            slots = []
            for direction, tensor, peer, _tag in p2p_ops:
                fixed = (direction, dtype, algorithm, how)
                record_id = self.count
                slots.append((self._record(group, fixed, (tensor.shape, peer)), record_id))
            try:
                handles = run(p2p_ops, handle)
            except BaseException as error:
                for slot, record_id in slots:
                    self._failed(slot, record_id, error)
                raise

            def ender(which: list[tuple[int, int]]) -> Callable[[object], None]:
                def end(error: object) -> None:
                    for slot, record_id in which:
                        self._ended(slot, record_id, error)

                return end

            if len(handles) == len(slots):
                return [_Tracked(h, ender([s])) for h, s in zip(handles, slots, strict=True)]
            return [_Tracked(h, ender(slots if i == 0 else [])) for i, h in enumerate(handles)]

        return _standing_in(recorded, run)

    def _ended(self, slot: int, record_id: int, error: object) -> None:
        if error is not None:
            self._failed(slot, record_id, error)
            return
        now = time.time_ns()
        entry = self.entries[slot]
        if entry is not None and entry[0] == record_id:
            self.outcomes[slot] = now
            if self.log is not None:
                self._log(entry, now)

    def _failed(self, slot: int, record_id: int, error: object) -> None:
        entry = self.entries[slot]
        if entry is not None and entry[0] == record_id:
            self.outcomes[slot] = f"{type(error).__name__}: {error}"
        if isinstance(error, FAILURES):
            self.dump(f"{type(error).__name__}: {error}")

    def note_mismatch(self, handle: Any, function: str, dtype: str | None, shape: Shape) -> None:
        """A call the pre-flight check refused (CollectiveMismatchError): recorded as this rank
        called it, so that the dumps show where the ranks diverged."""
        fixed = (function, dtype or "", "not run", "refused by the pre-flight check")
        slot = self._record(self.group(handle), fixed, (tuple(shape), None))
        self.outcomes[slot] = "CollectiveMismatchError: refused by the pre-flight check"

    # -- the comms log -----------------------------------------------------------------------
    def _log(self, entry: tuple[Any, ...], ended: int) -> None:
        assert self.log is not None
        collective, dtype, algorithm, _ = entry[2]
        ranks = len(entry[1].ranks)
        nbytes = data_bytes(collective, dtype, sizes(collective, entry[3], ranks, self.rank), ranks)
        key = (collective, nbytes, algorithm)
        kept = self.log.get(key)
        if kept is None:
            kept = self.log[key] = [0, 0.0, len(entry[1].ranks)]
        kept[0] += 1
        kept[1] += (ended - entry[4]) / 1e9

    def log_rows(self) -> list[dict[str, Any]]:
        """The comms log: one row per (op, size, algorithm), largest total time first."""
        rows: list[dict[str, Any]] = []
        for (op, nbytes, algorithm), (count, total, ranks) in (self.log or {}).items():
            mean = total / count
            algbw = nbytes / mean / 1e9 if mean > 0 and nbytes else 0.0
            factor = BUS_FACTOR.get(op)
            busbw = algbw * factor(int(ranks)) if factor is not None else 0.0
            rows.append(
                {
                    "op": op,
                    "bytes": nbytes,
                    "algorithm": algorithm,
                    "count": int(count),
                    "total_s": total,
                    "mean_us": mean * 1e6,
                    "algbw_GBps": algbw,
                    "busbw_GBps": busbw,
                    "ranks": int(ranks),
                }
            )
        rows.sort(key=lambda row: -row["total_s"])
        return rows

    # -- dumps -------------------------------------------------------------------------------
    def snapshot(self, reason: str) -> dict[str, Any]:
        """The ring in torch's flight-recorder dump format (and compat's fields besides)."""
        count = self.count
        kept = self._kept(count)
        waiting = max(
            (index for index, (_, outcome) in enumerate(kept) if not isinstance(outcome, int)),
            default=None,
        )
        entries = []
        status: dict[str, dict[str, int]] = {}
        for index, ((entry, outcome), seq_ids) in enumerate(
            zip(kept, self._seq_ids(kept), strict=True)
        ):
            entries.append(self._torch_entry(entry, outcome, *seq_ids))
            if index == waiting and not entries[-1]["frames"]:
                entries[-1]["frames"] = _live_frames()
            if entry[2][0] not in POINT_TO_POINT:
                _note_status(status, entry[1].name, seq_ids[0], isinstance(outcome, int))
        return {
            "version": VERSION,
            "comm_lib_version": f"compat on {self.framework} {self.backend}",
            "pg_config": self._pg_config(),
            "pg_status": status,
            "entries": entries,
            "compat": self._own_fields(reason, count),
        }

    def _kept(self, count: int) -> list[tuple[tuple[Any, ...], int | str | None]]:
        """(entry, outcome) of each of the first ``count`` calls still in the ring, oldest
        first."""
        ring = len(self.entries)
        first = max(0, count - ring) if self.recording else count
        kept = []
        for record_id in range(first, count):
            slot = record_id % ring
            entry, outcome = self.entries[slot], self.outcomes[slot]
            if entry is not None and entry[0] == record_id:
                kept.append((entry, outcome))
        return kept

    def _seq_ids(
        self, kept: list[tuple[tuple[Any, ...], int | str | None]]
    ) -> list[tuple[int, int]]:
        """Each kept entry's (collective, p2p) sequence ids, counted back from its group's
        latest (calls do not store them)."""
        latest = {
            id(group): [group.collective_seq, group.p2p_seq] for group in self.groups.values()
        }
        seq_ids: list[tuple[int, int]] = []
        for entry, _ in reversed(kept):
            counts = latest[id(entry[1])]
            seq_ids.append((counts[0], counts[1]))
            counts[entry[2][0] in POINT_TO_POINT] -= 1
        seq_ids.reverse()
        return seq_ids

    def _pg_config(self) -> dict[str, dict[str, str]]:
        """Each group's name, description and ranks; the default group always."""
        pg_config = {
            group.name: {"name": group.name, "desc": group.desc, "ranks": str(group.ranks)}
            for group in self.groups.values()
        }
        if "0" not in pg_config:
            ranks = str(list(range(self.world_size)))
            pg_config["0"] = {"name": "0", "desc": "default_pg", "ranks": ranks}
        return pg_config

    def _own_fields(self, reason: str, count: int) -> dict[str, Any]:
        """What compat adds to a dump: the rank, the run, why it was written, the stack now."""
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "framework": self.framework,
            "backend": self.backend,
            "reason": reason,
            "time_ns": time.time_ns(),
            "capacity": self.capacity,
            "calls": count,
            "pid": os.getpid(),
            "stack": _live_frames(),
        }

    def _torch_entry(
        self, entry: tuple[Any, ...], outcome: int | str | None, collective_seq: int, p2p_seq: int
    ) -> dict[str, Any]:
        record_id, group, fixed, taken, created, frames = entry
        collective, dtype, algorithm, how = fixed
        if algorithm == "not run":  # refused by the pre-flight check: its shape as described
            in_sizes, out_sizes, peer = [taken[0]], [taken[0]], None
        else:
            in_sizes, out_sizes, peer = sizes(collective, taken, len(group.ranks), self.rank)
        op = TORCH_OP.get(collective, collective)
        # torch records a list of parts as one flat buffer (the analyzer compares numels).
        if op in ("all_gather", "all_gather_v"):
            out_sizes = _joined(out_sizes)
        elif op in ("reduce_scatter", "reduce_scatter_v"):
            in_sizes = _joined(in_sizes)
        if peer is not None:
            me = group.ranks.index(self.rank) if self.rank in group.ranks else -1
            them = group.ranks.index(peer) if peer in group.ranks else -1
            op = f"send {me}->{them}" if op == "send" else f"recv {me}<-{them}"
        completed = isinstance(outcome, int)
        torch_dtype = TORCH_DTYPE.get(dtype, dtype)
        return {
            "record_id": record_id,
            "pg_id": group.index,
            "process_group": (group.name, group.desc),
            "collective_seq_id": collective_seq,
            "p2p_seq_id": p2p_seq,
            "op_id": record_id + 1,
            "profiling_name": f"{self.label}:{op}",
            "time_created_ns": created,
            "input_sizes": [list(shape) for shape in in_sizes],
            "output_sizes": [list(shape) for shape in out_sizes],
            "input_dtypes": [torch_dtype] * len(in_sizes),
            "output_dtypes": [torch_dtype] * len(out_sizes),
            "state": "completed" if completed else "started",
            "time_discovered_started_ns": created,
            "time_discovered_completed_ns": outcome if completed else None,
            "retired": completed,
            "timeout_ms": self.timeout_ms,
            "is_p2p": collective in POINT_TO_POINT,
            "thread_id": "",
            "thread_name": "",
            "frames": [
                {"name": code.co_name, "filename": code.co_filename, "line": _line(code, offset)}
                for code, offset in frames
            ],
            # compat's own: what torch's recorder cannot know
            "compat_op": collective,
            "dtype": dtype,
            "algorithm": algorithm,
            "how": how,
            "error": outcome if isinstance(outcome, str) else None,
        }

    def dump(self, reason: str, directory: str | None = None) -> str:
        """Write this rank's dump (``rank_<N>`` in ``directory``, default COMPAT_TRACE_DIR) and
        return its path. Nothing raised here hides the error that asked for it."""
        folder = directory or trace_dir()
        path = os.path.join(folder, f"rank_{self.rank}")
        try:
            os.makedirs(folder, exist_ok=True)
            data = pickle.dumps(self.snapshot(reason))
            temporary = f"{path}.{os.getpid()}.tmp"
            with open(temporary, "wb") as out:
                out.write(data)
            os.replace(temporary, path)
        except OSError as error:
            print(f"compat: could not write the trace dump {path}: {error}", file=sys.stderr)
        self.dumped = path
        return path


def _standing_in(wrapper: Callable[..., Any], run: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapper``, answering as ``run`` to what inspects a choice: ``__wrapped__``
    (``inspect.unwrap``), and a bound algorithm's ``func`` and ``args`` (functools.partial's).
    """
    wrapper.__wrapped__ = run  # type: ignore[attr-defined]
    for name in ("func", "args", "keywords"):
        if hasattr(run, name):
            setattr(wrapper, name, getattr(run, name))
    return wrapper


def _note_status(
    status: dict[str, dict[str, int]], group: str, collective_seq: int, completed: bool
) -> None:
    """Advance ``group``'s last enqueued/started (and, if ``completed``, completed) collective
    in a dump's ``pg_status`` to ``collective_seq``."""
    seen = status.setdefault(
        group,
        {
            "last_enqueued_collective": -1,
            "last_started_collective": -1,
            "last_completed_collective": -1,
        },
    )
    seen["last_enqueued_collective"] = collective_seq
    seen["last_started_collective"] = collective_seq
    if completed:
        seen["last_completed_collective"] = collective_seq


def _joined(shapes: list[Shape]) -> list[Shape]:
    """Parts joined along dim 0, as torch records a list of them."""
    if not shapes or not shapes[0]:
        return shapes
    return [(sum(shape[0] for shape in shapes), *shapes[0][1:])]


def data_bytes(collective: str, dtype: str, sizes: Sizes, ranks: int) -> int:
    """The size a comms-log row reports, as ``compat bench`` and nccl-tests give it: the whole
    buffer (a gather's or scatter's: every rank's part)."""
    per = _DTYPE_BYTES.get(dtype, 0)
    inputs = sum(math.prod(shape) for shape in sizes[0]) * per
    outputs = sum(math.prod(shape) for shape in sizes[1]) * per
    if collective in ("scatter", "gather"):
        one = sizes[1] if collective == "scatter" else sizes[0]
        return max(inputs, outputs, math.prod(one[0]) * per * ranks if one else 0)
    return max(inputs, outputs)


def all_reduce_factor(n: int) -> float:
    return 2 * (n - 1) / n


def parts_factor(n: int) -> float:
    return (n - 1) / n


def whole_factor(n: int) -> float:
    return 1.0


#: busbw = algbw * factor(ranks), nccl-tests' (doc/PERFORMANCE.md), by compat collective
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": all_reduce_factor,
    **dict.fromkeys(
        (
            "all_gather",
            "all_gather_uneven",
            "all_gather_into_tensor",
            "reduce_scatter",
            "reduce_scatter_uneven",
            "reduce_scatter_tensor",
            "scatter",
            "gather",
            "all_to_all_single",
            "all_to_all",
            "all_to_all_uneven",
        ),
        parts_factor,
    ),
    **dict.fromkeys(("broadcast", "reduce", "send", "recv", "isend", "irecv"), whole_factor),
}

_DTYPE_BYTES: dict[str, int] = {}


def _user_frames(limit: int) -> tuple[tuple[Any, int], ...]:
    """The first ``limit`` frames of the caller outside compat, as (code, instruction offset):
    no frame is kept (a frame holds its locals, the tensors among them), and the line is found
    from the offset only in a dump."""
    frame: Any = sys._getframe(2)
    inside = _COMPAT_CODE
    while frame is not None and frame.f_code.co_filename in inside:
        frame = frame.f_back
    found: list[tuple[Any, int]] = []
    while frame is not None and len(found) < limit:
        found.append((frame.f_code, frame.f_lasti))
        frame = frame.f_back
    return tuple(found)


def _live_frames() -> list[dict[str, Any]]:
    """The main thread's stack now, innermost first, from the caller of compat's outermost frame
    (the framework's frames under compat's are not where the user called): where the call still
    in progress was made (a dump from the signal thread, or from the failing call itself)."""
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    stack = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    inside = [index for index, each in enumerate(stack) if each.f_code.co_filename in _COMPAT_CODE]
    outside = stack[inside[-1] + 1 :] if inside else stack
    return [
        {"name": each.f_code.co_name, "filename": each.f_code.co_filename, "line": each.f_lineno}
        for each in outside[:LIVE_FRAMES]
    ]


#: Frames a dump gives the call in progress.
LIVE_FRAMES = 16


def _line(code: Any, offset: int) -> int:
    """The line of ``code`` that instruction ``offset`` (a frame's f_lasti) belongs to."""
    for start, end, line in code.co_lines():
        if start <= offset < end and line is not None:
            return int(line)
    return int(code.co_firstlineno)


#: compat's own source files (the whole package, this module being in compat/core): a frame in
#: one is compat's, not the caller's
_COMPAT_CODE = frozenset(
    os.path.join(root, name)
    for root, _, names in os.walk(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for name in names
    if name.endswith(".py")
)


# -- the process's recorder ---------------------------------------------------------------

_recorder: Recorder | None = None
#: (adapter, framework, backend, forget_choices) of the job compat has joined, for comms_log
_joined_job: tuple[Any, str, str, Callable[[], None]] | None = None


def trace_dir() -> str:
    return os.environ.get("COMPAT_TRACE_DIR") or os.path.join(tempfile.gettempdir(), "compat_trace")


def _int_setting(name: str, default: int) -> int:
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}: expected an int >= 0; got {text!r}") from None
    if value < 0:
        raise ValueError(f"{name}: expected an int >= 0; got {value}")
    return value


def start(
    adapter: Any, framework: str, backend: str, forget_choices: Callable[[], None]
) -> Recorder | None:
    """The recorder for a job compat has joined (None: recorder and log both off), with the
    signal handlers the environment asks for. ``forget_choices``: the state's, which
    :func:`comms_log` calls so that every collective is wrapped anew."""
    global _recorder, _joined_job
    if not _DTYPE_BYTES:
        _DTYPE_BYTES.update(tables.dtype_bytes())
    capacity = _int_setting("COMPAT_TRACE_ENTRIES", DEFAULT_ENTRIES)
    frames = _int_setting("COMPAT_TRACE_FRAMES", DEFAULT_FRAMES)
    log = os.environ.get("COMPAT_COMMS_LOG", "") not in ("", "0")
    _joined_job = (adapter, framework, backend, forget_choices)
    if capacity == 0 and not log:
        _recorder = None
        return None
    _recorder = Recorder(adapter, framework, backend, capacity, frames, log)
    _install_signals()
    return _recorder


def stop() -> None:
    """At destroy(): print the comms log where it is on, and forget the recorder."""
    global _recorder, _joined_job
    leaving = _recorder
    _joined_job = None
    if leaving is not None and leaving.log:
        print(comms_table(leaving), file=sys.stderr, flush=True)
    _recorder = None


def current() -> Recorder | None:
    return _recorder


def dump_trace(reason: str = "compat.trace.dump_trace()", directory: str | None = None) -> str:
    """Write this rank's flight-recorder dump now; return its path.

    Raises
    ------
    RuntimeError
        The recorder is off (``COMPAT_TRACE_ENTRIES=0``) or compat is not initialised.
    """
    if _recorder is None or not _recorder.recording:
        raise RuntimeError(
            "dump_trace: the flight recorder is off (compat is not initialised, or "
            "COMPAT_TRACE_ENTRIES=0)"
        )
    return _recorder.dump(reason, directory)


def note_mismatch(handle: Any, function: str, dtype: str | None, shape: Shape) -> None:
    """The pre-flight check refused this call: record it and dump (every rank of the group
    raises CollectiveMismatchError)."""
    if _recorder is not None and _recorder.recording:
        _recorder.note_mismatch(handle, function, dtype, shape)
        _recorder.dump(f"CollectiveMismatchError in {function}")


# -- the comms log ---------------------------------------------------------------------------


def comms_log(enable: bool = True) -> None:
    """Start (or stop, ``enable=False``) counting every collective's calls, bytes and time from
    now on, as ``COMPAT_COMMS_LOG=1`` does from init.

    Raises
    ------
    RuntimeError
        compat is not initialised.
    """
    global _recorder
    if _joined_job is None:
        raise RuntimeError("comms_log: compat is not initialised: call compat.init() first")
    adapter, framework, backend, forget_choices = _joined_job
    if _recorder is None:
        _recorder = Recorder(adapter, framework, backend, 0, 0, False)
    _recorder.log = {} if enable else None
    forget_choices()  # every collective is wrapped anew, with the log or without


def comms_log_rows() -> list[dict[str, Any]]:
    """The comms log's rows (op, bytes, algorithm, count, total_s, mean_us, algbw_GBps,
    busbw_GBps, ranks); empty when it is off."""
    return _recorder.log_rows() if _recorder is not None else []


def comms_table(recorder: Recorder | None = None) -> str:
    """The comms log as a table (what destroy() prints where the log is on)."""
    chosen = recorder or _recorder
    rows = chosen.log_rows() if chosen is not None else []
    rank = chosen.rank if chosen is not None else -1
    lines = [
        f"compat comms log, rank {rank}",
        f"{'op':<24}{'bytes':>12}  {'algorithm':<34}{'count':>8}{'total s':>11}"
        f"{'mean us':>11}{'algbw GB/s':>12}{'busbw GB/s':>12}",
    ]
    for row in rows:
        lines.append(
            f"{row['op']:<24}{row['bytes']:>12}  {row['algorithm']:<34}{row['count']:>8}"
            f"{row['total_s']:>11.6f}{row['mean_us']:>11.1f}{row['algbw_GBps']:>12.4f}"
            f"{row['busbw_GBps']:>12.4f}"
        )
    return "\n".join(lines)


def comms_log_text(fmt: str = "table") -> str:
    """The comms log as ``"table"``, ``"csv"`` or ``"json"``."""
    rows = comms_log_rows()
    if fmt == "json":
        return json.dumps(rows, indent=1)
    if fmt == "csv":
        out = io.StringIO()
        names = [
            "op",
            "bytes",
            "algorithm",
            "count",
            "total_s",
            "mean_us",
            "algbw_GBps",
            "busbw_GBps",
            "ranks",
        ]
        writer = csv.DictWriter(out, fieldnames=names)
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue()
    if fmt == "table":
        return comms_table()
    raise ValueError(f"fmt: expected 'table', 'csv' or 'json'; got {fmt!r}")


# -- signals ---------------------------------------------------------------------------------

_signals_installed = False


def _install_signals() -> None:
    """Dump on the signals the environment names: ``COMPAT_TRACE_SIGNAL`` (e.g. ``USR1``: dump
    and carry on) and, with ``COMPAT_TRACE_ON_STOP=1`` (set by ``compat launch``), SIGTERM and
    SIGINT (dump, then what the signal did before). A rank blocked in a collective runs no
    Python handler until it returns, so the dump is written by a thread that the signal wakes
    through ``signal.set_wakeup_fd``. Only from the main thread (where handlers can be set)."""
    global _signals_installed
    if _signals_installed or threading.current_thread() is not threading.main_thread():
        return
    wanted: dict[int, bool] = {}  # signal -> whether the process then stops
    name = os.environ.get("COMPAT_TRACE_SIGNAL", "")
    if name:
        spec = name.upper() if name.upper().startswith("SIG") else f"SIG{name.upper()}"
        number = getattr(signal, spec, None)
        if not isinstance(number, int):
            raise ValueError(f"COMPAT_TRACE_SIGNAL: expected a signal name (USR1); got {name!r}")
        wanted[number] = False
    if os.environ.get("COMPAT_TRACE_ON_STOP", "") not in ("", "0"):
        wanted[signal.SIGTERM] = True
        wanted[signal.SIGINT] = True
    if not wanted:
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        previous_fd = signal.set_wakeup_fd(write_end)
    except ValueError:
        os.close(read_end)
        os.close(write_end)
        return
    if previous_fd != -1:
        # Someone else (an event loop) listens there: leave theirs in place.
        signal.set_wakeup_fd(previous_fd)
        os.close(read_end)
        os.close(write_end)
        return
    ends: dict[int, bool] = {}  # signal -> whether the thread ends the process after its dump
    for number, stops in wanted.items():
        previous = signal.getsignal(number)
        _ours[number] = _handler(number, stops, previous)
        signal.signal(number, _ours[number])
        ends[number] = stops and previous == signal.SIG_DFL
    threading.Thread(target=_dump_on_wakeup, args=(read_end, ends), daemon=True).start()
    _signals_installed = True


#: When each signal last wrote a dump (time.monotonic()): the handler and the thread both try,
#: and the first one's (the stack at the signal) is kept.
_signal_dumps: dict[int, float] = {}
_signal_lock = threading.RLock()
#: compat's handler of each signal it handles
_ours: dict[int, Callable[[int, Any], None]] = {}


def _dump_for_signal(number: int) -> None:
    recorder = _recorder
    if recorder is None or not recorder.recording:
        return
    with _signal_lock:
        now = time.monotonic()
        if now - _signal_dumps.get(number, -10.0) < 2.0:
            return
        _signal_dumps[number] = now
    recorder.dump(f"signal {signal.Signals(number).name}")


def _handler(number: int, stops: bool, previous: Any) -> Callable[[int, Any], None]:
    def handle(signum: int, frame: Any) -> None:
        if not stops:
            _dump_for_signal(signum)
            return
        # The main thread got here: dump if the thread has not, then do what the signal did.
        _dump_for_signal(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return handle


def _dump_on_wakeup(read_end: int, ends: dict[int, bool]) -> None:
    """The thread that dumps on a signal. A signal whose default ends the process (SIGTERM)
    still ends it where the main thread, blocked in a collective, cannot run the handler: the
    exit status a shell gives a process that signal ended."""
    while True:
        try:
            data = os.read(read_end, 64)
        except OSError:
            return
        for number in data:
            if number in ends:
                _dump_for_signal(number)
            # Only while the handler is still compat's: one the program set since (a checkpoint
            # on preemption) decides itself when the process ends.
            if ends.get(number) and signal.getsignal(number) is _ours.get(number):
                time.sleep(1.0)  # the main thread's handler, if it can run, ends it first
                os._exit(128 + number)
