"""Configuration files: per-file discovery, `extend`, inline settings, and the parsed-TOML cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from datalint.config import ConfigError, ConfigResolver, config_from_file, load_config, parse_inline


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_an_edited_file_is_read_again_and_a_broken_cache_is_ignored(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.datalint]\nignore = ["DL302"]\n')
    assert load_config(pyproject).ignore == ("DL302",)
    assert load_config(pyproject).ignore == ("DL302",)  # from the cache
    pyproject.write_text('[tool.datalint]\nignore = ["DL1", "DL2"]\n')
    assert load_config(pyproject).ignore == ("DL1", "DL2")
    for cached in (tmp_path / "cache" / "datalint").glob("toml-*"):
        cached.write_bytes(b"not marshal")
    assert load_config(pyproject).ignore == ("DL1", "DL2")


def test_each_folder_gets_its_nearest_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nrequires-python = ">=3.14"\n[tool.datalint]\n')
    inner = tmp_path / "pkg" / "sub"
    inner.mkdir(parents=True)
    (tmp_path / "pkg" / "pyproject.toml").write_text('[tool.datalint]\nstart-method = "fork"\n')
    resolver = ConfigResolver(cwd=tmp_path)
    assert resolver.for_path(tmp_path / "a.py").start_method == "forkserver"
    assert resolver.for_path(inner / "b.py").start_method == "fork"
    assert resolver.for_path(inner / "b.py") is resolver.for_path(tmp_path / "pkg" / "c.py")


def test_extend_roots_paths_where_they_were_written_and_refuses_a_loop(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.datalint]\nrule-paths = ["rules"]\nextend-exclude = ["gen/*"]\nextend-select = ["DL009"]\n'
    )
    child = tmp_path / "pkg" / "pyproject.toml"
    child.parent.mkdir()
    child.write_text('[tool.datalint]\nextend = "../pyproject.toml"\nextend-select = ["DL010"]\n')
    config = config_from_file(child)
    assert config.rule_paths == (tmp_path / "rules",)
    assert config.extend_select == ("DL009", "DL010")
    assert config.is_excluded(tmp_path / "gen" / "x.py") and not config.is_excluded(
        child.parent / "gen" / "x.py"
    )
    (tmp_path / "pyproject.toml").write_text('[tool.datalint]\nextend = "pkg/pyproject.toml"\n')
    with pytest.raises(ConfigError, match="circle"):
        config_from_file(child)


def test_inline_settings_are_toml_and_errors_say_how_to_write_them() -> None:
    assert parse_inline(['select = ["DL0"]', "rules.DL201.extend-calls = ['x.y']"]) == {
        "select": ["DL0"],
        "rules": {"DL201": {"extend-calls": ["x.y"]}},
    }
    with pytest.raises(ConfigError, match="KEY = VALUE"):
        parse_inline(["select = DL0"])


def test_a_datalint_toml_is_found_like_a_pyproject_and_wins_beside_one(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nrequires-python = ">=3.14"\n[tool.datalint]\nignore = ["DL1"]\n'
    )
    (tmp_path / "datalint.toml").write_text('ignore = ["DL2"]\n')
    config = ConfigResolver(cwd=tmp_path).for_path(tmp_path / "train.py")
    assert config.source == tmp_path / "datalint.toml"
    assert config.ignore == ("DL2",) and config.start_method == "forkserver"  # requires-python beside it
