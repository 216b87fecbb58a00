"""Point to point: blocking ``send``/``recv``, asynchronous ``isend``/``irecv``, and batches of
them (``P2POp`` + ``batch_isend_irecv``), with torch.distributed's semantics.

Ranks (``dst``, ``src``, ``peer``) are global ranks, also with a ``group``. Every argument is
checked on the calling rank before any communication. Views are staged as for the collectives
(:mod:`compat.layout`): a send reads the view's elements; a receive into a view writes exactly
them, for ``irecv`` in ``Work.wait()``. What runs on each backend is
``mapping_tables/capabilities.toml``'s choice: native on Gloo and NCCL; on MCCL (MindSpore on CPU),
whose irecv blocks in issue order and which has no batch kernel, the receive runs in
``Work.wait()`` (:func:`compat.algorithms.deferred_recv`) while sends go out at once, so a ring
of irecv-then-isend on every rank does not deadlock.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from compat import algorithms
from compat._checks import describe
from compat.adapter import P2PSpec, Tensor
from compat.collectives import Call
from compat.layout import Staging
from compat.types import Group, Work


def _check_point_to_point(
    call: Call, tensor: Tensor, peer: object, param: str, tensor_param: str = "tensor"
) -> int:
    call.checks.tensor(tensor, tensor_param)
    rank = call.checks.peer(peer, param, call.group)
    if rank == call.state.rank:
        raise ValueError(
            f"{param}: expected a rank other than this rank ({call.state.rank}); got {rank}"
        )
    call.checks.dtype(call.adapter.dtype(tensor), tensor_param)
    return rank


def send(tensor: Tensor, dst: int, group: Group | None = None) -> None:
    """Send ``tensor`` to global rank ``dst``; returns once it has been sent.

    Parameters
    ----------
    tensor
        The data; the receiver passes a tensor of the same shape and dtype.
    dst
        The destination's global rank (a member of ``group``, not this rank).
    group
        None or ``compat.WORLD`` (the world), a :class:`Group`, or the framework's own group.

    Examples
    --------
    With 2 ranks::

        >>> t = torch.tensor([1., 2.]) if rank == 0 else torch.zeros(2)
        >>> compat.send(t, dst=1) if rank == 0 else compat.recv(t, src=0)
        >>> t
        tensor([1., 2.])   # ranks 0 and 1
    """
    call = Call(group)
    rank = _check_point_to_point(call, tensor, dst, "dst")
    source = call.read(tensor)
    # An empty tensor moves nothing: the receiver knows its size too.
    call.issue_blocking("send", source, source, rank, empty=call.adapter.numel(tensor) == 0)


def recv(tensor: Tensor, src: int, group: Group | None = None) -> None:
    """Receive into ``tensor`` what global rank ``src`` sends; returns once it has arrived.

    Parameters
    ----------
    tensor
        Receives the data (shape and dtype of the sender's tensor); may be a view.
    src
        The source's global rank (a member of ``group``, not this rank).
    group
        As in :func:`send`.

    Examples
    --------
    See :func:`send`.
    """
    call = Call(group)
    rank = _check_point_to_point(call, tensor, src, "src")
    target = call.write(tensor)
    # Receives from src issued earlier by irecv and not yet run take their messages first.
    algorithms.settle_deferred_recvs(call.adapter, rank, call.group.handle)
    call.issue_blocking("recv", target, target, rank, empty=call.adapter.numel(tensor) == 0)


def isend(tensor: Tensor, dst: int, group: Group | None = None) -> Work:
    """Start sending ``tensor`` to global rank ``dst`` and return a :class:`Work` at once.

    Leave ``tensor`` unchanged until ``Work.wait()`` has returned (as in torch; a view is sent
    from a copy taken now).

    Parameters
    ----------
    tensor, dst, group
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
    call = Call(group)
    rank = _check_point_to_point(call, tensor, dst, "dst")
    if call.adapter.numel(tensor) == 0:
        return Work()
    source = call.read(tensor)
    return Work([call.state.implementation("isend", source)(source, rank, call.group.handle)])


def irecv(tensor: Tensor, src: int, group: Group | None = None) -> Work:
    """Start receiving into ``tensor`` what global rank ``src`` sends; return a :class:`Work`.

    ``tensor`` holds the data once ``Work.wait()`` has returned (a view too: the data is copied
    into it then). Receives from one rank take its messages in the order it sent them.

    Parameters
    ----------
    tensor, src, group
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
    call = Call(group)
    rank = _check_point_to_point(call, tensor, src, "src")
    if call.adapter.numel(tensor) == 0:
        return Work()
    target = call.write(tensor)
    handle = call.state.implementation("irecv", target)(target, rank, call.group.handle)
    return Work([handle], call.finish)


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

    Examples
    --------
    >>> ops = [compat.P2POp(compat.isend, send_buffer, (rank + 1) % world),
    ...        compat.P2POp(compat.irecv, recv_buffer, (rank - 1) % world)]
    """

    __slots__ = ("direction", "group", "op", "peer", "tensor")

    def __init__(self, op: object, tensor: Tensor, peer: int, group: Group | None = None) -> None:
        #: ``"isend"`` or ``"irecv"``
        self.direction = _direction(op, "op")
        self.op = op
        self.tensor = tensor
        self.peer = peer
        self.group = group

    def __repr__(self) -> str:
        return f"compat.P2POp({self.direction}, peer={self.peer!r}, group={self.group!r})"


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
    ops = _op_list(p2p_op_list)
    call = Call(None)
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
        peer = _check_point_to_point(call, op.tensor, op.peer, f"{where}.peer", f"{where}.tensor")
        checked.append((direction, op.tensor, peer))
    assert group is not None
    adapter = call.adapter
    works = [Work() for _ in checked]  # an op of an empty tensor moves nothing
    specs: list[P2PSpec] = []
    stagings: list[tuple[int, Staging]] = []
    for index, (direction, tensor, peer) in enumerate(checked):
        if adapter.numel(tensor) == 0:
            continue
        staging = Staging(adapter)
        staged = staging.read(tensor) if direction == "isend" else staging.write(tensor)
        specs.append((direction, staged, peer))
        stagings.append((index, staging))
    if specs:
        run = call.state.implementation("batch_isend_irecv", specs[0][1])
        handles = run(specs, group.handle)
        for position, (index, staging) in enumerate(stagings):
            # One handle per op, or one for the whole batch (NCCL and HCCL coalesce).
            mine = [handles[position]] if len(handles) == len(specs) else handles
            works[index] = Work(mine, staging.finish)
    return works


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
