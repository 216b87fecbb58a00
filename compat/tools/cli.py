"""The ``compat`` command line: ``launch``, ``bench``, ``diff``, ``docs``, ``info``, ``port``,
``trace``."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from compat.base import tables
from compat.base.errors import TableError, UnsupportedError
from compat.core.dispatch import choose_framework, frameworks, installed

#: The --framework default, as help text.
_FRAMEWORK_DEFAULT = (
    "default: COMPAT_FRAMEWORK, else the launcher's environment, else the installed framework "
    f"(the first of {', '.join(frameworks())} if several are; the banner names the choice)"
)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr, ``compat <subcommand>: ...``
    (argparse's own print the whole usage first), with argparse's exit code 2. Subparsers are of
    the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _framework(args: argparse.Namespace) -> str:
    """``--framework``, else compat.init's rule, except that with several frameworks installed
    the first (frameworks.toml's order) is taken, where init asks to choose. A ValueError (e.g. a
    bad COMPAT_FRAMEWORK) is a usage error, reported by :func:`main`."""
    return choose_framework(args.framework, first_if_several=True)


#: launch()'s parameters as the command line names them, for its refusals.
_LAUNCH_OPTIONS = {
    "nprocs": "-n/--nprocs",
    "devices": "--devices",
    "command": "SCRIPT",
    "module": "-m",
}


def _devices(text: str) -> list[int]:
    """``--devices``'s type: argparse shows an ArgumentTypeError's message as it is."""
    from compat.tools.launch import LaunchError, parse_devices

    try:
        return parse_devices(text)
    except LaunchError as error:
        raise argparse.ArgumentTypeError(error.detail) from None


def _check_command(command: Sequence[str]) -> None:
    """Refuse a SCRIPT that is not a file, or a ``-m MODULE`` whose top-level package Python
    cannot find, before any rank starts (each rank would fail alike, N times)."""
    from compat.tools.launch import LaunchError

    if not command:
        raise LaunchError("command", "expected SCRIPT [ARGS] or -m MODULE [ARGS]; got nothing")
    if command[0] == "-m":
        module = command[1] if len(command) > 1 else ""
        top = module.partition(".")[0]
        # The ranks run `python -m` from this folder, which is on their sys.path.
        here = any(Path(top + suffix).exists() for suffix in ("", ".py"))
        if not top or not (here or importlib.util.find_spec(top)):
            raise LaunchError("module", f"expected a module Python can import; got {module!r}")
    elif not command[0].startswith("-") and not Path(command[0]).is_file():
        raise LaunchError("command", f"expected a Python script; no file {command[0]!r}")


def _launch(args: argparse.Namespace) -> int:
    from compat.tools.launch import assign_devices, launch, sets_omp_threads

    if args.nprocs is None:
        raise ValueError(
            "argument -n/--nprocs: expected the number of ranks (or torchrun's --nproc-per-node); "
            "got none"
        )
    framework = _framework(args)
    # Refused here, before the banner; launch() checks again (it is also called directly).
    assigned = assign_devices(framework, args.nprocs, args.devices)
    command = ["-m", *args.module] if args.module is not None else args.command
    if command[:1] == ["--"]:
        command = command[1:]
    _check_command(command)
    on = "" if assigned is None else f" (devices {','.join(map(str, assigned))})"
    print(
        f"compat launch: {args.nprocs} ranks of {' '.join(command)} on {framework}{on}",
        flush=True,
    )
    if sets_omp_threads(args.nprocs, os.environ):
        # On stderr, as torchrun's warning: stdout stays the banner and the ranks' output.
        print(
            "compat launch: OMP_NUM_THREADS=1 for each rank, as torchrun sets it, so that the "
            "ranks' thread pools do not overload the cores; set OMP_NUM_THREADS to choose",
            file=sys.stderr,
            flush=True,
        )
    return launch(
        args.nprocs,
        command,
        framework,
        devices=args.devices,
        timeout=args.timeout,
        verbose=args.verbose,
    )


class _RankZeroSink:
    """The launcher's sink for ``compat bench``: rank 0's lines without their ``[rank 0]``
    prefix (they are the table); every other line as it comes."""

    prefix = "[rank 0] "

    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, text: str) -> int:
        self._out.write(text.removeprefix(self.prefix))
        return len(text)

    def flush(self) -> None:
        self._out.flush()


def _bench(args: argparse.Namespace) -> int:
    import tempfile

    from compat.tools import bench, launch_styles

    bench.settings(args, args.nprocs)  # fail early: --op, --rounds, --budget, --algorithm
    both = args.framework == "both"
    names = [name for name in frameworks() if name in installed()] if both else [_framework(args)]
    if len(names) < 2 and both:
        raise ValueError(
            f"--framework: 'both' needs {' and '.join(frameworks())} installed; installed: "
            f"{installed()}"
        )
    # --framework both: the same sizes on each (those every framework sweeps by default).
    sizes = args.sizes or (bench.common_sizes(names) if both else None)
    bench.parse_sizes(sizes or bench.default_sizes(names[0]), args.factor)  # fail early
    status, results = 0, {}
    with tempfile.TemporaryDirectory(prefix="compat-bench-") as scratch:
        for framework in names:
            table = os.path.join(scratch, f"{framework}.csv") if both else args.csv
            given = {**vars(args), "sizes": sizes, "csv": table}
            forwarded: list[str] = []
            for action in bench.build_parser()._actions:
                value = given.get(action.dest)
                if value is None or value is False or not action.option_strings:
                    continue
                flag = action.option_strings[0]
                forwarded += [flag] if value is True else [flag, str(value)]
            print(
                f"compat bench: {args.nprocs} ranks on {framework}, started by "
                f"{launch_styles.DESCRIPTIONS[args.launch]} (-m compat.tools.bench "
                f"{' '.join(forwarded)})",
                flush=True,
            )
            # Through compat launch the framework's own logging stays at errors (launch's
            # quiet_env), so that it does not bury the table; the other styles are as users run.
            code = launch_styles.run(
                args.launch,
                args.nprocs,
                framework,
                "compat.tools.bench",
                forwarded,
                timeout=args.timeout,
                sink=_RankZeroSink(sys.stdout),  # type: ignore[arg-type]
            )
            status = status or code
            if both and code == 0:
                results[framework] = table
        if both and len(results) == len(names):
            tables_by_framework = {name: bench.read_csv(path) for name, path in results.items()}
            print("\n".join(bench.side_by_side(tables_by_framework)), flush=True)
            if args.csv:
                bench.merge_csv(args.csv, results.values())
                print(f"# wrote {args.csv}", flush=True)
        elif both:
            print("# no side-by-side table: a framework's run failed (above)", flush=True)
    return status


def _diff(args: argparse.Namespace) -> int:
    from compat.tools import docs

    print(docs.diff_text(args.name, full=args.full), end="")
    return 0


#: Where the diff docs live in compat's repository (``compat docs``' default --out).
_DOCS_OUT = "docs/api_diff"


def _docs(args: argparse.Namespace) -> int:
    from compat.tools import docs

    out = Path(args.out)
    if args.out == _DOCS_OUT and not out.is_dir():
        # Not in a checkout: neither check 38 pages that are not there nor write them here.
        raise ValueError(
            f"--out: no folder {_DOCS_OUT} here; the diff docs are part of compat's repository: "
            "run this in a checkout of it, or give --out FOLDER (compat diff NAME prints one "
            "family's differences without any file)"
        )
    if args.check:
        problems = docs.stale(out)
        for problem in problems:
            print(f"compat docs --check: {out / problem}", file=sys.stderr)
        if problems:
            again = "compat docs" + ("" if args.out == _DOCS_OUT else f" --out {args.out}")
            print(f"compat docs --check: stale; run `{again}` to regenerate", file=sys.stderr)
            return 1
        print(f"compat docs --check: {out} is current")
        return 0
    written = docs.write(out)
    print(f"compat docs: wrote {len(written)} pages to {out}")
    return 0


def _version(module: str) -> str:
    # The installed distribution's metadata: no need to import the framework.
    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"


@dataclasses.dataclass(frozen=True)
class _FrameworkInfo:
    """A framework as ``compat info`` reports it; ``version`` is None when not installed."""

    name: str
    version: str | None
    backends: list[str]


#: What ``compat info`` says of a backend without a capabilities.toml entry.
OTHER_BACKENDS = (
    "any other the framework takes (torch: mpi, ucc, ccl, torch_npu's hccl, one registered with "
    "Backend.register_backend; 'cpu:gloo,cuda:nccl' uses the entry of this process's device) "
    "is passed to the framework and runs natively, no compat algorithm: not verified by compat"
)


def _info(args: argparse.Namespace) -> int:
    from compat import __version__
    from compat.core.capabilities import running
    from compat.tools import docs
    from compat.transport import mailbox

    present = set(installed())
    # each backend as it holds for the installed release of its framework
    capabilities = running()
    found = [
        _FrameworkInfo(
            name,
            _version(tables.lookup("frameworks", name, "module")) if name in present else None,
            [backend for backend, entry in capabilities.items() if entry["framework"] == name],
        )
        for name in frameworks()
    ]
    refused = mailbox.direct_read_check()
    if args.json:
        report = {
            "compat": __version__,
            "frameworks": [dataclasses.asdict(info) for info in found],
            "other_backends": OTHER_BACKENDS,
            "capabilities": capabilities,
            "direct_reads": {"available": refused is None, "why_not": refused},
        }
        print(json.dumps(report, indent=1))
        return 0
    print(f"compat {__version__}")
    for info in found:
        state = info.version or "not installed"
        print(f"  {info.name}: {state}; backends: {', '.join(info.backends)}")
    # Wrapped to the terminal (100 columns where none), as the matrix below.
    width = max(60, shutil.get_terminal_size((100, 24)).columns)
    wrapped = textwrap.wrap(
        OTHER_BACKENDS, width, initial_indent="  other backends: ", subsequent_indent="    "
    )
    print("\n".join(wrapped))
    if refused is None:
        print("  one host: point-to-point messages over a ring's size read from the sender")
    else:
        print("  one host: point-to-point messages over a ring's size stream through the ring")
        print(f"    (not read from the sender: {refused})")
    for line in _emulated_ops(capabilities) + _older_facts(capabilities):
        print("\n".join(textwrap.wrap(line, width, subsequent_indent="    ")))
    print()
    # --wide: one block per collective, wrapped to the terminal's width.
    print(docs.matrix_text(wide=args.wide, width=width, capabilities=capabilities), end="")
    return 0


def _emulated_ops(capabilities: dict[str, Any]) -> list[str]:
    """A line per backend whose own reduction lacks some ReduceOps at every release (its
    ``emulate`` rules): what compat runs for them instead; and one per backend that lacks some
    dtypes compat moves as their bytes (``as_bytes``), and one per backend that lacks the complex
    dtypes compat moves as real numbers (``as_real``)."""
    lines = []
    for key in capabilities:
        carried = tables.lookup("capabilities", key).get("as_bytes", {}).get("dtypes", ())
        if carried:
            lines.append(
                f"  {key} moves {'/'.join(carried)} as bytes (uint8 views of the same memory; "
                "no op reduces them)"
            )
        real = tables.lookup("capabilities", key).get("as_real")
        if real:
            lines.append(
                f"  {key} moves {'/'.join(real['dtypes'])} as real numbers (views of the same "
                f"memory); only {'/'.join(real['reduce_ops'])} reduce them"
            )
        rules = tables.lookup("capabilities", key).get("emulate", ())
        if rules:
            emulated = [
                f"{rule['collective']} with {'/'.join(rule['ops'])} by {rule['algorithm']}"
                for rule in rules
            ]
            lines.append(f"  {key} reduces some ops itself: {'; '.join(emulated)}")
    return lines


def _older_facts(capabilities: dict[str, Any]) -> list[str]:
    """A line per backend whose installed framework release is older than a fact of its
    capabilities.toml entry: what runs otherwise there (the matrix below shows it)."""
    lines = []
    for key, entry in capabilities.items():
        newest = tables.lookup("capabilities", key)
        if entry is newest:
            continue
        version = _version(tables.lookup("frameworks", entry["framework"], "module"))
        always = newest.get("emulate", ())  # the backend's own rules: _emulated_ops
        emulated = [
            f"{rule['collective']} with {'/'.join(rule['ops'])} by {rule['algorithm']}"
            for rule in entry.get("emulate", ())
            if rule not in always
        ] + [
            f"{op} by {cap['algorithm']}"
            for op, cap in entry["ops"].items()
            if cap is not newest["ops"][op] and cap["impl"] == "emulated"
        ]
        lines.append(
            f"  {key} at {entry['framework']} {version}, which lacks what later releases have: "
            f"emulated {'; '.join(emulated)} (docs/api_diff/capabilities.md)"
        )
    return lines


def _is_python(path: Path) -> bool:
    """A .py/.pyi file, or a script whose #! line runs python."""
    if path.suffix in (".py", ".pyi"):
        return True
    with path.open("rb") as file:
        first = file.readline(200)
    return first.startswith(b"#!") and b"python" in first


def _port(args: argparse.Namespace) -> int:
    from compat.tools import port

    if args.write and (args.diff or args.check):
        given = "--diff" if args.diff else "--check"
        raise ValueError(f"--write: rewrites the files, {given} writes nothing: give one of them")
    for path in args.paths:
        if not Path(path).exists():
            raise ValueError(f"PATH: expected an existing file or folder; got {path!r}")
        if Path(path).is_file() and not _is_python(Path(path)):
            raise ValueError(
                f"PATH: expected a Python file (.py, or a script whose first line runs python) "
                f"or a folder; got {path!r}"
            )
    return port.run(
        args.paths,
        write=args.write,
        diff=args.diff,
        check=args.check,
        as_json=args.json,
        verbose=args.verbose,
    )


@dataclasses.dataclass(frozen=True)
class _Option:
    """One ``add_argument`` call: its flags (or positional name) and keyword arguments."""

    flags: tuple[str, ...]
    settings: dict[str, Any]


def _option(*flags: str, **settings: Any) -> _Option:
    return _Option(flags, settings)


@dataclasses.dataclass(frozen=True)
class _Command:
    """One subcommand: its help, its options, the function that runs it, and the parsers whose
    options it takes as well (bench's rank-side options)."""

    name: str
    help: str
    description: str
    run: Callable[[argparse.Namespace], int]
    options: tuple[_Option, ...]
    parents: Callable[[], list[argparse.ArgumentParser]] | None = None


def _bench_options() -> list[argparse.ArgumentParser]:
    from compat.tools import bench

    return [bench.build_parser()]


def _commands() -> tuple[_Command, ...]:
    """The subcommands, in ``compat --help``'s order (built when the parser is: the framework
    choices come from the tables)."""
    return (
        _Command(
            "launch",
            "start N local ranks of a script",
            "Start N local ranks of SCRIPT with the environment its framework's own "
            "launcher sets. torch (as torchrun): MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK, "
            "WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_NAME, ROLE_RANK, "
            "ROLE_WORLD_SIZE. MindSpore (as msrun): a scheduler process plus N workers with "
            "MS_ROLE, MS_NODE_ID, MS_SCHED_HOST, MS_SCHED_PORT, MS_WORKER_NUM, RANK_ID, "
            "RANK_SIZE, DEVICE_ID (and LOCAL_RANK). Both: COMPAT_FRAMEWORK. Where the framework "
            "sees devices (GPUs, NPUs) the ranks run on them, one each: N may not exceed their "
            "number (exit code 2). A SCRIPT that is not a file, or a MODULE Python cannot find, "
            "is refused before any rank starts (exit code 2). Output is prefixed by rank; if a "
            "rank fails the others are stopped and the exit code is non-zero. Ctrl-C (SIGINT), "
            "SIGTERM or SIGHUP to the launcher is passed on to every rank, which is killed if "
            "still running 3 s later, and ends the scheduler; the exit code is then 128 + the "
            "signal's number (130, 143, 129).",
            _launch,
            (
                _option(
                    "-n",
                    "--nprocs",
                    type=int,
                    help="number of ranks (torchrun's --nproc-per-node too)",
                ),
                # torchrun's spellings, taken as they are (hidden: -n/--nprocs names the option
                # in messages).
                _option("--nproc-per-node", dest="nprocs", type=int, help=argparse.SUPPRESS),
                _option("--nproc_per_node", dest="nprocs", type=int, help=argparse.SUPPRESS),
                _option(
                    "--devices",
                    type=_devices,
                    default=None,
                    metavar="I,J,...",
                    help="device indexes on this node (as the framework counts them, after "
                    "CUDA_VISIBLE_DEVICES / ASCEND_RT_VISIBLE_DEVICES): rank i runs on the i-th; "
                    "at least N, each once. torch: every rank gets CUDA_VISIBLE_DEVICES=the "
                    "ranks' devices, so LOCAL_RANK i is the i-th; MindSpore: DEVICE_ID=the i-th. "
                    "Default: rank i runs on device i",
                ),
                _option("--framework", choices=frameworks(), help=_FRAMEWORK_DEFAULT),
                _option(
                    "--timeout",
                    type=float,
                    default=None,
                    help="stop the job after this many seconds (exit code 124)",
                ),
                _option(
                    "--verbose",
                    action="store_true",
                    help="let the framework log at its own default level (MindSpore: warnings "
                    "too); without it the ranks log errors only, unless GLOG_v or "
                    "GLOG_minloglevel is set",
                ),
                # An option that takes the rest of the line: as a positional, `-m` would be
                # taken for an unknown option of compat launch's.
                _option(
                    "-m",
                    dest="module",
                    nargs=argparse.REMAINDER,
                    metavar="MODULE [ARGS]",
                    help="run a module as python -m does (instead of SCRIPT)",
                ),
                _option("command", nargs=argparse.REMAINDER, help="SCRIPT [ARGS]"),
            ),
        ),
        _Command(
            "bench",
            "time compat's collectives against the native ones (like nccl-tests)",
            "Start N ranks (through compat launch) that time compat's collectives and the "
            "framework's own, alternating, per op and size: time per call, algbw and busbw "
            "(nccl-tests' formulas), the algorithm compat chose, and the ratio compat/native. "
            "Rank 0 prints a row per size as it completes. Where the backend has no native call "
            "(MCCL's reduce_scatter), native is the best-known plain approach, named in the "
            "header. Every collective of compat's API, isend/irecv pairs and barrier (--op); "
            "--framework both runs torch/Gloo and MindSpore/MCCL on the same sizes and prints "
            "them side by side. The default sweep of every op takes a few minutes per framework "
            "(5 rounds of 0.02 s per size); a full one: --rounds 10 --budget 0.1 --control.",
            _bench,
            (
                _option("-n", "--nprocs", type=int, default=2, help="number of ranks (2)"),
                _option(
                    "--framework",
                    choices=[*frameworks(), "both"],
                    help=f"{_FRAMEWORK_DEFAULT}; 'both': every installed framework in turn, the "
                    "same sizes (those all sweep by default), then their times side by side",
                ),
                _option(
                    "--timeout",
                    type=float,
                    default=None,
                    help="stop the job after this many seconds",
                ),
            ),
            parents=_bench_options,
        ),
        _Command(
            "diff",
            "print one API family's torch/MindSpore differences",
            "Print the parameter-difference table of an API family, e.g. "
            "`compat diff reduce_scatter` (a compat function or torch/MindSpore API name works "
            "too).",
            _diff,
            (
                _option("name", help="family, compat function, or torch/MindSpore API name"),
                _option(
                    "--full",
                    action="store_true",
                    help="every pair with every row (default: what differs)",
                ),
            ),
        ),
        _Command(
            "docs",
            "generate the diff docs from the mapping tables",
            "Write docs/api_diff/ from mapping_tables/; with --check, exit 1 if the pages there "
            "differ from what the tables generate.",
            _docs,
            (
                _option(
                    "--out",
                    default=_DOCS_OUT,
                    help=f"output folder (default: {_DOCS_OUT}, which must exist: a checkout of "
                    "compat)",
                ),
                _option("--check", action="store_true", help="only compare; exit 1 when stale"),
            ),
        ),
        _Command(
            "port",
            "find torch.distributed calls and rewrite them to compat",
            "Report every torch.distributed and torch.cuda.comm call in the Python files "
            "(folders: their *.py files) with its compat and MindSpore counterparts and the "
            "parameter differences from the mapping tables; --write rewrites the calls compat "
            "can take to compat calls (formatting and comments kept), --diff prints the rewrite "
            "as a unified diff instead. Needs libcst (pip install 'collective-compat[port]').",
            _port,
            (
                _option("paths", nargs="+", metavar="PATH", help="Python files or folders"),
                _option("--write", action="store_true", help="rewrite the files in place"),
                _option("--diff", action="store_true", help="print a unified diff; write nothing"),
                _option(
                    "--check",
                    action="store_true",
                    help="write nothing; exit 1 if a file would change or a use is left on torch "
                    "(for CI)",
                ),
                _option("--json", action="store_true", help="the report as JSON, for tools"),
                _option(
                    "--verbose",
                    action="store_true",
                    help="list every use, not only those left on torch",
                ),
            ),
        ),
        _Command(
            "info",
            "installed frameworks, backends and the capability matrix",
            "Print the installed frameworks and versions (a framework that is not installed is "
            "not imported), their backends and the capability matrix: per backend and "
            "collective native, emulated or unsupported, in 100 columns.",
            _info,
            (
                _option(
                    "--wide",
                    action="store_true",
                    help="the matrix with every algorithm and size or dtype choice (wider than "
                    "100 columns)",
                ),
                _option(
                    "--json",
                    action="store_true",
                    help="everything as JSON, for tools: versions, backends and capabilities.toml",
                ),
            ),
        ),
        _Command(
            "trace",
            "find where the ranks of a job parted, from their flight-recorder dumps",
            "Read every rank's flight-recorder dump in DIR (rank_<N>: what compat writes on "
            "CollectiveTimeout, CollectiveMismatchError, PeerLostError, a stop signal through "
            "compat launch, or compat.trace.dump_trace(); torch's own dumps too) and say in a "
            "few lines the first call on a group that some ranks never reached, or that the "
            "ranks made differently, or that did not complete, with each rank's last calls side "
            "by side. Exit code 0 where the dumps agree, 1 where the ranks parted.",
            _trace,
            (
                _option(
                    "dir",
                    metavar="DIR",
                    nargs="?",
                    default=None,
                    help="the dumps' folder (default: COMPAT_TRACE_DIR, else compat_trace in the "
                    "system's temporary folder)",
                ),
            ),
        ),
    )


def build_parser() -> argparse.ArgumentParser:
    """``compat``'s parser: a subparser per entry of :func:`_commands`."""
    parser: argparse.ArgumentParser = _Parser(
        prog="compat", description="One API for collective communication on PyTorch and MindSpore."
    )
    from compat import __version__

    parser.add_argument("--version", action="version", version=f"compat {__version__}")
    subparsers = parser.add_subparsers(dest="subcommand", required=True)
    for command in _commands():
        subparser = subparsers.add_parser(
            command.name,
            parents=command.parents() if command.parents is not None else [],
            help=command.help,
            description=command.description,
        )
        for option in command.options:
            subparser.add_argument(*option.flags, **option.settings)
        subparser.set_defaults(run=command.run)
    return parser


def _trace(args: argparse.Namespace) -> int:
    from compat.core.recorder import trace_dir
    from compat.tools import trace_report

    return trace_report.report(args.dir or trace_dir(), sys.stdout)


#: What a subcommand raises for a mistake of the user's (or of the installation's), with the exit
#: code: the first class that matches counts (TableError is a ValueError). compat's checks raise
#: ValueError for a bad value (LaunchError, bench's --sizes, COMPAT_FRAMEWORK, an unknown name),
#: a usage error as argparse's. Anything else is a bug in compat and keeps its traceback.
_FAILURES: tuple[tuple[type[Exception], int], ...] = (
    (TableError, 1),
    (ValueError, 2),
    (UnsupportedError, 1),
    (OSError, 1),
)


def _one_line(error: Exception) -> str:
    """The error's message on one line; a launch refusal names the option as argparse does."""
    from compat.tools.launch import LaunchError

    if isinstance(error, LaunchError):
        text = f"argument {_LAUNCH_OPTIONS.get(error.param, error.param)}: {error.detail}"
    elif isinstance(error, OSError) and error.filename is not None:
        text = f"{error.strerror}: {error.filename}"
    else:
        text = str(error)
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return its exit code. Every user error is one line on stderr,
    ``compat <subcommand>: ...``, never a traceback: exit code 2 for a bad value (as argparse's
    usage errors), 1 for a failure (a file that cannot be written, a broken mapping table)."""
    prog = "compat"  # until the subcommand is known: the parser reads the tables too
    try:
        args, unknown = build_parser().parse_known_args(argv)
        prog = f"compat {args.subcommand}"
        if unknown:
            # argparse would name the top-level parser ("compat: unrecognized arguments").
            message = f"unrecognized arguments: {' '.join(unknown)} (see {prog} --help)"
            print(f"{prog}: {message}", file=sys.stderr)
            return 2
        code: int = args.run(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, rather than at exit
    except BrokenPipeError:
        # The reader has gone (`compat info | head`): stop quietly, as other tools do, with
        # stdout pointed at /dev/null so that Python's flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except Exception as error:
        for kind, failure_code in _FAILURES:
            if isinstance(error, kind):
                print(f"{prog}: {_one_line(error)}", file=sys.stderr)
                return failure_code
        raise
    return code


if __name__ == "__main__":
    sys.exit(main())
