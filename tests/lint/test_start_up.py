"""What a one-file `datalint check` imports: only the matcher families its selected rules use,
no `dataclasses` or `inspect`, and no TOML parser once the catalog is cached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from datalint.lint import matchers
from datalint.lint.matchers import FAMILIES, MATCHERS, REQUIRED, index

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from datalint.cli import main
code = main(sys.argv[1:])
print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)
"""

SOURCE = """\
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __init__(self):
        self.handle = open("squares.bin", "rb")

    def __len__(self):
        return 100

    def __getitem__(self, index):
        return index * index


loader = DataLoader(Squares(), batch_size=8, num_workers=0, prefetch_factor=4)
"""


def check_in_child(tmp_path: Path, *arguments: str) -> tuple[int, str, list[str]]:
    (tmp_path / "one_file.py").write_text(SOURCE)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    command = [sys.executable, "-c", PROBE, "check", "--isolated", *arguments, "one_file.py"]
    for _ in range(2):  # the first run fills the caches; the second is what a user's start-up pays
        done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env)
    code, modules = json.loads(done.stderr.strip().splitlines()[-1])
    return code, done.stdout, modules


def test_a_cached_start_imports_no_dataclasses_inspect_or_toml_parser(tmp_path: Path) -> None:
    code, report, modules = check_in_child(tmp_path)
    assert code == 1 and "DL001" in report
    assert not {"dataclasses", "inspect", "tomllib"} & set(modules)
    assert set(FAMILIES) <= set(modules)  # every default rule ran


def test_only_the_families_of_the_selected_rules_are_imported(tmp_path: Path) -> None:
    code, report, modules = check_in_child(tmp_path, "--select", "DL001")
    assert code == 1 and "DL001" in report and "DL201" not in report
    loaded = {name for name in modules if name.startswith("datalint.lint.matchers.")}
    assert loaded == {"datalint.lint.matchers.loader"}


def test_the_matcher_index_says_what_the_families_say(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for _ in ("built", "read from the cache"):
        index.cache_clear()
        built = index()
        assert list(built) == list(MATCHERS)
        for name, function in MATCHERS.items():
            family, parameters = built[name]
            assert name in sys.modules[family].MATCHERS
            defaults = function.__kwdefaults__ or {}
            assert parameters == {p: defaults.get(p, REQUIRED) for p in parameters}
            assert set(parameters) == set(
                function.__code__.co_varnames[1 : 1 + function.__code__.co_kwonlyargcount]
            )
    index.cache_clear()
    assert matchers.known() == list(MATCHERS)
