"""The edge where the host readers touch files: a /proc or /sys file's text, or its first number.

Each gives None for a file that is absent or unreadable (a process that ended, a kernel without it),
never an exception.
"""

from __future__ import annotations

from pathlib import Path


def read_text(path: Path) -> str | None:
    """A /proc or /sys file's text; None when it is absent or unreadable."""
    try:
        return path.read_text()
    except OSError:
        return None


def read_int(path: Path) -> int | None:
    """The first number in a /proc or /sys file; None when there is none."""
    return parse_int(read_text(path))


def parse_int(text: str | None) -> int | None:
    try:
        return int(text.split()[0]) if text is not None else None
    except (ValueError, IndexError):
        return None


def proc_text(path: str) -> str | None:
    """`read_text` without pathlib, whose path objects cost more than the read itself in the flight
    recorder's once-a-second walk of every process and thread (a torch process has dozens)."""
    try:
        with open(path, "rb") as file:
            return file.read().decode(errors="replace")
    except OSError:
        return None
