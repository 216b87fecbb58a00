"""The two reduce_scatter styles, side by side, on whichever framework compat launch chose.

compat launch -n 2 --framework torch examples/reduce_scatter_styles.py
compat launch -n 2 --framework mindspore examples/reduce_scatter_styles.py
torchrun --nproc-per-node 2 examples/reduce_scatter_styles.py
msrun --worker_num=2 --local_worker_num=2 examples/reduce_scatter_styles.py
"""

import numpy as np

import compat

compat.init()  # the framework comes from the launcher: compat launch, torchrun or msrun
if compat.get_framework() == "torch":
    import torch

    def tensor(values: list[float]):
        return torch.tensor(values, dtype=torch.float32)

    def empty(n: int):
        return torch.empty(n, dtype=torch.float32)
else:
    import mindspore as ms

    def tensor(values: list[float]):
        return ms.Tensor(np.array(values, dtype=np.float32))

    def empty(n: int):
        return ms.Tensor(np.zeros(n, dtype=np.float32))


rank, world = compat.get_rank(), compat.get_world_size()
# Rank r holds [1, 2, ..., 2*world] * (r + 1).
data = [float(i + 1) * (rank + 1) for i in range(2 * world)]

# PyTorch's output-buffer style: one input per rank, the result written into `output`.
output = empty(2)
compat.reduce_scatter(output, [tensor(data[2 * i : 2 * i + 2]) for i in range(world)])

# MindSpore's functional style: one tensor, split on dim 0, the result returned.
result = compat.reduce_scatter_tensor(tensor(data))

expected = np.array(data[2 * rank : 2 * rank + 2]) / (rank + 1) * sum(range(1, world + 1))
print(
    f"{compat.get_framework()}/{compat.get_backend()} rank {rank}: "
    f"reduce_scatter -> {np.asarray(output.tolist())}  "
    f"reduce_scatter_tensor -> {np.asarray(result.tolist())}  expected {expected}"
)
np.testing.assert_allclose(np.asarray(output.tolist()), expected)
np.testing.assert_allclose(np.asarray(result.tolist()), expected)
compat.destroy()
