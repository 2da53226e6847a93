"""Sharded sources make the shard the unit of work: a source that has `shard_starts()` (the first
sample index of each shard) is handed out by both engines one shard at a time (`split_by_shard`),
so a worker reads one file from start to end and never gets a range of samples that crosses into
the next file. The per-shard index files are merged by `datalint.index.shards`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

# ----------------------------------------------------------------------------------------------
# Shards as the unit of work


SHARDED_KINDS = frozenset({"webdataset", "parquet"})  # source kinds whose samples live in shard files


def shard_starts_of(source: Any) -> tuple[int, ...] | None:
    """The first sample index of each shard of a sharded source; None for any other source."""
    starts = getattr(source, "shard_starts", None)
    return tuple(starts()) if callable(starts) else None


def shard_of(starts: Sequence[int], index: int) -> int:
    """Which shard a sample index belongs to (`starts` ascending, the first one 0)."""
    return max(0, bisect.bisect_right(starts, index) - 1)


def split_by_shard(todo: Iterable[int], starts: Sequence[int]) -> Iterator[list[int]]:
    """The indices of `todo`, in their order, cut into lists that each lie in one shard.

    With `todo` ascending (a scan's usual order) each run is all of one shard's remaining samples,
    so whoever gets a run owns that shard. Lazy: a billion-sample `todo` is never held whole.
    """
    run: list[int] = []
    current = -1
    for index in todo:
        shard = shard_of(starts, index)
        if run and shard != current:
            yield run
            run = []
        current = shard
        run.append(index)
    if run:
        yield run
