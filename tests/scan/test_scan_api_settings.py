"""`datalint.scan()` takes every `[tool.datalint.scan]` setting: real image files, scans and the CLI."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from scan_support import run_cli, write_limit_images

import datalint
from datalint.config import ConfigError
from datalint.errors import UsageError
from datalint.scan.images import images_description
from datalint.scan.settings import KEYS, THRESHOLDS_KEY, keyword_settings

PROJECT = (
    '[tool.datalint.scan]\nkinds = ["default", "dark", "tiny"]\nworkers = 1\n\n'
    "[tool.datalint.scan.thresholds]\ndark = 0.4\ntiny = 100\n"
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_limit_images(tmp_path_factory.mktemp("api-settings") / "images")


def listed(path: str | Path) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """A quarantine list's (key, kinds) entries and its policy: what a training job would drop."""
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    return [(sample["key"], sample["kinds"]) for sample in document["samples"]], document["policy"]


def test_scan_takes_every_key_of_the_scan_table() -> None:
    parameters = inspect.signature(datalint.scan).parameters  # also once datalint.scan is the package
    for name in (*KEYS, THRESHOLDS_KEY):
        keyword = parameters[name.replace("-", "_")]
        assert keyword.kind is inspect.Parameter.KEYWORD_ONLY and keyword.default is None, name


@pytest.mark.slow
def test_the_api_makes_the_clis_list_from_the_same_settings(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text(PROJECT, encoding="utf-8")
    monkeypatch.chdir(project)
    code, _out, err = run_cli(
        "scan", "--images", str(folder), "--db", str(tmp_path / "cli.db"), "--progress", "none"
    )
    assert code == 1, err
    cli = listed(tmp_path / "cli.quarantine.json")
    assert {key for key, _kinds in cli[0]} == {
        "dark.png",
        "dim.png",
        "small.png",
    }  # the file's limits decided

    source = images_description(folder=str(folder))
    from_file = datalint.scan(source, db=tmp_path / "file.db", config=True)
    assert listed(from_file.quarantine_path) == cli
    assert (
        from_file.notes[0]
        == f"settings from {project / 'pyproject.toml'}: kinds, workers, thresholds.dark, thresholds.tiny"
    )

    keywords = datalint.scan(
        source,
        db=tmp_path / "kw.db",
        workers=1,
        kinds=["default", "dark", "tiny"],
        thresholds={"dark": 0.4, "tiny": 100},
    )
    assert listed(keywords.quarantine_path) == cli

    # A library call reads no project file unless asked: here the defaults judge, and dim.png passes.
    plain = datalint.scan(source, db=tmp_path / "plain.db", workers=1, kinds="default,dark,tiny")
    assert {key for key, _kinds in listed(plain.quarantine_path)[0]} == {"dark.png"}
    # A keyword wins over the file, and the limits merge kind by kind (the file's tiny holds).
    over = datalint.scan(
        source, db=tmp_path / "over.db", config=project / "pyproject.toml", thresholds={"dark": 0.01}
    )
    assert {key for key, _kinds in listed(over.quarantine_path)[0]} == {"small.png"}, listed(
        over.quarantine_path
    )


@pytest.mark.slow
def test_the_image_settings_reach_the_scan(folder: Path, tmp_path: Path) -> None:
    summary = datalint.scan(
        images_description(folder=str(folder)),
        db=tmp_path / "a.db",
        workers=1,
        max_pixels=20_000,  # 256x192 claims 49,152 pixels: a bomb; 96x72 does not
        scores=False,
        thresholds={"dark": 0.9},
        kinds="all",
    )
    assert summary.findings == {"decompression_bomb": 12}, summary.findings  # no scores: nothing judged dark
    none = datalint.scan(
        images_description(folder=str(folder)), db=tmp_path / "b.db", workers=1, ext="jpg,jpeg"
    )
    assert none.length == 0


@pytest.mark.parametrize(
    ("table", "keywords"),
    [
        ("[tool.datalint.scan.thresholds]\ndark = 1.5\n", {"thresholds": {"dark": 1.5}}),
        ("[tool.datalint.scan.thresholds]\ndrak = 0.1\n", {"thresholds": {"drak": 0.1}}),
        ("[tool.datalint.scan.thresholds]\nnear_duplicate = 8.5\n", {"thresholds": {"near_duplicate": 8.5}}),
        ('[tool.datalint.scan]\nkinds = "default,drak"\n', {"kinds": "default,drak"}),
        ("[tool.datalint.scan]\ntimeout = 0\n", {"timeout": 0}),
        ('[tool.datalint.scan]\nmax-bytes = "64XB"\n', {"max_bytes": "64XB"}),
        ("[tool.datalint.scan]\nmax-pixels = 0\n", {"max_pixels": 0}),
        ('[tool.datalint.scan]\nscores = "no"\n', {"scores": "no"}),
        ("[tool.datalint.scan]\nworkers = 1.5\n", {"workers": 1.5}),
    ],
)
def test_a_bad_keyword_raises_the_clis_message_before_any_work(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, keywords: dict[str, Any]
) -> None:
    (tmp_path / "pyproject.toml").write_text(table, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, _out, err = run_cli("scan", "--images", str(folder), "--show-settings")
    assert code == 2
    cli_message = err.strip().split("[tool.datalint.scan]: ", 1)[1]
    with pytest.raises(ConfigError) as raised:
        datalint.scan(images_description(folder=str(folder)), db=tmp_path / "never.db", **keywords)
    python_spelling = cli_message.replace("max-bytes", "max_bytes").replace("max-pixels", "max_pixels")
    assert str(raised.value) == f"datalint.scan(): {python_spelling}"
    assert not (tmp_path / "never.db").exists(), "nothing is written for settings that cannot be used"


def test_config_must_name_a_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"datalint.scan\(\): config='nowhere.toml': no such file"):
        datalint.scan("mymod:ds", config="nowhere.toml")


def test_a_keyword_switches_off_what_the_file_switched_on(tmp_path: Path) -> None:
    project = tmp_path / "pyproject.toml"
    project.write_text("[tool.datalint.scan]\nall-frames = true\nscores = false\ntimeout = 9\n")
    settings = keyword_settings({"all_frames": False, "scores": None}, None, config=project)
    assert settings.values["all-frames"] is False
    assert settings.origins["all-frames"] == "datalint.scan() all_frames="
    assert settings.values["scores"] is False, "None is 'not given': the file's value holds"
    assert settings.values["timeout"] == 9.0


def test_against_must_name_an_index(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"against='.*train.db': no scan index there"):
        datalint.scan("mymod:ds", against=tmp_path / "train.db")
