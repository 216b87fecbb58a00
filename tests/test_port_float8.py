"""compat port on a float8 mixture-of-experts dispatch (tests/port_fixtures/moe_float8.py, in
the pattern of torchao's mxfp8 MoE communication): funcol's ``all_to_all_single`` of a
float8_e4m3fn tensor with split sizes, and of its float32 scales beside it.

torch's NCCL moves float8 in its non-reducing collectives (as ncclUint8 where NCCL has no float8
type: capabilities.toml [nccl]); torch's Gloo refuses it ('Invalid scalar type'). So the
original's results are taken on 2 Gloo ranks with the payload sent as its bytes
(``MOE_PAYLOAD_DTYPE=uint8``, what NCCL sends), and the ported file, sending float8 as written,
must give exactly those (compat moves the bytes: capabilities.toml's ``as_bytes``).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from compat.tools.launch import launch
from compat.tools.port import port_source
from tests.test_port_fixtures import FIXTURES, TORCH_TIMEOUT, Run, parse

FILES = ("__init__.py", "driver.py", "tensors.py", "moe_float8.py")


def copy(root: Path, ported: bool) -> Path:
    package = root / "port_fixtures"
    package.mkdir(parents=True)
    for name in FILES:
        text = (FIXTURES / name).read_text()
        if ported and name == "moe_float8.py":
            text = port_source(text, name).rewritten
        (package / name).write_text(text)
    return root


def run(root: Path, name: str, payload: str | None) -> Run:
    sync = root / f"sync-{name}"
    sync.mkdir()
    env = {"PORT_FIXTURES_SYNC": str(sync), "PORT_FIXTURES_FRAMEWORK": "torch"}
    if payload is not None:
        env["MOE_PAYLOAD_DTYPE"] = payload
    sink = io.StringIO()
    command = [str(root / "port_fixtures" / "driver.py"), "torch", "moe_float8"]
    code = launch(2, command, "torch", timeout=TORCH_TIMEOUT, env=env, sink=sink)
    return parse(name, code, sink.getvalue())


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("port_float8")
    return {"original": copy(base / "original", False), "ported": copy(base / "ported", True)}


def test_the_funcol_calls_are_rewritten(roots: dict[str, Path]) -> None:
    text = (roots["ported"] / "port_fixtures" / "moe_float8.py").read_text()
    assert "funcol.all_to_all_single" not in text
    assert text.count("compat.autograd.all_to_all_single(") == 2


def test_ported_float8_gives_the_originals_results(roots: dict[str, Path]) -> None:
    original = run(roots["original"], "original-bytes", "uint8")
    ported = run(roots["ported"], "ported", None)
    assert original.code == 0 and ported.code == 0, original.tail() + ported.tail()
    want, got = original.results["moe_float8"], ported.results["moe_float8"]
    assert sorted(want) == [0, 1], original.tail()
    for rank in (0, 1):
        assert isinstance(want[rank], dict) and "error" not in want[rank], want[rank]
        assert want[rank]["dtype"] == "torch.float8_e4m3fn"
    assert got == want, ported.tail()


def test_the_original_float8_call_is_refused_by_gloo(roots: dict[str, Path]) -> None:
    """Why the original's results are taken with the bytes: torch's Gloo refuses float8."""
    original = run(roots["original"], "original-float8", None)
    for rank in (0, 1):
        result = original.results["moe_float8"][rank]
        assert isinstance(result, dict) and "Invalid scalar type" in result["error"], result
