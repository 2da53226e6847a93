"""The optional parts of datalint and the line that installs each one.

The base install is the linter alone (standard library only). `scan`, `torch`, `dask`, `service`, `parquet`,
`hf`, `lightning` and `streaming` are extras (pyproject.toml's `[project.optional-dependencies]`); a command
or module that needs one calls `require(extra, what)` before doing any work, which raises `MissingExtraError`
with the one line that installs it. Finding the modules uses `importlib.util.find_spec`, which imports
nothing, so the check costs microseconds and a present extra is not loaded early.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from importlib import metadata
from urllib.parse import unquote, urlparse

from datalint.errors import DatalintError

DISTRIBUTION = "torch-datalint"

# extra -> the modules it provides that datalint imports (import names, not distribution names)
EXTRAS: dict[str, tuple[str, ...]] = {
    "scan": ("numpy", "PIL", "cv2", "sqlite_utils", "rich"),
    "torch": ("torch", "numpy", "sqlite_utils"),
    "dask": ("dask", "distributed"),
    "service": ("fastapi", "uvicorn", "pydantic"),
    "parquet": ("pyarrow",),
    "hf": ("datasets", "pyarrow", "numpy"),
    "lightning": ("lightning", "torch", "numpy"),
    "streaming": ("litdata", "torch", "numpy"),
}


class MissingExtraError(DatalintError, ModuleNotFoundError):
    """An optional part of datalint is not installed: exit 2 on the command line, an ImportError in Python.

    A `ModuleNotFoundError` so that code written as `try: import datalint.torch except ImportError:`
    keeps working; `name` is the first missing module, `extra` the extra that brings it.
    """

    def __init__(self, message: str, *, extra: str, missing: tuple[str, ...]) -> None:
        super().__init__(message)
        self.msg = message
        self.name = missing[0] if missing else None
        self.extra = extra
        self.missing = missing


def missing_modules(extra: str) -> tuple[str, ...]:
    """The modules of `extra` that cannot be imported here (none: the extra is installed)."""
    return tuple(name for name in EXTRAS[extra] if not _importable(name))


def require(extra: str, what: str) -> None:
    """Raise MissingExtraError naming `what` (a command, a module) when `extra` is not installed."""
    error = missing_extra_error(extra, what)
    if error is not None:
        raise error


def missing_extra_error(extra: str, what: str) -> MissingExtraError | None:
    """The error `require` raises, or None when `extra` is installed."""
    missing = missing_modules(extra)
    if not missing:
        return None
    return MissingExtraError(
        f"{what} needs the [{extra}] extra (missing: {', '.join(missing)}); install it with: "
        f"{install_line(extra)}",
        extra=extra,
        missing=missing,
    )


def install_line(extra: str) -> str:
    """The command that adds `extra` to this installation: pipx or pip, from the index or a checkout."""
    checkout = _installed_from()
    target = f"{checkout[0] if checkout else DISTRIBUTION}[{extra}]"
    if f"{os.sep}pipx{os.sep}venvs{os.sep}" in sys.prefix:
        return f"pipx install --force '{target}'"
    editable = "-e " if checkout and checkout[1] else ""
    return f"pip install {editable}'{target}'"


def _importable(name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken parent package, or a module with __spec__ None
        return False


def _installed_from() -> tuple[str, bool] | None:
    """(the local folder this copy was installed from, editable?) for `pip install [-e] .` (PEP 610)."""
    try:
        record = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not record:
        return None
    try:
        document = json.loads(record)
        url = urlparse(document.get("url", ""))
        editable = bool(document.get("dir_info", {}).get("editable", False))
    except (ValueError, AttributeError):
        return None
    if url.scheme != "file":
        return None
    folder = unquote(url.path)
    return (folder, editable) if os.path.isdir(folder) else None
