"""Population findings after an incremental scan are those of a full rescan: the near-duplicate
groups an incremental scan updates from the stored ones (datalint/scan/hash_groups.py) against the
full pass over all pairs, on a real index file and on real image folders."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from scan_support import rows, run_cli

from datalint.index import store
from datalint.scan import hash_groups, quality

RADIUS = 3


def _full_groups(ordered: list[tuple[int, str, str]]) -> set[frozenset[str]]:
    values = [int(digest, 16) for _idx, _key, digest in ordered]
    groups = quality.HashIndex(values, RADIUS).groups()
    return {frozenset(ordered[m][1] for m in members) for members in groups}


def _kept_groups(db: Any, ordered: list[tuple[int, str, str]]) -> set[frozenset[str]]:
    values = [int(digest, 16) for _idx, _key, digest in ordered]
    groups = hash_groups.update_groups(db, ordered, values, RADIUS)
    assert all(members == sorted(members) for members in groups)
    return {frozenset(ordered[m][1] for m in members) for members in groups}


def _chained_hashes(rng: random.Random, count: int) -> dict[str, int]:
    """Chains of hashes two bits apart (within the radius of the next, not of the one after): a
    removed link splits its group, an added one joins two."""
    hashes: dict[str, int] = {}
    for n in range(count):
        if n % 5 and hashes:
            value = list(hashes.values())[-1] ^ (0b11 << rng.randrange(0, 62, 2))
        else:
            value = rng.getrandbits(64)
        hashes[f"k{rng.getrandbits(40):010x}"] = value
    return hashes


def test_stored_groups_updated_through_many_edits_equal_a_full_pass(tmp_path: Path) -> None:
    rng = random.Random(5)
    db = store.open_index(tmp_path / "groups.db")
    hashes = _chained_hashes(rng, 300)
    splits = joins = last = 0
    for step in range(12):
        ordered = sorted((n, key, f"{value:016x}") for n, (key, value) in enumerate(hashes.items()))
        ordered.sort(key=lambda item: (item[1], item[0]))
        expected = _full_groups(ordered)
        assert _kept_groups(db, ordered) == expected, f"step {step}"
        by_label: dict[int, set[str]] = {}
        for key, label in db.execute("SELECT key, grp FROM hash_groups"):
            by_label.setdefault(label, set()).add(key)
        assert {frozenset(keys) for keys in by_label.values() if len(keys) > 1} == expected  # what is stored
        last = len(ordered)
        # The next folder: links removed, hashes changed, new images near old ones and at random.
        keys = list(hashes)
        for key in rng.sample(keys, 8):
            del hashes[key]
        for key in rng.sample(list(hashes), 4):
            hashes[key] ^= 1 << rng.randrange(64)
        for _ in range(10):
            near = rng.choice(list(hashes.values())) ^ (1 << rng.randrange(64))
            hashes[f"k{rng.getrandbits(40):010x}"] = near if rng.random() < 0.7 else rng.getrandbits(64)
        after = _full_groups(
            sorted(((0, key, f"{value:016x}") for key, value in hashes.items()), key=lambda item: item[1])
        )
        splits += len(after) > len(expected)
        joins += len(after) < len(expected)
    assert splits and joins  # the edits did split and join groups
    (stored,) = db.execute("SELECT count(*) FROM hash_groups").fetchone()
    assert stored == last  # one row per image of the last update
    db.close()


def test_another_radius_or_a_duplicated_key_finds_the_groups_from_scratch(tmp_path: Path) -> None:
    db = store.open_index(tmp_path / "groups.db")
    ordered = [(0, "a", "0000000000000000"), (1, "b", "0000000000000007"), (2, "c", "00000000000000ff")]
    values = [int(digest, 16) for _idx, _key, digest in ordered]
    assert hash_groups.update_groups(db, ordered, values, 3) == [[0, 1]]
    assert hash_groups.update_groups(db, ordered, values, 8) == [[0, 1, 2]]  # not the stored radius 3
    assert db.execute("SELECT radius FROM hash_group_radius").fetchall() == [(8,)]
    twice = [*ordered, (3, "a", "ffffffffffffffff")]
    assert hash_groups.update_groups(db, twice, [*values, 2**64 - 1], 8) == [[0, 1, 2]]
    db.close()


# ----------------------------------------------------------------------------------------------
# Real folders


def _scene(seed: int) -> np.ndarray:
    """A photo-like image: smooth colour fields and shapes, so a recoded copy keeps its hash."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:96, 0:128].astype(np.float32)
    image = np.stack([rng.uniform(0.2, 0.8) + 0.3 * np.sin(x / rng.uniform(6, 30) + c) for c in range(3)], -1)
    for _ in range(4):
        cy, cx, r = rng.uniform(0, 96), rng.uniform(0, 128), rng.uniform(8, 30)
        image[(y - cy) ** 2 + (x - cx) ** 2 < r * r] = rng.uniform(0, 1, 3)
    return (np.clip(image, 0, 1) * 255).astype(np.uint8)


def _write(path: Path, seed: int, quality_: int = 92) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(_scene(seed)).save(path, quality=quality_)


def _scan(folder: Path, db: Path) -> dict[str, Any]:
    code, out, err = run_cli(
        "scan", "--images", str(folder), "--db", str(db), "--workers", "2", "--format", "json"
    )
    assert code in (0, 1), err
    summary: dict[str, Any] = json.loads(out)
    return summary


def _findings(db: Path) -> list[tuple[Any, ...]]:
    return rows(
        db,
        "SELECT position_of(f.idx), s.key, f.kind, f.detail FROM findings f JOIN samples s USING (idx)"
        " ORDER BY 1, 3",
    )


def test_near_duplicate_groups_after_an_incremental_scan_equal_a_full_rescan(tmp_path: Path) -> None:
    folder = tmp_path / "images"
    for n in range(12):
        _write(folder / f"s{n:02d}.jpg", n)
    for n in (2, 5):  # each scene with two recoded copies: groups of three
        _write(folder / f"s{n:02d}_copy_a.jpg", n, quality_=40)
        _write(folder / f"s{n:02d}_copy_b.jpg", n, quality_=60)
    db = tmp_path / "a.db"
    _scan(folder, db)
    first = {kind for _idx, _key, kind, _detail in _findings(db)}
    assert "near_duplicate" in first
    # The representative of one group leaves, another scene gains a copy, one copy becomes another
    # image, and a file inserted in the middle moves every position after it.
    (folder / "s02.jpg").unlink()
    _write(folder / "s07_copy.jpg", 7, quality_=50)
    _write(folder / "s05_copy_b.jpg", 99)
    _write(folder / "s03_new.jpg", 50)
    again = _scan(folder, db)
    assert again["changes"]["added"] == 2 and again["changes"]["removed"] == 1
    assert again["changes"]["changed"] == 1
    _scan(folder, tmp_path / "b.db")
    incremental, full = _findings(db), _findings(tmp_path / "b.db")
    assert incremental == full
    near = {key: detail for _idx, key, kind, detail in full if kind == "near_duplicate"}
    assert near.keys() == {"s02_copy_b.jpg", "s05_copy_a.jpg", "s07_copy.jpg"}
    assert "looks like s02_copy_a.jpg" in near["s02_copy_b.jpg"]  # the group's new representative
    assert (
        json.loads((tmp_path / "a.quarantine.json").read_text())["samples"]
        == json.loads((tmp_path / "b.quarantine.json").read_text())["samples"]
    )


# ----------------------------------------------------------------------------------------------
# Updates after events stat only the paths the events named


def test_an_update_after_events_stats_only_the_event_paths_and_a_walk_stats_all(tmp_path: Path) -> None:
    from datalint.scan import api
    from datalint.scan.images import images_description

    folder = tmp_path / "images"
    for n in range(6):
        _write(folder / f"{n:02d}.jpg", 200 + n)
    description = images_description(folder=str(folder))
    db, quarantine = tmp_path / "e.db", tmp_path / "e.quarantine.json"
    assert api.scan_source(description, api.ScanOptions(workers=2), db=db, quarantine=quarantine).scanned == 6
    (folder / "01.jpg").write_bytes((folder / "01.jpg").read_bytes()[:300])  # both truncated,
    (folder / "04.jpg").write_bytes((folder / "04.jpg").read_bytes()[:300])  # one event reported
    _write(folder / "02b.jpg", 300)
    events = api.ScanOptions(workers=2, stat_only=frozenset({"01.jpg", "02b.jpg"}))
    after_events = api.scan_source(description, events, db=db, quarantine=quarantine)
    assert after_events.changes is not None
    assert (after_events.changes["added"], after_events.changes["changed"]) == (1, 1)
    assert [entry.key for entry in after_events.worst] == ["01.jpg"]  # 04.jpg keeps its recorded state
    walk = api.scan_source(description, api.ScanOptions(workers=2), db=db, quarantine=quarantine)
    assert walk.changes is not None and walk.changes["changed"] == 1
    assert sorted(entry.key for entry in walk.worst) == ["01.jpg", "04.jpg"]


# ----------------------------------------------------------------------------------------------
# What a rerun that measures little pays


_SCAN_THEN_MODULES = """
import json, sys
from datalint.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "decoders": sorted({"cv2"} & set(sys.modules))}), file=sys.stderr)
"""


def test_a_rerun_that_measures_few_files_leaves_the_decoder_imports_to_the_workers(tmp_path: Path) -> None:
    import subprocess

    from scan_support import PYTHON, ROOT

    folder = tmp_path / "images"
    for n in range(4):
        _write(folder / f"{n:02d}.jpg", 400 + n)
    db = tmp_path / "w.db"
    command = [PYTHON, "-c", _SCAN_THEN_MODULES, "scan", "--images", str(folder), "--db", str(db),
               "--workers", "2", "--format", "json"]  # fmt: skip

    def run() -> tuple[dict[str, Any], dict[str, Any]]:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
        return json.loads(done.stdout), json.loads(done.stderr.strip().splitlines()[-1])

    assert run()[0]["scanned"] == 4
    (folder / "01.jpg").write_bytes((folder / "01.jpg").read_bytes()[:300])
    summary, parent = run()
    assert summary["scanned"] == 1 and summary["quarantined"] == 1  # the workers decoded it
    assert parent["decoders"] == []  # and the scanning process never imported OpenCV


def _image_index(path: Path, rng: random.Random, every_score: bool = False) -> Any:
    """A real index of 300 scored images: scores spread with a few far out, some missing (none with
    `every_score`), two of them integers; most images 32x32, a few big, small or banner-shaped."""
    db = store.open_index(path)
    shapes = [(32, 32)] * 280 + [(640, 480)] * 6 + [(8, 8)] * 4 + [(400, 40)] * 5 + [(33, 31)] * 5
    with store.transaction(db):
        for idx, (width, height) in enumerate(shapes):
            scores: dict[str, Any] = {
                name: rng.gauss(0.5, 0.05) for name in ("highlights", "shadows", "entropy")
            }
            scores["sharpness"], scores["colorfulness"] = rng.gauss(20, 2), rng.gauss(0.4, 0.05)
            if idx % 37 == 0:
                scores["highlights"] = rng.choice([0.01, 0.02, 0.99])  # far out, either side
            if idx % 53 == 0 and not every_score:
                del scores["sharpness"]  # an image without that score is judged by the others
            if idx == 101:
                scores["entropy"] = scores["shadows"] = 0  # an integer score, at the far end
            info = {"sha256": f"{idx:064x}", "width": width, "height": height, "quality": scores}
            db.conn.execute(
                "INSERT INTO samples (idx, key, status, info) VALUES (?, ?, 'ok', ?)",
                [idx, f"img/{idx:04d}.png", json.dumps(info)],
            )
    return db


@pytest.mark.parametrize("every_score", [False, True], ids=["some-scores-missing", "every-score"])
def test_the_population_pass_judges_each_image_as_a_plain_per_image_comparison_would(
    tmp_path: Path, every_score: bool
) -> None:
    """Scores compared as arrays and shapes judged once per distinct shape give, finding for finding
    and detail for detail, what comparing every image with every limit one by one gives (the
    scores read as columns when every image has every one, image by image otherwise)."""
    from datalint.scan import policy

    db = _image_index(tmp_path / "scored.db", random.Random(11), every_score)
    options = policy.PolicyOptions()
    limits = policy.quality_limits(db, options)
    per_image = {
        name: [scores[name] for _idx, _key, scores in policy.quality_rows(db) if scores.get(name) is not None]
        for name in quality.SCORE_NAMES
    }
    thresholds = policy.quality_thresholds(options)
    assert limits == quality.kind_limits(per_image, thresholds, fixed=dict(options.thresholds))
    expected: list[tuple[int, str, str]] = []
    for idx, _key, scores in policy.quality_rows(db):
        for kind, limit in limits.items():
            value = scores.get(limit.score)
            if value is not None and quality.past_limit(value, limit):
                side = "over" if limit.direction == "high" else "under"
                said = f"{limit.score} {value:.3g}, {side} the limit {limit.limit:.3g}"
                said += f" (median {limit.median:.3g})"
                expected.append((idx, kind, said))
    shapes = policy.image_shapes(db)
    for kind, shape_limit in quality.shape_limits(shapes, policy.quality_thresholds(options)).items():
        measure = quality.SHAPE_MEASURES[kind]
        values = sorted(measure(w, h) for w, h in shapes.values())
        assert shape_limit.median == float(np.median(values))
        for idx, (w, h) in shapes.items():
            if abs(shape_limit.deviation(w, h)) > shape_limit.factor:
                expected.append((idx, kind, f"{w}x{h}"))
    found = [
        (idx, kind, detail if kind not in quality.SHAPE_MEASURES else detail.split(":")[0])
        for idx, kind, detail in policy.quality_index_findings(db, options)
        if kind != "near_duplicate"
    ]
    assert sorted(found) == sorted(expected)
    kinds = {kind for _idx, kind, _detail in found}
    assert {"dark", "low_information", "odd_size", "odd_aspect"} <= kinds  # images past limits, as planted
    db.close()


@pytest.mark.parametrize("radius", [RADIUS, 10], ids=["radius-plus-one-blocks", "near-values-in-four-blocks"])
def test_new_images_compared_by_blocks_find_every_pair_comparing_with_all_finds(radius: int) -> None:
    """The block lookup a large index takes for its new images against every comparison: chains two
    bits apart, hashes a few bits apart in every block, and one hash shared by many images (radius
    3: exact blocks; radius 10, the default: values 1-2 bits off in 16-bit blocks)."""
    import numpy as np

    rng = random.Random(8)
    values = list(_chained_hashes(rng, 3000).values())
    for n in range(0, 400, 4):  # within the radius of the one before: 3 bits anywhere, in one block or three
        values[n + 1] = values[n] ^ sum(1 << bit for bit in rng.sample(range(64), 3))
    spread = sum(1 << ((k % 4) * 16 + k // 4) for k in range(radius))  # `radius` bits, over every block
    for n in range(400, 480, 4):  # at the radius exactly: the closest block as far off as it can be
        values[n + 1] = values[n] ^ spread
    values[2000:2060] = [values[1999]] * 60
    hashes = np.array(values, dtype=np.uint64)
    fresh = sorted(set(rng.sample(range(len(values)), 120)) | {0, 1, 1999, 2010} | set(range(400, 480, 4)))
    by_blocks = hash_groups._pairs_with(hashes, fresh, radius, brute_below=0)
    every = hash_groups._pairs_with(hashes, fresh, radius, brute_below=1 << 62)
    assert set(by_blocks) == set(every)
    assert len(set(every)) > 100  # the planted pairs are there to find
    assert {(n, n + 1) for n in range(400, 480, 4)} <= set(by_blocks)


def test_shapes_and_duplicates_judged_from_the_scores_read_equal_the_index_queries(tmp_path: Path) -> None:
    """`tiny`, `extreme_aspect` and `duplicate` taken from the read the scores come from give what
    the index's own queries give, finding for finding: shared bytes (a group of three, one of
    two), tiny and banner images (500x32), a zero width, a missing height, a sample without a key."""
    from datalint.scan import images, policy

    db = _image_index(tmp_path / "shaped.db", random.Random(5))
    with store.transaction(db):
        for idx, digest in [(3, "d1"), (40, "d1"), (77, "d1"), (9, "d2"), (200, "d2"), (150, "d3")]:
            db.conn.execute(
                "UPDATE samples SET info = json_set(info, '$.sha256', ?) WHERE idx = ?", [digest, idx]
            )
        db.conn.execute("UPDATE samples SET key = NULL WHERE idx = 200")
        db.conn.execute("UPDATE samples SET info = json_set(info, '$.width', 0) WHERE idx = 12")
        db.conn.execute("UPDATE samples SET info = json_set(info, '$.width', 500) WHERE idx IN (14, 15)")
        db.conn.execute("UPDATE samples SET info = json_remove(info, '$.height') WHERE idx = 13")
        db.conn.execute("UPDATE samples SET info = json_remove(info, '$.sha256') WHERE idx = 290")  # damaged
    thresholds = policy.shape_thresholds(policy.PolicyOptions())
    expected = images.index_findings(db, thresholds)
    found = policy.image_index_findings(db, thresholds)
    assert found == expected
    counts = Counter(kind for _idx, kind, _detail in found)
    assert counts["duplicate"] == 3 and counts["tiny"] == 10 and counts["extreme_aspect"] == 2  # as planted
    assert (12, "tiny") in {(idx, kind) for idx, kind, _detail in found}  # a zero width is tiny
    db.close()
