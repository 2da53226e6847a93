"""The images' hashes gathered part by part, then grouped: in memory for a few million images,
in partition files on disk past that, so the scanner's memory does not grow with the images
(docs/distributed.md, "Duplicates in bounded memory").

Two things cross the parts of an index: exact duplicates (images with one content hash) and
near-duplicate groups (components of the graph of perceptual hashes within a Hamming radius).
Both need every image's hash. `InMemoryHashes` holds them as arrays, 16 bytes an image and its
index, plus the HashIndex over all of them; `PartitionedHashes` appends them to files and groups
one partition at a time:

- exact duplicates: the (64-bit prefix, index) pairs go to one file per value of the prefix's top
  bits; each file is counted alone, and only the indices whose prefix is seen twice come back;
- near-duplicates: by the pigeonhole principle, the 64 bits cut into `radius + k` blocks, two
  hashes within the radius agree exactly on at least k of them. One pass per choice of k blocks
  files the (hash, index) pairs by those blocks' bits; within a file, the hashes that share the
  bits are joined by a HashIndex and its components are the edges of that pass. Every pair
  within the radius shares some pass's bits, so it is an edge of a component there, and the
  union of the passes' components (a union-find over the images with an edge, few) is the graph's.
  k is the least that keeps a partition under `partition_rows` hashes (1 up to 2^27 images of
  the default at radius 10).

Both give the same candidates and groups, whatever order the parts come in
(tests/shards/test_summary_findings.py forces small partitions).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from datalint.scan import hash_index

PARTITION_ROWS = 1 << 22  # hashes a partition holds: ~64 MiB of pairs; more images than this partition
MAX_FILE_BITS = 8  # 256 partition files open at once (each part appends to them)
_PAIR = [("hash", "<u8"), ("idx", "<i8")]
_READ_ROWS = 1 << 20  # pairs read at a time when a pass files the hashes


@dataclass(frozen=True)
class Group:
    """A near-duplicate group: its images' indices and perceptual hashes, by index."""

    indices: tuple[int, ...]
    hashes: tuple[int, ...]


class InMemoryHashes:
    """Every image's hashes in arrays: the whole index's grouping at once."""

    def __init__(self) -> None:
        self._digests: list[Any] = []
        self._phashes: list[Any] = []

    def add(self, digest_rows: Any, digests: Any, phash_rows: Any, phashes: Any) -> None:
        self._digests.append(_pairs(digests, digest_rows))
        self._phashes.append(_pairs(phashes, phash_rows))

    def duplicate_candidates(self) -> list[int]:
        return _seen_twice(_joined(self._digests)).tolist()

    def near_groups(self, radius: int) -> list[Group]:
        pairs = _joined(self._phashes)
        if not len(pairs):
            return []
        groups = hash_index.HashIndex(pairs["hash"], radius).groups()
        return [_group(pairs["idx"][members], pairs["hash"][members]) for members in groups]

    def __enter__(self) -> InMemoryHashes:
        return self

    def __exit__(self, *exc: object) -> None:
        self._digests.clear()
        self._phashes.clear()


class PartitionedHashes:
    """Every image's hashes in partition files in `folder` (a temporary folder made there, removed
    on exit), for about `images` images. The folders a killed judgement left there are removed
    first (`remove_abandoned`)."""

    def __init__(self, folder: Path, images: int, partition_rows: int = PARTITION_ROWS) -> None:
        self.partition_rows = max(1, partition_rows)
        self.bits = _bits_for(images, self.partition_rows, MAX_FILE_BITS)
        remove_abandoned(folder)
        self._root = Path(tempfile.mkdtemp(prefix=_own_prefix(), dir=folder))
        self._digest_files = [(self._root / f"digests-{n:03x}.bin").open("ab") for n in range(1 << self.bits)]
        self._phash_file = (self._root / "phashes.bin").open("ab")
        self.phashes = 0

    def add(self, digest_rows: Any, digests: Any, phash_rows: Any, phashes: Any) -> None:
        pairs = _pairs(digests, digest_rows)
        for number, chunk in _by_partition(pairs, _top_bits(pairs["hash"], self.bits)):
            chunk.tofile(self._digest_files[number])
        _pairs(phashes, phash_rows).tofile(self._phash_file)
        self.phashes += len(phashes)

    def duplicate_candidates(self) -> list[int]:
        """The indices whose prefix is seen twice, partition by partition."""
        import numpy as np

        self._flush()
        found = [_seen_twice(_read(Path(file.name))) for file in self._digest_files]
        return np.concatenate([np.zeros(0, np.int64), *found]).tolist()

    def near_groups(self, radius: int) -> list[Group]:
        """The components of the within-radius graph, from one pass per choice of blocks."""
        self._flush()
        plan = pigeonhole_plan(self.phashes, radius, self.partition_rows)
        edges = _Edges()
        for number, chosen in enumerate(plan.passes()):
            for partition in self._filed(plan, chosen, number):
                edges.add_pass(plan, chosen, partition, radius)
            edges.compact()
        return edges.groups()

    def _filed(self, plan: PigeonholePlan, chosen: tuple[int, ...], number: int) -> Iterator[Any]:
        """The (hash, index) pairs of each partition of one pass, sorted by the chosen blocks' bits."""
        import numpy as np

        folder = self._root / f"pass-{number}"
        folder.mkdir()
        names = [folder / f"{n:03x}.bin" for n in range(1 << plan.file_bits)]
        files = [name.open("ab") for name in names]
        try:
            for pairs in _chunks(Path(self._phash_file.name)):
                keys = plan.keys(pairs["hash"], chosen)
                for n, chunk in _by_partition(pairs, keys & np.uint64((1 << plan.file_bits) - 1)):
                    chunk.tofile(files[n])
        finally:
            for file in files:
                file.close()
        for name in names:
            pairs = _read(name)
            name.unlink()
            keys = plan.keys(pairs["hash"], chosen)
            order = np.argsort(keys, kind="stable")
            yield pairs[order], keys[order]
        folder.rmdir()

    def _flush(self) -> None:
        for file in [*self._digest_files, self._phash_file]:
            file.flush()

    def __enter__(self) -> PartitionedHashes:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for file in [*self._digest_files, self._phash_file]:
            file.close()
        shutil.rmtree(self._root, ignore_errors=True)


GatheredHashes = InMemoryHashes | PartitionedHashes

FOLDER_PREFIX = ".datalint-hashes-"


def _own_prefix() -> str:
    """`.datalint-hashes-<host>-<pid>-`: whose partition folder it is, so that a later judgement on
    this host can tell one whose process died (SIGKILL, the OOM killer, a SIGTERM mid-judgement)
    from one a running judgement holds, and leaves other hosts' alone (an index on a shared disk)."""
    return f"{FOLDER_PREFIX}{_host()}-{os.getpid()}-"


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:64] or "host"


def remove_abandoned(folder: Path) -> list[Path]:
    """Remove the partition folders in `folder` that a judgement on this host left when its process
    died (no process has their pid now); returns them. A live process's, an other host's, and a
    folder of another form stay."""
    prefix = f"{FOLDER_PREFIX}{_host()}-"
    removed: list[Path] = []
    try:
        candidates = [path for path in folder.iterdir() if path.name.startswith(prefix)]
    except OSError:  # a folder that cannot be listed: nothing to clean, the judgement goes on
        return removed
    for path in candidates:
        pid = path.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)) and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def gathered_hashes(
    folder: Path | None, images: int, partition_rows: int = PARTITION_ROWS
) -> InMemoryHashes | PartitionedHashes:
    """Where the hashes of about `images` images go: partition files in `folder` past
    `partition_rows` of them (in memory when there is no folder, an index in memory), or in the
    system's temporary folder where `folder` cannot be written (a read-only index's)."""
    if folder is None or images <= partition_rows:
        return InMemoryHashes()
    try:
        return PartitionedHashes(folder, images, partition_rows)
    except OSError:
        return PartitionedHashes(Path(tempfile.gettempdir()), images, partition_rows)


# ----------------------------------------------------------------------------------------------
# The pigeonhole passes


@dataclass(frozen=True)
class PigeonholePlan:
    """`len(blocks)` = radius + k blocks tiling the 64 bits; a pass per choice of k of them."""

    blocks: tuple[hash_index.Block, ...]
    k: int
    file_bits: int  # 2**file_bits partition files per pass, by the low bits of the chosen blocks'

    def passes(self) -> Iterator[tuple[int, ...]]:
        return itertools.combinations(range(len(self.blocks)), self.k)

    def keys(self, values: Any, chosen: tuple[int, ...]) -> Any:
        """The chosen blocks' bits of each hash, side by side in one uint64."""
        import numpy as np

        keys = np.zeros(len(values), np.uint64)
        for number in chosen:
            block = self.blocks[number]
            keys = (keys << np.uint64(block.width)) | block.keys(values)
        return keys


MAX_PASSES = 256  # passes grow as C(radius + k, k): past this a partition is let grow instead


def pigeonhole_plan(count: int, radius: int, partition_rows: int) -> PigeonholePlan:
    """The least k whose passes file `count` hashes into partitions of at most `partition_rows`
    (the chosen blocks' bits as spread as uniform hashes'), within MAX_PASSES passes, and how
    many files a pass needs."""
    if not 0 <= radius < hash_index.BITS:
        raise ValueError(f"a Hamming radius of 64-bit hashes is 0..63, not {radius}")
    k = 1
    while radius + k < hash_index.BITS and math.comb(radius + k + 1, k + 1) <= MAX_PASSES:
        if count <= partition_rows << _key_bits(radius, k):
            break
        k += 1
    blocks = _even_blocks(min(hash_index.BITS, radius + k))
    files = _bits_for(count, partition_rows, MAX_FILE_BITS)
    return PigeonholePlan(blocks, k, min(_key_bits(radius, k), files))


def _key_bits(radius: int, k: int) -> int:
    """The fewest bits k of the radius + k blocks hold."""
    return sum(sorted(b.width for b in _even_blocks(min(hash_index.BITS, radius + k)))[:k])


def _even_blocks(parts: int) -> tuple[hash_index.Block, ...]:
    widths = [hash_index.BITS // parts + (1 if i < hash_index.BITS % parts else 0) for i in range(parts)]
    shifts = itertools.accumulate([0, *widths[:-1]])
    return tuple(hash_index.Block(s, w, 0) for s, w in zip(shifts, widths, strict=True))


SHORT_RUN = 1024  # hashes sharing a pass's bits that are checked pair by pair (at most ~5e5 pairs)


@functools.lru_cache(maxsize=64)
def _planned_blocks(size_class: int, radius: int) -> tuple[hash_index.Block, ...]:
    return hash_index.plan_blocks(1 << size_class, radius)


def _planned(count: int, radius: int) -> tuple[hash_index.Block, ...]:
    """The HashIndex split for about `count` hashes, planned once per power of two (planning costs
    ~15 ms, and a pass may join hundreds of runs)."""
    return _planned_blocks(max(1, count).bit_length(), radius)


class _Edges:
    """The edges the passes find, sparse (only images in some group appear), joined by a
    union-find into stars (each image to its component's least index) after every pass, so they
    never hold more than the pairs of one pass over the images with a near copy."""

    def __init__(self) -> None:
        self._a: list[Any] = []  # indices
        self._b: list[Any] = []
        self._nodes: list[tuple[Any, Any]] = []  # (indices, hashes) of the images with an edge

    def add_pass(
        self, plan: PigeonholePlan, chosen: tuple[int, ...], filed: tuple[Any, Any], radius: int
    ) -> None:
        """The edges among each run of hashes that share the pass's bits: every pair of a short run
        checked at once, over all short runs, and kept in the first pass whose bits it shares (so a
        pair is found once); a long run joined by a HashIndex, its components as stars."""
        import numpy as np

        pairs, keys = filed
        if len(pairs) < 2:
            return
        hashes, indices = pairs["hash"], pairs["idx"]
        starts = np.concatenate([[0], np.flatnonzero(np.diff(keys)) + 1])
        counts = np.diff(np.concatenate([starts, [len(keys)]]))
        short = (counts > 1) & (counts <= SHORT_RUN)
        for a, b in _batched(hash_index._run_pairs(starts[short], counts[short])):
            difference = hashes[a] ^ hashes[b]
            near = np.flatnonzero(hash_index.popcount(difference) <= radius)
            near = near[_first_shared(plan, chosen, difference[near])]
            self._add(indices[a[near]], hashes[a[near]], indices[b[near]], hashes[b[near]])
        long = counts > SHORT_RUN
        for start, count in zip(starts[long].tolist(), counts[long].tolist(), strict=True):
            run = slice(start, start + count)
            index = hash_index.HashIndex(hashes[run], radius, blocks=_planned(count, radius))
            for members in index.groups():
                chosen_idx, chosen_hash = indices[run][members], hashes[run][members]
                first = np.zeros(len(members) - 1, np.int64)
                self._add(chosen_idx[first], chosen_hash[first], chosen_idx[1:], chosen_hash[1:])

    def _add(self, a: Any, a_hashes: Any, b: Any, b_hashes: Any) -> None:
        if len(a):
            self._a.append(a)
            self._b.append(b)
            self._nodes.extend([(a, a_hashes), (b, b_hashes)])

    def compact(self) -> None:
        """The edges so far as stars: each image with an edge to the least index of its component."""
        import numpy as np

        if not self._nodes:
            return
        indices, first = np.unique(np.concatenate([i for i, _h in self._nodes]), return_index=True)
        hashes = np.concatenate([h for _i, h in self._nodes])[first]
        a = np.searchsorted(indices, np.concatenate(self._a))
        b = np.searchsorted(indices, np.concatenate(self._b))
        roots = hash_index.components(len(indices), a, b)
        others = np.flatnonzero(roots != np.arange(len(indices)))
        self._a, self._b = [indices[roots[others]]], [indices[others]]
        self._nodes = [(indices, hashes)]

    def groups(self) -> list[Group]:
        import numpy as np

        self.compact()
        if not self._nodes:
            return []
        ((indices, hashes),) = self._nodes
        roots = np.arange(len(indices))
        roots[np.searchsorted(indices, self._b[0])] = np.searchsorted(indices, self._a[0])
        order = np.argsort(roots, kind="stable")
        cuts = np.flatnonzero(np.diff(roots[order])) + 1
        return [_group(indices[members], hashes[members]) for members in np.split(order, cuts)]


def _batched(pairs: Iterator[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
    """The (a, b) arrays of `pairs` joined into batches of about EXPANSION pairs."""
    import numpy as np

    held: list[tuple[Any, Any]] = []
    size = 0
    for a, b in pairs:
        held.append((a, b))
        size += len(a)
        if size >= hash_index.EXPANSION:
            yield np.concatenate([a for a, _b in held]), np.concatenate([b for _a, b in held])
            held, size = [], 0
    if held:
        yield np.concatenate([a for a, _b in held]), np.concatenate([b for _a, b in held])


def _first_shared(plan: PigeonholePlan, chosen: tuple[int, ...], difference: Any) -> Any:
    """Whether `chosen` are the first k blocks the pairs agree on (their XOR is 0 there): no block
    before the last chosen one but the chosen agrees."""
    import numpy as np

    agreeing = np.zeros(len(difference), np.int64)
    for block in plan.blocks[: chosen[-1] + 1]:
        agreeing += block.keys(difference) == 0
    return agreeing == len(chosen)


# ----------------------------------------------------------------------------------------------
# Arrays and files of (hash, index) pairs


def _pairs(hashes: Any, indices: Any) -> Any:
    import numpy as np

    pairs = np.empty(len(hashes), dtype=_PAIR)
    pairs["hash"] = hashes
    pairs["idx"] = indices
    return pairs


def _joined(chunks: Sequence[Any]) -> Any:
    import numpy as np

    return np.concatenate([np.zeros(0, _PAIR), *chunks])


def _seen_twice(pairs: Any) -> Any:
    """The indices of the pairs whose hash another pair has too."""
    import numpy as np

    unique, counts = np.unique(pairs["hash"], return_counts=True)
    return pairs["idx"][np.isin(pairs["hash"], unique[counts > 1])]


def _group(indices: Any, hashes: Any) -> Group:
    return Group(tuple(int(i) for i in indices.tolist()), tuple(int(h) for h in hashes.tolist()))


def _bits_for(count: int, partition_rows: int, most: int) -> int:
    """Bits of partition number for `count` items in partitions of `partition_rows`, at most `most`."""
    return min(most, max(0, math.ceil(math.log2(max(1, math.ceil(count / partition_rows))))))


def _top_bits(values: Any, bits: int) -> Any:
    import numpy as np

    return values >> np.uint64(hash_index.BITS - bits) if bits else np.zeros(len(values), np.uint64)


def _by_partition(pairs: Any, numbers: Any) -> Iterator[tuple[int, Any]]:
    """(partition number, its pairs) for the numbers that occur."""
    import numpy as np

    order = np.argsort(numbers, kind="stable")
    sorted_numbers = numbers[order]
    cuts = np.flatnonzero(np.diff(sorted_numbers)) + 1
    for chunk in np.split(order, cuts):
        if len(chunk):
            yield int(numbers[chunk[0]]), pairs[chunk]


def _read(path: Path) -> Any:
    import numpy as np

    return np.fromfile(path, dtype=_PAIR)


def _chunks(path: Path) -> Iterator[Any]:
    import numpy as np

    size = np.dtype(_PAIR).itemsize
    total = path.stat().st_size // size
    for start in range(0, total, _READ_ROWS):
        yield np.fromfile(path, dtype=_PAIR, count=min(_READ_ROWS, total - start), offset=start * size)
