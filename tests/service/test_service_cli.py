"""`datalint serve` on the command line: its config validated strictly, tokens made once, safe binding."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from service_server import environment

from datalint.cli import build_parser, main
from datalint.service.auth import Authenticator, digest_of, load_tokens
from datalint.service.config import ConfigError, load_config
from datalint.service.registry import Registry
from datalint.service.watchers import watch_command


def serve(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "datalint", "serve", *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment(),
        timeout=60,
    )


def test_token_add_prints_the_token_once_and_stores_only_its_hash(tmp_path: Path) -> None:
    done = serve("token", "add", "ci", "--scopes", "read,write", "--tokens", "tokens.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    text = (tmp_path / "tokens.toml").read_text()
    assert token.startswith("dl_") and token not in text
    assert tomllib.loads(text)["tokens"][0]["hash"] == digest_of(token)
    assert (tmp_path / "tokens.toml").stat().st_mode & 0o077 == 0, "the token file is private"
    auth = Authenticator(load_tokens(tmp_path / "tokens.toml"))
    assert auth.allows(token, "write") is True and auth.allows(token, "admin") is False
    assert auth.allows("dl_" + "x" * 43, "read") is None
    again = serve("token", "add", "ci", "--tokens", "tokens.toml", cwd=tmp_path)
    assert again.returncode == 2 and "exists already" in again.stderr
    bad = serve("token", "add", "x", "--scopes", "read,root", "--tokens", "tokens.toml", cwd=tmp_path)
    assert bad.returncode == 2 and "--scopes" in bad.stderr


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("[service]\nprot = 8765\n", "service.prot: unknown key (did you mean 'port'?)"),
        ('[service]\nport = "8765"\n', "service.port: expected an integer"),
        (
            '[[datasets]]\nname = "../up"\nimages = "x"\n',
            "datasets[0].name: '../up' is not a valid dataset name",
        ),
        ('[[datasets]]\nname = "a"\n', "datasets[0] (a): give exactly one of images = DIR or dataset = SPEC"),
        ('[[datasets]]\nname = "a"\nimages = "x"\ninterval = "soon"\n', "datasets[0] (a).interval"),
        (
            '[[datasets]]\nname = "a"\nimages = "x"\nsettle = "1s"\n',
            "datasets[0] (a).settle: only for a watched dataset (watch = true)",
        ),
        (
            '[[datasets]]\nname = "a"\nimages = "x"\n[[datasets]]\nname = "a"\nimages = "y"\n',
            "registered twice",
        ),
        ("[service\n", "not valid TOML"),
        ('[service]\nhttp = "fast"\n', "service.http: expected auto, h11, httptools, got 'fast'"),
        ("[service]\nloop = 1\n", "service.loop: expected a string"),
    ],
)
def test_a_bad_config_exits_2_naming_the_file_and_the_key(tmp_path: Path, body: str, named: str) -> None:
    config = tmp_path / "datalint-service.toml"
    config.write_text(body)
    done = serve("--config", str(config), cwd=tmp_path)
    assert done.returncode == 2
    assert str(config) in done.stderr and named in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("table", "named"),
    [
        (
            'images = "x"\nwatch = true\nsettle = 0\n',
            "datasets[0] (a).settle: expected seconds or a duration",
        ),
        ('images = "x"\nwatch = true\nsettle = "fast"\n', "datasets[0] (a).settle: expected seconds"),
        ('images = "x"\nwatch = true\nsettle = true\n', "datasets[0] (a).settle: expected seconds"),
        ('images = "x"\nwatch = true\npoll = "5m"\n', "datasets[0] (a).poll: only for dataset = SPEC"),
        ('dataset = "m:d"\nwatch = true\nsettle = "1s"\n', "datasets[0] (a).settle: only for images"),
        ('dataset = "m:d"\npoll = "5m"\n', "datasets[0] (a).poll: only for a watched dataset"),
        ('images = "x"\nwatch = true\nrescan_every = "1h"\n', "unknown key (did you mean 'rescan-every'?)"),
    ],
)
def test_watch_settings_are_validated_like_the_rest(tmp_path: Path, table: str, named: str) -> None:
    config = tmp_path / "datalint-service.toml"
    config.write_text('[[datasets]]\nname = "a"\n' + table)
    with pytest.raises(ConfigError, match=re.escape(named)):
        load_config(config)


def test_watch_settings_reach_the_watchers_command_line(tmp_path: Path) -> None:
    config = tmp_path / "datalint-service.toml"
    config.write_text(
        '[[datasets]]\nname = "photos"\nimages = "x"\nwatch = true\nsettle = "500ms"\nrescan-every = "2m"\n'
        '[[datasets]]\nname = "spec"\ndataset = "m:d"\nwatch = true\npoll = 30\n'
    )
    registry = Registry(load_config(config))
    photos = watch_command(registry.get("photos"), registry)  # type: ignore[arg-type]
    assert (
        photos[photos.index("--settle") + 1] == "0.5"
        and photos[photos.index("--rescan-every") + 1] == "120.0"
    )
    spec = watch_command(registry.get("spec"), registry)  # type: ignore[arg-type]
    assert spec[spec.index("--poll") + 1] == "30.0" and "--settle" not in spec
    args = build_parser("watch").parse_args(photos[3:])  # what the watcher will read from it
    assert (args.settle, args.rescan_every) == (0.5, 120.0)


def test_a_non_loopback_address_without_tokens_is_refused(tmp_path: Path) -> None:
    (tmp_path / "datalint-service.toml").write_text('[service]\nhost = "0.0.0.0"\n')
    done = serve(cwd=tmp_path)
    assert done.returncode == 2 and "refusing to listen on 0.0.0.0 without tokens" in done.stderr


def test_the_config_defaults_bind_loopback(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text('[[datasets]]\nname = "train"\nimages = "/data/train"\nwatch = true\n')
    config = load_config(tmp_path / "s.toml")
    assert (config.host, config.port) == ("127.0.0.1", 8765)
    assert config.data_dir == tmp_path / "datalint-service"


def test_serve_names_the_service_extra_when_it_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import datalint.extras as extras

    monkeypatch.setattr(extras, "_importable", lambda name: name != "fastapi")
    assert main(["serve", "--config", "nowhere.toml"]) == 2
    assert "needs the [service] extra (missing: fastapi)" in capsys.readouterr().err


def test_guard_replay_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "datalint", "guard", "replay", str(tmp_path / "none"), "http://x"],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
    )
    assert done.returncode == 2 and "no such spool file or folder" in done.stderr
    (tmp_path / "s.jsonl").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "datalint", "guard", "replay", str(tmp_path / "s.jsonl"), "ftp://x"],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
    )
    assert done.returncode == 2 and "expected an http:// or https:// URL" in done.stderr
