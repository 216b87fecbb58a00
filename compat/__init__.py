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
    get_rank,
    get_world_size,
    init,
    is_initialized,
    new_group,
)
from compat.collectives import (
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    all_to_all_single,
    barrier,
    broadcast,
    gather,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    scatter_tensor,
    send,
)
from compat.errors import (
    CollectiveMismatchError,
    CollectiveTimeout,
    NotInitializedError,
    UnsupportedError,
)
from compat.types import Group, ReduceOp, Work

__version__ = "0.1.0"

__all__ = [
    "CollectiveMismatchError",
    "CollectiveTimeout",
    "Group",
    "NotInitializedError",
    "ReduceOp",
    "UnsupportedError",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "destroy",
    "gather",
    "get_backend",
    "get_framework",
    "get_rank",
    "get_world_size",
    "init",
    "is_initialized",
    "new_group",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_tensor",
    "send",
]
