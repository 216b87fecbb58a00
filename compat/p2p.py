"""Point to point: blocking ``send``/``recv``, asynchronous ``isend``/``irecv``, and batches of
them (``P2POp`` + ``batch_isend_irecv``), with torch.distributed's semantics.

The signatures are torch 2.13's. Ranks (``dst``, ``src``, ``peer``) are global ranks, also with
a ``group``; ``group_dst``, ``group_src`` and ``group_peer`` give the peer as a rank of the group
instead (exactly one of the two). A receive needs its source (torch's ``src=None``, any source, is
refused). ``tag`` matches a send with its receive on torch; MindSpore's tag is a reserved
parameter, so there any tag but 0 raises :class:`compat.UnsupportedError`. Every argument is
checked on the calling rank before any communication. Views are staged as for the collectives
(:mod:`compat.core.layout`): a send reads the view's elements; a receive into a view writes exactly
them, for ``irecv`` in ``Work.wait()``. What runs on each backend is
``mapping_tables/capabilities.toml``'s choice: native on Gloo and NCCL; on MCCL (MindSpore on CPU),
whose irecv blocks in issue order and which has no batch kernel, the receive runs in
``Work.wait()`` (:func:`compat.algorithms.deferred_recv`) while sends go out at once, so a ring
of irecv-then-isend on every rank does not deadlock.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import cast

from compat import algorithms
from compat.base.adapter import P2PSpec, Tensor
from compat.base.errors import UnsupportedError
from compat.base.types import Group, Handle, Work
from compat.core import common, state
from compat.core.call import Call
from compat.core.layout import Staging
from compat.core.values import check_int, describe

#: The largest ``tag``: torch passes it to the backend as a C int.
MAX_TAG = 2**31 - 1


def _check_point_to_point(
    call: Call,
    tensor: Tensor,
    peer: object,
    param: str,
    group_peer: object,
    group_param: str,
    tag: object,
    tag_param: str = "tag",
    tensor_param: str = "tensor",
) -> tuple[int, int]:
    """The peer's global rank (given as ``param``, a global rank, or ``group_param``, a rank of
    the call's group: exactly one) and the tag, both checked."""
    call.checks.tensor(tensor, tensor_param)
    rank = call.checks.root(peer, param, group_peer, group_param, call.group)
    if rank == call.group.own_global_rank(call.state.rank):
        if group_peer is None:
            raise ValueError(f"{param}: expected a rank other than this rank ({rank}); got {rank}")
        raise ValueError(
            f"{group_param}: expected a rank other than this rank's "
            f"({call.group.group_rank(rank)} in the group); got {group_peer}"
        )
    # tag=0, the common case, calls nothing.
    checked = 0 if type(tag) is int and tag == 0 else _check_tag(call, tag, tag_param)
    call.moved(call.adapter.dtype(tensor), tensor_param)
    return rank, checked


def _check_tag(call: Call, tag: object, param: str) -> int:
    """``tag``: an int from 0 to MAX_TAG, other than 0 only where the framework matches by tag."""
    value = check_int(tag, param)
    if not 0 <= value <= MAX_TAG:
        raise ValueError(f"{param}: expected an int from 0 to {MAX_TAG}; got {value}")
    reason = call.adapter.p2p_tag_unsupported
    if value != 0 and reason is not None:
        raise UnsupportedError(
            f"{param}: expected 0 on {call.state.framework} ({reason}); got {value}"
        )
    return value


def _source(src: object, group_src: object) -> None:
    """recv and irecv need their source: compat cannot receive from any rank (torch can)."""
    if src is None and group_src is None:
        raise ValueError(
            "src: expected the source's global rank, or group_src (its rank in the group); got "
            "neither (receiving from any source, torch's src=None, is not supported by compat)"
        )


def send(
    tensor: Tensor,
    dst: int | None = None,
    group: Group | None = None,
    tag: int = 0,
    group_dst: int | None = None,
) -> None:
    """Send ``tensor`` to global rank ``dst`` (or group rank ``group_dst``); returns once it has
    been sent (torch's signature).

    Parameters
    ----------
    tensor
        The data; the receiver passes a tensor of the same shape and dtype.
    dst
        The destination's global rank (a member of ``group``, not this rank).
    group
        None or ``compat.WORLD`` (the world), a :class:`Group`, or the framework's own group.
    tag
        Matches this message with the receive that passes the same tag: an int from 0 to
        2**31 - 1. torch only; on MindSpore any tag but 0 raises UnsupportedError (MindSpore's
        tag is a reserved parameter).
    group_dst
        The destination as a rank of ``group`` instead of ``dst``: give exactly one of the two.

    Examples
    --------
    With 2 ranks::

        >>> t = torch.tensor([1., 2.]) if rank == 0 else torch.zeros(2)
        >>> compat.send(t, dst=1) if rank == 0 else compat.recv(t, src=0)
        >>> t
        tensor([1., 2.])   # ranks 0 and 1
    """
    run = common.point_to_point("send", tensor, dst, group, tag, group_dst)
    if run is not None:
        run(tensor, dst, None, 0)
        return
    call = Call(group)
    rank, tag = _check_point_to_point(call, tensor, dst, "dst", group_dst, "group_dst", tag)
    source = call.read(tensor)
    # An empty tensor moves nothing: the receiver knows its size too.
    call.issue_blocking(
        "send", source, source, rank, tag=tag, empty=call.adapter.numel(tensor) == 0
    )


def recv(
    tensor: Tensor,
    src: int | None = None,
    group: Group | None = None,
    tag: int = 0,
    group_src: int | None = None,
) -> int:
    """Receive into ``tensor`` what global rank ``src`` (or group rank ``group_src``) sends;
    returns the source's global rank once it has arrived (torch's signature and result).

    Parameters
    ----------
    tensor
        Receives the data (shape and dtype of the sender's tensor); may be a view.
    src
        The source's global rank (a member of ``group``, not this rank). Unlike torch, compat
        needs the source: ``src`` or ``group_src``.
    group, tag
        As in :func:`send`.
    group_src
        The source as a rank of ``group`` instead of ``src``: give exactly one of the two.

    Returns
    -------
    int
        The source's global rank.

    Examples
    --------
    See :func:`send`.
    """
    run = common.point_to_point("recv", tensor, src, group, tag, group_src)
    if run is not None and src is not None:  # a common call's src is an int: for the typing
        # Receives from src issued earlier by irecv and not yet run take their messages first.
        algorithms.settle_deferred_recvs(state.current().adapter, src, None)
        run(tensor, src, None, 0)
        return src
    call = Call(group)
    _source(src, group_src)
    rank, tag = _check_point_to_point(call, tensor, src, "src", group_src, "group_src", tag)
    target = call.write(tensor)
    # Receives from src issued earlier by irecv and not yet run take their messages first.
    algorithms.settle_deferred_recvs(call.adapter, rank, call.group.handle)
    call.issue_blocking(
        "recv", target, target, rank, tag=tag, empty=call.adapter.numel(tensor) == 0
    )
    return rank


def isend(
    tensor: Tensor,
    dst: int | None = None,
    group: Group | None = None,
    tag: int = 0,
    group_dst: int | None = None,
) -> Work:
    """Start sending ``tensor`` to global rank ``dst`` (or group rank ``group_dst``) and return
    a :class:`Work` at once (torch's signature).

    Leave ``tensor`` unchanged until ``Work.wait()`` has returned (as in torch; a view is sent
    from a copy taken now).

    Parameters
    ----------
    tensor, dst, group, tag, group_dst
        As in :func:`send`.

    Returns
    -------
    Work

    Examples
    --------
    A ring with 3 ranks (each sends to the next, receives from the previous)::

        >>> out = torch.zeros(2)
        >>> works = [compat.isend(torch.full((2,), float(rank)), (rank + 1) % 3),
        ...          compat.irecv(out, (rank - 1) % 3)]
        >>> for work in works:
        ...     work.wait()
        >>> out
        tensor([2., 2.])   # rank 0
        tensor([0., 0.])   # rank 1
        tensor([1., 1.])   # rank 2
    """
    run = common.point_to_point("isend", tensor, dst, group, tag, group_dst)
    if run is not None:
        sent = Work((run(tensor, dst, None, 0),))
        sent._result = [tensor]
        return sent
    call = Call(group)
    rank, tag = _check_point_to_point(call, tensor, dst, "dst", group_dst, "group_dst", tag)
    if call.adapter.numel(tensor) == 0:
        return with_work_result(Work(), tensor)
    source = call.read(tensor)
    run = call.state.implementation("isend", source, group=call.group.handle)
    return with_work_result(Work([run(source, rank, call.group.handle, tag)]), tensor)


def irecv(
    tensor: Tensor,
    src: int | None = None,
    group: Group | None = None,
    tag: int = 0,
    group_src: int | None = None,
) -> Work:
    """Start receiving into ``tensor`` what global rank ``src`` (or group rank ``group_src``)
    sends; return a :class:`Work` (torch's signature).

    ``tensor`` holds the data once ``Work.wait()`` has returned (a view too: the data is copied
    into it then). Receives from one rank take its messages in the order it sent them (among
    those of one tag).

    Parameters
    ----------
    tensor, src, group, tag, group_src
        As in :func:`recv`.

    Returns
    -------
    Work

    Examples
    --------
    See :func:`isend`. With 2 ranks, both receiving first::

        >>> out = torch.zeros(2)
        >>> work = compat.irecv(out, 1 - rank)
        >>> compat.isend(torch.full((2,), rank + 1.), 1 - rank).wait()
        >>> work.wait()
        >>> out
        tensor([2., 2.])   # rank 0
        tensor([1., 1.])   # rank 1
    """
    run = common.point_to_point("irecv", tensor, src, group, tag, group_src)
    if run is not None:
        received = Work((run(tensor, src, None, 0),))
        received._result = [tensor]
        return received
    call = Call(group)
    _source(src, group_src)
    rank, tag = _check_point_to_point(call, tensor, src, "src", group_src, "group_src", tag)
    if call.adapter.numel(tensor) == 0:
        return with_work_result(Work(), tensor)
    target = call.write(tensor)
    run = call.state.implementation("irecv", target, group=call.group.handle)
    handle = run(target, rank, call.group.handle, tag)
    return with_work_result(Work([handle], call.finish), tensor)


#: Modules whose own isend/irecv P2POp accepts as its ``op`` (those already imported).
_FRAMEWORK_P2P_MODULES = (
    "torch.distributed",
    "mindspore.mint.distributed",
    "mindspore.ops.communication",
    "mindspore.communication.comm_func",
)


def _direction(op: object, param: str) -> str:
    """``"isend"`` or ``"irecv"``: what ``op`` (compat's or a framework's function) does."""
    if op is isend:
        return "isend"
    if op is irecv:
        return "irecv"
    for name in _FRAMEWORK_P2P_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            for direction in ("isend", "irecv"):
                if op is getattr(module, direction, None):
                    return direction
    given = (
        f"the function {op.__module__}.{op.__qualname__}"
        if callable(op) and hasattr(op, "__qualname__")
        else describe(op)
    )
    raise ValueError(
        f"{param}: expected compat.isend or compat.irecv (or torch.distributed's or "
        f"mindspore.mint.distributed's isend/irecv); got {given}"
    )


class P2POp:
    """One send or receive of a :func:`batch_isend_irecv` (torch's ``P2POp``).

    Parameters
    ----------
    op
        :func:`compat.isend` or :func:`compat.irecv` (``torch.distributed.isend``/``irecv`` and
        ``mindspore.mint.distributed.isend``/``irecv`` are taken as the same); anything else is
        a ValueError here.
    tensor
        The data to send, or the tensor that receives.
    peer
        The other side's global rank.
    group
        As in :func:`send`; every op of one batch uses the same group.
    tag
        As in :func:`send` (the send and the receive of a message pass the same tag).
    group_peer
        The other side as a rank of ``group`` instead of ``peer``: give exactly one of the two.

    The arguments other than ``op`` are checked by :func:`batch_isend_irecv`, before any op of
    the batch is issued.

    Examples
    --------
    >>> ops = [compat.P2POp(compat.isend, send_buffer, (rank + 1) % world),
    ...        compat.P2POp(compat.irecv, recv_buffer, (rank - 1) % world)]
    """

    __slots__ = ("direction", "group", "group_peer", "op", "peer", "tag", "tensor")

    def __init__(
        self,
        op: object,
        tensor: Tensor,
        peer: int | None = None,
        group: Group | None = None,
        tag: int = 0,
        group_peer: int | None = None,
    ) -> None:
        #: ``"isend"`` or ``"irecv"``
        self.direction = _direction(op, "op")
        self.op = op
        self.tensor = tensor
        self.peer = peer
        self.group = group
        self.tag = tag
        self.group_peer = group_peer

    def __repr__(self) -> str:
        given = self.group_peer is not None
        peer = f"group_peer={self.group_peer!r}" if given else f"peer={self.peer!r}"
        tag = f", tag={self.tag!r}" if self.tag != 0 else ""
        return f"compat.P2POp({self.direction}, {peer}, group={self.group!r}{tag})"


def batch_isend_irecv(p2p_op_list: list[P2POp]) -> list[Work]:
    """Issue every send and receive of ``p2p_op_list`` and return one :class:`Work` per op, in
    order (torch's ``batch_isend_irecv``). Each receiving op's tensor holds its data once its
    Work's ``wait()`` has returned.

    Every op is checked before any is issued. Ops may go in any order on each rank (Megatron's
    pipeline exchange sends and receives both ways at once): on Gloo/NCCL they run as one
    native batch; on MCCL every send is issued at once and each receive runs in its Work's
    ``wait()`` (capabilities.toml), so no order of the ops deadlocks.

    Parameters
    ----------
    p2p_op_list
        A non-empty list of :class:`P2POp` (torch's ``P2POp`` objects are taken too), all with
        the same group.

    Returns
    -------
    list of Work

    Examples
    --------
    With 2 ranks, each sending to and receiving from the other::

        >>> out = torch.zeros(2)
        >>> works = compat.batch_isend_irecv([
        ...     compat.P2POp(compat.irecv, out, 1 - rank),
        ...     compat.P2POp(compat.isend, torch.full((2,), rank + 1.), 1 - rank)])
        >>> for work in works:
        ...     work.wait()
        >>> out
        tensor([2., 2.])   # rank 0
        tensor([1., 1.])   # rank 1
    """
    current = state.current()
    plain = _common_batch(current, p2p_op_list)
    if plain is not None:
        ops, dtype = plain
        run = current.world_implementation("batch_isend_irecv", ops[0][1], dtype)
        done = run(ops, current.world.handle)
        return _batch_works(done, [op[1] for op in ops], range(len(ops)), [None] * len(ops))
    call = Call(None)
    group, checked = _checked_batch(call, _op_list(p2p_op_list))
    specs: list[P2PSpec] = []
    moving, finishes = [], []
    for index, (direction, tensor, peer, tag) in enumerate(checked):
        if call.adapter.numel(tensor) == 0:  # an op of an empty tensor moves nothing
            continue
        dtype = call.adapter.dtype(tensor)
        staging = Staging(call.adapter, dtype in call.checks.as_bytes, dtype in call.checks.as_real)
        staged = staging.read(tensor) if direction == "isend" else staging.write(tensor)
        specs.append((direction, staged, peer, tag))
        moving.append(index)
        finishes.append(staging.finish)
    handles: list[Handle] = []
    if specs:
        run = call.state.implementation("batch_isend_irecv", specs[0][1], group=group.handle)
        handles = run(specs, group.handle)
    return _batch_works(handles, [op[1] for op in checked], moving, finishes)


def _checked_batch(call: Call, ops: Sequence[P2POp]) -> tuple[Group, list[P2PSpec]]:
    """Every op of a batch checked before any is issued: their group (one for all) and each as
    (direction, the user's tensor, the peer's global rank, tag)."""
    checks = call.checks
    group: Group | None = None
    checked: list[P2PSpec] = []
    for index, op in enumerate(ops):
        where = f"p2p_op_list[{index}]"
        direction = _direction(op.op, f"{where}.op") if not isinstance(op, P2POp) else op.direction
        op_group = checks.group(op.group, f"{where}.group")
        if group is None:
            group = call.group = op_group
        elif (op_group.ranks, op_group.handle) != (group.ranks, group.handle):
            raise ValueError(
                f"{where}.group: expected the group of p2p_op_list[0] (every op of a batch uses "
                f"one group), ranks {list(group.ranks)}; got ranks {list(op_group.ranks)}"
            )
        # torch's own P2POp holds both peer (global) and group_peer, resolved from either.
        group_peer = op.group_peer if isinstance(op, P2POp) else None
        peer, tag = _check_point_to_point(
            call, op.tensor, op.peer, f"{where}.peer", group_peer, f"{where}.group_peer",
            getattr(op, "tag", 0), f"{where}.tag", f"{where}.tensor",
        )  # fmt: skip
        checked.append((direction, op.tensor, peer, tag))
    assert group is not None
    return group, checked


def _batch_works(
    handles: list[Handle],
    tensors: list[Tensor],
    moving: Sequence[int],
    finishes: Sequence[Callable[[], None] | None],
) -> list[Work]:
    """A batch's result, one Work per op of ``tensors``: for each op that moves data (the
    indices ``moving``; an op of an empty tensor moves nothing) its handle and its finish (which
    copies a staged receive back). Where the backend returned one handle for the batch (it
    coalesces: NCCL, HCCL), one Work for the whole batch, as torch returns: it waits for every
    op and then runs every finish."""
    if len(handles) != len(moving):
        kept = [finish for finish in finishes if finish is not None]

        def finish_all() -> None:
            for finish in kept:
                finish()

        return [with_work_result(Work(handles, finish_all if kept else None), *tensors)]
    works = [Work() for _ in tensors]
    for index, handle, finish in zip(moving, handles, finishes, strict=True):
        works[index] = Work([handle], finish)
    for work, tensor in zip(works, tensors, strict=True):
        work._result = [tensor]
    return works


def with_work_result(work: Work, *tensors: Tensor) -> Work:
    """``work`` knowing the tensors it sends or receives into (torch's ``Work.result()``)."""
    work._result = list(tensors)
    return work


def _common_batch(current: state.State, value: object) -> tuple[list[P2PSpec], str] | None:
    """The ops of ``value`` and its first tensor's dtype where a batch is the common case:
    compat's own P2POp objects, each as :meth:`compat.core.checks.Checks.plain_point_to_point`
    takes a point-to-point call (on the world, another rank's global rank, tag 0, a dense
    non-empty tensor), so that nothing is staged and no message is built, as compat's Python
    runs cold right after a collective. None: the general path, which says what is wrong."""
    if type(value) is not list or not value:
        return None
    plain_point_to_point = current.checks.plain_point_to_point
    specs: list[P2PSpec] = []
    dtypes = []
    for op in value:
        if type(op) is not P2POp:
            return None
        dtype = plain_point_to_point(op.tensor, op.peer, op.group, op.tag, op.group_peer)
        if dtype is None:
            return None
        dtypes.append(dtype)
        specs.append((op.direction, op.tensor, cast(int, op.peer), 0))  # an int: checked
    return specs, dtypes[0]


def _op_list(value: object) -> Sequence[P2POp]:
    """``p2p_op_list`` as a list of P2POp (compat's, or a framework's with the same fields)."""
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            "p2p_op_list: expected a non-empty list of compat.P2POp; got " + describe(value)
        )
    for index, op in enumerate(value):
        if not isinstance(op, P2POp) and not (
            type(op).__name__ == "P2POp"
            and all(hasattr(op, field) for field in ("op", "tensor", "peer", "group"))
        ):
            raise TypeError(
                f"p2p_op_list[{index}]: expected a compat.P2POp (or torch's P2POp); got "
                f"{describe(op)}"
            )
    return value
