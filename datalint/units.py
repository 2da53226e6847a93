"""Byte units, and sizes written for people: one spelling in findings, checks and tables."""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


def human_bytes(n: float | None) -> str:
    """`512 B`, `4.0 KiB`, `1.5 GiB` (binary units, one decimal); "unknown" for None."""
    if n is None:
        return "unknown"
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"
