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
from compat.types import Group, ReduceOp


class Runtime:
    def __init__(self, adapter: Adapter, backend: str) -> None:
        self.adapter = adapter
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
        self._implementations: dict[tuple[str, str], Callable[..., Any]] = {}
        self.group_count = 0

    # -- argument checks ---------------------------------------------------------------------
    def check_tensor(self, obj: object, param: str) -> None:
        framework = framework_of(obj)
        if framework != self.framework:
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
        supported = self.capabilities["dtypes"]
        if dtype not in supported:
            raise UnsupportedError(
                f"{param}: dtype {dtype} is not supported by the {self.backend} backend; "
                f"supported: {', '.join(supported)}"
            )

    def check_reduce_op(self, op: ReduceOp, dtype: str, param: str = "op") -> None:
        supported = self.capabilities["reduce_ops"]
        if op.value not in supported:
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
    def implementation(self, collective: str, like: Any) -> Callable[..., Any]:
        """The callable that runs ``collective`` on tensors of ``like``'s dtype: the adapter's
        native method, or the emulation the capability table names, bound to the adapter."""
        key = (collective, self.adapter.dtype(like))
        found = self._implementations.get(key)
        if found is None:
            found = self._resolve_implementation(*key)
            self._implementations[key] = found
        return found

    def _resolve_implementation(self, collective: str, dtype: str) -> Callable[..., Any]:
        entry = tables.lookup("capabilities", self.capability_key, "ops", collective)
        impl, algorithm = entry["impl"], entry.get("algorithm")
        if impl == "native" and dtype not in entry.get("native_dtypes", [dtype]):
            impl, algorithm = "emulated", entry["other_dtypes"]
        if impl == "native":
            method: Callable[..., Any] = getattr(self.adapter, collective)
            return method
        if impl == "emulated":
            from compat import algorithms

            return partial(getattr(algorithms, algorithm), self.adapter)
        raise UnsupportedError(
            f"{collective} is not supported by the {self.backend} backend: "
            f"{entry.get('reason', '')}"
        )


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
