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

# The explicit registry: command name -> the module that registers it, in the order `--help` lists them.
COMMANDS: dict[str, str] = {
    "check": "datalint.commands.check",
    "rule": "datalint.commands.rules",
    "rules": "datalint.commands.rules",
    "scan": "datalint.commands.scan",
    "quarantine": "datalint.commands.quarantine",
    "doctor": "datalint.commands.doctor",
    "bench": "datalint.commands.bench",
    "report": "datalint.commands.report",
}

Runner = Callable[[argparse.Namespace], int]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or with `only` a known command name, just that command's (a faster start)."""
    parser = argparse.ArgumentParser(
        prog="datalint",
        description="Linter and bad-sample scanner for PyTorch data pipelines.",
    )
    parser.add_argument("--version", action="version", version=f"datalint {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [COMMANDS[only]] if only in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    """The subcommand the arguments name, if the first one is a command (not an option)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only=_command_named(arguments))
    args = parser.parse_args(arguments)
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
