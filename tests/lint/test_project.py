"""The project model: Dataset-ness, worker code and evidence across the files of one project.

Every fixture project under `fixtures/lint/projects/` is linted as a whole tree; its `# expect:`
markers (the corpus's convention) must be exactly what is reported. Linting any of its files
alone must never report something the project view does not (what one file cannot resolve is
unknown, and unknown is silent). The summary cache is checked against the changes that must
invalidate it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from datalint.config import Config
from datalint.lint import project as project_module
from datalint.lint.catalog import EXPECT_MARKER
from datalint.lint.engine import Finding, lint_paths, lint_source
from datalint.lint.formats import format_json, format_sarif, format_text
from datalint.lint.project import Project, SummaryCache, find_root, module_name

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = ROOT / "fixtures" / "lint" / "projects"
PROJECT_NAMES = sorted(p.name for p in PROJECTS.iterdir() if p.is_dir())

Place = tuple[str, int, str]


def expected(project: Path) -> Counter[Place]:
    found: Counter[Place] = Counter()
    for path in sorted(project.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            marker = re.search(EXPECT_MARKER, line)
            if marker:
                for code in marker.group("codes").split(","):
                    found[(path.relative_to(project).as_posix(), number, code.strip())] += 1
    return found


def places(findings: tuple[Finding, ...] | list[Finding], project: Path) -> Counter[Place]:
    return Counter(
        (Path(f.path).resolve().relative_to(project).as_posix(), f.line, f.code) for f in findings
    )


def lint_project(project: Path, cache: Path | None = None, jobs: int = 1) -> tuple[Finding, ...]:
    report = lint_paths([project], Config(), cache_dir=cache, jobs=jobs)
    assert report.errors == ()
    return report.findings


@pytest.mark.parametrize("name", PROJECT_NAMES)
def test_a_fixture_project_reports_exactly_its_markers(name: str) -> None:
    project = PROJECTS / name
    found = places(lint_project(project), project)
    marked = expected(project)
    assert marked, f"{name} has no `# expect:` markers"
    assert found - marked == Counter(), f"reported but not marked in {name}"
    assert marked - found == Counter(), f"marked but not reported in {name}"


@pytest.mark.parametrize("name", PROJECT_NAMES)
def test_one_file_alone_never_reports_what_the_project_does_not(name: str) -> None:
    project = PROJECTS / name
    whole = places(lint_project(project), project)
    for path in sorted(project.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        alone = places(lint_source(text, str(path)), project)  # no project: a lone text
        assert alone - whole == Counter(), f"{path.name} alone reports more than its project"
        single = places(lint_paths([path], Config(), cache_dir=None).findings, project)
        assert single - whole == Counter(), f"{path.name} as the only path reports more than its project"


def test_a_base_in_another_file_is_named_as_related_location_in_every_format() -> None:
    project = PROJECTS / "shapes_pkg"
    findings = [f for f in lint_project(project) if f.code == "DL501"]
    assert len(findings) == 1 and findings[0].related
    related = findings[0].related[0]
    assert Path(related.path).name == "base.py" and related.line == 9
    assert "through `Stream`" in related.message
    text = format_text(findings, [])
    assert f"{related.path}:9: note: `Lines` is a Dataset through `Stream`" in text
    rows = json.loads(format_json(findings, []))
    assert rows[0]["related"] == [{"path": related.path, "line": 9, "message": related.message}]
    sarif = json.loads(format_sarif(findings, []))
    location = sarif["runs"][0]["results"][0]["relatedLocations"][0]
    assert location["physicalLocation"]["region"]["startLine"] == 9
    assert location["physicalLocation"]["artifactLocation"]["uri"].endswith("shapes/data/base.py")


def test_a_reader_held_by_a_dataset_in_another_file_runs_in_workers() -> None:
    project = PROJECTS / "shapes_pkg"
    reader = [f for f in lint_project(project) if f.code == "DL202"]
    assert [Path(f.path).name for f in reader] == ["readers.py"]
    assert "the Dataset `TrainSet` holds it" in reader[0].related[0].message
    # The reader's module alone cannot know a Dataset holds it: silent, not guessed.
    alone = lint_paths([project / "shapes" / "data" / "readers.py"], Config(), cache_dir=None)
    assert [f.code for f in alone.findings] == []


def test_imports_resolve_through_src_layout_relative_imports_reexports_and_aliases(tmp_path: Path) -> None:
    project = Project(PROJECTS / "shapes_pkg", SummaryCache(tmp_path))
    sets = (PROJECTS / "shapes_pkg" / "shapes" / "data" / "sets.py").resolve()
    name, root, package = module_name(sets)
    assert (name, root, package) == ("shapes.data.sets", (PROJECTS / "shapes_pkg").resolve(), False)
    alias = project.find_class("shapes.data.Base", root)  # `from .base import BaseDataset as Base`
    assert alias is not None and alias.qualname == "shapes.data.base.BaseDataset"
    fact = project.dataset_fact("shapes.data.sets.ShardedLines", root)
    assert fact is not None and fact.kind == "iterable"
    assert [link.name for link in fact.chain] == ["ShardedLines", "ShardedStream", "Stream"]
    src = Project(PROJECTS / "src_layout", SummaryCache(None))
    script_root = (PROJECTS / "src_layout" / "scripts").resolve()
    tiles = src.dataset_fact("tiles.sets.Tiles", script_root)
    assert tiles is not None and tiles.base == "torch.utils.data.Dataset"
    folder = src.dataset_fact("tiles.sets.CachedFolder", script_root)
    assert folder is not None and folder.base == "torchvision.datasets.ImageFolder"
    assert src.find_class("tiles.nowhere.Missing", script_root) is None


def test_the_root_is_the_nearest_folder_with_a_project_marker(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    assert find_root([nested]) == tmp_path.resolve()
    assert find_root([PROJECTS / "siblings" / "pairs.py"]) == (PROJECTS / "siblings").resolve()


def test_a_tree_without_a_marker_is_the_project_given(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sets.py").write_text("", encoding="utf-8")
    assert find_root([tmp_path]) == tmp_path.resolve()
    assert find_root([tmp_path / "data" / "sets.py"]) == (tmp_path / "data").resolve()
    project = Project.for_paths([tmp_path])
    assert project.import_names(tmp_path / "data" / "sets.py") == ("sets", "data.sets")


def test_the_files_of_a_tree_without_a_marker_are_one_project_like_the_tree(tmp_path: Path) -> None:
    # `datalint check tree` hands the tree's files over one by one: without a marker, the project
    # is the folder holding them all, not the first file's folder, so a subclass in one folder
    # still sees the base that another folder's file defines.
    siblings = PROJECTS / "siblings"
    tree = tmp_path / "tree"
    (tree / "aaa_scripts").mkdir(parents=True)
    (tree / "aaa_scripts" / "run.py").write_text("print('first file of the walk')\n", encoding="utf-8")
    (tree / "lib").mkdir()
    for name in ("pose_base.py", "keypoint_sets.py"):
        shutil.copy(siblings / name, tree / "lib" / name)
    files = sorted(tree.rglob("*.py"))
    assert find_root(files) == tree.resolve()
    by_tree = places(lint_paths([tree], Config(), cache_dir=None).findings, tree)
    by_files = places(lint_paths(files, Config(), cache_dir=None).findings, tree)
    assert ("lib/keypoint_sets.py", 19, "DL301") in by_tree
    assert by_files == by_tree


VIDEO_READERS = """
from torch.utils.data import Dataset


class ClipReader(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        clip = decode(self.paths[i])
        if clip is None:
            return None
        return clip


class ClipVerifier(ClipReader):
    def __getitem__(self, i):
        try:
            return probe(self.paths[i])
        except OSError:
            return None
"""


def test_a_script_class_no_file_imports_is_batched_by_no_loader(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "readers.py").write_text(VIDEO_READERS, encoding="utf-8")
    (scripts / "extract.py").write_text(
        "from torch.utils.data import DataLoader\nfrom readers import ClipReader\n\n"
        "loader = DataLoader(ClipReader(['a.mp4']), batch_size=4, num_workers=2)\n",
        encoding="utf-8",
    )
    none_lines = [n for n, line in enumerate(VIDEO_READERS.splitlines(), 1) if "return None" in line]
    found = lint_paths([tmp_path], Config(select=("DL502",)), cache_dir=None).findings
    # The verifier is imported by no script and built nowhere: only the reader's None is batched.
    assert [(Path(f.path).name, f.line) for f in found] == [("readers.py", none_lines[0])]
    # A run on the changed file alone cannot know what the scripts beside it import: reported.
    alone = lint_paths([scripts / "readers.py"], Config(select=("DL502",)), cache_dir=None).findings
    assert none_lines[1] in [f.line for f in alone]
    # In a package the verifier is a library's class, handed to loaders elsewhere: reported.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "readers.py").write_text(VIDEO_READERS, encoding="utf-8")
    found = lint_paths([package], Config(select=("DL502",)), cache_dir=None).findings
    assert none_lines[1] in [f.line for f in found]


def test_jobs_give_the_same_findings_as_one_process() -> None:
    project = PROJECTS / "shapes_pkg"
    assert lint_project(project, jobs=2) == lint_project(project)


def test_with_jobs_a_cold_cache_is_filled_by_the_worker_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a cold cache every file must be parsed for its summary before any is linted: with
    `--jobs`, the processes make the summaries, and the parent parses none of the files itself."""
    from datalint.lint import project as project_module

    parsed_here: list[str] = []
    parse = project_module._parse

    def counted(raw: bytes, path: str) -> object:
        if os.getpid() == parent:  # forked workers inherit this wrapper and count apart
            parsed_here.append(path)
        return parse(raw, path)

    parent = os.getpid()
    monkeypatch.setattr(project_module, "_parse", counted)
    cache = tmp_path / "cache"
    found = lint_project(PROJECTS / "shapes_pkg", cache=cache, jobs=2)
    assert parsed_here == []
    assert found == lint_project(PROJECTS / "shapes_pkg")
    assert len(list(cache.rglob("*.json"))) == len(list((PROJECTS / "shapes_pkg").rglob("*.py")))


# ---- the summary cache -------------------------------------------------------------------------------


def copy_project(tmp_path: Path) -> Path:
    target = tmp_path / "shapes_pkg"
    shutil.copytree(PROJECTS / "shapes_pkg", target)
    return target


def codes_in(findings: tuple[Finding, ...], name: str) -> list[str]:
    return sorted(f.code for f in findings if Path(f.path).name == name)


def test_the_cache_is_reused_and_a_changed_file_is_summarized_afresh(tmp_path: Path) -> None:
    project, cache = copy_project(tmp_path), tmp_path / "cache"
    first = lint_project(project, cache)
    entries = sorted(cache.rglob("*.json"))
    assert entries, "the first run writes summaries"
    readers = project / "shapes" / "data" / "readers.py"
    readers.write_text(readers.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    second = lint_project(project, cache)
    assert len(sorted(cache.rglob("*.json"))) == len(entries) + 1  # one new key, the others reused
    assert [(f.code, f.line) for f in second] == [(f.code, f.line) for f in first]


def test_a_changed_base_in_another_file_changes_what_its_subclasses_are(tmp_path: Path) -> None:
    project, cache = copy_project(tmp_path), tmp_path / "cache"
    assert "DL201" in codes_in(lint_project(project, cache), "sets.py")
    base = project / "shapes" / "data" / "base.py"
    text = base.read_text(encoding="utf-8")
    base.write_text(text.replace("class BaseDataset(Dataset):", "class BaseDataset:"), encoding="utf-8")
    after = codes_in(lint_project(project, cache), "sets.py")
    assert "DL201" not in after and "DL505" not in after  # no longer Datasets
    assert "DL501" in after  # the stream still derives from IterableDataset


def test_a_deleted_base_file_makes_its_subclasses_unknown(tmp_path: Path) -> None:
    project, cache = copy_project(tmp_path), tmp_path / "cache"
    assert "DL501" in codes_in(lint_project(project, cache), "sets.py")
    (project / "shapes" / "data" / "base.py").unlink()
    assert codes_in(lint_project(project, cache), "sets.py") == []


def test_a_new_datalint_version_does_not_read_old_summaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, cache = copy_project(tmp_path), tmp_path / "cache"
    lint_project(project, cache)
    before = {p.name for p in cache.rglob("*.json")}
    monkeypatch.setattr(project_module, "__version__", "99.0.0")
    lint_project(project, cache)
    after = {p.name for p in cache.rglob("*.json")}
    assert before and before.isdisjoint(after - before) and len(after) == 2 * len(before)


def test_an_unreadable_cache_entry_is_recomputed_not_trusted(tmp_path: Path) -> None:
    project, cache = copy_project(tmp_path), tmp_path / "cache"
    first = lint_project(project, cache)
    for entry in cache.rglob("*.json"):
        entry.write_text("{not json", encoding="utf-8")
    assert lint_project(project, cache) == first


def test_a_read_only_cache_folder_costs_speed_never_a_result(tmp_path: Path) -> None:
    project, cache = copy_project(tmp_path), tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o500)
    try:
        assert lint_project(project, cache) == lint_project(project, None)
    finally:
        os.chmod(cache, 0o700)


@pytest.mark.parametrize("name", PROJECT_NAMES)
def test_a_file_parsed_for_another_files_question_is_linted_from_that_parse(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parses: list[str] = []
    real_parse = ast.parse

    def counting_parse(source: Any, *args: Any, **kwargs: Any) -> ast.Module:
        parses.append(str(kwargs.get("filename", args[0] if args else "")))
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting_parse)
    project = PROJECTS / name
    files = len(list(project.rglob("*.py")))
    held = lint_project(project)
    held_parses = len(parses)
    parses.clear()
    assert held_parses == files  # each file parsed once, its summary and its rules from one tree
    monkeypatch.setattr(project_module, "PARSED_AHEAD_BYTES", 0)  # nothing held: parsed again
    assert lint_project(project) == held
    assert len(parses) >= files


def test_summaries_read_back_from_the_cache_give_the_same_cross_file_findings(tmp_path: Path) -> None:
    # The warm run answers every cross-file question (the attributes a base's `__getitem__`
    # indexes, the methods returning a list they fill, the loaders builders return with their
    # sampler) from summaries read back from disk, not from the trees just parsed.
    project, cache = PROJECTS / "siblings", tmp_path / "cache"
    cold = places(lint_project(project, cache), project)
    warm = places(lint_project(project, cache), project)
    assert warm == cold
    assert ("keypoint_sets.py", 19, "DL301") in warm and ("epoch_train.py", 12, "DL403") in warm


def test_a_loader_from_a_builder_in_another_file_names_its_sampler_as_related_location() -> None:
    project = PROJECTS / "siblings"
    found = [f for f in lint_project(project) if f.code == "DL403" and Path(f.path).name == "epoch_train.py"]
    assert [f.line for f in found] == [12]
    assert "`loader.sampler` is never told the epoch" in found[0].message
    related = found[0].related[0]
    assert Path(related.path).name == "sampler_builders.py" and related.line == 17
    assert "builds the loader's shuffling `DistributedSampler`" in related.message
    subclass = [f for f in lint_project(project) if Path(f.path).name == "keypoint_sets.py"]
    assert [(f.code, f.line) for f in subclass] == [("DL301", 19)]
    assert Path(subclass[0].related[0].path).name == "pose_base.py"
