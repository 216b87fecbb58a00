"""The pre-flight check (``compat.init(check=True)`` or ``COMPAT_CHECK=1``).

Before each collective the ranks of the group all_gather a short description of their call
(function, op, dtype, shape, root, split sizes). If the calls disagree in what that collective
needs to agree on, every rank raises :class:`~compat.base.errors.CollectiveMismatchError` naming the
ranks and the difference, and the real collective never runs: no hang, no silent corruption.
Its cost is one small all_gather (a few hundred bytes) per call; docs/reliability.md gives the cost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from compat.base.adapter import Adapter
from compat.base.errors import CollectiveMismatchError
from compat.base.types import Group
from compat.core import recorder
from compat.core.specs import SPECS

#: What each collective needs every rank to agree on (its spec's ``agree``; a barrier, nothing).
#: Uneven forms legitimately differ in dim 0, so they compare the trailing dims and the per-rank
#: sizes.
AGREE: dict[str, tuple[str, ...]] = {name: spec.agree for name, spec in SPECS.items()} | {
    "barrier": ()
}


@dataclass
class Description:
    """This rank's call, as the pre-flight check compares it."""

    function: str
    dtype: str | None = None
    shape: Sequence[int] = ()
    op: str | None = None
    root: int | None = None
    sizes: Sequence[int] = ()
    # all_to_all_single: rows this rank sends to / receives from each rank of the group
    send: Sequence[int] = ()
    receive: Sequence[int] = ()
    #: reduce_scatter_tensor / all_gather_into_tensor: the dim split or concatenated
    dim: int = 0

    def describe(self) -> dict[str, object]:
        described = asdict(self)
        described["shape"] = list(self.shape)
        described["trailing"] = list(self.shape[1:])
        described["sizes"], described["send"] = list(self.sizes), list(self.send)
        described["receive"] = list(self.receive)
        return described


def _buffer_size(group: Group) -> int:
    # Fixed for a group, so that every rank's buffer has the same size whatever it describes.
    return 1024 + 64 * group.size()


def mismatches(calls: list[dict[str, object]], ranks: Sequence[int]) -> list[str]:
    """How the ranks' calls disagree (empty if they agree)."""
    functions = [call["function"] for call in calls]
    if len(set(functions)) > 1:
        listed = ", ".join(f"rank {r} {f}" for r, f in zip(ranks, functions, strict=True))
        return [f"different collectives: {listed}"]
    problems = []
    for key in AGREE[str(functions[0])]:
        values = [call[key] for call in calls]
        if any(value != values[0] for value in values):
            listed = ", ".join(f"rank {r} {v}" for r, v in zip(ranks, values, strict=True))
            problems.append(f"{key}: {listed}")
    if functions[0] in ("all_to_all_single", "all_to_all"):
        for i, sender in enumerate(calls):
            for j, receiver in enumerate(calls):
                sent, expected = sender["send"][j], receiver["receive"][i]  # type: ignore[index]
                if sent != expected:
                    problems.append(
                        f"split sizes: rank {ranks[i]} sends {sent} rows to rank {ranks[j]}, "
                        f"which expects {expected}"
                    )
    return problems


def check(adapter: Adapter, group: Group, call: Description) -> None:
    """Exchange ``call`` with the group; raise CollectiveMismatchError on every rank if the
    calls disagree."""
    payload = json.dumps(call.describe(), separators=(",", ":")).encode()
    size = _buffer_size(group)
    if len(payload) > size:
        payload = json.dumps({**call.describe(), "shape": "long"}).encode()[:size]
    mine = adapter.bytes_tensor(payload.ljust(size))
    gathered = [adapter.empty((size,), mine) for _ in group.ranks]
    adapter.all_gather(gathered, mine, group.handle, False)
    calls = [json.loads(adapter.to_bytes(item)) for item in gathered]
    problems = mismatches(calls, group.ranks)
    if problems:
        recorder.note_mismatch(group.handle, call.function, call.dtype, tuple(call.shape))
        raise CollectiveMismatchError(
            f"{call.function}: the ranks' calls disagree, so it was not run; " + "; ".join(problems)
        )
