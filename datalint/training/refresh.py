"""Following a quarantine list that `datalint watch` (or a later scan, or `datalint serve`) rewrites
during training.

A sampler keeps the list it was built with for the epoch under way: an iterator already handed to
the DataLoader holds its own indices. Between epochs, `ListFollower.reload()` reads the file again
when it changed (the scan replaces it atomically, so a new inode, size or mtime means a new list)
and fits it to the dataset with the same staleness checks as the first load.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from datalint.errors import DatalintError
from datalint.training import remote
from datalint.training.fit import fit_quarantine
from datalint.training.quarantine import Quarantine, load_quarantine


@dataclass(frozen=True)
class ListStamp:
    """What identifies one version of a list file."""

    inode: int
    size: int
    mtime_ns: int


def stamp(path: Path) -> ListStamp | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return ListStamp(info.st_ino, info.st_size, info.st_mtime_ns)


class ListFollower:
    """The file (or `datalint serve` URL) a sampler's list came from, and the version it last loaded."""

    def __init__(self, source: Any, loaded: Quarantine | None = None) -> None:
        self.url: str | None = str(source) if remote.is_url(source) else None
        self.path: Path | None = None if isinstance(source, Quarantine) or self.url else Path(source)
        self.loaded = stamp(self.path) if self.path is not None else None
        self.digest = list_digest(loaded.indices) if loaded is not None else None  # a URL's version

    def require_path(self, owner: str) -> None:
        if self.path is None and self.url is None:
            raise ValueError(
                f"{owner}(refresh=True) needs the list's path (quarantine.json or the index) or URL, not a"
                " loaded Quarantine: there is nothing to read again"
            )

    def changed(self) -> bool:
        return self.url is not None or (self.path is not None and stamp(self.path) != self.loaded)

    def reload(self, dataset: Any, *, strict: bool) -> Quarantine | None:
        """The list fitted to `dataset` when its file changed since the last load, else None.

        A file that has gone missing keeps the last list (a later epoch retries); one that no longer
        fits the dataset raises `StaleQuarantineError` as the first load would (or warns, not strict).
        A URL is asked again (a conditional GET: an unchanged list costs a 304), with the checks and
        the cached copy of every list URL; a list with other indices than the last is new.
        """
        if self.url is not None:
            fitted: Quarantine = remote.load_remote_quarantine(self.url, dataset=dataset, strict=strict)
            digest = list_digest(fitted.indices)
            if digest == self.digest:
                return None
            self.digest = digest
            return fitted
        if self.path is None:
            return None
        current = stamp(self.path)
        if current is None or current == self.loaded:
            return None
        fitted = fit_quarantine(load_quarantine(self.path), dataset, strict=strict)
        self.loaded = current
        return fitted


def list_digest(indices: np.ndarray[Any, Any]) -> str:
    """A short digest of the quarantined indices a sampler holds, for ranks to compare."""
    return hashlib.sha256(np.ascontiguousarray(indices, dtype=np.int64).tobytes()).hexdigest()[:16]


def check_ranks_agree(indices: np.ndarray[Any, Any]) -> None:
    """With torch.distributed initialised: every rank must have loaded the same list at this epoch,
    or they would draw different numbers of batches and hang in the first collective."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    digests: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(digests, list_digest(indices))
    if len(set(digests)) > 1:
        raise DatalintError(
            "the ranks loaded different versions of the quarantine list at this epoch (it was rewritten "
            "while they called set_epoch); call refresh() on every rank at the same point, e.g. after a "
            "barrier, or keep one list for the run"
        )
