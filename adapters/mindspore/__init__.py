"""compat on MindSpore: ``mindspore.mint.distributed`` over MCCL (CPU), NCCL (GPU), HCCL (Ascend).

What MCCL lacks on CPU is routed to compat.algorithms by the capability table; this package
only translates, in three parts: :mod:`.adapter` (the collectives and the process group),
:mod:`.tensors` (local tensor facts and operations, on CPU in numpy over the tensors' memory)
and :mod:`.startup` (binding the device; the scheduler for a job started without msrun). It also
works around what MindSpore 2.10 needs to give correct results:

- Collectives use the whole storage behind a tensor, from its start: an all_reduce of ``t[2:6]``
  leaves it unchanged, one of ``t[:2]`` reduces all of ``t``. compat.core.layout gives the
  adapter dense tensors only; views that compat.algorithms cut from their own buffers are staged
  (``_stage_in``/``_stage_out``).
- A tensor that was ever written by slice assignment (``t[:] = x``, ``t[:2] = x``) no longer
  receives the result of broadcast, all_gather, scatter or gather: the call returns, and ``t``
  keeps its old values (raw mint.distributed too; all_reduce and recv are not affected). Users
  write their buffers that way, so those four receive into a new tensor and copy the result over
  (``_receive``), and compat itself never slice-assigns on CPU: its copies go through numpy on
  the tensors' memory.
- Errors of an operation surface one call late (PyNative runs asynchronously); a synchronous call
  synchronises so that its error is raised by the call that caused it.
- ``get_cache_group_rank``/``get_cache_group_size`` bind "hccl_world_group" as a default at import,
  so send (and the object collectives) fail on CPU even with ``group=`` given; ``init`` rebinds
  the default to the real world group.
- An MCCL send waits for its receiver's acknowledgement: ``destroy`` waits at a barrier, then
  pauses for the barrier's own acknowledgements, so that no rank exits while a peer's last send
  is unacknowledged.

The behaviours are MindSpore 2.10's on MCCL, checked by the rank tests; docs/backends.md.
"""

from .adapter import (
    ACK_FLUSH_SECONDS,
    ADAPTER_CLASS,
    MCCL_TIMEOUT_SECONDS,
    PRIMITIVES_VARIABLE,
    SYNCHRONOUS_LAUNCH_VARIABLES,
    MindSporeAdapter,
    launches_synchronously,
    primitives_forced,
)

__all__ = [
    "ACK_FLUSH_SECONDS",
    "ADAPTER_CLASS",
    "MCCL_TIMEOUT_SECONDS",
    "PRIMITIVES_VARIABLE",
    "SYNCHRONOUS_LAUNCH_VARIABLES",
    "MindSporeAdapter",
    "launches_synchronously",
    "primitives_forced",
]
