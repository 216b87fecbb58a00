"""compat's own DTensor, torch's ``torch.distributed.tensor.DTensor`` surface for frameworks
without one (MindSpore): a local tensor on each rank, a device mesh, and one placement per mesh
dim, with torch's semantics, on compat's collectives.

- Shards are ``torch.chunk``'s: every rank's piece of an n-long dim split k ways is
  ``ceil(n / k)`` long, except trailing ones, shorter or empty.
- ``redistribute`` plans as torch's greedy planner does (inner mesh dims first where a nested
  shard must be undone, then outer to inner), one mesh dim at a time: Shard -> Replicate
  all_gather along the dim, Replicate -> Shard the local chunk, Partial -> Replicate
  all_reduce, Partial -> Shard reduce_scatter, Shard(a) -> Shard(b) all_to_all.
- ``distribute_tensor`` takes group rank ``src_data_rank`` of each mesh dim as the source
  (scatter for Shard, broadcast for Replicate); None: every rank's own data, no communication.
  For Partial it replicates, then partitions as torch's does (``sum``: divided by the dim's size).

Differences from torch's: it is not a Tensor subclass (arithmetic on it is a TypeError naming
``to_local()`` and ``full_tensor()``); it is not differentiable (``grad_placements`` is an
UnsupportedError); ``async_op=True`` runs the collectives before ``redistribute`` returns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NoReturn

from compat import collectives, objects
from compat.base.adapter import Adapter
from compat.base.errors import UnsupportedError
from compat.core import dispatch, state
from compat.core.values import check_bool, check_int, describe
from compat.mesh import DeviceMesh, current_mesh
from compat.tensor.placements import Partial, Placement, Replicate, Shard

Tensor = Any
Shape = tuple[int, ...]
#: (mesh dim, from, to) of one redistribution step.
Step = tuple[int, Placement, Placement]

#: The Partial reductions distribute_tensor can split a replicated value into (torch's).
_PARTITIONED = ("sum", "avg", "min", "max")


class DTensorArgumentError(ValueError, RuntimeError):
    """A bad argument: a ValueError as compat's are, and a RuntimeError as torch's DTensor
    raises there, so code that catches either runs the same."""


def chunk_sizes(size: int, count: int) -> list[int]:
    """The sizes ``torch.chunk`` splits ``size`` into ``count`` pieces of (empty ones added)."""
    full = -(-size // count)
    return [max(0, min(size, full * (index + 1)) - full * index) for index in range(count)]


class DTensor:
    """A distributed tensor: this rank's ``to_local()`` piece of a global tensor of ``shape``,
    laid out on ``device_mesh`` by ``placements`` (one per mesh dim). Made by
    :meth:`from_local` or :func:`distribute_tensor`."""

    __slots__ = ("_device_mesh", "_local_tensor", "_placements", "_shape")

    _local_tensor: Tensor
    _device_mesh: DeviceMesh
    _placements: tuple[Placement, ...]
    _shape: Shape

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError(
            "DTensor: make one with DTensor.from_local(local_tensor, device_mesh, placements) "
            "or compat.tensor.distribute_tensor(tensor, device_mesh, placements)"
        )

    @classmethod
    def _made(
        cls, local: Tensor, mesh: DeviceMesh, placements: Sequence[Placement], shape: Shape
    ) -> DTensor:
        made: DTensor = object.__new__(cls)
        made._local_tensor, made._device_mesh = local, mesh
        made._placements, made._shape = tuple(placements), tuple(shape)
        return made

    @staticmethod
    def from_local(
        local_tensor: Tensor,
        device_mesh: DeviceMesh | None = None,
        placements: Sequence[Placement] | None = None,
        *,
        run_check: bool = False,
        shape: Sequence[int] | None = None,
        stride: Sequence[int] | None = None,
        grad_placements: Sequence[Placement] | None = None,
    ) -> DTensor:
        """A DTensor whose piece on this rank is ``local_tensor`` (no copy), laid out by
        ``placements`` (default: Replicate on every mesh dim). Its global shape is ``shape``
        (given with ``stride``), else the local shape with each sharded dim times its mesh
        dim's size (even shards, as torch's). ``run_check``: every rank's dtype,
        requires_grad (and shape, where ``shape`` is not given) are compared across the world,
        and group rank 0 of each Replicate mesh dim broadcasts its tensor into the others'."""
        if isinstance(local_tensor, DTensor):
            raise DTensorArgumentError(
                "local_tensor: expected a tensor, not a DTensor; got a DTensor "
                f"with placements {local_tensor.placements}"
            )
        adapter = _tensor_adapter(local_tensor, "local_tensor")
        mesh = _mesh(device_mesh)
        rank_count = len(adapter.shape(local_tensor))
        chosen = _placements(placements, mesh, rank_count)
        _no_gradients(grad_placements)
        given = _given_shape(shape, stride)
        check_bool(run_check, "run_check")
        local = local_tensor
        if mesh.get_coordinate() is None:
            local = adapter.empty([0], local_tensor)  # a rank outside the mesh holds nothing
        elif run_check:
            _run_check(adapter, local, mesh, chosen, check_shape=given is None)
        whole = given or _even_global_shape(adapter.shape(local_tensor), mesh, chosen)
        return DTensor._made(local, mesh, chosen, whole)

    def to_local(self, *, grad_placements: Sequence[Placement] | None = None) -> Tensor:
        """This rank's piece (the tensor itself, no copy)."""
        _no_gradients(grad_placements)
        return self._local_tensor

    def full_tensor(self, *, grad_placements: Sequence[Placement] | None = None) -> Tensor:
        """The whole tensor on every rank of the mesh:
        ``redistribute(placements=[Replicate()] * mesh.ndim).to_local()``."""
        _no_gradients(grad_placements)
        whole = [Replicate()] * self._device_mesh.ndim
        return self.redistribute(placements=whole).to_local()

    def redistribute(
        self,
        device_mesh: DeviceMesh | None = None,
        placements: Sequence[Placement] | None = None,
        *,
        async_op: bool = False,
    ) -> DTensor:
        """A new DTensor of the same global tensor laid out by ``placements`` on the same mesh
        (``device_mesh``: None or this DTensor's); this one is left as it is. Partial targets
        are refused, as torch's public redistribute refuses them (unless already Partial)."""
        mesh = self._device_mesh if device_mesh is None else device_mesh
        if mesh != self._device_mesh:
            raise UnsupportedError(
                f"device_mesh: redistribute stays on the DTensor's mesh {self._device_mesh!r}, "
                f"as torch's (cross device mesh comm not supported); got {mesh!r}"
            )
        if placements is None:
            raise DTensorArgumentError(
                "placements: expected one placement per mesh dim (placements is needed for "
                "redistribute); got None"
            )
        target = _placements(placements, mesh, self.ndim)
        for index, (now, goal) in enumerate(zip(self._placements, target, strict=True)):
            if goal.is_partial() and now != goal:
                raise DTensorArgumentError(
                    f"placements[{index}]: can not redistribute from {now} to {goal}: "
                    "redistributing to Partial is for internal use only (as torch's)"
                )
        check_bool(async_op, "async_op")
        local = self._local_tensor
        if mesh.get_coordinate() is not None:
            local = _redistributed(self, target)
        return DTensor._made(local, mesh, target, self._shape)

    @property
    def device_mesh(self) -> DeviceMesh:
        return self._device_mesh

    @property
    def placements(self) -> tuple[Placement, ...]:
        return self._placements

    @property
    def shape(self) -> Shape:
        """The global shape."""
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def dtype(self) -> Any:
        return self._local_tensor.dtype

    def size(self, dim: int | None = None) -> Shape | int:
        """The global shape, or its size along ``dim`` (negative counts from the end)."""
        if dim is None:
            return self._shape
        index = check_int(dim, "dim")
        if not -self.ndim <= index < self.ndim:
            raise IndexError(
                f"dim: expected a dim in [{-self.ndim}, {self.ndim}) of the DTensor's shape "
                f"{self._shape}; got {index}"
            )
        return self._shape[index]

    def __repr__(self) -> str:
        return (
            f"DTensor(local_tensor={self._local_tensor}, device_mesh={self._device_mesh}, "
            f"placements={self._placements})"
        )


def _not_a_tensor(name: str) -> Any:
    def refuse(self: DTensor, *args: object) -> NoReturn:
        raise TypeError(
            f"DTensor.{name}: compat's DTensor (MindSpore) is not a tensor: compute on "
            "dtensor.to_local() (this rank's piece) or dtensor.full_tensor() (the whole tensor)"
        )

    return refuse


# Arithmetic, comparison and indexing: torch's DTensor runs them as sharded ops; compat's does
# not emulate them, and says so rather than letting Python's defaults answer.
for _name in (
    "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ "
    "__floordiv__ __rfloordiv__ __mod__ __pow__ __rpow__ __matmul__ __rmatmul__ __neg__ "
    "__pos__ __abs__ __lt__ __le__ __gt__ __ge__ __getitem__ __setitem__ __iter__ __len__ "
    "__bool__ __float__ __int__ __array__ __iadd__ __isub__ __imul__ __itruediv__"
).split():
    setattr(DTensor, _name, _not_a_tensor(_name))


def distribute_tensor(
    tensor: Tensor,
    device_mesh: DeviceMesh | None = None,
    placements: Sequence[Placement] | None = None,
    *,
    src_data_rank: int | None = 0,
) -> DTensor:
    """``tensor`` (the global tensor) laid out on ``device_mesh`` by ``placements`` (default
    Replicate on every mesh dim): along each mesh dim, group rank ``src_data_rank``'s data is
    scattered (Shard) or broadcast (Replicate, Partial); None: each rank keeps its own data (no
    communication). Partial then splits the value (``sum``: divided by the dim's size). The
    DTensor's local tensor is a new one; ``tensor`` is left as it is. A DTensor already on
    this mesh with these placements is returned as it is."""
    mesh = _mesh(device_mesh)
    if isinstance(tensor, DTensor):
        return _already_distributed(tensor, mesh, placements)
    adapter = _tensor_adapter(tensor, "tensor")
    shape = adapter.shape(tensor)
    chosen = _placements(placements, mesh, len(shape))
    for index, placement in enumerate(chosen):
        if isinstance(placement, Partial) and placement.reduce_op not in _PARTITIONED:
            raise ValueError(
                f"placements[{index}]: Replicate to {placement!r} conversion is not supported "
                f"(a replicated value splits into Partial of {_PARTITIONED} only)"
            )
    _check_source(src_data_rank, mesh)
    if mesh.get_coordinate() is None:
        return DTensor._made(adapter.empty([0], tensor), mesh, chosen, shape)
    local = adapter.clone(tensor)
    for index, placement in enumerate(chosen):
        local = _distributed_along(adapter, local, mesh, index, placement, src_data_rank)
    return DTensor._made(local, mesh, chosen, shape)


# -- checks (on the calling rank, before any communication) -----------------------------------
def _tensor_adapter(tensor: object, param: str) -> Adapter:
    """The adapter of compat's framework, which ``tensor`` must be a tensor of."""
    current = state.checked()
    framework = dispatch.framework_of(tensor)
    if framework != current.framework:
        raise TypeError(
            f"{param}: expected a {current.framework} tensor (compat runs on "
            f"{current.framework}); got {describe(tensor)}"
        )
    return current.adapter


def _mesh(device_mesh: object) -> DeviceMesh:
    if device_mesh is None:
        return current_mesh()
    if not isinstance(device_mesh, DeviceMesh):
        raise TypeError(
            f"device_mesh: expected a DeviceMesh (compat.init_device_mesh's) or None; got "
            f"{describe(device_mesh)}"
        )
    return device_mesh


def _placements(placements: object, mesh: DeviceMesh, rank_count: int) -> tuple[Placement, ...]:
    """``placements`` checked: one compat placement per mesh dim, Shard dims within the
    tensor's ``rank_count`` dims (negative ones counted from the end, as torch's), Partial of
    one reduction only. None: Replicate on every mesh dim."""
    if placements is None:
        return (Replicate(),) * mesh.ndim
    if not isinstance(placements, Sequence) or isinstance(placements, str):
        raise TypeError(
            f"placements: expected a list of {mesh.ndim} placements (Shard, Replicate, "
            f"Partial), one per mesh dim; got {describe(placements)}"
        )
    if len(placements) != mesh.ndim:
        raise ValueError(
            f"placements: expected {mesh.ndim} placements, one per dim of the mesh {mesh!r}; "
            f"got {len(placements)}: {list(placements)}"
        )
    chosen = [_placement(each, f"placements[{i}]", rank_count) for i, each in enumerate(placements)]
    reductions = {each.reduce_op for each in chosen if isinstance(each, Partial)}
    if len(reductions) > 1:
        raise ValueError(
            "placements: expected Partial placements of one reduce op (mixed Partial reduce "
            f"types are not supported, as torch's); got {sorted(reductions)}"
        )
    return tuple(chosen)


def _placement(placement: object, param: str, rank_count: int) -> Placement:
    if not isinstance(placement, Placement):
        raise TypeError(
            f"{param}: expected compat.tensor's Shard(dim), Replicate() or Partial(); got "
            f"{describe(placement)}"
        )
    if not isinstance(placement, Shard):
        return placement
    dim = placement.dim + rank_count if placement.dim < 0 else placement.dim
    if not 0 <= dim < rank_count:
        raise ValueError(
            f"{param}: expected Shard of a dim in [{-rank_count}, {rank_count}) of the "
            f"{rank_count}-dim tensor; got {placement!r}"
        )
    return Shard(dim)


def _no_gradients(grad_placements: object) -> None:
    if grad_placements is not None:
        raise UnsupportedError(
            "grad_placements: compat's DTensor (MindSpore) is not differentiable, so it has no "
            f"gradient layout to set; pass None (got {describe(grad_placements)})"
        )


def _given_shape(shape: object, stride: object) -> Shape | None:
    if (shape is None) != (stride is None):
        raise DTensorArgumentError(
            f"shape, stride: expected both or neither (as torch's); got shape={shape!r}, "
            f"stride={stride!r}"
        )
    if shape is None:
        return None
    if not isinstance(shape, Sequence) or isinstance(shape, str):
        raise TypeError(f"shape: expected a sequence of ints; got {describe(shape)}")
    sizes = tuple(check_int(size, f"shape[{i}]") for i, size in enumerate(shape))
    if any(size < 0 for size in sizes):
        raise ValueError(f"shape: expected sizes of at least 0; got {sizes}")
    return sizes


def _check_source(src_data_rank: object, mesh: DeviceMesh) -> None:
    if src_data_rank is None:
        return
    rank = check_int(src_data_rank, "src_data_rank")
    smallest = min(mesh.shape)
    if not 0 <= rank < smallest:
        raise ValueError(
            f"src_data_rank: expected None or a group rank in [0, {smallest}) of every dim of "
            f"the mesh {mesh!r}; got {rank}"
        )


def _already_distributed(
    tensor: DTensor, mesh: DeviceMesh, placements: Sequence[Placement] | None
) -> DTensor:
    chosen = _placements(placements, mesh, tensor.ndim)
    if tensor.device_mesh != mesh:
        raise ValueError(
            f"device_mesh: cannot distribute a DTensor of the mesh {tensor.device_mesh!r} to "
            f"another mesh; got {mesh!r}"
        )
    if tensor.placements != chosen:
        raise ValueError(
            f"placements: cannot distribute a DTensor with placements {tensor.placements} to "
            f"other placements (use redistribute); got {list(chosen)}"
        )
    return tensor


def _even_global_shape(local: Shape, mesh: DeviceMesh, placements: Sequence[Placement]) -> Shape:
    whole = list(local)
    for index, placement in enumerate(placements):
        if isinstance(placement, Shard):
            whole[placement.dim] *= mesh.size(index)
    return tuple(whole)


def _run_check(
    adapter: Adapter,
    local: Tensor,
    mesh: DeviceMesh,
    placements: Sequence[Placement],
    check_shape: bool,
) -> None:
    """torch's run_check: the metadata compared across the world, then each Replicate mesh
    dim's group rank 0 broadcasting its tensor into the others' (in place)."""
    mine: dict[str, object] = {
        "dtype": str(local.dtype),
        "requires_grad": bool(getattr(local, "requires_grad", False)),
    }
    if check_shape:
        mine["shape"] = adapter.shape(local)
    every: list[Any] = [None] * state.checked().world_size
    objects.all_gather_object(every, mine)
    if any(theirs != mine for theirs in every):
        raise ValueError(
            "local_tensor: expected the same dtype, requires_grad and shape on every rank "
            f"(run_check=True); got {every}"
        )
    for index, placement in enumerate(placements):
        if placement.is_replicate():
            collectives.broadcast(local, group=mesh.get_group(index), group_src=0)


# -- redistribution ----------------------------------------------------------------------------
def _logical_shapes(shape: Shape, placements: Sequence[Placement], mesh: DeviceMesh) -> list[Shape]:
    """The tensor's shape as mesh dim i sees it (what the dims before i left on this rank),
    for each i: what torch's planner records to gather uneven shards."""
    shapes = [shape]
    for index, placement in enumerate(placements[:-1]):
        now = list(shapes[-1])
        if isinstance(placement, Shard):
            sizes = chunk_sizes(now[placement.dim], mesh.size(index))
            now[placement.dim] = sizes[mesh.get_local_rank(index)]
        shapes.append(tuple(now))
    return shapes


def _plan(mesh: DeviceMesh, now: list[Placement], target: Sequence[Placement]) -> list[Step]:
    """torch's greedy plan: where a mesh dim shards, inner mesh dims first, replicating a
    nested shard whose outer shards differ from the target's; then outer to inner."""
    steps: list[Step] = []
    if any(isinstance(p, Shard) and mesh.size(i) > 1 for i, p in enumerate(now)):
        for index in reversed(range(mesh.ndim)):
            goal = target[index]
            if isinstance(goal, Shard):
                before_now = [i for i in range(index) if now[i].is_shard(goal.dim)]
                before_goal = [i for i in range(index) if target[i].is_shard(goal.dim)]
                goal = goal if before_now == before_goal else Replicate()
            if now[index] != goal:
                steps.append((index, now[index], goal))
                now[index] = goal
    for index in range(mesh.ndim):
        if now[index] != target[index]:
            steps.append((index, now[index], target[index]))
            now[index] = target[index]
    return steps


def _redistributed(source: DTensor, target: Sequence[Placement]) -> Tensor:
    mesh, adapter = source.device_mesh, state.checked().adapter
    logical = _logical_shapes(source.shape, source.placements, mesh)
    local = source.to_local()
    for index, now, goal in _plan(mesh, list(source.placements), target):
        if mesh.size(index) > 1:
            local = _step(adapter, local, mesh, index, now, goal, logical[index])
    return local


def _step(
    adapter: Adapter,
    local: Tensor,
    mesh: DeviceMesh,
    index: int,
    now: Placement,
    goal: Placement,
    logical: Shape,
) -> Tensor:
    """One mesh dim's move from ``now`` to ``goal`` (the planner makes no other moves)."""
    group = mesh.get_group(index)
    if isinstance(now, Partial):
        if isinstance(goal, Shard):
            sizes = chunk_sizes(adapter.shape(local)[goal.dim], mesh.size(index))
            return collectives.reduce_scatter_tensor(
                local, now.reduce_op, group, input_split_sizes=sizes, dim=goal.dim
            )
        reduced = adapter.clone(local)
        collectives.all_reduce(reduced, now.reduce_op, group)
        return reduced
    if isinstance(now, Shard) and isinstance(goal, Shard):
        return _all_to_all(adapter, local, mesh, index, (now.dim, goal.dim), logical)
    if isinstance(now, Shard):
        sizes = chunk_sizes(logical[now.dim], mesh.size(index))
        return collectives.all_gather_into_tensor(
            local, group, output_split_sizes=sizes, dim=now.dim
        )
    assert isinstance(goal, Shard), f"no move from {now} to {goal}"
    return _chunk(adapter, local, mesh, index, goal.dim)


def _chunk(adapter: Adapter, local: Tensor, mesh: DeviceMesh, index: int, dim: int) -> Tensor:
    """This rank's torch.chunk piece of ``local`` along ``dim`` (a new tensor)."""
    sizes = chunk_sizes(adapter.shape(local)[dim], mesh.size(index))
    return adapter.clone(adapter.split(local, sizes, dim)[mesh.get_local_rank(index)])


def _resized(shape: Shape, dim: int, size: int) -> Shape:
    return (*shape[:dim], size, *shape[dim + 1 :])


def _all_to_all(
    adapter: Adapter,
    local: Tensor,
    mesh: DeviceMesh,
    index: int,
    dims: tuple[int, int],
    logical: Shape,
) -> Tensor:
    """Shard(a) -> Shard(b): each rank sends its piece's chunk j of dim b to rank j and joins
    the pieces of dim a it receives. The pieces go flat, as compat's all_to_all takes parts
    that differ in dim 0 only."""
    old, new = dims
    count, rank, shape = mesh.size(index), mesh.get_local_rank(index), adapter.shape(local)
    outgoing = chunk_sizes(shape[new], count)
    sends = [adapter.clone(part).reshape((-1,)) for part in adapter.split(local, outgoing, new)]
    shapes = [
        _resized(_resized(shape, old, size), new, outgoing[rank])
        for size in chunk_sizes(logical[old], count)
    ]
    receives = [adapter.empty([math.prod(each)], local) for each in shapes]
    collectives.all_to_all(receives, sends, mesh.get_group(index))
    joined = [part.reshape(each) for part, each in zip(receives, shapes, strict=True)]
    return adapter.cat(joined, old)


# -- distribute_tensor --------------------------------------------------------------------------
def _distributed_along(
    adapter: Adapter,
    local: Tensor,
    mesh: DeviceMesh,
    index: int,
    placement: Placement,
    source: int | None,
) -> Tensor:
    if isinstance(placement, Shard):
        if source is None:
            return _chunk(adapter, local, mesh, index, placement.dim)
        return _scattered(adapter, local, mesh, index, placement.dim, source)
    if source is not None:
        collectives.broadcast(local, group=mesh.get_group(index), group_src=source)
    if isinstance(placement, Partial) and placement.reduce_op == "sum":
        return local / mesh.size(index)
    return local


def _scattered(
    adapter: Adapter, local: Tensor, mesh: DeviceMesh, index: int, dim: int, source: int
) -> Tensor:
    """Group rank ``source``'s torch.chunk pieces of ``local`` along ``dim``, one to each rank:
    padded to the first piece's size for the scatter, cut back after it."""
    rank, shape = mesh.get_local_rank(index), adapter.shape(local)
    sizes = chunk_sizes(shape[dim], mesh.size(index))
    full = sizes[0]
    if full == 0:
        return adapter.clone(adapter.split(local, sizes, dim)[rank])
    pieces = None
    if rank == source:
        pieces = [
            _padded(adapter, part, dim, full, size)
            for part, size in zip(adapter.split(local, sizes, dim), sizes, strict=True)
        ]
    received = adapter.empty(_resized(shape, dim, full), local)
    collectives.scatter(received, pieces, group=mesh.get_group(index), group_src=source)
    return adapter.clone(adapter.split(received, [sizes[rank], full - sizes[rank]], dim)[0])


def _padded(adapter: Adapter, part: Tensor, dim: int, full: int, size: int) -> Tensor:
    shape = adapter.shape(part)
    if size == full:
        return adapter.clone(part)
    padding = adapter.zeros(_resized(shape, dim, full - size), part)
    return padding if size == 0 else adapter.cat([part, padding], dim)
