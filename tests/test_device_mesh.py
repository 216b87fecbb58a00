"""compat.init_device_mesh and compat.DeviceMesh: tests/ranks/mesh_cases.py on real ranks (Gloo
and MCCL at 2 and 3 ranks: meshes (n,), (1, n), (n, 1), and (2,) at 3 ranks), read from the
collective jobs that run them; and the argument checks, which need no ranks (they run before
compat is initialised)."""

from __future__ import annotations

import pytest

import compat
from compat.mesh import DeviceMesh, UnknownDimError
from tests.jobs import BACKGROUND, collective_job


def _mesh_cases(framework: str, world: int) -> tuple[str, ...]:
    return tuple(
        name for name in collective_job(framework, world).cases if name.startswith("mesh-")
    )


@pytest.mark.parametrize(
    ("framework", "world"),
    [
        pytest.param(framework, world, marks=pytest.mark.job(collective_job(framework, world)))
        for framework, world in (("torch", 2), ("torch", 3), ("mindspore", 2), ("mindspore", 3))
    ],
)
def test_meshes_on_real_ranks(framework: str, world: int) -> None:
    names = _mesh_cases(framework, world)
    assert len(names) == 6, names
    result = BACKGROUND.result(collective_job(framework, world))
    failures = [failure for name in names if (failure := result.failure(name)) is not None]
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize(
    ("kind", "arguments", "message"),
    [
        (ValueError, ("cuda:0", (2,)), r"^device_type: expected a device type without an index"),
        (ValueError, (None, (2,)), r"^device_type: expected .*; got None"),
        (TypeError, ("cpu", 2), r"^mesh_shape: expected a non-empty tuple of positive ints; got"),
        (TypeError, ("cpu", ()), r"^mesh_shape: expected a non-empty tuple"),
        (ValueError, ("cpu", (2, 0)), r"^mesh_shape: expected positive sizes; got \(2, 0\)"),
        (TypeError, ("cpu", (2, True)), r"^mesh_shape\[1\]: expected an int; got bool"),
    ],
)
def test_bad_arguments_refused_before_anything_else(
    kind: type[Exception], arguments: tuple[object, ...], message: str
) -> None:
    """Checked before compat is initialised or any group is made: no process group here."""
    with pytest.raises(kind, match=message):
        compat.init_device_mesh(*arguments)  # type: ignore[arg-type]
    assert not compat.is_initialized()


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (("dp", "dp"), r"^mesh_dim_names: expected 2 distinct names, one per dim of mesh_shape "
                       r"\(1, 2\); got \('dp', 'dp'\)"),
        (("dp",), r"^mesh_dim_names: expected 2 distinct names"),
        (("dp", "tp", "pp"), r"^mesh_dim_names: expected 2 distinct names"),
    ],
)  # fmt: skip
def test_mismatched_dim_names_refused(names: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compat.init_device_mesh("cpu", (1, 2), mesh_dim_names=names)
    with pytest.raises(TypeError, match=r"^mesh_dim_names: expected None or a tuple of str"):
        compat.init_device_mesh("cpu", (2,), mesh_dim_names="dp")
    with pytest.raises(TypeError, match=r"^mesh_dim_names: expected non-empty str names"):
        compat.init_device_mesh("cpu", (2,), mesh_dim_names=("",))


def test_unknown_dim_error_is_a_value_error_and_torchs_key_error() -> None:
    error = UnknownDimError("mesh_dim: expected a dim name of the mesh, one of ['dp']; got 'tp'")
    assert isinstance(error, ValueError) and isinstance(error, KeyError)
    assert str(error) == "mesh_dim: expected a dim name of the mesh, one of ['dp']; got 'tp'"


def test_isinstance_answers_for_torchs_mesh_type_only() -> None:
    """compat.DeviceMesh is no torch mesh's base class: isinstance asks the framework's own class
    (torch's DeviceMesh), and is false of anything else."""
    from torch.distributed.device_mesh import DeviceMesh as TorchMesh

    assert compat.DeviceMesh is DeviceMesh
    assert not isinstance(object(), compat.DeviceMesh)
    assert not isinstance("dp", compat.DeviceMesh)
    stand_in = TorchMesh.__new__(TorchMesh)  # an instance without a process group
    assert isinstance(stand_in, compat.DeviceMesh)


def test_the_constructor_refuses_a_mesh_that_is_no_array_of_ranks() -> None:
    """compat.DeviceMesh(device_type, mesh) as torch's constructor: a mesh that is not an
    n-dimensional array of ints, or names that do not fit it, are refused, naming the
    parameter, before compat is initialised (the layouts each framework takes:
    tests/ranks/mesh_cases.py::case_mesh_constructor)."""
    for bad in ("01", [], [[0, 1], [2]], 3, [0.0, 1.0]):
        with pytest.raises(TypeError, match=r"^mesh: expected an n-dimensional array of global"):
            compat.DeviceMesh("cpu", bad)
    with pytest.raises(ValueError, match=r"^mesh_dim_names: expected 2 distinct names"):
        compat.DeviceMesh("cpu", [[0], [1]], mesh_dim_names=("dp",))
    assert not compat.is_initialized()
