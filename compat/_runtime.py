"""The process's compat state after :func:`compat.init`: the adapter, the backend, the world
group, and the backend's capabilities read from ``mapping_tables/capabilities.toml``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from compat import tables
from compat._checks import check_int, describe
from compat.adapter import Adapter
from compat.dispatch import framework_of
from compat.errors import NotInitializedError, UnsupportedError
from compat.types import Group, ReduceOp, parse_op


class Runtime:
    def __init__(self, adapter: Adapter, backend: str, check: bool = False) -> None:
        self.adapter = adapter
        #: run the pre-flight check (compat.preflight) before each collective
        self.check = check
        self.framework = adapter.framework
        self.backend = backend
        self.capability_key = capability_key(adapter.framework, backend)
        self.capabilities: dict[str, Any] = tables.lookup("capabilities", self.capability_key)
        self.rank = adapter.rank()
        self.world_size = adapter.world_size()
        self.world = Group(range(self.world_size), None, "world")
        self._dtype_kinds = {
            name: entry["kind"] for name, entry in tables.lookup("dtypes", "dtypes").items()
        }
        # Facts checked on every call, kept in the form that is cheapest to test (per-call
        # overhead matters at small sizes: see compat bench at world size 1).
        self._dtypes_ok = frozenset(self.capabilities["dtypes"])
        self._reduce_ops_ok = frozenset(self.capabilities["reduce_ops"])
        self._tensor_types: set[type] = set()
        self._reductions: dict[tuple[Any, str], ReduceOp] = {}
        self._implementations: dict[tuple[str, str], Any] = {}
        self.group_count = 0

    # -- argument checks ---------------------------------------------------------------------
    def is_known_tensor(self, obj: object) -> bool:
        """True if ``obj``'s type has passed :meth:`check_tensor` before (a fast path)."""
        return type(obj) in self._tensor_types

    def check_tensor(self, obj: object, param: str) -> None:
        if type(obj) in self._tensor_types:
            return
        framework = framework_of(obj)
        if framework == self.framework:
            self._tensor_types.add(type(obj))
        else:
            raise TypeError(
                f"{param}: expected a {self.framework} tensor (compat was initialised for "
                f"{self.framework}); got {describe(obj)}"
            )

    def resolve_group(self, group: object, param: str = "group") -> Group:
        if group is None:
            return self.world
        if not isinstance(group, Group):
            raise TypeError(
                f"{param}: expected a compat.Group from compat.new_group or None; "
                f"got {describe(group)}"
            )
        if self.rank not in group:
            raise ValueError(
                f"{param}: this rank ({self.rank}) is not a member of the group; expected a group "
                f"containing it, got one with ranks {list(group.ranks)}"
            )
        return group

    def check_peer(self, value: object, param: str, group: Group) -> int:
        """A global rank that must be a member of ``group``."""
        rank = check_int(value, param)
        if rank not in group:
            where = "the world" if group is self.world else "the group"
            raise ValueError(
                f"{param}: expected a global rank in {where}, one of {list(group.ranks)}; "
                f"got {rank}"
            )
        return rank

    def check_dtype(self, dtype: str, param: str) -> None:
        if dtype not in self._dtypes_ok:
            supported = self.capabilities["dtypes"]
            raise UnsupportedError(
                f"{param}: dtype {dtype} is not supported by the {self.backend} backend; "
                f"supported: {', '.join(supported)}"
            )

    def check_reduction(self, op: object, dtype: str, param: str) -> ReduceOp:
        """``op`` as a ReduceOp that the backend applies to ``dtype`` (a tensor's dtype, checked
        too, as the dtype of ``param``), or the error naming what is supported.

        A combination that passed is remembered: the next call with it is one look-up.
        """
        try:
            return self._reductions[op, dtype]
        except (KeyError, TypeError):  # not seen yet, or an op that cannot be a key
            pass
        reduce_op = parse_op(op)
        self.check_dtype(dtype, param)
        self.check_reduce_op(reduce_op, dtype)
        if len(self._reductions) < 256:
            try:
                self._reductions[op, dtype] = reduce_op
            except TypeError:
                pass
        return reduce_op

    def check_reduce_op(self, op: ReduceOp, dtype: str, param: str = "op") -> None:
        if op.value not in self._reduce_ops_ok:
            supported = self.capabilities["reduce_ops"]
            raise UnsupportedError(
                f"{param}: {op.name} is not supported by the {self.backend} backend; "
                f"supported: {', '.join(supported)}"
            )
        if op is ReduceOp.AVG and self._dtype_kinds.get(dtype) not in ("float", "complex"):
            raise UnsupportedError(
                f"{param}: AVG needs a floating dtype (an integer mean is not representable); "
                f"got dtype {dtype}. Use SUM and divide, or a floating dtype"
            )

    # -- implementations ---------------------------------------------------------------------
    def implementation(
        self, collective: str, like: Any, nbytes: int | None = None
    ) -> Callable[..., Any]:
        """The callable that runs ``collective`` on tensors of ``like``'s dtype: the adapter's
        native method, or the emulation the capability table names, bound to the adapter.

        Where the table's entry has a ``choose`` list, the choice also depends on the size of
        the input in bytes: ``nbytes``, or ``like``'s size when not given.
        """
        key = (collective, self.adapter.dtype(like))
        found = self._implementations.get(key)
        if found is None:
            found = self._implementations[key] = self._resolve(*key)
        base, by_size = found
        if by_size:
            size = self.adapter.nbytes(like) if nbytes is None else nbytes
            for min_bytes, _, chosen in by_size:
                if size >= min_bytes:
                    return chosen
        return base[1]

    def algorithm(self, collective: str, dtype: str, nbytes: int) -> str:
        """The name of what runs ``collective`` for ``dtype`` and an input of ``nbytes`` bytes:
        ``"native"`` or a compat.algorithms function (``compat bench`` prints it)."""
        key = (collective, dtype)
        found = self._implementations.get(key)
        if found is None:
            found = self._implementations[key] = self._resolve(*key)
        base, by_size = found
        for min_bytes, name, _ in by_size:
            if nbytes >= min_bytes:
                return name
        return base[0]

    def _resolve(self, collective: str, dtype: str) -> tuple[Choice, list[SizedChoice]]:
        """(name, callable) for every size, and the size-dependent choices, largest first."""
        entry = tables.lookup("capabilities", self.capability_key, "ops", collective)
        impl, algorithm = entry["impl"], entry.get("algorithm")
        if impl == "native" and dtype not in entry.get("native_dtypes", [dtype]):
            impl, algorithm = "emulated", entry["other_dtypes"]
        if impl == "unsupported":
            raise UnsupportedError(
                f"{collective} is not supported by the {self.backend} backend: "
                f"{entry.get('reason', '')}"
            )
        name = algorithm if impl == "emulated" else "native"
        base = (name, self._bind(collective, name))
        by_size = [
            (choice["min_bytes"], choice["algorithm"], self._bind(collective, choice["algorithm"]))
            for choice in entry.get("choose", [])
            if dtype in choice.get("dtypes", [dtype])
        ]
        by_size.sort(key=lambda choice: -choice[0])
        return base, by_size

    def _bind(self, collective: str, algorithm: str) -> Callable[..., Any]:
        if algorithm == "native":
            method: Callable[..., Any] = getattr(self.adapter, collective)
            return method
        from compat import algorithms

        return partial(getattr(algorithms, algorithm), self.adapter)


#: (name, callable); a size-dependent choice is (min_bytes, name, callable).
Choice = tuple[str, Callable[..., Any]]
SizedChoice = tuple[int, str, Callable[..., Any]]


def backends(framework: str) -> dict[str, str]:
    """The backends of ``framework``: name -> key in capabilities.toml (names can repeat across
    frameworks: torch's nccl and MindSpore's nccl)."""
    return {
        entry.get("backend", key): key
        for key, entry in tables.load("capabilities").items()
        if entry["framework"] == framework
    }


def capability_key(framework: str, backend: str) -> str:
    return backends(framework)[backend]


_current: Runtime | None = None


def current() -> Runtime:
    if _current is None:
        raise NotInitializedError(
            "compat is not initialised: call compat.init() before any collective or query"
        )
    return _current


def set_current(runtime: Runtime | None) -> None:
    global _current
    _current = runtime


def get_current() -> Runtime | None:
    return _current
