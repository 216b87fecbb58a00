"""The layout rule: any tensor a user passes gives the result a contiguous tensor would give.

Backends do not see views. Gloo and NCCL read and write ``numel`` elements from a tensor's first
element, ignoring its strides: an all_reduce of ``x[:, :2]`` reduces and overwrites elements
outside the view (torch 2.13). MindSpore's collectives use the whole storage behind a
tensor: an all_reduce of ``x[:2]`` reduces all of ``x`` (MindSpore 2.10). So a tensor the backend
cannot serve as it is (:meth:`compat.base.adapter.Adapter.is_dense` says which) is replaced for
the call by a contiguous tensor of its own. The stand-in is filled from the user's tensor when
the call reads it, and copied back into exactly the user's elements once the call has completed
(at once for a synchronous call, in ``Work.wait()`` for an asynchronous one). A dense tensor is
passed through untouched: no copy.

A tensor of a dtype the backend lacks but moves as bytes (capabilities.toml's ``as_bytes``: the
float8 dtypes on Gloo and MCCL) is staged as its view as uint8: the same memory, one byte an
element, so shapes and sizes stay; the call moves its bytes, and the results land in the user's
tensor (a result a functional form made keeps the user's dtype: it is made before it is staged).

A complex tensor of a backend that lacks complex dtypes (capabilities.toml's ``as_real``) is staged
as its view as real numbers (torch.view_as_real's: the same memory, the shape with a trailing
dimension of 2): the call moves, or reduces with SUM or AVG, its real and imaginary parts. It is
made dense first (a tensor the backend cannot serve as it is becomes a dense complex copy, copied
back as any other), since MindSpore views only a dense complex tensor as real in place.
"""

from __future__ import annotations

from collections.abc import Sequence

from compat.base.adapter import Adapter, Tensor
from compat.base.types import Handle, Work


class Staging:
    """The stand-ins of one call's tensors, and the copies back into the user's tensors."""

    __slots__ = ("_writebacks", "adapter", "as_bytes", "as_real")

    def __init__(self, adapter: Adapter, as_bytes: bool = False, as_real: bool = False) -> None:
        self.adapter = adapter
        self._writebacks: list[tuple[Tensor, Tensor]] | None = None  # made on first use
        #: whether the call's tensors travel as their bytes (see the module docstring)
        self.as_bytes = as_bytes
        #: whether the call's (complex) tensors travel as their real views
        self.as_real = as_real

    def read(self, tensor: Tensor) -> Tensor:
        """``tensor`` for a call that only reads it."""
        if self.as_real:
            dense = tensor if self.adapter.is_dense(tensor) else self.adapter.clone(tensor)
            return self.adapter.as_real(dense)
        if self.as_bytes:
            tensor = self.adapter.as_bytes(tensor)
        return tensor if self.adapter.is_dense(tensor) else self.adapter.clone(tensor)

    def write(self, tensor: Tensor) -> Tensor:
        """``tensor`` for a call that only writes it (its values are not read)."""
        if self.as_real:
            if self.adapter.is_dense(tensor):
                return self.adapter.as_real(tensor)
            staged = self.adapter.empty(self.adapter.shape(tensor), tensor)
            return self.adapter.as_real(self._later(tensor, staged))
        if self.as_bytes:
            tensor = self.adapter.as_bytes(tensor)
        if self.adapter.is_dense(tensor):
            return tensor
        return self._later(tensor, self.adapter.empty(self.adapter.shape(tensor), tensor))

    def update(self, tensor: Tensor) -> Tensor:
        """``tensor`` for a call that reads it and writes its result into it (in place)."""
        if self.as_real:
            if self.adapter.is_dense(tensor):
                return self.adapter.as_real(tensor)
            return self.adapter.as_real(self._later(tensor, self.adapter.clone(tensor)))
        if self.as_bytes:
            tensor = self.adapter.as_bytes(tensor)
        if self.adapter.is_dense(tensor):
            return tensor
        return self._later(tensor, self.adapter.clone(tensor))

    def read_all(self, tensors: Sequence[Tensor]) -> list[Tensor]:
        return [self.read(tensor) for tensor in tensors]

    def write_all(self, tensors: Sequence[Tensor]) -> list[Tensor]:
        return [self.write(tensor) for tensor in tensors]

    def _later(self, tensor: Tensor, staged: Tensor) -> Tensor:
        if self._writebacks is None:
            self._writebacks = []
        self._writebacks.append((tensor, staged))
        return staged

    def finish(self) -> None:
        """Copy the stand-ins' results into the user's tensors (once the call has completed)."""
        if self._writebacks:
            for tensor, staged in self._writebacks:
                self.adapter.copy_(tensor, staged)
            self._writebacks = None

    def done(self, pending: Handle | None, async_op: bool) -> Work | None:
        """The call's result: a Work whose ``wait`` completes it (async), else None once it has
        completed and its results are in the user's tensors."""
        if async_op:
            handles = [pending] if pending is not None else []
            return Work(handles, self.finish if self._writebacks else None)
        if self._writebacks:
            self.finish()
        return None


def completed(async_op: bool) -> Work | None:
    """The result of a call that has nothing to communicate (every tensor empty)."""
    return Work() if async_op else None
