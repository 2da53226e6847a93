"""Quality kinds, near-duplicates and leaks: real generated pixels, real JPEG/PNG files, real scans."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from images_support import findings_by_key, run_cli
from PIL import Image

from datalint.scan import hash_index, quality

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "datalint_quality_corpus", ROOT / "benchmarks/quality_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


corpus = _generator()


def _write(folder: Path, name: str, pixels: np.ndarray, **options: object) -> None:
    Image.fromarray(corpus.to_uint8(pixels)).save(folder / name, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of 24 clean scenes, one image of every scored kind, and clean look-alikes."""
    folder = tmp_path_factory.mktemp("quality") / "images"
    folder.mkdir()
    rng = np.random.default_rng(3)
    for number in range(24):
        _write(folder, f"clean_{number:02d}.jpg", corpus.scene(rng, 256, 192), quality=90)
    for kind in ("dark", "light", "blurry", "low_information", "grayscale", "clean_night", "clean_gradient"):
        _write(folder, f"{kind}.jpg", corpus.planted(kind, rng, 256, 192), quality=90)
    _write(folder, "big.jpg", corpus.scene(rng, 1600, 1200), quality=90)
    _write(folder, "banner.png", corpus.scene(rng, 440, 110))
    original = Image.fromarray(corpus.to_uint8(corpus.scene(rng, 256, 192)))
    original.save(folder / "original.jpg", quality=90)
    original.save(folder / "recoded_q50.jpg", quality=50)
    original.resize((128, 96)).save(folder / "recoded_half.png")
    original.crop((10, 8, 246, 184)).save(folder / "recoded_crop.jpg", quality=85)
    return folder


@pytest.fixture(scope="module")
def scanned(planted: Path) -> tuple[Path, dict[str, set[str]]]:
    db = planted.parent / "scan.db"
    code, _out, err = run_cli(
        "scan", "--images", str(planted), "--db", str(db), "--workers", "1", "--progress", "none"
    )
    assert code in (0, 1), err
    return db, findings_by_key(db)


@pytest.mark.parametrize(
    ("name", "kind"),
    [("dark.jpg", "dark"), ("light.jpg", "light"), ("blurry.jpg", "blurry"),
     ("low_information.jpg", "low_information"), ("grayscale.jpg", "grayscale"),
     ("big.jpg", "odd_size"), ("banner.png", "odd_aspect")],
)  # fmt: skip
def test_each_kind_is_found_on_its_planted_image(
    scanned: tuple[Path, dict[str, set[str]]], name: str, kind: str
) -> None:
    _db, found = scanned
    assert kind in found.get(name, set())
    others = [key for key, kinds in found.items() if kind in kinds and key.startswith("clean_")]
    assert others == []


def test_portrait_photos_among_landscape_ones_are_not_odd_but_a_banner_and_a_strip_are(
    tmp_path: Path,
) -> None:
    """Photo sets hold both orientations (a third portrait is common): the aspect is the long side
    over the short one, so only shapes far from every photo's are odd."""
    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(9)
    for number in range(12):
        _write(folder, f"landscape_{number:02d}.jpg", corpus.scene(rng, 256, 192), quality=90)
    for number in range(6):
        _write(folder, f"portrait_{number:02d}.jpg", corpus.scene(rng, 192, 256), quality=90)
    _write(folder, "banner.jpg", corpus.scene(rng, 448, 112), quality=90)
    _write(folder, "strip.jpg", corpus.scene(rng, 112, 448), quality=90)
    db = tmp_path / "scan.db"
    code, _out, err = run_cli(
        "scan", "--images", str(folder), "--db", str(db), "--workers", "1", "--progress", "none"
    )
    assert code in (0, 1), err
    odd = {key for key, kinds in findings_by_key(db).items() if "odd_aspect" in kinds}
    assert odd == {"banner.jpg", "strip.jpg"}


def test_a_photo_darkened_or_washed_out_keeps_its_colour_and_is_not_called_grey(tmp_path: Path) -> None:
    """At a tenth of its tonal range a colour photo's channels differ little in absolute terms, but
    as much as ever relative to that range: `grayscale` reads the share, so only grey content is."""
    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(12)
    for number in range(12):
        _write(folder, f"clean_{number:02d}.jpg", corpus.scene(rng, 256, 192), quality=90)
    _write(folder, "darkened.jpg", corpus.scene(rng, 256, 192) * 0.03, quality=95)
    _write(folder, "washed_out.jpg", 0.92 + corpus.scene(rng, 256, 192) * 0.03, quality=95)
    _write(folder, "grey.jpg", corpus.planted("grayscale", rng, 256, 192), quality=90)
    db = tmp_path / "scan.db"
    code, _out, err = run_cli(
        "scan", "--images", str(folder), "--db", str(db), "--workers", "1", "--progress", "none"
    )
    assert code in (0, 1), err
    found = findings_by_key(db)
    assert {key for key, kinds in found.items() if "grayscale" in kinds} == {"grey.jpg"}
    assert "dark" in found["darkened.jpg"] and "light" in found["washed_out.jpg"]


def _dusk(rng: np.random.Generator, width: int = 256, height: int = 192) -> np.ndarray:
    """A sky graded from dark blue to orange over the whole frame, with four thin towers cut sharp
    against it: most of the picture is smooth, and it is in focus."""
    rows = np.linspace(0, 1, height)[:, None, None]
    top, bottom = np.array([0.05, 0.05, 0.2]), np.array([1.0, 0.6, 0.2])
    image = np.broadcast_to(top + (bottom - top) * rows, (height, width, 3)).copy()
    for _ in range(4):
        x, tower_width, tower_height = rng.integers(0, width - 12), rng.integers(3, 8), rng.integers(20, 60)
        image[height - tower_height :, x : x + tower_width] -= 0.4
    return np.clip(image, 0, 1)


@pytest.fixture(scope="module")
def dusk_and_blur(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of twelve scenes, a smooth dusk sky with sharp towers, and one blurred scene."""
    folder = tmp_path_factory.mktemp("dusk") / "images"
    folder.mkdir()
    rng = np.random.default_rng(3)
    for number in range(12):
        _write(folder, f"clean_{number:02d}.jpg", corpus.scene(rng, 256, 192), quality=90)
    _write(folder, "dusk.jpg", _dusk(np.random.default_rng(3)), quality=90)
    _write(folder, "blurred.jpg", corpus.planted("blurry", rng, 256, 192), quality=90)
    db = folder.parent / "scan.db"
    code, _out, err = run_cli(
        "scan", "--images", str(folder), "--db", str(db), "--workers", "1", "--progress", "none"
    )
    assert code in (0, 1), err
    return db


def test_a_smooth_scene_with_sharp_edges_is_not_blurry_but_a_blurred_one_is(dusk_and_blur: Path) -> None:
    """The Laplacian energy alone is low wherever most of a picture is smooth; `focus` also reads
    the share of that energy at the fine scale, which blur takes away and a smooth sky does not."""
    blurry = {key for key, kinds in findings_by_key(dusk_and_blur).items() if "blurry" in kinds}
    assert blurry == {"blurred.jpg"}


def test_an_index_scanned_before_focus_is_judged_blurry_as_it_was(
    dusk_and_blur: Path, tmp_path: Path
) -> None:
    """With no `focus` stored, `blurry` reads `sharpness` under its old limit of 0.1: the same images
    as before, the smooth dusk sky among them, until a rescan stores `focus`."""
    import shutil
    import sqlite3

    old = tmp_path / "old.db"
    shutil.copyfile(dusk_and_blur, old)
    with sqlite3.connect(old) as connection:
        stored = "SELECT key, json_extract(info, '$.quality.sharpness') FROM samples"
        sharpness = dict(connection.execute(stored))
        connection.execute("UPDATE samples SET info = json_remove(info, '$.quality.focus')")
    code, out, err = run_cli("quarantine", str(old), "--kinds", "blurry")
    assert code == 1, err
    listed = {sample["key"] for sample in json.loads(out)["samples"]}
    assert listed == {key for key, value in sharpness.items() if value < 0.1} >= {"dusk.jpg", "blurred.jpg"}
    assert quality.with_derived_scores({"sharpness": 0.05})["focus"] == 0.5


def test_look_alikes_are_not_flagged(scanned: tuple[Path, dict[str, set[str]]]) -> None:
    _db, found = scanned
    assert "dark" not in found.get("clean_night.jpg", set())  # dark, but lit detail
    assert "blurry" not in found.get("clean_gradient.jpg", set())  # smooth, but nothing out of focus


def test_near_duplicates_form_one_group_named_by_its_representative(
    scanned: tuple[Path, dict[str, set[str]]],
) -> None:
    db, found = scanned
    copies = {"recoded_q50.jpg", "recoded_half.png", "recoded_crop.jpg"}
    assert {key for key, kinds in found.items() if "near_duplicate" in kinds} == copies
    import sqlite3

    with sqlite3.connect(db) as connection:
        details = [
            row[0] for row in connection.execute("SELECT detail FROM findings WHERE kind = 'near_duplicate'")
        ]
    assert all("looks like original.jpg" in detail for detail in details)


def test_scores_are_stored_and_quality_kinds_are_not_quarantined_by_default(
    scanned: tuple[Path, dict[str, set[str]]],
) -> None:
    db, _found = scanned
    import sqlite3

    with sqlite3.connect(db) as connection:
        (info,) = connection.execute("SELECT info FROM samples WHERE key = 'dark.jpg'").fetchone()
        quarantined = connection.execute(
            "SELECT COUNT(*) FROM findings WHERE kind = 'dark' AND quarantine = 1"
        ).fetchone()
    scores = json.loads(info)["quality"]
    assert scores["highlights"] < 0.14 and len(scores["phash"]) == 16
    assert quarantined == (0,)


def test_quarantine_rederives_thresholds_and_kinds_without_rescanning(
    scanned: tuple[Path, dict[str, set[str]]],
) -> None:
    db, _found = scanned
    code, out, err = run_cli("quarantine", str(db), "--kinds", "dark,blurry")
    assert code == 1, err
    assert {sample["key"] for sample in json.loads(out)["samples"]} == {"dark.jpg", "blurry.jpg"}
    code, out, err = run_cli("quarantine", str(db), "--kinds", "dark", "--threshold", "dark=0.85")
    assert code == 1, err
    keys = {sample["key"] for sample in json.loads(out)["samples"]}
    assert {"dark.jpg", "clean_night.jpg"} <= keys  # a limit the user sets is used as given
    code, out, err = run_cli("quarantine", str(db), "--kinds", "dark", "--threshold", "dark=0.05")
    assert code == 0, err  # an empty list
    assert json.loads(out)["samples"] == []


def test_a_bad_threshold_is_a_usage_error(scanned: tuple[Path, dict[str, set[str]]]) -> None:
    db, _found = scanned
    code, _out, err = run_cli("quarantine", str(db), "--threshold", "darkness=0.2")
    assert code == 2 and "KIND=NUMBER" in err


def test_against_another_split_finds_leaks_and_quarantines_them(
    planted: Path, scanned: tuple[Path, dict[str, set[str]]], tmp_path: Path
) -> None:
    train_db, _found = scanned  # the planted folder's index, made here if no test before made it
    val = tmp_path / "val"
    val.mkdir()
    leaked = Image.open(planted / "clean_03.jpg")
    leaked.resize((200, 150)).save(val / "leaked.jpg", quality=70)
    (val / "copied.jpg").write_bytes((planted / "clean_04.jpg").read_bytes())
    rng = np.random.default_rng(99)
    for number in range(8):
        _write(val, f"fresh_{number}.jpg", corpus.scene(rng, 256, 192), quality=90)
    db = tmp_path / "val.db"
    code, _out, err = run_cli(
        "scan",
        "--images",
        str(val),
        "--db",
        str(db),
        "--workers",
        "1",
        "--progress",
        "none",
        "--against",
        str(train_db),
    )
    assert code == 1, err
    found = findings_by_key(db)
    assert {key for key, kinds in found.items() if "leak" in kinds} == {"leaked.jpg", "copied.jpg"}
    quarantine = json.loads((tmp_path / "val.quarantine.json").read_text())
    assert {sample["key"] for sample in quarantine["samples"]} == {"leaked.jpg", "copied.jpg"}
    import sqlite3

    with sqlite3.connect(db) as connection:
        details = dict(
            connection.execute(
                "SELECT s.key, f.detail FROM findings f JOIN samples s USING (idx) WHERE kind = 'leak'"
            )
        )
    assert "clean_03.jpg" in details["leaked.jpg"] and "same bytes as clean_04.jpg" in details["copied.jpg"]


def test_against_a_missing_index_is_a_usage_error(planted: Path, tmp_path: Path) -> None:
    code, _out, err = run_cli(
        "scan",
        "--images",
        str(planted),
        "--db",
        str(tmp_path / "x.db"),
        "--against",
        str(tmp_path / "none.db"),
    )
    assert code == 2 and "no scan index" in err


def _hashes_around(radius: int, seed: int) -> list[int]:
    """Random hashes, near copies at every distance around the radius, and exact copies."""
    rng = random.Random(seed)
    hashes = [rng.getrandbits(64) for _ in range(300)]
    for _ in range(150):
        base = rng.choice(hashes)
        flips = rng.sample(range(64), rng.randint(0, radius + 3))
        hashes.append(base ^ sum(1 << bit for bit in flips))
    hashes += [hashes[7]] * 3 + [0, 0, 2**64 - 1]
    return hashes


# None: the split the cost model plans; a number: that many balanced blocks
@pytest.mark.parametrize(("radius", "parts"), [(0, None), (3, None), (3, 1), (3, 2), (3, 4), (10, None),
                                               (10, 3), (10, 5), (10, 11)])  # fmt: skip
def test_hash_index_finds_exactly_the_brute_force_pairs(radius: int, parts: int | None) -> None:
    hashes = _hashes_around(radius, seed=radius)
    blocks = None if parts is None else hash_index.split_blocks(parts, radius)
    index = quality.HashIndex(hashes, radius, blocks)
    pairs = list(index.pairs())
    assert len(pairs) == len(set(pairs))
    expected = quality.brute_force_pairs(hashes, radius)
    assert set(pairs) == expected
    # the groups are the connected components of those pairs
    assert index.groups() == _components(len(hashes), expected)


def test_the_join_in_two_processes_finds_the_same_groups() -> None:
    hashes = _hashes_around(10, seed=4)
    blocks = hash_index.split_blocks(3, 10)
    serial = quality.HashIndex(hashes, 10, blocks, jobs=1)
    forked = quality.HashIndex(hashes, 10, blocks, jobs=2)
    assert forked.groups() == serial.groups()
    assert set(forked.pairs()) == quality.brute_force_pairs(hashes, 10)


def test_a_dense_cluster_of_near_copies_is_one_group() -> None:
    """Thousands of almost-black images hash within a few bits of each other: one group, found in
    seconds (their millions of pairs are joined in numpy, not in a Python loop)."""
    rng = random.Random(8)
    base = rng.getrandbits(64)
    cluster = [base ^ sum(1 << bit for bit in rng.sample(range(64), 2)) for _ in range(1500)]
    others = [rng.getrandbits(64) for _ in range(3000)]
    groups = quality.HashIndex(cluster + others, 10).groups()
    assert set(range(1500)) <= set(max(groups, key=len))


def _components(count: int, pairs: set[tuple[int, int]]) -> list[list[int]]:
    linked: dict[int, set[int]] = {}
    for a, b in pairs:
        linked.setdefault(a, set()).add(b)
        linked.setdefault(b, set()).add(a)
    seen: set[int] = set()
    groups = []
    for start in range(count):
        if start in seen or start not in linked:
            continue
        group, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node not in group:
                group.add(node)
                todo.extend(linked[node] - group)
        seen |= group
        groups.append(sorted(group))
    return groups


@pytest.mark.parametrize(("radius", "parts"), [(3, None), (3, 2), (10, None), (10, 3), (10, 11)])
def test_nearest_is_the_closest_hash_by_brute_force(radius: int, parts: int | None) -> None:
    indexed = _hashes_around(radius, seed=radius + 100)
    rng = random.Random(radius)
    queries = [
        value ^ sum(1 << bit for bit in rng.sample(range(64), rng.randint(0, radius + 2)))
        for value in indexed[:200]
    ]
    queries += [rng.getrandbits(64) for _ in range(50)]
    blocks = None if parts is None else hash_index.split_blocks(parts, radius)
    found = quality.HashIndex(indexed, radius, blocks).nearest_all(queries)
    for query, match in zip(queries, found, strict=True):
        distances = [quality.hamming(query, value) for value in indexed]
        best = min(distances)
        assert match == ((distances.index(best), best) if best <= radius else None)


def test_scores_of_real_pixels_order_as_a_user_expects() -> None:
    rng = np.random.default_rng(5)
    sharp = corpus.to_uint8(corpus.scene(rng, 256, 192))
    blurred = corpus.to_uint8(corpus.planted("blurry", np.random.default_rng(5), 256, 192))
    assert quality.score_pixels(sharp)["sharpness"] > 3 * quality.score_pixels(blurred)["sharpness"]
    flat = np.full((64, 64, 3), 120, np.uint8)
    assert quality.score_pixels(flat)["entropy"] == 0.0
    grey = np.repeat(sharp.mean(axis=2, keepdims=True).astype(np.uint8), 3, axis=2)
    assert quality.score_pixels(grey)["colorfulness"] == 0.0 < quality.score_pixels(sharp)["colorfulness"]


def test_open_index_gives_data_frames_with_pandas(scanned: tuple[Path, dict[str, set[str]]]) -> None:
    import datalint

    db, _found = scanned
    with datalint.open_index(db) as index:
        scores = index.scores()
        blurriest = scores.nsmallest(1, "focus")["key"].tolist()
        findings = index.findings("dark")
        samples = index.samples()
    assert blurriest == ["blurry.jpg"]
    assert findings["key"].tolist() == ["dark.jpg"] and not findings["quarantine"].any()
    assert len(samples) == len(scores) and set(samples["status"]) == {"ok"}


def test_open_index_gives_lists_of_dicts_without_pandas(scanned: tuple[Path, dict[str, set[str]]]) -> None:
    import subprocess

    db, _found = scanned
    program = (
        "import sys; sys.modules['pandas'] = None\n"  # as if pandas were not installed
        "import datalint\n"
        f"index = datalint.open_index({str(db)!r})\n"
        "rows = index.scores()\n"
        "assert isinstance(rows, list) and isinstance(rows[0], dict), rows\n"
        "print(min(rows, key=lambda row: row['focus'])['key'])\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "blurry.jpg"


def test_open_index_on_a_missing_file_says_so(tmp_path: Path) -> None:
    import datalint
    from datalint.index.store import IndexFileError

    with pytest.raises(IndexFileError, match="no scan index"):
        datalint.open_index(tmp_path / "none.db")


DATASETS = '''
import torch

class Images(torch.utils.data.Dataset):
    """Normalised 3x64x64 scenes; `blank` returns the tensor a broken transform would."""

    def __init__(self, blank):
        self.blank = blank
        generator = torch.Generator().manual_seed(0)
        self.images = [torch.rand(3, 8, 8, generator=generator) for _ in range(12)]

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image = torch.nn.functional.interpolate(self.images[index][None], size=64, mode="nearest")[0]
        if self.blank:
            image = torch.zeros_like(image)
        return (image - 0.5) / 0.25, index % 3

good = Images(blank=False)
blank = Images(blank=True)
'''


def test_dataset_tensors_get_scores_and_a_blanked_population_is_one_warning(tmp_path: Path) -> None:
    (tmp_path / "tensors.py").write_text(DATASETS)
    for name, dark in (("good", False), ("blank", True)):
        db = tmp_path / f"{name}.db"
        code, out, err = run_cli(
            "scan", "--dataset", f"{tmp_path / 'tensors.py'}:{name}", "--db", str(db),
            "--workers", "1", "--progress", "none", "--format", "json",
        )  # fmt: skip
        assert code in (0, 1), err
        notes = json.loads(out)["notes"]
        import sqlite3

        with sqlite3.connect(db) as connection:
            (info,) = connection.execute("SELECT info FROM samples WHERE idx = 0").fetchone()
        assert json.loads(info)["quality_field"] == "0"
        warned = [note for note in notes if "images are low_information" in note]
        assert bool(warned) is dark, notes
        quarantined = json.loads((tmp_path / f"{name}.quarantine.json").read_text())["samples"]
        assert quarantined == []  # a pipeline bug is said once, not by quarantining every sample


def test_the_bit_count_is_the_same_without_numpys_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from datalint.scan.hash_index import popcount

    values = np.random.default_rng(3).integers(0, 2**63, size=(7, 5), dtype=np.uint64) * np.uint64(2)
    expected = [[bin(int(v)).count("1") for v in row] for row in values]
    monkeypatch.delattr(np, "bitwise_count", raising=False)
    assert popcount(values).tolist() == expected  # numpy < 2.0, which pyproject allows
    assert popcount(values[0]).tolist() == expected[0]


def test_no_scores_leaves_a_datasets_tensors_unscored(tmp_path: Path) -> None:
    # --no-scores was accepted with --dataset and did nothing: every image-like tensor was still scored
    (tmp_path / "tensors.py").write_text(DATASETS)
    db = tmp_path / "unscored.db"
    code, _, err = run_cli(
        "scan", "--dataset", f"{tmp_path / 'tensors.py'}:good", "--db", str(db), "--no-scores",
        "--workers", "1", "--progress", "none", "--format", "json",
    )  # fmt: skip
    assert code in (0, 1), err
    import sqlite3

    with sqlite3.connect(db) as connection:
        infos = [json.loads(row[0] or "{}") for row in connection.execute("SELECT info FROM samples")]
    assert len(infos) == 12 and not any("quality" in info or "quality_field" in info for info in infos)

    import datalint

    api_db = tmp_path / "api.db"
    datalint.scan(f"{tmp_path / 'tensors.py'}:good", db=api_db, scores=False, workers=1)  # the same keyword
    with sqlite3.connect(api_db) as connection:
        infos = [json.loads(row[0] or "{}") for row in connection.execute("SELECT info FROM samples")]
    assert len(infos) == 12 and not any("quality" in info for info in infos)
