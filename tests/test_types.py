"""compat's own logic, without ranks: ReduceOp parsing, Backend names and Work's completion
rules."""

from __future__ import annotations

from datetime import timedelta

import pytest

from compat import Backend, ReduceOp, Work
from compat.base import tables
from compat.base.errors import CollectiveTimeout
from compat.base.types import parse_op


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("sum", ReduceOp.SUM),
        ("SUM", ReduceOp.SUM),
        ("prod", ReduceOp.PRODUCT),
        ("product", ReduceOp.PRODUCT),
        ("min", ReduceOp.MIN),
        ("max", ReduceOp.MAX),
        ("avg", ReduceOp.AVG),
        (ReduceOp.PROD, ReduceOp.PRODUCT),
    ],
)
def test_parse_op_accepts_names_and_aliases(given: object, expected: ReduceOp) -> None:
    assert parse_op(given) is expected


def test_parse_op_accepts_torch_native_ops() -> None:
    dist = pytest.importorskip("torch.distributed")
    assert parse_op(dist.ReduceOp.SUM) is ReduceOp.SUM
    assert parse_op(dist.ReduceOp.PRODUCT) is ReduceOp.PRODUCT
    assert parse_op(dist.ReduceOp.AVG) is ReduceOp.AVG


def test_members_equal_torchs_either_way_round() -> None:
    """A ported file compares ops that files not ported hand it (torchft's manager:
    ``if reduce_op == compat.ReduceOp.AVG`` with torch's AVG); torch's == hands over its int."""
    dist = pytest.importorskip("torch.distributed")
    for name in ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR"):
        torchs, compats = getattr(dist.ReduceOp, name), getattr(ReduceOp, name)
        assert torchs == compats and compats == torchs and not (torchs != compats), name
    assert ReduceOp.PROD == dist.ReduceOp.PRODUCT
    assert dist.ReduceOp.AVG != ReduceOp.SUM and ReduceOp.SUM != dist.ReduceOp.AVG
    assert ReduceOp.SUM != dist.ReduceOp.PREMUL_SUM
    assert dist.ReduceOp.AVG in (ReduceOp.SUM, ReduceOp.AVG)
    assert ReduceOp.MAX in (dist.ReduceOp.MIN, dist.ReduceOp.MAX)
    assert ReduceOp.SUM == "sum" and ReduceOp.SUM != 1 and ReduceOp.SUM != True  # noqa: E712
    assert {ReduceOp.SUM: 1}["sum"] == 1  # its hash is its string's


def test_members_equal_mindspores() -> None:
    ops = pytest.importorskip("mindspore.ops")
    assert ops.ReduceOp.MAX == ReduceOp.MAX and ReduceOp.MAX == ops.ReduceOp.MAX
    assert ops.ReduceOp.SUM != ReduceOp.MAX


@pytest.mark.parametrize("given", ["bogus", 3, None, 1.5])
def test_parse_op_rejects_with_a_named_message(given: object) -> None:
    with pytest.raises(ValueError, match=r"^op: expected a compat.ReduceOp.*got"):
        parse_op(given)


class FakeHandle:
    """Stands in for a native async handle in these unit tests of Work only."""

    def __init__(self) -> None:
        self.done = False
        self.waited_with: list[object] = []

    def wait(self, timeout: timedelta | None = None) -> bool:
        self.waited_with.append(timeout)
        self.done = True
        return True

    def is_completed(self) -> bool:
        return self.done


def test_backend_members_are_the_strings_torch_and_compat_use() -> None:
    import torch.distributed as dist

    assert Backend("NCCL") is Backend.NCCL and Backend("gloo") is Backend.GLOO
    assert Backend.NCCL == "nccl" == dist.Backend.NCCL and f"{Backend.MCCL}" == "mccl"
    assert dist.Backend(Backend.GLOO) == "gloo"  # torch's backend= takes compat's members
    assert repr(Backend.GLOO) == repr(dist.Backend.GLOO) == "'gloo'"  # get_backend() prints so
    every_backend = {e.get("backend", k) for k, e in tables.load("capabilities").items()}
    assert {member.value for member in Backend} == every_backend
    with pytest.raises(ValueError, match=r"^backend: expected one of 'gloo', .*got 'ucc'$"):
        Backend("ucc")


def test_work_waits_every_handle_then_finishes_once() -> None:
    handles = [FakeHandle(), FakeHandle()]
    finished = []
    work = Work(handles, lambda: finished.append(1))
    assert not work.is_completed()
    assert finished == []
    assert work.wait(timeout=2.5) is True
    assert [h.waited_with for h in handles] == [[timedelta(seconds=2.5)]] * 2
    assert work.wait() is True
    assert finished == [1], "the local step must run exactly once"
    assert work.is_completed()


def test_work_is_completed_runs_the_local_step_when_handles_are_done() -> None:
    handle = FakeHandle()
    finished = []
    work = Work([handle], lambda: finished.append(1))
    handle.done = True
    assert work.is_completed()
    assert finished == [1]


class OnceHandle(FakeHandle):
    """A handle that completes once and, waited for again, fails: as torch's Gloo send handle,
    which a second wait makes wait for another message (it timed out and closed the
    connection: measured, rank case p2p_waited_again)."""

    def wait(self, timeout: timedelta | None = None) -> bool:
        if self.done:
            raise AssertionError("waited for again after it completed")
        return super().wait(timeout)


class LateHandle(FakeHandle):
    """A handle whose first ``failures`` waits time out."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def wait(self, timeout: timedelta | None = None) -> bool:
        if self.failures:
            self.failures -= 1
            raise CollectiveTimeout("late")
        return super().wait(timeout)


def test_work_waited_again_after_a_timeout_waits_only_for_what_had_not_completed() -> None:
    first, late = OnceHandle(), LateHandle(failures=2)
    finished = []
    work = Work([first, late], lambda: finished.append(1))
    for _ in range(2):
        with pytest.raises(CollectiveTimeout):
            work.wait(timeout=0.5)
        assert finished == [] and not work.is_completed()
    assert first.waited_with == [timedelta(seconds=0.5)], "the completed handle is not waited again"
    assert work.wait() is True
    assert late.waited_with == [None]
    assert finished == [1] and work.is_completed()
    assert work.wait() is True and finished == [1]
