"""Property-based attacks on every reader: no input may end in anything but a value or a named error.

`DatalintError` (and its subclasses: `QuarantineFormatError`, `ConfigError`, `SpecError`,
`IndexFileError`) is the named error the CLI prints with exit 2; anything else would reach the
user as "internal error" or a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
import unicodedata
from pathlib import Path
from typing import Any

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datalint.config import config_from_table, load_config
from datalint.errors import DatalintError
from datalint.index import store
from datalint.lint.engine import lint_source
from datalint.report.index import read_index
from datalint.scan.api import derive_quarantine
from datalint.scan.specs import parse_spec
from datalint.text import is_utf8, shown_name
from datalint.training.quarantine import Quarantine, load_quarantine, parse_quarantine

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


def _expect_value_or_named_error(call: Any) -> Any:
    try:
        return call()
    except DatalintError:
        return None


# --- load_quarantine ------------------------------------------------------------------------------

entries = st.fixed_dictionaries(
    {"index": st.integers(-2, 50) | json_values},
    optional={"key": st.text(max_size=10) | json_values, "kinds": json_values, "detail": json_values},
)
lists = st.fixed_dictionaries(
    {
        "format": st.just("datalint-quarantine/1") | json_values,
        "samples": st.lists(entries, max_size=6) | json_values,
    },
    optional={
        "length": st.integers(-1, 60) | json_values,
        "fingerprint": json_values,
        "dataset": json_values,
    },
)


@FUZZ
@given(document=lists | json_values)
def test_any_quarantine_document_is_a_list_or_a_named_error(document: Any) -> None:
    result = _expect_value_or_named_error(lambda: parse_quarantine(document, source="fuzz.json"))
    assert result is None or isinstance(result, Quarantine)


@FUZZ
@given(data=st.binary(max_size=200) | lists.map(lambda d: json.dumps(d).encode()))
def test_any_quarantine_file_is_a_list_or_a_named_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "quarantine.json"
        path.write_bytes(data)
        result = _expect_value_or_named_error(lambda: load_quarantine(path))
    assert result is None or isinstance(result, Quarantine)


# --- configuration -----------------------------------------------------------------------------

config_keys = st.sampled_from(
    ["select", "extend-select", "ignore", "exclude", "per-file-ignores", "rules", "start-method", "unknown"]
)


@FUZZ
@given(table=st.dictionaries(config_keys | st.text(max_size=8), json_values, max_size=5) | json_values)
def test_any_datalint_table_is_a_config_or_a_named_error(table: Any) -> None:
    _expect_value_or_named_error(lambda: config_from_table(table, Path("pyproject.toml")))


@FUZZ
@given(text=st.text(max_size=200), raw=st.binary(max_size=60))
def test_any_pyproject_is_a_config_or_a_named_error(text: str, raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for content in (
            ("[tool.datalint]\n" + text).encode("utf-8", "surrogatepass"),
            b"[tool.datalint]\n" + raw,
        ):
            path = Path(folder) / "pyproject.toml"
            path.write_bytes(content)
            _expect_value_or_named_error(lambda path=path: load_config(path))


# --- dataset specs -------------------------------------------------------------------------------


@FUZZ
@given(
    text=st.text(max_size=60)
    | st.builds(
        "{}:{}({})".format,
        st.text(max_size=10),
        st.text(max_size=10),
        st.text(alphabet="()[]{},=:'\"0123456789abc .*-+", max_size=25),
    )
)
def test_any_spec_text_parses_or_is_a_named_error(text: str) -> None:
    _expect_value_or_named_error(lambda: parse_spec(text))


# --- the index reader ------------------------------------------------------------------------

cell = (
    st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=30) | st.binary(max_size=8)
)
json_cell = cell | json_values.map(json.dumps) | st.sampled_from(['{"type": "list", ', "[", "{}", "null"])
sample_rows = st.lists(
    st.fixed_dictionaries(
        {
            "idx": st.integers(-3, 40),
            "status": st.sampled_from(["ok", "error", "crash", "timeout"]) | st.text(max_size=5),
            "key": cell,
            "duration": cell,
            "nbytes": cell,
            "signature": json_cell,
            "info": json_cell,
            "labels": json_cell,
            "reported": json_cell,
            "error_message": cell,
        }
    ),
    max_size=12,
)


@settings(FUZZ, max_examples=60)
@given(
    rows=sample_rows, options=json_values.map(json.dumps) | st.just("{"), kinds=st.sampled_from([None, "all"])
)
def test_any_index_content_gives_a_list_or_a_named_error(
    rows: list[dict[str, Any]], options: str, kinds: Any
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "index.db"
        with contextlib.closing(store.open_index(path)) as db:
            db.conn.execute(
                "INSERT INTO runs (kind, spec, length, options) VALUES ('dataset', 'x:ds', 40, ?)", [options]
            )
            for row in rows:
                names = ", ".join(row)
                marks = ", ".join("?" for _ in row)
                db.conn.execute(
                    f"INSERT OR REPLACE INTO samples ({names}) VALUES ({marks})", list(row.values())
                )
            db.conn.commit()
        document = _expect_value_or_named_error(lambda: derive_quarantine(path, kinds=kinds))
        assert document is None or isinstance(document["samples"], list)
        _expect_value_or_named_error(lambda: load_quarantine(path))
        _expect_value_or_named_error(lambda: read_index(path, max_rows=50, max_good_images=4))


def test_a_file_that_is_no_sqlite_is_a_named_error(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    assert _expect_value_or_named_error(lambda: derive_quarantine(path)) is None
    with sqlite3.connect(tmp_path / "other.db") as other:
        other.execute("CREATE TABLE t (x)")
    assert _expect_value_or_named_error(lambda: derive_quarantine(tmp_path / "other.db")) is None


# --- check -------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")  # escapes in odd strings
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(source=hypothesmith.from_grammar())
def test_check_survives_any_python_the_grammar_allows(source: str) -> None:
    findings = lint_source(source, "fuzz.py")
    assert all(f.path == "fuzz.py" for f in findings)


@FUZZ
@given(
    source=st.binary(max_size=300) | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
def test_check_survives_any_bytes(source: bytes) -> None:
    findings = lint_source(source, "fuzz.py")
    assert all(f.line >= 1 for f in findings)


# --- what is printed ---------------------------------------------------------------------------

names = st.text(max_size=20) | st.binary(max_size=20).map(os.fsdecode)


@FUZZ
@given(first=names, second=names)
def test_a_shown_name_is_printable_and_tells_names_apart(first: str, second: str) -> None:
    shown = shown_name(first)
    shown.encode("utf-8")  # a terminal (and a UTF-8 file) can take it
    assert not any(unicodedata.category(char) in ("Cc", "Cs") for char in shown)
    assert "\u202e" not in shown and "\u2028" not in shown
    if first != second:
        assert shown != shown_name(second)
    if is_utf8(first):
        assert store.read_key(store.stored_key(first)) == first
    elif first.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape") == first:
        assert store.read_key(store.stored_key(first)) == first, "a file name's bytes come back exactly"
