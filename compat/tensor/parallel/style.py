"""compat's own parallel styles, torch's ``torch.distributed.tensor.parallel.style`` for the
frameworks without DTensor (MindSpore): :class:`ParallelStyle`, :class:`ColwiseParallel` and
:class:`RowwiseParallel` on the framework's linear layers (MindSpore: ``mindspore.nn.Dense`` and
``mindspore.mint.nn.Linear``, weight shaped (out, in)).

They shard a layer's parameters as torch's do (the weights of mesh rank ``src_data_rank``,
broadcast, cut as torch.chunk cuts them; ``None``: each rank's own, no communication) and run
the layer's input and output through forward pre-hooks and forward hooks whose collectives carry
DTensor's gradients (:mod:`compat.tensor.parallel._regions`). A layer's parameters are this
rank's shards (plain tensors, not DTensors): ``weight.shape`` is the local shape there, where
torch's DTensor parameter reports the global one.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, cast

from compat import autograd, collectives, lifecycle
from compat.base.adapter import LinearLayer
from compat.base.errors import UnsupportedError
from compat.base.types import Group
from compat.core import state
from compat.core.values import describe
from compat.mesh import DeviceMesh
from compat.tensor.dtensor import DTensor, chunk_sizes
from compat.tensor.parallel import _regions
from compat.tensor.placements import Placement, Replicate, Shard

Tensor = Any

#: The attribute torch's distribute_module sets on a module it has distributed.
APPLIED = "_distribute_module_applied"


class ParallelStyle(ABC):
    """How :func:`parallelize_module` parallelizes a module: ``_apply(module, device_mesh)``
    does it; ``src_data_rank`` (set by parallelize_module) is the mesh rank whose parameters
    are the ones kept, None for each rank's own."""

    src_data_rank: int | None = 0

    @abstractmethod
    def _apply(self, module: Any, device_mesh: DeviceMesh) -> Any: ...


def _layout(given: object, param: str, default: Placement) -> Placement:
    if given is None:
        return default
    if not isinstance(given, (Shard, Replicate)):
        kind = "a Placement" if isinstance(given, Placement) else describe(given)
        raise (UnsupportedError if isinstance(given, Placement) else TypeError)(
            f"{param}: expected None, Shard(dim) or Replicate() (compat's tensor-parallel "
            f"emulation takes no other placement); got {kind} {given!r}"
        )
    return given


def _last_dim(placement: Placement, ndim: int) -> bool:
    return isinstance(placement, Shard) and placement.dim % ndim == ndim - 1


def _group(mesh: DeviceMesh) -> Group:
    return mesh.get_group()


def _linear(style: str, module: Any) -> LinearLayer:
    """``module``'s linear parameters, or the UnsupportedError naming what is supported."""
    layer = state.checked().adapter.linear_layer(module)
    if layer is None:
        raise UnsupportedError(
            f"{style}: compat's emulation parallelizes linear layers (mindspore.nn.Dense, "
            f"mindspore.mint.nn.Linear); got {type(module).__module__}.{type(module).__name__} "
            "(torch's also takes nn.Embedding; compat does not)"
        )
    return layer


def _shard_sizes(style: str, size: int, parts: int, what: str) -> list[int]:
    sizes = chunk_sizes(size, parts)
    if 0 in sizes:
        raise UnsupportedError(
            f"{style}: {what} of {size} cut into {parts} pieces as torch.chunk cuts it gives "
            f"{sizes}: compat's emulation keeps no empty shard; use a size every rank gets a "
            "piece of"
        )
    return sizes


def _distributed(value: Tensor, group: Group, src: int | None, dim: int | None) -> Tensor:
    """``value`` as distribute_tensor places it: mesh rank ``src``'s (broadcast; None: this
    rank's own), whole (``dim`` None: Replicate) or this rank's torch.chunk piece of ``dim``."""
    adapter = state.current().adapter
    whole = adapter.clone(value)
    if src is not None:
        collectives.broadcast(whole, group=group, group_src=src)
    if dim is None:
        return whole
    sizes = chunk_sizes(adapter.shape(whole)[dim], lifecycle.get_world_size(group))
    return adapter.clone(adapter.split(whole, sizes, dim)[lifecycle.get_rank(group)])


def _repr(style: Any) -> str:
    return (
        f"{type(style).__name__}(input_layouts={style.input_layouts}, "
        f"output_layouts={style.output_layouts}, use_local_output={style.use_local_output})"
    )


def _local_output(
    style: Any, output: Tensor, mesh: DeviceMesh, placement: Placement, shape: tuple[int, ...]
) -> Any:
    """The module's output: the local tensor, or (use_local_output=False) compat's DTensor of
    global ``shape`` around it."""
    if style.use_local_output:
        return output
    stride = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    return DTensor.from_local(output, mesh, [placement], shape=shape, stride=stride)


def _input(tensor: Any, layout: Placement, mesh: DeviceMesh) -> tuple[Tensor, Placement]:
    """The local input and its layout: a DTensor's own (as torch's styles take it), else the
    style's ``input_layouts``."""
    if not isinstance(tensor, DTensor):
        return tensor, layout
    if tensor.device_mesh != mesh or not isinstance(tensor.placements[0], (Shard, Replicate)):
        raise UnsupportedError(
            f"input: expected a tensor, or a DTensor on the layer's mesh {mesh!r} placed Shard "
            f"or Replicate; got a DTensor on {tensor.device_mesh!r} placed {tensor.placements}"
        )
    return tensor.to_local(), tensor.placements[0]


class ColwiseParallel(ParallelStyle):
    """torch's ColwiseParallel on a linear layer: this rank keeps its torch.chunk piece of the
    weight's rows (output features) and of the bias. The input is Replicate by default (a
    Shard(d) input is all-gathered on d first); its gradient is all-reduced. The output is
    Shard(-1) by default, or Replicate (all-gathered on the last dim)."""

    def __init__(
        self,
        *,
        input_layouts: Placement | None = None,
        output_layouts: Placement | None = None,
        use_local_output: bool = True,
    ) -> None:
        super().__init__()
        self.input_layouts = (_layout(input_layouts, "input_layouts", Replicate()),)
        self.output_layouts = (_layout(output_layouts, "output_layouts", Shard(-1)),)
        self.desired_input_layouts = (Replicate(),)
        self.use_local_output = use_local_output

    def _check(self, module: Any, device_mesh: DeviceMesh) -> None:
        """What _apply needs, checked on this rank before any communication."""
        weight = _linear(type(self).__name__, module).weight
        rows = state.checked().adapter.shape(weight)[0]
        _shard_sizes(type(self).__name__, rows, device_mesh.size(), "the weight's rows")

    def _partition_linear_fn(self, name: str, module: Any, device_mesh: DeviceMesh) -> None:
        layer = _linear(type(self).__name__, module)
        adapter = state.checked().adapter
        group = _group(device_mesh)
        for attribute, value in (("weight", layer.weight), ("bias", layer.bias)):
            if value is not None:
                piece = _distributed(value, group, self.src_data_rank, 0)
                adapter.replace_parameter(module, attribute, piece)

    def _prepare_input(self, given: Any, device_mesh: DeviceMesh) -> Tensor:
        group = _group(device_mesh)
        tensor, layout = _input(given, self.input_layouts[0], device_mesh)
        if isinstance(layout, Shard):
            ndim = len(state.current().adapter.shape(tensor))
            return autograd.all_gather(tensor, group, dim=layout.dim % ndim)
        return _regions.enter_replicated(tensor, group)

    def _prepare_output(self, output: Tensor, device_mesh: DeviceMesh, rows: int) -> Any:
        placement = self.output_layouts[0]
        shape = state.current().adapter.shape(output)
        if isinstance(placement, Shard) and not _last_dim(placement, len(shape)):
            raise UnsupportedError(
                f"output_layouts: ColwiseParallel's output is sharded on its last dim "
                f"({len(shape) - 1}); compat's emulation does not move it to another; got "
                f"{placement!r}"
            )
        if isinstance(placement, Replicate):
            sizes = chunk_sizes(rows, device_mesh.size())
            output = _regions.gather_shards(output, _group(device_mesh), len(shape) - 1, sizes)
        return _local_output(self, output, device_mesh, placement, (*shape[:-1], rows))

    def _apply(self, module: Any, device_mesh: DeviceMesh) -> Any:
        self._check(module, device_mesh)
        rows = state.checked().adapter.shape(_linear(type(self).__name__, module).weight)[0]
        self._partition_linear_fn("", module, device_mesh)
        state.checked().adapter.add_forward_hooks(
            module,
            lambda tensor: self._prepare_input(tensor, device_mesh),
            lambda output: self._prepare_output(output, device_mesh, rows),
        )
        return module

    def __repr__(self) -> str:
        return _repr(self)


class RowwiseParallel(ParallelStyle):
    """torch's RowwiseParallel on a linear layer: this rank keeps its torch.chunk piece of the
    weight's columns (input features); the bias stays whole and is added once, after the
    reduction. The input is Shard(-1) by default (a Replicate input is cut here; its gradient
    all-gathered). The output is Replicate by default (an all_reduce, whose backward passes
    the gradient on as it is), or Shard(d) (a reduce_scatter on d)."""

    def __init__(
        self,
        *,
        input_layouts: Placement | None = None,
        output_layouts: Placement | None = None,
        use_local_output: bool = True,
    ) -> None:
        super().__init__()
        self.input_layouts = (_layout(input_layouts, "input_layouts", Shard(-1)),)
        self.output_layouts = (_layout(output_layouts, "output_layouts", Replicate()),)
        self.use_local_output = use_local_output

    def _check(self, module: Any, device_mesh: DeviceMesh) -> None:
        layer = _linear(type(self).__name__, module)
        if layer.activation is not None:
            raise UnsupportedError(
                f"RowwiseParallel: the layer applies {layer.activation} to its partial sums "
                "before the reduction; compat's emulation takes layers without an activation "
                "(apply it after the layer)"
            )
        columns = state.checked().adapter.shape(layer.weight)[1]
        _shard_sizes(type(self).__name__, columns, device_mesh.size(), "the weight's columns")

    def _partition_linear_fn(self, name: str, module: Any, device_mesh: DeviceMesh) -> None:
        layer = _linear(type(self).__name__, module)
        adapter = state.checked().adapter
        group = _group(device_mesh)
        adapter.replace_parameter(
            module, "weight", _distributed(layer.weight, group, self.src_data_rank, 1)
        )
        if layer.bias is not None:
            bias = _distributed(layer.bias, group, self.src_data_rank, None)
            adapter.replace_parameter(module, "bias", bias)

    def _prepare_input(self, given: Any, device_mesh: DeviceMesh, columns: int) -> Tensor:
        tensor, layout = _input(given, self.input_layouts[0], device_mesh)
        shape = state.current().adapter.shape(tensor)
        sizes = chunk_sizes(columns, device_mesh.size())
        if isinstance(layout, Replicate):
            if not shape or shape[-1] != columns:
                raise ValueError(
                    f"input: expected a Replicate input with the layer's {columns} input "
                    f"features on the last dim; got {describe(tensor)}"
                )
            return _regions.take_shard(tensor, _group(device_mesh), len(shape) - 1, sizes)
        if not _last_dim(layout, len(shape)):
            raise UnsupportedError(
                f"input_layouts: RowwiseParallel takes its input sharded on the last dim "
                f"({len(shape) - 1}) or Replicate(); compat's emulation does not move a shard "
                f"of another dim there; got {layout!r}"
            )
        mine = sizes[device_mesh.get_local_rank()]
        if not shape or shape[-1] != mine:
            raise ValueError(
                f"input: expected this rank's Shard(-1) piece of the layer's {columns} input "
                f"features ({mine} on the last dim); got {describe(tensor)}"
            )
        return tensor

    def _prepare_output(self, output: Tensor, module: Any, device_mesh: DeviceMesh) -> Any:
        placement = self.output_layouts[0]
        bias = _linear(type(self).__name__, module).bias
        # The layer added the whole bias to its partial sum: taken out, added after the sum.
        partial = output if bias is None else output - bias
        group = _group(device_mesh)
        shape = state.current().adapter.shape(output)
        if isinstance(placement, Replicate):
            result = _regions.reduce_partial(partial, group)
            result = result if bias is None else result + bias
            return _local_output(self, result, device_mesh, placement, shape)
        dim = cast(Shard, placement).dim % len(shape)  # _layout admits Shard or Replicate
        sizes = chunk_sizes(shape[dim], device_mesh.size())
        result = _regions.reduce_scatter_partial(partial, group, dim, sizes)
        if bias is not None:
            # Each rank adds the bias to its own rows or columns: its gradient is a partial sum.
            bias = _regions.enter_replicated(bias, group)
            if dim == len(shape) - 1:
                me = device_mesh.get_local_rank()
                start = sum(sizes[:me])
                bias = bias[start : start + sizes[me]]
            result = result + bias
        return _local_output(self, result, device_mesh, placement, shape)

    def _apply(self, module: Any, device_mesh: DeviceMesh) -> Any:
        self._check(module, device_mesh)
        columns = state.checked().adapter.shape(_linear(type(self).__name__, module).weight)[1]
        self._partition_linear_fn("", module, device_mesh)
        state.checked().adapter.add_forward_hooks(
            module,
            lambda tensor: self._prepare_input(tensor, device_mesh, columns),
            lambda output: self._prepare_output(output, module, device_mesh),
        )
        return module

    def __repr__(self) -> str:
        return _repr(self)
