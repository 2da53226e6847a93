"""argparse helpers shared by the command modules: value converters (whole numbers, seconds,
sizes) and the flags every command spells the same way (`-o/--output-file`, `--format text|json`).

Each raises `argparse.ArgumentTypeError` with a message that says what was expected and what was
given, which argparse prints after the flag's name (`argument --batch-size: expected 1 or more,
got 0`) and exits 2. Standard library only, like every command module.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from datalint import units


def positive_int(text: str) -> int:
    """A whole number of 1 or more: a batch size, a sample count, a number of classes."""
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def count(text: str) -> int:
    """A whole number of 0 or more: a worker count (0: none), a cap (0: nothing)."""
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    """A number above 0: seconds of a timeout."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected more than 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A number of 0 or more: seconds of a limit that 0 turns off."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {text}")
    return value


def size(text: str) -> int:
    """Bytes, the way disks are sold (`units.parse_size`): for a sample-size threshold (`scan
    --max-bytes`), where MB and MiB both mean what they say."""
    return _converted(units.parse_size, text)


def binary_size(text: str) -> int:
    """Bytes, the way Docker reads `--shm-size` (`units.parse_binary_size`): for memory limits
    (`doctor --shm-bytes`), so a value copied from `docker run` means the same here."""
    return _converted(units.parse_binary_size, text)


def duration(text: str) -> float:
    """Seconds from `2s`, `500ms`, `5m`, `1h`, `1d` or a plain number of seconds (`2.5`)."""
    return _converted(units.parse_duration, text)


def _converted(parse: Callable[[str], Any], text: str) -> Any:
    try:
        return parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


# ----------------------------------------------------------------------------------------------
# One vocabulary for every command: the file a command writes is -o/--output-file; a format is
# --format text|json. Spellings from before stay accepted, hidden, with a warning, for one release.

FORMAT_ALIASES = {"txt": "text"}


class _Deprecated(argparse.Action):
    """An old spelling of a flag: stores into the new flag's dest and says what to write instead."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, instead: str, **kwargs: Any) -> None:
        self.instead = instead
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        print(f"datalint: {option} is deprecated; use {self.instead}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _format_name(text: str) -> str:
    """A --format value, an old name (txt) read as the new one (text) with a warning."""
    if text in FORMAT_ALIASES:
        print(
            f"datalint: --format {text} is deprecated; use --format {FORMAT_ALIASES[text]}", file=sys.stderr
        )
    return FORMAT_ALIASES.get(text, text)


def add_output_file(
    parser: argparse.ArgumentParser, *, metavar: str, help: str, type: Callable[[str], Any] = str
) -> None:
    """-o/--output-file PATH into `args.output_file` (the old --output still works, hidden)."""
    parser.add_argument("-o", "--output-file", dest="output_file", type=type, metavar=metavar, help=help)
    parser.add_argument(
        "--output", dest="output_file", type=type, action=_Deprecated, instead="-o/--output-file",
        help=argparse.SUPPRESS,
    )  # fmt: skip


def add_format(
    parser: Any, choices: Sequence[str], *, default: str = "text", help: str | None = None
) -> None:
    """--format NAME from `choices` into `args.format`; old names (txt) are accepted as aliases."""
    parser.add_argument("--format", type=_format_name, choices=choices, default=default, help=help)
