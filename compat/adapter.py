"""The interface every framework adapter implements.

compat checks and normalises the arguments, then calls these methods; an adapter only translates
them to its framework. By the time a method is called: ``op`` is a ReduceOp the backend reduces
natively for that dtype, ``group`` is the framework's own group handle (``None`` = the world),
ranks (``src``, ``dst``) are global ranks, split sizes are lists of ints that fit the tensors, and
output tensors have the right shape and dtype. A method returns a :class:`PendingHandle` when
``async_op`` is true, else ``None`` after the call has completed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from compat.types import PendingHandle, ReduceOp

Tensor = Any
GroupHandle = Any
Pending = PendingHandle | None


class Adapter(ABC):
    """One framework's collectives and the few local tensor operations compat needs."""

    #: The key of this framework in ``mapping_tables/frameworks.toml``.
    framework: str

    # -- lifecycle -------------------------------------------------------------------------
    @abstractmethod
    def init(self, backend: str | None, timeout: timedelta | None) -> str:
        """Join the job (environment set by a launcher) and return the backend in use."""

    @abstractmethod
    def destroy(self) -> None: ...

    @abstractmethod
    def rank(self) -> int: ...

    @abstractmethod
    def world_size(self) -> int: ...

    @abstractmethod
    def new_group(self, ranks: Sequence[int], name: str) -> GroupHandle:
        """Create a group; called on every rank. Returns None on ranks outside ``ranks``."""

    @abstractmethod
    def group_ranks(self, group: GroupHandle) -> list[int]:
        """The global ranks of ``group`` (None = the world), in group-rank order."""

    # -- local tensor facts and operations ------------------------------------------------
    @abstractmethod
    def shape(self, tensor: Tensor) -> tuple[int, ...]: ...

    @abstractmethod
    def dtype(self, tensor: Tensor) -> str:
        """The canonical dtype name (a key of ``mapping_tables/dtypes.toml``)."""

    @abstractmethod
    def device(self, tensor: Tensor) -> str: ...

    @abstractmethod
    def empty(self, shape: Sequence[int], like: Tensor) -> Tensor:
        """A new uninitialised tensor of ``like``'s dtype and device."""

    @abstractmethod
    def split(self, tensor: Tensor, sizes: Sequence[int], dim: int = 0) -> list[Tensor]:
        """Views of ``tensor`` along ``dim`` (no copy)."""

    @abstractmethod
    def cat(self, tensors: Sequence[Tensor], dim: int) -> Tensor:
        """The concatenation of same-device tensors along ``dim``, as a new tensor."""

    @abstractmethod
    def canonical_device(self, spec: object) -> str | None:
        """The device ``spec`` names, as :meth:`device` spells it, or None if it names none.

        Only parses the spelling (``torch.device("cpu")``, ``"CPU"``, ...); whether this machine
        has the device is :meth:`available_devices`' answer.
        """

    @abstractmethod
    def available_devices(self) -> list[str]:
        """The devices this process can put tensors on, as :meth:`device` spells them."""

    @abstractmethod
    def to_device(self, tensor: Tensor, device: str) -> Tensor:
        """A contiguous copy of ``tensor`` on ``device`` (one of :meth:`available_devices`).

        Always a new tensor, also when ``tensor`` is already on ``device``.
        """

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for queued local operations; raise the error of one that failed."""

    @abstractmethod
    def copy_(self, dst: Tensor, src: Tensor) -> None: ...

    @abstractmethod
    def reduce_local(self, tensors: Sequence[Tensor], op: ReduceOp) -> Tensor:
        """The element-wise reduction of same-shaped tensors, as a new tensor (emulations)."""

    @abstractmethod
    def shares_memory(self, pieces: Sequence[Tensor], whole: Tensor) -> bool:
        """True if ``pieces`` are consecutive dim-0 views that exactly tile ``whole``."""

    @abstractmethod
    def differentiable(
        self, forward: Callable[[Tensor], Tensor], backward: Callable[[Tensor], Tensor]
    ) -> Callable[[Tensor], Tensor]:
        """``forward`` as a function the framework differentiates with ``backward`` (which maps
        the result's gradient to the input's): torch autograd / mindspore.grad."""

    # -- collectives (native translation only) ---------------------------------------------
    @abstractmethod
    def all_reduce(
        self, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Pending: ...

    @abstractmethod
    def all_gather(
        self, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
    ) -> Pending: ...

    @abstractmethod
    def all_gather_into_tensor(
        self, output: Tensor, tensor: Tensor, group: GroupHandle, async_op: bool
    ) -> Pending: ...

    @abstractmethod
    def reduce_scatter(
        self,
        output: Tensor,
        input_list: list[Tensor],
        op: ReduceOp,
        group: GroupHandle,
        async_op: bool,
    ) -> Pending: ...

    @abstractmethod
    def reduce_scatter_tensor(
        self, output: Tensor, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Pending: ...

    @abstractmethod
    def broadcast(
        self, tensor: Tensor, src: int, group: GroupHandle, async_op: bool
    ) -> Pending: ...

    @abstractmethod
    def scatter(
        self,
        tensor: Tensor,
        scatter_list: list[Tensor] | None,
        src: int,
        group: GroupHandle,
        async_op: bool,
    ) -> Pending: ...

    @abstractmethod
    def gather(
        self,
        tensor: Tensor,
        gather_list: list[Tensor] | None,
        dst: int,
        group: GroupHandle,
        async_op: bool,
    ) -> Pending: ...

    @abstractmethod
    def reduce(
        self, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Pending: ...

    @abstractmethod
    def all_to_all_single(
        self,
        output: Tensor,
        tensor: Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        group: GroupHandle,
        async_op: bool,
    ) -> Pending: ...

    @abstractmethod
    def send(self, tensor: Tensor, dst: int, group: GroupHandle) -> None: ...

    @abstractmethod
    def recv(self, tensor: Tensor, src: int, group: GroupHandle) -> None: ...

    @abstractmethod
    def barrier(self, group: GroupHandle, async_op: bool) -> Pending: ...
