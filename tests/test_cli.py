"""The command line's user errors: every subcommand, given bad input, says so in one line on
stderr (``compat <subcommand>: ...``) with a non-zero exit code, never a traceback. Plus what
``compat diff`` accepts and suggests, and ``compat info``'s width and JSON.

In process (``cli.main``) where that is enough; a few real ``python -m compat`` processes for what
only a process shows (the exit code of the entry point, a closed pipe).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compat.base import tables
from compat.base.errors import TableError
from compat.tools import cli
from compat.tools import launch as launch_module

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str]) -> int:
    """``compat ARGV`` in this process; argparse's usage errors exit, the rest return a code."""
    try:
        return cli.main(argv)
    except SystemExit as exit_info:
        assert isinstance(exit_info.code, int), exit_info.code
        return exit_info.code


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused launch or bench must not start a rank."""

    def launched(*args: object, **kwargs: object) -> int:
        pytest.fail("a rank was started")

    monkeypatch.setattr(launch_module, "launch", launched)


def _break_tables(monkeypatch: pytest.MonkeyPatch, broken: tuple[str, ...]) -> str:
    """Reading a table whose name starts with one of ``broken`` fails as a malformed table does;
    returns the message."""
    message = "mapping table capabilities.toml, key 'gloo.ops': expected a table, got 1"
    load = tables.load

    def load_or_fail(name: str) -> object:
        if name.startswith(broken):
            raise TableError(message)
        return load(name)

    monkeypatch.setattr(tables, "load", load_or_fail)
    return message


@pytest.fixture
def broken_tables(monkeypatch: pytest.MonkeyPatch) -> str:
    """The capability table and the API families are broken (the rest reads fine)."""
    return _break_tables(monkeypatch, ("capabilities", "api_"))


SCRIPT = str(ROOT / "examples" / "port_example.py")

#: (argv, exit code, what the line says): bad input of every subcommand.
BAD_INPUT = [
    ([], 2, "compat: the following arguments are required: subcommand"),
    (["nosuch"], 2, "compat: argument subcommand: invalid choice: 'nosuch'"),
    (["info", "--bogus"], 2, "compat info: unrecognized arguments: --bogus"),
    # launch
    (["launch", "--framework", "torch", SCRIPT], 2, "-n/--nprocs"),
    (["launch", "-n", "abc", SCRIPT], 2, "argument -n/--nprocs: invalid int value: 'abc'"),
    (["launch", "-n", "0", "--framework", "torch", SCRIPT], 2, "expected an int >= 1; got 0"),
    (["launch", "-n", "2", "--framework", "jax", SCRIPT], 2, "invalid choice: 'jax'"),
    (["launch", "-n", "2", "--timeout", "soon", SCRIPT], 2, "argument --timeout"),
    (["launch", "-n", "2", "--devices", "0,x", SCRIPT], 2, "argument --devices"),
    (["launch", "-n", "2", "--framework", "torch"], 2, "argument SCRIPT: expected SCRIPT"),
    (
        ["launch", "-n", "2", "--framework", "torch", "no/such/script.py", "--lr", "1"],
        2,
        "argument SCRIPT: expected a Python script; no file 'no/such/script.py'",
    ),
    (
        ["launch", "-n", "2", "--framework", "torch", "-m", "no_such_module_here.train"],
        2,
        "argument -m: expected a module Python can import; got 'no_such_module_here.train'",
    ),
    # bench
    (["bench", "--framework", "torch", "--sizes", "1Q"], 2, "--sizes"),
    (["bench", "-n", "two"], 2, "argument -n/--nprocs: invalid int value: 'two'"),
    (["bench", "--framework", "jax"], 2, "invalid choice: 'jax'"),
    # diff
    (["diff"], 2, "compat diff: the following arguments are required: name"),
    (["diff", "nosuch"], 2, "got 'nosuch' (families: reduce_scatter, "),
    (["diff", "all_gahter"], 2, "got 'all_gahter' (close names: all_gather"),
    (["diff", "dist.all_reduc"], 2, "close names: dist.all_reduce"),
    # docs
    (["docs", "--bogus"], 2, "compat docs: unrecognized arguments: --bogus"),
    # port
    (["port"], 2, "compat port: the following arguments are required: PATH"),
    (
        ["port", "no/such/file.py"],
        2,
        "PATH: expected an existing file or folder; got 'no/such/file.py'",
    ),
    (
        ["port", str(ROOT / "README.md")],
        2,
        "PATH: expected a Python file (.py, or a script whose first line runs python) or a folder",
    ),
    (["port", "--diff", "--write", SCRIPT], 2, "--write: rewrites the files, --diff writes"),
    (["port", "--write", "--check", SCRIPT], 2, "--write: rewrites the files, --check writes"),
]


@pytest.mark.parametrize(
    ("argv", "code", "says"), BAD_INPUT, ids=[" ".join(case[0]) or "-" for case in BAD_INPUT]
)
def test_bad_input_is_one_line_and_an_exit_code(
    no_launch: None,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    says: str,
) -> None:
    assert _run(argv) == code
    out, err = capsys.readouterr()
    _assert_one_line(err, argv, says)
    assert out == ""  # refused before any banner or report


def _assert_one_line(err: str, argv: list[str], says: str) -> None:
    prefix = f"compat {argv[0]}: " if argv and argv[0] in cli_subcommands() else "compat: "
    assert err.count("\n") == 1 and err.endswith("\n"), f"not one line: {err!r}"
    assert err.startswith(prefix), err
    assert says in err, err
    assert "Traceback" not in err


def cli_subcommands() -> set[str]:
    return {"launch", "bench", "diff", "docs", "info", "port"}


def test_a_bad_compat_framework_is_a_usage_error(
    no_launch: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COMPAT_FRAMEWORK", "jax")
    assert _run(["launch", "-n", "2", SCRIPT]) == 2
    _assert_one_line(
        capsys.readouterr().err, ["launch"], "COMPAT_FRAMEWORK: expected one of ['torch', "
    )


def test_docs_into_a_file_fails_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    assert _run(["docs", "--out", str(blocker / "api_diff")]) == 1
    _assert_one_line(capsys.readouterr().err, ["docs"], str(blocker))


@pytest.mark.parametrize(
    "argv", [["docs"], ["docs", "--check"], ["info"], ["info", "--json"], ["diff", "scatter"]]
)
def test_a_broken_table_fails_in_one_line(
    broken_tables: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    out_dir = ["--out", str(tmp_path)] if argv[0] == "docs" else []
    assert _run([*argv, *out_dir]) == 1
    _assert_one_line(capsys.readouterr().err, argv, broken_tables)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_broken_table_the_parser_reads_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """frameworks.toml gives --framework its choices: broken, no subcommand is known yet."""
    message = _break_tables(monkeypatch, ("frameworks",))
    assert _run(["info"]) == 1
    _assert_one_line(capsys.readouterr().err, [], message)


def test_port_on_a_file_that_does_not_parse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("libcst")
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef f(:\n    pass\n")
    assert _run(["port", str(bad)]) == 2
    out, err = capsys.readouterr()
    # Line 2, column 7 (the colon), as an editor counts: libcst's message named the next token.
    _assert_one_line(err, ["port"], f"{bad}:2:7: not valid Python: invalid syntax")
    assert "Traceback" not in out


def test_port_takes_a_python_script_without_a_suffix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("libcst")
    script = tmp_path / "train"
    script.write_text("#!/usr/bin/env python3\nimport torch.distributed as dist\ndist.barrier()\n")
    assert _run(["port", str(script)]) == 0
    assert f"{script}: 1 uses, 1 rewritten, 0 left" in capsys.readouterr().out


def test_version_names_compat_and_its_version() -> None:
    from compat import __version__

    done = _compat("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"compat {__version__}\n", "")


@pytest.mark.parametrize("argv", [["docs"], ["docs", "--check"]])
def test_docs_outside_a_checkout_says_where_the_docs_live_and_writes_nothing(
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _run(argv) == 2
    out, err = capsys.readouterr()
    _assert_one_line(err, argv, "--out: no folder docs/api_diff here; the diff docs are part of")
    assert "run this in a checkout of it, or give --out FOLDER" in err
    assert "missing" not in err and out == ""
    assert list(tmp_path.iterdir()) == []


def test_launch_takes_torchruns_nproc_per_node_and_says_when_it_sets_omp_threads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[int] = []

    def launched(nprocs: int, *args: object, **kwargs: object) -> int:
        started.append(nprocs)
        return 0

    monkeypatch.setattr(launch_module, "launch", launched)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    note = "compat launch: OMP_NUM_THREADS=1 for each rank, as torchrun sets it"
    for spelling in ("--nproc-per-node", "--nproc_per_node", "-n"):
        assert _run(["launch", spelling, "2", "--framework", "torch", SCRIPT]) == 0
        assert note in capsys.readouterr().err, spelling
    assert started == [2, 2, 2]
    assert _run(["launch", "-n", "1", "--framework", "torch", SCRIPT]) == 0
    assert note not in capsys.readouterr().err  # one rank: left as it is
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert _run(["launch", "-n", "2", "--framework", "torch", SCRIPT]) == 0
    assert note not in capsys.readouterr().err  # the user's own value is kept


def _compat(*argv: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "compat", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        **kwargs,  # type: ignore[call-overload]
    )


def test_the_entry_point_exits_with_the_code_and_one_line() -> None:
    result = _compat("diff", "nosuch")
    assert result.returncode == 2
    assert result.stdout == ""
    _assert_one_line(result.stderr, ["diff"], "got 'nosuch'")


@pytest.mark.parametrize("argv", [["info"], ["diff", "scatter"]])
def test_a_closed_pipe_ends_quietly(argv: list[str]) -> None:
    """`compat info | head -1`: the reader has gone before compat writes; no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "compat", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 128 + 13  # as a process killed by SIGPIPE
    assert result.stderr == ""


# -- what compat diff accepts -------------------------------------------------------------------

#: A name a user might type, and an API of the pair(s) it must show.
NAMES = [
    ("reduce_scatter", "mindspore.communication.comm_func.reduce_scatter_tensor"),
    ("torch.distributed.all_reduce", "mindspore.mint.distributed.all_reduce"),
    ("dist.all_reduce", "mindspore.mint.distributed.all_reduce"),
    ("mint.distributed.all_gather", "torch.distributed.all_gather"),
    ("ops.communication.reduce_scatter_tensor", "torch.distributed.reduce_scatter_single"),
    ("comm_func.reduce_scatter_tensor", "torch.distributed.reduce_scatter"),
    ("funcol.all_gather_tensor", "mindspore.communication.comm_func.all_gather_into_tensor"),
    ("nn.functional.reduce_scatter", "mindspore.ops.ReduceScatter"),
    ("cuda.comm.scatter", "mindspore.mint.split"),
    ("ops.AllGather", "torch.distributed.all_gather_single"),
    ("all_gather_object", "mindspore.mint.distributed.all_gather_object"),
    ("compat.reduce_scatter_tensor", "torch.distributed.reduce_scatter_single"),
    ("compat.autograd.all_reduce", "torch.distributed.nn.functional.all_reduce"),
    ("get_world_size", "mindspore.communication.get_group_size"),
]


@pytest.mark.parametrize(("name", "shows"), NAMES, ids=[name for name, _ in NAMES])
def test_diff_takes_any_name_a_user_might_type(
    capsys: pytest.CaptureFixture[str], name: str, shows: str
) -> None:
    assert cli.main(["diff", name]) == 0
    out, err = capsys.readouterr()
    assert f"  ->  {shows}" in out or f"{shows}  ->  " in out, out[:2000]
    assert err == ""


def test_diff_of_an_api_shows_its_pairs_and_where_else_it_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["diff", "mint.distributed.all_reduce"]) == 0
    out = capsys.readouterr().out
    pairs = [line for line in out.splitlines() if "  ->  " in line]
    family = tables.family("all_reduce")
    expected = [
        p for p in family["pairs"] if p["mindspore"] == "mindspore.mint.distributed.all_reduce"
    ]
    assert pairs == [f"{p['torch']}  ->  {p['mindspore']}" for p in expected]
    assert f"({len(expected)} of the {len(family['pairs'])} pairs" in out
    assert "Also in family autograd: compat diff autograd" in out


def test_diff_names_an_api_without_counterpart() -> None:
    """Every API no pair maps is reported as such (none is silently dropped)."""
    from compat.tools import docs

    for family in tables.families():
        mapped = {pair[side] for pair in family["pairs"] for side in ("torch", "mindspore")}
        for path in sorted(set(family["apis"]) - mapped):
            assert f"{path}: no " in docs.diff_text(path), path


# -- compat info --------------------------------------------------------------------------------


def test_info_fits_100_columns_and_wide_has_every_algorithm(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli.main(["info"]) == 0
    narrow = capsys.readouterr().out
    assert max(len(line) for line in narrow.splitlines()) <= 100
    assert "one host: point-to-point messages over a ring's size read from the sender" in narrow
    capabilities = tables.load("capabilities")
    ops = {op for entry in capabilities.values() for op in entry["ops"]}
    rows = {line.split()[0] for line in narrow.splitlines() if line.split()}
    assert ops <= rows
    for columns in (100, 80):  # --wide wraps to the terminal's width
        monkeypatch.setenv("COLUMNS", str(columns))
        assert cli.main(["info", "--wide"]) == 0
        wide = capsys.readouterr().out
        assert max(len(line) for line in wide.splitlines()) <= columns
    algorithms = {
        choice["algorithm"]
        for entry in capabilities.values()
        for cap in entry["ops"].values()
        for choice in [cap, *cap.get("choose", [])]
        if "algorithm" in choice
    }
    assert algorithms and all(algorithm in wide for algorithm in algorithms)


def test_info_json_is_the_tables_and_the_versions(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["info", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["capabilities"] == tables.load("capabilities")
    names = [entry["name"] for entry in report["frameworks"]]
    assert names == list(tables.load("frameworks"))
    assert report["direct_reads"] == {"available": True, "why_not": None}  # as mailbox-direct
    torch_entry = report["frameworks"][names.index("torch")]
    assert torch_entry["version"].startswith("2.")
    assert torch_entry["backends"] == [
        name for name, entry in report["capabilities"].items() if entry["framework"] == "torch"
    ]
