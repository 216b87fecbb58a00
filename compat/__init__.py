"""compat: one API for collective communication on PyTorch and MindSpore.

``import compat`` imports neither framework; the one :func:`init` selects is imported then.
``compat.comm`` holds the single-process device scatter/gather/broadcast (``torch.cuda.comm``).
"""

from compat import autograd as autograd
from compat import comm as comm
from compat.api import (
    destroy,
    get_backend,
    get_framework,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    init,
    is_available,
    is_initialized,
    new_group,
)
from compat.collectives import (
    all_gather,
    all_gather_into,
    all_gather_into_tensor,
    all_reduce,
    all_reduce_coalesced,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    gather,
    monitored_barrier,
    reduce,
    reduce_scatter,
    reduce_scatter_into,
    reduce_scatter_tensor,
    scatter,
    scatter_tensor,
)
from compat.errors import (
    CollectiveMismatchError,
    CollectiveTimeout,
    NotInitializedError,
    UnsupportedError,
)
from compat.objects import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from compat.p2p import P2POp, batch_isend_irecv, irecv, isend, recv, send
from compat.types import WORLD, Backend, Group, ReduceOp, Work

__version__ = "0.1.0"

__all__ = [
    "WORLD",
    "Backend",
    "CollectiveMismatchError",
    "CollectiveTimeout",
    "Group",
    "NotInitializedError",
    "P2POp",
    "ReduceOp",
    "UnsupportedError",
    "Work",
    "all_gather",
    "all_gather_into",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "all_reduce_coalesced",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "batch_isend_irecv",
    "broadcast",
    "broadcast_object_list",
    "destroy",
    "gather",
    "gather_object",
    "get_backend",
    "get_framework",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_world_size",
    "init",
    "irecv",
    "is_available",
    "is_initialized",
    "isend",
    "monitored_barrier",
    "new_group",
    "recv",
    "recv_object_list",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_into",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "scatter_tensor",
    "send",
    "send_object_list",
]
