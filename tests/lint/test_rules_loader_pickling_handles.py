"""DL008-DL011, DL101-DL104 and DL201-DL206 beyond their rule examples.

Severity follows the start method (config, the file, or the loader's own context); users extend
the handle list from pyproject.toml; and the code these rules flag really fails to start workers
under spawn with the real DataLoader, while the suggested fix runs.
"""

from __future__ import annotations

import importlib
import sqlite3
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from datalint.config import Config, load_config
from datalint.errors import DatalintError
from datalint.lint.engine import Finding, lint_paths, lint_source

LAMBDA_COLLATE = """
from torch.utils.data import DataLoader

loader = DataLoader(ds, batch_size=4, num_workers=2{context}, collate_fn=lambda batch: batch)
"""

LAMBDA_TRANSFORM = """
import multiprocessing as mp

from torch.utils.data import Dataset

mp.set_start_method({method!r})


class Scaled(Dataset):
    def __init__(self, data):
        self.data = data
        self.transform = lambda x: x / 255.0

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.transform(self.data[i])
"""

SQLITE_IN_INIT = """
import sqlite3

from torch.utils.data import Dataset


class Labels(Dataset):
    def __init__(self, path):
        self.db = sqlite3.connect(path)
        self.length = self.db.execute("SELECT COUNT(*) FROM labels").fetchone()[0]
        {release}

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        return self.db.execute("SELECT value FROM labels WHERE id = ?", (i,)).fetchone()[0]
"""

CUSTOM_HANDLE = """
import mydb
from torch.utils.data import Dataset


class Rows(Dataset):
    def __init__(self, url):
        self.conn = mydb.connect(url)

    def __len__(self):
        return 10

    def __getitem__(self, i):
        return self.conn.get(i)
"""


def lint(source: str, select: str, start_method: str = "spawn", **options: Any) -> list[Finding]:
    config = Config(
        select=(select,),
        start_method=start_method,
        rule_options={select: options} if options else {},
    )
    return lint_source(textwrap.dedent(source).lstrip(), "pipeline.py", config)


def severities(findings: list[Finding]) -> list[tuple[int, str, str]]:
    return [(f.line, f.code, f.severity) for f in findings]


# ---- severity follows the start method ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("configured", "context", "severity"),
    [
        ("spawn", "", "error"),
        ("forkserver", "", "error"),
        ("fork", "", "warning"),
        ("spawn", ', multiprocessing_context="fork"', "warning"),
        ("fork", ', multiprocessing_context="spawn"', "error"),
        ("fork", ', multiprocessing_context=mp.get_context("forkserver")', "error"),
    ],
)
def test_a_lambda_collate_fn_is_an_error_only_where_workers_are_pickled(
    configured: str, context: str, severity: str
) -> None:
    source = ("import multiprocessing as mp\n" if "mp." in context else "") + LAMBDA_COLLATE.format(
        context=context
    )
    findings = lint(source, "DL101", start_method=configured)
    assert [(f.code, f.severity) for f in findings] == [("DL101", severity)]
    assert "module-level function" in findings[0].message


@pytest.mark.parametrize(("method", "severity"), [("fork", "warning"), ("spawn", "error")])
def test_set_start_method_in_the_file_overrides_the_configured_default(method: str, severity: str) -> None:
    configured = "spawn" if method == "fork" else "fork"
    findings = lint(LAMBDA_TRANSFORM.format(method=method), "DL102", start_method=configured)
    assert severities(findings) == [(11, "DL102", severity)]


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_a_handle_opened_in_init_is_an_error_under_every_start_method(start_method: str) -> None:
    findings = lint(SQLITE_IN_INIT.format(release=""), "DL201", start_method=start_method)
    assert severities(findings) == [(8, "DL201", "error")]
    assert "self.db" in findings[0].message and "sqlite3.connect" in findings[0].message


def test_closing_the_handle_in_init_is_enough_under_fork_but_not_under_spawn() -> None:
    # A closed connection is harmless when forked, but pickling it for a spawned worker still fails.
    closed = SQLITE_IN_INIT.format(release="self.db.close()")
    assert lint(closed, "DL201", start_method="fork") == []
    assert [f.line for f in lint(closed, "DL201", start_method="spawn")] == [8]
    cleared = SQLITE_IN_INIT.format(release="self.db = None")
    assert lint(cleared, "DL201", start_method="spawn") == []


def test_fork_only_hazards_stay_silent_when_the_file_asks_for_spawn() -> None:
    shared = """
    import h5py
    import torch.multiprocessing as mp
    from torch.utils.data import Dataset

    mp.set_start_method({method!r})
    H5 = h5py.File("train.h5", "r")


    class Images(Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return H5["x"][i]
    """
    assert [f.line for f in lint(shared.format(method="fork"), "DL206")] == [6]
    assert lint(shared.format(method="spawn"), "DL206") == []


# ---- user options from pyproject.toml --------------------------------------------------------------


def write_project(tmp_path: Path, options: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "pipeline"\n\n[tool.datalint]\nselect = ["DL2"]\n\n{options}\n', encoding="utf-8"
    )
    (tmp_path / "rows.py").write_text(textwrap.dedent(CUSTOM_HANDLE).lstrip(), encoding="utf-8")
    (tmp_path / "labels.py").write_text(
        textwrap.dedent(SQLITE_IN_INIT.format(release="")).lstrip(), encoding="utf-8"
    )
    return tmp_path / "pyproject.toml"


def found(tmp_path: Path, pyproject: Path) -> list[tuple[str, int, str]]:
    report = lint_paths([tmp_path], load_config(pyproject))
    return [(Path(f.path).name, f.line, f.code) for f in report.findings]


def test_extend_calls_adds_a_team_handle_factory(tmp_path: Path) -> None:
    plain = write_project(tmp_path, "")
    assert found(tmp_path, plain) == [("labels.py", 8, "DL201")]
    extended = write_project(tmp_path, '[tool.datalint.rules.DL201]\nextend-calls = ["mydb.connect"]')
    assert found(tmp_path, extended) == [("labels.py", 8, "DL201"), ("rows.py", 7, "DL201")]


def test_calls_replaces_the_handle_list(tmp_path: Path) -> None:
    replaced = write_project(tmp_path, '[tool.datalint.rules.DL201]\ncalls = ["mydb.connect"]')
    assert found(tmp_path, replaced) == [("rows.py", 7, "DL201")]


def test_a_misspelt_rule_option_is_an_error_naming_it(tmp_path: Path) -> None:
    pyproject = write_project(tmp_path, '[tool.datalint.rules.DL201]\nextend-cals = ["mydb.connect"]')
    with pytest.raises(DatalintError, match="unknown option 'extend-cals' for DL201"):
        lint_paths([tmp_path], load_config(pyproject))


def test_module_level_worker_start_through_a_helper_chain() -> None:
    source = """
    from torch.utils.data import DataLoader


    def fit(model, loader):
        for batch in loader:
            model(batch)


    def main():
        loader = DataLoader(ds, batch_size=8, num_workers=4)
        fit(model, loader)


    def make_loader():
        return DataLoader(ds, num_workers=4)


    loader = make_loader()
    main()
    """
    # Building a loader starts nothing; handing it to code that iterates it does.
    assert [(f.line, f.code) for f in lint(source, "DL104")] == [(19, "DL104")]


def test_a_collate_fn_of_a_loader_without_workers_may_use_cuda() -> None:
    source = """
    from torch.utils.data import DataLoader


    def to_gpu(batch):
        return [x.cuda() for x in batch]


    eval_loader = DataLoader(ds, batch_size=8, collate_fn=to_gpu)
    train_loader = DataLoader(ds, batch_size=8, num_workers=2, collate_fn=lambda b: [x.cuda() for x in b])
    """
    assert [(f.line, f.code) for f in lint(source, "DL203")] == [(9, "DL203")]


def test_a_dataset_of_a_known_library_base_is_checked_and_an_unknown_base_is_not() -> None:
    # torchvision's LSUN kept an lmdb environment from __init__ (pytorch/vision#689).
    source = """
    import cv2
    import lmdb

    from {origin} import VisionDataset


    class LSUNClass(VisionDataset):
        def __init__(self, root):
            super().__init__(root)
            self.env = lmdb.open(root, readonly=True, lock=False)

        def __getitem__(self, index):
            return cv2.imdecode(self.env.begin().get(b"%d" % index), cv2.IMREAD_COLOR)
    """
    known = source.replace("{origin}", "torchvision.datasets.vision")
    assert [(f.line, f.code) for f in lint(known, "DL2")] == [(10, "DL201"), (13, "DL202")]
    # A relative base in a lone text cannot be resolved: unknown, so silent (no name guessing).
    assert lint(source.replace("{origin}", ".vision"), "DL2") == []


def test_rule_options_change_thresholds_and_word_lists() -> None:
    many = "from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=24)\n"
    assert [f.code for f in lint(many, "DL008")] == ["DL008"]
    assert lint(many, "DL008", threshold=32) == []
    fitting = "from torch.utils.data import DataLoader\nfit_loader = DataLoader(ds, batch_size=8)\n"
    assert lint(fitting, "DL009") == []
    assert [f.code for f in lint(fitting, "DL009", **{"extend-train-words": ["fit"]})] == ["DL009"]


def test_dl009_is_decided_per_loader_like_its_siblings_in_the_fixture_project() -> None:
    """DL009 is off by default, so the sibling fixture project (default rules) cannot hold its pair."""
    source = """
    from torch.utils.data import DataLoader


    def synchronous(train_set):
        workers = 0
        return DataLoader(train_set, batch_size=32, shuffle=True, num_workers=workers)


    def with_workers(train_set):
        workers = 4
        return DataLoader(train_set, batch_size=32, shuffle=True, num_workers=workers)
    """
    assert [(f.line, f.code) for f in lint(source, "DL009")] == [(6, "DL009")]


# ---- the flagged code really fails under spawn, and the fix runs --------------------------------------


def import_pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> Any:
    """Write `source` as an importable module, so spawned workers can import it by name."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module(name)


def make_labels_db(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE labels (id INTEGER PRIMARY KEY, value INTEGER)")
        db.executemany("INSERT INTO labels VALUES (?, ?)", [(i, i * 10) for i in range(4)])
    return path


FAILING_UNDER_SPAWN = [
    pytest.param(
        "DL101",
        """
        from torch.utils.data import DataLoader

        def build(ds):
            return DataLoader(ds, batch_size=2, num_workers=1, multiprocessing_context="spawn",
                              collate_fn=lambda batch: batch)
        """,
        "lambda",
        id="DL101-lambda-collate",
    ),
    pytest.param(
        "DL102",
        """
        from torch.utils.data import DataLoader, Dataset

        class Scaled(Dataset):
            def __init__(self, data):
                self.data = data
                self.transform = lambda x: x * 2

            def __len__(self):
                return len(self.data)

            def __getitem__(self, i):
                return self.transform(self.data[i])

        def build(ds):
            return DataLoader(Scaled(ds), batch_size=2, num_workers=1, multiprocessing_context="spawn")
        """,
        "lambda",
        id="DL102-lambda-attribute",
    ),
    pytest.param(
        "DL201",
        """
        import sqlite3

        from torch.utils.data import DataLoader, Dataset

        class Labels(Dataset):
            def __init__(self, path):
                self.db = sqlite3.connect(path)

            def __len__(self):
                return 4

            def __getitem__(self, i):
                return self.db.execute("SELECT value FROM labels WHERE id = ?", (i,)).fetchone()[0]

        def build(path):
            return DataLoader(Labels(path), batch_size=2, num_workers=1, multiprocessing_context="spawn")
        """,
        "sqlite3.Connection",
        id="DL201-sqlite-in-init",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("code", "source", "error"), FAILING_UNDER_SPAWN)
def test_flagged_code_cannot_start_spawned_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str, source: str, error: str
) -> None:
    pytest.importorskip("torch")
    findings = lint(source, code, start_method="fork")  # the loader's own context decides
    assert [(f.code, f.severity) for f in findings] == [(code, "error")]
    pipeline = import_pipeline(tmp_path, monkeypatch, f"pipeline_{code.lower()}", source)
    loader = pipeline.build(
        str(make_labels_db(tmp_path / "labels.sqlite")) if code == "DL201" else [1, 2, 3, 4]
    )
    # Pickling the worker's arguments fails in the parent, before any child process starts.
    with pytest.warns(UserWarning, match="pickle"), pytest.raises(Exception, match=error):
        iter(loader)


@pytest.mark.slow
def test_the_lazy_open_fix_runs_in_spawned_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    source = """
    import sqlite3

    from torch.utils.data import DataLoader, Dataset


    def first_column(batch):
        return batch


    class Labels(Dataset):
        def __init__(self, path):
            self.path = path
            self.db = None

        def __len__(self):
            return 4

        def __getitem__(self, i):
            if self.db is None:
                self.db = sqlite3.connect(self.path)
            return self.db.execute("SELECT value FROM labels WHERE id = ?", (i,)).fetchone()[0]


    def build(path):
        return DataLoader(Labels(path), batch_size=2, num_workers=1, multiprocessing_context="spawn",
                          collate_fn=first_column, timeout=120)
    """
    assert lint(source, "DL1") == [] and lint(source, "DL2") == []
    pipeline = import_pipeline(tmp_path, monkeypatch, "pipeline_lazy_open", source)
    loader = pipeline.build(str(make_labels_db(tmp_path / "labels.sqlite")))
    assert list(loader) == [[0, 10], [20, 30]]
