"""compat.init_device_mesh on real ranks: every mesh shape of this world size (1-D, (1, n),
(n, 1), and at 3 ranks a mesh of 2 ranks leaving rank 2 outside), each dim's group, sizes, local
ranks and coordinates compared with a numpy model of torch's row-major layout, an all_reduce
over each dim's group (inside a sentinel-filled tensor), submeshes by name and _flatten; bad
arguments refused on the calling rank before any group is made. On torch the mesh is torch's
own DeviceMesh, on MindSpore compat's: the same expectations hold for both."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import compat
from tests.ranks.cases import follow_up, rank, reduce_np, register, values, world
from tests.ranks.layout_cases import Placed


def _shapes(n: int) -> list[tuple[int, ...]]:
    shapes = [(n,), (1, n), (n, 1)]
    return [*shapes, (2,)] if n == 3 else shapes


def _expected_group(shape: tuple[int, ...], coordinate: tuple[int, ...], dim: int) -> list[int]:
    """The global ranks of the slice along ``dim`` through ``coordinate``: the mesh's ranks are
    0.. in row-major order (numpy's reshape)."""
    ranks = np.arange(int(np.prod(shape))).reshape(shape)
    index = tuple(slice(None) if d == dim else c for d, c in enumerate(coordinate))
    return [int(r) for r in ranks[index]]


def _check_dim(kit: Any, mesh: Any, shape: tuple[int, ...], dim: int, name: str) -> None:
    coordinate = tuple(int(c) for c in np.unravel_index(rank(), shape))
    expected = _expected_group(shape, coordinate, dim)
    for group in (mesh.get_group(dim), mesh.get_group(name), mesh.get_all_groups()[dim]):
        assert compat.get_process_group_ranks(group) == expected, (shape, dim, group)
        assert compat.get_world_size(group) == len(expected) == mesh.size(dim)
        assert compat.get_rank(group) == coordinate[dim] == mesh.get_local_rank(name)
    assert mesh.get_local_rank(dim) == coordinate[dim]
    sub = mesh[name]
    assert sub.shape == (shape[dim],) and sub.mesh_dim_names == (name,)
    assert sub.mesh.tolist() == expected and sub.get_coordinate() == (coordinate[dim],)
    assert compat.get_process_group_ranks(sub.get_group()) == expected
    seed = f"mesh-{shape}-{dim}"
    x = Placed(kit, values(seed, rank(), (3, 2)), "float32", "interior")
    compat.all_reduce(x.view, group=mesh.get_group(name))
    x.result(reduce_np([values(seed, r, (3, 2)) for r in expected], "sum"))
    x.check(f"all_reduce over dim {name} of the mesh {shape}")


def _check_mesh(kit: Any, shape: tuple[int, ...]) -> None:
    names = tuple(f"d{i}" for i in range(len(shape)))
    mesh = compat.init_device_mesh("cpu", shape, mesh_dim_names=names)
    assert isinstance(mesh, compat.DeviceMesh), type(mesh)
    if kit.framework == "torch":
        from torch.distributed.device_mesh import DeviceMesh

        assert isinstance(mesh, DeviceMesh)  # torch's own, for DTensor and unported code
    assert mesh.shape == shape and mesh.ndim == len(shape) and mesh.mesh_dim_names == names
    assert mesh.size() == int(np.prod(shape)) and mesh.get_rank() == rank()
    assert mesh.device_type == "cpu"
    assert mesh.mesh.tolist() == np.arange(int(np.prod(shape))).reshape(shape).tolist()
    if rank() >= int(np.prod(shape)):
        assert mesh.get_coordinate() is None  # outside the mesh, as torch's
        return
    assert mesh.get_coordinate() == tuple(int(c) for c in np.unravel_index(rank(), shape))
    for dim, name in enumerate(names):
        _check_dim(kit, mesh, shape, dim, name)
    if len(shape) == 2:
        flat = mesh[names]._flatten("flat")
        assert flat.shape == (int(np.prod(shape)),) and flat.mesh_dim_names == ("flat",)
        everyone = list(range(int(np.prod(shape))))
        assert compat.get_process_group_ranks(flat.get_group()) == everyone
        assert compat.get_process_group_ranks(mesh.get_group("flat")) == everyone
        assert flat.get_local_rank() == rank()


def case_mesh_shapes(kit: Any) -> None:
    """Each mesh shape of this world size, made in the same order on every rank."""
    for shape in _shapes(world()):
        _check_mesh(kit, shape)
    # torch's constructor, given the layout init_device_mesh makes
    n = world()
    made = compat.DeviceMesh("cpu", np.arange(n).reshape(1, n), mesh_dim_names=("dp", "tp"))
    assert isinstance(made, compat.DeviceMesh) and made.shape == (1, n)
    assert compat.get_process_group_ranks(made.get_group("tp")) == list(range(n))
    follow_up(kit)


def case_mesh_constructor(kit: Any) -> None:
    """torch's constructor with a layout init_device_mesh does not make (prime-rl's and
    torchtitan's HSDP mesh: a submesh's ranks reshaped), here the world's ranks reversed: on
    torch, torch's own mesh of exactly those ranks (its group sums what numpy says); on
    MindSpore, whose meshes are compat's (row-major only), an UnsupportedError naming mesh
    before any group is made (each rank alone; then a collective runs)."""
    n, me = world(), rank()
    layout = np.arange(n)[::-1].reshape(1, n)
    if kit.framework == "torch" or n == 1:  # one rank: the reversed layout is row-major
        made = compat.DeviceMesh("cpu", layout, mesh_dim_names=("dp", "tp"))
        assert isinstance(made, compat.DeviceMesh)
        if kit.framework == "torch":
            from torch.distributed.device_mesh import DeviceMesh

            assert type(made) is DeviceMesh, type(made)
        assert np.asarray(made.mesh.tolist()).tolist() == layout.tolist()
        assert made.mesh_dim_names == ("dp", "tp")
        assert tuple(made.get_coordinate()) == (0, n - 1 - me)
        total = kit.tensor(np.full(3, float(me + 1)), "float32")
        compat.all_reduce(total, group=made.get_group("tp"))
        np.testing.assert_array_equal(kit.numpy(total), np.full(3, n * (n + 1) / 2))
    else:
        with pytest.raises(compat.UnsupportedError, match=r"^mesh: compat lays a mesh's ranks"):
            compat.DeviceMesh("cpu", layout, mesh_dim_names=("dp", "tp"))
    follow_up(kit)


def case_mesh_bad_arguments(kit: Any) -> None:
    """Bad arguments: a clear error on the calling rank, naming the parameter, before any group
    is made (only rank 0 calls, so a group made would leave the others waiting); the next
    collective works on every rank."""
    n = world()
    bad: list[tuple[type[Exception], Any, str]] = [
        (ValueError, lambda: compat.init_device_mesh("cpu", (n + 1,)), "mesh_shape"),
        (ValueError, lambda: compat.init_device_mesh("cpu", (n, 2)), "mesh_shape"),
        (ValueError, lambda: compat.init_device_mesh("cpu", (0,)), "mesh_shape"),
        (TypeError, lambda: compat.init_device_mesh("cpu", n), "mesh_shape"),
        (TypeError, lambda: compat.init_device_mesh("cpu", (1.5,)), "mesh_shape[0]"),
        (ValueError, lambda: compat.init_device_mesh("cpu:0", (n,)), "device_type"),
        (
            ValueError,
            lambda: compat.init_device_mesh("cpu", (1, n), mesh_dim_names=("dp", "dp")),
            "mesh_dim_names",
        ),
        (
            ValueError,
            lambda: compat.init_device_mesh("cpu", (1, n), mesh_dim_names=("dp",)),
            "mesh_dim_names",
        ),
        (TypeError, lambda: compat.init_device_mesh("cpu", (n,), mesh_dim_names="dp"),
         "mesh_dim_names"),
    ]  # fmt: skip
    if rank() == 0:
        for kind, call, param in bad:
            with pytest.raises(kind, match=rf"^{re.escape(param)}: expected .*; got "):
                call()
    follow_up(kit)


def case_mesh_unknown_dim(kit: Any) -> None:
    """An unknown dim name: a KeyError on both frameworks (torch's mesh raises one; compat's
    raises one that is also a ValueError, naming the parameter)."""
    mesh = compat.init_device_mesh("cpu", (1, world()), mesh_dim_names=("dp", "tp"))
    for lookup in (lambda: mesh.get_group("pp"), lambda: mesh["pp"]):
        with pytest.raises(KeyError, match="pp"):
            lookup()
    if kit.framework == "mindspore":
        with pytest.raises(ValueError, match=r"^mesh_dim: expected a dim name of the mesh"):
            mesh.get_group("pp")
    follow_up(kit)


def case_mesh_as_group(kit: Any) -> None:
    """A 1-D mesh, or (mesh, mesh dim), as ``group=`` (funcol's forms; compat takes them on
    both frameworks): the dim's group, for compat's collectives and compat.autograd's."""
    n = world()
    mesh = compat.init_device_mesh("cpu", (1, n), mesh_dim_names=("dp", "tp"))
    seed = "mesh-as-group"
    for group in (mesh["tp"], (mesh, 1)):
        x = Placed(kit, values(seed, rank(), (2, 2)), "float32", "interior")
        compat.all_reduce(x.view, group=group)
        x.result(reduce_np([values(seed, r, (2, 2)) for r in range(n)], "sum"))
        x.check(f"all_reduce with group={group!r}")
    alone = compat.autograd.all_reduce(kit.tensor(np.full((3,), rank() + 1.0), "float32"),
                                       "sum", (mesh, 0))  # fmt: skip
    np.testing.assert_array_equal(kit.numpy(alone), np.full((3,), rank() + 1.0))
    with pytest.raises(ValueError, match=r"^group: expected a 1-D DeviceMesh or \(DeviceMesh"):
        compat.all_reduce(kit.tensor(np.ones(2), "float32"), group=mesh)
    follow_up(kit)


def case_mesh_unflatten(kit: Any) -> None:
    """torchtitan's way: a 1-D world mesh, _unflatten into named dims (row-major, so the ranks
    keep their order), submeshes and _flatten of them; on MindSpore also with torch's 'fake'
    backend for dims no collective runs on (no group made; layout queries still answer)."""
    n, me = world(), rank()
    world_mesh = compat.init_device_mesh("cpu", (n,), mesh_dim_names=("world",))
    mesh = world_mesh._unflatten(0, (1, n, 1), ("pp", "dp", "tp"))
    assert mesh.shape == (1, n, 1) and mesh.mesh_dim_names == ("pp", "dp", "tp")
    assert mesh.get_coordinate() == (0, me, 0) and mesh.mesh.tolist() == [[[r] for r in range(n)]]
    assert [mesh.get_local_rank(name) for name in ("pp", "dp", "tp")] == [0, me, 0]
    groups = {
        name: compat.get_process_group_ranks(mesh.get_group(name)) for name in ("pp", "dp", "tp")
    }
    assert groups == {"pp": [me], "dp": list(range(n)), "tp": [me]}, groups
    flat = mesh["dp", "tp"]._flatten("dp_tp")
    assert compat.get_process_group_ranks(flat.get_group()) == list(range(n))
    seed = "mesh-unflatten"
    x = Placed(kit, values(seed, me, (2, 3)), "float32", "interior")
    compat.all_reduce(x.view, group=mesh.get_group("dp"))
    x.result(reduce_np([values(seed, r, (2, 3)) for r in range(n)], "sum"))
    x.check("all_reduce over the unflattened dp dim")
    with pytest.raises(ValueError, match="mesh_sizes"):
        world_mesh._unflatten(0, (n + 1,), ("dp",))
    if kit.framework == "mindspore":  # torch's 'fake' backend needs torch's test helpers
        faked = world_mesh._unflatten(0, (1, n), ("pp", "dp"), backend_override={"pp": "fake"})
        assert faked.get_local_rank("pp") == 0 and faked.get_coordinate() == (0, me)
        assert compat.get_process_group_ranks(faked.get_group("dp")) == list(range(n))
        with pytest.raises(compat.UnsupportedError, match=r"^mesh_dim: the dim 'pp' was made"):
            faked.get_group("pp")
    follow_up(kit)


register("mesh-shapes", case_mesh_shapes)
register("mesh-constructor", case_mesh_constructor)
register("mesh-unflatten", case_mesh_unflatten)
register("mesh-as_group", case_mesh_as_group)
register("mesh-bad_arguments", case_mesh_bad_arguments)
register("mesh-unknown_dim", case_mesh_unknown_dim)
