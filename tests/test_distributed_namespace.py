"""compat.distributed: torch.distributed's names, each taking every call torch's takes and
returning torch's kind of result, bound to what the port's tables pair with that torch name (so
the namespace and ``compat port`` cannot disagree); real ranks in tests/ranks/namespace_cases.py,
run in the collective jobs."""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import pytest

import compat
import compat.distributed as dist
from compat.tools.port import _model
from tests.jobs import BACKGROUND, collective_job

torch_dist = pytest.importorskip("torch.distributed")

#: torch's parameters compat.distributed's function lacks, and why (none today).
LACKING: dict[str, dict[str, str]] = {}


def _names() -> list[str]:
    return list(dist.__all__)


def test_importing_it_imports_no_framework() -> None:
    code = (
        "import sys, compat.distributed\n"
        "print([m for m in ('torch', 'mindspore') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_every_name_is_torchs_and_every_public_name_is_listed() -> None:
    assert len(set(dist.__all__)) == len(dist.__all__)
    assert [n for n in dist.__all__ if not hasattr(torch_dist, n)] == []
    public = {n for n, v in vars(dist).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert public - set(dist.__all__) - {"RUNS", "annotations", "Any", "timedelta"} == set()
    # a name compat has no counterpart of is absent, as a name torch lacks is
    with pytest.raises(AttributeError):
        dist.get_node_local_rank  # noqa: B018


def _calls(params: list[inspect.Parameter]) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Every way of passing torch's parameters: the first k positionally, the rest by name."""
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    calls = []
    for k in range(len(positional) + 1):
        args = tuple(object() for _ in positional[:k])
        kwargs = {p.name: object() for p in params[k:] if p.kind is not p.POSITIONAL_ONLY}
        calls.append((args, kwargs))
    return calls


@pytest.mark.parametrize("name", _names())
def test_each_function_accepts_every_call_torchs_accepts(name: str) -> None:
    ours, theirs = getattr(dist, name), getattr(torch_dist, name)
    if name in ("group", "GroupMember"):
        assert hasattr(ours, "WORLD") and hasattr(theirs, "WORLD")
        return
    if inspect.isclass(theirs) and name != "P2POp":
        assert inspect.isclass(ours), name
        return
    torch_params = [
        p
        for p in inspect.signature(theirs).parameters.values()
        if p.name not in LACKING.get(name, {}) and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    signature = inspect.signature(ours)
    for args, kwargs in _calls(torch_params):
        signature.bind(*args, **kwargs)  # a TypeError names the call compat's refuses
    ours_order = [p.name for p in signature.parameters.values()][: len(torch_params)]
    assert ours_order == [p.name for p in torch_params], name


@pytest.mark.parametrize("name", _names())
def test_each_name_runs_what_the_port_tables_pair_with_torchs(name: str) -> None:
    target = dist.RUNS.get(name, name)
    qualified = f"torch.distributed.{name}" + (".WORLD" if name in ("group", "GroupMember") else "")
    if name in ("group", "GroupMember"):
        target = "framework_group"
    options = _model.candidates().get(qualified, ())
    assert target in [o.compat for o in options], (name, [o.compat for o in options])
    ours = getattr(dist, name)
    if getattr(ours, "__module__", None) != dist.__name__:
        assert ours is getattr(compat, target), name
    option = next(o for o in options if o.compat == target)
    # a bound compat function returns torch's result: the tables record no difference
    if ours is getattr(compat, target, None) and option.params is not None:
        assert option.result is None, (name, option.result)


def test_what_compat_cannot_honour_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="timeout"):
        dist.barrier(timeout=__import__("datetime").timedelta(seconds=1))
    with pytest.raises(ValueError, match="device_id"):
        dist.new_group([0], device_id=0)
    with pytest.raises(ValueError, match="sort_ranks"):
        dist.new_group([1, 0], sort_ranks=False)
    with pytest.raises(ValueError, match="_ranks"):
        dist.init_process_group("gloo", _ranks=[0])


@pytest.mark.parametrize(
    ("framework", "world"),
    [
        pytest.param(framework, world, marks=pytest.mark.job(collective_job(framework, world)))
        for framework, world in (("torch", 2), ("torch", 3), ("mindspore", 2))
    ],
)
def test_a_torch_shaped_program_runs_on_real_ranks(framework: str, world: int) -> None:
    names = tuple(n for n in collective_job(framework, world).cases if n.startswith("namespace_"))
    assert len(names) == 2, names
    result = BACKGROUND.result(collective_job(framework, world))
    failures = [failure for name in names if (failure := result.failure(name)) is not None]
    assert not failures, "\n\n".join(failures)
