"""Argument fuzzing (issue 17): generated bad arguments for every public function of compat.

For each function a generator makes good arguments (seeded: random group, dtype, shapes, split
sizes, roots, peers, spellings of ops and groups), then makes one of them bad (two, in the long
sweep): wrong types, shapes, dtypes, ranks, sizes, lengths, negative/None/bool where an int is
expected, tensors of the other framework or on another device, lists of the wrong length, and so
on. Every bad call must raise TypeError, ValueError or compat.UnsupportedError on the calling rank
with a message that starts with the bad parameter's name and ':' (as in bad_input_cases.py; a
parameter of a list or of a P2POp may be named with its index or field, ``input_list[2]``,
``p2p_op_list[1].peer``), leave every tensor and object list it was given as it was, and leave the
job usable: after each function's trials every rank runs a good all_reduce (``follow_up``).

No bad call can communicate, and so none can hang, even one compat wrongly accepts: each runs
under a tripwire that replaces every way into communication (``State.implementation`` and
``State.world_implementation``, which every collective, point-to-point call and object
collective goes through, and the adapter's
collectives, barrier, new_group and destroy, the pre-flight check and the deferred receives) by
a function raising :class:`Reached`. A call that gets there is reported as accepted, with its
arguments, and the ranks stay in step: between the trials they only run the follow-up, the same
on every rank. Each trial of a function starts with a control: its good arguments must reach
communication (or return) without an error, so that the generator's good arguments are known to
be good. ``fuzz[regressions]`` tries, every time, the bad arguments the fuzz once found accepted
or mis-reported.

Each rank prints one line per function, ``COMPAT-FUZZ {json}`` (cases tried, unexpected
exceptions, accepted calls, modified buffers), which tests/test_fuzz.py collects into a table.
``COMPAT_FUZZ_ROUNDS`` (trials per generator; default 3 on torch, 1 on
MindSpore) and ``COMPAT_FUZZ_COMBOS`` (trials with two bad arguments per function, default 0)
set the size of the sweep; ``COMPAT_FUZZ_SEED`` its seed. compat.comm, which needs no ranks, is
fuzzed by tests/test_fuzz.py in the pytest process with :func:`run_spec` and :data:`COMM_SPECS`.
"""

from __future__ import annotations

import json
import math
import os
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

import numpy as np

import compat
import compat.algorithms
import compat.collectives
import compat.core.call
import compat.core.state
from compat.base import tables
from compat.core.dispatch import framework_of
from tests.ranks.cases import follow_up, rank, register, subgroup, world
from tests.ranks.kit import foreign_tensors

REPORT_PREFIX = "COMPAT-FUZZ "
GOOD_DTYPES = ["float32", "float64", "int32", "int64"]
FLOAT = {"float32", "float64"}
TV: tuple[type[BaseException], ...] = (TypeError, ValueError)
T: tuple[type[BaseException], ...] = (TypeError,)
V: tuple[type[BaseException], ...] = (ValueError,)
U: tuple[type[BaseException], ...] = (compat.UnsupportedError,)


#: Trials per generator in make test: a MindSpore call costs ~20 times a torch one.
DEFAULT_ROUNDS = {"torch": 3, "mindspore": 1}


def rounds(framework: str) -> int:
    return int(os.environ.get("COMPAT_FUZZ_ROUNDS", DEFAULT_ROUNDS[framework]))


def combos() -> int:
    return int(os.environ.get("COMPAT_FUZZ_COMBOS", "0"))


def seed() -> int:
    return int(os.environ.get("COMPAT_FUZZ_SEED", "17"))


# -- the tripwire -----------------------------------------------------------------------------


class Reached(BaseException):
    """A call got past compat's checks into communication (a BaseException, so that no
    ``except Exception`` in compat can swallow it)."""


#: The adapter methods that communicate (or create/free communicators).
_ADAPTER_METHODS = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "scatter",
    "gather",
    "reduce",
    "all_to_all_single",
    "all_to_all",
    "send",
    "recv",
    "isend",
    "irecv",
    "batch_isend_irecv",
    "barrier",
    "monitored_barrier",
    "send_within",
    "recv_within",
    "new_group",
    "destroy_group",
    "destroy",
    "framework_device_mesh",
)


def _trip(what: str) -> Callable[..., Any]:
    def reached(*args: Any, **kwargs: Any) -> Any:
        raise Reached(what)

    return reached


@contextmanager
def tripwire() -> Iterator[None]:
    """Every way into communication raises :class:`Reached` instead; on exit, all is restored
    (with the group bookkeeping new_group changes before it communicates)."""
    state = compat.core.state.get_current()
    if state is None:  # compat.comm: local, nothing to guard
        yield
        return
    adapter = state.adapter
    count, groups = state.group_count, dict(state.groups)
    instance = [
        (state, "implementation"),
        (state, "world_implementation"),
        *((adapter, name) for name in _ADAPTER_METHODS),
    ]
    modules = [
        (compat.core.state, "leave"),
        (compat.core.call, "preflight"),
        (compat.algorithms, "settle_deferred_recvs"),
    ]
    saved = [(module, name, getattr(module, name)) for module, name in modules]
    own = [(obj, name, obj.__dict__[name]) for obj, name in instance if name in obj.__dict__]
    try:
        for obj, name in instance:
            setattr(obj, name, _trip(name))
        for module, name, _ in saved:
            setattr(module, name, _trip(name))
        yield
    finally:
        for obj, name in instance:
            obj.__dict__.pop(name, None)
        for obj, name, value in own:
            setattr(obj, name, value)
        for module, name, value in saved:
            setattr(module, name, value)
        state.group_count = count
        state.groups.clear()
        state.groups.update(groups)


# -- the generator's context ------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """What a mutator made bad: the parameters (the message may name any of them), the value
    given (for the report), the exceptions allowed, and whether it is an object that cannot be
    pickled (then the pickling error itself is raised, noted with the parameter's name)."""

    params: tuple[str, ...]
    value: str
    errors: tuple[type[BaseException], ...] = TV
    pickling: bool = False


Mutate = Callable[["Ctx", dict[str, Any]], Bad | None]


@dataclass(frozen=True)
class Mutator:
    label: str  # "param/kind"
    mutate: Mutate
    solo: bool = False  # rebuilds or relates several arguments: never combined with another
    #: the good arguments are made again with this dtype first (None from it: not applicable)
    dtype: Callable[[Ctx], str | None] | None = None


@dataclass
class Spec:
    name: str
    function: Callable[..., Any]
    good: Callable[[Ctx], dict[str, Any]]
    mutators: list[Mutator]
    min_world: int = 1
    frameworks: tuple[str, ...] = ("torch", "mindspore")
    control: bool = True  # whether the good arguments can be tried (destroy: no)


def short(value: object) -> str:
    framework = framework_of(value)
    if framework is not None:
        shape = tuple(getattr(value, "shape", ()))
        device = getattr(value, "device", "")
        where = f" on {device}" if str(device) == "meta" else ""
        return f"<{framework} tensor {shape} {getattr(value, 'dtype', '?')}{where}>"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(short(item) for item in value[:4])
        more = ", ..." if len(value) > 4 else ""
        return f"[{inner}{more}]" if isinstance(value, list) else f"({inner}{more})"
    if isinstance(value, compat.P2POp):
        return (
            f"P2POp({value.direction}, {short(value.tensor)}, peer={value.peer!r}, "
            f"group={short(value.group)}, tag={value.tag!r}, group_peer={value.group_peer!r})"
        )
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Ctx:
    """One rank's generator: the seeded random draws and the facts of the current trial."""

    def __init__(self, kit: Any, rng: np.random.Generator, ranked: bool = True) -> None:
        self.kit, self.rng, self.ranked = kit, rng, ranked
        self.framework: str = kit.framework
        self.rank = rank() if ranked else 0
        self.world = world() if ranked else 1
        self.unsupported = _unsupported_dtype() if ranked else None
        self.facts: dict[str, Any] = {}
        self.group: Any = None
        self.members: list[int] = [0]
        self.dtype = "float32"

    # -- draws -----------------------------------------------------------------------------
    def pick(self, options: list[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def integer(self, low: int, high: int) -> int:
        """An int in [low, high]."""
        return int(self.rng.integers(low, high + 1))

    def new_trial(self) -> None:
        self.facts = {}
        self.dtype = self.pick(GOOD_DTYPES)
        if not self.ranked:
            return
        n = self.world
        choices: list[tuple[Any, list[int]]] = [
            (None, list(range(n))),
            (compat.WORLD, list(range(n))),
            (list(range(n)), list(range(n))),
            (_native_world(self.framework), list(range(n))),
        ]
        group = subgroup()
        if self.rank in group.ranks:
            choices += [
                (group, list(group.ranks)),
                (list(reversed(group.ranks)), list(group.ranks)),
            ]
        self.group, self.members = self.pick(choices)

    # -- facts of the trial's group ---------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.members)

    @property
    def me(self) -> int:
        return self.members.index(self.rank)

    def others(self) -> list[int]:
        return [r for r in self.members if r != self.rank]

    # -- values ----------------------------------------------------------------------------
    def tensor(self, shape: tuple[int, ...], dtype: str | None = None) -> Any:
        return self.kit.tensor(np.full(shape, self.integer(1, 4)), dtype or self.dtype)

    def rows(self) -> int:
        return 0 if self.chance(0.1) else self.integer(1, 3)

    def trailing(self) -> tuple[int, ...]:
        return tuple(self.pick([(), (2,), (3,), (2, 2)]))

    def op(self) -> Any:
        names = ["sum", "prod", "min", "max"] + (["avg"] if self.dtype in FLOAT else [])
        name = self.pick(names)
        forms: list[Any] = [name, name.upper(), compat.ReduceOp(name)]
        if name in ("sum", "min", "max"):
            forms.append(self.kit.native_op(name.upper()))
        return self.pick(forms)

    def other_dtype(self, dtype: str) -> str:
        return str(self.pick([d for d in GOOD_DTYPES if d != dtype]))

    def sizes(self, parts: int, total: int) -> list[int]:
        """``parts`` sizes >= 0 summing to ``total``."""
        cuts = sorted(self.integer(0, total) for _ in range(parts - 1))
        edges = [0, *cuts, total]
        return [edges[i + 1] - edges[i] for i in range(parts)]

    def other_tensor(self) -> Any:
        return self.kit.other_framework_tensor()

    def non_tensor(self, none_is_bad: bool = True, foreign: bool | None = None) -> Any:
        """No tensor of this framework: another object, or (``foreign``, by default where
        compat was initialised for one framework) a tensor of the other framework."""
        options: list[Any] = [
            1,
            2.5,
            "tensor",
            b"\x00\x01",
            [1.0, 2.0],
            (1.0,),
            {"a": 1},
            object(),
            True,
            np.ones(2, np.float32),
            range(2),
        ]
        # The other framework's tensor where cases pass one (kit.foreign_tensors: one job per
        # framework, and the test process; make test-versions' environments have one framework).
        if (self.ranked if foreign is None else foreign) and foreign_tensors(self.kit):
            options.append(self.other_tensor())
        if none_is_bad:
            options.append(None)
        if self.framework == "torch" and self.ranked:  # another device than this rank's
            options.append(self.kit.torch.empty(2, device="meta"))
        return self.pick(options)

    def non_int(self, none_is_bad: bool = True) -> Any:
        options: list[Any] = [1.0, "0", True, False, [0], b"\x00", 1j, object()]
        if none_is_bad:
            options.append(None)
        return self.pick(options)

    def bad_rank(self, self_is_bad: bool = False) -> Any:
        """A global rank that is no member of the trial's group (or this rank, for a peer)."""
        outside = [r for r in range(self.world) if r not in self.members]
        options: list[Any] = [self.world, self.world + 3, -1, -self.world - 1, 2**31, 2**63]
        options += outside
        if self_is_bad:
            options += [self.rank, self.rank]
        return self.pick(options)

    def bad_group_rank(self) -> int:
        return int(self.pick([self.n, self.n + 2, -1, -self.n - 1, 2**40]))

    def bad_group(self, member: bool = True) -> Any:
        n = self.world
        options: list[Any] = [
            3.5,
            -1,
            object(),
            {"ranks": [0]},
            b"world",
            [0, n],
            [n + 3],
            [0, "1"],
            (0.5,),
            [True],
            [[0]],
            [],
            [0, 0],
            f"no_such_group_{self.integer(0, 99)}",
        ]
        group = subgroup()
        if member and self.rank not in group.ranks:
            options += [group, group, list(group.ranks)]
        return self.pick(options)


def _native_world(framework: str) -> Any:
    if framework == "torch":
        import torch.distributed as dist

        return dist.group.WORLD
    from mindspore.communication import GlobalComm

    return GlobalComm.WORLD_COMM_GROUP


def _unsupported_dtype() -> str | None:
    """A dtype the backend refuses, that the kits can make (None if it takes them all)."""
    backend = tables.lookup("capabilities", compat.get_backend())
    known = tables.lookup("dtypes", "dtypes")
    missing = [
        name
        for name, entry in known.items()
        if compat.get_framework() in entry
        and name not in backend["dtypes"]
        and name in ("int16", "bool", "complex64")
    ]
    return missing[0] if missing else None


# -- mutators ---------------------------------------------------------------------------------


def not_tensor(param: str, none_is_bad: bool = True, *blame: str) -> Mutator:
    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args[param] = value = ctx.non_tensor(none_is_bad)
        return Bad((param, *blame), short(value), T)

    return Mutator(f"{param}/not_tensor", mutate)


def _altered(ctx: Ctx, shape: tuple[int, ...], keep_dim0: bool = False) -> tuple[int, ...]:
    """A shape other than ``shape``: a dim changed, added or removed."""
    while True:
        kind = ctx.pick(["trailing", "add", "drop", "dim0"])
        new = list(shape)
        if kind == "trailing" and len(shape) >= 2:
            i = ctx.integer(1, len(shape) - 1)
            new[i] = shape[i] + ctx.integer(1, 2)
        elif kind == "add":
            new.append(ctx.integer(1, 3))
        elif kind == "drop" and len(shape) >= 2:
            new.pop()
        elif kind == "dim0" and shape and not keep_dim0:
            new[0] = shape[0] + ctx.pick([1, 2, -1]) if shape[0] else shape[0] + 1
        else:
            continue
        if tuple(new) != shape and min(new, default=0) >= 0:
            return tuple(new)


def retensor(
    param: str,
    change: str,
    errors: tuple[type[BaseException], ...],
    *blame: str,
    fact: str | None = None,
) -> Mutator:
    """Replace the tensor ``param`` (or, when it is None, a tensor of the shape in
    ``ctx.facts[fact]``) by one with another dtype, shape, or none of its dims."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
        current = args.get(param)
        if framework_of(current) is not None:
            shape, dtype = tuple(current.shape), ctx.kit.numpy(current).dtype.name
        elif fact is not None:
            shape, dtype = ctx.facts[fact], ctx.dtype
        else:
            return None
        dtype = ctx.dtype if dtype not in GOOD_DTYPES else dtype
        if change == "dtype":
            dtype = ctx.other_dtype(dtype)
        elif change == "shape":
            shape = _altered(ctx, shape)
        elif change == "trailing":
            shape = _altered(ctx, shape, keep_dim0=True)
        elif change == "zero_d":
            shape = ()
        # torch's other good forms (NCCL counts elements): any whole with the parts' element
        # count, as their stack, or a part of a whole that has n of its element count
        stack, part_of = ctx.facts.get(f"{param}_stack"), ctx.facts.get(f"{param}_part_of")
        if change != "dtype" and (
            (stack is not None and shape and math.prod(shape) == math.prod(stack))
            or (part_of is not None and shape and ctx.n * math.prod(shape) == math.prod(part_of))
        ):
            return None
        args[param] = value = ctx.tensor(shape, dtype)
        return Bad((param, *blame), short(value), errors)

    # Another dtype or shape is bad in relation to the other arguments: never combined (two
    # such changes could agree again).
    return Mutator(f"{param}/{change}", mutate, solo=True)


def bad_bool(param: str) -> Mutator:
    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args[param] = value = ctx.pick([0, 1, None, "True", "", 1.0, [True]])
        return Bad((param,), short(value), T)

    return Mutator(f"{param}/not_bool", mutate)


def bad_op(param: str = "op") -> Mutator:
    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        options = ["bogus", "", "add", "average", "sum ", 0, 1, 3, False, 2.5, None, object()]
        args[param] = value = ctx.pick([*options, ["sum"], b"sum"])
        return Bad((param,), short(value), TV)

    return Mutator(f"{param}/bad_op", mutate)


def unsupported_dtype(*tensors: str) -> Mutator:
    """Every tensor of the call with a dtype the backend refuses (UnsupportedError naming one of
    them)."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        return Bad(tensors or ("tensor",), f"dtype {ctx.dtype}", U)

    return Mutator("tensor/unsupported_dtype", mutate, solo=True, dtype=lambda ctx: ctx.unsupported)


def avg_integers() -> Mutator:
    """op=AVG on integer tensors: UnsupportedError naming op."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args["op"] = value = ctx.pick(["avg", compat.ReduceOp.AVG, "AVG"])
        return Bad(("op",), f"{short(value)} on {ctx.dtype}", U)

    return Mutator(
        "op/avg_on_integers", mutate, solo=True, dtype=lambda ctx: ctx.pick(["int32", "int64"])
    )


def bad_group(param: str = "group", member: bool = True) -> Mutator:
    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args[param] = value = ctx.bad_group(member)
        return Bad((param,), short(value), TV)

    return Mutator(f"{param}/bad_group", mutate)


def bad_dim(param: str = "dim", ndim_fact: str = "ndim") -> Mutator:
    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        ndim = ctx.facts[ndim_fact]
        options: list[Any] = [ndim, ndim + 1, -ndim - 1, 100, -100]
        args[param] = value = ctx.pick([*options, ctx.non_int()])
        return Bad((param,), short(value), TV)

    return Mutator(f"{param}/bad_dim", mutate)


def bad_sizes(param: str, parts_fact: str, total_fact: str, *blame: str) -> Mutator:
    """Split sizes: wrong count, a negative size, a wrong sum, not a list, not ints."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        parts, total = ctx.facts[parts_fact], ctx.facts[total_fact]
        kind = ctx.pick(["length", "negative", "sum", "type", "element"])
        good = ctx.sizes(parts, total)
        value: Any
        if kind == "length":
            count = ctx.pick([n for n in (0, parts - 1, parts + 1, parts + 3) if n != parts])
            value = ctx.sizes(count, total) if count else []
        elif kind == "negative":
            value = list(good)
            i = ctx.integer(0, parts - 1)
            value[i] -= total + 1
            value[(i + 1) % parts] += total + 1 if parts > 1 else 0
        elif kind == "sum":
            value = list(good)
            value[ctx.integer(0, parts - 1)] += ctx.integer(1, 3)
        elif kind == "type":
            value = ctx.pick(
                [3, "12", {0: 1}, {1, 2}, 1.5, object(), ctx.tensor((parts,), "int64")]
            )
        else:
            value = list(good)
            value[ctx.integer(0, parts - 1)] = ctx.pick([1.0, True, None, "1", [1]])
        args[param] = value
        return Bad((param, *blame), short(value), TV)

    return Mutator(f"{param}/bad_sizes", mutate)


def bad_tag(param: str = "tag") -> Mutator:
    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        if ctx.framework == "mindspore" and ctx.chance(0.3):
            args[param] = value = ctx.pick([1, 7, 2**31 - 1])
            return Bad((param,), short(value), U)
        args[param] = value = ctx.pick([-1, -5, 2**31, 2**40, 1.5, "1", True, None, [0]])
        return Bad((param,), short(value), TV)

    return Mutator(f"{param}/bad_tag", mutate)


def _bad_timeouts(representable: bool) -> list[Any]:
    """Bad timeouts; with ``representable``, also finite ones no timedelta holds (new_group's
    timeout becomes one; monitored_barrier's is seconds, where a huge one just never ends)."""
    huge: list[Any] = [1e300, 10**30] if representable else []
    return [
        *huge,
        0,
        -1,
        -0.5,
        math.nan,
        math.inf,
        -math.inf,
        "5",
        True,
        [1],
        timedelta(0),
        timedelta(seconds=-3),
        b"1",
    ]


def bad_timeout(param: str = "timeout", representable: bool = False) -> Mutator:
    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args[param] = value = ctx.pick(_bad_timeouts(representable))
        return Bad((param,), short(value), TV)

    return Mutator(f"{param}/bad_timeout", mutate)


def bad_device(param: str = "device") -> Mutator:
    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        if ctx.framework == "torch":
            options: list[Any] = ["cuda:7", "meta", "npu", "no-such-device", 7, -1]
        else:
            options = ["GPU", "Ascend", "cuda:0", "no-such-device", 0]
        args[param] = value = ctx.pick([*options, 3.5, object(), True, b"cpu"])
        return Bad((param,), short(value), TV)

    return Mutator(f"{param}/bad_device", mutate)


def unpicklable(ctx: Ctx) -> Any:
    return ctx.pick([lambda: 0, threading.Lock(), (x for x in ())])


# -- tensor lists -----------------------------------------------------------------------------


def bad_list(
    param: str, kind: str, *blame: str, like: str | None = None, own_fact: str | None = None
) -> Mutator:
    """The list of tensors ``param``: not a list, the wrong length, an element that is no tensor,
    of another framework, dtype or trailing shape (every index), or, with ``own_fact``, this
    rank's entry with another dim 0 (``like``: the tensor whose shape the entries must have
    exactly, for scatter_list and gather_list)."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
        items = args.get(param)
        if not isinstance(items, list) or (kind not in ("type", "length") and not items):
            return None
        value: Any
        errors = TV
        if kind == "type":
            value = ctx.pick(
                [items[0] if items else ctx.tensor((2,)), 3, "ab", {"a": 1}, iter(items), b"\x00"]
            )
            errors = TV
        elif kind == "length":
            n = len(items)
            count = ctx.pick([c for c in (0, n - 1, n + 1, 2 * n + 1) if c != n and c >= 0])
            value = [
                ctx.tensor(tuple(items[0].shape)) if items else ctx.tensor((2,))
                for _ in range(count)
            ]
            if items and count and count <= n:
                value = items[:count]
        else:
            value = list(items)
            i = ctx.integer(0, len(items) - 1)
            shape = tuple(items[i].shape)
            dtype = ctx.kit.numpy(items[i]).dtype.name
            if kind == "element":
                value[i] = ctx.non_tensor()
                errors = T
            elif kind == "element_dtype":
                value[i] = ctx.tensor(shape, ctx.other_dtype(dtype))
                errors = T
            elif kind == "element_trailing":
                if like is not None:
                    new = _altered(ctx, shape)
                elif not shape:
                    return None
                else:
                    new = _altered(ctx, shape, keep_dim0=True)
                value[i] = ctx.tensor(new, dtype)
                errors = V
            elif kind == "own_dim0":
                me = ctx.facts[own_fact] if own_fact else ctx.me
                own = tuple(items[me].shape)
                if not own:
                    return None
                value[me] = ctx.tensor((own[0] + ctx.pick([1, 2]), *own[1:]), dtype)
                errors = V
            else:
                raise AssertionError(kind)
        args[param] = value
        return Bad((param, *blame), short(value), errors)

    relational = kind in ("element_dtype", "element_trailing", "own_dim0")
    return Mutator(f"{param}/{kind}", mutate, solo=relational)


def list_mutators(
    param: str,
    *blame: str,
    like: str | None = None,
    own: bool = True,
    own_fact: str | None = None,
    trailing: bool = True,
) -> list[Mutator]:
    """``trailing``: parts whose trailing dims differ are bad (False for all_gather's list,
    whose parts may have any shape, as torch's)."""
    kinds = ["type", "length", "element", "element_dtype"]
    kinds += ["element_trailing"] if trailing else []
    kinds += ["own_dim0"] if own else []
    return [bad_list(param, kind, *blame, like=like, own_fact=own_fact) for kind in kinds]


# -- roots and peers --------------------------------------------------------------------------


def _root(
    ctx: Ctx,
    args: dict[str, Any],
    param: str,
    group_param: str,
    root: int,
    default_root: bool = False,
) -> None:
    """Give the root ``root`` (a global rank) as ``param`` or as ``group_param``."""
    if ctx.chance(0.5):
        if not (default_root and root == 0 and ctx.chance(0.5)):
            args[param] = root
    else:
        args[group_param] = ctx.members.index(root)


def root_mutators(
    param: str, group_param: str, peer: bool = False, none_is_bad: bool = True
) -> list[Mutator]:
    """The root (or peer) given badly: a rank outside the group, not an int, neither given
    (where there is no default), both given; for a peer, this rank itself."""

    def global_rank(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args.pop(group_param, None)
        value = ctx.bad_rank(self_is_bad=peer) if ctx.chance(0.6) else ctx.non_int(none_is_bad)
        args[param] = value
        return Bad((param,), short(value), TV)

    def group_rank(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args.pop(param, None)
        options = [ctx.bad_group_rank(), ctx.non_int(False)]
        if peer:
            options.append(ctx.me)
        args[group_param] = value = ctx.pick(options)
        return Bad((group_param,), short(value), TV)

    def both(ctx: Ctx, args: dict[str, Any]) -> Bad:
        choices = ctx.others() if peer else ctx.members
        args[param] = ctx.pick(choices)
        args[group_param] = ctx.members.index(ctx.pick(choices))
        return Bad(
            (param, group_param), f"{param}={args[param]}, {group_param}={args[group_param]}"
        )

    def neither(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args.pop(group_param, None)
        args[param] = None
        return Bad((param,), "None")

    mutators = [
        Mutator(f"{param}/bad_rank", global_rank),
        Mutator(f"{group_param}/bad_rank", group_rank),
        Mutator(f"{param}/both", both, solo=True),
    ]
    if none_is_bad:
        mutators.append(Mutator(f"{param}/neither", neither, solo=True))
    return mutators


# -- the specs of the collectives -------------------------------------------------------------


def _async(ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
    if ctx.chance(0.5):
        args["async_op"] = ctx.chance(0.5)
    return args


def _group(ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
    if ctx.group is not None or ctx.chance(0.5):
        args["group"] = ctx.group
    return args


def good_all_reduce(ctx: Ctx) -> dict[str, Any]:
    shape = tuple(ctx.pick([(), (0,), (2,), (2, 3), (1, 2, 2)]))
    args = {"tensor": ctx.tensor(shape), "op": ctx.op()}
    return _async(ctx, _group(ctx, args))


def good_all_reduce_coalesced(ctx: Ctx) -> dict[str, Any]:
    shapes = [ctx.pick([(), (0,), (2,), (2, 3)]) for _ in range(ctx.integer(2, 4))]
    args = {"tensors": [ctx.tensor(tuple(shape)) for shape in shapes], "op": ctx.op()}
    return _async(ctx, _group(ctx, args))


def good_reduce_scatter(ctx: Ctx) -> dict[str, Any]:
    trailing = ctx.trailing()
    rows = [ctx.rows() for _ in ctx.members]
    inputs = [ctx.tensor((r, *trailing)) for r in rows]
    args = {"output": ctx.tensor((rows[ctx.me], *trailing)), "input_list": inputs}
    if ctx.chance(0.7):
        args["op"] = ctx.op()
    return _async(ctx, _group(ctx, args))


def _split_shape(ctx: Ctx, size_of_dim: int) -> tuple[tuple[int, ...], int]:
    """A shape of 1 to 3 dims with ``size_of_dim`` on a random dim, and that dim."""
    ndim = ctx.integer(1, 3)
    dim = ctx.integer(0, ndim - 1)
    shape = [ctx.integer(1, 3) for _ in range(ndim)]
    shape[dim] = size_of_dim
    ctx.facts["ndim"] = ndim
    return tuple(shape), dim


def good_reduce_scatter_tensor(ctx: Ctx) -> dict[str, Any]:
    n, me = ctx.n, ctx.me
    split = ctx.chance(0.4)
    sizes = ctx.sizes(n, ctx.integer(0, 6)) if split else [ctx.rows()] * n
    shape, dim = _split_shape(ctx, sum(sizes))
    args: dict[str, Any] = {"tensor": ctx.tensor(shape)}
    out_shape = tuple(sizes[me] if i == dim else s for i, s in enumerate(shape))
    ctx.facts.update(parts=n, total=sum(sizes), out_shape=out_shape)
    if split:
        args["input_split_sizes"] = sizes
    if dim or ctx.chance(0.3):
        args["dim"] = dim - len(shape) if ctx.chance(0.3) else dim
    if not split and not dim:
        ctx.facts["out_part_of"] = shape
    if ctx.chance(0.5):
        args["out"] = ctx.tensor(out_shape)
        if not split and not dim:
            ctx.facts["tensor_stack"] = (n, *out_shape)
    if ctx.chance(0.7):
        args["op"] = ctx.op()
    return _async(ctx, _group(ctx, args))


def indivisible(param: str, *blame: str, part: str | None = None) -> Mutator:
    """dim 0 of ``param`` not divisible by the group size (with no split sizes); good where
    the reduce-scatter's ``part`` output is given with n-th of its element count (a whole of
    any shape, torch's form on NCCL)."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
        if ctx.n < 2:
            return None
        args.pop("input_split_sizes", None)
        args.pop("dim", None)
        rows = ctx.n * ctx.integer(0, 2) + ctx.integer(1, ctx.n - 1)
        shape = (rows, *ctx.trailing())
        output = args.get(part) if part is not None else None
        if framework_of(output) is not None:
            if math.prod(shape) == ctx.n * math.prod(tuple(output.shape)):
                return None
        args[param] = value = ctx.tensor(shape)
        return Bad((param, *blame), short(value), V)

    return Mutator(f"{param}/indivisible", mutate, solo=True)


def good_reduce_scatter_into(ctx: Ctx) -> dict[str, Any]:
    trailing, rows = ctx.trailing(), ctx.rows()
    args = {
        "output": ctx.tensor((rows, *trailing)),
        "input": ctx.tensor((rows * ctx.n, *trailing)),
    }
    ctx.facts.update(input_stack=(ctx.n, rows, *trailing), output_part_of=(rows * ctx.n, *trailing))
    if ctx.chance(0.7):
        args["op"] = ctx.op()
    return _async(ctx, _group(ctx, args))


def good_all_gather(ctx: Ctx) -> dict[str, Any]:
    trailing = ctx.trailing()
    rows = [ctx.rows() for _ in ctx.members]
    args = {
        "tensor_list": [ctx.tensor((r, *trailing)) for r in rows],
        "tensor": ctx.tensor((rows[ctx.me], *trailing)),
    }
    # torch's NCCL takes a tensor with its entry's element count in other dims (checks.py)
    ctx.facts["tensor_stack"] = (rows[ctx.me], *trailing)
    return _async(ctx, _group(ctx, args))


def good_all_gather_into_tensor(ctx: Ctx) -> dict[str, Any]:
    n, me = ctx.n, ctx.me
    split = ctx.chance(0.4)
    sizes = [ctx.rows() for _ in range(n)] if split else [ctx.rows()] * n
    shape, dim = _split_shape(ctx, sizes[me])
    out_shape = tuple(sum(sizes) if i == dim else s for i, s in enumerate(shape))
    ctx.facts.update(out_shape=out_shape, rows=sizes[me], sizes=sizes)
    args: dict[str, Any] = {"tensor": ctx.tensor(shape)}
    if split:
        args["output_split_sizes"] = sizes
    if dim or ctx.chance(0.3):
        args["dim"] = dim - len(shape) if ctx.chance(0.3) else dim
    if ctx.chance(0.5):
        args["out"] = ctx.tensor(out_shape)
    if not split and not dim:
        ctx.facts["out_stack"] = (n, *shape)
    return _async(ctx, _group(ctx, args))


def bad_gather_sizes(ctx: Ctx, args: dict[str, Any]) -> Bad:
    """output_split_sizes: wrong count, a negative size, this rank's entry other than its dim,
    not a list, not ints."""
    rows, n, me, good = ctx.facts["rows"], ctx.n, ctx.me, ctx.facts["sizes"]
    kind = ctx.pick(["length", "negative", "own", "type", "element"])
    value: Any = list(good)
    if kind == "length":
        count = ctx.pick([c for c in (0, n - 1, n + 1) if c != n])
        value = (good * 2)[:count]
    elif kind == "negative":
        value[ctx.integer(0, n - 1)] = -ctx.integer(1, 3)
    elif kind == "own":
        value[me] = rows + ctx.integer(1, 2)
    elif kind == "type":
        value = ctx.pick([3, "12", {0: 1}, {1, 2}, 1.5, object()])
    else:
        value[ctx.integer(0, n - 1)] = ctx.pick([1.0, True, None, "1"])
    args["output_split_sizes"] = value
    return Bad(("output_split_sizes", "out"), short(value))


def good_all_gather_into(ctx: Ctx) -> dict[str, Any]:
    trailing, rows = ctx.trailing(), ctx.rows()
    args = {
        "output_tensor": ctx.tensor((rows * ctx.n, *trailing)),
        "input_tensor": ctx.tensor((rows, *trailing)),
    }
    ctx.facts["output_tensor_stack"] = (ctx.n, rows, *trailing)
    return _async(ctx, _group(ctx, args))


def good_broadcast(ctx: Ctx) -> dict[str, Any]:
    args: dict[str, Any] = {"tensor": ctx.tensor(tuple(ctx.pick([(), (0,), (3,), (2, 2)])))}
    _root(ctx, args, "src", "group_src", ctx.pick(ctx.members))
    return _async(ctx, _group(ctx, args))


def good_reduce(ctx: Ctx) -> dict[str, Any]:
    args: dict[str, Any] = {"tensor": ctx.tensor(tuple(ctx.pick([(), (0,), (3,), (2, 2)])))}
    _root(ctx, args, "dst", "group_dst", ctx.pick(ctx.members))
    if ctx.chance(0.7):
        args["op"] = ctx.op()
    return _async(ctx, _group(ctx, args))


def good_rooted_list(
    ctx: Ctx, list_param: str, root_param: str, group_param: str, root: int | None = None
) -> dict[str, Any]:
    """scatter / gather: the tensor, and the list on the root only."""
    shape = tuple(ctx.pick([(0,), (3,), (2, 2)]))
    root = ctx.pick(ctx.members) if root is None else root
    ctx.facts["root"] = root
    args: dict[str, Any] = {"tensor": ctx.tensor(shape)}
    if ctx.rank == root:
        args[list_param] = [ctx.tensor(shape) for _ in ctx.members]
    elif ctx.chance(0.3):
        args[list_param] = ctx.pick([None, []])
    _root(ctx, args, root_param, group_param, root, default_root=True)
    return _async(ctx, _group(ctx, args))


def root_list_mutators(
    list_param: str, root_param: str, group_param: str, good: Callable[..., dict[str, Any]]
) -> list[Mutator]:
    """scatter_list / gather_list: bad on the root (missing, wrong length or elements), or
    given on a rank that is not the root."""

    def on_root(kind: str) -> Mutator:
        inner = bad_list(list_param, kind, like="tensor")

        def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
            args.clear()
            args.update(good(ctx, list_param, root_param, group_param, ctx.rank))
            return inner.mutate(ctx, args)

        return Mutator(f"{list_param}/root_{kind}", mutate, solo=True)

    def missing_on_root(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args.clear()
        args.update(good(ctx, list_param, root_param, group_param, ctx.rank))
        args[list_param] = value = ctx.pick([None, "ab", 3])
        return Bad((list_param,), short(value))

    def given_elsewhere(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
        if ctx.n < 2:
            return None
        args.clear()
        args.update(good(ctx, list_param, root_param, group_param, ctx.pick(ctx.others())))
        shape = tuple(args["tensor"].shape)
        args[list_param] = value = ctx.pick(
            [[ctx.tensor(shape) for _ in ctx.members], [None], ["x"], ctx.tensor((2, 2)), "ab", 3]
        )
        return Bad((list_param,), short(value))

    kinds = ["type", "length", "element", "element_dtype", "element_trailing"]
    return [
        *(on_root(kind) for kind in kinds),
        Mutator(f"{list_param}/missing_on_root", missing_on_root, solo=True),
        Mutator(f"{list_param}/given_elsewhere", given_elsewhere, solo=True),
    ]


def good_scatter_tensor(ctx: Ctx) -> dict[str, Any]:
    trailing, rows = ctx.trailing(), ctx.rows()
    ctx.facts["out_shape"] = (rows, *trailing)
    args: dict[str, Any] = {"tensor": ctx.tensor((rows * ctx.n, *trailing))}
    _root(ctx, args, "src", "group_src", ctx.pick(ctx.members), default_root=True)
    if ctx.chance(0.5):
        args["out"] = ctx.tensor((rows, *trailing))
    return _async(ctx, _group(ctx, args))


def good_all_to_all_single(ctx: Ctx) -> dict[str, Any]:
    n, trailing = ctx.n, ctx.trailing()
    in_sizes = [ctx.rows() for _ in range(n)] if ctx.chance(0.5) else None
    out_sizes = [ctx.rows() for _ in range(n)] if ctx.chance(0.5) else None
    in_rows = sum(in_sizes) if in_sizes is not None else n * ctx.rows()
    out_rows = sum(out_sizes) if out_sizes is not None else n * ctx.rows()
    ctx.facts.update(parts=n, in_total=in_rows, out_total=out_rows)
    args: dict[str, Any] = {
        "output": ctx.tensor((out_rows, *trailing)),
        "input": ctx.tensor((in_rows, *trailing)),
    }
    if in_sizes is not None:
        args["input_split_sizes"] = in_sizes
    if out_sizes is not None:
        args["output_split_sizes"] = out_sizes
    return _async(ctx, _group(ctx, args))


def good_all_to_all(ctx: Ctx) -> dict[str, Any]:
    trailing = ctx.trailing()
    ins = [ctx.tensor((ctx.rows(), *trailing)) for _ in ctx.members]
    outs = [ctx.tensor((ctx.rows(), *trailing)) for _ in ctx.members]
    outs[ctx.me] = ctx.tensor(tuple(ins[ctx.me].shape))
    args = {"output_tensor_list": outs, "input_tensor_list": ins}
    return _async(ctx, _group(ctx, args))


def zero_d_first_input(ctx: Ctx, args: dict[str, Any]) -> Bad:
    ins = list(args["input_tensor_list"])
    ins[0] = ctx.tensor(())
    args["input_tensor_list"] = ins
    return Bad(("input_tensor_list", "output_tensor_list"), "input_tensor_list[0] 0-d", V)


def good_barrier(ctx: Ctx) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if ctx.chance(0.4):
        args["device_ids"] = [0]
    return _async(ctx, _group(ctx, args))


def bad_device_ids(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["device_ids"] = value = ctx.pick(["0", (0,), [], [-1], [1.0], [None], 0, {0}, [True]])
    return Bad(("device_ids",), short(value))


def good_monitored_barrier(ctx: Ctx) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if ctx.chance(0.5):
        args["timeout"] = ctx.pick([5, 2.5, timedelta(seconds=3)])
    if ctx.chance(0.3):
        args["wait_all_ranks"] = ctx.chance(0.5)
    return _group(ctx, args)


# -- point to point ---------------------------------------------------------------------------


def good_p2p(ctx: Ctx, param: str, group_param: str) -> dict[str, Any]:
    args: dict[str, Any] = {"tensor": ctx.tensor(tuple(ctx.pick([(0,), (3,), (2, 2)])))}
    peer = ctx.pick(ctx.others())
    if ctx.chance(0.5):
        args[param] = peer
    else:
        args[group_param] = ctx.members.index(peer)
    if ctx.chance(0.3):
        args["tag"] = 0 if ctx.framework == "mindspore" else ctx.integer(0, 9)
    return _group(ctx, args)


def p2p_mutators(param: str, group_param: str) -> list[Mutator]:
    return [
        not_tensor("tensor"),
        unsupported_dtype("tensor"),
        *root_mutators(param, group_param, peer=True),
        bad_tag(),
        bad_group(),
    ]


def good_p2pop(ctx: Ctx) -> dict[str, Any]:
    args = good_p2p(ctx, "peer", "group_peer")
    args["op"] = ctx.pick([compat.isend, compat.irecv])
    return args


def bad_p2p_op(ctx: Ctx, args: dict[str, Any]) -> Bad:
    options: list[Any] = [
        compat.send,
        compat.recv,
        "isend",
        None,
        1,
        lambda: 0,
        print,
        partial(compat.isend),
        compat.all_reduce,
    ]
    if ctx.framework == "torch":
        import torch.distributed as dist

        options += [dist.send, dist.recv]
    args["op"] = value = ctx.pick(options)
    return Bad(("op",), short(value), V)


def good_batch(ctx: Ctx) -> dict[str, Any]:
    ops = []
    for _ in range(ctx.integer(1, 4)):
        kwargs = good_p2p(ctx, "peer", "group_peer")
        kwargs.pop("group", None)
        if ctx.group is not None:
            kwargs["group"] = ctx.group
        ops.append(compat.P2POp(ctx.pick([compat.isend, compat.irecv]), **kwargs))
    ctx.facts["ops"] = ops
    return {"p2p_op_list": ops}


def _op_fields(op: compat.P2POp) -> dict[str, Any]:
    return {
        "op": op.op,
        "tensor": op.tensor,
        "peer": op.peer,
        "group": op.group,
        "tag": op.tag,
        "group_peer": op.group_peer,
    }


def batch_field(field_name: str) -> Mutator:
    """One op of the batch with a bad ``field_name`` (its message names p2p_op_list[i].field)."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
        ops = list(args["p2p_op_list"])
        i = ctx.integer(0, len(ops) - 1)
        fields = _op_fields(ops[i])
        where = f"p2p_op_list[{i}]"
        blame: tuple[str, ...] = (f"{where}.{field_name}",)
        errors = TV
        if field_name == "tensor":
            fields["tensor"] = ctx.non_tensor()
            errors = T
        elif field_name == "peer":
            fields["group_peer"] = None
            fields["peer"] = ctx.bad_rank(self_is_bad=True) if ctx.chance(0.7) else ctx.non_int()
        elif field_name == "group_peer":
            fields["peer"] = None
            fields["group_peer"] = ctx.pick([ctx.bad_group_rank(), ctx.me, ctx.non_int(False)])
        elif field_name == "both":
            fields["peer"] = ctx.pick(ctx.others())
            fields["group_peer"] = ctx.members.index(ctx.pick(ctx.others()))
            blame = (f"{where}.peer", f"{where}.group_peer")
        elif field_name == "tag":
            bad = bad_tag().mutate(ctx, fields)
            assert bad is not None
            errors = bad.errors
        elif field_name == "group":
            fields["group"] = ctx.bad_group()
        elif field_name == "mixed_groups":
            if len(ops) < 2:
                return None
            # The other group: the world where the batch's is the subgroup, else the subgroup.
            group = subgroup()
            checks = compat.core.state.current().checks
            if checks.group(ctx.group).handle is not None:
                other: list[Any] = [None, compat.WORLD]
            elif ctx.rank in group.ranks:
                other = [group]
            else:
                return None
            fields["group"] = ctx.pick(other)
            if fields["group"] is group:
                fields["peer"] = next(r for r in group.ranks if r != ctx.rank)
                fields["group_peer"] = None
            blame = tuple(f"p2p_op_list[{k}].group" for k in range(len(ops)))
        else:
            raise AssertionError(field_name)
        ops[i] = compat.P2POp(**fields)
        args["p2p_op_list"] = ops
        return Bad(blame, short(ops[i]), errors)

    return Mutator(f"p2p_op_list/{field_name}", mutate, solo=field_name == "mixed_groups")


def bad_batch_list(ctx: Ctx, args: dict[str, Any]) -> Bad:
    ops = list(args["p2p_op_list"])
    kind = ctx.pick(["empty", "type", "element"])
    value: Any
    if kind == "empty":
        value = ctx.pick([[], ()])
    elif kind == "type":
        value = ctx.pick([ops[0], None, "ops", 3, {"a": ops[0]}, iter(ops)])
    else:
        value = list(ops)
        value.insert(ctx.integer(0, len(ops)), ctx.pick([None, ctx.tensor((2,)), "op", (1, 2)]))
    args["p2p_op_list"] = value
    return Bad(("p2p_op_list",), short(value))


def batch_unsupported(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
    if ctx.unsupported is None:
        return None
    ops = list(args["p2p_op_list"])
    i = ctx.integer(0, len(ops) - 1)
    fields = _op_fields(ops[i])
    fields["tensor"] = ctx.tensor((2,), ctx.unsupported)
    ops[i] = compat.P2POp(**fields)
    args["p2p_op_list"] = ops
    return Bad((f"p2p_op_list[{i}].tensor",), short(ops[i]), U)


# -- objects ----------------------------------------------------------------------------------


def _objects(ctx: Ctx, count: int) -> list[Any]:
    pool: list[Any] = [None, 1, "x" * ctx.integer(0, 5), {"k": [1, 2]}, (3.5,), b"\x00"]
    return [ctx.pick(pool) for _ in range(count)]


def bad_object_list(param: str, length: bool = False) -> list[Mutator]:
    def type_(ctx: Ctx, args: dict[str, Any]) -> Bad:
        current = args.get(param) or [None]
        args[param] = value = ctx.pick(
            [tuple(current), None, "ab", {"a": 1}, 3, ctx.tensor((2,)), iter(current)]
        )
        return Bad((param,), short(value), T)

    def length_(ctx: Ctx, args: dict[str, Any]) -> Bad:
        n = ctx.n
        args[param] = value = [None] * ctx.pick([c for c in (0, n - 1, n + 1, 2 * n + 1) if c != n])
        return Bad((param,), short(value), V)

    mutators = [Mutator(f"{param}/type", type_)]
    if length:
        mutators.append(Mutator(f"{param}/length", length_))
    return mutators


def unpicklable_item(param: str) -> Mutator:
    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
        items = args.get(param)
        if not isinstance(items, list) or not items:
            return None
        i = ctx.integer(0, len(items) - 1)
        items = list(items)
        items[i] = value = unpicklable(ctx)
        args[param] = items
        return Bad((f"{param}[{i}]",), short(value), (Exception,), pickling=True)

    return Mutator(f"{param}/unpicklable", mutate)


def unpicklable_obj(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["obj"] = value = unpicklable(ctx)
    return Bad(("obj",), short(value), (Exception,), pickling=True)


def good_all_gather_object(ctx: Ctx) -> dict[str, Any]:
    return _group(ctx, {"object_list": [None] * ctx.n, "obj": _objects(ctx, 1)[0]})


def good_broadcast_object_list(ctx: Ctx) -> dict[str, Any]:
    args: dict[str, Any] = {"object_list": _objects(ctx, ctx.integer(0, 3))}
    _root(ctx, args, "src", "group_src", ctx.pick(ctx.members), default_root=True)
    if ctx.chance(0.3):
        args["device"] = "cpu"
    return _group(ctx, args)


def good_gather_object(ctx: Ctx, root: int | None = None) -> dict[str, Any]:
    root = ctx.pick(ctx.members) if root is None else root
    args: dict[str, Any] = {"obj": _objects(ctx, 1)[0]}
    if ctx.rank == root:
        args["object_gather_list"] = [None] * ctx.n
    _root(ctx, args, "dst", "group_dst", root, default_root=True)
    return _group(ctx, args)


def gather_object_list_bad(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
    if ctx.chance(0.5):
        args.clear()
        args.update(good_gather_object(ctx, ctx.rank))
        n = ctx.n
        args["object_gather_list"] = value = ctx.pick(
            [None, (None,) * n, "ab", 3, [None] * (n + 1), [None] * (n - 1) if n > 1 else []]
        )
        return Bad(("object_gather_list",), short(value))
    if ctx.n < 2:
        return None
    args.clear()
    args.update(good_gather_object(ctx, ctx.pick(ctx.others())))
    args["object_gather_list"] = value = ctx.pick([[None] * ctx.n, ["x"], ctx.tensor((2, 2)), "ab"])
    return Bad(("object_gather_list",), short(value))


def good_scatter_object_list(ctx: Ctx, root: int | None = None) -> dict[str, Any]:
    root = ctx.pick(ctx.members) if root is None else root
    args: dict[str, Any] = {"scatter_object_output_list": [None] * ctx.integer(1, 2)}
    if ctx.rank == root:
        args["scatter_object_input_list"] = _objects(ctx, ctx.n)
    _root(ctx, args, "src", "group_src", root, default_root=True)
    return _group(ctx, args)


def scatter_object_output_bad(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["scatter_object_output_list"] = value = ctx.pick([[], (None,), None, "ab", 3])
    return Bad(("scatter_object_output_list",), short(value))


def scatter_object_input_bad(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args.clear()
    args.update(good_scatter_object_list(ctx, ctx.rank))
    n = ctx.n
    args["scatter_object_input_list"] = value = ctx.pick(
        [None, (None,) * n, "ab", 3, [None] * (n + 1), [None] * (n - 1) if n > 1 else []]
    )
    return Bad(("scatter_object_input_list",), short(value))


def scatter_object_unpicklable(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args.clear()
    args.update(good_scatter_object_list(ctx, ctx.rank))
    return unpicklable_item("scatter_object_input_list").mutate(ctx, args) or Bad((), "")


def good_object_p2p(ctx: Ctx, param: str, group_param: str) -> dict[str, Any]:
    args: dict[str, Any] = {"object_list": _objects(ctx, ctx.integer(0, 3))}
    peer = ctx.pick(ctx.others())
    if ctx.chance(0.5):
        args[param] = peer
    else:
        args[group_param] = ctx.members.index(peer)
    if ctx.chance(0.3):
        args["use_batch"] = ctx.chance(0.5)
    return _group(ctx, args)


# -- queries and groups -----------------------------------------------------------------------


def good_query_group(ctx: Ctx) -> dict[str, Any]:
    group = subgroup()
    return {"group": ctx.pick([None, compat.WORLD, group, list(group.ranks), ctx.group])}


def good_get_global_rank(ctx: Ctx) -> dict[str, Any]:
    args = good_query_group(ctx)
    ctx.facts["size"] = size = len(compat.get_process_group_ranks(args["group"]))
    args["group_rank"] = ctx.integer(0, size - 1)
    return args


def bad_group_rank_query(ctx: Ctx, args: dict[str, Any]) -> Bad:
    size = ctx.facts["size"]
    args["group_rank"] = value = ctx.pick([size, size + 2, -1, 2**40, ctx.non_int()])
    return Bad(("group_rank",), short(value))


def good_get_group_rank(ctx: Ctx) -> dict[str, Any]:
    args = good_query_group(ctx)
    ctx.facts["members"] = members = compat.get_process_group_ranks(args["group"])
    args["global_rank"] = ctx.pick(members)
    return args


def bad_global_rank_query(ctx: Ctx, args: dict[str, Any]) -> Bad:
    members = ctx.facts["members"]
    outside = [r for r in range(ctx.world) if r not in members]
    args["global_rank"] = value = ctx.pick(
        [ctx.world, -1, 2**40, ctx.non_int(), *outside, *outside]
    )
    return Bad(("global_rank",), short(value))


def good_new_group(ctx: Ctx) -> dict[str, Any]:
    chosen = [r for r in range(ctx.world) if ctx.chance(0.6)] or [ctx.rank]
    order = [int(i) for i in ctx.rng.permutation(len(chosen))]
    args: dict[str, Any] = {"ranks": ctx.pick([[chosen[i] for i in order], tuple(chosen), None])}
    if ctx.framework == "torch" and ctx.chance(0.3):
        args["timeout"] = ctx.pick([30, timedelta(seconds=60)])
    if ctx.chance(0.3):
        args["backend"] = compat.get_backend()
    return args


def bad_new_group_ranks(ctx: Ctx, args: dict[str, Any]) -> Bad:
    n = ctx.world
    args["ranks"] = value = ctx.pick(
        [
            "01",
            3,
            {0},
            [0, n],
            [-1],
            [0, 0],
            [],
            [0.0],
            [True],
            [None],
            {"a": 0},
            range(n + 1),
            [[0]],
            2.5,
        ]
    )
    return Bad(("ranks",), short(value))


def bad_backend(ctx: Ctx, args: dict[str, Any]) -> Bad:
    # A well-formed name compat has no table for ("ccl") goes to the framework: not bad input.
    args["backend"] = value = ctx.pick(["", 3, b"gloo", ["gloo"], "gloo,nccl", "cpu:", "cpu:gloo,"])
    return Bad(("backend",), short(value))


def bad_subgroup_size(ctx: Ctx, args: dict[str, Any]) -> Bad:
    n = ctx.world
    args["group_size"] = value = ctx.pick([0, -1, n + 1, 2.5, "2", [1]])
    return Bad(("group_size",), short(value))


def bad_subgroup_lists(ctx: Ctx, args: dict[str, Any]) -> Bad:
    n = ctx.world
    value = ctx.pick([[], [[0], [0]], [[0, n]], [[0, "1"]], "01", [0, 1], 3])
    args["ranks_per_subgroup_list"] = value
    return Bad(("ranks_per_subgroup_list", "ranks"), short(value))


def bad_local_synchronization(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["use_local_synchronization"] = value = ctx.pick(["yes", 1, 0, None, [True]])
    return Bad(("use_local_synchronization",), short(value))


def good_split_group(ctx: Ctx) -> dict[str, Any]:
    """Every rank a split of its own: made by that rank alone (no rank waits for another)."""
    args: dict[str, Any] = {"split_ranks": [[r] for r in range(ctx.world)]}
    if ctx.framework == "torch" and ctx.chance(0.3):
        args["timeout"] = ctx.pick([30, timedelta(seconds=60)])
    if ctx.chance(0.3):
        args["group_desc"] = "fuzzed"
    return args


def bad_split_ranks(ctx: Ctx, args: dict[str, Any]) -> Bad:
    n = ctx.world
    value = ctx.pick([None, [], [[]], [[0], [0]], [[0, 0]], [[0, n]], [[-1]], [[0, "1"]], "01",
                      [0, 1], 3, [[0.0]], [[True]]])  # fmt: skip
    args["split_ranks"] = value
    return Bad(("split_ranks",), short(value))


def good_device_mesh(ctx: Ctx) -> dict[str, Any]:
    n = ctx.world
    shape = ctx.pick([(n,), (1, n), (n, 1)])
    args: dict[str, Any] = {"device_type": "cpu", "mesh_shape": shape}
    if ctx.chance(0.5):
        args["mesh_dim_names"] = tuple(f"d{i}" for i in range(len(shape)))
    return args


def bad_mesh_shape(ctx: Ctx, args: dict[str, Any]) -> Bad:
    n = ctx.world
    value = ctx.pick([(n + 1,), (n, 2), (0,), (), n, "2", (1.5,), (True,), [-1], None])
    args["mesh_shape"] = value
    # a mesh of another length than mesh_dim_names: either may be named
    return Bad(("mesh_shape", "mesh_dim_names"), short(value))


def bad_mesh_dim_names(ctx: Ctx, args: dict[str, Any]) -> Bad:
    count = len(args["mesh_shape"])
    value = ctx.pick([("a",) * (count + 1), ("x",) * max(count, 2), "dp", [3], ("",) * count, 5])
    args["mesh_dim_names"] = value
    return Bad(("mesh_dim_names",), short(value))


def bad_device_type(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["device_type"] = value = ctx.pick(["cpu:0", "", 3, None, "cuda:1", b"cpu"])
    return Bad(("device_type",), short(value))


def coalescing_block(tensor: Any, **kwargs: Any) -> None:
    """compat.coalescing_manager entered and left around one all_reduce of ``tensor``: its
    arguments are checked as the block opens, and the all_reduce is issued at its end."""
    with compat.coalescing_manager(**kwargs):
        compat.all_reduce(tensor)


def good_coalescing_block(ctx: Ctx) -> dict[str, Any]:
    args: dict[str, Any] = {"tensor": ctx.tensor((3,))}
    if ctx.chance(0.5):
        args["async_ops"] = ctx.chance(0.5)
    if ctx.chance(0.3):
        args["device"] = "cpu" if ctx.framework == "torch" else None
    if ctx.chance(0.3):
        args["group"] = ctx.pick([None, compat.WORLD])
    return args


def bad_block_device(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["device"] = value = ctx.pick([3.5, object(), b"cpu", "no-such-device", [0]])
    return Bad(("device",), short(value), TV)


def bad_destroy_group(ctx: Ctx, args: dict[str, Any]) -> Bad:
    n = ctx.world
    world_alike: list[Any] = [
        list(range(n)),
        tuple(reversed(range(n))),
        _native_world(ctx.framework),
    ]
    value = ctx.pick([*world_alike, ctx.bad_group(member=False)])
    args["group"] = value
    return Bad(("group",), short(value))


# -- compat.autograd --------------------------------------------------------------------------


DIFFERENTIABLE_OPS = ["sum", "avg", compat.ReduceOp.SUM, compat.ReduceOp.AVG, "AVG"]
#: compat.autograd's all_reduce and reduce_scatter reduce with these too (their backward raises)
FORWARD_ONLY_OPS = ["max", "MIN", "product", compat.ReduceOp.MAX]


def good_autograd(
    ctx: Ctx,
    op: bool = False,
    rows_times_n: bool = False,
    zero_d: bool = True,
    ops: list[Any] = DIFFERENTIABLE_OPS,
    dims: bool = False,
) -> dict[str, Any]:
    """One float tensor, an op of ``ops`` and (``dims``) a dim of it as ``dim``: any dim, or dim
    0 where dim 0 is what the group size divides."""
    if ctx.dtype in GOOD_DTYPES:  # not an unsupported dtype made on purpose
        ctx.dtype = ctx.pick(["float32", "float64"])
    rows = ctx.integer(1, 3) * (ctx.n if rows_times_n else 1)
    shape: tuple[int, ...] = ctx.pick([(rows,), (rows, 2)] + ([()] if zero_d else []))
    args: dict[str, Any] = {"tensor": ctx.tensor(shape)}
    ctx.facts["ndim"] = len(shape)
    if dims and ctx.chance(0.5):
        dim = 0 if rows_times_n else ctx.integer(0, len(shape) - 1)
        args["dim"] = dim - len(shape) if ctx.chance(0.3) else dim
    if op and ctx.chance(0.7):
        args["op"] = ctx.pick(ops)
    return _group(ctx, args)


def good_permute(ctx: Ctx) -> dict[str, Any]:
    """compat.autograd.permute_tensor: a float tensor of any shape with a dim 0 and a
    permutation of the group's ranks."""
    args = good_autograd(ctx, zero_d=False)
    args["src_dst"] = [int(i) for i in ctx.rng.permutation(ctx.n)]
    return args


def good_autograd_rooted(ctx: Ctx, root: str, op: bool = False) -> dict[str, Any]:
    """compat.autograd's broadcast / reduce / gather: a tensor and a global root of the group."""
    args = good_autograd(ctx, op=op)
    args[root] = ctx.pick(ctx.members)
    return args


def good_autograd_scatter(ctx: Ctx) -> dict[str, Any]:
    args = good_autograd(ctx)
    first = args.pop("tensor")
    args["tensors"] = [first, *(ctx.tensor(tuple(first.shape)) for _ in ctx.members[1:])]
    args["src"] = ctx.pick(ctx.members)
    return args


def good_autograd_all_to_all(ctx: Ctx) -> dict[str, Any]:
    if ctx.dtype in GOOD_DTYPES:  # not an unsupported dtype made on purpose
        ctx.dtype = ctx.pick(["float32", "float64"])
    args = good_all_to_all(ctx)
    args.pop("async_op", None)
    return args


def bad_global_root(param: str) -> Mutator:
    """A root outside the group, or not an int."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args[param] = value = ctx.bad_rank() if ctx.chance(0.6) else ctx.non_int()
        return Bad((param,), short(value), TV)

    return _m(f"{param}/bad", mutate)


def not_differentiable(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["op"] = value = ctx.pick(["min", "max", "prod", compat.ReduceOp.PRODUCT, "MAX"])
    return Bad(("op",), short(value), U)


def autograd_integers(ctx: Ctx, args: dict[str, Any]) -> Bad:
    """AVG of integers: compat.all_reduce refuses it inside the forward, before communicating."""
    args["tensor"] = ctx.tensor((2,), ctx.pick(["int32", "int64"]))
    args["op"] = "avg"
    return Bad(("op",), "avg on an integer tensor", U)


def zero_d(param: str, *blame: str, whole: str | None = None) -> Mutator:
    """``param`` 0-d; good where a dim-0 gather's ``whole`` output has one element per rank
    (torch's form on NCCL)."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
        output = args.get(whole) if whole is not None else None
        if (
            framework_of(output) is not None
            and ctx.facts.get(f"{whole}_stack") is not None
            and math.prod(tuple(output.shape)) == ctx.n
        ):
            return None
        args[param] = value = ctx.tensor(())
        return Bad((param, *blame), short(value), V)

    return Mutator(f"{param}/zero_d", mutate, solo=True)


# -- the table of specs -----------------------------------------------------------------------


def _m(label: str, mutate: Mutate, solo: bool = False) -> Mutator:
    return Mutator(label, mutate, solo)


def _specs() -> list[Spec]:
    ag = compat.autograd
    tensor_common = [
        not_tensor("tensor"),
        unsupported_dtype("tensor"),
        bad_group(),
        bad_bool("async_op"),
    ]
    specs = [
        Spec(
            "all_reduce",
            compat.all_reduce,
            good_all_reduce,
            [
                *tensor_common,
                bad_op(),
                avg_integers(),
            ],
        ),
        Spec(
            "all_reduce_coalesced",
            compat.all_reduce_coalesced,
            good_all_reduce_coalesced,
            [
                bad_list("tensors", "type"),
                bad_list("tensors", "element"),
                bad_list("tensors", "element_dtype"),
                bad_group(),
                bad_bool("async_op"),
                bad_op(),
            ],
        ),
        Spec(
            "reduce_scatter",
            compat.reduce_scatter,
            good_reduce_scatter,
            [
                not_tensor("output"),
                retensor("output", "dtype", T, "input_list"),
                retensor("output", "shape", V, "input_list"),
                *list_mutators("input_list", "output"),
                unsupported_dtype("output", "input_list"),
                bad_op(),
                avg_integers(),
                bad_group(),
                bad_bool("async_op"),
            ],
        ),
        Spec(
            "reduce_scatter_tensor",
            compat.reduce_scatter_tensor,
            good_reduce_scatter_tensor,
            [
                *tensor_common,
                zero_d("tensor"),
                indivisible("tensor", part="out"),
                not_tensor("out", False),
                retensor("out", "shape", V, fact="out_shape"),
                retensor("out", "dtype", T, fact="out_shape"),
                bad_sizes("input_split_sizes", "parts", "total"),
                bad_dim(),
                bad_op(),
                avg_integers(),
            ],
        ),
        Spec(
            "reduce_scatter_into",
            compat.reduce_scatter_into,
            good_reduce_scatter_into,
            [
                not_tensor("output"),
                not_tensor("input"),
                zero_d("input"),
                indivisible("input", part="output"),
                retensor("output", "shape", V),
                retensor("output", "dtype", T),
                unsupported_dtype("output", "input"),
                bad_op(),
                avg_integers(),
                bad_group(),
                bad_bool("async_op"),
            ],
        ),
        Spec(
            "all_gather",
            compat.all_gather,
            good_all_gather,
            [
                *tensor_common,
                retensor("tensor", "dtype", T, "tensor_list"),
                retensor("tensor", "shape", V, "tensor_list"),
                *list_mutators("tensor_list", "tensor", trailing=False),
            ],
        ),
        Spec(
            "all_gather_into_tensor",
            compat.all_gather_into_tensor,
            good_all_gather_into_tensor,
            [
                *tensor_common,
                zero_d("tensor", whole="out"),
                not_tensor("out", False),
                retensor("out", "shape", V, fact="out_shape"),
                retensor("out", "dtype", T, fact="out_shape"),
                _m("output_split_sizes/bad_sizes", bad_gather_sizes),
                bad_dim(),
            ],
        ),
        Spec(
            "all_gather_into",
            compat.all_gather_into,
            good_all_gather_into,
            [
                not_tensor("output_tensor"),
                not_tensor("input_tensor"),
                zero_d("input_tensor", whole="output_tensor"),
                retensor("output_tensor", "shape", V),
                retensor("output_tensor", "dtype", T),
                unsupported_dtype("output_tensor", "input_tensor"),
                bad_group(),
                bad_bool("async_op"),
            ],
        ),
        Spec(
            "broadcast",
            compat.broadcast,
            good_broadcast,
            [
                *tensor_common,
                *root_mutators("src", "group_src"),
            ],
        ),
        Spec(
            "scatter",
            compat.scatter,
            partial(
                good_rooted_list,
                list_param="scatter_list",
                root_param="src",
                group_param="group_src",
            ),
            [
                *tensor_common,
                *root_mutators("src", "group_src"),
                *root_list_mutators("scatter_list", "src", "group_src", good_rooted_list),
            ],
        ),
        Spec(
            "scatter_tensor",
            compat.scatter_tensor,
            good_scatter_tensor,
            [
                *tensor_common,
                zero_d("tensor"),
                indivisible("tensor"),
                *root_mutators("src", "group_src"),
                not_tensor("out", False),
                retensor("out", "shape", V, fact="out_shape"),
                retensor("out", "dtype", T, fact="out_shape"),
            ],
        ),
        Spec(
            "gather",
            compat.gather,
            partial(
                good_rooted_list,
                list_param="gather_list",
                root_param="dst",
                group_param="group_dst",
            ),
            [
                *tensor_common,
                *root_mutators("dst", "group_dst"),
                *root_list_mutators("gather_list", "dst", "group_dst", good_rooted_list),
            ],
        ),
        Spec(
            "reduce",
            compat.reduce,
            good_reduce,
            [
                *tensor_common,
                *root_mutators("dst", "group_dst"),
                bad_op(),
                avg_integers(),
            ],
        ),
        Spec(
            "all_to_all_single",
            compat.all_to_all_single,
            good_all_to_all_single,
            [
                not_tensor("output"),
                not_tensor("input"),
                zero_d("input", "output"),
                zero_d("output", "input"),
                retensor("input", "dtype", T, "output"),
                retensor("output", "dtype", T, "input"),
                retensor("input", "trailing", V, "output"),
                retensor("output", "trailing", V, "input"),
                bad_sizes("input_split_sizes", "parts", "in_total", "input"),
                bad_sizes("output_split_sizes", "parts", "out_total", "output"),
                indivisible("input", "output"),
                unsupported_dtype("input", "output"),
                bad_group(),
                bad_bool("async_op"),
            ],
        ),
        Spec(
            "all_to_all",
            compat.all_to_all,
            good_all_to_all,
            [
                *list_mutators("input_tensor_list", "output_tensor_list", own=False),
                *list_mutators("output_tensor_list", "input_tensor_list"),
                _m("input_tensor_list/zero_d", zero_d_first_input, solo=True),
                unsupported_dtype("input_tensor_list", "output_tensor_list"),
                bad_group(),
                bad_bool("async_op"),
            ],
        ),
        Spec(
            "barrier",
            compat.barrier,
            good_barrier,
            [
                bad_group(),
                bad_bool("async_op"),
                _m("device_ids/bad", bad_device_ids),
            ],
        ),
        Spec(
            "monitored_barrier",
            compat.monitored_barrier,
            good_monitored_barrier,
            [
                bad_group(),
                bad_timeout(),
                bad_bool("wait_all_ranks"),
            ],
        ),
        Spec(
            "send",
            compat.send,
            partial(good_p2p, param="dst", group_param="group_dst"),
            p2p_mutators("dst", "group_dst"),
            min_world=2,
        ),
        Spec(
            "recv",
            compat.recv,
            partial(good_p2p, param="src", group_param="group_src"),
            p2p_mutators("src", "group_src"),
            min_world=2,
        ),
        Spec(
            "isend",
            compat.isend,
            partial(good_p2p, param="dst", group_param="group_dst"),
            p2p_mutators("dst", "group_dst"),
            min_world=2,
        ),
        Spec(
            "irecv",
            compat.irecv,
            partial(good_p2p, param="src", group_param="group_src"),
            p2p_mutators("src", "group_src"),
            min_world=2,
        ),
        Spec("P2POp", compat.P2POp, good_p2pop, [_m("op/bad", bad_p2p_op)], min_world=2),
        Spec(
            "batch_isend_irecv",
            compat.batch_isend_irecv,
            good_batch,
            [
                _m("p2p_op_list/bad_list", bad_batch_list),
                *(
                    batch_field(name)
                    for name in (
                        "tensor",
                        "peer",
                        "group_peer",
                        "both",
                        "tag",
                        "group",
                        "mixed_groups",
                    )
                ),
                _m("p2p_op_list/unsupported_dtype", batch_unsupported),
            ],
            min_world=2,
        ),
        Spec(
            "all_gather_object",
            compat.all_gather_object,
            good_all_gather_object,
            [
                *bad_object_list("object_list", length=True),
                _m("obj/unpicklable", unpicklable_obj),
                bad_group(),
            ],
        ),
        Spec(
            "broadcast_object_list",
            compat.broadcast_object_list,
            good_broadcast_object_list,
            [
                *bad_object_list("object_list"),
                *root_mutators("src", "group_src"),
                bad_device(),
                bad_group(),
                _m(
                    "object_list/unpicklable_on_root",
                    partial(_on_root_unpicklable, "src", "group_src"),
                    solo=True,
                ),
            ],
        ),
        Spec(
            "gather_object",
            compat.gather_object,
            good_gather_object,
            [
                _m("object_gather_list/bad", gather_object_list_bad, solo=True),
                *root_mutators("dst", "group_dst"),
                _m("obj/unpicklable", unpicklable_obj),
                bad_group(),
            ],
        ),
        Spec(
            "scatter_object_list",
            compat.scatter_object_list,
            good_scatter_object_list,
            [
                _m("scatter_object_output_list/bad", scatter_object_output_bad),
                _m("scatter_object_input_list/bad", scatter_object_input_bad, solo=True),
                _m("scatter_object_input_list/unpicklable", scatter_object_unpicklable, solo=True),
                *root_mutators("src", "group_src"),
                bad_group(),
            ],
        ),
        Spec(
            "send_object_list",
            compat.send_object_list,
            partial(good_object_p2p, param="dst", group_param="group_dst"),
            [
                *bad_object_list("object_list"),
                *root_mutators("dst", "group_dst", peer=True),
                bad_device(),
                bad_bool("use_batch"),
                unpicklable_item("object_list"),
                bad_group(),
            ],
            min_world=2,
        ),
        Spec(
            "recv_object_list",
            compat.recv_object_list,
            partial(good_object_p2p, param="src", group_param="group_src"),
            [
                *bad_object_list("object_list"),
                *root_mutators("src", "group_src", peer=True),
                bad_device(),
                bad_bool("use_batch"),
                bad_group(),
            ],
            min_world=2,
        ),
        Spec("get_rank", compat.get_rank, good_query_group, [bad_group(member=False)]),
        Spec("get_world_size", compat.get_world_size, good_query_group, [bad_group(member=False)]),
        Spec("get_backend", compat.get_backend, good_query_group, [bad_group(member=False)]),
        Spec(
            "get_process_group_ranks",
            compat.get_process_group_ranks,
            good_query_group,
            [bad_group(member=False)],
        ),
        Spec(
            "get_global_rank",
            compat.get_global_rank,
            good_get_global_rank,
            [
                bad_group(member=False),
                _m("group_rank/bad", bad_group_rank_query),
            ],
        ),
        Spec(
            "get_group_rank",
            compat.get_group_rank,
            good_get_group_rank,
            [
                bad_group(member=False),
                _m("global_rank/bad", bad_global_rank_query),
            ],
        ),
        Spec(
            "new_group",
            compat.new_group,
            good_new_group,
            [
                _m("ranks/bad", bad_new_group_ranks),
                bad_timeout(representable=True),
                _m("backend/bad", bad_backend),
                _m("use_local_synchronization/bad", bad_local_synchronization),
            ],
        ),
        Spec(
            "destroy",
            compat.destroy,
            lambda ctx: {},
            [_m("group/bad", bad_destroy_group)],
            control=False,
        ),
        # The world, in any spelling, ends the job there (as torch's): only bad groups here.
        Spec(
            "destroy_process_group",
            compat.destroy_process_group,
            lambda ctx: {},
            [bad_group(member=False)],
            control=False,
        ),
        Spec(
            "new_subgroups",
            compat.new_subgroups,
            lambda ctx: {"group_size": ctx.pick([1, ctx.world])},
            [_m("group_size/bad", bad_subgroup_size)],
        ),
        Spec(
            "new_subgroups_by_enumeration",
            compat.new_subgroups_by_enumeration,
            lambda ctx: {"ranks_per_subgroup_list": [[r] for r in range(ctx.world)]},
            [_m("ranks_per_subgroup_list/bad", bad_subgroup_lists)],
        ),
        Spec(
            "framework_group",
            compat.framework_group,
            good_query_group,
            [bad_group(member=False)],
        ),
        Spec(
            "new_framework_group",
            compat.new_framework_group,
            good_new_group,
            [
                _m("ranks/bad", bad_new_group_ranks),
                bad_timeout(representable=True),
                _m("backend/bad", bad_backend),
                _m("use_local_synchronization/bad", bad_local_synchronization),
            ],
        ),
        Spec(
            "init_device_mesh",
            compat.init_device_mesh,
            good_device_mesh,
            [
                _m("mesh_shape/bad", bad_mesh_shape),
                _m("mesh_dim_names/bad", bad_mesh_dim_names),
                _m("device_type/bad", bad_device_type),
            ],
        ),
        Spec(
            "coalescing_manager",
            coalescing_block,
            good_coalescing_block,
            [bad_group(member=True), bad_bool("async_ops"), _m("device/bad", bad_block_device)],
        ),
        Spec(
            "split_group",
            compat.split_group,
            good_split_group,
            [
                _m("split_ranks/bad", bad_split_ranks),
                bad_timeout(representable=True),
                bad_group("parent_pg", member=True),
            ],
        ),
        Spec(
            "autograd.all_gather",
            ag.all_gather,
            partial(good_autograd, zero_d=False, dims=True),
            [
                not_tensor("tensor"),
                zero_d("tensor"),
                unsupported_dtype("tensor"),
                bad_group(),
                bad_dim(),
            ],
        ),
        Spec(
            "autograd.all_gather_tuple",
            ag.all_gather_tuple,
            good_autograd,
            [
                not_tensor("tensor"),
                unsupported_dtype("tensor"),
                bad_group(),
            ],
        ),
        Spec(
            "autograd.reduce_scatter",
            ag.reduce_scatter,
            partial(
                good_autograd,
                op=True,
                rows_times_n=True,
                zero_d=False,
                dims=True,
                ops=DIFFERENTIABLE_OPS + FORWARD_ONLY_OPS,
            ),
            [
                not_tensor("tensor"),
                zero_d("tensor"),
                indivisible("tensor"),
                unsupported_dtype("tensor"),
                bad_op(),
                bad_group(),
                bad_dim(),
            ],
        ),
        Spec(
            "autograd.all_reduce",
            ag.all_reduce,
            partial(good_autograd, op=True, ops=DIFFERENTIABLE_OPS + FORWARD_ONLY_OPS),
            [
                not_tensor("tensor"),
                unsupported_dtype("tensor"),
                bad_op(),
                _m("op/avg_on_integers", autograd_integers, solo=True),
                bad_group(),
            ],
        ),
        Spec(
            "autograd.all_to_all_single",
            ag.all_to_all_single,
            partial(good_autograd, rows_times_n=True, zero_d=False),
            [
                not_tensor("tensor"),
                zero_d("tensor"),
                indivisible("tensor"),
                unsupported_dtype("tensor"),
                bad_group(),
            ],
        ),
        Spec(
            "autograd.permute_tensor",
            ag.permute_tensor,
            good_permute,
            [
                not_tensor("tensor"),
                zero_d("tensor"),
                unsupported_dtype("tensor"),
                bad_group(),
                fixed("src_dst", lambda ctx: list(range(ctx.n + 1))),
                fixed("src_dst", lambda ctx: [ctx.n] * ctx.n),
                fixed("src_dst", lambda ctx: "0" * ctx.n),
            ],
        ),
        Spec(
            "autograd.all_to_all",
            ag.all_to_all,
            good_autograd_all_to_all,
            [
                # Parts of any shape (the tensors are exchanged flattened); the output list's
                # elements are checked as the input list's are (compat.autograd._checked_lists).
                *list_mutators(
                    "input_tensor_list", "output_tensor_list", own=False, trailing=False
                ),
                bad_list("output_tensor_list", "length", "input_tensor_list"),
                bad_list("output_tensor_list", "element_dtype", "input_tensor_list"),
                bad_group(),
            ],
        ),
        Spec(
            "autograd.broadcast",
            ag.broadcast,
            partial(good_autograd_rooted, root="src"),
            [not_tensor("tensor"), bad_global_root("src"), bad_group()],
        ),
        Spec(
            "autograd.reduce",
            ag.reduce,
            partial(good_autograd_rooted, root="dst", op=True),
            [
                not_tensor("tensor"),
                bad_global_root("dst"),
                bad_op(),
                _m("op/not_differentiable", not_differentiable),
                bad_group(),
            ],
        ),
        Spec(
            "autograd.gather",
            ag.gather,
            partial(good_autograd_rooted, root="dst"),
            [not_tensor("tensor"), bad_global_root("dst"), bad_group()],
        ),
        Spec(
            "autograd.scatter",
            ag.scatter,
            good_autograd_scatter,
            [bad_global_root("src"), bad_group()],
        ),
    ]
    return specs


def _on_root_unpicklable(param: str, group_param: str, ctx: Ctx, args: dict[str, Any]) -> Bad:
    """broadcast_object_list on its root with an object that cannot be pickled."""
    args.clear()
    args["object_list"] = _objects(ctx, ctx.integer(1, 3))
    _root(ctx, args, param, group_param, ctx.rank, default_root=True)
    _group(ctx, args)
    return unpicklable_item("object_list").mutate(ctx, args) or Bad((), "")


# -- running the trials -----------------------------------------------------------------------


@dataclass
class Tally:
    """What one function's trials gave on one rank."""

    function: str
    tried: int = 0  # bad calls
    controls: int = 0  # calls with the good arguments
    raised: int = 0  # the right exception, naming the parameter: as it should be
    skipped: int = 0  # a generator that does not apply here (e.g. needs 2 ranks)
    accepted: int = 0  # no exception: reached communication, or returned
    wrong_type: int = 0
    wrong_message: int = 0
    modified: int = 0
    control_failed: int = 0  # the good arguments raised: the generator's fault, or compat's
    generator_failed: int = 0  # a generator raised (its fault)
    failures: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for name, value in vars(other).items():
            if isinstance(value, int):
                setattr(self, name, getattr(self, name) + value)
        self.failures += other.failures

    @property
    def unexpected(self) -> int:
        return self.wrong_type + self.wrong_message

    def counts(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "tried": self.tried,
            "controls": self.controls,
            "raised": self.raised,
            "skipped": self.skipped,
            "accepted": self.accepted,
            "unexpected": self.unexpected,
            "wrong_type": self.wrong_type,
            "wrong_message": self.wrong_message,
            "modified": self.modified,
            "control_failed": self.control_failed,
            "generator_failed": self.generator_failed,
        }


def _buffers(value: Any, found: list[Any], lists: list[list[Any]], framework: str) -> None:
    """The tensors of this framework in ``value`` (into ``found``) and its Python lists."""
    if framework_of(value) == framework:
        if str(getattr(value, "device", "")) != "meta" and all(id(value) != id(t) for t in found):
            found.append(value)
    elif isinstance(value, compat.P2POp):
        _buffers(value.tensor, found, lists, framework)
    elif isinstance(value, (list, tuple)):
        if isinstance(value, list):
            lists.append(value)
        for item in value:
            _buffers(item, found, lists, framework)


def _blamed(message: str, params: tuple[str, ...]) -> bool:
    """The message starts with one of ``params`` (or an index or field of one) and ':'; a
    message about two parameters names them ``a, b:``."""
    if ":" not in message:
        return False
    names = [name.strip() for name in message.split(":", 1)[0].split(",")]
    return any(
        name == param or name.startswith((param + "[", param + "."))
        for name in names
        for param in params
    )


def _mutated(spec: Spec, mutator: Mutator, ctx: Ctx, args: dict[str, Any]) -> Bad | None:
    if mutator.dtype is not None:
        chosen = mutator.dtype(ctx)
        if chosen is None:
            return None
        ctx.dtype = chosen  # the good arguments again, with this dtype (and ops it takes)
        args.clear()
        args.update(spec.good(ctx))
    return mutator.mutate(ctx, args)


def trial(ctx: Ctx, spec: Spec, mutators: list[Mutator], tally: Tally) -> None:
    """One call of ``spec.function`` with the good arguments made bad by ``mutators`` (none: the
    control, which must not raise)."""
    ctx.new_trial()
    args = spec.good(ctx)
    bads: list[Bad] = []
    for mutator in mutators:
        try:
            bad = _mutated(spec, mutator, ctx, args)
        except Exception as error:  # the generator's own fault: reported, the others go on
            tally.generator_failed += 1
            tally.failures.append(
                f"rank {ctx.rank}: {spec.name}: generator {mutator.label} "
                f"failed: {type(error).__name__}: {error}"
            )
            return
        if bad is None:
            tally.skipped += 1
            return
        bads.append(bad)
    tensors: list[Any] = []
    lists: list[list[Any]] = []
    for value in args.values():
        _buffers(value, tensors, lists, ctx.framework)
    snapshots = [ctx.kit.numpy(tensor) for tensor in tensors]
    contents = [list(items) for items in lists]
    tally.tried += bool(bads)
    tally.controls += not bads
    given = ", ".join(f"{key}={short(value)}" for key, value in args.items())
    where = f"rank {ctx.rank}: {spec.name}({given})"
    outcome: str | None = None
    try:
        with tripwire():
            spec.function(**args)
    except Reached as reached:
        if bads:
            tally.accepted += 1
            outcome = f"accepted (reached communication: {reached})"
    except Exception as error:
        outcome = _judge(error, bads, tally)
        if not bads:
            tally.control_failed += 1
            outcome = f"the good arguments raised {type(error).__name__}: {error}"
    else:
        if bads:
            tally.accepted += 1
            outcome = "accepted (returned without an error)"
    if not bads:  # a control may write its outputs (compat.comm's, or where nothing moves)
        tensors, snapshots, lists, contents = [], [], [], []
    for tensor, snapshot in zip(tensors, snapshots, strict=True):
        if not np.array_equal(ctx.kit.numpy(tensor), snapshot, equal_nan=True):
            tally.modified += 1
            outcome = (outcome or "raised as it should") + f"; modified {short(tensor)}"
    for items, content in zip(lists, contents, strict=True):
        if len(items) != len(content) or any(
            a is not b for a, b in zip(items, content, strict=True)
        ):
            tally.modified += 1
            outcome = (outcome or "raised as it should") + f"; modified the list {short(content)}"
    if outcome is not None:
        made_bad = "; ".join(f"{'/'.join(bad.params)} = {bad.value}" for bad in bads)
        tally.failures.append(f"{where}\n    bad: {made_bad or '(control)'}\n    {outcome}")


def _judge(error: Exception, bads: list[Bad], tally: Tally) -> str | None:
    """None if ``error`` is what one of ``bads`` allows; else what is wrong with it."""
    if not bads:
        return None
    message = str(error)
    for bad in bads:
        if bad.pickling:
            notes = getattr(error, "__notes__", [])
            if any(_blamed(note, bad.params) for note in notes):
                tally.raised += 1
                return None
    errors = tuple(e for bad in bads for e in bad.errors)
    params = tuple(p for bad in bads for p in bad.params)
    if not isinstance(error, errors):
        tally.wrong_type += 1
        return f"unexpected {type(error).__name__}: {message}"
    if not _blamed(message, params):
        tally.wrong_message += 1
        return f"{type(error).__name__} not naming {'/'.join(params)}: {message}"
    tally.raised += 1
    return None


def run_spec(
    kit: Any,
    spec: Spec,
    ranked: bool = True,
    n_rounds: int | None = None,
    n_combos: int | None = None,
) -> Tally:
    """Every generator of ``spec`` ``n_rounds`` times, then ``n_combos`` trials of two
    generators on different parameters; a control (the good arguments) before each."""
    n_rounds = rounds(kit.framework) if n_rounds is None else n_rounds
    n_combos = combos() if n_combos is None else n_combos
    rng = np.random.default_rng([seed(), zlib.crc32(spec.name.encode())])
    ctx = Ctx(kit, rng, ranked)
    tally = Tally(spec.name)
    for mutator in spec.mutators:
        for _ in range(n_rounds):
            if spec.control:
                trial(ctx, spec, [], tally)
            trial(ctx, spec, [mutator], tally)
    pairs = [
        (a, b)
        for a in spec.mutators
        for b in spec.mutators
        if not (a.solo or b.solo) and a.label.split("/")[0] < b.label.split("/")[0]
    ]
    for _ in range(n_combos if pairs else 0):
        trial(ctx, spec, list(ctx.pick(pairs)), tally)
    return tally


def fuzz_case(kit: Any, name: str, specs: list[Spec], n_rounds: int | None = None) -> None:
    """The trials of ``specs`` on every rank, then the follow-up collective on every rank."""
    tally = Tally(name)
    try:
        for spec in specs:
            done = run_spec(kit, spec, n_rounds=n_rounds, n_combos=0 if n_rounds else None)
            tally.add(done)
    finally:
        follow_up(kit)
    report = {"framework": kit.framework, "world": world(), "rank": rank(), **tally.counts()}
    print(REPORT_PREFIX + json.dumps(report), flush=True)
    if tally.failures:
        shown = "\n".join(tally.failures[:8])
        raise AssertionError(
            f"{len(tally.failures)} of {tally.tried} bad calls of {name} went wrong "
            f"(first {min(8, len(tally.failures))}):\n{shown}"
        )


# -- regressions: bad arguments the fuzz found accepted or mis-reported, tried every time -----


def fixed(param: str, value: Callable[[Ctx], Any], errors: tuple[type[BaseException], ...] = TV,
          *blame: str) -> Mutator:  # fmt: skip
    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad:
        args[param] = made = value(ctx)
        return Bad((param, *blame), short(made), errors)

    return Mutator(f"{param}/fixed", mutate, solo=True)


def _primed_all_reduce(ctx: Ctx) -> dict[str, Any]:
    """A tensor whose dtype has passed the checks with the framework's own SUM (torch's equals
    0 and False, and once collided with them in the checks' memo)."""
    tensor = ctx.tensor((2,))
    with tripwire():
        try:
            compat.all_reduce(tensor, op=ctx.kit.native_op("SUM"))
        except Reached:
            pass
    return {"tensor": tensor}


def _regressions() -> list[Spec]:
    def elsewhere(list_param: str, root_param: str, group_param: str) -> Callable[[Ctx], Any]:
        return lambda ctx: good_rooted_list(
            ctx, list_param, root_param, group_param, ctx.pick(ctx.others())
        )

    matrix = lambda ctx: ctx.tensor((2, 2))  # noqa: E731  (bool() of it raises)
    return [
        Spec("all_reduce", compat.all_reduce, _primed_all_reduce, [
            fixed("op", lambda ctx: 0), fixed("op", lambda ctx: False),
        ]),
        Spec("scatter", compat.scatter, elsewhere("scatter_list", "src", "group_src"),
             [fixed("scatter_list", matrix)]),
        Spec("gather", compat.gather, elsewhere("gather_list", "dst", "group_dst"),
             [fixed("gather_list", matrix)]),
        Spec("gather_object", compat.gather_object,
             lambda ctx: good_gather_object(ctx, ctx.pick(ctx.others())),
             [fixed("object_gather_list", matrix)]),
        Spec("new_group", compat.new_group, lambda ctx: {"ranks": None}, [
            fixed("timeout", lambda ctx, v=v: v) for v in (math.inf, -math.inf, math.nan, 1e300)
        ]),
        Spec("batch_isend_irecv", compat.batch_isend_irecv, good_batch, [
            _m("p2p_op_list/unknown_group_name", _unknown_group_name, solo=True),
        ]),
    ]  # fmt: skip


def _unknown_group_name(ctx: Ctx, args: dict[str, Any]) -> Bad:
    """A string no group has (MindSpore's adapter named the parameter "group" here)."""
    ops = list(args["p2p_op_list"])
    fields = _op_fields(ops[0])
    fields["group"] = "no_such_group"
    ops[0] = compat.P2POp(**fields)
    args["p2p_op_list"] = ops
    return Bad(("p2p_op_list[0].group",), short(ops[0]))


SPECS = _specs()
REGRESSIONS = _regressions()
for _spec in SPECS:
    register(
        f"fuzz[{_spec.name}]",
        partial(fuzz_case, name=_spec.name, specs=[_spec]),
        _spec.min_world,
        _spec.frameworks,
    )
register("fuzz[regressions]", partial(fuzz_case, name="regressions", specs=REGRESSIONS,
                                       n_rounds=2), min_world=2)  # fmt: skip


# -- compat.comm (local: fuzzed in the pytest process by tests/test_fuzz.py) -------------------


def _cpu(ctx: Ctx) -> Any:
    if ctx.framework == "torch":
        return ctx.pick(["cpu", ctx.kit.torch.device("cpu")])
    return ctx.pick(["CPU", "cpu"])


def _bad_device(ctx: Ctx) -> Any:
    if ctx.framework == "torch":
        options: list[Any] = ["cuda:7", "meta", "npu", "no-such-device", 7, -2]
    else:
        options = ["GPU", "Ascend", "cuda", "no-such-device", 0, -2]
    return ctx.pick([*options, 3.5, object(), True, b"cpu", None])


def _comm_shape(ctx: Ctx, size_of_dim: int | None = None) -> tuple[tuple[int, ...], int]:
    ndim = ctx.integer(1, 3)
    dim = ctx.integer(0, ndim - 1)
    shape = [ctx.integer(1, 3) for _ in range(ndim)]
    shape[dim] = ctx.integer(0, 5) if size_of_dim is None else size_of_dim
    ctx.facts["ndim"] = ndim
    return tuple(shape), dim


def _with(shape: tuple[int, ...], dim: int, size: int) -> tuple[int, ...]:
    return tuple(size if i == dim else s for i, s in enumerate(shape))


def _dim_arg(ctx: Ctx, args: dict[str, Any], dim: int) -> None:
    if dim or ctx.chance(0.3):
        args["dim"] = dim - ctx.facts["ndim"] if ctx.chance(0.3) else dim


def good_comm_scatter(ctx: Ctx) -> dict[str, Any]:
    shape, dim = _comm_shape(ctx)
    parts = ctx.integer(1, 3)
    ctx.facts.update(parts=parts, total=shape[dim], shape=shape, dim=dim)
    args: dict[str, Any] = {"tensor": ctx.tensor(shape)}
    if ctx.chance(0.5):
        args["devices"] = [_cpu(ctx) for _ in range(parts)]
        if ctx.chance(0.5):
            args["chunk_sizes"] = ctx.sizes(parts, shape[dim])
    else:
        args["out"] = [ctx.tensor(_with(shape, dim, s)) for s in ctx.sizes(parts, shape[dim])]
    _dim_arg(ctx, args, dim)
    return args


def comm_devices_bad(allow_empty: bool = False, needs_tensors: str | None = None) -> Mutator:
    """devices: not a list, empty (where refused), an unknown device (with no out)."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
        if needs_tensors is not None and not args[needs_tensors]:
            return None  # no tensor, no framework to check the devices with (by design)
        args.pop("out", None)
        args.pop("chunk_sizes", None)
        kind = ctx.pick(["type", "element"] + ([] if allow_empty else ["empty"]))
        value: Any
        if kind == "type":
            value = ctx.pick(["cpu", 3, 2.5, ctx.tensor((2,))])  # any other iterable is taken
        elif kind == "empty":
            value = ctx.pick([[], ()])
        else:
            value = [_cpu(ctx) for _ in range(ctx.integer(1, 3))]
            value[ctx.integer(0, len(value) - 1)] = _bad_device(ctx)
        args["devices"] = value
        return Bad(("devices",), short(value))

    return Mutator("devices/bad", mutate, solo=True)


def comm_devices_out(ctx: Ctx, args: dict[str, Any]) -> Bad:
    """devices and out: both given, or neither."""
    if ctx.chance(0.5):
        args.pop("devices", None)
        args.pop("out", None)
        args.pop("chunk_sizes", None)
    elif "devices" in args:
        args["out"] = [ctx.tensor(tuple(args["tensor"].shape))]
    else:
        args["devices"] = [_cpu(ctx)]
    return Bad(("devices", "out"), f"devices={short(args.get('devices'))}, out=...", V)


def comm_out_bad(shape_rule: str) -> Mutator:
    """out (a list of tensors): empty, not a list, an element not a tensor, of another dtype or
    framework, of another shape (``shape_rule``: "except_dim" for scatter, "same" for
    broadcast), or (scatter) sizes on dim not summing to the tensor's."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
        if "out" not in args:
            return None
        out = list(args["out"])
        kind = ctx.pick(
            ["type", "element", "dtype", "shape"]
            + (["empty", "sum"] if shape_rule == "except_dim" else [])
        )
        value: Any = out
        if kind == "type":
            value = ctx.pick([out[0] if out else ctx.tensor((2,)), 3, "ab"])
        elif kind == "empty":
            value = []
        elif not out:
            return None
        else:
            i = ctx.integer(0, len(out) - 1)
            shape = tuple(out[i].shape)
            if kind == "element":
                out[i] = ctx.non_tensor(foreign=True)
            elif kind == "dtype":
                out[i] = ctx.tensor(shape, ctx.other_dtype(ctx.dtype))
            elif kind == "shape":
                dim = ctx.facts.get("dim", -1)
                new = _altered(ctx, shape)
                if shape_rule == "except_dim":
                    while len(new) == len(shape) and all(
                        a == b for j, (a, b) in enumerate(zip(new, shape, strict=True)) if j != dim
                    ):
                        new = _altered(ctx, shape)
                out[i] = ctx.tensor(new)
            else:  # sum
                out[i] = ctx.tensor(_with(shape, ctx.facts["dim"], shape[ctx.facts["dim"]] + 1))
            value = out
        args["out"] = value
        return Bad(("out",), short(value))

    return Mutator("out/bad", mutate, solo=True)


def comm_chunk_sizes_with_out(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
    if "out" not in args:
        return None
    args["chunk_sizes"] = value = [len(args["out"])]
    return Bad(("chunk_sizes",), short(value), V)


def comm_chunk_sizes_bad(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
    if "devices" not in args:
        return None
    return bad_sizes("chunk_sizes", "parts", "total").mutate(ctx, args)


def comm_streams(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["streams"] = value = ctx.pick([[None], ["stream"], 0, "s"])
    return Bad(("streams",), short(value), V)


def comm_zero_d(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["tensor"] = ctx.tensor(())
    return Bad(("tensor", "dim"), "a 0-d tensor", V)


def good_comm_gather(ctx: Ctx) -> dict[str, Any]:
    shape, dim = _comm_shape(ctx)
    sizes = [ctx.integer(0, 3) for _ in range(ctx.integer(1, 3))]
    ctx.facts.update(dim=dim)
    args: dict[str, Any] = {"tensors": [ctx.tensor(_with(shape, dim, s)) for s in sizes]}
    _dim_arg(ctx, args, dim)
    if ctx.chance(0.4):
        args["out"] = ctx.tensor(_with(shape, dim, sum(sizes)))
    elif ctx.chance(0.5):
        args["destination"] = ctx.pick([_cpu(ctx), -1])
    return args


def comm_tensors_bad(param: str, rule: str, min_count: int = 1) -> Mutator:
    """A list of tensors (gather's tensors, reduce_add's inputs, broadcast_coalesced's tensors):
    not a list, empty (where refused), an element not a tensor (or of the other framework), and,
    by ``rule``, an element of another dtype or shape: "except_dim" (gather: the first's shape
    but on dim), "same" (reduce_add: the first's shape and dtype), "free" (any)."""

    def mutate(ctx: Ctx, args: dict[str, Any]) -> Bad | None:
        items = list(args[param])
        kinds = ["type", "element"] + (["empty"] if min_count else [])
        kinds += ["dtype", "shape"] if rule != "free" else []
        kind = ctx.pick(kinds)
        value: Any
        if kind == "type":
            value = ctx.pick([items[0] if items else ctx.tensor((2,)), 3, "ab", b"\x00"])
        elif kind == "empty":
            value = []
        elif not items:
            return None
        elif kind == "element":
            i = ctx.integer(0, len(items) - 1)
            items[i] = ctx.non_tensor(foreign=i > 0)  # the first sets the framework
            value = items
        else:
            if len(items) < 2:
                items.append(ctx.tensor(tuple(items[0].shape)))
            i = ctx.integer(1, len(items) - 1)
            shape = tuple(items[i].shape)
            if kind == "dtype":
                items[i] = ctx.tensor(shape, ctx.other_dtype(ctx.dtype))
            else:
                dim = ctx.facts.get("dim", -1)
                new = _altered(ctx, shape) if shape else (1,)
                while (
                    rule == "except_dim"
                    and len(new) == len(shape)
                    and all(
                        a == b for j, (a, b) in enumerate(zip(new, shape, strict=True)) if j != dim
                    )
                ):
                    new = _altered(ctx, shape)
                items[i] = ctx.tensor(new)
            value = items
        args[param] = value
        return Bad((param,), short(value))

    return Mutator(f"{param}/bad", mutate, solo=True)


def comm_destination_bad(ctx: Ctx, args: dict[str, Any]) -> Bad:
    if "out" in args and ctx.chance(0.5):
        args["destination"] = value = _cpu(ctx)
    else:
        args.pop("out", None)
        args["destination"] = value = _bad_device(ctx)
        while value is None:
            args["destination"] = value = _bad_device(ctx)
    return Bad(("destination",), short(value))


def comm_out_tensor_bad(ctx: Ctx, args: dict[str, Any]) -> Bad:
    """gather's out: not a tensor, of another framework, dtype or shape."""
    args.pop("destination", None)
    items = args["tensors"]
    expected = list(items[0].shape)
    dim = args.get("dim", 0) % len(expected)
    expected[dim] = sum(tuple(item.shape)[dim] for item in items)
    kind = ctx.pick(["type", "dtype", "shape"])
    if kind == "type":
        value = ctx.non_tensor(none_is_bad=False)
    elif kind == "dtype":
        value = ctx.tensor(tuple(expected), ctx.other_dtype(ctx.dtype))
    else:
        value = ctx.tensor(_altered(ctx, tuple(expected)))
    args["out"] = value
    return Bad(("out",), short(value))


def good_comm_broadcast(ctx: Ctx) -> dict[str, Any]:
    shape = tuple(ctx.pick([(), (0,), (3,), (2, 2)]))
    args: dict[str, Any] = {"tensor": ctx.tensor(shape)}
    count = ctx.integer(0, 3)
    if ctx.chance(0.5):
        args["devices"] = [_cpu(ctx) for _ in range(count)]
    else:
        args["out"] = [ctx.tensor(shape) for _ in range(count)]
    return args


def good_comm_broadcast_coalesced(ctx: Ctx) -> dict[str, Any]:
    tensors = [
        ctx.tensor(tuple(ctx.pick([(), (0,), (3,), (2, 2)])), ctx.pick(GOOD_DTYPES))
        for _ in range(ctx.integer(0, 3))
    ]
    args: dict[str, Any] = {
        "tensors": tensors,
        "devices": [_cpu(ctx) for _ in range(ctx.integer(1, 3))],
    }
    if ctx.chance(0.5):
        args["buffer_size"] = ctx.integer(1, 64)
    return args


def comm_buffer_size(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["buffer_size"] = value = ctx.pick([0, -1, -(2**40), 1.5, "1", True, None, [8]])
    return Bad(("buffer_size",), short(value))


def good_comm_reduce_add(ctx: Ctx) -> dict[str, Any]:
    shape = tuple(ctx.pick([(), (0,), (3,), (2, 2)]))
    args: dict[str, Any] = {"inputs": [ctx.tensor(shape) for _ in range(ctx.integer(1, 3))]}
    if ctx.chance(0.5):
        args["destination"] = ctx.pick([_cpu(ctx), -1])
    return args


def good_comm_reduce_add_coalesced(ctx: Ctx) -> dict[str, Any]:
    shapes = [tuple(ctx.pick([(), (0,), (3,), (2, 2)])) for _ in range(ctx.integer(1, 3))]
    dtypes = [ctx.pick(GOOD_DTYPES) for _ in shapes]
    lists = [
        [ctx.tensor(shape, dtype) for shape, dtype in zip(shapes, dtypes, strict=True)]
        for _ in range(ctx.integer(1, 3))
    ]
    args: dict[str, Any] = {"inputs": lists}
    if ctx.chance(0.5):
        args["destination"] = ctx.pick([_cpu(ctx), -1])
    if ctx.chance(0.5):
        args["buffer_size"] = ctx.integer(1, 64)
    return args


def comm_lists_bad(ctx: Ctx, args: dict[str, Any]) -> Bad:
    """reduce_add_coalesced's inputs: not a list, a list that is no list of tensors, lists of
    different lengths, an element not a tensor, of another framework, dtype or shape than
    inputs[0][j]."""
    lists = [list(row) for row in args["inputs"]]
    kind = ctx.pick(["type", "row_type", "length", "element", "dtype", "shape"])
    value: Any = lists
    if kind == "type":
        value = ctx.pick([lists[0][0], 3, "ab"])
    elif kind == "row_type":
        lists[ctx.integer(0, len(lists) - 1)] = ctx.pick([lists[0][0], 3, "ab"])
    elif kind == "length":
        if len(lists) < 2:
            lists.append(list(lists[0]))
        i = ctx.integer(1, len(lists) - 1)
        lists[i] = lists[i][:-1] if ctx.chance(0.5) else [*lists[i], lists[i][0]]
    else:
        if len(lists) < 2:
            lists.append(
                [ctx.tensor(tuple(t.shape), ctx.kit.numpy(t).dtype.name) for t in lists[0]]
            )
        i, j = ctx.integer(1, len(lists) - 1), ctx.integer(0, len(lists[0]) - 1)
        like = lists[0][j]
        shape, dtype = tuple(like.shape), ctx.kit.numpy(like).dtype.name
        if kind == "element":
            lists[i][j] = ctx.non_tensor(foreign=True)
        elif kind == "dtype":
            lists[i][j] = ctx.tensor(shape, ctx.other_dtype(dtype))
        else:
            lists[i][j] = ctx.tensor(_altered(ctx, shape) if shape else (1,), dtype)
    args["inputs"] = value
    return Bad(("inputs",), short(value))


def comm_destination_only(ctx: Ctx, args: dict[str, Any]) -> Bad:
    args["destination"] = value = _bad_device(ctx)
    while value is None:
        args["destination"] = value = _bad_device(ctx)
    return Bad(("destination",), short(value))


def _comm_specs() -> list[Spec]:
    comm = compat.comm
    return [
        Spec(
            "comm.scatter",
            comm.scatter,
            good_comm_scatter,
            [
                not_tensor("tensor"),
                _m("tensor/zero_d", comm_zero_d, solo=True),
                comm_devices_bad(),
                _m("devices/out", comm_devices_out, solo=True),
                _m("chunk_sizes/bad", comm_chunk_sizes_bad),
                _m("chunk_sizes/with_out", comm_chunk_sizes_with_out, solo=True),
                bad_dim(),
                _m("streams/bad", comm_streams),
                comm_out_bad("except_dim"),
            ],
        ),
        Spec(
            "comm.gather",
            comm.gather,
            good_comm_gather,
            [
                comm_tensors_bad("tensors", "except_dim"),
                bad_dim(),
                _m("destination/bad", comm_destination_bad, solo=True),
                _m("out/bad", comm_out_tensor_bad, solo=True),
            ],
        ),
        Spec(
            "comm.broadcast",
            comm.broadcast,
            good_comm_broadcast,
            [
                not_tensor("tensor"),
                comm_devices_bad(allow_empty=True),
                _m("devices/out", comm_devices_out, solo=True),
                comm_out_bad("same"),
            ],
        ),
        Spec(
            "comm.broadcast_coalesced",
            comm.broadcast_coalesced,
            good_comm_broadcast_coalesced,
            [
                comm_tensors_bad("tensors", "free", min_count=0),
                comm_devices_bad(needs_tensors="tensors"),
                _m("buffer_size/bad", comm_buffer_size),
            ],
        ),
        Spec(
            "comm.reduce_add",
            comm.reduce_add,
            good_comm_reduce_add,
            [
                comm_tensors_bad("inputs", "same"),
                _m("destination/bad", comm_destination_only),
            ],
        ),
        Spec(
            "comm.reduce_add_coalesced",
            comm.reduce_add_coalesced,
            good_comm_reduce_add_coalesced,
            [
                _m("inputs/bad", comm_lists_bad, solo=True),
                _m("destination/bad", comm_destination_only),
                _m("buffer_size/bad", comm_buffer_size),
            ],
        ),
    ]


COMM_SPECS = _comm_specs()
