"""What runs each collective on each backend: ``mapping_tables/capabilities.toml``, resolved.

One form for every entry: a default (``impl``: the adapter's native method, an ``emulated``
algorithm of :mod:`compat.algorithms`, or ``unsupported``) and ``choose``, a list of choices by
dtype and input size that replace the default where they match; among the matching choices, the
one with the largest ``min_bytes`` not above the input's size wins. A choice marked ``one_host``
applies only to a group whose ranks share this host's memory
(:mod:`compat.transport.shared_memory`), and
there wins over the others. :func:`resolve` answers "what
runs?" (``compat bench`` and ``compat info`` print it); :func:`bind` turns the answer into the
callable the collectives call. :func:`check_contract` proves that every answer is callable: every
native entry names a method of :class:`compat.base.adapter.Adapter`, every algorithm a function of
:mod:`compat.algorithms` that takes that method's arguments after the adapter.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from functools import cache, partial
from typing import Any

from compat import algorithms
from compat.base import tables
from compat.base.adapter import Adapter
from compat.base.errors import TableError, UnsupportedError
from compat.base.types import ReduceOp
from compat.core import versions
from compat.transport import shared_memory

NATIVE = "native"
#: The ``async`` of a shared-memory choice whose asynchronous calls run on a thread of compat's
BACKGROUND = "background"

#: The collectives a capability entry exists for, each run with the arguments of this Adapter
#: method (an uneven all_gather takes all_gather's: a list of outputs of different dim 0; an
#: uneven reduce_scatter takes reduce_scatter's: a list of inputs of different dim 0; an uneven
#: all_to_all, lists whose tensors do not all have one shape). The uneven forms have entries of
#: their own because a backend can do one shape and not the other (HCCL's reduce_scatter kernel
#: and Gloo's alltoall: equal parts only, see capabilities.toml).
COLLECTIVES: dict[str, str] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "all_gather_uneven": "all_gather",
    "all_gather_into_tensor": "all_gather_into_tensor",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_uneven": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter_tensor",
    "broadcast": "broadcast",
    "scatter": "scatter",
    "gather": "gather",
    "reduce": "reduce",
    "all_to_all_single": "all_to_all_single",
    "all_to_all": "all_to_all",
    "all_to_all_uneven": "all_to_all",
    "send": "send",
    "recv": "recv",
    "isend": "isend",
    "irecv": "irecv",
    "batch_isend_irecv": "batch_isend_irecv",
    "barrier": "barrier",
    "monitored_barrier": "monitored_barrier",
}

#: The point-to-point collectives: their one_host choices use a window's channels, and only a
#: window made with its group (compat.core.state).
POINT_TO_POINT = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv"})


def backends(framework: str) -> dict[str, str]:
    """The backends of ``framework``: name -> key in capabilities.toml (names can repeat across
    frameworks: torch's nccl and MindSpore's nccl). An entry with a ``switch`` replaces another
    of its name only where its environment variable is set (:func:`backend_key`)."""
    return {
        entry.get("backend", key): key
        for key, entry in tables.load("capabilities").items()
        if entry["framework"] == framework and "switch" not in entry
    }


#: The prefix of the key of a backend compat has no entry for (``unverified:torch``): see
#: :func:`entry`.
UNVERIFIED = "unverified:"


def backend_key(framework: str, backend: str) -> str:
    """The capabilities.toml key of ``framework``'s ``backend``: an entry whose ``switch`` (an
    environment variable) is set to anything but "" or "0" wins over the plain one
    (COMPAT_MINDSPORE_PRIMITIVES: MCCL through MindSpore's ops primitives); for a backend the
    table has no entry for (torch's ``mpi``, Intel's ``ccl``, torch_npu's ``hccl``, one
    registered with ``torch.distributed.Backend.register_backend``) ``unverified:<framework>``."""
    for key, entry in tables.load("capabilities").items():
        if (
            entry["framework"] == framework
            and entry.get("backend", key) == backend
            and os.environ.get(entry.get("switch", ""), "") not in ("", "0")
        ):
            return key
    return backends(framework).get(backend, UNVERIFIED + framework)


def is_verified(key: str) -> bool:
    """Whether backend ``key`` has an entry of capabilities.toml (its facts were checked)."""
    return not key.startswith(UNVERIFIED)


@cache
def capability_entry(key: str) -> dict[str, Any]:
    """Backend ``key``'s capability entry. A backend compat has no entry for runs every
    collective natively (the framework's own call, no compat algorithm) on every dtype and op,
    and compat refuses nothing: the framework answers for it (``compat info`` says so)."""
    if is_verified(key):
        found: dict[str, Any] = tables.lookup("capabilities", key)
        return at_release(found, versions.running_release(found["framework"]))
    framework = key.removeprefix(UNVERIFIED)
    native = {"impl": NATIVE, "async": NATIVE, "verified": "unverified"}
    return {
        "framework": framework,
        "backend": "unverified",
        "dtypes": [
            name for name, dtype in tables.lookup("dtypes", "dtypes").items() if framework in dtype
        ],
        # the ops the framework spells (MindSpore has no bitwise ones)
        "reduce_ops": [
            op for op, spelled in tables.lookup("reduce_ops", "ops").items() if framework in spelled
        ],
        "ops": {collective: dict(native) for collective in COLLECTIVES},
    }


def at_release(entry: dict[str, Any], release: tuple[int, ...] | None) -> dict[str, Any]:
    """Backend ``entry`` (a capabilities.toml entry) as it holds at ``release`` of its framework:
    each of its ``before`` facts whose release is newer applies, the older boundary last (its op
    entries' keys replace the backend's, its ``emulate`` rules add up to the backend's own, which
    hold at every release); None: the newest facts."""
    applying = [
        facts
        for facts in entry.get("before", ())
        if release is not None and release[:3] < versions.release(facts["release"])
    ]
    if not applying:
        return entry
    ops = dict(entry["ops"])
    emulate: list[dict[str, Any]] = list(entry.get("emulate", ()))
    lacks: list[str] = []
    for facts in applying:  # the table lists them from the newest boundary down
        for collective, changed in facts.get("ops", {}).items():
            ops[collective] = {**ops[collective], **changed}
        emulate += facts.get("emulate", ())
        lacks += facts.get("lacks", ())
    return {**entry, "ops": ops, "emulate": emulate, "lacks": lacks}


def lacked_collectives(key: str) -> set[str]:
    """The collectives whose own call backend ``key`` has not at this framework release (its
    ``lacks``; compat's table runs each emulated there, which :func:`check_contract` checks)."""
    return set(capability_entry(key).get("lacks", ()))


def running() -> dict[str, dict[str, Any]]:
    """Every backend's entry as it holds for the installed release of its framework (the newest
    facts where the framework is not installed): what ``compat info`` reports."""
    return {key: capability_entry(key) for key in tables.load("capabilities")}


def _op_entry(key: str, collective: str) -> dict[str, Any]:
    op: dict[str, Any] = capability_entry(key)["ops"][collective]
    return op


def resolve(
    key: str,
    collective: str,
    dtype: str,
    nbytes: int,
    one_host: bool = False,
    ranks: int | None = None,
) -> str:
    """What runs ``collective`` on backend ``key`` (a capabilities.toml key) for a ``dtype``
    input of ``nbytes`` bytes: ``"native"`` or the name of a compat.algorithms function.
    ``one_host``: the group has a shared-memory window (:mod:`compat.transport.shared_memory`) and
    the
    tensors are in host memory, which the choices marked ``one_host`` need; ``ranks``: the
    group's size, which a choice's ``min_ranks`` and ``max_ranks`` bound (None: unknown, where
    only the choices bounded by neither apply).

    Raises
    ------
    UnsupportedError
        The backend cannot run it, not even by emulation; the message says why.
    """
    return choice(key, collective, dtype, nbytes, one_host, ranks)[0]


def choice(
    key: str,
    collective: str,
    dtype: str,
    nbytes: int,
    one_host: bool = False,
    ranks: int | None = None,
) -> tuple[str, str]:
    """:func:`resolve`'s answer and how it runs with ``async_op=True`` (the table's ``async``:
    "native", "completed", "deferred", "background" or "progress")."""
    entry = _op_entry(key, collective)
    choices = _choices(entry, dtype, one_host, ranks)
    # A one_host choice that applies wins over the others: it replaces the backend's transport.
    for candidates in ([choice for choice in choices if choice.get("one_host")], choices):
        fitting = [choice for choice in candidates if choice["min_bytes"] <= nbytes]
        if fitting:
            chosen = max(fitting, key=lambda choice: choice["min_bytes"])
            return str(chosen["algorithm"]), str(chosen.get("async", entry["async"]))
    return entry_choice(key, collective)


def entry_choice(key: str, collective: str) -> tuple[str, str]:
    """:func:`choice` without the table's choices by size: the collective's own entry (the
    backend's call, or the emulation where it has none)."""
    entry = _op_entry(key, collective)
    if entry["impl"] == "unsupported":
        # Backend names repeat across frameworks (torch's nccl, MindSpore's nccl): name both.
        backend_entry = tables.lookup("capabilities", key)  # unsupported: a table entry
        backend = backend_entry.get("backend", key)
        raise UnsupportedError(
            f"{collective} is not supported by {backend_entry['framework']}'s {backend} backend: "
            f"{entry['reason']}"
        )
    name = NATIVE if entry["impl"] == NATIVE else str(entry["algorithm"])
    return name, str(entry["async"])


def runs_as(key: str, collective: str, name: str) -> str:
    """How ``name`` (a :func:`resolve` answer) runs ``collective`` on backend ``key``:
    ``"native"``, ``"shared memory"`` (a choice marked one_host) or ``"emulated"`` (the flight
    recorder records it, compat.core.recorder)."""
    if name == NATIVE:
        return NATIVE
    entry = tables.lookup("capabilities", key, "ops", collective)
    if any(c.get("one_host") and c["algorithm"] == name for c in entry.get("choose", ())):
        return "shared memory"
    return "emulated"


def size_thresholds(
    key: str, collective: str, dtype: str, one_host: bool = False, ranks: int | None = None
) -> list[int]:
    """The input sizes (bytes) at which the choice for ``dtype`` can change, ascending, from 0."""
    entry = _op_entry(key, collective)
    choices = _choices(entry, dtype, one_host, ranks)
    return sorted({0, *(choice["min_bytes"] for choice in choices)})


def wants_one_host(key: str, collective: str) -> bool:
    """True if a choice for ``collective`` on backend ``key`` needs a shared-memory window: the
    caller then finds out whether the group has one (a collective on its first use)."""
    entry = _op_entry(key, collective)
    return any(choice.get("one_host", False) for choice in entry.get("choose", ()))


def _choices(
    entry: dict[str, Any], dtype: str, one_host: bool, ranks: int | None
) -> list[dict[str, Any]]:
    return [
        choice
        for choice in entry.get("choose", ())
        if dtype in choice.get("dtypes", (dtype,))
        and (one_host or not choice.get("one_host"))
        and _fits(choice, ranks)
    ]


def _fits(choice: dict[str, Any], ranks: int | None) -> bool:
    """Whether ``choice`` applies to a group of ``ranks``: within its ``min_ranks`` and
    ``max_ranks``. A group of unknown size (None) takes only the choices bounded by neither:
    a bounded one was chosen for other sizes, and a one-rank algorithm refuses more ranks."""
    if ranks is None:
        return "min_ranks" not in choice and "max_ranks" not in choice
    return bool(choice.get("min_ranks", ranks) <= ranks <= choice.get("max_ranks", ranks))


def bind(
    adapter: Adapter,
    collective: str,
    name: str,
    asynchrony: str = NATIVE,
    key: str | None = None,
) -> Callable[..., Any]:
    """The callable that runs ``collective`` as ``name`` (a :func:`resolve` answer) on
    ``adapter``: its native method, or the algorithm with the adapter as first argument; one
    whose ``asynchrony`` is "background" runs through its group's window in issue order
    (:func:`compat.transport.shared_memory.in_issue_order`). On backend ``key``, a call with a
    ReduceOp the backend lacks at this release (an ``emulate`` rule that replaces ``name``)
    runs the rule's algorithm instead."""
    run = _bound(adapter, collective, name, asynchrony)
    emulated: dict[ReduceOp, Callable[..., Any]] = {
        ReduceOp(op): partial(getattr(algorithms, algorithm), adapter)
        for op, algorithm in ([] if key is None else emulations(key, collective, name))
    }
    if not emulated:
        return run
    position = _parameters(getattr(Adapter, COLLECTIVES[collective]), 1).index("op")
    by_op = partial(_by_op, run, emulated, position)
    by_op.__wrapped__ = run  # type: ignore[attr-defined]  # what runs the other ops: inspect.unwrap
    return by_op


def _bound(adapter: Adapter, collective: str, name: str, asynchrony: str) -> Callable[..., Any]:
    if name == NATIVE:
        method: Callable[..., Any] = getattr(adapter, COLLECTIVES[collective])
        return method
    if asynchrony == BACKGROUND:
        return partial(shared_memory.in_issue_order, getattr(algorithms, name), adapter)
    return partial(getattr(algorithms, name), adapter)


def _by_op(
    run: Callable[..., Any],
    emulated: dict[ReduceOp, Callable[..., Any]],
    position: int,
    *args: Any,
    **kwargs: Any,
) -> Any:
    """``run``, or the emulation of the call's ReduceOp where the backend lacks it."""
    op = args[position] if len(args) > position else kwargs["op"]
    return emulated.get(op, run)(*args, **kwargs)


def lacked_ops(key: str, collective: str) -> set[str]:
    """The ReduceOps (values) whose ``collective`` backend ``key``'s own call lacks at this
    framework release, or gets wrong (its ``emulate`` rules; compat runs them emulated)."""
    return {
        op
        for rule in capability_entry(key).get("emulate", ())
        if rule["collective"] == collective
        for op in rule["ops"]
    }


def emulations(key: str, collective: str, name: str) -> list[tuple[str, str]]:
    """(ReduceOp value, algorithm) for each op whose calls of ``collective`` run as ``name``
    would reach a reduction backend ``key`` lacks at this framework release (its ``emulate``
    rules), so that the algorithm runs them instead."""
    return [
        (op, rule["algorithm"])
        for rule in capability_entry(key).get("emulate", ())
        if rule["collective"] == collective and name in rule["replaces"]
        for op in rule["ops"]
    ]


# -- the contract: every name the table gives resolves to something that exists -----------------


def check_contract(table: dict[str, Any] | None = None) -> None:
    """Check that every entry of ``table`` (default: the shipped capabilities.toml) names what
    exists: a native entry a method of Adapter, an algorithm a function of compat.algorithms
    with that method's parameters after ``adapter``, at every release its ``before`` facts
    describe; and that every backend has an entry for every collective. Raises TableError
    naming the entry."""
    table = tables.load("capabilities") if table is None else table
    for backend, entry in table.items():
        missing = [name for name in COLLECTIVES if name not in entry["ops"]]
        if missing:
            raise TableError(f"capabilities.toml: {backend}.ops has no entry for {missing}")
        for rule in entry.get("emulate", ()):
            _check_emulation(f"capabilities.toml: {backend}.emulate", rule)
        for index, facts in enumerate(entry.get("before", ())):
            where = f"capabilities.toml: {backend}.before[{index}]"
            # the facts of the releases just before this boundary: this one's and newer ones'
            older = at_release(entry, (*versions.release(facts["release"])[:2], -1))
            for collective in facts.get("ops", {}):
                _check_entry(f"{where}.ops.{collective}", collective, older["ops"][collective])
            for rule in facts.get("emulate", ()):
                _check_emulation(f"{where}.emulate", rule)
            for collective in facts.get("lacks", ()):
                _check_lacked(f"{where}.lacks", collective, older["ops"].get(collective))
        for collective, cap in entry["ops"].items():
            _check_entry(f"capabilities.toml: {backend}.ops.{collective}", collective, cap)
        _check_unspelled_ops(backend, entry)


def _check_unspelled_ops(backend: str, entry: dict[str, Any]) -> None:
    """Every ReduceOp the backend takes that its framework has no spelling for (reduce_ops.toml:
    MindSpore's bitwise ops) has an ``emulate`` rule for each implementation that would hand it
    to the framework: "native" and :data:`compat.algorithms.HANDS_OP_TO_BACKEND`."""
    spelled = tables.lookup("reduce_ops", "ops")
    unspelled = [op for op in entry["reduce_ops"] if entry["framework"] not in spelled[op]]
    for collective, cap in entry["ops"].items():
        if "op" not in _parameters(getattr(Adapter, COLLECTIVES[collective]), 1):
            continue
        names = {cap.get("algorithm", cap["impl"])} | {
            c["algorithm"] for c in cap.get("choose", ())
        }
        for name in sorted(names & (algorithms.HANDS_OP_TO_BACKEND | {NATIVE})):
            covered = {
                op
                for rule in entry.get("emulate", ())
                if rule["collective"] == collective and name in rule["replaces"]
                for op in rule["ops"]
            }
            missing = [op for op in unspelled if op not in covered]
            if missing:
                raise TableError(
                    f"capabilities.toml: {backend}.ops.{collective}: {name} would hand "
                    f"{missing} to {entry['framework']}, which has no such op; expected an "
                    f"emulate rule for them that replaces {name!r}"
                )


def _check_entry(where: str, collective: str, cap: dict[str, Any]) -> None:
    """One op entry: a known collective; every name it runs exists and takes its arguments."""
    if collective not in COLLECTIVES:
        raise TableError(f"{where}: unknown collective; known: {sorted(COLLECTIVES)}")
    choices = cap.get("choose", ())
    for index, choice in enumerate(choices):
        most = algorithms.MOST_RANKS.get(choice["algorithm"])
        if most is not None and choice.get("max_ranks", most + 1) > most:
            raise TableError(
                f"{where}.choose[{index}]: {algorithms.runs_at_most(choice['algorithm'])}"
                f"; expected max_ranks <= {most}, got {choice.get('max_ranks', 'none')}"
            )
    names = [choice["algorithm"] for choice in choices]
    if cap["impl"] == "emulated":
        if cap["algorithm"] in algorithms.MOST_RANKS:
            raise TableError(
                f"{where}.algorithm: {algorithms.runs_at_most(cap['algorithm'])}; the "
                "default runs every group: choose it with max_ranks instead"
            )
        names.append(cap["algorithm"])
    elif cap["impl"] == NATIVE:
        names.append(NATIVE)
    _check_names(where, collective, names)


def _check_emulation(where: str, rule: dict[str, Any]) -> None:
    """An emulate rule: a reducing collective, and algorithms that take its arguments."""
    collective = rule["collective"]
    if collective not in COLLECTIVES:
        raise TableError(f"{where}: unknown collective {collective!r}")
    if "op" not in _parameters(getattr(Adapter, COLLECTIVES[collective]), 1):
        raise TableError(f"{where}: {collective} takes no ReduceOp")
    if rule["algorithm"] in algorithms.MOST_RANKS:
        raise TableError(f"{where}: {algorithms.runs_at_most(rule['algorithm'])}")
    _check_names(where, collective, [rule["algorithm"], *rule["replaces"]])


def _check_lacked(where: str, collective: str, cap: dict[str, Any] | None) -> None:
    """A collective the backend lacks at a release runs no native call there."""
    if cap is None:
        raise TableError(f"{where}: unknown collective {collective!r}")
    names = [cap["impl"]] + [choice["algorithm"] for choice in cap.get("choose", ())]
    if NATIVE in names:
        raise TableError(f"{where}: {collective} lacks a call of its own there, yet runs native")


def _check_names(where: str, collective: str, names: list[str]) -> None:
    for name in names:
        problem = _problem(COLLECTIVES[collective], name)
        if problem:
            raise TableError(f"{where}: {problem}")


@cache
def _parameters(function: Callable[..., Any], skip: int) -> tuple[str, ...]:
    return tuple(inspect.signature(function).parameters)[skip:]


def problem(collective: str, name: str, ranks: int | None = None) -> str | None:
    """Why ``name`` (an algorithm of compat.algorithms, or ``"native"``) cannot run
    ``collective``'s calls (an entry of the table) in a group of ``ranks`` (None: of any size
    it runs), or None if it can."""
    found = _problem(COLLECTIVES[collective], name)
    if found is None and ranks is not None:
        found = algorithms.group_too_large(name, ranks)
    return found


def _problem(method: str, name: str) -> str | None:
    """Why ``name`` cannot run adapter method ``method``'s calls, or None if it can."""
    native = getattr(Adapter, method, None)
    if native is None:
        return f"the adapter interface has no method {method!r}"
    if name == NATIVE:
        return None
    function = getattr(algorithms, name, None)
    if not inspect.isfunction(function):
        return f"compat.algorithms has no function {name!r}"
    expected = _parameters(native, 1)
    if _parameters(function, 1) != expected:
        return (
            f"algorithm {name!r} takes {list(_parameters(function, 1))} after the adapter; "
            f"expected Adapter.{method}'s {list(expected)}"
        )
    return None
