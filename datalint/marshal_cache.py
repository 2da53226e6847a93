"""Parsed TOML kept under the user's cache folder, so `datalint check` starts without re-reading it.

marshal rather than json: it loads several times faster and is built into the interpreter. Its format
may change between Python versions, so the version is part of each file's name. A cache is best effort
everywhere: a read-only home, or a value marshal cannot hold (a TOML date), only means no cache.
"""

from __future__ import annotations

import marshal
import os
import sys
import zlib
from pathlib import Path
from typing import Any

from datalint.files import write_atomically


def cache_path(kind: str, source: Path) -> Path:
    """Where the cache of `kind` for the file or folder `source` lives."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    digest = zlib.crc32(str(source.resolve()).encode()) & 0xFFFFFFFF
    python = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return Path(base) / "datalint" / f"{kind}-{digest:08x}-{python}.marshal"


def read(cache: Path, stamp: object) -> dict[str, Any] | None:
    """The value cached under `stamp` (what the source's mtimes and sizes were), or None."""
    try:
        document = marshal.loads(cache.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if not isinstance(document, dict) or document.get("stamp") != stamp:
        return None
    value = document.get("value")
    return value if isinstance(value, dict) else None


def write(cache: Path, stamp: object, value: dict[str, Any]) -> None:
    try:
        data = marshal.dumps({"stamp": stamp, "value": value})
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(cache, data, durable=False)  # a parallel run never reads half a file
    except (OSError, TypeError, ValueError):
        return
