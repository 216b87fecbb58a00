"""Collectives through shared memory (ranks of one host), in rounds of the group's window.

The data goes through memory every rank of the group maps (compat.transport.shared_memory); the
ranks wait for each other once per round of at most a slot's bytes. The capability table chooses
these only for a group that has a window (one_host): its ranks on this host, its tensors in host
memory. Each completes before returning: with ``async_op`` the Work is already complete.
"""

from __future__ import annotations

from compat.algorithms.common import tensor_form
from compat.base.adapter import Adapter, GroupHandle, Tensor
from compat.base.errors import UnsupportedError
from compat.base.types import Handle, ReduceOp, Work
from compat.transport import shared_memory
from compat.transport.shared_memory import SharedWindow


def group_window(adapter: Adapter, group: GroupHandle, doing: str) -> SharedWindow:
    """``group``'s window, named to be ``doing`` a collective (for an error that names it)."""
    found = shared_memory.window(adapter, group)
    if found is not None:
        found.doing = doing
    if found is None:
        raise UnsupportedError(
            "a shared-memory algorithm: this group has no shared-memory window (its ranks on "
            "several hosts, one rank, /dev/shm refused a file, or COMPAT_SHARED_MEMORY=0); the "
            "capability table chooses it only where the group has one"
        )
    return found


class FlatViews:
    """The 1-d tensors one shared-memory call reads and writes: flat views of the caller's
    tensors, else of dense copies (a view that is not contiguous). The copies live until the
    call is done (a flat view need not hold on to the memory it views: MindSpore's), and those
    of written tensors are then copied back into exactly the caller's elements."""

    def __init__(self, adapter: Adapter) -> None:
        self._adapter = adapter
        self._copies: list[tuple[Tensor, Tensor, bool]] = []  # (caller's, copy, written)

    def source(self, tensor: Tensor) -> Tensor:
        """A 1-d tensor over ``tensor``'s elements, to read."""
        return self._flat(tensor, False)

    def target(self, tensor: Tensor) -> Tensor:
        """A 1-d tensor whose elements end up in ``tensor`` once :meth:`done`."""
        return self._flat(tensor, True)

    def _flat(self, tensor: Tensor, written: bool) -> Tensor:
        flat = self._adapter.flat_view(tensor)
        if flat is not None:
            return flat
        copy = self._adapter.clone(tensor)
        self._copies.append((tensor, copy, written))
        return _flat(self._adapter, copy)

    def done(self, async_op: bool) -> Handle | None:
        """Copy the written copies back; the call's result (it has completed)."""
        for tensor, copy, written in self._copies:
            if written:
                self._adapter.copy_(tensor, copy)
        self._copies = []
        return Work() if async_op else None


def _flat(adapter: Adapter, dense: Tensor) -> Tensor:
    flat = adapter.flat_view(dense)
    if flat is None:
        raise UnsupportedError(
            f"a shared-memory algorithm: no flat view of a {adapter.dtype(dense)} tensor on "
            f"{adapter.device(dense)}"
        )
    return flat


def _chunks(adapter: Adapter, flat: Tensor, step: int) -> list[Tensor]:
    """``flat`` cut into consecutive pieces of ``step`` elements (the last one shorter)."""
    total = adapter.numel(flat)
    if not total:
        return []
    return adapter.parts(flat, [min(step, total - start) for start in range(0, total, step)])


def _step(adapter: Adapter, like: Tensor, room: int) -> int:
    """The elements of ``like``'s dtype that ``room`` bytes hold."""
    if not adapter.numel(like):
        like = adapter.empty((1,), like)
    return room // (adapter.nbytes(like) // adapter.numel(like))


def shared_memory_all_reduce(
    adapter: Adapter, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_reduce through shared memory: round by round each rank writes a piece of its tensor
    into its slot and, once every rank has (a barrier), reduces every rank's piece, in group-rank
    order, into its own tensor. Every rank computes the same reduction in the same order: every
    rank ends with the same bits, for every op (AVG: the sum divided by the group's size)."""
    window = group_window(adapter, group, "all_reduce")
    views = FlatViews(adapter)
    flat = views.target(tensor)
    step = _step(adapter, flat, window.region_bytes())
    for piece in _chunks(adapter, flat, step):
        numel = adapter.numel(piece)
        adapter.copy_(window.own(numel, piece), piece)
        slots = window.publish()
        adapter.reduce_into(piece, [window.read(slot, numel, piece) for slot in slots], op)
    return views.done(async_op)


def shared_memory_all_reduce_in_shares(
    adapter: Adapter, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_reduce through shared memory in two rounds a piece, as a reduce_scatter then an
    all_gather: each rank writes a piece of its tensor into its slot; once every rank has, each
    reduces its share of the piece (1/n of it) from every rank's slot, in group-rank order, into
    its slot of the next round; once every rank has, each copies every rank's reduced share into
    its tensor. A rank reads and writes about three pieces where shared_memory_all_reduce's
    reads n + 2 (it reduces the whole piece on every rank): fewer bytes from 3 ranks up, for a
    second round each piece. Every element is reduced once, by one rank: every rank ends with
    the same bits, for every op (AVG: the sum divided by the group's size)."""
    window = group_window(adapter, group, "all_reduce")
    views = FlatViews(adapter)
    flat = views.target(tensor)
    count = window.size
    step = _step(adapter, flat, window.region_bytes())
    itemsize = adapter.nbytes(flat) // max(1, adapter.numel(flat))
    for piece in _chunks(adapter, flat, step):
        numel = adapter.numel(piece)
        adapter.copy_(window.own(numel, piece), piece)
        slots = window.publish()
        bounds = _share_bounds(numel, count, itemsize)
        start, end = bounds[window.me]
        if end > start:
            share = window.own(end - start, piece, start * itemsize)
            sources = [window.read(slot, end - start, piece, start * itemsize) for slot in slots]
            adapter.reduce_into(share, sources, op)
        shares = window.publish()
        parts = adapter.parts(piece, [end - start for start, end in bounds])
        for (start, end), part, slot in zip(bounds, parts, shares, strict=True):
            if end > start:
                adapter.copy_(part, window.read(slot, end - start, piece, start * itemsize))
    return views.done(async_op)


def _share_bounds(numel: int, count: int, itemsize: int) -> list[tuple[int, int]]:
    """``[start, end)`` of each of ``count`` ranks' shares of ``numel`` elements: consecutive,
    each starting on a 64-byte boundary (numpy's loops run at full speed there), the last
    ones possibly empty."""
    align = max(1, 64 // max(1, itemsize))
    per = -(-numel // count)
    per = -(-per // align) * align
    return [(min(numel, r * per), min(numel, (r + 1) * per)) for r in range(count)]


def shared_memory_all_gather(
    adapter: Adapter, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
) -> Handle | None:
    """all_gather through shared memory: round by round each rank writes a piece of its tensor
    into its slot and, once every rank has (a barrier), copies every rank's piece into its output
    (parts of any dim-0 size: the uneven form too; every rank knows every part's size, so all run
    the same rounds)."""
    window = group_window(adapter, group, "all_gather")
    views = FlatViews(adapter)
    source = views.source(tensor)
    targets = [views.target(out) for out in tensor_list]
    step = _step(adapter, source, window.region_bytes())
    sent = _chunks(adapter, source, step)
    received = [_chunks(adapter, target, step) for target in targets]
    for index in range(max(len(pieces) for pieces in received)):
        if index < len(sent):
            adapter.copy_(window.own(adapter.numel(sent[index]), source), sent[index])
        slots = window.publish()
        for slot, pieces in zip(slots, received, strict=True):
            if index < len(pieces):
                piece = pieces[index]
                adapter.copy_(piece, window.read(slot, adapter.numel(piece), piece))
    return views.done(async_op)


shared_memory_all_gather_into_tensor = tensor_form(shared_memory_all_gather)


def _shared_memory_exchange(
    adapter: Adapter, sources: list[Tensor], targets: list[Tensor], window: SharedWindow
) -> None:
    """Every rank's ``sources[p]`` (1-d) into rank p's ``targets[me]`` (1-d), through shared
    memory: a slot holds one region per rank, and round by round each rank writes a piece of each
    peer's part into that peer's region. A rank knows only its own parts' sizes, so each first
    publishes the rounds it needs, and all run the largest number."""
    count, me = window.size, window.me
    like = sources[0]
    region = window.region_bytes(count)
    step = _step(adapter, like, region)
    sent = [
        _chunks(adapter, source, step) if peer != me else [] for peer, source in enumerate(sources)
    ]
    received = [
        _chunks(adapter, target, step) if peer != me else [] for peer, target in enumerate(targets)
    ]
    needed = max(len(pieces) for pieces in (*sent, *received))
    rounds, index = 1, 0
    while index < rounds:
        for peer, pieces in enumerate(sent):
            if index < len(pieces):
                piece = pieces[index]
                adapter.copy_(window.own(adapter.numel(piece), piece, peer * region), piece)
        if index == 0:
            window.write_word(needed)
        slots = window.publish()
        if index == 0:
            rounds = max(window.word(slot) for slot in slots)
        for peer, pieces in enumerate(received):
            if index < len(pieces):
                piece = pieces[index]
                adapter.copy_(
                    piece, window.read(slots[peer], adapter.numel(piece), piece, me * region)
                )
        index += 1
    if adapter.numel(targets[me]):
        adapter.copy_(targets[me], sources[me])


def shared_memory_all_to_all(
    adapter: Adapter,
    output: Tensor,
    tensor: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all_single through shared memory (any split sizes): each rank writes every peer's
    part into that peer's region of its slot, round by round, and reads its own part from every
    peer's slot once all have written (a barrier per round)."""
    window = group_window(adapter, group, "all_to_all_single")
    views = FlatViews(adapter)
    sources, targets = flat_parts(
        adapter, views, output, tensor, output_split_sizes, input_split_sizes
    )
    _shared_memory_exchange(adapter, sources, targets, window)
    return views.done(async_op)


def flat_parts(
    adapter: Adapter,
    views: FlatViews,
    output: Tensor,
    tensor: Tensor,
    output_split_sizes: list[int],
    input_split_sizes: list[int],
) -> tuple[list[Tensor], list[Tensor]]:
    """all_to_all_single's parts: of ``tensor``, to send, and of ``output``, to receive into,
    split by rows of dim 0, each dense (``views`` stages a view and writes it back)."""
    source, target = views.source(tensor), views.target(output)
    rows_in, rows_out = adapter.shape(tensor), adapter.shape(output)
    per_row_in = adapter.numel(tensor) // rows_in[0] if rows_in and rows_in[0] else 0
    per_row_out = adapter.numel(output) // rows_out[0] if rows_out and rows_out[0] else 0
    return (
        adapter.parts(source, [size * per_row_in for size in input_split_sizes]),
        adapter.parts(target, [size * per_row_out for size in output_split_sizes]),
    )


def shared_memory_all_to_all_list(
    adapter: Adapter,
    output_tensor_list: list[Tensor],
    input_tensor_list: list[Tensor],
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """all_to_all through shared memory, as :func:`shared_memory_all_to_all` with each part a
    tensor of its own."""
    window = group_window(adapter, group, "all_to_all")
    views = FlatViews(adapter)
    sources = [views.source(item) for item in input_tensor_list]
    targets = [views.target(item) for item in output_tensor_list]
    _shared_memory_exchange(adapter, sources, targets, window)
    return views.done(async_op)


def _shared_memory_reduce_parts(
    adapter: Adapter,
    parts: list[Tensor],
    target: Tensor | None,
    root: int | None,
    op: ReduceOp,
    window: SharedWindow,
) -> None:
    """Reduce part p (1-d, the same size on every rank) of every rank into rank p's ``target``,
    through shared memory: round by round each rank writes a piece of each part into that part's
    region of its slot, and each rank reduces its own region of every rank's slot, in group-rank
    order. With ``root`` (reduce), the one part is the whole tensor and only ``root`` reduces."""
    count, me = window.size, window.me
    region = window.region_bytes(1 if root is not None else count)
    step = _step(adapter, parts[0], region)
    pieces = [_chunks(adapter, part, step) for part in parts]
    mine = 0 if root is not None else me
    outputs = [] if target is None else _chunks(adapter, target, step)
    for index in range(max(len(chunks) for chunks in pieces)):
        for part, chunks in enumerate(pieces):
            if index < len(chunks):
                piece = chunks[index]
                adapter.copy_(window.own(adapter.numel(piece), piece, part * region), piece)
        slots = window.publish()
        if index < len(outputs):
            out = outputs[index]
            numel = adapter.numel(out)
            sources = [window.read(slot, numel, out, mine * region) for slot in slots]
            adapter.reduce_into(out, sources, op)


def shared_memory_reduce_scatter(
    adapter: Adapter,
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """reduce_scatter through shared memory (parts of any dim-0 size: the uneven form too):
    round by round each rank writes a piece of every part into that part's region of its slot,
    then reduces its own part's pieces from every rank's slot, in group-rank order (every op and
    dtype: a numpy reduction where numpy has the dtype)."""
    window = group_window(adapter, group, "reduce_scatter")
    views = FlatViews(adapter)
    parts = [views.source(item) for item in input_list]
    target = views.target(output)
    _shared_memory_reduce_parts(adapter, parts, target, None, op, window)
    return views.done(async_op)


shared_memory_reduce_scatter_tensor = tensor_form(shared_memory_reduce_scatter)


def shared_memory_reduce(
    adapter: Adapter, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
) -> Handle | None:
    """reduce through shared memory: every rank writes its tensor, round by round, and ``dst``
    reduces every rank's, in group-rank order, into its tensor; the others' are left as they
    were."""
    window = group_window(adapter, group, "reduce")
    root = adapter.group_ranks(group).index(dst)
    views = FlatViews(adapter)
    if window.me == root:
        source = target = views.target(tensor)
    else:
        source, target = views.source(tensor), None
    _shared_memory_reduce_parts(adapter, [source], target, root, op, window)
    return views.done(async_op)


def shared_memory_broadcast(
    adapter: Adapter, tensor: Tensor, src: int, group: GroupHandle, async_op: bool
) -> Handle | None:
    """broadcast through shared memory: round by round ``src`` writes a piece of its tensor into
    its slot, and every other rank copies it from there. The rounds are one-way: ``src`` waits
    for no rank (as a backend's broadcast returns on the root once its sends are out), the others
    for ``src``; ``src`` writes a slot again only once every rank has read it."""
    window = group_window(adapter, group, "broadcast")
    root = adapter.group_ranks(group).index(src)
    views = FlatViews(adapter)
    if window.me == root:
        flat = views.source(tensor)
    else:
        flat = views.target(tensor)
    for piece in _chunks(adapter, flat, _step(adapter, flat, window.region_bytes())):
        numel = adapter.numel(piece)
        if window.me == root:
            adapter.copy_(window.own(numel, piece), piece)
            window.publish(wait_for=())
        else:
            slots = window.publish(wait_for=(root,))
            adapter.copy_(piece, window.read(slots[root], numel, piece))
    return views.done(async_op)


def shared_memory_scatter(
    adapter: Adapter,
    tensor: Tensor,
    scatter_list: list[Tensor] | None,
    src: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """scatter through shared memory: ``src`` writes each rank's part into that rank's region of
    its slot, round by round, and each rank copies its own from there. Every part has
    ``tensor``'s size, so every rank counts the same rounds (as broadcast's). The rounds are
    one-way, as broadcast's: ``src`` waits for no rank, the others for ``src``."""
    window = group_window(adapter, group, "scatter")
    root = adapter.group_ranks(group).index(src)
    views = FlatViews(adapter)
    target = views.target(tensor)
    region = window.region_bytes(window.size)
    step = _step(adapter, target, region)
    pieces = _chunks(adapter, target, step)
    if window.me != root:
        for piece in pieces:
            slots = window.publish(wait_for=(root,))
            numel = adapter.numel(piece)
            adapter.copy_(piece, window.read(slots[root], numel, piece, window.me * region))
    else:
        assert scatter_list is not None  # the root's list, checked by compat.scatter
        parts = [views.source(item) for item in scatter_list]
        _scatter_from_root(adapter, window, parts, step, region, len(pieces))
        if pieces:
            adapter.copy_(target, parts[root])
    return views.done(async_op)


def _scatter_from_root(
    adapter: Adapter,
    window: SharedWindow,
    parts: list[Tensor],
    step: int,
    region: int,
    rounds: int,
) -> None:
    """The root's rounds of :func:`shared_memory_scatter`: in each, a piece of every other rank's
    1-d part (``step`` elements) written into that rank's region of its slot; nobody waited for."""
    sent = [_chunks(adapter, part, step) for part in parts]
    for index in range(rounds):
        for peer, chunks in enumerate(sent):
            if peer != window.me:
                piece = chunks[index]
                adapter.copy_(window.own(adapter.numel(piece), piece, peer * region), piece)
        window.publish(wait_for=())


def shared_memory_gather(
    adapter: Adapter,
    tensor: Tensor,
    gather_list: list[Tensor] | None,
    dst: int,
    group: GroupHandle,
    async_op: bool,
) -> Handle | None:
    """gather through shared memory: every rank writes its tensor into its slot, round by round,
    and ``dst`` copies every rank's from there. Every part has ``tensor``'s size, so every rank
    counts the same rounds. The rounds are one-way: the ranks other than ``dst`` wait for no
    rank (as a backend's gather returns on them once their send is out), ``dst`` for every
    rank."""
    window = group_window(adapter, group, "gather")
    root = adapter.group_ranks(group).index(dst)
    views = FlatViews(adapter)
    source = views.source(tensor)
    step = _step(adapter, source, window.region_bytes())
    pieces = _chunks(adapter, source, step)
    if window.me != root:
        for piece in pieces:
            adapter.copy_(window.own(adapter.numel(piece), piece), piece)
            window.publish(wait_for=())
    else:
        assert gather_list is not None  # the root's list, checked by compat.gather
        targets = [views.target(item) for item in gather_list]
        _gather_at_root(adapter, window, targets, step, len(pieces))
        if pieces:
            adapter.copy_(targets[root], source)
    return views.done(async_op)


def _gather_at_root(
    adapter: Adapter, window: SharedWindow, targets: list[Tensor], step: int, rounds: int
) -> None:
    """The root's rounds of :func:`shared_memory_gather`: in each, once every rank has written
    its slot, a piece (``step`` elements) of every other rank's 1-d part copied from there."""
    received = [_chunks(adapter, target, step) for target in targets]
    for index in range(rounds):
        slots = window.publish()
        for peer, chunks in enumerate(received):
            if peer != window.me:
                piece = chunks[index]
                adapter.copy_(piece, window.read(slots[peer], adapter.numel(piece), piece))


def shared_memory_barrier(
    adapter: Adapter, group: GroupHandle, async_op: bool, device_ids: list[int] | None = None
) -> Handle | None:
    """barrier through shared memory: one round of the group's window with nothing written;
    every rank counts its arrival and waits for every peer's, in memory: no message, so far
    cheaper than the backend's barrier."""
    del device_ids  # compat.barrier passes them to the backend's own call instead
    group_window(adapter, group, "barrier").publish()
    return Work() if async_op else None
