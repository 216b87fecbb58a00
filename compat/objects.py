"""The object collectives: picklable Python objects, with torch.distributed's semantics and
signatures (``all_gather_object``, ``broadcast_object_list``, ``gather_object``,
``scatter_object_list``, ``send_object_list``, ``recv_object_list``).

Each pickles its objects into a 1-d uint8 tensor (a dtype every backend carries), moves the byte
counts first (8 little-endian bytes per object, in the same uint8 dtype), then the bytes in one
collective of compat's own (:mod:`compat.collectives`), so the capability table, the layout rules
and the pre-flight check apply to them as to any call. Bad arguments, and an object that cannot be
pickled, raise on the calling rank before any communication.

Warning: like torch's, these functions unpickle what the other ranks send, and unpickling can
run arbitrary code. Use them only in jobs whose ranks you trust.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Sequence
from typing import Any

from compat.base.adapter import Adapter, Tensor
from compat.base.types import Group
from compat.collectives import all_gather_into_tensor, broadcast, gather, scatter
from compat.core import state
from compat.core.specs import DEFAULT_ROOT
from compat.core.state import State
from compat.core.values import check_absent, check_bool, describe
from compat.p2p import recv, send

#: bytes per object size on the wire (a little-endian int64 each)
_SIZE_BYTES = 8


class _Objects:
    """One call: the process state, the group it runs on, and where its tensors live."""

    __slots__ = ("adapter", "device", "group", "rank", "state")

    def __init__(self, group: object, device: object = None) -> None:
        current: State = state.current()
        self.state, self.adapter = current, current.adapter
        self.group: Group = current.checks.group(group)
        #: this process's global rank as the group names it, which src and dst are compared with
        self.rank = self.group.own_global_rank(current.rank)
        self.device = None if device is None else _device(self.adapter, device)

    # -- arguments -----------------------------------------------------------------------------
    def root(self, rank: object, param: str, group_rank: object, group_param: str) -> int:
        """The global rank of the root: ``rank`` (global; ``DEFAULT_ROOT`` when not given) or
        ``group_rank`` (a rank of the group), not both."""
        return self.state.checks.root(
            rank, param, group_rank, group_param, self.group, DEFAULT_ROOT
        )

    def peer(self, rank: object, param: str, group_rank: object, group_param: str) -> int:
        """The other end of a point-to-point call: ``rank`` (global) or ``group_rank`` (exactly
        one), not this rank."""
        peer = self.state.checks.root(rank, param, group_rank, group_param, self.group)
        if peer == self.rank:
            named = param if group_rank is None else group_param
            raise ValueError(
                f"{named}: expected a rank other than this rank ({self.rank}); got "
                f"{rank if group_rank is None else group_rank}"
            )
        return peer

    # -- tensors -------------------------------------------------------------------------------
    def tensor(self, data: bytes | memoryview) -> Tensor:
        """A 1-d uint8 tensor holding ``data``, on ``device`` if one was given (a writable
        memoryview may become its memory: the caller gives it up)."""
        if not data:  # torch.frombuffer refuses an empty buffer
            return self.adapter.empty((0,), self.tensor(b"\0"))
        tensor = self.adapter.bytes_tensor(data)
        if self.device is not None and self.adapter.device(tensor) != self.device:
            tensor = self.adapter.to_device(tensor, self.device)
        return tensor

    def sizes_tensor(self, sizes: Sequence[int]) -> Tensor:
        return self.tensor(b"".join(size.to_bytes(_SIZE_BYTES, "little") for size in sizes))

    def read_sizes(self, tensor: Tensor) -> list[int]:
        data = self.adapter.to_bytes(tensor)
        return [
            int.from_bytes(data[i : i + _SIZE_BYTES], "little")
            for i in range(0, len(data), _SIZE_BYTES)
        ]


def _device(adapter: Adapter, device: object) -> str:
    canonical = adapter.canonical_device(device)
    if canonical is None:
        raise TypeError(f"device: expected a device or None; got {describe(device)}")
    available = adapter.available_devices()
    if canonical not in available:
        raise ValueError(
            f"device: expected a device of this process, one of {available}; got {canonical}"
        )
    return canonical


def _object_list(value: object, param: str, length: int | None = None) -> list[Any]:
    """A Python list (the results are written into it), of ``length`` items if given."""
    if not isinstance(value, list):
        expected = "a list" if length is None else f"a list of {length} objects"
        raise TypeError(f"{param}: expected {expected}; got {describe(value)}")
    if length is not None and len(value) != length:
        raise ValueError(
            f"{param}: expected a list of {length} objects (one per rank of the group); "
            f"got {len(value)}"
        )
    return value


def _dumps(obj: object, param: str, stream: io.BytesIO | None = None) -> io.BytesIO:
    """``obj`` pickled onto the end of ``stream`` (a new one if None); the pickling error
    itself if it cannot be, noted with ``param``. A tensor then takes the stream's buffer as it
    is (``_writable``): over ``pickle.dumps``'s bytes it would need a copy, as tensors want
    writable memory, and a fresh copy of a large object costs its pages faulted in."""
    stream = io.BytesIO() if stream is None else stream
    try:
        pickle.Pickler(stream).dump(obj)
    except Exception as error:
        add_note = getattr(error, "add_note", None)
        if add_note is not None:  # Python 3.11+
            add_note(f"{param}: could not be pickled, so nothing was sent")
        raise
    return stream


def _dumps_all(objects: list[Any], param: str) -> tuple[io.BytesIO, list[int]]:
    """The objects of the list ``param`` pickled back to back into one stream, and the size
    of each."""
    stream, sizes = io.BytesIO(), []
    for i, obj in enumerate(objects):
        start = stream.tell()
        _dumps(obj, f"{param}[{i}]", stream)
        sizes.append(stream.tell() - start)
    return stream, sizes


def _writable(stream: io.BytesIO, size: int = 0) -> memoryview:
    """The bytes of ``stream``, followed by zeros up to ``size`` bytes, as a writable view of
    the stream's own buffer (no copy); the stream takes no more writes."""
    if size > stream.tell():
        stream.seek(size - 1)
        stream.write(b"\0")  # a BytesIO fills the gap with zeros
    return stream.getbuffer()


def _loads(data: bytes | memoryview) -> Any:
    # Trusted jobs only, as the docstrings say: unpickling can run arbitrary code.
    return pickle.loads(data)


def _split(data: memoryview, sizes: Sequence[int]) -> list[Any]:
    """Unpickle the objects of ``data``, back to back, of ``sizes[i]`` bytes each. Each is read
    through a slice of the view, not a copy of its bytes (a slice of bytes copies: 64 MB
    objects from 4 ranks copied 256 MB more per call)."""
    objects, offset = [], 0
    for size in sizes:
        objects.append(_loads(data[offset : offset + size]))
        offset += size
    return objects


def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """Gather the picklable ``obj`` of every rank into ``object_list`` on every rank (as
    ``torch.distributed.all_gather_object``).

    Warnings
    --------
    This unpickles what the other ranks send, and unpickling can run arbitrary code: use it only
    in jobs whose ranks you trust.

    Parameters
    ----------
    object_list
        A list with one entry per rank of the group; entry i is replaced by group rank i's
        ``obj``.
    obj
        Any picklable object; its size may differ from rank to rank.
    group
        None or ``compat.WORLD`` (the world), a :class:`Group`, or the framework's own group.

    Returns
    -------
    None

    Notes
    -----
    The byte counts travel first (one all_gather), then the pickled bytes in one uneven
    ``all_gather_into_tensor``. An object that cannot be pickled raises the pickling error on
    the calling rank before any communication.

    Examples
    --------
    With 2 ranks::

        >>> out = [None, None]
        >>> compat.all_gather_object(out, {"rank": rank, "name": "r" * (rank + 1)})
        >>> out
        [{'rank': 0, 'name': 'r'}, {'rank': 1, 'name': 'rr'}]   # ranks 0 and 1
    """
    call = _Objects(group)
    _object_list(object_list, "object_list", call.group.size())
    stream = _dumps(obj, "obj")
    sizes = call.read_sizes(all_gather_into_tensor(call.sizes_tensor([stream.tell()]), call.group))
    gathered = all_gather_into_tensor(
        call.tensor(_writable(stream)), call.group, output_split_sizes=sizes
    )
    object_list[:] = _split(call.adapter.bytes_view(gathered), sizes)


def broadcast_object_list(
    object_list: list[Any],
    src: int = DEFAULT_ROOT,
    group: Any = None,
    device: Any = None,
    *,
    group_src: int | None = None,
) -> None:
    """Copy the picklable objects of ``object_list`` on rank ``src`` into ``object_list`` on
    every rank of the group (as ``torch.distributed.broadcast_object_list``).

    Warnings
    --------
    This unpickles what ``src`` sends, and unpickling can run arbitrary code: use it only in
    jobs whose ranks you trust.

    Parameters
    ----------
    object_list
        On ``src``, the objects to send; elsewhere, a list of the same length, whose entries
        are replaced. An empty list (on every rank) moves nothing.
    src
        The global rank that sends; default 0; or ``group_src``, not both.
    group
        None or ``compat.WORLD`` (the world), a :class:`Group`, or the framework's own group.
    device
        Where the byte tensors live (torch's ``device``); default the CPU for Gloo and MCCL.
    group_src
        The sending rank as a rank of ``group`` instead of ``src`` (keyword-only).

    Returns
    -------
    None

    Examples
    --------
    With 2 ranks::

        >>> objects = [{"lr": 0.1}, "adam", None] if rank == 1 else [None, None, None]
        >>> compat.broadcast_object_list(objects, src=1)
        >>> objects
        [{'lr': 0.1}, 'adam', None]   # ranks 0 and 1
    """
    call = _Objects(group, device)
    _object_list(object_list, "object_list")
    root = call.root(src, "src", group_src, "group_src")
    if call.rank == root:
        stream, piece_sizes = _dumps_all(object_list, "object_list")
        sizes = call.sizes_tensor(piece_sizes)
    else:
        sizes = call.tensor(bytes(_SIZE_BYTES * len(object_list)))
    broadcast(sizes, root, call.group)
    counts = call.read_sizes(sizes)
    if call.rank == root:
        broadcast(call.tensor(_writable(stream)), root, call.group)
        return
    data = call.adapter.empty((sum(counts),), sizes)
    broadcast(data, root, call.group)
    object_list[:] = _split(call.adapter.bytes_view(data), counts)


def gather_object(
    obj: Any,
    object_gather_list: list[Any] | None = None,
    dst: int = DEFAULT_ROOT,
    group: Any = None,
    *,
    group_dst: int | None = None,
) -> None:
    """Rank ``dst`` receives group rank i's picklable ``obj`` in ``object_gather_list[i]`` (as
    ``torch.distributed.gather_object``).

    Warnings
    --------
    This unpickles what the other ranks send, and unpickling can run arbitrary code: use it only
    in jobs whose ranks you trust.

    Parameters
    ----------
    obj
        Any picklable object; its size may differ from rank to rank.
    object_gather_list
        On ``dst``, a list with one entry per rank of the group; None on the other ranks.
    dst
        The global rank that receives; default 0; or ``group_dst``, not both.
    group
        None or ``compat.WORLD`` (the world), a :class:`Group`, or the framework's own group.
    group_dst
        The receiving rank as a rank of ``group`` instead of ``dst`` (keyword-only).

    Returns
    -------
    None

    Notes
    -----
    The byte counts travel first (one all_gather: every rank pads to the largest), then the
    padded bytes in one gather.

    Examples
    --------
    With 2 ranks::

        >>> out = [None, None] if rank == 0 else None
        >>> compat.gather_object(("rank", rank), out, dst=0)
        >>> out
        [('rank', 0), ('rank', 1)]   # rank 0
        None                         # rank 1
    """
    call = _Objects(group)
    root = call.root(dst, "dst", group_dst, "group_dst")
    if call.rank == root:
        _object_list(object_gather_list, "object_gather_list", call.group.size())
    else:
        check_absent(object_gather_list, "object_gather_list", "dst", root, call.rank)
    stream = _dumps(obj, "obj")
    sizes = call.read_sizes(all_gather_into_tensor(call.sizes_tensor([stream.tell()]), call.group))
    largest = max(sizes)
    mine = call.tensor(_writable(stream, largest))
    parts = None
    if call.rank == root:
        parts = [call.adapter.empty((largest,), mine) for _ in call.group.ranks]
    gather(mine, parts, root, call.group)
    if parts is not None and object_gather_list is not None:
        adapter = call.adapter
        object_gather_list[:] = [
            _loads(adapter.bytes_view(part)[:size]) for part, size in zip(parts, sizes, strict=True)
        ]


def scatter_object_list(
    scatter_object_output_list: list[Any],
    scatter_object_input_list: list[Any] | None = None,
    src: int = DEFAULT_ROOT,
    group: Any = None,
    *,
    group_src: int | None = None,
) -> None:
    """Rank ``src`` sends the picklable ``scatter_object_input_list[i]`` to group rank i, which
    receives it in ``scatter_object_output_list[0]`` (as
    ``torch.distributed.scatter_object_list``).

    Warnings
    --------
    This unpickles what ``src`` sends, and unpickling can run arbitrary code: use it only in
    jobs whose ranks you trust.

    Parameters
    ----------
    scatter_object_output_list
        A non-empty list; its first entry is replaced by this rank's object.
    scatter_object_input_list
        On ``src``, one picklable object per rank of the group; ignored on the other ranks
        (as in torch).
    src
        The global rank that sends; default 0; or ``group_src``, not both.
    group
        None or ``compat.WORLD`` (the world), a :class:`Group`, or the framework's own group.
    group_src
        The sending rank as a rank of ``group`` instead of ``src`` (keyword-only).

    Returns
    -------
    None

    Notes
    -----
    ``src`` broadcasts the byte counts, then scatters the bytes padded to the largest.

    Examples
    --------
    With 2 ranks::

        >>> out = [None]
        >>> compat.scatter_object_list(out, ["foo", {1: 2}] if rank == 0 else None, src=0)
        >>> out
        ['foo']    # rank 0
        [{1: 2}]   # rank 1
    """
    call = _Objects(group)
    _object_list(scatter_object_output_list, "scatter_object_output_list")
    if not scatter_object_output_list:
        raise ValueError(
            "scatter_object_output_list: expected a list of at least 1 entry (the first one "
            "receives this rank's object); got an empty list"
        )
    root = call.root(src, "src", group_src, "group_src")
    pieces = _pickled_on_root(call, root, scatter_object_input_list)
    if pieces is None:
        sizes = call.tensor(bytes(_SIZE_BYTES * call.group.size()))
    else:
        sizes = call.sizes_tensor([piece.tell() for piece in pieces])
    broadcast(sizes, root, call.group)
    counts = call.read_sizes(sizes)
    largest = max(counts)
    parts = None if pieces is None else [call.tensor(_writable(p, largest)) for p in pieces]
    out = call.adapter.empty((largest,), sizes)
    scatter(out, parts, root, call.group)
    size = counts[call.group.group_rank(call.rank)]
    scatter_object_output_list[0] = _loads(call.adapter.bytes_view(out)[:size])


def _pickled_on_root(call: _Objects, root: int, inputs: object) -> list[io.BytesIO] | None:
    """On the root, ``scatter_object_input_list`` checked (one object per rank of the group) and
    pickled, one piece per rank; None elsewhere (the list is ignored there, as in torch)."""
    if call.rank != root:
        return None
    checked = _object_list(inputs, "scatter_object_input_list", call.group.size())
    return [_dumps(obj, f"scatter_object_input_list[{i}]") for i, obj in enumerate(checked)]


def send_object_list(
    object_list: list[Any],
    dst: int | None = None,
    group: Any = None,
    device: Any = None,
    *,
    group_dst: int | None = None,
    use_batch: bool = False,
) -> None:
    """Send the picklable objects of ``object_list`` to rank ``dst``, which receives them with
    :func:`recv_object_list` (as ``torch.distributed.send_object_list``; blocking).

    Warnings
    --------
    The receiver unpickles what this rank sends, and unpickling can run arbitrary code: use it
    only in jobs whose ranks you trust.

    Parameters
    ----------
    object_list
        The objects to send; the receiver passes a list of the same length. An empty list (on
        both sides) moves nothing.
    dst
        The global rank that receives (or ``group_dst``; exactly one).
    group
        None or ``compat.WORLD`` (the world), a :class:`Group`, or the framework's own group.
    device
        Where the byte tensors live (torch's ``device``); default the CPU for Gloo and MCCL.
    group_dst
        The receiving rank as a rank of ``group`` instead of ``dst`` (keyword-only).
    use_batch
        torch sends through ``batch_isend_irecv`` then; accepted for torch's signature, compat
        sends the same way either way.

    Returns
    -------
    None

    Examples
    --------
    With 2 ranks::

        >>> if rank == 0:
        ...     compat.send_object_list([{"step": 7}, "ckpt.pt"], dst=1)
        ... else:
        ...     objects = [None, None]
        ...     compat.recv_object_list(objects, src=0)
        ...     objects
        1                                    # rank 1 (recv_object_list returns the sender)
        [{'step': 7}, 'ckpt.pt']             # rank 1
    """
    call = _Objects(group, device)
    _object_list(object_list, "object_list")
    peer = call.peer(dst, "dst", group_dst, "group_dst")
    check_bool(use_batch, "use_batch")
    stream, sizes = _dumps_all(object_list, "object_list")
    send(call.sizes_tensor(sizes), peer, call.group)
    send(call.tensor(_writable(stream)), peer, call.group)


def recv_object_list(
    object_list: list[Any],
    src: int | None = None,
    group: Any = None,
    device: Any = None,
    *,
    group_src: int | None = None,
    use_batch: bool = False,
) -> int:
    """Receive into ``object_list`` the objects that rank ``src`` sends with
    :func:`send_object_list` (as ``torch.distributed.recv_object_list``; blocking).

    Warnings
    --------
    This unpickles what ``src`` sends, and unpickling can run arbitrary code: use it only in
    jobs whose ranks you trust.

    Parameters
    ----------
    object_list
        A list as long as the sender's; its entries are replaced.
    src
        The global rank that sends (or ``group_src``; exactly one).
    group
        None or ``compat.WORLD`` (the world), a :class:`Group`, or the framework's own group.
    device
        Where the byte tensors live (torch's ``device``); default the CPU for Gloo and MCCL.
    group_src
        The sending rank as a rank of ``group`` instead of ``src`` (keyword-only).
    use_batch
        Accepted for torch's signature; compat receives the same way either way.

    Returns
    -------
    int
        The sender's global rank (as torch returns it).

    Examples
    --------
    See :func:`send_object_list`.
    """
    call = _Objects(group, device)
    _object_list(object_list, "object_list")
    peer = call.peer(src, "src", group_src, "group_src")
    check_bool(use_batch, "use_batch")
    sizes = call.tensor(bytes(_SIZE_BYTES * len(object_list)))
    recv(sizes, peer, call.group)
    counts = call.read_sizes(sizes)
    data = call.adapter.empty((sum(counts),), sizes)
    recv(data, peer, call.group)
    object_list[:] = _split(call.adapter.bytes_view(data), counts)
    return peer
