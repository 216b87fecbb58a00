"""The ``compat`` command line: ``compat launch``, and more as they are added."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from compat.dispatch import frameworks, installed


def _default_framework() -> str:
    chosen = os.environ.get("COMPAT_FRAMEWORK")
    if chosen:
        return chosen
    present = installed()
    # torch starts faster; with both installed it is the default, and the banner says so.
    return "torch" if "torch" in present or not present else present[0]


def _launch(args: argparse.Namespace) -> int:
    from compat.launch import launch

    framework = args.framework or _default_framework()
    print(
        f"compat launch: {args.nprocs} ranks of {' '.join(args.command)} on {framework}",
        flush=True,
    )
    return launch(args.nprocs, args.command, framework, timeout=args.timeout)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compat", description="One API for collective communication on PyTorch and MindSpore."
    )
    commands = parser.add_subparsers(dest="subcommand", required=True)

    launch = commands.add_parser(
        "launch",
        help="start N local ranks of a script",
        description="Start N local ranks of SCRIPT with the environment its framework expects. "
        "Output is prefixed by rank; if a rank fails the others are stopped and the exit code is "
        "non-zero.",
    )
    launch.add_argument("-n", "--nprocs", type=int, required=True, help="number of ranks")
    launch.add_argument(
        "--framework",
        choices=frameworks(),
        help="default: COMPAT_FRAMEWORK, else torch if installed",
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
    launch.set_defaults(run=_launch)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.subcommand == "launch" and not args.command:
        parser.error("launch: expected SCRIPT [ARGS]")
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
