"""Every finding of a sharded index from its shard files' merged summaries, judged part by part:
the same findings as `policy.derive_findings` over the merged index, kind by kind and detail for
detail, on random image rows with duplicates and near-duplicates across shards, score outliers,
odd and tiny shapes.

Real shard files (SQLite, the index schema) merged by the real merge; the reference is always the
policy reading the merged index whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from datalint.index import store
from datalint.index.shards import merge_shard_indexes
from datalint.scan import hash_partitions, policy, summaries, summary_findings
from tests.shards.test_shard_summaries import SIGNATURES, shard_file

SHARED_DIGESTS = [f"{n:02x}" * 32 for n in range(12)]  # content hashes planted in several shards
SHAPES = [(64, 64)] * 12 + [(64, 48), (48, 64), (256, 256), (2000, 2000), (8, 300), (40, 900), (3, 3)]


def image_info(rng: random.Random, idx: int, night: bool, clusters: list[int]) -> dict[str, Any]:
    """An image's info as the image probes write it: content hash, shape, scores and phash."""
    width, height = rng.choice(SHAPES)
    digest = rng.choice(SHARED_DIGESTS) if rng.random() < 0.08 else f"{rng.getrandbits(256):064x}"
    bright = rng.uniform(0.05, 0.07) if night else rng.uniform(0.5, 1.0)
    if rng.random() < 0.02:
        bright = rng.choice([0.0001, 0.99])  # far out either way
    phash = rng.getrandbits(64)
    if rng.random() < 0.15:  # a near copy of a planted image: a few bits flipped
        phash = rng.choice(clusters)
        for bit in rng.sample(range(64), rng.randint(0, 12)):
            phash ^= 1 << bit
    scores: dict[str, Any] = {
        "highlights": round(bright, 4),
        "shadows": round(bright * rng.uniform(0.0, 0.5), 4),
        "sharpness": round(rng.lognormvariate(-1.0, 1.0), 4),
        "entropy": round(rng.uniform(0.5, 7.9), 4),
        "colorfulness": round(rng.choice([0.0, rng.uniform(0.0, 0.3)]), 4),
        "phash": f"{phash:016x}",
    }
    if rng.random() < 0.03:
        del scores["sharpness"]  # a score that could not be computed is absent
    return {"sha256": digest, "width": width, "height": height, "quality": scores}


def image_rows(
    rng: random.Random, first: int, count: int, night: bool, clusters: list[int]
) -> list[tuple[Any, ...]]:
    made = []
    for idx in range(first, first + count):
        status = rng.choice(["ok"] * 12 + ["error"])
        info: dict[str, Any] | None = image_info(rng, idx, night, clusters)
        if rng.random() < 0.05:
            info = {"sha256": f"{rng.getrandbits(256):064x}", "width": 64, "height": 64, "quality": None}
        elif rng.random() < 0.03:
            info = {"quality": image_info(rng, idx, night, clusters)["quality"]}  # a tensor: scored, no file
        row = {
            "idx": idx, "key": f"train-{idx // 100:04d}.tar/{rng.getrandbits(20):05x}-{idx}", "run_id": 1,
            "status": status, "nbytes": rng.choice([3072, 3072, 12288, rng.randint(1, 10**6)]),
            "duration": rng.uniform(0.001, 0.004) if rng.random() < 0.97 else 30 * rng.random(),
            "signature": rng.choices(SIGNATURES, [80, 3, 2, 10, 3, 2])[0],
            "info": info if status == "ok" else None,
        }  # fmt: skip
        made.append(store.sample_values(row))
    return made


def sharded_index(
    folder: Path, seed: int, *, night: bool = False, shards: int = 6, rows: int = 250
) -> tuple[list[Path], Path]:
    rng = random.Random(seed)
    clusters = [rng.getrandbits(64) for _ in range(6)]
    files = [shard_file(folder, image_rows(rng, rows * n, rows, night, clusters)) for n in range(shards)]
    merged = folder / "merged.db"
    merge_shard_indexes(merged, files, run_id=1)
    return files, merged


@pytest.fixture(scope="module", params=[False, True], ids=["day", "night"])
def sharded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[Path], Path]:
    """Six shard files of random image rows and the index they merge into; `night`: most images are
    dark, so the `dark` limit moves to the population's own outliers (the MAD limit)."""
    return sharded_index(tmp_path_factory.mktemp("images"), 18 + request.param, night=request.param)


def merged_summary(files: list[Path]) -> summaries.PopulationSummary:
    return summaries.merge_all([summaries.summary_of_file(path) for path in files])


def by_kind(found: list[policy.Finding]) -> dict[str, list[policy.Finding]]:
    kinds: dict[str, list[policy.Finding]] = {}
    for finding in found:
        kinds.setdefault(finding.kind, []).append(finding)
    return kinds


@pytest.mark.parametrize("part_rows", [summary_findings.PART_ROWS, 97])
def test_the_findings_from_summaries_are_those_of_the_merged_index(
    sharded: tuple[list[Path], Path], part_rows: int
) -> None:
    files, merged = sharded
    db = store.open_index(merged)
    try:
        options = policy.PolicyOptions(timeout=60.0)
        limits, found = summary_findings.findings(db, merged_summary(files), options, part_rows=part_rows)
        reference = policy.derive_findings(db, options)
        assert limits.quality_limits == policy.quality_limits(db, options)
        assert policy.limit_warnings(limits.quality_limits, options) == policy.population_warnings(
            db, options
        )
        expected, got = by_kind(reference), by_kind(found)
        assert sorted(got) == sorted(expected)
        for kind in expected:  # kind by kind, detail for detail
            assert got[kind] == expected[kind], kind
        assert found == reference
        # The data plants every kind the summaries decide: across shards, and past the limits.
        planted = {
            "duplicate",
            "near_duplicate",
            "dark",
            "tiny",
            "extreme_aspect",
            "odd_size",
            "slow",
            "error",
        }
        assert planted <= set(expected)
        shards_of = Counter(f.idx // 250 for f in expected["duplicate"])
        assert len(shards_of) > 1
    finally:
        db.close()


def test_the_limits_move_with_the_population_and_are_exact(sharded: tuple[list[Path], Path]) -> None:
    """The quality limits are medians and MADs: from value counts they are the very floats numpy gives."""
    files, merged = sharded
    db = store.open_index(merged)
    try:
        options = policy.PolicyOptions(thresholds=(("light", 0.5),))
        limits = summary_findings.limits_of(db, merged_summary(files), options)
        from_index = policy.quality_limits(db, options)
        assert limits.quality_limits == from_index
        dark = from_index["dark"]
        night = dark.median is not None and dark.median < 0.14
        assert (dark.limit != 0.14) == night  # the MAD limit for a dark population, the absolute one else
        assert limits.quality_limits["light"].limit == 0.5  # a limit the user set is kept as given
    finally:
        db.close()


def test_parts_judged_in_worker_processes_give_the_same_findings(sharded: tuple[list[Path], Path]) -> None:
    files, merged = sharded
    db = store.open_index(merged)
    try:
        options = policy.PolicyOptions(kinds=("dark", "duplicate", "near_duplicate", "odd_size"))
        _, alone = summary_findings.findings(db, merged_summary(files), options, part_rows=300)
        _, pooled = summary_findings.findings(db, merged_summary(files), options, part_rows=300, workers=2)
        assert pooled == alone == policy.derive_findings(db, options)
        assert {f.kind for f in alone if f.quarantine} == {"dark", "duplicate", "near_duplicate", "odd_size"}
    finally:
        db.close()


def test_weighted_median_is_numpys_median() -> None:
    import numpy as np

    rng = random.Random(3)
    for count in (1, 2, 3, 4, 7, 100, 101):
        values = [round(rng.uniform(-2, 2), 2) for _ in range(count)]
        pairs = tuple(sorted(Counter(values).items()))
        assert summary_findings.weighted_median(pairs) == float(np.median(np.array(values)))
        assert summary_findings.robust_center(pairs) == policy.quality.robust_center(values)


def tampered_copies(files: list[Path], folder: Path, *statements: tuple[str, str]) -> list[Path]:
    """Copies of the shard files, the third changed behind its kept summary by `statements`
    (SQL with one `?` for a row's index, and the WHERE that picks that row)."""
    copies = []
    for path in files:
        copy = folder / path.name
        copy.write_bytes(path.read_bytes())
        copies.append(copy)
    with contextlib.closing(sqlite3.connect(copies[2])) as connection, connection:
        picked = [
            connection.execute(f"SELECT min(idx) FROM samples WHERE {where}").fetchone()[0]
            for _, where in statements
        ]
        for (statement, _), idx in zip(statements, picked, strict=True):
            connection.execute(statement, (idx,))
    return copies


@pytest.mark.parametrize(
    "change",
    [
        # two rows swap statuses: as many rows, as many ok ones
        (("UPDATE samples SET status = 'error' WHERE idx = ?", "status = 'ok'"),
         ("UPDATE samples SET status = 'ok' WHERE idx = ?", "status != 'ok'")),
        # a row renamed: nothing any count or histogram holds changes, only which rows these are
        (("UPDATE samples SET key = key || '.renamed' WHERE idx = ?", "status = 'ok'"),),
    ],
    ids=["statuses-swapped", "key-renamed"],
)  # fmt: skip
def test_a_summary_of_as_many_rows_but_other_ones_is_refused(
    sharded: tuple[list[Path], Path], tmp_path: Path, change: tuple[tuple[str, str], ...]
) -> None:
    """A tampered shard file, merged: its kept summary is refused, and the rows' own summary is taken."""
    files, _ = sharded
    kept = merged_summary(files)  # the summaries the writers kept, before the change
    copies = tampered_copies(files, tmp_path, *change)
    merged = tmp_path / "tampered.db"
    merge_shard_indexes(merged, copies, run_id=1)
    db = store.open_index(merged)
    try:
        (rows,) = db.execute("SELECT count(*) FROM samples").fetchone()
        (good,) = db.execute("SELECT count(*) FROM samples WHERE status = 'ok'").fetchone()
        assert (rows, good) == (kept.samples, kept.ok)  # counting alone would take it
        with pytest.raises(summaries.SummaryMismatch, match="other ones"):
            summaries.check_covers(db, kept)
        with pytest.raises(summaries.SummaryMismatch):
            summary_findings.findings(db, kept, policy.PolicyOptions())
        recounted = summaries.merge_all([summaries.summary_of_file_rows(path) for path in copies])
        assert summaries.coverage_of(db.conn) == (recounted.samples, recounted.coverage)
        assert recounted.coverage != kept.coverage
        options = policy.PolicyOptions()
        assert summary_findings.findings(db, recounted, options)[1] == policy.derive_findings(db, options)
    finally:
        db.close()


def test_the_parts_refuse_a_summary_only_the_hash_tells_apart(
    sharded: tuple[list[Path], Path], tmp_path: Path
) -> None:
    """A renamed row changes no count: the parts' pass, which checks the coverage as it judges, refuses it."""
    files, _ = sharded
    copies = tampered_copies(
        files, tmp_path, ("UPDATE samples SET key = 'elsewhere' WHERE idx = ?", "status = 'ok'")
    )
    merged = tmp_path / "renamed.db"
    merge_shard_indexes(merged, copies, run_id=1)
    db = store.open_index(merged)
    try:
        with pytest.raises(summaries.SummaryMismatch, match="other ones"):
            summary_findings.findings(db, merged_summary(files), policy.PolicyOptions(), part_rows=200)
    finally:
        db.close()


def test_a_summary_that_dropped_a_part_is_refused(
    sharded: tuple[list[Path], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    files, merged = sharded
    monkeypatch.setattr(summaries, "MAX_DISTINCT", 50)  # fewer than the scores' distinct values
    summary = summaries.merge_all([summaries.summary_of_file_rows(path) for path in files])
    assert "highlights" in summary.overflow and not summary.score_values("highlights")
    db = store.open_index(merged)
    try:
        with pytest.raises(summaries.SummaryMismatch, match="too many distinct values"):
            summary_findings.findings(db, summary, policy.PolicyOptions())
    finally:
        db.close()


def test_the_summary_round_trips_through_json(sharded: tuple[list[Path], Path]) -> None:
    summary = merged_summary(sharded[0])
    assert summaries.PopulationSummary.from_json(summary.to_json()) == summary
    assert summary.scored and summary.shapes and summary.coverage
    assert json.loads(summary.to_json())["version"] == summaries.SUMMARY_VERSION


@pytest.mark.parametrize(
    "partition_rows",
    [64, pytest.param(16, marks=pytest.mark.slow)],  # 66 passes of two blocks
    ids=["one-block-passes", "two-block-passes"],
)
def test_hashes_grouped_in_small_partitions_give_the_same_findings(
    sharded: tuple[list[Path], Path], partition_rows: int
) -> None:
    """Partition files of a few dozen hashes: every duplicate and near-duplicate group crosses
    partitions (and parts, shards): the findings stay the policy's, detail for detail."""
    files, merged = sharded
    summary = merged_summary(files)
    with hash_partitions.gathered_hashes(merged.parent, summary.ok, partition_rows) as gathered:
        assert isinstance(gathered, hash_partitions.PartitionedHashes) and gathered.bits >= 4
    plan = hash_partitions.pigeonhole_plan(summary.scored, 10, partition_rows)
    assert plan.k == (1 if partition_rows == 64 else 2)
    db = store.open_index(merged)
    try:
        options = policy.PolicyOptions(kinds=("duplicate", "near_duplicate"))
        _, found = summary_findings.findings(
            db, summary, options, part_rows=200, partition_rows=partition_rows, workers=2
        )
        reference = policy.derive_findings(db, options)
        assert found == reference
        near = [f for f in reference if f.kind == "near_duplicate"]
        assert len({f.detail.split(":")[0] for f in near}) > 1 and len(near) > 20
    finally:
        db.close()
    assert not list(merged.parent.glob(".datalint-hashes-*"))  # the partition files are gone


@pytest.mark.parametrize(
    ("radius", "short_run"),
    [
        (0, 1024),
        (3, 1024),
        (10, 1024),
        pytest.param(10, 8, marks=pytest.mark.slow),  # 704 runs joined by a HashIndex each
        pytest.param(20, 1024, marks=pytest.mark.slow),
    ],
)
def test_partitioned_groups_are_the_hash_index_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, radius: int, short_run: int
) -> None:
    """Clusters of near copies, exact copies and a run of one blank hash long enough for a pass's
    HashIndex (every run of more than 8 hashes, for `short_run` 8): the partition files' groups
    are those of one HashIndex over every hash."""
    import numpy as np

    monkeypatch.setattr(hash_partitions, "SHORT_RUN", short_run)

    rng = np.random.default_rng(radius)
    centres = rng.integers(0, 2**63, 40, dtype=np.int64).astype(np.uint64) << np.uint64(1)
    flips = rng.integers(0, 64, (3000, 3))
    flipped = np.bitwise_or.reduce(np.uint64(1) << flips.astype(np.uint64), 1)
    near = centres[rng.integers(0, 40, 3000)] ^ flipped
    blank = np.full(1029, 7, np.uint64)  # one hash, more images than a short run
    values = np.concatenate([rng.integers(0, 2**63, 3000, dtype=np.int64).astype(np.uint64), near, blank])
    indices = rng.permutation(len(values)).astype(np.int64) * 3
    expected = {tuple(sorted(indices[m].tolist())) for m in policy.quality.HashIndex(values, radius).groups()}
    with hash_partitions.PartitionedHashes(tmp_path, len(values), partition_rows=400) as partitioned:
        for chunk in np.array_split(np.arange(len(values)), 7):  # parts in any order
            partitioned.add(indices[chunk], values[chunk], indices[chunk], values[chunk])
        groups = partitioned.near_groups(radius)
        assert {group.indices for group in groups} == expected
        hash_of = dict(zip(indices.tolist(), values.tolist(), strict=True))
        assert all(hash_of[i] == h for g in groups for i, h in zip(g.indices, g.hashes, strict=True))
        assert sorted(partitioned.duplicate_candidates()) == sorted(
            indices[np.isin(values, [v for v, n in Counter(values.tolist()).items() if n > 1])].tolist()
        )
    assert not list(tmp_path.iterdir())


def test_partition_files_go_to_the_temporary_folder_where_the_index_folder_cannot_take_them(
    tmp_path: Path,
) -> None:
    """A folder that cannot hold the partition files (here not a folder at all: root writes
    read-only ones) costs nothing but their place."""
    import numpy as np

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    with hash_partitions.gathered_hashes(blocked, 1000, partition_rows=10) as gathered:
        assert isinstance(gathered, hash_partitions.PartitionedHashes)
        values = np.array([5, 5, 9], np.uint64)
        gathered.add(np.arange(3), values, np.arange(3), values)
        assert sorted(gathered.duplicate_candidates()) == [0, 1]


def test_partition_folders_a_killed_judgement_left_are_removed_by_the_next(tmp_path: Path) -> None:
    """A judgement killed while it holds partition files (SIGKILL: nothing of its own runs) leaves
    its folder beside the index; the next judgement on this host removes it, and leaves alone a
    live process's folder and another host's (an index on a shared disk)."""
    import signal
    import subprocess
    import sys

    child = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time; from pathlib import Path; from datalint.scan import hash_partitions\n"
            "held = hash_partitions.PartitionedHashes(Path(sys.argv[1]), 10**7, 64)\n"
            "print('holding', flush=True); time.sleep(60)"
        ), str(tmp_path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    (left,) = tmp_path.glob(".datalint-hashes-*")
    live = tmp_path / f"{left.name.rsplit('-', 2)[0]}-{os.getpid()}-live"  # this test's own process
    elsewhere = tmp_path / f".datalint-hashes-another.host-{child.pid}-x"
    live.mkdir()
    elsewhere.mkdir()
    with hash_partitions.PartitionedHashes(tmp_path, 10**7, 64) as hashes:
        names = {path.name for path in tmp_path.glob(".datalint-hashes-*")}
        assert left.name not in names
        assert {live.name, elsewhere.name, hashes._root.name} <= names
    assert {path.name for path in tmp_path.glob(".datalint-hashes-*")} == {live.name, elsewhere.name}
