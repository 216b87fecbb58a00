"""torch's collectives as the adapter issues them (adapters/torch.py): through the process
group's own methods, without torch's Python function for the collective (compat has made its
checks), and through that function where it does more than check: a tensor or a mode that
overrides torch's functions, and an open ``_coalescing_manager`` batch, which all_reduce,
all_gather_into_tensor and reduce_scatter_tensor join. Every output is a contiguous window in a
sentinel-filled tensor, checked whole against numpy, on the world and (3 ranks) on a subgroup
whose root's group rank differs from its global rank."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from compat.base import tables
from compat.base.types import ReduceOp
from tests.ranks.cases import SENTINEL, assert_close, rank, register, subgroup, values, world

#: torch's functions the adapter's collectives may call, by the module attribute that holds
#: each (the adapter binds all_gather_single and reduce_scatter_single at import).
TORCH_FUNCTIONS = (
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "scatter", "gather", "reduce",
    "all_to_all_single", "all_to_all",
)  # fmt: skip
ADAPTER_FUNCTIONS = ("_all_gather_single", "_reduce_scatter_single")
ROWS = 2


@contextmanager
def torch_functions_recorded() -> Iterator[list[str]]:
    """The names of torch's collective functions called meanwhile, each still run."""
    import importlib

    import torch.distributed as dist

    from compat.base import tables

    # The adapter module as compat imports it (frameworks.toml names it).
    torch_adapter = importlib.import_module(tables.lookup("frameworks", "torch", "adapter"))
    called: list[str] = []
    patched = [(dist, name) for name in TORCH_FUNCTIONS]
    patched += [(torch_adapter, name) for name in ADAPTER_FUNCTIONS]
    originals = [(module, name, getattr(module, name)) for module, name in patched]

    def recording(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> Any:
            called.append(name.lstrip("_"))
            return function(*args, **kwargs)

        return record

    try:
        for module, name, function in originals:
            setattr(module, name, recording(name, function))
        yield called
    finally:
        for module, name, function in originals:
            setattr(module, name, function)


def _window(kit: Any, rows: int) -> tuple[Any, Any]:
    """A sentinel-filled tensor of ``rows + 2`` rows and its contiguous middle ``rows`` rows."""
    base = kit.tensor(np.full((rows + 2, 3), SENTINEL), "float32")
    return base, base[1 : rows + 1]


def _check_window(kit: Any, base: Any, expected: np.ndarray, what: str) -> None:
    edge = np.full((1, 3), SENTINEL)
    assert_close(kit.numpy(base), np.concatenate([edge, expected, edge]), "float32", what)


class Calls:
    """One rank's calls of every adapter collective on ``group`` (None: the world), each on
    fresh inputs and sentinel-framed outputs, and the checks of their results."""

    def __init__(self, kit: Any, group: Any, ranks: list[int]) -> None:
        from compat.core import state

        self.kit, self.adapter = kit, state.current().adapter
        self.handle = None if group is None else group.handle
        self.ranks, self.me = ranks, ranks.index(rank())
        self.root = ranks[-1]  # global; its group rank is len(ranks) - 1

    def mine(self, seed: str, rows: int = ROWS) -> Any:
        return self.kit.tensor(values(seed, rank(), (rows, 3)), "float32")

    def every(self, seed: str, rows: int = ROWS) -> list[np.ndarray]:
        return [values(seed, r, (rows, 3)) for r in self.ranks]

    def run(self, op: str, async_op: bool) -> None:
        """Issue ``op``, wait for it, and check every output tensor whole."""
        seed, n, me = f"native-call-{op}-{async_op}", len(self.ranks), self.me
        a, group, root, is_root = self.adapter, self.handle, self.root, rank() == self.root
        checks: list[tuple[Any, np.ndarray]] = []

        def framed(rows: int, expected: np.ndarray) -> Any:
            base, view = _window(self.kit, rows)
            checks.append((base, expected))
            return view

        everyone = self.every(seed)
        if op == "all_reduce":
            base, tensor = _window(self.kit, ROWS)
            tensor.copy_(self.mine(seed))
            checks.append((base, np.sum(everyone, axis=0)))
            pending = a.all_reduce(tensor, ReduceOp.SUM, group, async_op)
        elif op == "all_gather":
            outputs = [framed(ROWS, everyone[j]) for j in range(n)]
            pending = a.all_gather(outputs, self.mine(seed), group, async_op)
        elif op == "all_gather_into_tensor":
            output = framed(n * ROWS, np.concatenate(everyone))
            pending = a.all_gather_into_tensor(output, self.mine(seed), group, async_op)
        elif op in ("reduce_scatter", "reduce_scatter_tensor"):
            whole = [values(seed, r, (n * ROWS, 3)) for r in self.ranks]
            part = np.sum(whole, axis=0)[me * ROWS : (me + 1) * ROWS]
            output, tensor = framed(ROWS, part), self.mine(seed, n * ROWS)
            if op == "reduce_scatter":
                parts = list(tensor.split(ROWS))
                pending = a.reduce_scatter(output, parts, ReduceOp.SUM, group, async_op)
            else:
                pending = a.reduce_scatter_tensor(output, tensor, ReduceOp.SUM, group, async_op)
        elif op == "broadcast":
            base, tensor = _window(self.kit, ROWS)
            tensor.copy_(self.mine(seed))
            checks.append((base, everyone[-1]))
            pending = a.broadcast(tensor, root, group, async_op)
        elif op == "scatter":
            root_parts = [values(seed, root, (ROWS, 3)) + 10 * j for j in range(n)]
            output = framed(ROWS, root_parts[me])
            parts = [self.kit.tensor(p, "float32") for p in root_parts] if is_root else None
            pending = a.scatter(output, parts, root, group, async_op)
        elif op == "gather":
            outputs = [framed(ROWS, everyone[j]) for j in range(n)] if is_root else None
            pending = a.gather(self.mine(seed), outputs, root, group, async_op)
        elif op == "reduce":
            base, tensor = _window(self.kit, ROWS)
            tensor.copy_(self.mine(seed))
            if is_root:  # what a non-root's tensor holds afterwards is the backend's
                checks.append((base, np.sum(everyone, axis=0)))
            pending = a.reduce(tensor, root, ReduceOp.SUM, group, async_op)
        elif op == "all_to_all_single":
            whole = [values(seed, r, (n * ROWS, 3)) for r in self.ranks]
            received = np.concatenate([w[me * ROWS : (me + 1) * ROWS] for w in whole])
            output, sizes = framed(n * ROWS, received), [ROWS] * n
            tensor = self.mine(seed, n * ROWS)
            pending = a.all_to_all_single(output, tensor, sizes, sizes, group, async_op)
        elif op == "all_to_all":
            whole = [values(seed, r, (n * ROWS, 3)) for r in self.ranks]
            outputs = [framed(ROWS, w[me * ROWS : (me + 1) * ROWS]) for w in whole]
            inputs = list(self.mine(seed, n * ROWS).split(ROWS))
            pending = a.all_to_all(outputs, inputs, group, async_op)
        else:
            raise ValueError(f"no call for {op}")
        if async_op:
            assert pending is not None, f"{op}: async_op=True gave nothing to wait on"
            pending.wait()
        else:
            assert pending is None, f"{op}: a synchronous call gave {pending!r}"
        for base, expected in checks:
            _check_window(self.kit, base, expected, f"{op} async_op={async_op}")


#: Each adapter collective, and torch's function it would go through.
OPS = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "all_gather_into_tensor": "all_gather_single",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter_single",
    "broadcast": "broadcast",
    "scatter": "scatter",
    "gather": "gather",
    "reduce": "reduce",
    "all_to_all_single": "all_to_all_single",
    "all_to_all": "all_to_all",
}


def _groups() -> list[tuple[Any, list[int]]]:
    """The world, and at 3 ranks and more the subgroup {0, last} (rank 1 outside it)."""
    found: list[tuple[Any, list[int]]] = [(None, list(range(world())))]
    if world() >= 3:
        group = subgroup()
        if rank() in group.ranks:
            found.append((group, list(group.ranks)))
    return found


def case_process_group_methods(kit: Any) -> None:
    """Every collective through the process group's own method: no torch function called;
    on a torch release whose groups compat does not call directly (adapters.torch._DIRECT:
    torch 2.7 has no all_gather_single, no _World.default_pg), through torch's own function."""
    import importlib

    torch_adapter = importlib.import_module(tables.lookup("frameworks", "torch", "adapter"))
    for group, ranks in _groups():
        calls = Calls(kit, group, ranks)
        for op, function in _here().items():
            expected = [] if torch_adapter._DIRECT else [function]
            for async_op in (False, True):
                with torch_functions_recorded() as called:
                    calls.run(op, async_op)
                assert called == expected, (
                    f"{op} (async_op={async_op}) went through torch's {called}; expected {expected}"
                )


def _here() -> dict[str, str]:
    """OPS but the collectives the backend has no call of its own for at this torch release
    (capabilities.toml's lacks: Gloo's reduce_scatter list before 2.8, alltoall before 2.12)."""
    from compat.core import capabilities, state

    lacked = capabilities.lacked_collectives(state.current().capability_key)
    return {op: function for op, function in OPS.items() if op not in lacked}


def _functions() -> dict[str, str]:
    """OPS with the names of this torch release's functions, as a TorchFunctionMode sees them:
    before 2.13 all_gather_single and reduce_scatter_single are all_gather_into_tensor and
    reduce_scatter_tensor."""
    import torch.distributed as dist

    older = {"all_gather_single": "all_gather_into_tensor",
             "reduce_scatter_single": "reduce_scatter_tensor"}  # fmt: skip
    return {op: name if hasattr(dist, name) else older.get(name, name) for op, name in OPS.items()}


def case_overriding_mode(kit: Any) -> None:
    """With a TorchFunctionMode active, every collective goes through torch's function, which
    hands it to the mode (torch's rule for its collectives), and still gives its result."""
    from torch.overrides import TorchFunctionMode

    seen: list[str] = []

    class Passing(TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            seen.append(getattr(func, "__name__", ""))
            return func(*args, **(kwargs or {}))

    for group, ranks in _groups():
        calls = Calls(kit, group, ranks)
        for op, function in _here().items():
            seen.clear()
            with torch_functions_recorded() as called, Passing():
                calls.run(op, async_op=False)
            assert called == [function], f"{op}: torch's functions called: {called}"
            if _hands_to_modes(_functions()[op]):
                assert _functions()[op] in seen, f"{op}: the mode saw {seen}"


def _hands_to_modes(name: str) -> bool:
    """Whether this torch release's ``name`` hands its call to a TorchFunctionMode (2.7 does for
    all_reduce, all_gather, all_gather_into_tensor, reduce_scatter_tensor and
    all_to_all_single only; 2.13 for every collective), read from its source."""
    import inspect

    import torch.distributed as dist

    return "has_torch_function" in inspect.getsource(inspect.unwrap(getattr(dist, name)))


def case_coalescing_batch(kit: Any) -> None:
    """Inside torch's _coalescing_manager the collectives torch batches go through its
    functions (which join the batch), and the batch's wait completes them: two calls of each,
    one batch per collective (torch batches calls of one kind)."""
    import torch.distributed as dist

    n, me = world(), rank()
    calls = Calls(kit, None, list(range(n)))
    a = calls.adapter
    for op, function in BATCHED.items():
        seeds = [f"coalesced-{op}-{i}" for i in range(2)]
        checks = []
        with torch_functions_recorded() as called:
            with dist._coalescing_manager(async_ops=True) as batch:
                for seed in seeds:
                    every = calls.every(seed, n * ROWS)
                    if op == "all_reduce":
                        base, tensor = _window(kit, n * ROWS)
                        tensor.copy_(calls.mine(seed, n * ROWS))
                        a.all_reduce(tensor, ReduceOp.SUM, None, True)
                        checks.append((base, np.sum(every, axis=0)))
                    elif op == "all_gather_into_tensor":
                        base, output = _window(kit, n * n * ROWS)
                        a.all_gather_into_tensor(output, calls.mine(seed, n * ROWS), None, True)
                        checks.append((base, np.concatenate(every)))
                    else:
                        base, output = _window(kit, ROWS)
                        tensor = calls.mine(seed, n * ROWS)
                        a.reduce_scatter_tensor(output, tensor, ReduceOp.SUM, None, True)
                        part = np.sum(every, axis=0)[me * ROWS : (me + 1) * ROWS]
                        checks.append((base, part))
            batch.wait()
        assert called == [function, function], f"{op}: torch's functions called: {called}"
        for base, expected in checks:
            _check_window(kit, base, expected, f"{op} in a batch")


#: The collectives torch's _coalescing_manager batches, and torch's function for each.
BATCHED = {
    "all_reduce": "all_reduce",
    "all_gather_into_tensor": "all_gather_single",
    "reduce_scatter_tensor": "reduce_scatter_single",
}


register("native_call-process_group_methods", case_process_group_methods, 1, ("torch",))
register("native_call-overriding_mode", case_overriding_mode, 1, ("torch",))
register("native_call-coalescing_batch", case_coalescing_batch, 1, ("torch",))
