"""The schema of the mapping tables: what keys each ``mapping_tables/*.toml`` holds, of which types.

:func:`compat.base.tables.load` runs :func:`validate` on every table it reads, so a malformed table
is a
:class:`compat.base.errors.TableError` naming the file and the key, never a KeyError deep in an
adapter
or a doc that silently misses a row. The structure is data too: one spec per kind of table
(:data:`SPECS`); API-family tables (``api_<family>.toml``) share :data:`FAMILY`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compat.base import table_files
from compat.base.errors import TableError

#: Tables whose name starts with this describe one API family (see :data:`FAMILY`).
FAMILY_PREFIX = "api_"


@dataclass(frozen=True)
class Scalar:
    """A value of ``kind``; with ``choices``, one of them."""

    kind: type
    choices: tuple[Any, ...] = ()

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(repr(choice) for choice in self.choices)
        return {str: "a string", int: "an integer", bool: "true or false"}[self.kind]


@dataclass(frozen=True)
class ListOf:
    """A list whose items are ``item``."""

    item: Scalar

    def describe(self) -> str:
        return f"a list of {self.item.describe()}s"


@dataclass(frozen=True)
class Record:
    """A table with exactly these keys; ``required`` ones must be present."""

    required: Mapping[str, Spec] = field(default_factory=dict)
    optional: Mapping[str, Spec] = field(default_factory=dict)

    def describe(self) -> str:
        return "a table"


@dataclass(frozen=True)
class MapOf:
    """A table of any keys, each value a ``value``."""

    value: Spec

    def describe(self) -> str:
        return "a table"


@dataclass(frozen=True)
class ArrayOf:
    """An array of tables (``[[name]]``), each a ``item``."""

    item: Record

    def describe(self) -> str:
        return "an array of tables"


Spec = Scalar | ListOf | Record | MapOf | ArrayOf

TEXT = Scalar(str)

REDUCE_OPS = Record(
    required={
        "ops": MapOf(
            Record(
                required={"aliases": ListOf(TEXT), "torch": TEXT, "numpy": TEXT},
                # mindspore: absent where MindSpore has no such op; mindspore_elementwise: the
                # mindspore.ops function MindSpore reduces with where mint's elementwise one has
                # no CPU kernel; integer_only: integer and bool dtypes only (the bitwise ops)
                optional={
                    "mindspore": TEXT,
                    "elementwise": TEXT,
                    "mindspore_elementwise": TEXT,
                    "integer_only": Scalar(bool, (True,)),
                },
            )
        )
    }
)

DTYPES = Record(
    required={
        "dtypes": MapOf(
            Record(
                required={
                    "kind": Scalar(str, ("float", "int", "bool", "complex", "float8")),
                    "bytes": Scalar(int),
                },
                optional={"torch": TEXT, "mindspore": TEXT, "numpy": TEXT, "real": TEXT},
            )
        )
    }
)

FRAMEWORKS = MapOf(
    Record(
        required={
            "module": TEXT,
            "tensor": TEXT,
            "adapter": TEXT,
            "launcher_env": ListOf(TEXT),
            "default_backend": ArrayOf(Record(required={"backend": TEXT, "when": TEXT})),
            "bench_sizes": TEXT,
            "tested_versions": Record(required={"oldest": TEXT, "newest": TEXT}),
            "launch": Record(
                required={"env": MapOf(TEXT), "rank_env": MapOf(TEXT)},
                optional={
                    "scheduler": Record(required={"env": MapOf(TEXT), "code": TEXT}),
                    "quiet_env": MapOf(TEXT),
                    "devices_env": MapOf(TEXT),
                    "devices": MapOf(
                        Record(required={"count": TEXT, "visible": TEXT, "nodes": TEXT})
                    ),
                },
            ),
        },
        optional={
            "device_comm": Record(required={"module": TEXT, "device": TEXT}),
            "initialized": TEXT,
            "backend_aliases": MapOf(TEXT),
            "local_rank_env": ListOf(TEXT),
            "rendezvous_env": ListOf(TEXT),
        },
    )
)

#: The placeholders of ``[<framework>.launch]`` environment templates (see compat.tools.launch).
LAUNCH_FIELDS = ("rank", "local_rank", "world", "port", "device", "devices")

# A size-dependent choice: from ``min_bytes`` of input up, ``algorithm`` ("native" or a
# compat.algorithms function) runs instead of the entry's own implementation (the choice with the
# largest min_bytes not above the input's size wins; ``dtypes`` limits a choice to those dtypes;
# ``one_host`` to groups whose ranks share a host's memory, for tensors in it: shared_memory;
# ``min_ranks``/``max_ranks`` to groups of at least/at most that many ranks).
CHOICE = Record(
    required={"algorithm": TEXT, "min_bytes": Scalar(int), "reason": TEXT},
    optional={
        "dtypes": ListOf(TEXT),
        "async": Scalar(str, ("native", "completed", "deferred", "background", "progress")),
        "one_host": Scalar(bool),
        "min_ranks": Scalar(int),
        "max_ranks": Scalar(int),
    },
)

#: How a capability entry's facts were established (its ``verified`` key): run on this kind of
#: host by the test its ``source`` names (the first value, the default), or only read in the
#: framework's source or documentation its ``source`` cites (never run here: no GPU or NPU).
VERIFIED = ("measured", "read")

CAPABILITY = Record(
    required={
        "impl": Scalar(str, ("native", "emulated", "unsupported")),
        "async": Scalar(str, ("native", "completed", "deferred", "background", "progress")),
        "source": TEXT,
    },
    optional={
        "algorithm": TEXT,
        "reason": TEXT,
        "choose": ArrayOf(CHOICE),
        "verified": Scalar(str, VERIFIED),
    },
)

#: What the ``source`` of an entry a test runs starts with: the name of that test follows.
MEASURED_PREFIX = "measured: "

#: A backend's rule for all_reduce_coalesced as one buffer (compat.collectives._coalesces): up
#: to ``max_bytes`` in all on the backend's own transport; through shared memory, from
#: ``one_host_min_tensors`` tensors holding elements, of up to ``one_host_max_mean_bytes`` each
#: on average (absent: one all_reduce per tensor there).
COALESCE = Record(
    required={"max_bytes": Scalar(int), "reason": TEXT},
    optional={"one_host_min_tensors": Scalar(int), "one_host_max_mean_bytes": Scalar(int)},
)

#: The collectives of a compat.coalescing_manager block that compat does not batch on a backend:
#: the block's end issues their calls one after another, in issue order (an emulation of torch's
#: one coalesced call; compat.collectives.coalescing_manager refuses a kind not listed).
COALESCED_IN_ORDER = Record(required={"collectives": ListOf(TEXT), "reason": TEXT, "source": TEXT})

#: dtypes of one byte a backend lacks that compat's non-reducing collectives move as their bytes:
#: a uint8 view of the same memory, same shape (compat.core.layout.Staging); no op reduces them.
AS_BYTES = Record(required={"dtypes": ListOf(TEXT), "reason": TEXT, "source": TEXT})
AS_REAL = Record(
    required={"dtypes": ListOf(TEXT), "reduce_ops": ListOf(TEXT), "reason": TEXT, "source": TEXT}
)

#: An emulation a backend needs for some ReduceOps (at every release, in the backend's own
#: ``emulate``; at older releases, in a ``before`` entry's): calls of ``collective`` with one of
#: ``ops`` that would reach the backend's own reduction (the implementations in ``replaces``:
#: "native" or an algorithm that calls the backend's reduction with the op) run ``algorithm``
#: instead (compat.core.capabilities.bind).
EMULATION = Record(
    required={
        "collective": TEXT,
        "ops": ListOf(TEXT),
        "replaces": ListOf(TEXT),
        "algorithm": TEXT,
        "reason": TEXT,
    }
)

#: A backend's facts at the framework's releases older than ``release``: its ``ops`` entries
#: replace those keys of the backend's (compat.core.capabilities.at_release), and its
#: ``emulate`` rules apply.
BEFORE = Record(
    required={"release": TEXT, "verified": Scalar(str, VERIFIED), "source": TEXT},
    optional={
        "ops": MapOf(Record(optional={**CAPABILITY.required, **CAPABILITY.optional})),
        "emulate": ArrayOf(EMULATION),
        # the collectives whose own call the backend has not at those releases
        "lacks": ListOf(TEXT),
    },
)

#: A compat API the framework has no counterpart of (torch's tensor parallelism on MindSpore),
#: which compat emulates on the backend's collectives: ``implementation`` is the compat object
#: that runs (``module:name``), ``reason`` what it does and what differs from torch's.
EMULATED_API = Record(
    required={"implementation": TEXT, "reason": TEXT, "source": TEXT},
    optional={"verified": Scalar(str, VERIFIED)},
)

CAPABILITIES = MapOf(
    Record(
        required={
            "framework": TEXT,
            "device": TEXT,
            "source": TEXT,
            "dtypes": ListOf(TEXT),
            "dtypes_source": TEXT,
            "reduce_ops": ListOf(TEXT),
            "reduce_ops_source": TEXT,
            "views": TEXT,
            "ops": MapOf(CAPABILITY),
        },
        optional={
            "backend": TEXT,
            "device_target": TEXT,
            "coalesce": COALESCE,
            "coalesced_in_order": COALESCED_IN_ORDER,
            "as_bytes": AS_BYTES,
            "as_real": AS_REAL,
            # an environment variable: where it is set, this entry replaces the backend's plain
            # one (compat.core.capabilities.backend_key)
            "switch": TEXT,
            # ReduceOps the backend's own reduction lacks at every release, each emulated
            "emulate": ArrayOf(EMULATION),
            # facts of the framework's older releases, newest boundary first
            "before": ArrayOf(BEFORE),
            # compat APIs the framework lacks, emulated on the backend's collectives
            "emulated_apis": MapOf(EMULATED_API),
        },
    )
)

PARAM = Record(required={"type": TEXT, "meaning": TEXT}, optional={"default": TEXT})

# kind "object": a value, not a callable (torch.distributed.group.WORLD); like a class, it has no
# signature or params.
API = Record(
    required={
        "framework": TEXT,
        "kind": Scalar(str, ("function", "primitive", "class", "object")),
        "returns": TEXT,
        "source": TEXT,
    },
    optional={
        "signature": TEXT,
        "params": MapOf(PARAM),
        "inputs": TEXT,
        "deprecated": TEXT,
        "methods": ListOf(TEXT),
        "lacks": ListOf(TEXT),
        "note": TEXT,
    },
)

# A row's optional keys beyond the two sides and compat's cell:
# - compat_param: the parameter of the pair's compat function that serves a param row ("": none),
#   where it is not the torch (or MindSpore) parameter of the same name of a function compat
#   names alike (compat.tools.docs.compat_param); the cell's name, default and keyword-only
#   mark are generated from compat's recorded signature, which tests/test_tables.py checks.
# - checked_by: the tests ("tests/<file>.py::<function>": a test, a rank case, or a port
#   fixture's function, which tests/test_port_fixtures.py runs ported) that check the behaviour
#   compat's cell describes; tests/test_compat_column.py checks that each exists and mentions
#   the compat function (or what the cell names).
ROW = Record(
    required={"kind": Scalar(str, ("param", "return", "behaviour")), "difference": TEXT},
    optional={
        "torch": TEXT,
        "mindspore": TEXT,
        "topic": TEXT,
        "compat": TEXT,
        "compat_param": TEXT,
        "checked_by": ListOf(TEXT),
    },
)

# A pair's optional keys:
# - compat: the compat function (or type) that serves both sides.
# - port = true: of the pairs of one torch API, the one whose compat function `compat port`
#   rewrites that API to (exactly one where a torch API has several pairs that name a compat
#   function; needs compat).
# - result: present only where compat's function returns something other than torch's API for
#   the same call; says how (e.g. torch.distributed.recv returns the sender's rank, compat.recv
#   None). Needs compat.
# - needs_one_of: compat's parameters of which a call must pass one where torch's defaults mean
#   something compat does not do (recv's src=None: any source); `compat port` leaves a call that
#   passes none of them.
# - template: the compat expression `compat port` writes for a call of a torch function that has
#   no compat function of its own, with {param} for the call's argument of torch's parameter
#   param and, after "|", what a parameter the call leaves out stands for ("group=None"):
#   "compat.get_rank({group}) < 0 | group=None". Needs compat (the function or object it uses).
# - ops: the compat.ReduceOp members (names) with which compat's function behaves as torch's
#   API (its op parameter); `compat port` leaves a call passing another op on torch. Absent:
#   every op compat has. Needs compat.
PAIR = Record(
    required={"torch": TEXT, "mindspore": TEXT, "note": TEXT, "rows": ArrayOf(ROW)},
    optional={
        "compat": TEXT,
        "port": Scalar(bool, (True,)),
        "result": TEXT,
        "needs_one_of": ListOf(TEXT),
        "template": TEXT,
        "ops": ListOf(TEXT),
    },
)

# A class whose constructor users do not call (ReduceOp) records no signature.
COMPAT_API = Record(
    required={"returns": TEXT, "torch": TEXT, "mindspore": TEXT},
    optional={"signature": TEXT, "note": TEXT},
)

SNIPPET = Record(
    required={"torch": TEXT, "mindspore": TEXT, "compat": TEXT},
    optional={
        "torch_cpu_error": TEXT,
        "mindspore_cpu_error": TEXT,
        "mindspore_not_run": TEXT,
        "compat_requires": TEXT,
    },
)

FAMILY = Record(
    required={
        "family": TEXT,
        "title": TEXT,
        "section": TEXT,
        "order": Scalar(int),
        "summary": TEXT,
        "compat": MapOf(COMPAT_API),
        "apis": MapOf(API),
        "pairs": ArrayOf(PAIR),
        "snippet": SNIPPET,
    },
    optional={"notes": ListOf(TEXT)},
)

#: What compat leaves out of the communication modules, by module, with the reason.
LEFT_OUT = Record(
    required={
        "left_out": ArrayOf(
            Record(required={"module": TEXT, "names": ListOf(TEXT), "reason": TEXT})
        )
    }
)

#: The spec of each table that is not an API family.
SPECS: dict[str, Spec] = {
    "left_out": LEFT_OUT,
    "reduce_ops": REDUCE_OPS,
    "dtypes": DTYPES,
    "frameworks": FRAMEWORKS,
    "capabilities": CAPABILITIES,
}


def spec_of(name: str) -> Spec:
    """The spec of table ``name`` (an API family if it starts with :data:`FAMILY_PREFIX`)."""
    if name.startswith(FAMILY_PREFIX):
        return FAMILY
    try:
        return SPECS[name]
    except KeyError:
        raise TableError(
            f"mapping table {name}.toml: no schema for a table of that name; expected one of "
            f"{sorted(SPECS)} or {FAMILY_PREFIX}<family>"
        ) from None


class _Where:
    """The file and dotted key path an error message names."""

    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, key: str, message: str) -> TableError:
        return TableError(f"mapping table {self.name}.toml, key {key or '<top>'!r}: {message}")


def _join(key: str, child: str | int) -> str:
    if isinstance(child, int):
        return f"{key}[{child}]"
    return f"{key}.{child}" if key else child


def _check(where: _Where, key: str, spec: Spec, node: Any) -> None:
    if isinstance(spec, Scalar):
        # TOML has no bool-vs-int ambiguity, but Python does: True is an int.
        if not isinstance(node, spec.kind) or isinstance(node, bool) is not (spec.kind is bool):
            raise where.fail(key, f"expected {spec.describe()}, got {node!r}")
        if spec.choices and node not in spec.choices:
            raise where.fail(key, f"expected {spec.describe()}, got {node!r}")
    elif isinstance(spec, ListOf):
        if not isinstance(node, list):
            raise where.fail(key, f"expected {spec.describe()}, got {node!r}")
        for index, item in enumerate(node):
            _check(where, _join(key, index), spec.item, item)
    elif isinstance(spec, ArrayOf):
        if not isinstance(node, list) or not node:
            raise where.fail(key, f"expected a non-empty {spec.describe()}, got {node!r}")
        for index, item in enumerate(node):
            _check(where, _join(key, index), spec.item, item)
    elif isinstance(spec, MapOf):
        if not isinstance(node, dict):
            raise where.fail(key, f"expected {spec.describe()}, got {node!r}")
        for child, value in node.items():
            _check(where, _join(key, child), spec.value, value)
    else:
        _check_record(where, key, spec, node)


def _check_record(where: _Where, key: str, spec: Record, node: Any) -> None:
    if not isinstance(node, dict):
        raise where.fail(key, f"expected a table, got {node!r}")
    allowed = {**spec.required, **spec.optional}
    for child in node:
        if child not in allowed:
            raise where.fail(_join(key, child), f"unknown key; expected one of {sorted(allowed)}")
    for child in spec.required:
        if child not in node:
            raise where.fail(_join(key, child), "missing (required)")
    for child, value in node.items():
        _check(where, _join(key, child), allowed[child], value)


def _known(name: str, *keys: str) -> set[str]:
    """The keys of another table, for cross-references (read as parsed: loading it through
    compat.base.tables would validate it, and tables imports this module)."""
    node: Any = table_files.lookup(table_files.read(name), name, *keys)
    return set(node)


def _check_subset(where: _Where, key: str, values: list[str], known: set[str], what: str) -> None:
    unknown = [value for value in values if value not in known]
    if unknown:
        raise where.fail(key, f"unknown {what} {unknown}; known: {sorted(known)}")


def _check_capabilities(where: _Where, table: dict[str, Any]) -> None:
    frameworks = _known("frameworks")
    dtypes = _known("dtypes", "dtypes")
    ops = _known("reduce_ops", "ops")
    for backend, entry in table.items():
        if entry["framework"] not in frameworks:
            raise where.fail(
                f"{backend}.framework",
                f"unknown framework {entry['framework']!r}; known: {sorted(frameworks)}",
            )
        _check_subset(where, f"{backend}.dtypes", entry["dtypes"], dtypes, "dtypes")
        _check_subset(where, f"{backend}.reduce_ops", entry["reduce_ops"], ops, "ReduceOps")
        _check_as_bytes(where, backend, entry)
        _check_as_real(where, backend, entry)
        for op, cap in entry["ops"].items():
            key = f"{backend}.ops.{op}"
            # An emulation must name the algorithm that runs it and say why it is needed.
            if cap["impl"] == "emulated" and "algorithm" not in cap:
                raise where.fail(f"{key}.algorithm", "missing (required when impl = 'emulated')")
            if cap["impl"] != "native" and "reason" not in cap:
                raise where.fail(f"{key}.reason", f"missing (required when impl = {cap['impl']!r})")
            _check_verified(where, key, cap)
            _check_choices(where, key, cap.get("choose", []), dtypes)
        for name, api in entry.get("emulated_apis", {}).items():
            _check_verified(where, f"{backend}.emulated_apis.{name}", api)
        for rule_index, rule in enumerate(entry.get("emulate", [])):
            key = f"{backend}.emulate[{rule_index}].ops"
            _check_subset(where, key, rule["ops"], set(entry["reduce_ops"]), "ReduceOps")
        _check_before(where, backend, entry.get("before", []), ops)


def _check_as_bytes(where: _Where, backend: str, entry: dict[str, Any]) -> None:
    """``as_bytes``: dtypes of one byte that no op reduces, which the backend lacks (a dtype it
    takes needs no bytes), and which uint8, the dtype they travel as, is one of."""
    carried = entry.get("as_bytes", {}).get("dtypes", [])
    known: dict[str, Any] = table_files.lookup(table_files.read("dtypes"), "dtypes", "dtypes")
    key = f"{backend}.as_bytes.dtypes"
    _check_subset(where, key, carried, set(known), "dtypes")
    for name in carried:
        if known[name]["bytes"] != 1 or known[name]["kind"] != "float8":
            raise where.fail(key, f"{name}: only dtypes of one byte and kind float8 travel so")
        if name in entry["dtypes"]:
            raise where.fail(key, f"{name} is in {backend}.dtypes: the backend moves it itself")
    if carried and "uint8" not in entry["dtypes"]:
        raise where.fail(key, f"the bytes travel as uint8, which {backend}.dtypes lacks")


def _check_as_real(where: _Where, backend: str, entry: dict[str, Any]) -> None:
    """``as_real``: complex dtypes the backend lacks, whose real dtype (dtypes.toml's ``real``,
    as which they travel) it takes, reduced by some of the backend's ReduceOps."""
    rule = entry.get("as_real", {})
    known: dict[str, Any] = table_files.lookup(table_files.read("dtypes"), "dtypes", "dtypes")
    key = f"{backend}.as_real"
    _check_subset(where, f"{key}.dtypes", rule.get("dtypes", []), set(known), "dtypes")
    for name in rule.get("dtypes", []):
        if known[name]["kind"] != "complex":
            raise where.fail(f"{key}.dtypes", f"{name}: only dtypes of kind complex travel so")
        if name in entry["dtypes"]:
            raise where.fail(f"{key}.dtypes", f"{name} is in {backend}.dtypes: it moves it itself")
        if known[name]["real"] not in entry["dtypes"]:
            raise where.fail(
                f"{key}.dtypes", f"{name} travels as {known[name]['real']}, not in {backend}.dtypes"
            )
    ops = set(entry["reduce_ops"])
    _check_subset(where, f"{key}.reduce_ops", rule.get("reduce_ops", []), ops, "ReduceOps")


def _check_dtypes(where: _Where, table: dict[str, Any]) -> None:
    """A complex dtype names its real dtype: a float dtype of half its size."""
    dtypes = table["dtypes"]
    for name, entry in dtypes.items():
        real = entry.get("real")
        if (entry["kind"] == "complex") is not (real is not None):
            raise where.fail(f"dtypes.{name}.real", "expected exactly on the complex dtypes")
        if real is not None and (
            real not in dtypes
            or dtypes[real]["kind"] != "float"
            or 2 * dtypes[real]["bytes"] != entry["bytes"]
        ):
            raise where.fail(
                f"dtypes.{name}.real", f"{real!r}: expected a float dtype of half its size"
            )


def _check_before(where: _Where, backend: str, before: list[dict[str, Any]], ops: set[str]) -> None:
    """Older releases' facts: releases as "2.8.0", newest first; every replaced op entry and
    emulation about a collective the backend has, with known ReduceOps."""
    previous: tuple[int, ...] | None = None
    for index, facts in enumerate(before):
        key = f"{backend}.before[{index}]"
        if not re.fullmatch(r"\d+\.\d+\.\d+", facts["release"]):
            raise where.fail(
                f"{key}.release", f"expected a release such as '2.8.0'; got {facts['release']!r}"
            )
        release = tuple(int(part) for part in facts["release"].split("."))
        if previous is not None and release >= previous:
            raise where.fail(f"{key}.release", "expected releases from the newest down")
        previous = release
        _check_verified(where, key, facts)
        for rule_index, rule in enumerate(facts.get("emulate", [])):
            _check_subset(where, f"{key}.emulate[{rule_index}].ops", rule["ops"], ops, "ReduceOps")


def _check_verified(where: _Where, key: str, cap: dict[str, Any]) -> None:
    """An entry a test runs names that test (after MEASURED_PREFIX); a read one names what was
    read instead, so that no entry passes off reading as running, or the reverse."""
    measured = cap["source"].startswith(MEASURED_PREFIX)
    if cap.get("verified", "measured") == "measured" and not measured:
        raise where.fail(
            f"{key}.source",
            f"expected {MEASURED_PREFIX!r} and the test that measures it, or verified = 'read' "
            f"with the source or documentation read; got {cap['source']!r}",
        )
    if cap.get("verified") == "read" and measured:
        raise where.fail(
            f"{key}.verified",
            "an entry whose source is a measurement is 'measured', not 'read'",
        )


def _check_choices(
    where: _Where, key: str, choices: list[dict[str, Any]], dtypes: set[str]
) -> None:
    """Size-dependent choices: sizes >= 0, listed in increasing order (how they read best). A
    choice from 0 bytes for every dtype must be conditional (one_host, or bounded by the group's
    size), else it is the default."""
    previous = -1
    for index, choice in enumerate(choices):
        choice_key = f"{key}.choose[{index}]"
        if choice["min_bytes"] < 0:
            raise where.fail(f"{choice_key}.min_bytes", f"expected >= 0, got {choice['min_bytes']}")
        if choice["min_bytes"] < previous:
            raise where.fail(f"{choice_key}.min_bytes", "expected choices in increasing min_bytes")
        previous = choice["min_bytes"]
        _check_subset(where, f"{choice_key}.dtypes", choice.get("dtypes", []), dtypes, "dtypes")
        conditional = choice.get("one_host") or {"min_ranks", "max_ranks"} & set(choice)
        if choice["min_bytes"] == 0 and "dtypes" not in choice and not conditional:
            raise where.fail(
                choice_key,
                "a choice from 0 bytes for every dtype leaves the default unused: make "
                f"{choice['algorithm']!r} the default (impl and algorithm) instead",
            )
        for other_index, other in enumerate(choices[:index]):
            if _overlap(choice, other):
                raise where.fail(
                    choice_key,
                    f"applies where choose[{other_index}] does ({other['algorithm']!r}: the same "
                    "min_bytes, one_host, and some dtype and group size), so the table's order "
                    "would decide: give one of them dtypes, min_ranks or max_ranks apart",
                )


def _overlap(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two choices apply to some same call: equal min_bytes and one_host, a dtype and a
    group size both take (no dtypes: every dtype; no min_ranks/max_ranks: any size)."""
    if one["min_bytes"] != other["min_bytes"] or one.get("one_host") != other.get("one_host"):
        return False
    if "dtypes" in one and "dtypes" in other and not set(one["dtypes"]) & set(other["dtypes"]):
        return False
    least: int = max(one.get("min_ranks", 1), other.get("min_ranks", 1))
    most: int = min(one.get("max_ranks", 2**31), other.get("max_ranks", 2**31))
    return least <= most


def _check_family(where: _Where, table: dict[str, Any]) -> None:
    frameworks = _known("frameworks")
    expected_name = where.name.removeprefix(FAMILY_PREFIX)
    if table["family"] != expected_name:
        raise where.fail("family", f"expected {expected_name!r} (the file's name)")
    apis = table["apis"]
    for path, api in apis.items():
        if api["framework"] not in frameworks:
            raise where.fail(f"apis.{path}.framework", f"unknown framework {api['framework']!r}")
        # A callable is described by its signature and parameters; a class by its methods.
        if api["kind"] in ("function", "primitive") and not {"signature", "params"} <= set(api):
            raise where.fail(f"apis.{path}", f"a {api['kind']} needs signature and params")
        if api["kind"] == "object" and {"signature", "params"} & set(api):
            raise where.fail(f"apis.{path}", "an object (a value) has no signature or params")
    for index, pair in enumerate(table["pairs"]):
        _check_pair(where, f"pairs[{index}]", pair, apis, table["compat"])
    _check_port_choices(where, table["pairs"])


def _check_port_choices(where: _Where, pairs: list[dict[str, Any]]) -> None:
    """Of the pairs of one torch API that name a compat function, exactly one says
    ``port = true`` when there are several (the one ``compat port`` rewrites to), and never more
    than one."""
    by_torch: dict[str, list[int]] = {}
    for index, pair in enumerate(pairs):
        if "compat" in pair:  # compat port rewrites only to a compat function
            by_torch.setdefault(pair["torch"], []).append(index)
    for torch_name, indexes in by_torch.items():
        chosen = [index for index in indexes if pairs[index].get("port")]
        if len(chosen) > 1 or (len(indexes) > 1 and not chosen):
            listed = ", ".join(f"pairs[{index}]" for index in indexes)
            raise where.fail(
                f"pairs[{indexes[0]}].port",
                f"{torch_name} has {len(indexes)} pairs ({listed}); expected port = true on "
                f"exactly one of them (the one compat port rewrites to), got it on {len(chosen)}",
            )


def _check_pair(
    where: _Where, key: str, pair: dict[str, Any], apis: dict[str, Any], compat: dict[str, Any]
) -> None:
    for side in ("torch", "mindspore"):
        if pair[side] not in apis or apis[pair[side]]["framework"] != side:
            raise where.fail(f"{key}.{side}", f"{pair[side]!r} is no {side} entry of apis")
    if "compat" in pair and pair["compat"] not in compat:
        raise where.fail(f"{key}.compat", f"{pair['compat']!r} is no entry of compat")
    for needs_compat in ("port", "result", "ops"):
        if needs_compat in pair and "compat" not in pair:
            raise where.fail(
                f"{key}.{needs_compat}", "only on a pair with a compat key (it is about compat's)"
            )
    covered: dict[str, set[str]] = {"torch": set(), "mindspore": set()}
    for index, row in enumerate(pair["rows"]):
        row_key = f"{key}.rows[{index}]"
        if row["kind"] == "behaviour" and "topic" not in row:
            raise where.fail(f"{row_key}.topic", "missing (required for a behaviour row)")
        if row["kind"] != "param":
            continue
        if "torch" not in row and "mindspore" not in row:
            raise where.fail(row_key, "a param row names a torch or a mindspore parameter")
        for side in ("torch", "mindspore"):
            if side in row:
                params = apis[pair[side]].get("params", {})
                if row[side] not in params:
                    raise where.fail(
                        f"{row_key}.{side}",
                        f"{row[side]!r} is no parameter of {pair[side]}; it has {list(params)}",
                    )
                covered[side].add(row[side])
    # Every parameter of both APIs is compared: a forgotten one is what drifts.
    for side in ("torch", "mindspore"):
        missing = [p for p in apis[pair[side]].get("params", {}) if p not in covered[side]]
        if missing:
            raise where.fail(f"{key}.rows", f"no row for {pair[side]} parameters {missing}")


def _check_frameworks(where: _Where, table: dict[str, Any]) -> None:
    capabilities: dict[str, Any] = table_files.read("capabilities")
    for name, entry in table.items():
        for end in ("oldest", "newest"):
            version = entry["tested_versions"][end]
            if not re.fullmatch(r"\d+\.\d+\.\d+", version):
                raise where.fail(
                    f"{name}.tested_versions.{end}",
                    f"expected a release such as '2.7.1'; got {version!r}",
                )
        initialized = entry.get("initialized")
        if initialized is not None and not re.fullmatch(r"[\w.]+:\w+", initialized):
            raise where.fail(
                f"{name}.initialized",
                f"expected 'module:function' (e.g. 'torch.distributed:is_initialized'); "
                f"got {initialized!r}",
            )
        backends = {
            cap.get("backend", key)
            for key, cap in capabilities.items()
            if cap.get("framework") == name
        }
        defaults = entry["default_backend"]
        for index, default in enumerate(defaults):
            if default["backend"] not in backends:
                raise where.fail(
                    f"{name}.default_backend[{index}].backend",
                    f"{default['backend']!r} is no {name} backend of capabilities.toml; "
                    f"known: {sorted(backends)}",
                )
        if not defaults or defaults[-1]["when"] != "always":
            raise where.fail(
                f"{name}.default_backend", "expected a last entry with when = 'always'"
            )
        launch = entry["launch"]
        templates = {
            f"{name}.launch.{part}.{var}": value
            for part in ("env", "rank_env", "devices_env")
            for var, value in launch.get(part, {}).items()
        }
        for kind, devices in launch.get("devices", {}).items():
            if not re.fullmatch(r"[\w.]+:\w+", devices["count"]):
                raise where.fail(
                    f"{name}.launch.devices.{kind}.count",
                    f"expected 'module:function' (e.g. 'torch.cuda:device_count'); "
                    f"got {devices['count']!r}",
                )
        for var, value in launch.get("scheduler", {}).get("env", {}).items():
            templates[f"{name}.launch.scheduler.env.{var}"] = value
        for key, value in templates.items():
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
            except ValueError as error:
                raise where.fail(key, f"not a template: {error}") from None
            unknown = [f for f in fields if f not in LAUNCH_FIELDS]
            if unknown:
                raise where.fail(key, f"unknown fields {unknown}; expected {list(LAUNCH_FIELDS)}")


#: Checks that span keys or tables, run after the structure is known to be right.
CROSS_CHECKS: dict[str, Callable[[_Where, dict[str, Any]], None]] = {
    "capabilities": _check_capabilities,
    "dtypes": _check_dtypes,
    "frameworks": _check_frameworks,
}


def validate(name: str, table: dict[str, Any]) -> None:
    """Raise :class:`TableError` naming ``<name>.toml`` and the key if ``table`` is malformed.

    Parameters
    ----------
    name
        The table's name, the file name without ``.toml``; it selects the spec.
    table
        The parsed TOML.
    """
    where = _Where(name)
    _check(where, "", spec_of(name), table)
    if name.startswith(FAMILY_PREFIX):
        _check_family(where, table)
    elif name in CROSS_CHECKS:
        CROSS_CHECKS[name](where, table)
