"""The `datalint` command: argument parsing and exit codes.

Each subcommand lives in its own module under `datalint.commands` and exposes
`register(subparsers)`, which adds its parser(s) with `set_defaults(run=...)`.
Command modules import only the standard library at module level, so building
the parser stays cheap and `datalint check` never pulls in torch, numpy or PIL.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from datalint import __version__
from datalint.errors import DatalintError

# The explicit registry of subcommand modules, in the order `--help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "datalint.commands.check",
    "datalint.commands.rules",
    "datalint.commands.scan",
    "datalint.commands.quarantine",
    "datalint.commands.doctor",
    "datalint.commands.bench",
    "datalint.commands.report",
)

Runner = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="datalint",
        description="Linter and bad-sample scanner for PyTorch data pipelines.",
    )
    parser.add_argument("--version", action="version", version=f"datalint {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a command not built yet is simply not offered
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Runner | None = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return run(args)
    except DatalintError as exc:
        print(f"datalint: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("datalint: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `datalint check | head`: the reader left; nothing is wrong with the input.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # the outermost edge: report, never a raw traceback
        if os.environ.get("DATALINT_DEBUG"):
            raise
        print(
            f"datalint: internal error: {type(exc).__name__}: {exc}\n"
            "  (set DATALINT_DEBUG=1 for the traceback, and please report it)",
            file=sys.stderr,
        )
        return 2


def entry() -> None:
    sys.exit(main())
