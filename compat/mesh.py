"""Device meshes, as torch's ``torch.distributed.device_mesh``: :func:`init_device_mesh` lays the
world's ranks out row-major in an n-dimensional array and makes one group per slice along each
dimension; :class:`DeviceMesh` answers for it (its groups, sizes, coordinates, submeshes).

On torch the mesh is torch's own DeviceMesh (made by torch's ``init_device_mesh`` once compat
is initialised or has adopted torch's group), so DTensor, FSDP and code that was not ported
take it, and every compat call takes its groups (torch ProcessGroups). On MindSpore, which has
no device mesh in its communication modules, it is compat's :class:`DeviceMesh`, whose groups are
:func:`compat.new_group`'s: the same layout, the same groups made in the same order, the same
answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from types import TracebackType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from compat import lifecycle
from compat.base.adapter import Adapter
from compat.base.errors import UnsupportedError
from compat.base.types import Group
from compat.core import dispatch, state
from compat.core.values import check_int, describe

# The root mesh's dims a mesh dim stands for: (d,) for a dim of the root, several for a dim
# made by _flatten.
Axis = tuple[int, ...]


@cache
def _adapter(framework: str) -> Adapter:
    return dispatch.load_adapter(framework)


class _MeshKind(type):
    """``isinstance(x, compat.DeviceMesh)`` is true of compat's meshes and of the framework's own
    (torch's DeviceMesh), looked up only in frameworks the program has imported."""

    def __instancecheck__(cls, obj: object) -> bool:
        if type.__instancecheck__(cls, obj):
            return True
        for framework in dispatch.imported():
            native = _adapter(framework).device_mesh_class()
            if native is not None and isinstance(obj, native):
                return True
        return False


def init_device_mesh(
    device_type: str,
    mesh_shape: Sequence[int],
    *,
    mesh_dim_names: Sequence[str] | None = None,
    backend_override: dict[int | str, Any] | None = None,
) -> Any:
    """torch's ``init_device_mesh``: the world's first ``prod(mesh_shape)`` ranks laid out
    row-major in an array of ``mesh_shape`` (at most the world's size; ranks beyond it are in no
    slice: ``get_coordinate()`` is None there), one group per slice along each dim, made on every
    rank in the same order (every rank calls it, as torch asks).

    Returns torch's own ``DeviceMesh`` on torch, a :class:`compat.DeviceMesh` on MindSpore (its
    groups are :func:`compat.new_group`'s; ``backend_override`` there: a backend name per dim,
    by index or name, or torch's ``"fake"`` for no group). Initialises compat first if nothing
    is (as torch's initialises its default group). Arguments are checked on the calling rank
    before any group is made."""
    device, shape, names = _check_mesh_arguments(device_type, mesh_shape, mesh_dim_names)
    if not lifecycle.is_initialized():
        lifecycle.init()
    current = state.checked()
    if math.prod(shape) > current.world_size:
        raise ValueError(
            f"mesh_shape: expected sizes whose product is at most the world's size "
            f"{current.world_size}; got {shape} ({math.prod(shape)} ranks)"
        )
    if backend_override is not None and not isinstance(backend_override, dict):
        raise TypeError(
            f"backend_override: expected None or a dict; got {describe(backend_override)}"
        )
    native = current.adapter.framework_device_mesh(device, shape, names, backend_override)
    if native is not None:
        return native
    backends = _overrides(backend_override, names, len(shape))
    return DeviceMesh._root_mesh(device, shape, names, backends)


def _check_mesh_arguments(
    device_type: object, mesh_shape: object, mesh_dim_names: object
) -> tuple[str, tuple[int, ...], tuple[str, ...] | None]:
    if not isinstance(device_type, str) or not device_type.isalpha():
        raise ValueError(
            "device_type: expected a device type without an index, such as 'cpu' or 'cuda' "
            f"(a torch.device's .type); got {describe(device_type)}"
        )
    if not isinstance(mesh_shape, Sequence) or isinstance(mesh_shape, str) or not mesh_shape:
        raise TypeError(
            f"mesh_shape: expected a non-empty tuple of positive ints; got {describe(mesh_shape)}"
        )
    shape = tuple(check_int(size, f"mesh_shape[{i}]") for i, size in enumerate(mesh_shape))
    if any(size <= 0 for size in shape):
        raise ValueError(f"mesh_shape: expected positive sizes; got {shape}")
    if mesh_dim_names is None:
        return device_type, shape, None
    if not isinstance(mesh_dim_names, Sequence) or isinstance(mesh_dim_names, str):
        raise TypeError(
            "mesh_dim_names: expected None or a tuple of str, one per dim of mesh_shape; "
            f"got {describe(mesh_dim_names)}"
        )
    names = tuple(mesh_dim_names)
    if not all(isinstance(name, str) and name for name in names):
        raise TypeError(f"mesh_dim_names: expected non-empty str names; got {names!r}")
    if len(names) != len(shape) or len(set(names)) != len(names):
        raise ValueError(
            f"mesh_dim_names: expected {len(shape)} distinct names, one per dim of mesh_shape "
            f"{shape}; got {names!r}"
        )
    return device_type, shape, names


#: torch's backend that makes no real group (torch's FakeProcessGroup), for dims whose groups a
#: program never communicates on: compat then makes no group for the dim.
FAKE = "fake"


def _overrides(
    backend_override: object, names: tuple[str, ...] | None, count: int
) -> list[str | None]:
    """torch's ``backend_override`` (keys: dim indices or names) as one backend name (or None)
    per dim, where compat makes the groups: a name is passed to compat.new_group, FAKE makes
    none; torch's backend options have no counterpart there."""
    backends: list[str | None] = [None] * count
    if backend_override is None:
        return backends
    if not isinstance(backend_override, dict):
        raise TypeError(
            f"backend_override: expected None or a dict; got {describe(backend_override)}"
        )
    for key, value in backend_override.items():
        if isinstance(key, str) and names and key in names:
            index = names.index(key)
        elif isinstance(key, int) and not isinstance(key, bool) and 0 <= key < count:
            index = key
        else:
            raise ValueError(
                f"backend_override: expected keys that are dim indices in [0, {count}) or dim "
                f"names {names}; got {key!r}"
            )
        backends[index] = _backend_name(value)
    return backends


def _backend_name(value: object) -> str:
    if not isinstance(value, str):
        raise UnsupportedError(
            "backend_override: where compat makes the mesh's groups (MindSpore), a backend name "
            f"per dim ('{FAKE}': no group); torch's backend options have no counterpart there; "
            f"got {describe(value)}"
        )
    return value


def _ranks(mesh: object) -> NDArray[np.int64]:
    """``mesh`` (nested lists, a numpy array or a tensor of global ranks) as an int array."""
    values = mesh.tolist() if hasattr(mesh, "tolist") else mesh
    try:
        array = np.asarray(values)
    except ValueError:
        array = np.asarray(None)
    if array.dtype.kind not in "iu" or array.ndim == 0 or array.size == 0:
        raise TypeError(
            f"mesh: expected an n-dimensional array of global ranks; got {describe(mesh)}"
        )
    return array.astype(np.int64)


def _require_row_major(ranks: NDArray[np.int64]) -> None:
    """compat's own meshes have one layout: ranks 0, 1, ... in row-major order."""
    if not np.array_equal(ranks, np.arange(ranks.size).reshape(ranks.shape)):
        raise UnsupportedError(
            "mesh: compat lays a mesh's ranks out as init_device_mesh does (0, 1, ... in "
            f"row-major order); got {ranks.tolist()} (make groups of other ranks with "
            "compat.new_group)"
        )


def _slices(root_shape: tuple[int, ...], axis: Axis) -> NDArray[np.int64]:
    """The ranks of every group along ``axis`` of the root mesh, one row per group, in the
    order torch makes them (row-major over the other dims)."""
    ranks = np.arange(math.prod(root_shape)).reshape(root_shape)
    ends = list(range(len(root_shape) - len(axis), len(root_shape)))
    moved = np.moveaxis(ranks, list(axis), ends)
    rows: NDArray[np.int64] = moved.reshape(-1, math.prod(root_shape[d] for d in axis))
    return rows


def _make_groups(root_shape: tuple[int, ...], axis: Axis, backend: str | None) -> Group | None:
    """Every group along ``axis``, made on every rank in order (torch's order), as
    :func:`compat.new_group` makes them with ``backend``; a slice of the whole world is the
    world, as torch's mesh takes the default group for it (with no backend of its own).
    Returns this rank's group (None outside the mesh)."""
    current = state.checked()
    mine: Group | None = None
    for row in _slices(root_shape, axis):
        ranks = [int(rank) for rank in row]
        if len(ranks) == current.world_size and backend is None:
            group = current.world
        else:
            group = lifecycle.new_group(ranks, backend=backend)
        mine = group if current.rank in ranks else mine
    return mine


class DeviceMesh(metaclass=_MeshKind):
    """A device mesh with torch's DeviceMesh's public surface (made by
    :func:`compat.init_device_mesh`; ``isinstance`` is also true of torch's meshes).

    ``mesh`` is a numpy int32 array of global ranks (torch: an int32 CPU tensor), this rank's
    slice for a submesh, as torch's. Groups are compat.Group objects, which every compat call
    takes; a dim whose slice is the whole world has the world's group.

    ``compat.DeviceMesh(device_type, mesh, *, mesh_dim_names=None)`` is torch's constructor: on
    torch, torch's own DeviceMesh of that array of global ranks (any layout, as torch takes it);
    on MindSpore, a mesh whose ranks are 0, 1, ... in row-major order (the layout
    init_device_mesh makes), :func:`init_device_mesh` of its shape; another layout there is an
    UnsupportedError. Initialises compat first if nothing is."""

    def __new__(
        cls, device_type: str, mesh: object, *, mesh_dim_names: Sequence[str] | None = None
    ) -> Any:
        ranks = _ranks(mesh)
        device, shape, names = _check_mesh_arguments(device_type, ranks.shape, mesh_dim_names)
        if not lifecycle.is_initialized():
            lifecycle.init()
        native = state.checked().adapter.framework_device_mesh_of(device, ranks.tolist(), names)
        if native is not None:
            return native
        _require_row_major(ranks)
        return init_device_mesh(device, shape, mesh_dim_names=names)

    @classmethod
    def _made(
        cls,
        device_type: str,
        root_shape: tuple[int, ...],
        axes: tuple[Axis, ...],
        names: tuple[str, ...] | None,
        root: DeviceMesh | None = None,
    ) -> DeviceMesh:
        mesh: DeviceMesh = object.__new__(cls)
        mesh._setup(device_type, root_shape, axes, names, root)
        return mesh

    def _setup(
        self,
        device_type: str,
        root_shape: tuple[int, ...],
        axes: tuple[Axis, ...],
        names: tuple[str, ...] | None,
        root: DeviceMesh | None,
    ) -> None:
        self._device_type = device_type
        self._root_shape = root_shape
        self._axes = axes
        self._names = names
        self._root = root
        #: the root's groups (this rank's, per axis) and flattened meshes, shared by submeshes
        self._groups: dict[Axis, Group | None] = {} if root is None else root._groups
        self._flattened: dict[str, DeviceMesh] = {} if root is None else root._flattened
        #: the axes made with torch's "fake" backend: no group
        self._fake: set[Axis] = set() if root is None else root._fake
        self._rank = state.checked().rank

    @classmethod
    def _root_mesh(
        cls,
        device_type: str,
        shape: tuple[int, ...],
        names: tuple[str, ...] | None,
        backends: list[str | None],
    ) -> DeviceMesh:
        mesh = cls._made(device_type, shape, tuple((d,) for d in range(len(shape))), names)
        for d, backend in enumerate(backends):
            mesh._make_axis((d,), backend)
        return mesh

    def _make_axis(self, axis: Axis, backend: str | None) -> None:
        """The groups along ``axis`` of the root (none for torch's fake backend)."""
        if backend == FAKE:
            self._fake.add(axis)
        else:
            self._groups[axis] = _make_groups(self._root_shape, axis, backend)

    # -- what torch's DeviceMesh answers ----------------------------------------------------
    @property
    def device_type(self) -> str:
        return self._device_type

    @property
    def mesh_dim_names(self) -> tuple[str, ...] | None:
        return self._names

    @property
    def ndim(self) -> int:
        return len(self._axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(math.prod(self._root_shape[d] for d in axis) for axis in self._axes)

    @property
    def mesh(self) -> NDArray[np.int32]:
        """The global ranks of this mesh, shaped as it (this rank's slice of a submesh)."""
        rows = _slices(self._root_shape, tuple(d for axis in self._axes for d in axis))
        found = [row for row in rows if self._rank in row]
        if not found and len(rows) > 1:
            raise RuntimeError(
                f"DeviceMesh.mesh: this rank ({self._rank}) is outside the mesh, and a submesh "
                "has one slice per rank of it: ask on a rank inside the mesh"
            )
        chosen = found[0] if found else rows[0]
        shaped: NDArray[np.int32] = chosen.reshape(self.shape).astype(np.int32)
        return shaped

    def size(self, mesh_dim: int | None = None) -> int:
        """The number of ranks in the mesh, or along ``mesh_dim``."""
        if mesh_dim is None:
            return math.prod(self.shape)
        return self.shape[self._dim_index(mesh_dim, "mesh_dim")]

    def get_rank(self) -> int:
        """This process's global rank."""
        return self._rank

    def get_coordinate(self) -> tuple[int, ...] | None:
        """This rank's index along every dim of the mesh, or None outside it."""
        if not self._inside():
            return None
        where = np.argwhere(self.mesh == self._rank)
        return tuple(int(i) for i in where[0]) if len(where) else None

    def get_group(self, mesh_dim: int | str | None = None) -> Group:
        """The group of this rank's slice along ``mesh_dim`` (an index or a name; None on a
        1-D mesh), a compat.Group."""
        if mesh_dim is None and self.ndim > 1:
            raise ValueError(
                f"mesh_dim: expected the index or name of one of the mesh's {self.ndim} dims "
                "(get_all_groups() gives every dim's group); got None"
            )
        axis = self._axis(0 if mesh_dim is None else mesh_dim)
        if axis in self._fake:
            raise UnsupportedError(
                f"mesh_dim: the dim {mesh_dim!r} was made with backend_override '{FAKE}' "
                "(torch's group that does not communicate): compat made no group for it; "
                "make the mesh without it to communicate on that dim"
            )
        group = self._groups.get(axis)
        if group is None:
            raise ValueError(
                f"mesh_dim: this rank ({self._rank}) is in no group of the mesh's dim "
                f"{mesh_dim!r} (it is outside the mesh {self!r})"
            )
        return group

    def get_all_groups(self) -> list[Group]:
        """Every dim's group, in dim order."""
        return [self.get_group(i) for i in range(self.ndim)]

    def get_local_rank(self, mesh_dim: int | str | None = None) -> int:
        """This rank's rank in its group along ``mesh_dim`` (None on a 1-D mesh)."""
        if mesh_dim is None and self.ndim > 1:
            raise ValueError(
                f"mesh_dim: expected the index or name of one of the mesh's {self.ndim} dims; "
                "got None"
            )
        axis = self._axis(0 if mesh_dim is None else mesh_dim)
        for row in _slices(self._root_shape, axis):
            if self._rank in row:
                return [int(rank) for rank in row].index(self._rank)
        raise ValueError(
            f"mesh_dim: this rank ({self._rank}) is in no slice of the mesh's dim {mesh_dim!r} "
            f"(it is outside the mesh {self!r})"
        )

    def __getitem__(self, mesh_dim_names: str | tuple[str, ...]) -> DeviceMesh:
        """The submesh of the named dims (in the mesh's order), or of a dim :meth:`_flatten`
        made; no communication."""
        names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else mesh_dim_names
        if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names) or not names:
            raise TypeError(
                f"mesh_dim_names: expected a dim name or a tuple of them; got "
                f"{describe(mesh_dim_names)}"
            )
        if names == self._names:
            return self
        axes = tuple(self._axis(name, "mesh_dim_names") for name in names)
        joined = [d for axis in axes for d in axis]
        if joined != sorted(set(joined)):
            raise ValueError(
                f"mesh_dim_names: expected dims in the mesh's order ({self._names}), each "
                f"once; got {names!r}"
            )
        return DeviceMesh._made(
            self._device_type, self._root_shape, axes, names, self._root or self
        )

    def _flatten(self, mesh_dim_name: str | None = None, backend_override: object = None) -> Any:
        """One dim of this mesh's dims together (named ``mesh_dim_name``, default the names
        joined by "_"), with a group per slice, made on every rank as init_device_mesh makes
        them; the root mesh then also answers for that name."""
        backend = None if backend_override is None else _backend_name(backend_override)
        if not self._names:
            raise ValueError("DeviceMesh._flatten: expected a mesh with mesh_dim_names; got none")
        name = "_".join(self._names) if mesh_dim_name is None else mesh_dim_name
        if not isinstance(name, str) or not name:
            raise TypeError(f"mesh_dim_name: expected a non-empty str; got {describe(name)}")
        if self.ndim == 1 and name in self._names:
            return self
        root = self._root or self
        axis = tuple(d for each in self._axes for d in each)
        known = self._flattened.get(name)
        if name in (root._names or ()) or (known is not None and known._axes != (axis,)):
            raise ValueError(
                f"mesh_dim_name: expected a name no other dim of the mesh has; got {name!r}"
            )
        if known is None:
            self._make_axis(axis, backend)
            known = DeviceMesh._made(self._device_type, self._root_shape, (axis,), (name,), root)
            self._flattened[name] = known
        return known

    def _unflatten(
        self,
        dim: int | str,
        mesh_sizes: Sequence[int],
        mesh_dim_names: Sequence[str],
        backend_override: dict[int | str, Any] | None = None,
    ) -> DeviceMesh:
        """The mesh with ``dim`` split row-major into dims of ``mesh_sizes`` named
        ``mesh_dim_names``, whose groups are made on every rank as init_device_mesh makes them
        (``backend_override`` by their names or indices); the other dims keep their groups."""
        index = self._dim_index(dim, "dim") if not isinstance(dim, str) else self._named(dim)
        sizes = tuple(check_int(size, f"mesh_sizes[{i}]") for i, size in enumerate(mesh_sizes))
        names = tuple(mesh_dim_names)
        axis = self._axes[index]
        if len(axis) != 1:
            raise UnsupportedError(
                f"dim: compat unflattens a dim of the mesh it was made with, not one _flatten "
                f"made; got {dim!r}"
            )
        whole = list(self._names or ())
        whole[index : index + 1] = names
        if len(set(whole)) != len(whole) or len(names) != len(sizes) or any(s <= 0 for s in sizes):
            raise ValueError(
                f"mesh_dim_names: expected a name per size of mesh_sizes {sizes}, none the mesh "
                f"has (it has {self._names}); got {names!r}"
            )
        if math.prod(sizes) != self._root_shape[axis[0]]:
            raise ValueError(
                f"mesh_sizes: expected sizes whose product is the dim's size "
                f"{self._root_shape[axis[0]]}; got {sizes}"
            )
        backends = _overrides(backend_override, names, len(sizes))
        return self._split(axis[0], sizes, index, tuple(whole), backends)

    def _split(
        self,
        d: int,
        sizes: tuple[int, ...],
        index: int,
        names: tuple[str, ...],
        backends: list[str | None],
    ) -> DeviceMesh:
        """A new root in which the root's dim ``d`` is ``sizes`` (a reshape: the ranks keep
        their row-major order), carrying the groups made before, and this mesh's dim ``index``
        replaced by those dims."""

        split = tuple(range(d, d + len(sizes)))

        def moved(axis: Axis) -> Axis:
            return tuple(
                e for r in axis for e in (split if r == d else (r + (r > d) * (len(split) - 1),))
            )

        shape = (*self._root_shape[:d], *sizes, *self._root_shape[d + 1 :])
        axes = [moved(axis) for axis in self._axes]
        axes[index : index + 1] = [(d + k,) for k in range(len(sizes))]
        made = DeviceMesh._made(self._device_type, shape, tuple(axes), names or None)
        made._groups.update({moved(axis): group for axis, group in self._groups.items()})
        made._fake.update(moved(axis) for axis in self._fake)
        for k, backend in enumerate(backends):
            made._make_axis((d + k,), backend)
        return made

    def _named(self, name: str) -> int:
        if not self._names or name not in self._names:
            raise UnknownDimError(
                f"dim: expected a dim name of the mesh, one of {list(self._names or ())}; "
                f"got {name!r}"
            )
        return self._names.index(name)

    def _as_group(self, mesh_dim: object, param: str) -> Group:
        """The group ``group=mesh`` (1-D) or ``group=(mesh, mesh_dim)`` stands for, as funcol
        and compat's calls take a torch mesh."""
        if mesh_dim is None and self.ndim != 1:
            raise ValueError(
                f"{param}: expected a 1-D DeviceMesh or (DeviceMesh, mesh dim); got a mesh of "
                f"{self.ndim} dims (name the dim: {param}=(mesh, dim))"
            )
        return self.get_group(0 if mesh_dim is None else self._dim_index(mesh_dim, param))

    def __enter__(self) -> DeviceMesh:
        _ACTIVE.append(self)  # as torch's: the mesh compat.tensor's calls take by default
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _ACTIVE.pop()

    def __repr__(self) -> str:
        sizes = self.shape
        if self._names:
            inner = ", ".join(f"{n}={s}" for n, s in zip(self._names, sizes, strict=True))
            return f"DeviceMesh(({inner}), '{self._device_type}')"
        return f"DeviceMesh({sizes}, '{self._device_type}')"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeviceMesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # -- helpers ----------------------------------------------------------------------------
    def _key(self) -> tuple[object, ...]:
        return (self._device_type, self._root_shape, self._axes, self._names)

    def _inside(self) -> bool:
        return self._rank < math.prod(self._root_shape)

    def _dim_index(self, mesh_dim: object, param: str) -> int:
        index = check_int(mesh_dim, param)
        if not 0 <= index < self.ndim:
            raise ValueError(
                f"{param}: expected a dim index in [0, {self.ndim}) of the mesh {self!r}; "
                f"got {index}"
            )
        return index

    def _axis(self, mesh_dim: object, param: str = "mesh_dim") -> Axis:
        """The root dims that ``mesh_dim`` (an index, a name of this mesh, or a name the root
        flattened) stands for."""
        if not isinstance(mesh_dim, str):
            return self._axes[self._dim_index(mesh_dim, param)]
        if self._names and mesh_dim in self._names:
            return self._axes[self._names.index(mesh_dim)]
        if mesh_dim in self._flattened:
            return self._flattened[mesh_dim]._axes[0]
        known = [*(self._names or ()), *self._flattened]
        raise UnknownDimError(
            f"{param}: expected a dim name of the mesh, one of {known}; got {mesh_dim!r}"
        )


#: The meshes entered with ``with mesh:``, innermost last.
_ACTIVE: list[DeviceMesh] = []


def current_mesh() -> DeviceMesh:
    """The innermost mesh entered with ``with mesh:`` (what torch's DTensor calls take when no
    ``device_mesh`` is given)."""
    if not _ACTIVE:
        raise RuntimeError(
            "device_mesh: expected a DeviceMesh, or a call inside 'with mesh:'; got None and no "
            "device mesh is currently active"
        )
    return _ACTIVE[-1]


class UnknownDimError(KeyError, ValueError):
    """A dim name the mesh does not have: a ValueError as compat's bad arguments are, and a
    KeyError as torch's DeviceMesh raises there, so code that catches either runs the same."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
