"""The finding kinds are one registry (datalint/index/kinds.py): every place that names kinds derives
from it, and no module of datalint keeps a list of its own."""

from __future__ import annotations

import ast
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from datalint.errors import UsageError
from datalint.index import kinds, store
from datalint.index.kinds import KINDS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "scan"))
from scan_support import spec  # noqa: E402

PARAMETERS = {"largest", "slowest", "signatures", "num_classes"}  # what the policy supplies


@pytest.mark.parametrize("name", list(KINDS))
def test_every_kind_has_every_field(name: str) -> None:
    kind = KINDS[name]
    assert kind.name == name and re.fullmatch(r"[a-z][a-z_]*", name)
    assert kind.family in kinds.FAMILIES
    assert isinstance(kind.severity, int) and 0 < kind.severity <= kinds.INFORMATION
    assert kind.judged in ("sample", "population")
    assert isinstance(kind.quarantined, bool) and isinstance(kind.file_scans, bool)
    assert kind.meaning and kind.report_label and kinds.label(name) == kind.report_label
    assert not kind.said_by or kind.said_by in KINDS
    for clause in kind.candidates:
        assert set(re.findall(r":([a-z_]+)", clause)) <= PARAMETERS, clause


def test_the_severity_order_is_the_one_the_list_has_always_had() -> None:
    ranked = sorted(
        (kind.severity, name) for name, kind in KINDS.items() if kind.severity != kinds.INFORMATION
    )
    assert len({rank for rank, _ in ranked}) == len(ranked)  # no two ranked kinds tie
    assert [name for _, name in ranked][:9] == [
        "crash", "timeout", "error", "corrupt", "unreadable", "decompression_bomb", "empty", "unsupported",
        "uncollatable",
    ]  # fmt: skip
    assert kinds.severity_rank("reported_by_a_source") == kinds.INFORMATION


def test_the_cli_takes_and_names_the_registry_s_kinds() -> None:
    from datalint.commands.scan import KIND_HELP
    from datalint.scan.policy import parse_kinds

    assert parse_kinds("all") == tuple(KINDS) and parse_kinds(None) == kinds.DEFAULT_KINDS
    assert all(name in KIND_HELP for name in kinds.DEFAULT_KINDS)
    with pytest.raises(UsageError) as raised:
        parse_kinds("bogus")
    assert str(raised.value).endswith(f"known kinds: all, default, {', '.join(KINDS)}")


def test_the_pre_filter_is_the_registry_s_clauses() -> None:
    values: dict[str, Any] = {"largest": 10.0, "slowest": 2.0, "signatures": ["s"], "num_classes": 5}
    where, parameters = kinds.candidate_where(values)
    assert where.removeprefix("WHERE ").split(" OR ") == [
        re.sub(r":[a-z_]+", "?", clause) for clause in kinds.candidate_clauses()
    ]
    assert sorted(map(str, parameters)) == ["10.0", "2.0", "5", "s"]
    # No limit, no listed signature: those clauses are left out, not left open.
    where, parameters = kinds.candidate_where(dict.fromkeys(PARAMETERS))
    assert ":" not in where and "?" not in where and parameters == []


def per_sample_pass(db: Any, options: Any, *, filtered: bool) -> tuple[set[str], list[Any]]:
    """The kinds the per-sample pass finds over every row, and its findings with or without the filter."""
    from datalint.scan import policy

    peers = policy.population(db)
    judge = policy._SignatureJudge(peers, options)
    where, parameters = policy._candidate_filter(peers, judge, options, db) if filtered else ("", [])
    found: set[str] = set()
    findings = []
    for row in store.iter_samples(
        db, policy.SAMPLE_PASS_COLUMNS, where, raw=("signature",), parameters=parameters
    ):
        for kind, detail in policy.sample_findings(row, peers, judge, options):
            found.add(kind)
            findings.append((row["idx"], kind, detail))
    return found, findings


@pytest.mark.parametrize(
    ("target", "options"),
    [
        ("kinds.py:mixed()", {"label": ["label"], "num_classes": 5}),
        ("kinds.py:tensors()", {}),
        ("kinds.py:arrays()", {}),
        ("faults.py:make(length=20, slow=[3], leak_fd=[7], error=[9])", {"timeout": 2.0}),
    ],
)
def test_the_pre_filter_hides_no_finding_of_the_per_sample_pass(
    tmp_path: Path, target: str, options: Any
) -> None:
    """A kind the per-sample pass finds has a candidate clause, and the filter keeps every row it is in."""
    import datalint
    from datalint.scan import policy

    summary = datalint.scan(spec(target), db=tmp_path / "k.db", workers=1, **options)
    db = store.open_index(summary.index_path, create=False)
    try:
        run = store.latest_run(db.conn)
        policy_options = policy.PolicyOptions.from_dict(run.options["policy"])
        found, everything = per_sample_pass(db, policy_options, filtered=False)
        assert found, "the fixture gives the per-sample pass nothing to find"
        assert all(KINDS[kind].candidates for kind in found), found
        assert per_sample_pass(db, policy_options, filtered=True)[1] == everything
    finally:
        db.close()


def test_the_list_s_sql_orders_kinds_as_python_does() -> None:
    from datalint.scan.policy import Finding, quarantine_entries

    names = list(KINDS)
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE findings (idx INTEGER, kind TEXT)")
    connection.executemany(
        "INSERT INTO findings VALUES (0, ?)", [(name,) for name in sorted(names, reverse=True)]
    )
    in_sql = [
        row[0]
        for row in connection.execute(f"SELECT kind FROM findings ORDER BY {kinds.severity_sql()}, kind")
    ]
    (entry,) = quarantine_entries([Finding(0, name, name) for name in names], {}, names)
    assert in_sql == list(entry.kinds)


def test_the_report_s_words_and_hidden_kinds_come_from_the_registry() -> None:
    from datalint.report import render, thumbs

    assert (
        "DATASET_ONLY_KINDS" in vars(render)
        and vars(render)["DATASET_ONLY_KINDS"] is kinds.DATASET_ONLY_KINDS
    )
    assert vars(thumbs)["UNDECODABLE_KINDS"] is kinds.UNDECODABLE_KINDS
    assert kinds.label("grayscale").startswith("visually grey")


def test_the_docs_table_is_the_registry_s() -> None:
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    table = text.split("<!-- kinds:start -->", 1)[1].split("<!-- kinds:end -->", 1)[0]
    assert table == "\n" + kinds.markdown_table(), "run `python scripts/docs_check.py --write`"


# Tables keyed by kind that hold a probe's own data (a limit's range, the score a kind reads), each
# checked below against the registry: they are not lists of kinds.
KIND_DATA = {("datalint/scan/policy.py", "THRESHOLDS"), ("datalint/scan/quality.py", "SCORED_KINDS")}
STATUSES = {"ok", "error", "crash", "timeout"}  # sample statuses, which three kinds are named after


def listed_kinds(node: ast.AST) -> set[str]:
    """The kind names a literal tuple, list, set or dict (its keys), or an SQL text, spells out."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        items: list[Any] = node.elts
    elif isinstance(node, ast.Dict):
        items = [key for key in node.keys if key is not None]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        return set(re.findall(r"'([a-z_]+)'", node.value)) & set(KINDS)
    else:
        return set()
    return {item.value for item in items if isinstance(item, ast.Constant) and item.value in KINDS}


def test_no_module_keeps_a_list_of_kinds_of_its_own() -> None:
    found = []
    for path in sorted((ROOT / "datalint").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative == "datalint/index/kinds.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed = {
            id(statement.value)
            for statement in ast.walk(tree)
            if isinstance(statement, ast.AnnAssign | ast.Assign)
            and any(
                (relative, getattr(target, "id", "")) in KIND_DATA
                for target in (statement.targets if isinstance(statement, ast.Assign) else [statement.target])
            )
        }
        for node in ast.walk(tree):
            names = listed_kinds(node) - STATUSES
            if len(names) >= 3 and id(node) not in allowed:
                found.append(f"{relative}:{getattr(node, 'lineno', '?')}: {sorted(names)}")
    assert not found, "kinds listed outside datalint/index/kinds.py (derive them from it):\n" + "\n".join(
        found
    )


def test_the_tables_keyed_by_kind_name_registry_kinds() -> None:
    from datalint.scan import policy, quality

    assert set(policy.THRESHOLDS) - {"outlier_mads"} <= set(KINDS)
    assert set(quality.SCORED_KINDS) <= set(KINDS)
