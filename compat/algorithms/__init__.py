"""Algorithms: collectives a backend lacks, or runs slower, built from what it has.

Each function takes the adapter followed by the adapter method's own arguments, so the capability
table (mapping_tables/capabilities.toml, resolved by compat.core.capabilities) can name it in
place of the native call; the reason each is used is written there beside its name. Each runs
asynchronously when asked: the native calls are issued with ``async_op`` and the local step (a
copy, a reduction) runs in ``Work.wait()``. Results are received into buffers of their own and
then copied into the caller's tensors, which may be views.

One module per family; this package names every algorithm, as the table does:

- emulations: padded to equal sizes, list all_gathers, gather/scatter plus a local reduction
- by_size: reduce_scatter as one all_to_all_single, or one all_reduce, plus a local step
- buffered_sends: every rank sends first, then receives (MCCL)
- one_rank: a group of one rank, where nothing moves
- pairwise: point to point between each pair of ranks, straight into the output (Gloo)
- shared_memory: rounds through the group's shared-memory window (ranks of one host)
- channels: the window's point-to-point channels (collectives and point to point)
- monitored_barrier: a barrier that names the ranks that did not arrive
- deferred: receives run when their Work is waited on (MCCL)
- primitives: everything from all_gather, broadcast and all_reduce (MindSpore's ops primitives)

The tensor forms of the list-form algorithms are made by :func:`common.tensor_form`.
"""

from __future__ import annotations

from compat.algorithms.buffered_sends import (
    buffered_send_all_gather,
    buffered_send_all_gather_into_tensor,
    buffered_send_all_reduce,
    buffered_send_all_to_all,
    buffered_send_all_to_all_list,
    buffered_send_reduce_scatter,
    buffered_send_reduce_scatter_tensor,
)
from compat.algorithms.by_size import (
    all_reduce_slice,
    all_reduce_slice_tensor,
    all_to_all_reduce,
    all_to_all_reduce_tensor,
)
from compat.algorithms.channels import (
    shared_memory_batch_isend_irecv,
    shared_memory_irecv,
    shared_memory_isend,
    shared_memory_p2p_all_to_all,
    shared_memory_p2p_all_to_all_list,
    shared_memory_p2p_gather,
    shared_memory_p2p_scatter,
    shared_memory_recv,
    shared_memory_send,
)
from compat.algorithms.common import (
    ALGORITHM_TAG,
    ARRIVAL_TAG,
    tensor_form,
)
from compat.algorithms.deferred import (
    DeferredRecv,
    deferred_recv,
    deferred_sources,
    sends_then_deferred_recvs,
    settle_deferred_recvs,
)
from compat.algorithms.emulations import (
    all_gather_concat,
    all_gather_reduce,
    all_gather_reduce_to_dst,
    concat_all_to_all,
    gather_reduce_to_dst,
    padded_all_gather,
    padded_reduce_scatter,
    reduce_keep_input,
    scatter_reduce,
    scatter_reduce_tensor,
)
from compat.algorithms.monitored_barrier import (
    reported_barrier,
    reported_barrier_in_memory,
    reported_barrier_until_silent,
    shared_memory_monitored_barrier,
)
from compat.algorithms.one_rank import (
    MOST_RANKS,
    group_too_large,
    one_rank_all_gather,
    one_rank_all_gather_into_tensor,
    one_rank_all_reduce,
    one_rank_all_to_all,
    one_rank_all_to_all_single,
    one_rank_barrier,
    one_rank_broadcast,
    one_rank_gather,
    one_rank_reduce,
    one_rank_reduce_scatter,
    one_rank_reduce_scatter_tensor,
    one_rank_scatter,
    ranks_text,
    runs_at_most,
)
from compat.algorithms.pairwise import (
    pairwise_all_gather,
    pairwise_all_gather_into_tensor,
    pairwise_all_gather_reduce,
    pairwise_all_to_all,
    pairwise_all_to_all_list,
)
from compat.algorithms.primitives import (
    all_gather_all_to_all,
    all_gather_all_to_all_list,
    all_gather_barrier,
    all_gather_reduce_scatter,
    all_gather_reduce_scatter_tensor,
    all_gather_to_dst,
    broadcast_scatter,
)
from compat.algorithms.shared_memory import (
    shared_memory_all_gather,
    shared_memory_all_gather_into_tensor,
    shared_memory_all_reduce,
    shared_memory_all_reduce_in_shares,
    shared_memory_all_to_all,
    shared_memory_all_to_all_list,
    shared_memory_barrier,
    shared_memory_broadcast,
    shared_memory_gather,
    shared_memory_reduce,
    shared_memory_reduce_scatter,
    shared_memory_reduce_scatter_tensor,
    shared_memory_scatter,
)

#: The algorithms that hand a call's ReduceOp to the backend's own reduction (the others reduce
#: locally, with the ReduceOp table's functions): where a backend lacks an op, the capability
#: table's ``emulate`` rules must replace them as they replace "native"
#: (compat.core.capabilities.check_contract).
HANDS_OP_TO_BACKEND = frozenset(
    function.__name__
    for function in (
        all_reduce_slice,
        all_reduce_slice_tensor,
        padded_reduce_scatter,
        reduce_keep_input,
    )
)

__all__ = [
    "ALGORITHM_TAG",
    "ARRIVAL_TAG",
    "HANDS_OP_TO_BACKEND",
    "MOST_RANKS",
    "DeferredRecv",
    "all_gather_all_to_all",
    "all_gather_all_to_all_list",
    "all_gather_barrier",
    "all_gather_concat",
    "all_gather_reduce",
    "all_gather_reduce_scatter",
    "all_gather_reduce_scatter_tensor",
    "all_gather_reduce_to_dst",
    "all_gather_to_dst",
    "all_reduce_slice",
    "all_reduce_slice_tensor",
    "all_to_all_reduce",
    "all_to_all_reduce_tensor",
    "broadcast_scatter",
    "buffered_send_all_gather",
    "buffered_send_all_gather_into_tensor",
    "buffered_send_all_reduce",
    "buffered_send_all_to_all",
    "buffered_send_all_to_all_list",
    "buffered_send_reduce_scatter",
    "buffered_send_reduce_scatter_tensor",
    "concat_all_to_all",
    "deferred_recv",
    "deferred_sources",
    "gather_reduce_to_dst",
    "group_too_large",
    "one_rank_all_gather",
    "one_rank_all_gather_into_tensor",
    "one_rank_all_reduce",
    "one_rank_all_to_all",
    "one_rank_all_to_all_single",
    "one_rank_barrier",
    "one_rank_broadcast",
    "one_rank_gather",
    "one_rank_reduce",
    "one_rank_reduce_scatter",
    "one_rank_reduce_scatter_tensor",
    "one_rank_scatter",
    "padded_all_gather",
    "padded_reduce_scatter",
    "pairwise_all_gather",
    "pairwise_all_gather_into_tensor",
    "pairwise_all_gather_reduce",
    "pairwise_all_to_all",
    "pairwise_all_to_all_list",
    "ranks_text",
    "reduce_keep_input",
    "reported_barrier",
    "reported_barrier_in_memory",
    "reported_barrier_until_silent",
    "runs_at_most",
    "scatter_reduce",
    "scatter_reduce_tensor",
    "sends_then_deferred_recvs",
    "settle_deferred_recvs",
    "shared_memory_all_gather",
    "shared_memory_all_gather_into_tensor",
    "shared_memory_all_reduce",
    "shared_memory_all_reduce_in_shares",
    "shared_memory_all_to_all",
    "shared_memory_all_to_all_list",
    "shared_memory_barrier",
    "shared_memory_batch_isend_irecv",
    "shared_memory_broadcast",
    "shared_memory_gather",
    "shared_memory_irecv",
    "shared_memory_isend",
    "shared_memory_monitored_barrier",
    "shared_memory_p2p_all_to_all",
    "shared_memory_p2p_all_to_all_list",
    "shared_memory_p2p_gather",
    "shared_memory_p2p_scatter",
    "shared_memory_recv",
    "shared_memory_reduce",
    "shared_memory_reduce_scatter",
    "shared_memory_reduce_scatter_tensor",
    "shared_memory_scatter",
    "shared_memory_send",
    "tensor_form",
]
