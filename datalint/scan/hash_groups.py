"""Near-duplicate groups kept in the index, so a scan that changed a few images re-groups only those.

The groups are the connected components of "perceptual hashes within the radius" over every
scored image. Found from scratch they cost a pass over all pairs sharing a hash band (seconds per
10,000 images); an incremental scan that added, changed or removed a few hundred images would pay
that on every run. So the components are stored beside the samples (`hash_groups`: key, hash,
group label; `hash_group_radius`: the radius they hold for), and each scan updates them:

- an image kept with the same key and hash keeps its edges: a group none of whose members left
  is still one group;
- a group that lost a member (removed, or its hash changed) is split again from the pairs among
  its remaining members;
- each new or changed image is compared with the images it could be within the radius of (those
  sharing a block of its hash bits, or nearly: `_pairs_with`) and joins their groups.

The result is the components a full pass finds, so the findings are those of a full rescan
(tests/scan/test_scan_incremental_population.py compares them). The table is derived state: a
missing one, another radius, or keys that cannot name images (samples without keys, one key
twice) mean the groups are found from scratch and, where keys allow, stored again. Only a scan
writes it; `datalint quarantine` and the report find the groups from scratch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from datalint.index import groups as stored_groups
from datalint.index import store
from datalint.scan import quality
from datalint.scan.hash_index import popcount

_CHUNK = 32  # new hashes compared with all at once (32 x 1M uint64: 256 MB at most per step)

Grouping = Callable[[Sequence[tuple[int, str, str]], Any, int], list[list[int]]]


def kept_grouping(db: Any) -> Grouping:
    """A `grouping` for `quality.near_duplicate_findings` that reads and updates the stored groups."""

    def grouping(ordered: Sequence[tuple[int, str, str]], values: Any, radius: int) -> list[list[int]]:
        return update_groups(db, ordered, values, radius)

    return grouping


def update_groups(
    db: Any, ordered: Sequence[tuple[int, str, str]], values: Any, radius: int
) -> list[list[int]]:
    """The near-duplicate groups (positions in `ordered`, members sorted) of the images `ordered`
    names: (index, key, phash hex) sorted by key, `values` their hashes (ints or a uint64 array)."""
    keys = [key for _idx, key, _digest in ordered]
    if not _keys_name_images(db, keys):
        return quality.HashIndex(values, radius).groups()
    previous = _stored(db, radius)
    if previous is None:
        groups = quality.HashIndex(values, radius).groups()
        _store_all(db, ordered, groups, radius)
        return groups
    groups, labels = _regroup(ordered, values, radius, previous)
    _store_changes(db, ordered, previous, labels)
    return groups


def _keys_name_images(db: Any, keys: list[str]) -> bool:
    """True when every scored image has a key of its own (the groups are stored by key)."""
    if len(set(keys)) != len(keys):
        return False
    return not stored_groups.any_unkeyed(db)


def _stored(db: Any, radius: int) -> dict[str, tuple[str, int]] | None:
    """key -> (phash, group label) as the last scan stored them for this radius, or None."""
    return stored_groups.stored(db, radius)


def _regroup(
    ordered: Sequence[tuple[int, str, str]],
    values: Any,
    radius: int,
    previous: dict[str, tuple[str, int]],
) -> tuple[list[list[int]], dict[int, int]]:
    """(groups, the label of every position whose component is new or changed) from the stored
    groups and what changed since. An image alone before and joined by no new one is left out of
    all of it: most images of a folder are such, and they cost one dictionary lookup each."""
    parent: dict[int, int] = {}

    def root(node: int) -> int:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def union(a: int, b: int) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    sizes = Counter(grp for _digest, grp in previous.values())
    kept_in: dict[int, list[int]] = {}  # old label of a group -> its members still there, unchanged
    fresh: list[int] = []
    present: set[str] = set()
    for position, (_idx, key, digest) in enumerate(ordered):
        present.add(key)
        before = previous.get(key)
        if before is None or before[0] != digest:
            fresh.append(position)
        elif sizes[before[1]] > 1:
            kept_in.setdefault(before[1], []).append(position)
    broken = {grp for key, (_digest, grp) in previous.items() if key not in present}
    broken.update(previous[ordered[p][1]][1] for p in fresh if ordered[p][1] in previous)
    for label, members in kept_in.items():
        for member in members:  # each member is labelled anew, also one its group no longer holds
            root(member)
        if label in broken:  # a member left: only the pairs among those still there hold it together
            for a, b in _pairs_among(values, members, radius):
                union(a, b)
        else:
            for member in members[1:]:
                union(members[0], member)
    for position in fresh:
        root(position)
    for a, b in _pairs_with(values, fresh, radius):
        union(a, b)
    components: dict[int, list[int]] = {}
    for node in sorted(parent):
        components.setdefault(root(node), []).append(node)
    groups = [members for members in components.values() if len(members) > 1]
    return groups, _labels(ordered, previous, components)


def _labels(
    ordered: Sequence[tuple[int, str, str]],
    previous: dict[str, tuple[str, int]],
    components: dict[int, list[int]],
) -> dict[int, int]:
    """A label per position of `components`: a component keeps the lowest old label among its
    members when no other component took it first, so an update rewrites the rows of the groups
    it changed and no more (an image left out keeps its label, which no component takes: its
    group had no other member)."""
    labels: dict[int, int] = {}
    taken: set[int] = set()
    next_label = max((grp for _digest, grp in previous.values()), default=-1) + 1
    for members in components.values():
        old = sorted({previous[ordered[m][1]][1] for m in members if ordered[m][1] in previous})
        label = next((grp for grp in old if grp not in taken), None)
        if label is None:
            label, next_label = next_label, next_label + 1
        taken.add(label)
        for member in members:
            labels[member] = label
    return labels


def _pairs_among(values: Any, members: list[int], radius: int) -> list[tuple[int, int]]:
    """Every pair of `members` within the radius (each once, or twice: unions do not mind)."""
    return _pairs(values, members, radius, among=members)


def _pairs_with(
    values: Any, fresh: list[int], radius: int, brute_below: int = 4_000_000
) -> list[tuple[int, int]]:
    """Every (new image, other image) within the radius.

    Compared with every image while that is cheap (fewer than `brute_below` comparisons): a few
    hundred new images against a large index cost seconds so, so there only the images sharing
    one block of bits with a new one are compared. Split into radius + 1 blocks, two hashes within
    the radius agree on at least one block (pigeonhole), so no pair is missed.
    """
    if len(fresh) * len(values) < brute_below or radius >= 63:
        return _pairs(values, fresh, radius, among=None)
    if 4 <= radius <= 11:  # one block within 1-2 bits: fewer lookups than radius + 1 narrow blocks
        return _pairs_by_near_blocks(values, fresh, radius)
    import numpy as np

    hashes = np.asarray(values, dtype=np.uint64)
    queries = np.asarray(fresh, dtype=np.int64)
    found: set[tuple[int, int]] = set()
    for shift, width in _blocks(radius):
        keys = (hashes >> np.uint64(shift)) & np.uint64((1 << width) - 1)
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        starts = np.searchsorted(ordered, keys[queries], side="left")
        ends = np.searchsorted(ordered, keys[queries], side="right")
        if int((ends - starts).sum()) > len(fresh) * len(values) // 4:  # one block value most share
            return _pairs(values, fresh, radius, among=None)
        mine = np.repeat(queries, ends - starts)
        others = order[
            np.concatenate([np.arange(a, b) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)])
        ]
        close = popcount(hashes[mine] ^ hashes[others]) <= radius
        found.update(zip(mine[close].tolist(), others[close].tolist(), strict=True))
    return sorted((a, b) for a, b in found if a != b)


def _pairs_by_near_blocks(values: Any, fresh: list[int], radius: int) -> list[tuple[int, int]]:
    """`_pairs_with` by four 16-bit blocks: two hashes within `radius` differ in one block by at
    most radius // 4 bits (pigeonhole), so each new hash looks up, per block, every value that
    many bits from its own (137 values for radius 10). With radius + 1 blocks of 5-6 bits instead,
    each new hash of a 100k index met ~1,500 images per block; here ~2 per looked-up value.

    A block has 65,536 values, so each is looked up in a table of where its images start and how
    many there are (a count of each value and its running sum) instead of by a binary search of
    the sorted block: 1,100 new hashes make ~150,000 probes a block."""
    import numpy as np

    hashes = np.asarray(values, dtype=np.uint64)
    queries = np.asarray(fresh, dtype=np.int64)
    flips = np.array(_flips(16, radius // 4), dtype=np.uint16)
    found: set[tuple[int, int]] = set()
    for shift in (0, 16, 32, 48):
        keys = ((hashes >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.uint16)
        order = np.argsort(keys, kind="stable")  # a radix sort for 16-bit values
        per_value = np.bincount(keys, minlength=1 << 16)
        first = np.cumsum(per_value) - per_value  # where each value's images start in `order`
        probes = (keys[queries][:, None] ^ flips[None, :]).ravel()
        starts, counts = first[probes], per_value[probes]
        total = int(counts.sum())
        if total > len(fresh) * len(values) // 4:  # one block value most share
            return _pairs(values, fresh, radius, among=None)
        mine = np.repeat(np.repeat(queries, len(flips)), counts)
        # the positions starts[i] .. starts[i] + counts[i] - 1 of every probe, in one array
        offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        others = order[np.repeat(starts, counts) + offsets]
        close = popcount(hashes[mine] ^ hashes[others]) <= radius
        found.update(zip(mine[close].tolist(), others[close].tolist(), strict=True))
    return sorted((a, b) for a, b in found if a != b)


def _flips(width: int, most: int) -> list[int]:
    """Every mask of `width` bits with at most `most` bits set."""
    from itertools import combinations

    return [
        sum(1 << bit for bit in bits)
        for count in range(most + 1)
        for bits in combinations(range(width), count)
    ]


def _blocks(radius: int) -> list[tuple[int, int]]:
    """(shift, width) of radius + 1 blocks of bits covering a 64-bit hash, as even as they go."""
    parts = radius + 1
    widths = [64 // parts + (1 if n < 64 % parts else 0) for n in range(parts)]
    shifts = [sum(widths[:n]) for n in range(parts)]
    return list(zip(shifts, widths, strict=True))


def _pairs(values: Any, rows: list[int], radius: int, among: list[int] | None) -> list[tuple[int, int]]:
    """(row, other) for each of `rows` and each of `among` (default: every position) within the
    radius, other than itself; one vectorised comparison per chunk of rows."""
    if not rows:
        return []
    import numpy as np

    everyone = np.array(values if among is None else [values[m] for m in among], dtype=np.uint64)
    names = None if among is None else np.array(among, dtype=np.int64)
    hashes = np.array(values, dtype=np.uint64) if among is not None else everyone
    pairs: list[tuple[int, int]] = []
    for start in range(0, len(rows), _CHUNK):
        part = np.array(rows[start : start + _CHUNK], dtype=np.int64)
        close = popcount(hashes[part][:, None] ^ everyone[None, :]) <= radius
        at, columns = np.nonzero(close)
        others = columns if names is None else names[columns]
        pairs.extend((a, b) for a, b in zip(part[at].tolist(), others.tolist(), strict=True) if a != b)
    return pairs


def _store_all(
    db: Any, ordered: Sequence[tuple[int, str, str]], groups: list[list[int]], radius: int
) -> None:
    labels = list(range(len(ordered)))
    for members in groups:
        for member in members:
            labels[member] = members[0]
    rows = ((store.stored_key(key), digest, labels[p]) for p, (_idx, key, digest) in enumerate(ordered))
    stored_groups.store_all(db, rows, radius)


def _store_changes(
    db: Any,
    ordered: Sequence[tuple[int, str, str]],
    previous: dict[str, tuple[str, int]],
    labels: dict[int, int],
) -> None:
    """Write only the rows that differ: removed images out, new or re-labelled ones in."""
    present = {key for _idx, key, _digest in ordered}
    gone = [(store.stored_key(key),) for key in previous if key not in present]
    rows = []
    for position, label in labels.items():
        _idx, key, digest = ordered[position]
        if previous.get(key) != (digest, label):
            rows.append((store.stored_key(key), digest, label))
    if not gone and not rows:
        return
    stored_groups.store_changes(db, gone, rows)
