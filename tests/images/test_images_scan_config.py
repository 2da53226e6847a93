"""`[tool.datalint.scan]`: real project files, real image folders, real scans and re-derivations."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from images_support import findings_by_key, run_cli
from PIL import Image
from test_images_quality import corpus

from datalint.config import ConfigError
from datalint.scan.policy import THRESHOLDS
from datalint.scan.settings import KEYS, table_settings

SCAN = ("--workers", "1", "--progress", "none")
TABLE, LIMITS = "[tool.datalint.scan]\n", "[tool.datalint.scan.thresholds]\n"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 clean scenes, a dark one, a night scene with lit detail (dark only under a high limit) and a
    small image (tiny only under a raised limit)."""
    images = tmp_path_factory.mktemp("configured") / "images"
    images.mkdir()
    rng = np.random.default_rng(5)
    for number in range(10):
        Image.fromarray(corpus.to_uint8(corpus.scene(rng, 256, 192))).save(images / f"clean_{number}.jpg")
    for kind in ("dark", "clean_night"):
        Image.fromarray(corpus.to_uint8(corpus.planted(kind, rng, 256, 192))).save(images / f"{kind}.jpg")
    Image.fromarray(corpus.to_uint8(corpus.scene(rng, 96, 72))).save(images / "small.jpg")
    return images


def project(root: Path, text: str, name: str = "pyproject.toml") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text, encoding="utf-8")
    return root


def scan(folder: Path, db: Path, *flags: str) -> tuple[int, dict[str, object], str]:
    code, out, err = run_cli("scan", "--images", str(folder), "--db", str(db), "--format=json", *SCAN, *flags)
    assert code in (0, 1), err
    return code, json.loads(out), err


def test_the_files_limits_and_kinds_decide_and_a_flag_wins(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(
        project(
            tmp_path / "proj",
            '[tool.datalint.scan]\nkinds = ["default", "dark"]\n\n'
            "[tool.datalint.scan.thresholds]\ndark = 0.85\ntiny = 100\n",
        )
    )
    code, summary, err = scan(folder, tmp_path / "a.db")
    file = tmp_path / "proj" / "pyproject.toml"
    assert f"settings from {file}: kinds, thresholds.dark, thresholds.tiny" in err  # never a surprise
    found = findings_by_key(tmp_path / "a.db")
    assert "dark" in found["clean_night.jpg"] and "dark" in found["dark.jpg"]  # the file's limit, as given
    assert "tiny" in found["small.jpg"]  # 96x72: tiny under the file's 100 px, not the default 32
    assert code == 1 and "dark" in summary["policy"]  # the file's kinds quarantine dark images
    code, summary, _err = scan(folder, tmp_path / "b.db", "--threshold", "dark=0.05", "--kinds", "default")
    found = findings_by_key(tmp_path / "b.db")
    assert not any("dark" in kinds for kinds in found.values())  # the flag's limit over the file's
    assert "tiny" in found["small.jpg"]  # ... kind by kind: the file's tiny still holds
    assert "dark" not in summary["policy"]


def test_a_changed_limit_in_the_file_rederives_without_measuring(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path / "proj", "[tool.datalint.scan.thresholds]\ndark = 0.05\n")
    monkeypatch.chdir(root)
    db = tmp_path / "scan.db"
    _code, first, _err = scan(folder, db)
    assert first["scanned"] == 13 and "dark" not in first["findings"]
    project(root, "[tool.datalint.scan.thresholds]\ndark = 0.85\n")
    _code, second, _err = scan(folder, db)
    assert second["scanned"] == 0, "a limit decides verdicts only: nothing is measured again"
    assert second["findings"]["dark"] >= 2
    with sqlite3.connect(db) as connection:
        (stored,) = connection.execute("SELECT options FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    assert ["dark", 0.85] in json.loads(stored)["policy"]["thresholds"]  # the report draws this limit


def test_quarantine_takes_the_files_limits_over_the_scans_and_isolated_ignores_them(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "scan.db"
    monkeypatch.chdir(tmp_path)
    scan(folder, db, "--isolated", "--threshold", "tiny=100")
    monkeypatch.chdir(project(tmp_path / "proj", "[tool.datalint.scan.thresholds]\ndark = 0.85\n"))
    code, out, err = run_cli("quarantine", str(db), "--kinds", "dark,tiny")
    assert code == 1, err
    keys = {sample["key"] for sample in json.loads(out)["samples"]}
    assert {"clean_night.jpg", "dark.jpg", "small.jpg"} <= keys  # the file's dark, the scan's tiny
    code, out, err = run_cli("quarantine", str(db), "--kinds", "dark,tiny", "--isolated")
    keys = {sample["key"] for sample in json.loads(out)["samples"]}
    assert "clean_night.jpg" not in keys and {"dark.jpg", "small.jpg"} <= keys
    code, out, err = run_cli("quarantine", str(db), "--show-settings", "--threshold", "blurry=0.2")
    assert code == 0, err
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    assert lines["thresholds.dark"].startswith("0.85 (") and "[tool.datalint.scan.thresholds]" in lines[
        "thresholds.dark"
    ]
    assert lines["thresholds.tiny"] == f"100 (the index {db} (run 1))"
    assert lines["thresholds.blurry"] == "0.2 (--threshold)"
    assert lines["thresholds.light"] == "0.8 (default)"


def test_the_files_default_kinds_replace_the_kinds_the_scan_used(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "scan.db"
    monkeypatch.chdir(tmp_path)
    scan(folder, db, "--isolated", "--kinds", "default,dark")
    code, out, err = run_cli("quarantine", str(db))
    assert code == 1, err
    assert "dark.jpg" in {sample["key"] for sample in json.loads(out)["samples"]}  # the scan's kinds
    monkeypatch.chdir(project(tmp_path / "proj", TABLE + 'kinds = "default"\n'))
    code, out, err = run_cli("quarantine", str(db))
    assert code == 0, err
    assert json.loads(out)["samples"] == [], "the file's kinds, the default ones, quarantine no dark image"


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (TABLE + "timout = 3\n", ["'timout'", "did you mean 'timeout'"]),
        (TABLE + "max_bytes = 5\n", ["'max_bytes'", "did you mean 'max-bytes'"]),
        (TABLE + "dark = 0.1\n", ["'dark'", "thresholds.dark"]),
        (TABLE + "timeout = -1\n", ["timeout must be a number above 0, got -1"]),
        (TABLE + "workers = 1.5\n", ["workers must be a whole number of at least 0, got 1.5"]),
        (TABLE + "scores = 1\n", ["scores must be true or false, got 1"]),
        (TABLE + "kinds = [\"drak\"]\n", ["kinds: unknown finding kind 'drak'", "'dark'"]),
        (TABLE + "max-bytes = \"lots\"\n", ["max-bytes must be a size", "'lots'"]),
        (LIMITS + "drak = 0.1\n", ["unknown limit 'drak'", "did you mean 'dark'"]),
        (LIMITS + "dark = 1.5\n", ["thresholds.dark must be a number from 0 to 1", "1.5"]),
        (LIMITS + "near_duplicate = 8.5\n", ["near_duplicate must be a whole number from 0"]),
        (LIMITS + "blurry = \"low\"\n", ["thresholds.blurry must be a number", "'low'"]),
    ],
)  # fmt: skip
def test_a_bad_key_or_value_is_exit_2_naming_it(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, expected: list[str]
) -> None:
    monkeypatch.chdir(project(tmp_path / "proj", table))
    code, out, err = run_cli("scan", "--images", str(folder), "--db", str(tmp_path / "x.db"), *SCAN)
    assert code == 2 and out == ""
    assert str(tmp_path / "proj" / "pyproject.toml") in err
    for text in expected:
        assert text in err
    assert not (tmp_path / "x.db").exists(), "nothing is scanned with a bad configuration"


def test_a_flag_out_of_range_is_exit_2_too(folder: Path, tmp_path: Path) -> None:
    code, _out, err = run_cli("scan", "--images", str(folder), "--threshold", "near_duplicate=40", *SCAN)
    assert code == 2 and "near_duplicate must be a whole number from 0 to 32, got 40.0" in err


def test_show_settings_says_where_each_value_comes_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = TABLE + 'timeout = 30\nmax-bytes = "64MB"\n\n' + LIMITS + "blurry = 0.05\n"
    root = project(tmp_path / "proj", text)
    monkeypatch.chdir(root)
    code, out, err = run_cli("scan", "--show-settings", "--timeout", "5", "--threshold", "dark=0.2")
    assert code == 0, err
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    table = f"{root / 'pyproject.toml'} [tool.datalint.scan]"
    assert lines["configuration"] == str(root / "pyproject.toml")
    assert lines["timeout"] == "5 (--timeout)"
    assert lines["max-bytes"] == f"64000000 ({table})"
    assert lines["setup-timeout"] == "600 (default)"
    assert lines["thresholds.dark"] == "0.2 (--threshold)"
    assert lines["thresholds.blurry"] == f"0.05 ({root / 'pyproject.toml'} [tool.datalint.scan.thresholds])"
    assert lines["thresholds.near_duplicate"] == "10 (default)"
    code, out, _err = run_cli("scan", "--show-settings", "--format", "json", "--isolated")
    document = json.loads(out)
    assert document["configuration"] is None
    assert document["settings"]["timeout"] == {"value": 60, "from": "default"}


def test_a_flag_undoes_a_yes_or_no_the_file_set_either_way(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path / "proj", TABLE + "scores = false\nverify-content = true\nincremental = false\n")
    monkeypatch.chdir(root)
    table = f"{root / 'pyproject.toml'} [tool.datalint.scan]"
    code, out, err = run_cli("scan", "--show-settings", "--scores", "--no-verify-content")
    assert code == 0, err
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    assert lines["scores"] == "true (--scores)" and lines["verify-content"] == "false (--no-verify-content)"
    assert lines["incremental"] == f"false ({table})"
    # A real scan: the file's `scores = false` leaves no image scored; `--scores` scores every one.
    scan(folder, tmp_path / "off.db")
    scan(folder, tmp_path / "on.db", "--scores")
    scored = "SELECT count(*) FROM samples WHERE json_extract(info, '$.quality') IS NOT NULL"
    with sqlite3.connect(tmp_path / "off.db") as off, sqlite3.connect(tmp_path / "on.db") as on:
        assert off.execute(scored).fetchone()[0] == 0
        assert on.execute(scored).fetchone()[0] == 13


def test_a_datalint_toml_and_extend_are_read_as_check_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = project(tmp_path / "base", "[tool.datalint.scan]\ntimeout = 12\nlabel = [\"target\"]\n")
    root = project(
        tmp_path / "proj", f'extend = "{base / "pyproject.toml"}"\n\n[scan]\ntimeout = 30\n', "datalint.toml"
    )
    monkeypatch.chdir(root)
    code, out, err = run_cli("scan", "--show-settings")
    assert code == 0, err
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    assert lines["timeout"] == f"30 ({root / 'datalint.toml'} [scan])"
    assert lines["label"].startswith("target (")  # inherited through `extend`


def test_check_accepts_a_scan_table_and_refuses_one_that_is_not_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path / "proj", '[tool.datalint]\nselect = ["DL0"]\n\n' + TABLE + "timeout = 30\n")
    (root / "clean.py").write_text("x = 1\n", encoding="utf-8")
    monkeypatch.chdir(root)
    code, _out, err = run_cli("check", "clean.py")
    assert code == 0, err
    project(root, '[tool.datalint]\nscan = "fast"\n')
    code, _out, err = run_cli("check", "clean.py")
    assert code == 2 and "scan must be a table" in err


def test_config_names_the_file_and_isolated_excludes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = project(tmp_path / "elsewhere", "[scan]\nworkers = 3\n", "team.toml") / "team.toml"
    monkeypatch.chdir(project(tmp_path / "proj", TABLE + "workers = 1\n"))
    code, out, err = run_cli("scan", "--show-settings", "--config", str(settings))
    assert code == 0, err
    assert f"workers: 3 ({settings} [scan])" in out.splitlines()
    code, _out, err = run_cli("scan", "--show-settings", "--config", str(settings), "--isolated")
    assert code == 2 and "--isolated and --config FILE exclude each other" in err
    code, _out, err = run_cli("scan", "--show-settings", "--config", str(tmp_path / "missing.toml"))
    assert code == 2 and "no such file" in err


TOML_VALUES = st.recursive(
    st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
KEY_NAMES = st.sampled_from([*KEYS, "thresholds", *THRESHOLDS]) | st.text(max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEY_NAMES, TOML_VALUES, max_size=4))
def test_any_table_is_settings_or_an_error_naming_the_table(table: dict[str, object]) -> None:
    try:
        values, limits = table_settings(table, "pyproject.toml [tool.datalint.scan]")
    except ConfigError as exc:
        assert str(exc).startswith("pyproject.toml [tool.datalint.scan]: ")
    else:
        assert set(values) <= set(KEYS) and set(limits) <= set(THRESHOLDS)
