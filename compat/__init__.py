"""compat: one API for collective communication on PyTorch and MindSpore.

``import compat`` imports neither framework; the one :func:`init` selects is imported then.
The modules at this level are what users call; each folder is a layer beneath them, and a layer
imports only the layers below it (``tests/test_layers.py`` says so)::

    compat.all_reduce(t)                 compat/*.py        what users call: lifecycle,
        │                                                   collectives, p2p, objects, comm,
        │                                                   autograd, trace
        ▼
    its common case, compiled once       compat/core/       specs.py: each collective once;
    from its spec (core/common.py)                          common.py: the common case;
      ├─ passes: the kept choice ──┐                        call.py: the general path;
      └─ falls through: Call, the  │                        checks, state, capabilities
         full checks, staging ─────┤                        (the table's choice)
                                   ▼
    the chosen callable: a native call or an algorithm
                                   │    compat/algorithms/  the emulations, one module a family
                                   │    compat/transport/   shared memory between one host's
                                   │                        ranks: windows, mailboxes, waits
                                   ▼
    adapters/torch.py, adapters/mindspore/                  translation only (compat.adapters)
                                        compat/base/        what every layer shares: errors,
                                                            value types, the tables, the
                                                            adapter interface

``compat/tools/`` (the ``compat`` command: launch, bench, docs, port, trace) sits on top.
"""

from compat import autograd as autograd
from compat import comm as comm
from compat import tensor as tensor
from compat import trace as trace
from compat.base.errors import (
    AlreadyInitializedError,
    CollectiveMismatchError,
    CollectiveTimeout,
    NotInitializedError,
    PeerLostError,
    StoreTimeout,
    UnsupportedError,
    UnsupportedReductionError,
)
from compat.base.types import WORLD, Backend, Future, Group, ReduceOp, Work
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
    coalescing_manager,
    gather,
    monitored_barrier,
    reduce,
    reduce_scatter,
    reduce_scatter_into,
    reduce_scatter_tensor,
    scatter,
    scatter_tensor,
)
from compat.core.versions import UntestedVersionWarning
from compat.lifecycle import (
    destroy,
    destroy_process_group,
    framework_group,
    get_backend,
    get_framework,
    get_free_port,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_socket_with_port,
    get_world_size,
    init,
    is_available,
    is_backend_available,
    is_initialized,
    new_framework_group,
    new_group,
    new_subgroups,
    new_subgroups_by_enumeration,
    split_group,
)
from compat.mesh import DeviceMesh, init_device_mesh
from compat.objects import (
    all_gather_object,
    broadcast_object_list,
    gather_object,
    recv_object_list,
    scatter_object_list,
    send_object_list,
)
from compat.p2p import P2POp, batch_isend_irecv, irecv, isend, recv, send
from compat.store import HashStore, PrefixStore, Store, TCPStore

__version__ = "0.1.0"

__all__ = [
    "WORLD",
    "AlreadyInitializedError",
    "Backend",
    "CollectiveMismatchError",
    "CollectiveTimeout",
    "DeviceMesh",
    "Future",
    "Group",
    "HashStore",
    "NotInitializedError",
    "P2POp",
    "PeerLostError",
    "PrefixStore",
    "ReduceOp",
    "Store",
    "StoreTimeout",
    "TCPStore",
    "UnsupportedError",
    "UnsupportedReductionError",
    "UntestedVersionWarning",
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
    "coalescing_manager",
    "destroy",
    "destroy_process_group",
    "framework_group",
    "gather",
    "gather_object",
    "get_backend",
    "get_framework",
    "get_free_port",
    "get_global_rank",
    "get_group_rank",
    "get_process_group_ranks",
    "get_rank",
    "get_socket_with_port",
    "get_world_size",
    "init",
    "init_device_mesh",
    "irecv",
    "is_available",
    "is_backend_available",
    "is_initialized",
    "isend",
    "monitored_barrier",
    "new_framework_group",
    "new_group",
    "new_subgroups",
    "new_subgroups_by_enumeration",
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
    "split_group",
]
