"""compat.coalescing_manager without ranks: what the capability table records of it agrees with
what compat does (the rank cases are tests/ranks/coalescing_cases.py, run by
tests/test_collectives.py on Gloo and MCCL at 1-3 ranks)."""

from __future__ import annotations

import pytest

from compat.base import tables
from compat.base.types import Group, ReduceOp
from compat.core import coalescing

#: What a block collects and compat does not batch: every kind but all_reduce, which goes as
#: compat.all_reduce_coalesced.
IN_ORDER = [coalescing.ALL_GATHER_INTO_TENSOR, coalescing.REDUCE_SCATTER_TENSOR]


@pytest.mark.parametrize("key", list(tables.load("capabilities")))
def test_every_backend_records_the_kinds_a_block_issues_in_order(key: str) -> None:
    rule = tables.lookup("capabilities", key).get("coalesced_in_order")
    assert rule is not None, f"capabilities.toml [{key}] has no coalesced_in_order"
    assert rule["collectives"] == IN_ORDER


def test_a_block_refuses_another_kind_or_op_before_recording() -> None:
    block = coalescing.Block(Group([0, 1], None, "world"), async_ops=False)
    block.join(coalescing.ALL_REDUCE, ReduceOp.SUM)
    with pytest.raises(ValueError, match=r"^all_gather_into_tensor: .* collects all_reduce"):
        block.record(coalescing.ALL_GATHER_INTO_TENSOR, lambda: None, False, [])
    with pytest.raises(ValueError, match=r"^op: .* uses sum; got max"):
        block.join(coalescing.ALL_REDUCE, ReduceOp.MAX)
    assert block.issues == [] and block.kind == coalescing.ALL_REDUCE
