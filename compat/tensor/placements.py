"""compat's own DTensor placements, torch's ``torch.distributed.tensor.placement_types``
public surface: :class:`Placement`, :class:`Shard`, :class:`Replicate`, :class:`Partial`.

These are the placements of compat's DTensor emulation (on MindSpore, which has no DTensor).
On torch, ``compat.tensor.Shard`` and the others are torch's own classes (see
:mod:`compat.tensor`), so this module is what MindSpore programs get. Each placement is
frozen and hashable, equal to another of its kind with the same fields, and prints as torch's
does (``repr``: ``Shard(dim=0)``, ``Replicate()``, ``Partial(sum)``; ``str``: ``S(0)``, ``R``,
``P(sum)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from compat.core.values import check_int, describe

#: The reductions a Partial placement may stand for (torch's Partial documents these).
REDUCE_OPS = ("sum", "avg", "min", "max", "product", "band", "bor", "bxor")


class Placement:
    """The base of every placement: how a DTensor's data lies along one mesh dim."""

    __slots__ = ()

    def is_shard(self, dim: int | None = None) -> bool:
        """Whether this is ``Shard`` (of tensor dim ``dim``, when given)."""
        return False

    def is_replicate(self) -> bool:
        """Whether this is ``Replicate()``."""
        return False

    def is_partial(self, reduce_op: str | None = None) -> bool:
        """Whether this is ``Partial`` (with ``reduce_op``, when given)."""
        return False


@dataclass(frozen=True, repr=False)
class Shard(Placement):
    """Tensor dim ``dim`` split across the mesh dim as ``torch.chunk`` splits it: every rank's
    piece is ``ceil(size / n)`` long, except trailing ones, which are shorter or empty."""

    dim: int

    def __post_init__(self) -> None:
        check_int(self.dim, "dim")

    def is_shard(self, dim: int | None = None) -> bool:
        return dim is None or dim == self.dim

    def __hash__(self) -> int:
        return hash(self.dim)

    def __repr__(self) -> str:
        return f"Shard(dim={self.dim})"

    def __str__(self) -> str:
        return f"S({self.dim})"


@dataclass(frozen=True, repr=False)
class Replicate(Placement):
    """Every rank of the mesh dim holds the whole tensor."""

    def is_replicate(self) -> bool:
        return True

    def __hash__(self) -> int:
        return -1  # torch's: every Replicate is the same

    def __repr__(self) -> str:
        return "Replicate()"

    def __str__(self) -> str:
        return "R"


@dataclass(frozen=True, repr=False)
class Partial(Placement):
    """Every rank of the mesh dim holds a partial value; the tensor is their reduction by
    ``reduce_op`` (one of :data:`REDUCE_OPS`), done when redistributed to Replicate or Shard."""

    reduce_op: str = "sum"

    def __post_init__(self) -> None:
        if not isinstance(self.reduce_op, str):
            raise TypeError(
                f"reduce_op: expected one of the strings {REDUCE_OPS}; "
                f"got {describe(self.reduce_op)}"
            )
        if self.reduce_op not in REDUCE_OPS:
            raise ValueError(f"reduce_op: expected one of {REDUCE_OPS}; got {self.reduce_op!r}")

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return reduce_op is None or reduce_op == self.reduce_op

    def __hash__(self) -> int:
        return 1 + hash(self.reduce_op)

    def __repr__(self) -> str:
        return f"Partial({self.reduce_op})"

    def __str__(self) -> str:
        return f"P({self.reduce_op})"
