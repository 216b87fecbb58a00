"""The ``compat`` command line: ``launch``, ``bench``, ``diff``, ``docs``, ``info`` and ``port``."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from compat import tables
from compat.dispatch import choose_framework, frameworks, installed

#: The --framework default, as help text.
_FRAMEWORK_DEFAULT = (
    "default: COMPAT_FRAMEWORK, else the launcher's environment, else the installed framework "
    f"(the first of {', '.join(frameworks())} if several are; the banner names the choice)"
)


def _framework(args: argparse.Namespace) -> str:
    """``--framework``, else compat.init's rule, except that with several frameworks installed
    the first (frameworks.toml's order) is taken, where init asks to choose."""
    try:
        return choose_framework(args.framework, first_if_several=True)
    except ValueError as error:
        raise SystemExit(f"compat {args.subcommand}: {error}") from None


#: launch()'s parameters as the command line names them, for its refusals.
_LAUNCH_OPTIONS = {"nprocs": "-n/--nprocs", "devices": "--devices"}


def _devices(text: str) -> list[int]:
    """``--devices``'s type: argparse shows an ArgumentTypeError's message as it is."""
    from compat.tools.launch import LaunchError, parse_devices

    try:
        return parse_devices(text)
    except LaunchError as error:
        raise argparse.ArgumentTypeError(error.detail) from None


def _launch(args: argparse.Namespace) -> int:
    from compat.tools.launch import assign_devices, launch

    framework = _framework(args)
    # Refused here, before the banner; launch() checks again (it is also called directly).
    assigned = assign_devices(framework, args.nprocs, args.devices)
    on = "" if assigned is None else f" (devices {','.join(map(str, assigned))})"
    print(
        f"compat launch: {args.nprocs} ranks of {' '.join(args.command)} on {framework}{on}",
        flush=True,
    )
    return launch(args.nprocs, args.command, framework, devices=args.devices, timeout=args.timeout)


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
    from compat.tools import bench
    from compat.tools.launch import launch

    framework = _framework(args)
    bench.parse_sizes(args.sizes or bench.default_sizes(framework), args.factor)  # fail early
    forwarded: list[str] = []
    for action in bench.build_parser()._actions:
        value = getattr(args, action.dest, None)
        if value is None or value is False or not action.option_strings:
            continue
        flag = action.option_strings[0]
        forwarded += [flag] if value is True else [flag, str(value)]
    print(
        f"compat bench: {args.nprocs} ranks on {framework} (compat launch -n {args.nprocs} "
        f"--framework {framework} -m compat.tools.bench {' '.join(forwarded)})",
        flush=True,
    )
    # E.g. MindSpore's logging turned down (it would bury the table); an explicit value wins.
    defaults = tables.lookup("frameworks", framework).get("bench_env", {})
    env = {name: os.environ.get(name, value) for name, value in defaults.items()}
    return launch(
        args.nprocs,
        ["-m", "compat.tools.bench", *forwarded],
        framework,
        timeout=args.timeout,
        env=env,
        sink=_RankZeroSink(sys.stdout),  # type: ignore[arg-type]
    )


def _diff(args: argparse.Namespace) -> int:
    from compat.tools import docs

    print(docs.diff_text(args.name), end="")
    return 0


def _docs(args: argparse.Namespace) -> int:
    from compat.tools import docs

    out = Path(args.out)
    if args.check:
        problems = docs.stale(out)
        for problem in problems:
            print(f"compat docs --check: {out / problem}", file=sys.stderr)
        if problems:
            print("compat docs --check: stale; run `compat docs` to regenerate", file=sys.stderr)
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


def _info(args: argparse.Namespace) -> int:
    from compat import __version__
    from compat.tools import docs

    print(f"compat {__version__}")
    present = set(installed())
    capabilities = tables.load("capabilities")
    for name in frameworks():
        module = tables.lookup("frameworks", name, "module")
        state = _version(module) if name in present else "not installed"
        backends = [b for b, entry in capabilities.items() if entry["framework"] == name]
        print(f"  {name}: {state}; backends: {', '.join(backends)}")
    print()
    print(docs.matrix_text(), end="")
    return 0


def _port(args: argparse.Namespace) -> int:
    from compat.tools import port

    return port.run(
        args.paths,
        write=args.write,
        diff=args.diff,
        check=args.check,
        as_json=args.json,
        verbose=args.verbose,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compat", description="One API for collective communication on PyTorch and MindSpore."
    )
    commands = parser.add_subparsers(dest="subcommand", required=True)

    launch = commands.add_parser(
        "launch",
        help="start N local ranks of a script",
        description="Start N local ranks of SCRIPT with the environment its framework's own "
        "launcher sets. torch (as torchrun): MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK, "
        "WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_NAME, ROLE_RANK, "
        "ROLE_WORLD_SIZE. MindSpore (as msrun): a scheduler process plus N workers with MS_ROLE, "
        "MS_NODE_ID, MS_SCHED_HOST, MS_SCHED_PORT, MS_WORKER_NUM, RANK_ID, RANK_SIZE, DEVICE_ID "
        "(and LOCAL_RANK). Both: COMPAT_FRAMEWORK. Where the framework sees devices (GPUs, "
        "NPUs) the ranks run on them, one each: N may not exceed their number (exit code 2). "
        "Output is prefixed by rank; if a rank fails the others are stopped and the exit code is "
        "non-zero. Ctrl-C (SIGINT), SIGTERM or SIGHUP to the launcher is passed on to every rank, "
        "which is killed if still running 3 s later, and ends the scheduler; the exit code is then "
        "128 + the signal's number (130, 143, 129).",
    )
    launch.add_argument("-n", "--nprocs", type=int, required=True, help="number of ranks")
    launch.add_argument(
        "--devices",
        type=_devices,
        default=None,
        metavar="I,J,...",
        help="device indexes on this node (as the framework counts them, after "
        "CUDA_VISIBLE_DEVICES / ASCEND_RT_VISIBLE_DEVICES): rank i runs on the i-th; at least N, "
        "each once. torch: every rank gets CUDA_VISIBLE_DEVICES=the ranks' devices, so LOCAL_RANK "
        "i is the i-th; MindSpore: DEVICE_ID=the i-th. Default: rank i runs on device i",
    )
    launch.add_argument(
        "--framework",
        choices=frameworks(),
        help=_FRAMEWORK_DEFAULT,
    )
    launch.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="stop the job after this many seconds (exit code 124)",
    )
    launch.add_argument(
        "command", nargs=argparse.REMAINDER, help="SCRIPT [ARGS] or -m MODULE [ARGS]"
    )
    launch.set_defaults(run=_launch, subparser=launch)

    from compat.tools import bench as bench_module

    bench = commands.add_parser(
        "bench",
        parents=[bench_module.build_parser()],
        help="time compat's collectives against the native ones (like nccl-tests)",
        description="Start N ranks (through compat launch) that time compat's collectives and "
        "the framework's own, alternating, per op and size: time per call, algbw and busbw "
        "(nccl-tests' formulas), the algorithm compat chose, and the ratio compat/native. Rank 0 "
        "prints a row per size as it completes. Where the backend has no native call (MCCL's "
        "reduce_scatter), native is the best-known plain approach, named in the header.",
    )
    bench.add_argument("-n", "--nprocs", type=int, default=2, help="number of ranks (2)")
    bench.add_argument("--framework", choices=frameworks(), help=_FRAMEWORK_DEFAULT)
    bench.add_argument(
        "--timeout", type=float, default=None, help="stop the job after this many seconds"
    )
    bench.set_defaults(run=_bench, subparser=bench)

    diff = commands.add_parser(
        "diff",
        help="print one API family's torch/MindSpore differences",
        description="Print the parameter-difference table of an API family, e.g. "
        "`compat diff reduce_scatter` (a compat function or torch/MindSpore API name works too).",
    )
    diff.add_argument("name", help="family, compat function, or torch/MindSpore API name")
    diff.set_defaults(run=_diff)

    docs = commands.add_parser(
        "docs",
        help="generate the diff docs from the mapping tables",
        description="Write docs/api_diff/ from mapping_tables/; with --check, exit 1 if the "
        "pages there differ from what the tables generate.",
    )
    docs.add_argument("--out", default="docs/api_diff", help="output folder (docs/api_diff)")
    docs.add_argument("--check", action="store_true", help="only compare; exit 1 when stale")
    docs.set_defaults(run=_docs)

    port = commands.add_parser(
        "port",
        help="find torch.distributed calls and rewrite them to compat",
        description="Report every torch.distributed and torch.cuda.comm call in the Python files "
        "(folders: their *.py files) with its compat and MindSpore counterparts and the parameter "
        "differences from the mapping tables; --write rewrites the calls compat can take to "
        "compat calls (formatting and comments kept), --diff prints the rewrite as a unified diff "
        "instead. Needs libcst (pip install 'collective-compat[port]').",
    )
    port.add_argument("paths", nargs="+", metavar="PATH", help="Python files or folders")
    port.add_argument("--write", action="store_true", help="rewrite the files in place")
    port.add_argument("--diff", action="store_true", help="print a unified diff; write nothing")
    port.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a file would change or a use is left on torch (for CI)",
    )
    port.add_argument("--json", action="store_true", help="the report as JSON, for tools")
    port.add_argument(
        "--verbose", action="store_true", help="list every use, not only those left on torch"
    )
    port.set_defaults(run=_port)

    info = commands.add_parser(
        "info",
        help="installed frameworks, backends and the capability matrix",
        description="Print the installed frameworks and versions (a framework that is not "
        "installed is not imported), their backends and the capability matrix.",
    )
    info.set_defaults(run=_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.subcommand == "launch" and not args.command:
        parser.error("launch: expected SCRIPT [ARGS]")
    from compat.tools.launch import LaunchError

    try:
        code: int = args.run(args)
    except LaunchError as error:
        # A bad argument found before anything started: a usage error (exit code 2), naming the
        # option as argparse names it.
        option = _LAUNCH_OPTIONS.get(error.param, error.param)
        usage: argparse.ArgumentParser = args.subparser
        usage.error(f"argument {option}: {error.detail}")
    return code


if __name__ == "__main__":
    sys.exit(main())
