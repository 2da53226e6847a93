"""The `datalint` command: argument parsing and exit codes.

Each subcommand lives in its own module under `datalint.commands` and exposes
`register(subparsers)`, which adds its parser(s) with `set_defaults(run=...)`.
Command modules import only the standard library at module level, so building
the parser stays cheap and `datalint check` never pulls in torch, numpy or PIL.

A command that needs an optional part of datalint sets `extras=("scan",)` among its defaults; `main`
checks them once the arguments parse, before the command does any work (datalint.extras). Every
parser is a `DatalintParser`: a usage error shows the subcommand's own usage and the closest flag or
value, and `datalint.text.did_you_mean()` gives commands the same suggestion for values they check themselves.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from datalint import __version__
from datalint.commands.help import HelpFormatter
from datalint.errors import DatalintError
from datalint.text import did_you_mean, exception_text, printable, printable_lines, safe_str

# The explicit registry: command name -> the module that registers it, in the order `--help` lists them.
COMMANDS: dict[str, str] = {
    "check": "datalint.commands.check",
    "rule": "datalint.commands.rules",
    "rules": "datalint.commands.rules",
    "scan": "datalint.commands.scan",
    "watch": "datalint.commands.watch",
    "quarantine": "datalint.commands.quarantine",
    "doctor": "datalint.commands.doctor",
    "bench": "datalint.commands.bench",
    "run": "datalint.commands.run",
    "report": "datalint.commands.report",
    "docs": "datalint.commands.docs",
    "serve": "datalint.commands.serve",
    "guard": "datalint.commands.guard",
}

Runner = Callable[[argparse.Namespace], int]

_UNRECOGNIZED = "unrecognized arguments: "


class DatalintParser(argparse.ArgumentParser):
    """argparse, with errors that name the subcommand's usage and suggest the closest flag or value."""

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            # argparse reports leftovers from the top-level parser, with the top-level usage;
            # the subcommand that was given owns them.
            self._subcommand_parser(parsed).error(_UNRECOGNIZED + " ".join(unknown))
        return parsed

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}{self._suggestion(message)}\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # An invalid choice (a command, --format's value) gets the closest valid one appended.
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as exc:
            if action.choices is None or not isinstance(value, str):
                raise
            hint = did_you_mean(value, [str(choice) for choice in action.choices])
            raise argparse.ArgumentError(action, f"{exc.message}{hint}") from None

    def _suggestion(self, message: str) -> str:
        """For flags no parser knows: the closest flag of this (sub)command."""
        if not message.startswith(_UNRECOGNIZED):
            return ""
        flags = [word for word in message[len(_UNRECOGNIZED) :].split() if word.startswith("--")]
        options = [
            option
            for action in self._actions
            if action.help != argparse.SUPPRESS
            for option in action.option_strings
            if option.startswith("--")
        ]
        for flag in flags:
            hint = did_you_mean(flag.split("=", 1)[0], options)
            if hint:
                return hint
        return ""

    def _subcommand_parser(self, parsed: Any) -> argparse.ArgumentParser:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
                if isinstance(chosen, DatalintParser):
                    return chosen._subcommand_parser(parsed)
                if chosen is not None:
                    return chosen
        return self


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser, or with `only` a known command name, just that command's (a faster start)."""
    parser = DatalintParser(
        prog="datalint",
        description="Linter and bad-sample scanner for PyTorch data pipelines.",
        formatter_class=HelpFormatter,  # no shutil import and terminal query per argument
    )
    parser.add_argument("--version", action="version", version=f"datalint {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = [COMMANDS[only]] if only in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        __import__(name, fromlist=["register"]).register(subparsers)  # (-X importtime lists __import__)
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
        _require_extras(args)
        return run(args)
    except DatalintError as exc:
        print(f"datalint: error: {printable_lines(safe_str(exc))}", file=sys.stderr)
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
            f"datalint: internal error: {printable(exception_text(exc))}\n"
            "  (set DATALINT_DEBUG=1 for the traceback, and please report it with `datalint --version`)",
            file=sys.stderr,
        )
        return 2


def _require_extras(args: argparse.Namespace) -> None:
    """Refuse, before any work, a command whose optional dependencies are not installed."""
    extras: tuple[str, ...] = getattr(args, "extras", ())
    if extras:
        from datalint.extras import require

        for extra in extras:
            require(extra, f"`datalint {args.command}`")


# True in the `datalint` command's own process (and the workers it forks), never when datalint is
# imported as a library: only then may datalint change how third-party modules import (store.py).
AS_COMMAND = False


def entry() -> None:
    global AS_COMMAND
    AS_COMMAND = True
    code = main()
    if sys.argv[1:2] == ["check"]:
        _leave_now(code)
    sys.exit(code)


def _leave_now(code: int) -> None:
    """Exit without tearing the interpreter down, as `datalint check` (run by editors and hooks on
    every save) may: freeing every module and object was 13 ms of CPU of a one-file check whose
    lint takes 3. Exit handlers still run and the streams are flushed; every file the check writes
    (reports, fixes, caches) is closed before `main` returns. Where flushing fails, the ordinary
    exit reports it."""
    import atexit

    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # sys.exit flushes again, and reports it as it always did
        return
    os._exit(code)
