"""A checkpoint helper in the style of real loaders: the caller passes ``process_group=``."""

from __future__ import annotations

import torch.distributed as dist


def load(state: dict[str, object] | None, process_group=None) -> dict[str, object]:
    """The state as the group's first rank has it, on every rank of the group."""
    src = dist.get_global_rank(process_group, 0) if process_group is not None else 0
    box = [state if dist.get_rank() == src else None]
    dist.broadcast_object_list(box, src=src, group=process_group)
    loaded = box[0]
    assert isinstance(loaded, dict)
    return {**loaded, "loaded_by": dist.get_rank(group=process_group)}
