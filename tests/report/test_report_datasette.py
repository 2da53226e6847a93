"""`datasette DB --metadata meta.json` serves a scan index and answers JSON queries on loopback."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from report_dataset import PLANTED

from datalint.cli import main

pytestmark = pytest.mark.slow

DATASETTE = shutil.which("datasette", path=str(Path(sys.executable).parent)) or shutil.which("datasette")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.load(reply)


def wait_until_up(base: str, server: subprocess.Popen[bytes], deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"datasette exited early: {server.stderr.read() if server.stderr else ''!r}")
        try:
            get_json(f"{base}/-/versions.json")
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise AssertionError(f"datasette did not answer within {deadline_s:.0f} s")


@pytest.mark.skipif(DATASETTE is None, reason="datasette is not installed (it is in the dev extra)")
def test_datasette_serves_the_index_with_labels_and_answers_a_query(scanned_db: Path, tmp_path: Path) -> None:
    meta = tmp_path / "meta.json"
    assert main(["report", str(scanned_db), "--datasette-metadata", str(meta)]) == 0
    port = free_port()
    server = subprocess.Popen(
        [
            str(DATASETTE),
            "serve",
            str(scanned_db),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "--metadata",
            str(meta),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base, server)
        sql = "select kind, count(*) as n from findings group by kind order by kind"
        rows = get_json(f"{base}/scan.json?" + urllib.parse.urlencode({"sql": sql, "_shape": "array"}))
        with sqlite3.connect(scanned_db) as conn:
            expected = [{"kind": kind, "n": n} for kind, n in conn.execute(sql)]
        assert rows == expected and {"kind": "crash", "n": 1} in rows
        failed = get_json(f"{base}/scan/samples.json?status__not=ok&_shape=array&_col=status")
        statuses = {r["idx"]: r["status"] for r in failed}
        assert statuses == {i: kind for i, kind in PLANTED.items() if kind in ("error", "crash", "timeout")}
        canned = get_json(f"{base}/scan/quarantined.json?_shape=array")  # a canned query from the metadata
        quarantined = sorted(i for i, kind in PLANTED.items() if kind not in ("dtype_mismatch", "slow"))
        assert sorted(r["idx"] for r in canned) == quarantined
        served = get_json(f"{base}/-/metadata.json")
        assert served["databases"]["scan"]["tables"]["findings"]["columns"]["quarantine"].startswith("1 when")
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert server.returncode is not None
    with pytest.raises(urllib.error.URLError):
        get_json(f"{base}/-/versions.json")


DAMAGE = {"corrupt", "empty", "decompression_bomb", "unreadable"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "report.md"


def documented_sqlite_utils_queries() -> list[str]:
    """The SQL of every `sqlite-utils query DB "..."` example in docs/report.md, as a user copies it."""
    text = DOCS.read_text(encoding="utf-8").replace("\\\n", " ")
    queries = []
    for line in text.splitlines():
        if "sqlite-utils query" in line and '"' in line:
            queries.append(" ".join(line.split('"')[1].split()))
    return queries


@pytest.mark.skipif(DATASETTE is None, reason="datasette is not installed (it is in the dev extra)")
def test_the_canned_and_documented_queries_list_damaged_files_with_the_reason(
    image_scan: tuple[Path, list[Any], Path], tmp_path: Path
) -> None:
    _, cases, db = image_scan
    damaged = {case.name for case in cases if set(case.kinds) & DAMAGE}
    meta = tmp_path / "meta.json"
    assert main(["report", str(db), "--datasette-metadata", str(meta)]) == 0
    port = free_port()
    server = subprocess.Popen(
        [str(DATASETTE), "serve", str(db), "-h", "127.0.0.1", "-p", str(port), "--metadata", str(meta)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}/{db.stem}"
    try:
        wait_until_up(f"http://127.0.0.1:{port}", server)
        not_good = get_json(f"{base}/not_good.json?_shape=array")
        files = get_json(f"{base}/damaged_files.json?_shape=array")
        quarantined = get_json(f"{base}/quarantined.json?_shape=array")
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert damaged <= {row["key"] for row in not_good}
    assert {row["key"] for row in files} == damaged
    truncated = next(row for row in files if row["key"] == "bad/truncated.jpg")
    assert "truncated" in truncated["reason"].lower()
    assert all(row["reason"] for row in quarantined)
    documented = [sql for sql in documented_sqlite_utils_queries() if "status" in sql]
    assert documented, "docs/report.md shows a query for the samples that are not good"
    with sqlite3.connect(db) as conn:
        for sql in documented:
            keys = {row[1] for row in conn.execute(sql)}
            assert damaged <= keys, f"the documented query misses damaged files: {sql}"
