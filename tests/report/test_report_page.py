"""The report page as a file: what it names, what it escapes, what it refuses, how big it gets."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from report_dataset import HOSTILE_KEY, HOSTILE_MESSAGE, LENGTH, OUT_OF_RANGE, PLANTED
from report_pages import parse_page
from report_schema import dataset_samples, write_index

import datalint
from datalint.cli import main

HERE = Path(__file__).parent

# the policy quarantines every planted kind but these two
REPORTED_ONLY = {"dtype_mismatch", "slow"}


def report(db: Path, out: Path, *extra: str) -> Path:
    assert main(["report", str(db), "-o", str(out), *extra]) == 0
    return out


@pytest.mark.slow
def test_the_table_names_every_flagged_sample_of_a_scan(scanned_db: Path, tmp_path: Path) -> None:
    page = parse_page(report(scanned_db, tmp_path / "r.html"))
    rows = {row["idx"]: row for row in page.table_rows()}
    assert set(rows) == set(PLANTED)
    for idx, kind in PLANTED.items():
        assert kind in rows[idx]["kinds"], (idx, rows[idx]["kinds"])
        assert rows[idx]["q"] == (kind not in REPORTED_ONLY), idx
    crash = next(i for i, k in PLANTED.items() if k == "crash")
    assert rows[crash]["status"] == "crash" and rows[crash]["message"].startswith("SIGSEGV: ")
    timeout = next(i for i, k in PLANTED.items() if k == "timeout")
    assert rows[timeout]["message"].startswith("Timeout: no result within 2 s; hung in ")
    assert "report_dataset.py" in (rows[timeout]["traceback"] or ""), "where it hung, on demand"
    # the first page is rendered into the HTML too, so it reads without JavaScript
    static_rows = [int(tr.attrs["data-idx"] or -1) for tr in page.find("tr") if "data-idx" in tr.attrs]
    assert static_rows == sorted(PLANTED)[:100]


@pytest.mark.slow
def test_header_charts_and_policy_of_a_scan(scanned_db: Path, tmp_path: Path) -> None:
    page = parse_page(report(scanned_db, tmp_path / "r.html"))
    assert "dataset scan of " in page.text and "report_dataset.py:make()" in page.text
    assert re.search(r"took \d+(\.\d+)? s", page.text)
    policy = page.text.split("Quarantined (left out", 1)[1].split("Counts are samples", 1)[0]
    quarantined_part, reported_part = policy.split("Reported only:")
    assert f"label_out_of_range {len(OUT_OF_RANGE)}" in quarantined_part and "crash 1" in quarantined_part
    assert "slow 1" in reported_part and "dtype_mismatch 1" in reported_part
    cards = {e.text.strip() for e in page.find("div", class_="label")}
    assert f"quarantined ({(len(PLANTED) - 2) / LENGTH:.2%})" in cards
    titles = [e.attrs["aria-label"] for e in page.find("svg")]
    assert titles == ["Samples per finding kind (red: quarantined)", "Time per sample", "Bytes per sample"]
    # the policy's limits for this run: slow above 0.1 x the 2 s timeout; oversized above 64 x the
    # median sample (a 768-byte image and an 8-byte label)
    limits = [e.text for e in page.find("text", class_="limit-label")]
    assert limits == ["slow above 200 ms", "oversized above 48.5 KiB"]
    assert page.find("rect", class_="bar over"), "samples past a limit are drawn in the alarm colour"


@pytest.mark.slow
def test_untrusted_strings_stay_text(scanned_db: Path, tmp_path: Path) -> None:
    out = report(scanned_db, tmp_path / "r.html")
    html = out.read_text()
    page = parse_page(out)
    # exactly the page's own two scripts, the table data and the code: nothing injected
    assert [(s.attrs.get("type"), s.attrs.get("id")) for s in page.scripts] == [
        ("application/json", "dl-data"),
        (None, None),
    ]
    assert not page.find("img") and not page.find("b"), "markup from the data must not become elements"
    assert all(not name.startswith("on") for e in page.elements for name in e.attrs)
    island = html.split('id="dl-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in island and ">" not in island
    error = next(i for i, k in PLANTED.items() if k == "error")
    row = next(row for row in page.table_rows() if row["idx"] == error)
    assert row["key"] == HOSTILE_KEY
    assert row["message"] == f"ValueError: {HOSTILE_MESSAGE}"
    assert row["traceback"].rstrip().endswith(f"ValueError: {HOSTILE_MESSAGE}")
    # the static first page shows the same strings, as text
    assert HOSTILE_KEY in page.text and HOSTILE_MESSAGE in page.text
    assert "&amp;amp;" in html, "a literal &amp; in a message is shown as typed, not decoded"


def test_the_page_fetches_nothing(schema_db: Path, tmp_path: Path) -> None:
    html = report(schema_db, tmp_path / "r.html").read_text()
    page = parse_page(tmp_path / "r.html")
    for element in page.elements:
        for name in ("src", "href"):
            value = element.attrs.get(name) or ""
            assert not value or value.startswith(("#", "data:")), f"<{element.tag} {name}={value!r}>"
    assert not re.search(r"url\(|@import", html)
    csp = page.find("meta", http_equiv="Content-Security-Policy")[0].attrs["content"] or ""
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp


def test_the_page_is_one_call_from_python(
    schema_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = datalint.write_report(str(schema_db))  # report.html here, default options
    assert result.path == Path("report.html") and result.bytes == (tmp_path / "report.html").stat().st_size
    capped = datalint.write_report(schema_db, "capped.html", datalint.ReportOptions(max_rows=1))
    assert capped.rows == 1 < capped.flagged


def test_durations_and_the_scan_time_from_the_index(schema_db: Path, tmp_path: Path) -> None:
    page = parse_page(report(schema_db, tmp_path / "r.html"))
    assert "took 42 s" in page.text  # started 10:00:00, finished 10:00:42
    times = {e.text for e in page.find("td", class_="num")}
    assert "2 s" in times and "38.1 MiB" in times  # the slow and oversized samples, formatted


def test_an_unfinished_scan_says_so(tmp_path: Path) -> None:
    db = write_index(
        tmp_path / "killed.db",
        run={"kind": "dataset", "spec": "mod:ds", "length": 50, "finished": None},
        samples=dataset_samples(20),
    )
    page = parse_page(report(db, tmp_path / "r.html"))
    assert "did not finish" in page.text
    assert "30 of 50 samples have no row yet" in page.text


def test_failed_samples_show_before_policy_has_run(tmp_path: Path) -> None:
    """A scan killed before the findings were derived still reports its failed samples."""
    samples = dataset_samples(10)
    samples[3].update(status="crash", error_type="SIGKILL", error_message="out of memory")
    run = {"kind": "dataset", "spec": "mod:ds", "length": 10}
    db = write_index(tmp_path / "raw.db", run=run, samples=samples)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE findings")
    rows = parse_page(report(db, tmp_path / "r.html")).table_rows()
    assert [(r["idx"], r["kinds"], r["q"]) for r in rows] == [(3, ["crash"], 1)]


def test_lint_findings_from_check_and_the_bench_table(schema_db: Path, tmp_path: Path) -> None:
    source = tmp_path / "data.py"
    source.write_text(
        "from torch.utils.data import DataLoader, Dataset\n\n\n"
        "class Items(Dataset):\n"
        "    def __init__(self):\n"
        "        self.transform = lambda x: x\n\n"
        "    def __len__(self):\n        return 4\n\n"
        "    def __getitem__(self, i):\n        return i\n\n\n"
        "loader = DataLoader(Items(), num_workers=0, prefetch_factor=2)\n"
    )
    lint = tmp_path / "lint.json"
    main(["check", str(source), "--format", "json", "--output-file", str(lint)])
    findings = json.loads(lint.read_text())
    assert findings, "the lint sample has findings"
    bench = HERE / "bench_output.json"  # saved output of `datalint bench --format json`
    page = parse_page(report(schema_db, tmp_path / "r.html", "--lint", str(lint), "--bench", str(bench)))
    for finding in findings:
        assert f"{finding['path']}:{finding['line']}:{finding['column']}" in page.text
        assert finding["message"] in page.text
    recommended = page.find("tr", class_="recommended")
    assert len(recommended) == 1 and recommended[0].text.startswith("012,761.2")  # 0 workers, samples/s
    assert "Recommended: batch_size=8, num_workers=0, prefetch_factor=null" in page.text


def test_lint_and_bench_files_with_fields_missing(schema_db: Path, tmp_path: Path) -> None:
    lint = tmp_path / "lint.json"
    lint.write_text(
        json.dumps({"findings": [{"code": "DL001", "path": "src/a.py", "message": "no line <here>"}]})
    )
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"runs": [{"num_workers": 2}, {"samples_per_s": 5.0}], "recommended": None}))
    page = parse_page(report(schema_db, tmp_path / "r.html", "--lint", str(lint), "--bench", str(bench)))
    assert "src/a.py::" in page.text and "no line <here>" in page.text
    assert "Recommended" not in page.text and not page.find("tr", class_="recommended")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "lint.json: the lint findings file is not JSON"),
        ('{"oops": 1}', "lint.json: expected a JSON list of findings"),
    ],
)
def test_a_bad_lint_file_is_refused_by_name(
    schema_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    lint = tmp_path / "lint.json"
    lint.write_text(content)
    assert main(["report", str(schema_db), "-o", str(tmp_path / "r.html"), "--lint", str(lint)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_files_that_are_not_an_index_are_refused_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.db").write_text("hello, not sqlite at all" * 100)
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.close()
    cases = {
        "missing.db": "no such index; run `datalint scan",
        "notes.db": "not a datalint index",
        "other.db": "not a datalint index (no table runs, samples)",
    }
    for name, message in cases.items():
        assert main(["report", str(tmp_path / name), "-o", str(tmp_path / "r.html")]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


@pytest.mark.slow
def test_the_page_stays_bounded_at_100k_samples(tmp_path: Path) -> None:
    n = 100_000
    samples = dataset_samples(n)
    findings = []
    frames = "  frame\n" * 1000
    for i in range(0, n, 4):  # 25k flagged samples; the first thousand with long, distinct tracebacks
        traceback = f"Traceback:\n{frames}OSError: {i}" if i < 4000 else "Traceback: OSError"
        message = f"image file is truncated ({i})"
        samples[i].update(status="error", error_type="OSError", error_message=message, traceback=traceback)
        findings.append({"idx": i, "kind": "error", "detail": "OSError", "quarantine": 1})
    run = {"kind": "dataset", "spec": "big:ds", "length": n}
    columns = ("idx", "key", "status", "duration", "nbytes", "error_type", "error_message", "traceback")
    db = write_index(tmp_path / "big.db", run=run, samples=samples, findings=findings, columns=columns)
    out = report(db, tmp_path / "r.html", "--max-rows", "5000")
    size = out.stat().st_size
    assert size < 6_000_000, f"{size:,} bytes"
    page = parse_page(out)
    rows = page.table_rows()
    assert len(rows) == 5000
    assert "The table holds 5,000 of 25,000 flagged samples" in page.text
    assert "tracebacks left out to keep the page small" in page.text
    assert rows[0]["traceback"].startswith("… (2,"), "a long traceback keeps its end, and says it was cut"


def test_datasette_metadata_labels_this_index(schema_db: Path, tmp_path: Path) -> None:
    meta = tmp_path / "meta.json"
    assert main(["report", str(schema_db), "--datasette-metadata", str(meta)]) == 0
    data = json.loads(meta.read_text())
    tables = data["databases"]["scan"]["tables"]
    assert set(tables) == {"runs", "samples", "findings"}
    assert tables["samples"]["columns"]["error_type"].startswith("Exception type")
    assert not (tmp_path / "report.html").exists() and not Path("report.html").exists()


@pytest.mark.slow
def test_the_first_page_is_bounded_in_bytes_with_100k_failures_of_3_kb_messages(tmp_path: Path) -> None:
    n = 100_000
    samples = dataset_samples(n)
    findings = []
    for i in range(n):  # every sample failed, each with its own 3 KB message in a 3-byte script
        message = f"sample {i}: " + "数据" * 500
        samples[i].update(status="error", error_type="ValueError", error_message=message)
        findings.append({"idx": i, "kind": "error", "detail": f"ValueError: {message}", "quarantine": 1})
    run = {"kind": "dataset", "spec": "big:ds", "length": n}
    columns = ("idx", "key", "status", "duration", "nbytes", "error_type", "error_message")
    db = write_index(tmp_path / "big.db", run=run, samples=samples, findings=findings, columns=columns)
    out = report(db, tmp_path / "r.html")
    size = out.stat().st_size
    assert size < 4_000_000, f"{size:,} bytes"  # it was 16.8 MB: a budget counted in characters
    siblings = sorted(tmp_path.glob("r.rows-*.html"))
    assert siblings and all(page.stat().st_size < 10_000_000 for page in siblings)
    page = parse_page(out)
    rows = page.table_rows()
    assert 0 < len(rows) < 20_000
    assert all(len(row["message"]) <= 400 for row in rows)
    assert 'href="r.rows-2.html"' in out.read_text(encoding="utf-8")  # the rest, a click away
