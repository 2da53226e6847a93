"""The engine on its own: unparsable files, noqa, selection, per-file ignores, crashing matchers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from datalint import marshal_cache
from datalint.config import Config
from datalint.lint.catalog import CatalogError, load_catalog, load_rule
from datalint.lint.engine import Linter, MatcherError, lint_paths, lint_source, select_rules
from datalint.lint.matchers import MATCHERS

PREFETCH = "from torch.utils.data import DataLoader\nloader = DataLoader(ds, prefetch_factor=2)\n"
LOADER_RULES = Config(select=("DL00",))


def codes(findings) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    return [(f.line, f.code) for f in findings]


def test_a_syntax_error_is_one_finding_at_its_line() -> None:
    (finding,) = lint_source("import torch\n\ndef f(:\n    pass\n", "bad.py", LOADER_RULES)
    assert (finding.code, finding.line, finding.path) == ("DL000", 3, "bad.py")
    assert "syntax error" in finding.message


def test_bytes_that_are_not_utf8_are_one_finding() -> None:
    (finding,) = lint_source(b"name = '\xff\xfe'\n", "latin.py", LOADER_RULES)
    assert finding.code == "DL000" and "0xff" in finding.message and "UTF-8" in finding.message


def test_a_declared_encoding_is_honoured() -> None:
    source = "# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n".encode("latin-1")
    assert lint_source(source, "latin.py", LOADER_RULES) == []


def test_nul_bytes_are_one_finding() -> None:
    (finding,) = lint_source("x = 1\x00\n", "nul.py", LOADER_RULES)
    assert finding.code == "DL000"


def test_an_unreadable_file_is_one_finding(tmp_path: Path) -> None:
    folder_named_like_a_file = tmp_path / "odd.py"
    folder_named_like_a_file.mkdir()
    (finding,) = Linter(LOADER_RULES).check_file(folder_named_like_a_file)
    assert finding.code == "DL000" and "cannot read" in finding.message


def test_noqa_silences_only_the_named_codes_on_the_start_or_the_statements_last_line() -> None:
    source = textwrap.dedent(
        """\
        from torch.utils.data import DataLoader
        a = DataLoader(ds, prefetch_factor=2)  # noqa: DL001
        b = DataLoader(ds, prefetch_factor=2)  # noqa: dl002, DL001
        c = DataLoader(ds, prefetch_factor=2)  # noqa
        d = DataLoader(ds, prefetch_factor=2)  # noqa: DL0
        e = DataLoader(ds, prefetch_factor=2)  # noqa: DL002
        f = DataLoader(  # noqa: DL001
            ds, prefetch_factor=2)
        g = DataLoader(
            ds, prefetch_factor=2)  # noqa: DL001
        """
    )
    assert codes(lint_source(source, "x.py", LOADER_RULES)) == [(6, "DL001")]


def test_findings_are_sorted_by_line_and_column() -> None:
    source = (
        "from torch.utils.data import DataLoader\n"
        "b = DataLoader(ds, persistent_workers=True); a = DataLoader(ds, prefetch_factor=2)\n"
        "c = DataLoader(ds, batch_size=None, drop_last=True)\n"
    )
    findings = lint_source(source, "x.py", LOADER_RULES)
    assert [(f.line, f.column, f.code) for f in findings] == [
        (2, 5, "DL002"),
        (2, 50, "DL001"),
        (3, 5, "DL005"),
    ]


def test_columns_count_characters_not_bytes() -> None:
    source = "from torch.utils.data import DataLoader\nnäme = DataLoader(ds, prefetch_factor=2)\n"
    (finding,) = lint_source(source, "x.py", LOADER_RULES)
    assert finding.column == 8


def test_selection_most_specific_entry_wins() -> None:
    catalog = load_catalog()
    ids = lambda config: {r.id for r in select_rules(catalog, config)}  # noqa: E731
    assert ids(Config(select=("DL001", "DL003"))) == {"DL001", "DL003"}
    dl00 = {r.id for r in catalog.matching("DL00")}
    assert ids(Config(select=("DL00",), ignore=("DL001",))) == dl00 - {"DL001"}
    assert "DL002" in ids(Config(select=("DL00",), ignore=("DL0",), extend_select=("DL002",)))
    defaults = ids(Config())
    off = {r.id for r in catalog if not r.default}
    assert defaults == {r.id for r in catalog} - off
    assert ids(Config(ignore=("DL",))) == set()
    for rule_id in off:  # an off-by-default rule runs when a select entry names it
        assert rule_id in ids(Config(extend_select=(rule_id,)))


def test_per_file_ignores(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(PREFETCH)
    (tmp_path / "train.py").write_text(PREFETCH)
    config = Config(select=("DL00",), per_file_ignores=(("tests/*", ("DL0",)),), root=tmp_path)
    report = lint_paths([tmp_path], config)
    assert [Path(f.path).name for f in report.findings] == ["train.py"]
    assert report.files == 2


def test_walking_skips_virtualenvs_and_excluded_globs(tmp_path: Path) -> None:
    for relative in (".venv/lib/a.py", "build/b.py", "pkg/gen/c.py", "pkg/d.py", "pkg/notes.txt"):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(PREFETCH)
    report = lint_paths([tmp_path], Config(select=("DL00",), exclude=("pkg/gen",), root=tmp_path))
    assert [Path(f.path).name for f in report.findings] == ["d.py"]


def crashing_matcher(module, *, limit: int = 1):  # type: ignore[no-untyped-def]
    raise RuntimeError("boom")
    yield  # pragma: no cover


def write_rule(folder: Path, text: str, name: str = "TST001-crash.toml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


RULE = """\
    id = "TST001"
    name = "crash"
    severity = "warning"
    summary = "s"
    message = "m {what}"
    why = "w"
    fix = "f"
    references = []
    [check]
    matcher = "loader-argument-conflict"
    when = { prefetch_factor = "not-none" }
    conflicts = { num_workers = "zero" }
    [[bad]]
    code = "x = 1  # expect: TST001"
    [[good]]
    code = "x = 1"
    """


def test_a_team_rule_from_rule_paths_runs_and_a_missing_field_names_the_rule(tmp_path: Path) -> None:
    write_rule(tmp_path, RULE)
    config = Config(select=("TST",), rule_paths=(tmp_path,))
    with pytest.raises(MatcherError, match="field 'what'"):
        lint_source(PREFETCH, "x.py", config)


def test_a_crashing_matcher_is_an_error_for_that_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(MATCHERS, "crash-for-test", crashing_matcher)
    write_rule(
        tmp_path,
        RULE.replace("loader-argument-conflict", "crash-for-test").replace(
            'when = { prefetch_factor = "not-none" }\n    conflicts = { num_workers = "zero" }\n', ""
        ),
    )
    (tmp_path / "a.py").write_text("x = 1\n")
    config = Config(select=("TST", "DL001"), rule_paths=(tmp_path,), root=tmp_path)
    report = lint_paths([tmp_path / "a.py"], config)
    (error,) = report.errors
    assert "TST001" in error.message and "boom" in error.message


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (lambda t: t + 'colour = "red"\n', "unknown key(s) colour"),
        (lambda t: t.replace('why = "w"\n', ""), "missing key(s) why"),
        (lambda t: t.replace('severity = "warning"', 'severity = "fatal"'), "severity"),
        (lambda t: t.replace('matcher = "loader-argument-conflict"', 'matcher = "nope"'), "matcher 'nope'"),
        (lambda t: t.replace("conflicts = {", "conflicts_typo = {"), "do not fit matcher"),
        (lambda t: t.replace("[[good]]\ncode", "[[good]]\ncolour = 1\ncode"), "[[good]] #1"),
        (lambda t: t.replace('name = "crash"', 'name = "other"'), "must be named TST001-other.toml"),
    ],
)
def test_rule_files_are_loaded_strictly(tmp_path: Path, change, complaint: str) -> None:  # type: ignore[no-untyped-def]
    path = write_rule(tmp_path, change(textwrap.dedent(RULE)))
    with pytest.raises(CatalogError) as caught:
        load_rule(path, MATCHERS)
    assert str(path) in str(caught.value) and complaint in str(caught.value)


def test_user_options_extend_or_replace_matcher_parameters() -> None:
    rule = load_catalog().get("DL007")
    assert rule is not None
    params = rule.bind({"extend-start-methods": ["threads"]})
    assert list(params["start_methods"]) == ["fork", "spawn", "forkserver", "threads"]
    with pytest.raises(CatalogError, match="unknown option 'colour'"):
        rule.bind({"colour": 1})
    with pytest.raises(CatalogError, match="must be a list"):
        rule.bind({"non-negative": "timeout"})


def test_the_parsed_catalog_cache_follows_edits_and_survives_corruption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datalint.lint import catalog

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rules = tmp_path / "rules"
    rules.mkdir()
    path = write_rule(rules, RULE)

    def summary() -> str:
        catalog._load_catalog.cache_clear()
        rule = load_catalog([rules]).get("TST001")
        assert rule is not None
        return rule.summary

    assert summary() == "s"
    written = marshal_cache.cache_path("catalog", rules)
    assert written.is_file() and written.is_relative_to(tmp_path / "cache")
    path.write_text(path.read_text().replace('summary = "s"', 'summary = "edited"'))
    assert summary() == "edited"
    written.write_text("{not json")
    assert summary() == "edited"


def test_spawn_severity_follows_the_start_method_of_the_code_then_the_config(tmp_path: Path) -> None:
    text = textwrap.dedent(RULE).replace('message = "m {what}"', 'message = "m {trigger}"')
    write_rule(
        tmp_path, text.replace('severity = "warning"', 'severity = "warning"\nspawn-severity = "error"')
    )
    severity = lambda source, method: [  # noqa: E731
        f.severity
        for f in lint_source(
            source, "x.py", Config(select=("TST",), rule_paths=(tmp_path,), start_method=method)
        )
    ]
    assert severity(PREFETCH, "spawn") == ["error"]
    assert severity(PREFETCH, "fork") == ["warning"]
    forked = "import multiprocessing\nmultiprocessing.set_start_method('fork')\n" + PREFETCH
    assert severity(forked, "spawn") == ["warning"]
