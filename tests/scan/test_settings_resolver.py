"""One settings resolver: flag > project file > what the index stored > default, for `datalint scan`,
`datalint.scan()` and a served dataset's scan job alike (real image files, scans and a job process)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from scan_support import PYTHON, ROOT, rows, run_cli, write_limit_images

import datalint
from datalint.scan.images import images_description
from datalint.scan.settings import DEFAULT, Stored, layered
from datalint.service.config import dataset_settings, load_config

PROJECT = (
    '[tool.datalint.scan]\nkinds = ["default", "dark", "tiny"]\nworkers = 1\n\n'
    "[tool.datalint.scan.thresholds]\ndark = 0.4\ntiny = 100\n"
)
# What PROJECT's settings list from write_limit_images' folder; the defaults list none of them.
LIBRARY: Any = datalint.scan  # the callable module, as a user calls it
BY_PROJECT = {"dark.png", "dim.png", "small.png"}
FLAGS = ("--kinds", "default,dark,tiny", "--threshold", "dark=0.4", "--threshold", "tiny=100")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_limit_images(tmp_path_factory.mktemp("resolver") / "images")


def listed(path: str | Path) -> set[str]:
    """The keys a quarantine list drops: what a training job would notice."""
    return {sample["key"] for sample in json.loads(Path(path).read_text(encoding="utf-8"))["samples"]}


def scan(folder: Path, db: Path, *flags: str) -> tuple[int, str]:
    code, _out, err = run_cli(
        "scan", "--images", str(folder), "--db", str(db), "--workers", "1", "--progress", "none", *flags
    )
    assert code in (0, 1), err
    return code, err


def shown(folder: Path, db: Path, *flags: str) -> dict[str, str]:
    code, out, err = run_cli("scan", "--images", str(folder), "--db", str(db), "--show-settings", *flags)
    assert code == 0, err
    return dict(line.split(": ", 1) for line in out.splitlines())


def last_run(db: Path) -> int:
    return int(rows(db, "SELECT max(id) FROM runs")[0][0])


def test_each_layer_wins_over_the_ones_below_it_key_by_key(tmp_path: Path) -> None:
    project = tmp_path / "pyproject.toml"
    project.write_text(
        "[tool.datalint.scan]\ntimeout = 9\nlabel = ['y']\n[tool.datalint.scan.thresholds]\ndark = 0.3\n"
    )
    stored = Stored(
        "x.db", 3, {"timeout": 5.0, "label": ["x"], "num-classes": 10}, (("dark", 0.2), ("tiny", 50.0))
    )
    settings = layered(
        {"timeout": (2.0, "--timeout")}, [("tiny", 60.0)], "--threshold", project, stored=stored
    )
    assert settings.values["timeout"] == 2.0 and settings.origins["timeout"] == "--timeout"
    assert settings.values["label"] == ["y"] and settings.origins["label"].endswith("[tool.datalint.scan]")
    assert (
        settings.values["num-classes"] == 10 and settings.origins["num-classes"] == "the index x.db (run 3)"
    )
    assert settings.values["max-bytes"] is None and settings.origins["max-bytes"] == DEFAULT
    assert dict(settings.thresholds) == {"dark": 0.3, "tiny": 60.0}
    assert settings.threshold_origins["tiny"] == "--threshold"


def test_a_stored_option_holds_when_neither_flag_nor_file_sets_it(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "kept.db"
    scan(folder, db, "--isolated", *FLAGS)
    assert listed(tmp_path / "kept.quarantine.json") == BY_PROJECT

    # The rescan is given nothing: the index's kinds and limits judge, and stderr says they were kept.
    code, err = scan(folder, db, "--isolated")
    assert code == 1 and listed(tmp_path / "kept.quarantine.json") == BY_PROJECT
    index = f"the index {db} (run {last_run(db)})"
    assert f"settings kept from {index}: kinds, thresholds.dark, thresholds.tiny" in err

    lines = shown(folder, db, "--isolated")
    assert lines["kinds"] == f"default,dark,tiny ({index})"
    assert lines["thresholds.dark"] == f"0.4 ({index})" and lines["thresholds.tiny"] == f"100 ({index})"
    assert lines["timeout"] == "60 (default)" and lines["thresholds.blurry"].endswith("(default)")

    # --rescan measures everything again, from the defaults: nothing of this folder is listed by them.
    code, err = scan(folder, db, "--isolated", "--rescan")
    assert code == 0 and listed(tmp_path / "kept.quarantine.json") == set() and "kept from" not in err


def test_a_flag_or_the_project_file_overrides_a_stored_option(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flagged, filed = tmp_path / "flag.db", tmp_path / "file.db"
    for db in (flagged, filed):
        scan(folder, db, "--isolated", *FLAGS)
    # A flag: dark under 0.01 lists no dark image; the stored kinds and tiny still hold.
    scan(folder, flagged, "--isolated", "--threshold", "dark=0.01")
    assert listed(tmp_path / "flag.quarantine.json") == {"small.png"}

    # The project file: its tiny (32 px) over the stored 100 px; the stored dark limit still holds.
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.datalint.scan.thresholds]\ntiny = 32\n", encoding="utf-8")
    monkeypatch.chdir(project)
    lines = shown(folder, filed)
    assert lines["thresholds.tiny"] == f"32 ({project / 'pyproject.toml'} [tool.datalint.scan.thresholds])"
    assert lines["thresholds.dark"] == f"0.4 (the index {filed} (run {last_run(filed)}))"
    scan(folder, filed)
    assert listed(tmp_path / "file.quarantine.json") == {"dark.png", "dim.png"}


def test_datalint_scan_keeps_the_stored_options_and_a_keyword_overrides_them(
    folder: Path, tmp_path: Path
) -> None:
    db = tmp_path / "api.db"
    scan(folder, db, "--isolated", *FLAGS)
    source = images_description(folder=str(folder))
    kept = LIBRARY(source, db=db, workers=1)
    assert listed(kept.quarantine_path) == BY_PROJECT
    assert kept.notes[0].startswith(f"settings kept from the index {db} (run ")
    over = LIBRARY(source, db=db, workers=1, thresholds={"dark": 0.01})
    assert listed(over.quarantine_path) == {"small.png"}
    fresh = LIBRARY(source, db=db, workers=1, rescan=True)
    assert listed(fresh.quarantine_path) == set()


def run_job(tmp_path: Path, name: str, job: dict[str, object]) -> dict[str, object]:
    """A served dataset's scan job, as the service runs it: its own process, a result file beside it."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    done = subprocess.run(
        [PYTHON, "-m", "datalint.service.scanjob", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    result: dict[str, object] = json.loads((tmp_path / f"{name}.result.json").read_text(encoding="utf-8"))
    assert done.returncode == 0, (done.stderr, result)
    return result


@pytest.mark.slow
def test_the_project_file_and_the_stored_options_reach_a_served_scan_job_as_the_cli(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text(PROJECT, encoding="utf-8")
    monkeypatch.chdir(project)
    scan(folder, tmp_path / "cli.db")
    assert listed(tmp_path / "cli.quarantine.json") == BY_PROJECT

    service = tmp_path / "datalint-service.toml"
    service.write_text(
        f'[[datasets]]\nname = "photos"\nimages = "{folder}"\nconfig = "{project / "pyproject.toml"}"\n'
        f'[[datasets]]\nname = "plain"\nimages = "{folder}"\n',
        encoding="utf-8",
    )
    datasets = {dataset.name: dataset for dataset in load_config(service).datasets}
    job = {"mode": "full", "resumed": False, "images": str(folder), "dataset": None, "scheduler": None}
    photos = {**job, "scan_options": datasets["photos"].scan_options}
    run_job(
        tmp_path,
        "photos",
        {**photos, "index": str(tmp_path / "p.db"), "quarantine": str(tmp_path / "p.json")},
    )
    assert listed(tmp_path / "p.json") == BY_PROJECT, "the project's table, as `datalint scan` read it"

    # A dataset with no settings of its own, on an index the CLI scanned with flags: the next
    # incremental job keeps what the index stored.
    scan(folder, tmp_path / "s.db", "--isolated", *FLAGS)
    shown = dataset_settings(datasets["plain"], tmp_path / "s.db")["settings"]  # GET /v1/datasets/plain
    index = f"the index {tmp_path / 's.db'} (run {last_run(tmp_path / 's.db')})"
    assert shown["kinds"] == {"value": "default,dark,tiny", "from": index}
    assert shown["thresholds.tiny"] == {"value": 100, "from": index}
    plain = {**job, "mode": "incremental", "scan_options": datasets["plain"].scan_options}
    result = run_job(
        tmp_path, "plain", {**plain, "index": str(tmp_path / "s.db"), "quarantine": str(tmp_path / "s.json")}
    )
    assert listed(tmp_path / "s.json") == BY_PROJECT
    summary = result["summary"]
    assert isinstance(summary, dict) and summary["scanned"] == 0, "nothing changed: nothing measured again"


def test_quarantine_keeps_what_the_scan_required_until_the_file_clears_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scan_support import spec

    db = tmp_path / "req.db"
    code, _out, err = run_cli(
        "scan", "--dataset", spec("faults.py:make(length=4)"), "--db", str(db), "--require", "target",
        "--isolated", "--workers", "1", "--progress", "none",
    )  # fmt: skip
    assert code == 1, err  # a tensor has no field `target`: every sample is missing it
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("quarantine", str(db), "--isolated")
    assert code == 1 and len(json.loads(out)["samples"]) == 4, err
    (tmp_path / "pyproject.toml").write_text("[tool.datalint.scan]\nrequire = []\n", encoding="utf-8")
    code, out, err = run_cli("quarantine", str(db))
    assert code == 0 and json.loads(out)["samples"] == [], err


@pytest.mark.slow
def test_a_watch_judges_new_files_with_the_settings_the_index_stored(folder: Path, tmp_path: Path) -> None:
    import os
    import shutil
    import signal
    import time

    from scan_support import start_cli

    images = shutil.copytree(folder, tmp_path / "images")
    db = tmp_path / "watched.db"
    scan(images, db, "--isolated", *FLAGS)
    process = start_cli(
        "watch", "--images", str(images), "--db", str(db), "--workers", "1", "--isolated", "--settle", "0.2s"
    )
    try:
        shutil.copyfile(images / "dim.png", images / "dim_again.png")  # dark only under the stored 0.4
        deadline = time.monotonic() + 120
        while "dim_again.png" not in _listed_now(tmp_path / "watched.quarantine.json"):
            assert time.monotonic() < deadline and process.poll() is None, "dim_again.png never listed"
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    assert f"settings kept from the index {db} (run " in err


def _listed_now(path: Path) -> set[str]:
    try:
        return listed(path)
    except (OSError, ValueError):  # not written yet, or being replaced
        return set()
