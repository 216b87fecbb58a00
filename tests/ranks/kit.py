"""Framework kits for the rank-side test cases: make tensors from numpy and read them back.

Cases are written once against a kit; the kit hides only tensor creation and conversion.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import numpy as np

# dtypes numpy cannot hold are carried in this numpy dtype (exactly, for the small integer values
# the cases use).
_CARRIER = {"bfloat16": "float32"}


class TorchKit:
    framework = "torch"

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def tensor(self, values: Any, dtype: str) -> Any:
        array = np.asarray(values, dtype=_CARRIER.get(dtype, dtype))
        tensor = self.torch.from_numpy(array.copy()).to(getattr(self.torch, dtype))
        return tensor.to(self.home)

    @property
    def home(self) -> Any:
        """The rank's device compat communicates from (a GPU on NCCL): where cases' tensors go."""
        import compat.core.state

        current = compat.core.state.get_current()
        return self.torch.device(current.adapter.home_device() if current else "cpu")

    def numpy(self, tensor: Any) -> np.ndarray:
        if tensor.dtype == self.torch.bfloat16:
            tensor = tensor.float()
        return tensor.detach().cpu().numpy().copy()

    def native_op(self, name: str) -> Any:
        import torch.distributed as dist

        return getattr(dist.ReduceOp, name)

    #: The framework whose tensors are the other framework's here.
    other_framework = "mindspore"

    def other_framework_tensor(self) -> Any:
        import mindspore

        return mindspore.Tensor(np.zeros(4, dtype=np.float32))

    def value_and_grad(self, loss: Any, values: np.ndarray) -> tuple[float, np.ndarray]:
        """The scalar ``loss(x)`` and its gradient at ``x = values``, by torch autograd."""
        tensor = self.tensor(values, "float32").requires_grad_(True)
        result = loss(tensor)
        result.backward()
        return float(result.detach()), self.numpy(tensor.grad)


class MindSporeKit:
    framework = "mindspore"

    def __init__(self) -> None:
        import mindspore

        self.ms = mindspore

    def tensor(self, values: Any, dtype: str) -> Any:
        array = np.asarray(values, dtype=_CARRIER.get(dtype, dtype))
        return self.ms.Tensor(array.copy()).astype(getattr(self.ms, dtype))

    def numpy(self, tensor: Any) -> np.ndarray:
        if tensor.dtype == self.ms.bfloat16:
            tensor = tensor.astype(self.ms.float32)
        return np.array(tensor.asnumpy(), copy=True)

    def native_op(self, name: str) -> Any:
        from mindspore.ops import ReduceOp

        return getattr(ReduceOp, name)

    other_framework = "torch"

    def other_framework_tensor(self) -> Any:
        import torch

        return torch.zeros(4)

    def value_and_grad(self, loss: Any, values: np.ndarray) -> tuple[float, np.ndarray]:
        """The scalar ``loss(x)`` and its gradient at ``x = values``, by ms.value_and_grad."""
        value, grad = self.ms.value_and_grad(loss)(self.tensor(values, "float32"))
        return float(value.asnumpy()), self.numpy(grad)


def other_framework_installed(kit: TorchKit | MindSporeKit) -> bool:
    """Whether this environment has the other framework (make test-versions' environments have
    one framework each): without it no user can pass compat its tensors."""
    return importlib.util.find_spec(kit.other_framework) is not None


#: Set (to 1) in the one collective job per framework whose ranks pass compat the other
#: framework's tensors (tests/jobs.py FOREIGN_TENSORS_WORLD): importing that framework costs a
#: rank seconds of CPU, paid once per framework this way rather than by every rank of every job.
FOREIGN_TENSORS = "COMPAT_TEST_FOREIGN_TENSORS"


def foreign_tensors(kit: TorchKit | MindSporeKit) -> bool:
    """Whether cases pass the other framework's tensors here: where it is installed, in the job
    that sets FOREIGN_TENSORS, and in the test process (no rank: it loads the framework once)."""
    if not other_framework_installed(kit):
        return False
    import compat

    return os.environ.get(FOREIGN_TENSORS) == "1" or not compat.is_initialized()


def make_kit(framework: str) -> TorchKit | MindSporeKit:
    return TorchKit() if framework == "torch" else MindSporeKit()
