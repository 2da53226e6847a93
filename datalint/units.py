"""Byte units, sizes and durations: one spelling in findings, checks, tables, flags and config files.

The parsers raise ValueError with what was expected and what was given; the command line turns it into
argparse's error and a config reader into its own, so `64MB` or `30m` means the same everywhere.
"""

from __future__ import annotations

import re

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(i?))?b?\s*", re.IGNORECASE)
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", re.IGNORECASE)
SECONDS_PER_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def human_bytes(n: float | None) -> str:
    """`512 B`, `4.0 KiB`, `1.5 GiB` (binary units, one decimal); "unknown" for None."""
    if n is None:
        return "unknown"
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def parse_size(text: str) -> int:
    """Bytes, the way disks are sold: `500000`, `64MB` (64 x 1000^2), `1.5GiB` (1.5 x 1024^3)."""
    return _bytes(text, binary_units=False, examples="500000, 64MB or 1GiB")


def parse_binary_size(text: str) -> int:
    """Bytes, the way Docker reads `--shm-size`: `67108864`, `64m`, `64MB`, `8g`, every unit binary."""
    return _bytes(text, binary_units=True, examples="67108864, 64m or 8g")


def _bytes(text: str, *, binary_units: bool, examples: str) -> int:
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"expected a size such as {examples}, got {text!r}")
    number, unit, binary = float(match[1]), (match[2] or "").lower(), bool(match[3])
    power = "kmgt".index(unit) + 1 if unit else 0
    return int(number * (1024 if binary or binary_units else 1000) ** power)


def parse_duration(text: str) -> float:
    """Seconds from `2s`, `500ms`, `5m`, `1h`, `1d` or a plain number of seconds (`2.5`), above 0."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"expected a duration such as 2s, 5m or 1h, got {text!r}")
    seconds = float(match[1]) * SECONDS_PER_UNIT[(match[2] or "s").lower()]
    if not seconds > 0:
        raise ValueError(f"expected a duration above 0, got {text!r}")
    return seconds
