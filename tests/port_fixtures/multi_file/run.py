"""The entry point: join, train a step, load a checkpoint over the tensor-parallel group, leave.
Prints one JSON line per rank for the test to compare before and after porting."""

from __future__ import annotations

import json

import torch.distributed as dist

from tests.port_fixtures.multi_file import checkpoint, groups, trainer


def main() -> None:
    groups.initialize(tensor_parallel_size=2)
    result = trainer.step(seed=7)
    state = {"step": 1, "owner": dist.get_rank()}
    result["checkpoint"] = checkpoint.load(state, process_group=groups.get_tensor_parallel_group())
    result["world_checkpoint"] = checkpoint.load(state, process_group=groups.get_world_group())
    groups.barrier()
    rank = dist.get_rank()
    groups.destroy()
    result["initialized_after_destroy"] = dist.is_initialized()
    print("MULTI-FILE " + json.dumps({"rank": rank, **result}, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
