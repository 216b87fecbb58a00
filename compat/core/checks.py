"""The argument checks of the collectives: they run on the calling rank before any
communication, and each failure names the parameter, what was expected and what was given.
Facts checked on every call are kept in the form that is cheapest to test (per-call overhead
matters at small sizes: ``compat bench -n 1`` prints it).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from datetime import timedelta
from numbers import Integral
from typing import Any

from compat.base import tables
from compat.base.adapter import Adapter, Tensor, TensorFacts
from compat.base.errors import UnsupportedError, UnsupportedReductionError
from compat.base.types import WORLD, Group, ReduceOp, parse_op
from compat.core.dispatch import framework_of
from compat.core.values import (
    check_absent,
    check_dtype,
    check_int,
    check_list,
    check_shape,
    check_split_sizes,
    describe,
    even_split,
)

#: ``checked`` of plain_list and plain_tensors where no tensor of the list was checked before.
#: Not None: an item that is ``checked`` is not read again, and None is a bad item, which the
#: full checks must see (with None here, ``all_gather([None], t)`` at world size 1 reached
#: torch's allgather, and a list with one None item failed inside the algorithms).
_NOTHING_CHECKED: Any = object()


class Checks:
    """The checks of one process's calls (``State.checks``), with what they have seen before.

    Given what they check against: the adapter, the backend's name and capability entry (its
    dtypes and reduce ops), this rank, the world, and the groups compat.new_group made (by their
    ranks, the process state's dict, filled as groups are made)."""

    def __init__(
        self,
        adapter: Adapter,
        backend: str,
        backend_entry: dict[str, Any],
        rank: int,
        world: Group,
        groups: dict[tuple[int, ...], Group],
    ) -> None:
        self.adapter = adapter
        self.framework = adapter.framework
        self.backend = backend
        self.rank = rank
        self.world = world
        self.world_size = world.size()
        self._groups = groups
        self._dtype_kinds = {
            name: entry["kind"] for name, entry in tables.lookup("dtypes", "dtypes").items()
        }
        self._dtype_names = list(backend_entry["dtypes"])
        self._reduce_op_names = list(backend_entry["reduce_ops"])
        #: the backend's dtypes (read by the common case, compat.core.common)
        self.dtypes_ok = frozenset(self._dtype_names)
        self._reduce_ops_ok = frozenset(self._reduce_op_names)
        #: dtypes the backend lacks that the non-reducing collectives move as bytes (uint8)
        self.as_bytes = frozenset(backend_entry.get("as_bytes", {}).get("dtypes", ()))
        #: complex dtypes the backend lacks that every call moves as their real view, by the
        #: real dtype they travel as (capabilities.toml's ``as_real``, dtypes.toml's ``real``)
        as_real = backend_entry.get("as_real", {})
        dtypes = tables.lookup("dtypes", "dtypes")
        self.as_real: dict[str, str] = {
            name: dtypes[name]["real"] for name in as_real.get("dtypes", ())
        }
        #: the ReduceOps that apply to them (elementwise on the real view)
        self._real_ops = tuple(ReduceOp(value) for value in as_real.get("reduce_ops", ()))
        #: dtypes no ReduceOp applies to (kind float8 in dtypes.toml)
        self._unreduced = frozenset(
            name for name, kind in self._dtype_kinds.items() if kind == "float8"
        )
        #: the ops that take integer and bool dtypes only (the bitwise ones)
        self._integer_only = frozenset(
            ReduceOp(value)
            for value, entry in tables.lookup("reduce_ops", "ops").items()
            if entry.get("integer_only")
        )
        #: the tensor types a call has passed :meth:`tensor` with: the common case takes only
        #: these (it does not ask which framework a tensor belongs to)
        self.tensor_types: set[type] = set()
        self._reductions: dict[tuple[type, Any, str], ReduceOp] = {}
        self._native_groups: dict[object, Group] = {}
        #: The framework's own group (handle) of each group compat.destroy freed.
        self._destroyed: dict[object, Group] = {}
        self._world_peers = frozenset(range(self.world_size)) - {rank}

    # -- tensors -------------------------------------------------------------------------------
    def tensor(self, obj: object, param: str) -> None:
        """``obj`` is a tensor of the framework compat was initialised for, on this rank's
        device (the backend cannot communicate it from anywhere else)."""
        if type(obj) not in self.tensor_types:
            framework = self.framework
            other = framework_of(obj)
            if other != framework:
                # The framework came from init's rules (a torchrun launch means torch): say how
                # a program of the other framework chooses it.
                hint = (
                    f"; a {other} program chooses it with compat.init(framework={other!r}) or "
                    f"COMPAT_FRAMEWORK={other}"
                    if other is not None
                    else ""
                )
                raise TypeError(
                    f"{param}: expected a {framework} tensor (compat was initialised for "
                    f"{framework}); got {describe(obj)}{hint}"
                )
            self.tensor_types.add(type(obj))
        if not self.adapter.on_home(obj):
            raise TypeError(
                f"{param}: expected a tensor on {self.adapter.home_device()} (this rank's device "
                f"for {self.backend}); got one on {self.adapter.device(obj)}"
            )

    def plain_point_to_point(
        self, tensor: object, peer: object, group: object, tag: object, group_peer: object
    ) -> str | None:
        """``tensor``'s dtype if a point-to-point call is the common case, valid in every
        argument: on the world, with another rank's global rank as an int, tag 0, and a dense,
        non-empty tensor of a type seen before, on this rank's device, of a supported dtype.
        Checked without building any message: point to point is bound by latency, so every
        call before the wait counts. None sends the call to the full checks, which raise where
        they fail."""
        if not (
            (group is None or group is WORLD)
            and group_peer is None
            and type(peer) is int
            and peer in self._world_peers
            and type(tag) is int
            and tag == 0
            and type(tensor) in self.tensor_types
        ):
            return None
        dtype = self.adapter.dense_dtype(tensor)
        return dtype if dtype in self.dtypes_ok else None

    def plain_list(
        self, value: object, facts: TensorFacts, checked: object = _NOTHING_CHECKED
    ) -> list[Tensor] | None:
        """``value`` as a list if it is the common case of the list forms: one tensor per rank
        of the world, each as the common case takes a tensor (dense, non-empty, of a type
        seen before, on this rank's device) and of the dtype and shape ``facts``; ``checked``, a
        tensor of them checked before, is not read again. None sends the call to the full
        checks."""
        if not isinstance(value, (list, tuple)) or len(value) != self.world_size:
            return None
        known, dense_facts = self.tensor_types, self.adapter.dense_facts
        for item in value:
            if item is checked:
                continue
            if type(item) not in known or dense_facts(item) != facts:
                return None
        return list(value)

    def plain_tensors(
        self, value: object, dtype: str, checked: object = _NOTHING_CHECKED
    ) -> list[Tensor] | None:
        """``value`` as a list if it is a non-empty list of tensors, each as the common case
        takes a tensor and of ``dtype``, of any shapes (all_reduce_coalesced's common case);
        ``checked``, a tensor of them checked before, is not read again. None sends the call to
        the full checks."""
        if not isinstance(value, (list, tuple)) or not value:
            return None
        known, dense_dtype = self.tensor_types, self.adapter.dense_dtype
        for item in value:
            if item is checked:
                continue
            if type(item) not in known or dense_dtype(item) != dtype:
                return None
        return list(value)

    def known_reduction(self, op: object, dtype: str) -> ReduceOp | None:
        """``op`` as a ReduceOp if a call has passed :meth:`reduction` with it and ``dtype``
        (one look-up), else None."""
        try:
            return self._reductions.get((type(op), op, dtype))
        except TypeError:  # an op that cannot be a key
            return None

    def like(
        self,
        tensor: object,
        param: str,
        like: Tensor,
        like_param: str,
        shape: tuple[int, ...] | None,
    ) -> None:
        """``tensor`` is a tensor of ``like``'s dtype and, unless ``shape`` is None, that shape."""
        self.tensor(tensor, param)
        adapter = self.adapter
        # The error's words are built only when it is raised (this runs once per list item).
        if adapter.dtype(tensor) != adapter.dtype(like):
            check_dtype(
                adapter.dtype(tensor), adapter.dtype(like), param, f"the dtype of {like_param}"
            )
        if shape is not None and adapter.shape(tensor) != shape:
            check_shape(adapter.shape(tensor), shape, param, f"must match {like_param}")

    def trailing(self, tensor: Tensor, param: str, like: Tensor, like_param: str) -> None:
        """``tensor`` has the dims of ``like`` after dim 0 (it may differ in dim 0 only)."""
        shape, reference = self.adapter.shape(tensor), self.adapter.shape(like)
        if shape[1:] != reference[1:] or len(shape) != len(reference):
            raise ValueError(
                f"{param}: expected shape (*, {', '.join(map(str, reference[1:]))}) (only dim 0 "
                f"may differ from {like_param}); got {shape}"
            )

    def dim0(self, tensor: Tensor, param: str) -> tuple[int, ...]:
        """``tensor``'s shape, which must have a dim 0."""
        shape = self.adapter.shape(tensor)
        if not shape:
            raise ValueError(
                f"{param}: expected a tensor with at least one dimension; got a 0-d tensor"
            )
        return shape

    def out(
        self,
        out: object,
        shape: tuple[int, ...],
        like: Tensor,
        dtype: str,
        like_param: str,
        param: str = "out",
        why: str = "this rank's part of the result",
    ) -> Tensor:
        """``out`` (the parameter ``param``) as given (checked against ``shape``, which is
        ``why``, and ``dtype``, ``like``'s), or a new tensor like ``like``."""
        if out is None:
            return self.adapter.empty(shape, like)
        self.tensor(out, param)
        adapter = self.adapter
        found = adapter.dtype(out)
        if found != dtype:
            check_dtype(found, dtype, param, f"the dtype of {like_param}")
        found_shape = adapter.shape(out)
        if found_shape != shape:
            check_shape(found_shape, shape, param, why)
        return out

    def tensor_list(
        self,
        value: object,
        param: str,
        group: Group,
        like: Tensor,
        like_param: str,
        dtype: str,
        shape: tuple[int, ...],
        any_shape: bool = False,
    ) -> tuple[list[Tensor], bool]:
        """One tensor per rank of ``group``, each with ``like``'s dtype and trailing dims (``dtype``
        and ``shape`` are ``like``'s), and this rank's entry with ``like``'s shape (the list
        forms: all_gather, reduce_scatter); and whether every entry has that shape.
        ``any_shape``: the other entries may have any shape, and this rank's entry ``like``'s
        elements in other trailing dims (all_gather, as torch's)."""
        items = check_list(value, param, group.size())
        even = self._all_like(items, dtype, shape, False)
        if even is None:
            for i, item in enumerate(items):
                self.like(item, f"{param}[{i}]", like, like_param, None)
                if not any_shape:
                    self.trailing(item, f"{param}[{i}]", like, like_param)
        me = group.own_rank(self.rank)
        if not even and not self._own_entry_fits(items[me], shape, any_shape):
            check_shape(
                self.adapter.shape(items[me]), shape, f"{param}[{me}]",
                f"this rank's entry must have {like_param}'s shape",
            )  # fmt: skip
        return items, bool(even)

    def _own_entry_fits(self, item: Tensor, shape: tuple[int, ...], any_shape: bool) -> bool:
        """This rank's entry has ``shape``, or (``any_shape``) ``shape``'s elements in other
        trailing dims, which torch's NCCL all_gather takes (a 0-d tensor into parts of shape
        (1,)); a part of other trailing dims goes through the flat path."""
        found = self.adapter.shape(item)
        if found == shape:
            return True
        other_dims = len(found) != len(shape) or found[1:] != shape[1:]
        return any_shape and other_dims and math.prod(found) == math.prod(shape)

    def root_list(
        self,
        value: object,
        param: str,
        root: int,
        root_param: str,
        group: Group,
        tensor: Tensor,
        dtype: str,
        shape: tuple[int, ...],
    ) -> list[Tensor] | None:
        """scatter_list / gather_list: a list of tensors like ``tensor`` (of ``dtype`` and
        ``shape``) on the root, else absent."""
        me = group.own_global_rank(self.rank)
        if me != root:
            check_absent(value, param, root_param, root, me)
            return None
        items = check_list(value, param, group.size())
        if self._all_like(items, dtype, shape, True) is None:
            for i, item in enumerate(items):
                self.like(item, f"{param}[{i}]", tensor, "tensor", shape)
        return items

    def _all_like(
        self, items: list[Any], dtype: str, shape: tuple[int, ...], whole_shape: bool
    ) -> bool | None:
        """Whether every one of ``items`` passes :meth:`like` (and :meth:`trailing`, or with
        ``whole_shape`` has ``shape``) for a tensor of ``dtype`` and ``shape``, checked without
        building any message and in one loop: the list forms run this on every call, with one
        item per rank. True: they pass and all have ``shape``; False: they pass, some differ in
        dim 0; None: some do not pass, which sends the items to the full checks, which raise."""
        known, adapter = self.tensor_types, self.adapter
        on_home, dtype_of, shape_of = adapter.on_home, adapter.dtype, adapter.shape
        ndim, trailing, even = len(shape), shape[1:], True
        for item in items:
            if type(item) not in known or not on_home(item) or dtype_of(item) != dtype:
                return None
            found = shape_of(item)
            if found != shape:
                if whole_shape or len(found) != ndim or found[1:] != trailing:
                    return None
                even = False
        return even

    # -- groups and ranks ----------------------------------------------------------------------
    def group(self, group: object, param: str = "group", member: bool = True) -> Group:
        """The group a call runs on: None and compat.WORLD mean the world; a compat.Group; or
        the framework's own group (a torch ProcessGroup, a MindSpore group name); or, as
        funcol takes it, a list of global ranks naming the world or a group made before, or a
        torch DeviceMesh (1-D, or ``(mesh, mesh dim)``). With ``member``, this rank must belong
        to it."""
        if group is None or group is WORLD:
            return self.world
        if isinstance(group, (list, tuple)) and not _mesh_and_dim(group):
            resolved = self._group_of_ranks(group, param)
        elif isinstance(group, Group):
            resolved = group
        else:
            resolved = self._native_group(group, param)
        if resolved.destroyed:
            raise ValueError(
                f"{param}: {resolved!r} was destroyed by compat.destroy(group); expected a group "
                "that is alive (make a new one with compat.new_group)"
            )
        if member and resolved.own_global_rank(self.rank) not in resolved:
            raise ValueError(
                f"{param}: this rank ({self.rank}) is not a member of the group; expected a "
                f"group containing it, got one with ranks {list(resolved.ranks)}"
            )
        return resolved

    def _group_of_ranks(self, ranks: list[object] | tuple[object, ...], param: str) -> Group:
        """funcol's ``group=[0, 1]``: the world, or the group compat.new_group (or the
        framework, for a group compat has been handed) made with exactly these ranks, in any
        order (funcol matches them as a set; new_group sorts them)."""
        wanted = tuple(sorted(check_int(rank, f"{param}[{i}]") for i, rank in enumerate(ranks)))
        if wanted == self.world.ranks:
            return self.world
        found = self._groups.get(wanted)
        if found is None:
            native = self._native_groups.values()
            found = next((group for group in native if tuple(sorted(group.ranks)) == wanted), None)
        if found is None:
            raise ValueError(
                f"{param}: expected a list of ranks naming the world or a group made before; "
                f"no group has ranks {list(wanted)} (make it with "
                f"compat.new_group({list(wanted)}) on every rank first)"
            )
        return found

    def forget_native(self, group: Group) -> None:
        """``group`` was destroyed: the framework's own objects that stood for it are resolved
        afresh (a MindSpore group name may be made again), and where the framework no longer
        knows them, they name ``group`` as destroyed."""
        for obj in [obj for obj, found in self._native_groups.items() if found is group]:
            del self._native_groups[obj]
        if group.handle is not None and len(self._destroyed) < 256:
            self._destroyed[group.handle] = group

    def _native_group(self, obj: object, param: str) -> Group:
        """compat's Group for the framework's own group ``obj`` (made once per object)."""
        try:
            return self._native_groups[obj]
        except (KeyError, TypeError):  # not seen yet, or not hashable (then not a group)
            pass
        try:
            found = self.adapter.native_group(obj)
        except Exception as error:
            gone = self._destroyed.get(obj) if isinstance(obj, Hashable) else None
            if gone is not None:
                return gone  # the framework forgot it (torch: a KeyError); the caller says so
            if not isinstance(error, ValueError):
                raise
            # The adapter's words name "group": name param instead.
            message = str(error)
            if param == "group" or not message.startswith("group:"):
                raise
            raise ValueError(param + message.removeprefix("group")) from None
        if found is None:
            meshed = _compat_mesh_group(obj, param)
            if meshed is not None:
                return meshed
            raise TypeError(
                f"{param}: expected None, compat.WORLD, a compat.Group or "
                f"{self.adapter.native_group_names}; got {describe(obj)}"
            )
        ranks, handle = found
        if handle is None:
            group = self.world
        else:
            # A group made for processes of other worlds numbers this process by its own map.
            own = self.adapter.own_global_rank(handle)
            group = Group(ranks, handle, repr(obj)[:40], None if own == self.rank else own)
        if len(self._native_groups) < 256:
            self._native_groups[obj] = group
        return group

    def peer(self, value: object, param: str, group: Group) -> int:
        """A global rank that must be a member of ``group``."""
        rank = check_int(value, param)
        if rank not in group.ranks:
            where = "the world" if group is self.world else "the group"
            raise ValueError(
                f"{param}: expected a global rank in {where}, one of {list(group.ranks)}; "
                f"got {rank}"
            )
        return rank

    # -- dtypes and reductions -----------------------------------------------------------------
    def dtype(self, dtype: str, param: str) -> None:
        """``dtype`` is one the backend takes itself (a dtype it moves as bytes is the
        non-reducing collectives' to take: :meth:`compat.core.call.Call.moved`)."""
        if dtype not in self.dtypes_ok:
            raise UnsupportedError(
                f"{param}: dtype {dtype} is not supported by the {self.backend} backend; "
                f"supported: {', '.join(self._dtype_names)}"
            )

    def reduction(self, op: object, dtype: str, param: str) -> ReduceOp:
        """``op`` as a ReduceOp that the backend applies to ``dtype`` (a tensor's dtype, checked
        too, as the dtype of ``param``), or the error naming what is supported.

        A combination that passed is remembered: the next call with it is one look-up. The key
        holds the op's type: torch's native ops equal (and hash as) ints, ``ReduceOp.SUM == 0``,
        and 0 or False is no op.
        """
        key = (type(op), op, dtype)
        try:
            return self._reductions[key]
        except (KeyError, TypeError):  # not seen yet, or an op that cannot be a key
            pass
        reduce_op = parse_op(op)
        if dtype in self._unreduced:
            raise UnsupportedError(
                f"{param}: {reduce_op.name} cannot reduce dtype {dtype}: no ReduceOp applies to "
                "float8 dtypes (torch's NCCL refuses their reductions too); the non-reducing "
                "collectives move them, or reduce a copy in float16, bfloat16 or float32"
            )
        if dtype in self.as_real:
            self._complex_reduction(reduce_op, dtype, param)
        else:
            self.dtype(dtype, param)
            self.reduce_op(reduce_op, dtype)
        if len(self._reductions) < 256:
            try:
                self._reductions[key] = reduce_op
            except TypeError:
                pass
        return reduce_op

    def _complex_reduction(self, op: ReduceOp, dtype: str, param: str) -> None:
        """``op`` on a complex ``dtype`` the backend reduces as its real view: the ops that are
        elementwise on real and imaginary parts alone (SUM, AVG; torch's supports_complex)."""
        if op not in self._real_ops:
            names = " and ".join(op.name for op in self._real_ops)
            raise UnsupportedReductionError(
                f"{param}: {op.name} cannot reduce dtype {dtype}: on complex tensors only "
                f"{names} apply (as on torch); reduce the real and imaginary parts, or the "
                "magnitudes, as real tensors"
            )
        self.reduce_op(op, self.as_real[dtype])

    def reduce_op(self, op: ReduceOp, dtype: str, param: str = "op") -> None:
        if op.value not in self._reduce_ops_ok:
            raise UnsupportedError(
                f"{param}: {op.name} is not supported by the {self.backend} backend; "
                f"supported: {', '.join(self._reduce_op_names)}"
            )
        if op is ReduceOp.AVG and self._dtype_kinds.get(dtype) not in ("float", "complex"):
            raise UnsupportedError(
                f"{param}: AVG needs a floating dtype (an integer mean is not representable); "
                f"got dtype {dtype}. Use SUM and divide, or a floating dtype"
            )
        if op in self._integer_only and self._dtype_kinds.get(dtype) not in ("int", "bool"):
            raise UnsupportedError(
                f"{param}: {op.name} (bitwise) needs an integer or bool dtype; got dtype {dtype}"
            )

    @staticmethod
    def splits(
        sizes: object, param: str, count: int, total: int, of: str, dim: int = 0
    ) -> list[int]:
        """``sizes`` (split sizes for ``count`` ranks summing to ``total``, the size of dim
        ``dim`` of ``of``), or equal parts when None."""
        if sizes is None:
            return even_split(total, count, of, dim)
        return check_split_sizes(sizes, param, count, total, of, dim)

    # -- rooted calls' group_src/group_dst, dim=, all_to_all, monitored_barrier ----------------
    def root(
        self,
        value: object,
        param: str,
        group_value: object,
        group_param: str,
        group: Group,
        default: object = None,
    ) -> int:
        """The global rank of a rooted call's root, given as ``param`` (a global rank) or as
        ``group_param`` (a rank of ``group``, as torch 2.13 takes it): exactly one of them.
        ``param`` is "not given" when it is ``default`` (the very object of its signature)."""
        if group_value is None:
            if value is None:
                raise ValueError(
                    f"{param}: expected a global rank, or {group_param} (a rank of the group); "
                    "got neither"
                )
            return self.peer(value, param, group)
        if value is not None and value is not default:
            raise ValueError(
                f"{param}: expected {param} (a global rank) or {group_param} (a rank of the "
                f"group), not both; got {param}={value!r} and {group_param}={group_value!r}"
            )
        index = check_int(group_value, group_param)
        if not 0 <= index < group.size():
            raise ValueError(
                f"{group_param}: expected a rank of the group, 0 to {group.size() - 1}; got {index}"
            )
        return group.ranks[index]

    @staticmethod
    def dim(value: object, shape: tuple[int, ...], of: str) -> int:
        """``dim=`` as an index into ``shape`` (``of``'s; negative counts from the end, as in
        torch); ``shape`` has at least one dim (checked before)."""
        dim = check_int(value, "dim")
        ndim = len(shape)
        if not -ndim <= dim < ndim:
            raise ValueError(
                f"dim: expected a dim of {of} (shape {shape}), {-ndim} to {ndim - 1}; got {dim}"
            )
        return dim % ndim

    def exchange_lists(
        self, outputs: object, inputs: object, group: Group
    ) -> tuple[list[Tensor], list[Tensor], str, tuple[int, ...], bool]:
        """all_to_all's lists: one tensor per rank of ``group`` each, every one with the dtype
        and the dims after dim 0 of ``input_tensor_list[0]``; this rank's part to itself has the
        same dim 0 on both sides. Returns the lists, the first input's dtype and shape, and
        whether every tensor of both lists has that shape (then every rank's do: an output is
        what its rank's input holds, so all this rank's having one shape means every rank's
        inputs have it; with a call that is right on every rank, every rank says the same)."""
        ins = check_list(inputs, "input_tensor_list", group.size())
        outs = check_list(outputs, "output_tensor_list", group.size())
        first, first_param = ins[0], "input_tensor_list[0]"
        self.tensor(first, first_param)
        shape, dtype = self.dim0(first, first_param), self.adapter.dtype(first)
        # The first input was checked above: the fast check starts after it.
        inputs_even = self._all_like(ins[1:], dtype, shape, False)
        outputs_even = self._all_like(outs, dtype, shape, False)
        if inputs_even is None or outputs_even is None:
            for param, items in (("input_tensor_list", ins), ("output_tensor_list", outs)):
                for i, item in enumerate(items):
                    self.like(item, f"{param}[{i}]", first, first_param, None)
                    self.trailing(item, f"{param}[{i}]", first, first_param)
        me = group.own_rank(self.rank)
        if not (inputs_even and outputs_even):
            if self.adapter.shape(outs[me]) != self.adapter.shape(ins[me]):
                check_shape(
                    self.adapter.shape(outs[me]), self.adapter.shape(ins[me]),
                    f"output_tensor_list[{me}]",
                    f"this rank's part to itself, input_tensor_list[{me}]",
                )  # fmt: skip
        return outs, ins, dtype, shape, bool(inputs_even and outputs_even)

    @staticmethod
    def seconds(value: object, param: str, default: float) -> float:
        """A timeout as seconds: a ``datetime.timedelta`` or a positive int/float; None =
        ``default``."""
        if value is None:
            return default
        if isinstance(value, timedelta):
            seconds = value.total_seconds()
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        else:
            raise TypeError(
                f"{param}: expected a datetime.timedelta or a number of seconds; "
                f"got {describe(value)}"
            )
        if not 0 < seconds < float("inf"):
            raise ValueError(f"{param}: expected a positive, finite duration; got {value!r}")
        return seconds


def _compat_mesh_group(obj: object, param: str) -> Group | None:
    """compat's own DeviceMesh (compat.mesh, where the framework has none) as funcol takes a
    torch mesh for ``group``: a 1-D mesh, or ``(mesh, mesh dim)``, stands for that dim's group.
    None for anything else."""
    mesh, dim = obj if isinstance(obj, tuple) and len(obj) == 2 else (obj, None)
    as_group = getattr(mesh, "_as_group", None)
    if as_group is None:
        return None
    found: Group = as_group(dim, param)
    return found


def _mesh_and_dim(group: list[object] | tuple[object, ...]) -> bool:
    """funcol's ``(DeviceMesh, mesh dim)``: a pair whose first item is no rank (the adapter
    resolves it), not a list of ranks."""
    return isinstance(group, tuple) and len(group) == 2 and not isinstance(group[0], Integral)
