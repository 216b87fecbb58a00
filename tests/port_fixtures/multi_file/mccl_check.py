"""The ported process-group manager on its own, with compat's calls: runs on MindSpore too."""

from __future__ import annotations

import json

import numpy as np

import compat
from tests.port_fixtures.multi_file import groups


def main() -> None:
    groups.initialize(tensor_parallel_size=2)
    rank = compat.get_rank()
    if compat.get_framework() == "torch":
        import torch

        make, read = (lambda a: torch.from_numpy(a)), (lambda t: t.numpy())
    else:
        import mindspore as ms

        make, read = (lambda a: ms.Tensor(a)), (lambda t: t.asnumpy())
    x = make(np.full((3,), rank + 1.0, dtype=np.float32))
    compat.all_reduce(x, group=groups.get_data_parallel_group())
    y = make(np.full((2,), 10.0**rank, dtype=np.float32))
    compat.all_reduce(y, group=groups.get_tensor_parallel_group())
    result = {
        "rank": rank,
        "dp": read(x).tolist(),
        "tp": read(y).tolist(),
        "tp_rank": groups.get_tensor_parallel_rank(),
        "tp_size": groups.get_tensor_parallel_world_size(),
        "tp_src": groups.get_tensor_parallel_src_rank(),
        "world_is_world": groups.is_world_group(groups.get_world_group()),
        "dp_is_world": groups.is_world_group(groups.get_data_parallel_group()),
    }
    groups.barrier()
    groups.destroy()
    print("MULTI-FILE " + json.dumps(result, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
