"""argparse's help formatter, minus a cost every start paid: a terminal-size query per argument.

argparse builds a formatter for every `add_argument` (to check the metavar), and each asks
`shutil.get_terminal_size()`: importing shutil (with bz2 and lzma) and one ioctl per flag, on
every run, though help is printed on few. This one reads the width once, with `os` alone,
the way shutil does it: $COLUMNS, else the terminal of stdout, else 80 columns.
"""

from __future__ import annotations

import argparse
import os
import sys


class HelpFormatter(argparse.HelpFormatter):
    _terminal_width: int | None = None

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ) -> None:
        super().__init__(prog, indent_increment, max_help_position, width or _width())


def _width() -> int:
    if HelpFormatter._terminal_width is None:
        HelpFormatter._terminal_width = _columns() - 2  # argparse's own margin
    return HelpFormatter._terminal_width


def _columns() -> int:
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80
