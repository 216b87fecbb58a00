"""The process's compat state between :func:`compat.init` and :func:`compat.destroy`: the adapter,
the backend, the world group, the argument checks' facts, and what runs each collective (resolved
from ``mapping_tables/capabilities.toml`` by :mod:`compat.capabilities`, cached per dtype)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compat import capabilities, tables
from compat._validate import Checks
from compat.adapter import Adapter
from compat.errors import NotInitializedError
from compat.types import Group


class State:
    def __init__(self, adapter: Adapter, backend: str, check: bool = False) -> None:
        self.adapter = adapter
        #: run the pre-flight check (compat.preflight) before each collective
        self.check = check
        self.framework = adapter.framework
        self.backend = backend
        self.capability_key = capabilities.backend_key(adapter.framework, backend)
        self.backend_entry: dict[str, Any] = tables.lookup("capabilities", self.capability_key)
        self.rank = adapter.rank()
        self.world_size = adapter.world_size()
        self.world = Group(range(self.world_size), None, "world")
        self.checks = Checks(self)
        self._implementations: dict[tuple[str, str], list[tuple[int, Callable[..., Any]]]] = {}
        self._forced: dict[tuple[str, str], tuple[str, Callable[..., Any]]] = {}
        self.group_count = 0

    # -- implementations ---------------------------------------------------------------------
    def implementation(
        self, collective: str, like: Any, nbytes: int | None = None
    ) -> Callable[..., Any]:
        """The callable that runs ``collective`` on tensors of ``like``'s dtype and an input of
        ``nbytes`` bytes (default: ``like``'s size), as :func:`compat.capabilities.resolve`
        chooses it: the adapter's native method or an algorithm bound to the adapter."""
        key = (collective, self.adapter.dtype(like))
        by_size = self._implementations.get(key)
        if by_size is None:
            by_size = self._implementations[key] = self._by_size(*key)
        if len(by_size) == 1:
            return by_size[0][1]
        size = self.adapter.nbytes(like) if nbytes is None else nbytes
        chosen = by_size[0][1]
        for min_bytes, callable_ in by_size:
            if size >= min_bytes:
                chosen = callable_
        return chosen

    def algorithm(self, collective: str, dtype: str, nbytes: int) -> str:
        """The name of what runs ``collective`` for ``dtype`` and an input of ``nbytes`` bytes:
        ``"native"`` or a compat.algorithms function (``compat bench`` prints it)."""
        forced = self._forced.get((collective, dtype))
        if forced is not None:
            return forced[0]
        return capabilities.resolve(self.capability_key, collective, dtype, nbytes)

    def force(
        self, collective: str, dtype: str, run: str | tuple[str, Callable[..., Any]] | None
    ) -> None:
        """Run ``collective`` on ``dtype`` with ``run`` at every size, whatever the table says:
        ``"native"``, an algorithm's name, or ``(label, callable)``; None restores the table's
        choice. For ``compat bench`` (timing one algorithm, or compat's own work alone)."""
        key = (collective, dtype)
        self._implementations.pop(key, None)
        if run is None:
            self._forced.pop(key, None)
        elif isinstance(run, str):
            self._forced[key] = (run, capabilities.bind(self.adapter, collective, run))
        else:
            self._forced[key] = run

    def _by_size(self, collective: str, dtype: str) -> list[tuple[int, Callable[..., Any]]]:
        """(min_bytes, callable) from 0 bytes up: where the choice for ``dtype`` can change."""
        forced = self._forced.get((collective, dtype))
        if forced is not None:
            return [(0, forced[1])]
        return [
            (
                size,
                capabilities.bind(
                    self.adapter,
                    collective,
                    capabilities.resolve(self.capability_key, collective, dtype, size),
                ),
            )
            for size in capabilities.size_thresholds(self.capability_key, collective, dtype)
        ]


_current: State | None = None


def current() -> State:
    if _current is None:
        raise NotInitializedError(
            "compat is not initialised: call compat.init() before any collective or query"
        )
    return _current


def set_current(state: State | None) -> None:
    global _current
    _current = state


def get_current() -> State | None:
    return _current
