"""A served dataset takes every `[tool.datalint.scan]` key: its scans make the list `datalint scan` makes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from service_server import Server, environment

from datalint.cli import build_parser, main
from datalint.scan.settings import resolve
from datalint.service.config import ConfigError, dataset_settings, load_config
from datalint.service.registry import Registry
from datalint.service.watchers import watch_command
from tests.scan.scan_support import write_limit_images

SCAN_TABLE = 'kinds = ["default", "dark", "tiny"]\nworkers = 1\n'
LIMITS_TABLE = "dark = 0.4\ntiny = 100\n"


def entries(document: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [(sample["key"], sample["kinds"]) for sample in document["samples"]]


def cli_list(images: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    """What `datalint scan --images DIR` makes in a project whose pyproject.toml holds the settings."""
    monkeypatch.chdir(project)
    code = main(["scan", "--images", str(images), "--db", str(project / "cli.db"), "--progress", "none"])
    assert code == 1
    return entries(json.loads((project / "cli.quarantine.json").read_text(encoding="utf-8")))


@pytest.mark.slow
def test_a_served_dataset_with_limits_serves_the_list_the_cli_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    images = write_limit_images(tmp_path / "images")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        f"[tool.datalint.scan]\n{SCAN_TABLE}\n[tool.datalint.scan.thresholds]\n{LIMITS_TABLE}",
        encoding="utf-8",
    )
    expected = cli_list(images, project, monkeypatch)
    assert {key for key, _kinds in expected} == {"dark.png", "dim.png", "small.png"}  # the limits decided

    datasets = (
        f'[[datasets]]\nname = "photos"\nimages = "{images}"\n{SCAN_TABLE}'
        f"\n[datasets.thresholds]\n{LIMITS_TABLE}"
        f'\n[[datasets]]\nname = "project"\nimages = "{images}"\nconfig = "{project / "pyproject.toml"}"\n'
    )
    (tmp_path / "service").mkdir()
    server = Server(tmp_path / "service", datasets).start()
    try:
        for name in ("photos", "project"):
            job = server.request("POST", f"/v1/datasets/{name}/scans").json()
            done = server.wait_job(job["id"])
            assert done["state"] == "succeeded", done
            served = server.request("GET", f"/v1/datasets/{name}/quarantine", token="reader").json()
            assert entries(served) == expected, name
        settings = server.request("GET", "/v1/datasets/photos", token="reader").json()["settings"]
        assert settings["thresholds.dark"] == {"value": 0.4, "from": "[[datasets]] photos"}
        assert settings["thresholds.light"]["from"] == "default"
        # The overview names what each dataset does not take from the defaults, and where it is set.
        page = server.request("GET", "/", token=None, cookies={"datalint_token": server.tokens["reader"]})
        photos = page.text.split('id="dataset-photos"')[1].split("</tr>")[0]
        assert "settings: " in photos and "thresholds.dark 0.4" in photos and "workers 1" in photos
        assert 'title="from [[datasets]] photos"' in photos and "thresholds.light" not in photos
        settings = server.request("GET", "/v1/datasets/project", token="reader").json()["settings"]
        assert settings["thresholds.tiny"] == {
            "value": 100,
            "from": f"{project / 'pyproject.toml'} [tool.datalint.scan.thresholds]",
        }

        registered = server.request(
            "POST", "/v1/datasets", json={"name": "api", "images": str(images), "thresholds": {"dark": 0.3}}
        )
        assert registered.status_code == 201, registered.text
        assert registered.json()["settings"]["thresholds.dark"]["value"] == 0.3
        refused = server.request(
            "POST", "/v1/datasets", json={"name": "bad", "images": str(images), "thresholds": {"drak": 0.3}}
        )
        assert refused.status_code == 422
        assert "thresholds: unknown limit 'drak' (did you mean 'dark'?)" in refused.text

        # Each scan reads the project's table: broken after the start, it is shown and the scan says why.
        (project / "pyproject.toml").write_text("[tool.datalint.scan.thresholds]\nnear_duplicate = 40\n")
        shown = server.request("GET", "/v1/datasets/project", token="reader").json()
        assert "near_duplicate must be a whole number from 0 to 32, got 40" in shown["settings_error"]
        page = server.request("GET", "/", token=None, cookies={"datalint_token": server.tokens["reader"]})
        assert "settings: " in page.text and "near_duplicate must be a whole number" in page.text
        job = server.request("POST", "/v1/datasets/project/scans").json()
        failed = server.wait_job(job["id"])
        assert failed["state"] == "failed" and "near_duplicate must be" in failed["error"], failed
    finally:
        server.stop()


def test_a_watched_dataset_gets_the_same_settings_on_its_command_line(tmp_path: Path) -> None:
    config = tmp_path / "datalint-service.toml"
    config.write_text(
        '[[datasets]]\nname = "photos"\nimages = "x"\nwatch = true\nmax-bytes = "64MB"\nscores = false\n'
        'label = ["target"]\nincremental = false\nall-frames = true\n'
        f"{SCAN_TABLE}\n[datasets.thresholds]\n{LIMITS_TABLE}",
        encoding="utf-8",
    )
    registry = Registry(load_config(config))
    dataset = registry.get("photos")
    assert dataset is not None
    command = watch_command(dataset, registry)
    assert "--isolated" in command, "the watcher reads no project file the service's scan jobs do not read"
    args = build_parser("watch").parse_args(command[3:])
    watched = resolve(args)
    shown = dataset_settings(dataset)["settings"]
    for name, value in watched.values.items():
        assert shown[name]["value"] == (
            int(value) if isinstance(value, float) and value.is_integer() else value
        )
    assert dict(watched.thresholds) == {"dark": 0.4, "tiny": 100.0}
    assert (not args.scores, args.incremental, args.all_frames, args.max_bytes) == (
        True,
        False,
        True,
        64_000_000,
    )


def test_a_watcher_takes_a_projects_settings_under_the_datasets(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.datalint.scan]\nall-frames = true\nverify-content = true\ntimeout = 9\n"
        "[tool.datalint.scan.thresholds]\ndark = 0.3\nblurry = 0.2\n"
    )
    config = tmp_path / "datalint-service.toml"
    config.write_text(
        '[[datasets]]\nname = "a"\nimages = "x"\nwatch = true\nconfig = "pyproject.toml"\n'
        "all-frames = false\n[datasets.thresholds]\ndark = 0.1\n"
    )
    registry = Registry(load_config(config))
    dataset = registry.get("a")
    assert dataset is not None
    command = watch_command(dataset, registry)
    args = build_parser("watch").parse_args(command[3:])
    watched = resolve(args)
    assert watched.source is None, "the watcher reads no file itself"
    effective = watched.values
    assert (effective["all-frames"], effective["verify-content"], effective["timeout"]) == (
        False,
        True,
        9,
    )  # the dataset's false holds
    assert dict(watched.thresholds) == {
        "dark": 0.1,
        "blurry": 0.2,
    }  # merged kind by kind, the dataset winning


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ("timout = 5\n", "datasets[0] (a).timout: unknown key (did you mean 'timeout'?)"),
        ("dark = 0.2\n", "datasets[0] (a).dark: unknown key: a limit goes in the thresholds table"),
        ("timeout = -1\n", "datasets[0] (a): timeout must be a number above 0, got -1"),
        (
            'max-bytes = "64XB"\n',
            "datasets[0] (a): max-bytes must be a size such as 500000, '64MB' or '1GiB'",
        ),
        ('kinds = "drak"\n', "datasets[0] (a): kinds: unknown finding kind 'drak' (did you mean 'dark'?)"),
        ("scores = 1\n", "datasets[0] (a): scores must be true or false, got 1"),
        (
            "[datasets.thresholds]\ndrak = 0.1\n",
            "datasets[0] (a): thresholds: unknown limit 'drak' (did you mean",
        ),
        (
            "[datasets.thresholds]\ndark = 2\n",
            "datasets[0] (a): thresholds.dark must be a number from 0 to 1, got 2",
        ),
        ('config = "nowhere.toml"\n', "datasets[0] (a).config: "),
    ],
)
def test_a_bad_scan_key_is_refused_naming_the_file_the_dataset_and_the_key(
    tmp_path: Path, table: str, named: str
) -> None:
    config = tmp_path / "datalint-service.toml"
    config.write_text(f'[[datasets]]\nname = "a"\nimages = "x"\n{table}', encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(f"{config}: {named}")):
        load_config(config)


def test_a_projects_bad_table_is_refused_when_the_service_starts(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.datalint.scan.thresholds]\nnear_duplicate = 40\n")
    config = tmp_path / "datalint-service.toml"
    config.write_text('[[datasets]]\nname = "a"\nimages = "x"\nconfig = "pyproject.toml"\n')
    with pytest.raises(ConfigError, match=re.escape("datasets[0] (a).config: ") + ".*near_duplicate must be"):
        load_config(config)


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ("timout = 5\n", "datasets[0] (a).timout: unknown key (did you mean 'timeout'?)"),
        (
            "[datasets.thresholds]\ndark = 2\n",
            "datasets[0] (a): thresholds.dark must be a number from 0 to 1, got 2",
        ),
    ],
)
def test_serve_exits_2_on_a_bad_scan_key(tmp_path: Path, table: str, named: str) -> None:
    config = tmp_path / "datalint-service.toml"
    config.write_text(f'[[datasets]]\nname = "a"\nimages = "x"\n{table}', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "datalint", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment(),
        timeout=60,
    )
    assert done.returncode == 2
    assert f"{config}: {named}" in done.stderr, done.stderr


def test_a_dataset_registered_with_limits_keeps_them_across_a_restart(tmp_path: Path) -> None:
    config = tmp_path / "datalint-service.toml"
    config.write_text('[service]\ndata-dir = "state"\n')
    limits = {"low_information": 2.5}
    entry = {"name": "val", "images": str(tmp_path), "thresholds": limits, "max-bytes": "1MB"}
    registered = Registry(load_config(config)).register(entry)
    again = Registry(load_config(config)).get("val")  # read back from <data-dir>/datasets.json
    assert again is not None and again.scan_options == registered.scan_options
    assert again.scan_options["thresholds"] == {"low_information": 2.5}
    assert again.scan_options["max_bytes"] == 10**6
