"""compat.tensor on real ranks: DTensor.from_local / to_local / full_tensor / redistribute and
distribute_tensor, every placement move (Shard -> Replicate, Replicate -> Shard, Partial ->
Replicate, Partial -> Shard, Shard(a) -> Shard(b)), uneven torch.chunk shards (at 3 ranks a
5-long dim splits 2, 2, 1 and a 2-long one 1, 1, 0), meshes (n,), (1, n) and (n, 1), compared
with a numpy model of torch's layout. compat's emulation (compat.tensor.dtensor) runs on both
frameworks; on torch the same scenarios also run with torch's own DTensor (which
compat.tensor's names are there), so both are held to the same expectations."""

from __future__ import annotations

import functools
import re
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import compat
import compat.tensor
from compat.tensor import dtensor as emulation
from compat.tensor import placements as own_placements
from tests.ranks.cases import assert_close, follow_up, rank, register, values, world
from tests.ranks.layout_cases import Placed


def _emulated() -> Any:
    """compat's own DTensor and placements (what MindSpore programs get)."""
    return SimpleNamespace(
        DTensor=emulation.DTensor,
        distribute_tensor=emulation.distribute_tensor,
        Shard=own_placements.Shard,
        Replicate=own_placements.Replicate,
        Partial=own_placements.Partial,
    )


def _apis(which: str) -> list[tuple[str, Any]]:
    """``emulation``: compat's own (on both frameworks, whose records the parity test
    compares); ``native``: compat.tensor's names, torch's own DTensor on torch."""
    if which == "native":
        return [("torch's DTensor (compat.tensor's names)", compat.tensor)]
    return [("compat's emulation", _emulated())]


# -- the numpy model of torch's layout ----------------------------------------------------------
def _chunk(array: np.ndarray, count: int, index: int, dim: int) -> np.ndarray:
    """torch.chunk's piece ``index`` of ``count`` along ``dim`` (empty pieces at the end)."""
    size = array.shape[dim]
    full = -(-size // count)
    start, stop = min(size, full * index), min(size, full * (index + 1))
    return np.take(array, np.arange(start, stop), axis=dim)


def _local(whole: np.ndarray, shape: tuple[int, ...], layout: list[tuple[str, int]]) -> np.ndarray:
    """This rank's piece of ``whole`` on a mesh of ``shape`` laid out by ``layout`` (("S", dim)
    or ("R", 0) per mesh dim), mesh dims in order, as torch's shards nest."""
    coordinate = np.unravel_index(rank(), shape)
    piece = whole
    for mesh_dim, (kind, dim) in enumerate(layout):
        if kind == "S":
            piece = _chunk(piece, shape[mesh_dim], int(coordinate[mesh_dim]), dim)
    return piece


def _placements(api: Any, layout: list[tuple[str, int]]) -> list[Any]:
    return [api.Shard(dim) if kind == "S" else api.Replicate() for kind, dim in layout]


def _meshes() -> list[tuple[int, ...]]:
    """(n,), (1, n), (n, 1); at 4 ranks also (2, 2), whose nested shards (Shard(0) on both
    dims) torch's planner undoes inner dim first (tests/test_dtensor.py, long)."""
    n = world()
    return [(n,), (1, n), (n, 1), *([(2, 2)] if n == 4 else [])]


def _check(kit: Any, tensor: Any, expected: np.ndarray, what: str) -> None:
    actual = kit.numpy(tensor)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    assert_close(actual, expected, "float32", what)


# -- cases -----------------------------------------------------------------------------------------
def case_dtensor_names(kit: Any) -> None:
    """On torch compat.tensor's names are torch's own objects; on MindSpore compat's own."""
    if kit.framework == "torch":
        import torch.distributed.tensor as native

        for name in ("DTensor", "Shard", "Replicate", "Partial", "Placement", "distribute_tensor"):
            assert getattr(compat.tensor, name) is getattr(native, name), name
    else:
        assert compat.tensor.DTensor is emulation.DTensor
        assert compat.tensor.Shard is own_placements.Shard
        assert compat.tensor.distribute_tensor is emulation.distribute_tensor
    follow_up(kit)


def case_dtensor_layouts(kit: Any, which: str) -> None:
    """from_local of each rank's torch.chunk piece (uneven, with shape and stride given), then
    full_tensor, and redistribute to every other layout of two dims, on each mesh."""
    whole = values("dtensor-layouts", 0, (5, world() - 1 or 1))
    layouts = [[("S", 0)], [("S", 1)], [("R", 0)]]
    for api_name, api in _apis(which):
        for shape in _meshes():
            mesh = compat.init_device_mesh("cpu", shape)
            for source in _layouts(len(shape), layouts):
                made = api.DTensor.from_local(
                    kit.tensor(_local(whole, shape, source), "float32"), mesh,
                    _placements(api, source), shape=whole.shape, stride=(whole.shape[1], 1),
                )  # fmt: skip
                what = f"{api_name}, mesh {shape}, from {source}"
                assert tuple(made.shape) == whole.shape and made.ndim == 2, what
                _check(kit, made.full_tensor(), whole, f"{what}: full_tensor")
                for target in _layouts(len(shape), layouts):
                    moved = made.redistribute(mesh, _placements(api, target))
                    assert tuple(moved.placements) == tuple(_placements(api, target)), what
                    expected = _local(whole, shape, target)
                    _check(kit, moved.to_local(), expected, f"{what} to {target}")
    follow_up(kit)


def _layouts(count: int, each: list[list[tuple[str, int]]]) -> list[list[tuple[str, int]]]:
    """Every layout of ``count`` mesh dims from the one-dim layouts ``each``."""
    found: list[list[tuple[str, int]]] = [[]]
    for _ in range(count):
        found = [[*before, *one] for before in found for one in each]
    return found


def case_dtensor_partial(kit: Any, which: str) -> None:
    """Partial(op) -> Replicate (all_reduce) and Partial(op) -> Shard (reduce_scatter, uneven):
    the reduction of every rank's local tensor, by numpy."""
    n = world()
    for api_name, api in _apis(which):
        mesh = compat.init_device_mesh("cpu", (n,))
        for op, reduce in (("sum", np.sum), ("max", np.max), ("avg", np.mean)):
            mine = values(f"dtensor-partial-{op}", rank(), (n + 2, 3))
            every = np.stack([values(f"dtensor-partial-{op}", r, (n + 2, 3)) for r in range(n)])
            reduced = reduce(every, axis=0)
            partial = api.DTensor.from_local(kit.tensor(mine, "float32"), mesh, [api.Partial(op)])
            what = f"{api_name}: Partial({op})"
            _check(kit, partial.full_tensor(), reduced, f"{what} to Replicate")
            for dim in (0, 1):
                moved = partial.redistribute(mesh, [api.Shard(dim)])
                _check(kit, moved.to_local(), _chunk(reduced, n, rank(), dim), f"{what} to S{dim}")
            _check(kit, partial.to_local(), mine, f"{what}: the source is left as it was")
    follow_up(kit)


def case_dtensor_distribute(kit: Any, which: str) -> None:
    """distribute_tensor: group rank src_data_rank's tensor is the source (scatter for Shard,
    broadcast for Replicate, then divided by the size for Partial('sum')); None: every rank's
    own tensor, chunked locally."""
    n = world()
    for api_name, api in _apis(which):
        for shape in _meshes():
            mesh = compat.init_device_mesh("cpu", shape)
            for source in (0, None) if len(shape) > 1 else (0, n - 1, None):
                _distribute_on(kit, api, mesh, shape, source, f"{api_name}, mesh {shape}")
    follow_up(kit)


def _distribute_on(kit: Any, api: Any, mesh: Any, shape: tuple[int, ...], source: Any,
                   what: str) -> None:  # fmt: skip
    # the rank whose data this rank's piece comes from: group rank ``source`` along every dim
    owner = rank() if source is None else int(np.ravel_multi_index((source,) * len(shape), shape))
    given = values(f"dtensor-distribute-{source}", rank(), (world() + 1, 2))
    truth = values(f"dtensor-distribute-{source}", owner, (world() + 1, 2))
    for layout in _layouts(len(shape), [[("S", 0)], [("S", 1)], [("R", 0)]]):
        made = api.distribute_tensor(
            kit.tensor(given, "float32"), mesh, _placements(api, layout), src_data_rank=source
        )
        expected = _local(truth, shape, layout)
        _check(kit, made.to_local(), expected, f"{what}, src_data_rank={source}, {layout}")
        _check(kit, kit.tensor(given, "float32"), given, f"{what}: the input is untouched")
    partial = [api.Partial("sum")] + [api.Replicate()] * (len(shape) - 1)
    made = api.distribute_tensor(kit.tensor(given, "float32"), mesh, partial, src_data_rank=source)
    _check(kit, made.to_local(), truth / shape[0], f"{what}, src_data_rank={source}, Partial(sum)")


def case_dtensor_run_check(kit: Any, which: str) -> None:
    """run_check=True: group rank 0's tensor is broadcast into every rank's (Replicate), in
    place inside a sentinel-filled base; mismatched metadata is a ValueError on every rank."""
    n = world()
    for api_name, api in _apis(which):
        mesh = compat.init_device_mesh("cpu", (n,))
        seed = "dtensor-run_check"
        x = Placed(kit, values(seed, rank(), (3, 2)), "float32", "interior")
        made = api.DTensor.from_local(x.view, mesh, [api.Replicate()], run_check=True)
        x.result(values(seed, 0, (3, 2)))
        x.check(f"{api_name}: run_check broadcast from group rank 0")
        _check(kit, made.to_local(), values(seed, 0, (3, 2)), f"{api_name}: the local tensor")
        odd = kit.tensor(np.zeros((2 + (rank() == n - 1), 2)), "float32")
        with pytest.raises(ValueError, match=r"(?i)inconsistent tensor metadata|same dtype"):
            api.DTensor.from_local(odd, mesh, [api.Shard(0)], run_check=True)
    follow_up(kit)


def case_dtensor_bad_arguments(kit: Any) -> None:
    """compat's emulation refuses bad arguments on the calling rank before any communication
    (only rank 0 calls; a collective started would leave the others waiting)."""
    n = world()
    api = _emulated()
    mesh = compat.init_device_mesh("cpu", (n,))
    local = kit.tensor(np.ones((n, 2)), "float32")
    made = api.DTensor.from_local(local, mesh, [api.Shard(0)])
    bad: list[tuple[type[Exception], Any, str]] = [
        (ValueError, lambda: api.DTensor.from_local(local, mesh, [api.Shard(2)]), "placements[0]"),
        (ValueError, lambda: api.DTensor.from_local(local, mesh, [api.Shard(0)] * 2), "placements"),
        (TypeError, lambda: api.DTensor.from_local(local, mesh, ["S0"]), "placements[0]"),
        (TypeError, lambda: api.DTensor.from_local(local, mesh, api.Shard(0)), "placements"),
        (TypeError, lambda: api.DTensor.from_local(np.ones(2), mesh), "local_tensor"),
        (TypeError, lambda: api.DTensor.from_local(local, "mesh"), "device_mesh"),
        (ValueError, lambda: api.DTensor.from_local(local, mesh, shape=(2, 2)), "shape, stride"),
        (RuntimeError, lambda: api.DTensor.from_local(made, mesh), "local_tensor"),
        (TypeError, lambda: api.DTensor.from_local(local, mesh, run_check=1), "run_check"),
        (RuntimeError, lambda: made.redistribute(mesh, None), "placements"),
        (RuntimeError, lambda: made.redistribute(mesh, [api.Partial()]), "placements[0]"),
        (ValueError, lambda: made.redistribute(mesh, [api.Shard(-3)]), "placements[0]"),
        (compat.UnsupportedError, lambda: made.to_local(grad_placements=[api.Shard(0)]),
         "grad_placements"),
        (ValueError, lambda: api.distribute_tensor(local, mesh, [api.Partial("product")]),
         "placements[0]"),
        (ValueError, lambda: api.distribute_tensor(local, mesh, src_data_rank=n), "src_data_rank"),
        (TypeError, lambda: api.distribute_tensor(local, mesh, src_data_rank="0"),
         "src_data_rank"),
        (ValueError, lambda: api.distribute_tensor(made, mesh, [api.Replicate()]), "placements"),
        (ValueError, lambda: api.Partial("mean"), "reduce_op"),
        (TypeError, lambda: api.Shard(1.0), "dim"),
        (TypeError, lambda: made + 1, "DTensor.__add__"),
        (TypeError, lambda: made[0], "DTensor.__getitem__"),
        (RuntimeError, lambda: api.DTensor.from_local(local), "device_mesh"),
    ]  # fmt: skip
    if rank() == 0:
        for kind, call, param in bad:
            with pytest.raises(kind, match=rf"^{re.escape(param)}: "):
                call()
    if kit.framework == "mindspore":  # torch's mesh enters torch's DTensor's own context
        with mesh:  # the mesh a call takes when given none, as torch's
            assert api.DTensor.from_local(local).device_mesh == mesh
    follow_up(kit)


def case_dtensor_queries(kit: Any) -> None:
    """shape, size(), ndim, dtype, placements, device_mesh; placements' equality, hash, repr
    and str as torch's."""
    n = world()
    api = _emulated()
    mesh = compat.init_device_mesh("cpu", (n,))
    made = api.DTensor.from_local(kit.tensor(np.ones((2, 3)), "float32"), mesh, [api.Shard(-1)])
    assert made.shape == (2, 3 * n) and made.size() == (2, 3 * n) and made.size(-1) == 3 * n
    assert made.ndim == 2 and made.dtype == kit.tensor(np.ones(1), "float32").dtype
    assert made.placements == (api.Shard(1),) and made.device_mesh == mesh
    shard, replicate, partial = api.Shard(1), api.Replicate(), api.Partial()
    assert (repr(shard), str(shard), repr(replicate), str(replicate)) == (
        "Shard(dim=1)", "S(1)", "Replicate()", "R")  # fmt: skip
    assert (repr(partial), str(partial)) == ("Partial(sum)", "P(sum)")
    assert shard.is_shard() and shard.is_shard(1) and not shard.is_shard(0)
    assert partial.is_partial("sum") and not partial.is_partial("max") and replicate.is_replicate()
    assert len({api.Shard(1), shard, replicate, api.Replicate(), partial}) == 3
    with pytest.raises(AttributeError):
        shard.dim = 0  # type: ignore[misc]
    follow_up(kit)


register("dtensor-names", case_dtensor_names)
for _which in ("emulation", "native"):
    _frameworks = ("torch",) if _which == "native" else ("torch", "mindspore")
    for _name, _case, _least in (
        ("layouts", case_dtensor_layouts, 1),
        ("partial", case_dtensor_partial, 1),
        ("distribute", case_dtensor_distribute, 2),
        ("run_check", case_dtensor_run_check, 2),
    ):
        _run = functools.partial(_case, which=_which)
        register(f"dtensor-{_which}-{_name}", _run, min_world=_least, frameworks=_frameworks)
register("dtensor-bad_arguments", case_dtensor_bad_arguments)
register("dtensor-queries", case_dtensor_queries)
