"""Every pair of 64-bit hashes within a Hamming radius, without comparing every pair.

Multi-index hashing with the generalised pigeonhole principle: the 64 bits are cut into blocks,
block i given a tolerance t_i with sum(t_i + 1) > radius. Two hashes within the radius then differ
in at most t_i bits of some block i (if every block differed in more, they would differ in more
than the radius). So the candidates are the pairs whose block i keys are equal up to t_i flipped
bits: for each block, the hashes are sorted by that block's key, and for each mask of at most t_i
bits, every bucket is joined with the bucket of its key XOR the mask, in numpy, a pass at a time.
Each candidate is then checked on all 64 bits (a vectorised popcount of the XOR), and a pair that
qualifies in several blocks is kept in the first only, so it is found exactly once.

The split is chosen by a cost model from the number of hashes: a few wide blocks with tolerances
(three blocks of 20-22 bits, tolerances 3, 3, 2 at radius 10 for a million hashes) make few
candidates at the price of many passes; radius + 1 blocks of tolerance 0 (plain pigeonhole) make
few passes and many candidates, which is cheaper for a few thousand hashes; below that, brute
force. On uniform random hashes (the worst case: real perceptual hashes cluster, which only adds
true pairs) the work is about n x 1e-3 candidates per hash at radius 10 instead of n / 2.

Equal hashes are collapsed first, so a thousand copies of one blank image cost one entry, not half
a million pairs; `groups()` never expands them into pairs.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

BITS = 64
TABLE_BITS = 24  # blocks up to this wide are looked up in a direct table (2**24 x 4 bytes = 64 MiB)
# Cost model, in seconds, measured on this machine's numpy (benchmarks/quality_hashes.py)
PASS_S = 40e-6  # the fixed cost of one mask pass (a few numpy calls)
LOOKUP_S = 12e-9  # per hash per pass, table lookup (searchsorted is SEARCH_FACTOR times that)
SEARCH_FACTOR = 8
CANDIDATE_S = 30e-9  # per candidate pair: gather, XOR, popcount, compare
BRUTE_S = 3e-9  # per pair by brute force (one vectorised row at a time)
ROW_S = 10e-6  # per row by brute force
PARALLEL_S = 3.0  # modelled seconds past which the self-join is run in one process per core
BRUTE_MAX = 5_000_000  # pairs: past this brute force is never planned (a join holds them all at once)


@dataclass(frozen=True)
class Block:
    """`width` bits of the hash from bit `shift`, searched with up to `tolerance` bits flipped."""

    shift: int
    width: int
    tolerance: int

    def keys(self, values: Any) -> Any:
        import numpy as np

        return (values >> np.uint64(self.shift)) & np.uint64((1 << self.width) - 1)


def masks_within(width: int, tolerance: int) -> int:
    """How many keys lie within `tolerance` flipped bits of one `width`-bit key."""
    return sum(math.comb(width, k) for k in range(min(width, tolerance) + 1))


def plan_blocks(count: int, radius: int, queries: int | None = None) -> tuple[Block, ...]:
    """The cheapest split by the cost model for `count` indexed hashes, joined with themselves or
    (`queries`) with that many other hashes; () means brute force."""
    if not 0 <= radius < BITS:
        raise ValueError(f"a Hamming radius of 64-bit hashes is 0..63, not {radius}")
    pairs = count * (count - 1) / 2 if queries is None else count * queries
    brute = pairs * BRUTE_S + (count if queries is None else queries) * ROW_S
    best: tuple[float, tuple[Block, ...]] = (brute if pairs <= BRUTE_MAX else math.inf, ())
    for parts in range(1, radius + 2):
        widths, tolerances = _split(parts, radius)
        widths, cost = _best_widths(widths, tolerances, count, queries)
        if cost < best[0]:
            shifts = itertools.accumulate([0, *widths[:-1]])
            best = (cost, tuple(Block(s, w, t) for s, w, t in zip(shifts, widths, tolerances, strict=True)))
    return best[1]


def split_blocks(parts: int, radius: int) -> tuple[Block, ...]:
    """`parts` balanced blocks for `radius`, as planned before the widths are tuned."""
    widths, tolerances = _split(parts, radius)
    shifts = itertools.accumulate([0, *widths[:-1]])
    return tuple(Block(s, w, t) for s, w, t in zip(shifts, widths, tolerances, strict=True))


def _split(parts: int, radius: int) -> tuple[list[int], list[int]]:
    """Balanced widths and tolerances for `parts` blocks; sum(t + 1) = radius + 1."""
    spare = radius + 1 - parts
    tolerances = [spare // parts + (1 if i < spare % parts else 0) for i in range(parts)]
    widths = [BITS // parts + (1 if i < BITS % parts else 0) for i in range(parts)]
    return widths, tolerances


def _best_widths(
    widths: list[int], tolerances: list[int], count: int, queries: int | None
) -> tuple[list[int], float]:
    """Move one bit at a time between blocks while the modelled cost falls."""
    cost = plan_cost(widths, tolerances, count, queries)
    improved = True
    while improved:
        improved = False
        for a, b in itertools.permutations(range(len(widths)), 2):
            if widths[a] <= 1:
                continue
            trial = list(widths)
            trial[a] -= 1
            trial[b] += 1
            trial_cost = plan_cost(trial, tolerances, count, queries)
            if trial_cost < cost * 0.999:
                widths, cost, improved = trial, trial_cost, True
    return widths, cost


def plan_cost(widths: Sequence[int], tolerances: Sequence[int], count: int, queries: int | None) -> float:
    """Modelled seconds: the mask passes over the buckets, plus checking the candidate pairs."""
    pairs = count * (count - 1) / 2 if queries is None else float(count * queries)
    total = 0.0
    share = 0.0
    for width, tolerance in zip(widths, tolerances, strict=True):
        passes = masks_within(width, tolerance)
        space = 2.0**width
        occupied = space * -math.expm1(-count / space) if width < 60 else float(count)
        # a self-join visits half the buckets per mask; a join visits every query
        visited = occupied / 2 if queries is None else float(queries)
        lookup = LOOKUP_S * (1 if width <= TABLE_BITS else SEARCH_FACTOR)
        total += passes * (PASS_S + lookup * visited)
        share += passes / space
    return total + pairs * min(share, 1.0) * CANDIDATE_S


class HashIndex:
    """Hashes (ints or a numpy uint64 array), joinable within `radius` (`pairs`, `groups`,
    `nearest`). `blocks` overrides the planned split (the tests try every kind of split)."""

    def __init__(
        self, hashes: Any, radius: int, blocks: Sequence[Block] | None = None, jobs: int | None = None
    ) -> None:
        import numpy as np

        self.values = as_hashes(hashes)
        self.radius = radius
        self.unique, self._inverse = np.unique(self.values, return_inverse=True)
        self._inverse = self._inverse.ravel()
        self.blocks = tuple(blocks) if blocks is not None else plan_blocks(len(self.unique), radius)
        _check_blocks(self.blocks, radius)
        self.jobs = jobs if jobs is not None else self._default_jobs()
        self._pairs: tuple[Any, Any] | None = None

    def _default_jobs(self) -> int:
        """One process per usable core where the join is long enough to pay for starting them."""
        if not self.blocks:
            return 1
        cost = plan_cost(
            [b.width for b in self.blocks], [b.tolerance for b in self.blocks], len(self.unique), None
        )
        return max(1, len(os.sched_getaffinity(0))) if cost > PARALLEL_S else 1

    # --- the join with itself

    def unique_pairs(self) -> tuple[Any, Any]:
        """(a, b) positions in `unique` of every pair of distinct hashes within the radius, once."""
        if self._pairs is None:
            self._pairs = self._join_itself()
        return self._pairs

    def _join_itself(self) -> tuple[Any, Any]:
        import numpy as np

        if not self.blocks:
            return _brute_pairs(self.unique, self.radius)
        tasks = _tasks(self.blocks, self.jobs)
        if self.jobs > 1 and "fork" in multiprocessing.get_all_start_methods():
            # forked, so the workers share the hashes without a copy; each returns a few pairs
            context = multiprocessing.get_context("fork")
            with context.Pool(self.jobs, _share, (self.unique, self.blocks, self.radius)) as pool:
                found = pool.map(_task, tasks, chunksize=1)
        else:
            found = [_pairs_of(self.unique, self.blocks, self.radius, task) for task in tasks]
        a = np.concatenate([np.zeros(0, np.int64), *(a for a, _b in found)])
        b = np.concatenate([np.zeros(0, np.int64), *(b for _a, b in found)])
        return np.minimum(a, b), np.maximum(a, b)

    def pairs(self) -> Iterator[tuple[int, int]]:
        """Every (i, j), i < j, of positions whose hashes are within the radius, each once (equal
        hashes included: this expands them, which `groups` does not)."""
        members = self._members()
        for positions in members:
            yield from itertools.combinations(positions, 2)
        a, b = self.unique_pairs()
        for u, v in zip(a.tolist(), b.tolist(), strict=True):
            for i in members[u]:
                for j in members[v]:
                    yield (i, j) if i < j else (j, i)

    def groups(self) -> list[list[int]]:
        """Connected components of the within-radius graph over positions: groups of two or more,
        members sorted, groups by their first member."""
        import numpy as np

        a, b = self.unique_pairs()
        roots = components(len(self.unique), a, b)
        labels = roots[self._inverse]
        order = np.argsort(labels, kind="stable")
        sorted_labels = labels[order]
        edges = np.flatnonzero(np.diff(sorted_labels)) + 1
        starts = np.concatenate([[0], edges])
        sizes = np.diff(np.concatenate([starts, [len(labels)]]))
        found = [
            order[s : s + n].tolist() for s, n in zip(starts.tolist(), sizes.tolist(), strict=True) if n > 1
        ]
        return sorted(found, key=lambda members: members[0])

    def _members(self) -> list[list[int]]:
        """Positions of each unique hash."""
        members: list[list[int]] = [[] for _ in range(len(self.unique))]
        for position, unique in enumerate(self._inverse.tolist()):
            members[unique].append(position)
        return members

    # --- the join with other hashes

    def nearest(self, value: int) -> tuple[int, int] | None:
        """The closest indexed hash within the radius (position, distance), or None."""
        return self.nearest_all([value])[0]

    def nearest_all(self, values: Any) -> list[tuple[int, int] | None]:
        """For each hash of `values`: the closest indexed one within the radius as (position,
        distance), the first position among equally close ones, or None."""
        import numpy as np

        queries = as_hashes(values)
        if not len(queries) or not len(self.unique):
            return [None] * len(queries)
        wanted, inverse = np.unique(queries, return_inverse=True)
        q, u = _join(
            wanted, self.unique, self.radius, plan_blocks(len(self.unique), self.radius, len(wanted))
        )
        best_unique = np.full(len(wanted), -1, np.int64)
        best_distance = np.full(len(wanted), BITS + 1, np.int64)
        if len(q):
            distance = popcount(wanted[q] ^ self.unique[u]).astype(np.int64)
            order = np.lexsort((u, distance, q))
            first = order[np.concatenate([[True], np.diff(q[order]) != 0])]
            best_unique[q[first]] = u[first]
            best_distance[q[first]] = distance[first]
        first_position = np.full(len(self.unique), len(self._inverse), np.int64)
        np.minimum.at(first_position, self._inverse, np.arange(len(self._inverse)))
        out: list[tuple[int, int] | None] = []
        for unique, distance in zip(
            best_unique[inverse.ravel()].tolist(), best_distance[inverse.ravel()].tolist(), strict=True
        ):
            out.append(None if unique < 0 else (int(first_position[unique]), int(distance)))
        return out


def as_hashes(hashes: Any) -> Any:
    """A numpy uint64 array of hashes given as ints (up to 2**64 - 1) or an array."""
    import numpy as np

    if isinstance(hashes, np.ndarray):
        return hashes.astype(np.uint64, copy=False).ravel()
    return np.array(list(hashes), dtype=np.uint64)


def hashes_from_hex(digests: Sequence[str]) -> Any:
    """16-hex-digit hashes as a uint64 array, parsed in one call."""
    import numpy as np

    if all(len(digest) == 16 for digest in digests):
        return np.frombuffer(bytes.fromhex("".join(digests)), dtype=">u8").astype(np.uint64)
    return as_hashes(int(digest, 16) for digest in digests)


def _check_blocks(blocks: Sequence[Block], radius: int) -> None:
    if not blocks:
        return
    covered = sorted((block.shift, block.width) for block in blocks)
    ends = [shift + width for shift, width in covered]
    if (
        covered[0][0] != 0
        or ends[-1] != BITS
        or any(e != s for e, (s, _w) in zip(ends, covered[1:], strict=False))
    ):
        raise ValueError(f"blocks must tile the 64 bits: {blocks}")
    if sum(block.tolerance + 1 for block in blocks) <= radius:
        raise ValueError(f"blocks {blocks} can miss pairs within {radius}: sum(tolerance + 1) must exceed it")


_BYTE_COUNTS: Any = None


def popcount(values: Any) -> Any:
    """Set bits of each uint64 (numpy's own from 2.0; a byte table before)."""
    import numpy as np

    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(values)
    global _BYTE_COUNTS
    if _BYTE_COUNTS is None:
        _BYTE_COUNTS = np.array([bin(byte).count("1") for byte in range(256)], np.uint8)
    values = np.ascontiguousarray(values, dtype=np.uint64)
    return _BYTE_COUNTS[values.view(np.uint8)].reshape((*values.shape, 8)).sum(axis=-1)


def _brute_pairs(values: Any, radius: int) -> tuple[Any, Any]:
    import numpy as np

    found_a, found_b = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for i in range(len(values) - 1):
        near = np.flatnonzero(popcount(values[i + 1 :] ^ values[i]) <= radius) + i + 1
        found_a.append(np.full(len(near), i, np.int64))
        found_b.append(near.astype(np.int64))
    return np.concatenate(found_a), np.concatenate(found_b)


@dataclass(frozen=True)
class _Buckets:
    """Hashes sorted by one block's key, and each distinct key's run (start, count) in that order."""

    order: Any  # positions in the input, sorted by key
    hashes: Any  # the hashes in that order
    keys: Any  # their keys (int32 for a block of up to 31 bits)
    distinct: Any  # the distinct keys, ascending
    starts: Any
    counts: Any
    table: Any  # key -> bucket number (-1: none), for narrow blocks; None: searchsorted

    @staticmethod
    def of(values: Any, block: Block) -> _Buckets:
        import numpy as np

        keys = _narrow(block.keys(values), block)
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        starts = np.concatenate([[0], np.flatnonzero(np.diff(keys)) + 1])
        counts = np.diff(np.concatenate([starts, [len(keys)]]))
        distinct = keys[starts]
        table = None
        if block.width <= TABLE_BITS:
            table = np.full(1 << block.width, -1, np.int32)
            table[distinct] = np.arange(len(distinct), dtype=np.int32)
        return _Buckets(order, values[order], keys, distinct, starts, counts, table)

    def find(self, keys: Any) -> Any:
        """The bucket number of each key, -1 where no hash has it."""
        import numpy as np

        if self.table is not None:
            return self.table[keys]
        at = np.minimum(np.searchsorted(self.distinct, keys), len(self.distinct) - 1)
        return np.where(self.distinct[at] == keys, at, -1)


def _narrow(keys: Any, block: Block) -> Any:
    """int32 keys where the block fits: half the memory traffic of every pass."""
    import numpy as np

    return keys.astype(np.int32) if block.width <= 31 else keys


def _mask(mask: int, block: Block) -> Any:
    import numpy as np

    return np.int32(mask) if block.width <= 31 else np.uint64(mask)


def _masks_by_top_bit(width: int, tolerance: int) -> Iterator[tuple[int, list[int]]]:
    """The non-zero masks of at most `tolerance` bits over `width` bits, by their highest bit."""
    for top in range(width):
        masks = [
            (1 << top) | sum(1 << bit for bit in lower)
            for weight in range(min(tolerance, top + 1))
            for lower in itertools.combinations(range(top), weight)
        ]
        if masks:
            yield top, masks


@dataclass(frozen=True)
class _Task:
    """A share of the self-join: one block, the masks of some top bits, and the equal keys or not."""

    block: int
    tops: tuple[int, ...]
    equal_keys: bool


def _tasks(blocks: Sequence[Block], jobs: int) -> list[_Task]:
    """The join cut into about 4 tasks per process of similar numbers of mask passes."""
    tasks: list[_Task] = []
    per_block = [
        dict((top, len(masks)) for top, masks in _masks_by_top_bit(b.width, b.tolerance)) for b in blocks
    ]
    share = max(1, sum(sum(passes.values()) for passes in per_block) // (4 * jobs))
    for number, passes in enumerate(per_block):
        tops: list[int] = []
        load = 0
        equal_keys = True
        for top, count in passes.items():
            tops.append(top)
            load += count
            if load >= share:
                tasks.append(_Task(number, tuple(tops), equal_keys))
                tops, load, equal_keys = [], 0, False
        if tops or equal_keys:
            tasks.append(_Task(number, tuple(tops), equal_keys))
    return tasks


_SHARED: tuple[Any, tuple[Block, ...], int] | None = None


def _share(values: Any, blocks: tuple[Block, ...], radius: int) -> None:
    global _SHARED
    _SHARED = (values, blocks, radius)


def _task(task: _Task) -> tuple[Any, Any]:
    assert _SHARED is not None
    return _pairs_of(*_SHARED, task)


def _pairs_of(values: Any, blocks: Sequence[Block], radius: int, task: _Task) -> tuple[Any, Any]:
    import numpy as np

    found = list(_block_self_pairs(values, blocks[task.block], radius, blocks[: task.block], task))
    a = np.concatenate([np.zeros(0, np.int64), *(a for a, _b in found)])
    b = np.concatenate([np.zeros(0, np.int64), *(b for _a, b in found)])
    return a, b


def _block_self_pairs(
    values: Any, block: Block, radius: int, earlier: Sequence[Block], task: _Task | None = None
) -> Iterator[tuple[Any, Any]]:
    """Pairs (positions in `values`) within the radius whose keys in `block` differ in at most its
    tolerance, and which no earlier block already yields (all of them, or the share `task` says)."""
    import numpy as np

    buckets = _Buckets.of(values, block)

    def near(a: Any, b: Any, difference: Any) -> tuple[Any, Any]:
        """The candidates (sorted positions a, b) within the radius, not found in an earlier block."""
        keep = np.flatnonzero(popcount(difference) <= radius)
        for other in earlier:
            keep = keep[popcount(other.keys(difference[keep])) > other.tolerance]
        return buckets.order[a[keep]], buckets.order[b[keep]]

    if task is None or task.equal_keys:
        for a, b in _run_pairs(buckets.starts, buckets.counts):
            yield near(a, b, buckets.hashes[a] ^ buckets.hashes[b])
    for top, masks in _masks_by_top_bit(block.width, block.tolerance):
        if task is not None and top not in task.tops:
            continue
        # each pair of buckets once: from the hashes whose key has the mask's top bit clear
        mine = np.flatnonzero(((buckets.keys >> _mask(top, block)) & _mask(1, block)) == 0)
        keys = buckets.keys[mine]
        for mask in masks:
            yield from _bucket_matches(buckets, mine, keys ^ _mask(mask, block), near)


def _bucket_matches(buckets: _Buckets, mine: Any, wanted: Any, near: Any) -> Iterator[tuple[Any, Any]]:
    """`near` of each hash (sorted positions `mine`) with every member of the bucket of its `wanted`
    key."""
    import numpy as np

    found = buckets.find(wanted)
    hit = np.flatnonzero(found >= 0)
    if len(hit):
        for a, member in _expanded(mine[hit], found[hit], buckets):
            yield near(a, member, buckets.hashes[a] ^ buckets.hashes[member])


EXPANSION = 1 << 22  # candidate pairs held at once, however large a bucket


def _expanded(sources: Any, bucket: Any, buckets: _Buckets) -> Iterator[tuple[Any, Any]]:
    """(source, member) for every member of each source's bucket: the first members at once (most
    buckets hold one hash), the others in slices of at most EXPANSION pairs (a bucket of thousands
    of near-copies must not be held as millions of pairs at once)."""
    import numpy as np

    starts = buckets.starts[bucket]
    yield sources, starts
    more = np.flatnonzero(buckets.counts[bucket] > 1)
    if not len(more):
        return
    sources, starts, sizes = sources[more], starts[more] + 1, buckets.counts[bucket[more]] - 1
    ends = np.cumsum(sizes)
    cuts = np.searchsorted(ends, np.arange(EXPANSION, int(ends[-1]), EXPANSION), side="right")
    for part in np.split(np.arange(len(sources)), cuts):
        if len(part):
            counts = sizes[part]
            yield np.repeat(sources[part], counts), np.repeat(starts[part], counts) + _ranges(counts)


def _run_pairs(starts: Any, counts: Any) -> Iterator[tuple[Any, Any]]:
    """Every pair of sorted positions inside one run (bucket), once: the pairs one apart, then two
    apart..., so a large bucket is never held as all its pairs at once."""
    import numpy as np

    many = counts > 1
    if not many.any():
        return
    run_starts, run_counts = starts[many], counts[many]
    positions = np.repeat(run_starts, run_counts) + _ranges(run_counts)
    remaining = np.repeat(run_starts + run_counts, run_counts) - positions - 1
    step = 1
    while len(positions):
        keep = remaining >= step
        positions, remaining = positions[keep], remaining[keep]
        yield positions, positions + step
        step += 1


def _ranges(counts: Any) -> Any:
    """0..count-1 for each count, concatenated."""
    import numpy as np

    ends = np.cumsum(counts)
    return np.arange(int(ends[-1])) - np.repeat(ends - counts, counts)


def _join(queries: Any, values: Any, radius: int, blocks: Sequence[Block]) -> tuple[Any, Any]:
    """(query position, value position) of pairs within the radius (some maybe twice)."""
    import numpy as np

    if not blocks:
        q = np.repeat(np.arange(len(queries)), len(values))
        u = np.tile(np.arange(len(values)), len(queries))
        near = popcount(queries[q] ^ values[u]) <= radius
        return q[near], u[near]
    found_q, found_u = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for block in blocks:
        buckets = _Buckets.of(values, block)
        keys = _narrow(block.keys(queries), block)

        def near(q: Any, member: Any, difference: Any, buckets: _Buckets = buckets) -> tuple[Any, Any]:
            keep = np.flatnonzero(popcount(difference) <= radius)
            return q[keep], buckets.order[member[keep]]

        masks = [
            0,
            *(mask for _top, group in _masks_by_top_bit(block.width, block.tolerance) for mask in group),
        ]
        for mask in masks:
            for q, u in _query_matches(queries, buckets, keys ^ _mask(mask, block), near):
                found_q.append(q)
                found_u.append(u)
    return np.concatenate(found_q), np.concatenate(found_u)


def _query_matches(queries: Any, buckets: _Buckets, wanted: Any, near: Any) -> Iterator[tuple[Any, Any]]:
    """As `_bucket_matches`, for hashes (`queries`) that are not in `buckets`: a join's other side."""
    import numpy as np

    found = buckets.find(wanted)
    hit = np.flatnonzero(found >= 0)
    if len(hit):
        for q, member in _expanded(hit, found[hit], buckets):
            yield near(q, member, queries[q] ^ buckets.hashes[member])


def components(count: int, a: Any, b: Any) -> Any:
    """The root (smallest member) of each node's connected component over the pairs (a[k], b[k]),
    as a numpy array of `count` roots: hook each pair's larger root under its smaller, jump every
    node to its root, until every pair shares one (vectorised, so a dense cluster's millions of
    pairs cost seconds, not a Python loop)."""
    import numpy as np

    roots = np.arange(count, dtype=np.int64)
    while len(a):
        root_a, root_b = roots[a], roots[b]
        apart = np.flatnonzero(root_a != root_b)
        if not len(apart):
            break
        a, b, root_a, root_b = a[apart], b[apart], root_a[apart], root_b[apart]
        low = np.minimum(root_a, root_b)
        np.minimum.at(roots, np.maximum(root_a, root_b), low)
        while True:
            jumped = roots[roots]
            if np.array_equal(jumped, roots):
                break
            roots = jumped
    return roots
