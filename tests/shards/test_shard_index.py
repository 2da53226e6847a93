"""`--shard-index`: per-shard index files written by the workers, merged, resumed shard by shard.

Real tar shards and Parquet files, real forked writers (and a real dask LocalCluster), real SQLite
files; the reference is always a single-writer scan (`--shard-index off`) of the same files.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from datalint.scan import dask_backend, policy, shard_writers, summaries, summary_findings
from datalint.scan.sources import SourceDescription
from datalint.scan.webdataset import webdataset_description
from tests.scan.scan_support import rows, run_cli, start_cli
from tests.shards.shard_support import good_sample, jpeg, write_faulty_shards, write_shard

# What a measurement may change between two scans of the same bytes: the rest must be equal.
MEASURED = (  # the position first, as a list gives it (`position_of`: datalint.index.positions)
    "position_of(idx), key, status, nbytes, signature, non_finite, labels, info, reported, error_type, "
    "error_message"
)


def webdataset_folder(folder: Path, extra_shards: int = 3, per_shard: int = 5, side: int = 48) -> Path:
    """The planted faults of `write_faulty_shards` (a truncated shard among them) plus good shards."""
    folder.mkdir()
    write_faulty_shards(folder)
    for shard in range(3, 3 + extra_shards):
        samples = [good_sample(f"s{n:04d}", 100 * shard + n) for n in range(per_shard)]
        for sample in samples:
            sample["jpg"] = jpeg(int(sample["cls"]), side)
        write_shard(folder / f"train-{shard:06d}.tar", samples)
    return folder


def scan(pattern: str, db: Path, *flags: str, source: str = "--webdataset") -> dict[str, Any]:
    code, out, err = run_cli("scan", source, pattern, "--db", str(db), "--format", "json", *flags)
    assert code in (0, 1), err
    return dict(json.loads(out))


def measured(db: Path) -> list[tuple[Any, ...]]:
    return rows(db, f"SELECT {MEASURED} FROM samples ORDER BY position_of(idx)")


def quarantine(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return list(json.loads(Path(summary["quarantine"]).read_text())["samples"])


def assert_same_scan(db: Path, summary: dict[str, Any], single: Path, single_summary: dict[str, Any]) -> None:
    assert measured(db) == measured(single)
    findings = "SELECT position_of(idx) AS position, kind, detail, quarantine FROM findings ORDER BY 1, 2"
    assert rows(db, findings) == rows(single, findings)
    assert quarantine(summary) == quarantine(single_summary)
    for name in ("outcomes", "findings", "quarantined", "length"):
        assert summary[name] == single_summary[name], name


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, dict[str, Any]]:
    """The shards and their single-writer scan: (pattern, index, summary)."""
    folder = webdataset_folder(tmp_path_factory.mktemp("faulty") / "shards")
    pattern = str(folder / "train-*.tar")
    single = folder.parent / "single.db"
    summary = scan(pattern, single, "--shard-index", "off", "--workers", "2")
    assert summary["quarantined"] == 5
    assert not shard_writers.folder_of(single).exists()  # off: no shard file, today's single writer
    return pattern, single, summary


def test_shard_files_merge_into_the_index_one_writer_makes(
    faulty: tuple[str, Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pattern, single, single_summary = faulty
    db = tmp_path / "sharded.db"
    made = merges(monkeypatch)
    sources = populations(monkeypatch)
    summary = scan(pattern, db, "--shard-index", "on", "--workers", "2")
    assert made == [(SHARDS, summary["length"])]  # every row came through a shard file, one per shard
    assert sources == ["summaries"]  # the findings were judged against the files' merged summaries
    assert_same_scan(db, summary, single, single_summary)
    assert summary["scanned"] == single_summary["scanned"] == summary["length"]
    assert not shard_writers.folder_of(db).exists()  # merged, then removed
    indexes = {name for (name,) in rows(db, "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"idx_samples_status", "idx_samples_key", "idx_findings_kind"} <= indexes
    # Each shard's rows were measured by one process: one measuring child per shard writer.
    workers_per_shard = rows(
        db, "SELECT count(DISTINCT worker) FROM samples GROUP BY substr(key, 1, instr(key || '/', '/'))"
    )
    assert {count for (count,) in workers_per_shard} == {1}


def test_below_the_auto_threshold_the_scanner_stays_the_single_writer(
    faulty: tuple[str, Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    description = webdataset_description(faulty[0])
    assert not shard_writers.wanted("auto", description, 2, samples=31, shards=8)
    assert shard_writers.wanted("auto", description, 2, samples=shard_writers.AUTO_FROM_SAMPLES, shards=8)
    assert not shard_writers.wanted("auto", description, 2, samples=10**9, shards=1)
    assert not shard_writers.wanted("on", description, 0, samples=10**9, shards=8)  # --workers 0
    dataset = SourceDescription.make("dataset", "mymod:ds")
    assert not shard_writers.wanted("auto", dataset, 2, samples=10**9, shards=0)
    db = tmp_path / "auto.db"
    made = merges(monkeypatch)
    scan(faulty[0], db, "--workers", "2")
    assert made == []
    assert measured(db) == measured(faulty[1])
    assert not shard_writers.folder_of(db).exists()


def test_shard_index_on_without_shards_or_workers_is_a_usage_error(
    faulty: tuple[str, Path, dict[str, Any]], tmp_path: Path
) -> None:
    images = tmp_path / "images"
    images.mkdir()
    (images / "a.jpg").write_bytes(jpeg(1))
    code, _, err = run_cli(
        "scan", "--images", str(images), "--shard-index", "on", "--db", str(tmp_path / "i.db")
    )
    assert code == 2 and "has no shards" in err, err
    code, _, err = run_cli(
        "scan",
        "--webdataset",
        faulty[0],
        "--shard-index",
        "on",
        "--workers",
        "0",
        "--db",
        str(tmp_path / "w.db"),
    )
    assert code == 2 and "--workers 0" in err, err
    assert not (tmp_path / "i.db").exists() and not (tmp_path / "w.db").exists()  # refused before any work


SHARDS = 6  # in `faulty`: three shards of planted faults, three good ones


def merges(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(files, samples) of each merge the scan makes of its shard files, recorded as it makes them."""
    made: list[tuple[int, int]] = []
    merge = shard_writers.merge_finished

    def recorded(*args: Any, **kwargs: Any) -> shard_writers.MergedFiles:
        result = merge(*args, **kwargs)
        made.append((result.files, result.samples))
        return result

    monkeypatch.setattr(shard_writers, "merge_finished", recorded)
    return made


def populations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Where each scan's population came from ("summaries": the shard files' merged summaries;
    "index": a pass over the index), recorded as it is built."""
    made: list[str] = []
    from_summaries, from_index = summaries.population, policy.population

    def by_summaries(*args: Any, **kwargs: Any) -> policy.Population:
        result = from_summaries(*args, **kwargs)  # a SummaryMismatch is not a population built
        made.append("summaries")
        return result

    def by_index(*args: Any, **kwargs: Any) -> policy.Population:
        made.append("index")
        return from_index(*args, **kwargs)

    monkeypatch.setattr(summaries, "population", by_summaries)
    monkeypatch.setattr(policy, "population", by_index)
    return made


def shard_files(folder: Path) -> tuple[list[str], list[str]]:
    """(finished shard files, half-written ones) in a shard folder, by name."""
    names = sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []
    return [n for n in names if n.endswith(".db") and not n.startswith(".")], [
        n for n in names if n.endswith(".part")
    ]


def index_range(name: str) -> range:
    first, last = name.lstrip(".").split(".db")[0].split("-")
    return range(int(first), int(last) + 1)


@pytest.fixture(scope="module")
def slow_shards(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Shards of larger images, so that each shard's writer works long enough to be caught mid-file."""
    folder = webdataset_folder(
        tmp_path_factory.mktemp("slow") / "shards", extra_shards=9, per_shard=8, side=640
    )
    return str(folder / "train-*.tar")


def stop_mid_scan(pattern: str, db: Path, signum: int) -> int:
    """Start a sharded scan, send the scanner `signum` once 2 shard files are finished and another is
    half-written; returns its exit status."""
    child = start_cli(
        "scan", "--webdataset", pattern, "--db", str(db), "--shard-index", "on", "--workers", "2"
    )
    deadline = time.monotonic() + 120
    try:
        while True:
            finished, parts = shard_files(shard_writers.folder_of(db))
            if len(finished) >= 2 and parts:
                os.kill(child.pid, signum)  # the scanner only: its writers are its to stop, or die with it
                break
            assert child.poll() is None, f"the scan ended before it could be stopped: {child.communicate()}"
            assert time.monotonic() < deadline, "no shard file appeared"
            time.sleep(0.005)
        child.communicate(timeout=60)
    finally:
        child.kill()
        child.communicate()
    return child.returncode


@pytest.mark.slow
def test_a_killed_sharded_scan_resumes_shard_by_shard(
    slow_shards: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pattern = slow_shards
    db = tmp_path / "killed.db"
    shards = shard_writers.folder_of(db)
    assert stop_mid_scan(pattern, db, signal.SIGKILL) == -signal.SIGKILL
    time.sleep(0.5)  # the writers and their measuring children leave with their parent
    finished, parts = shard_files(shards)
    assert finished and parts, (finished, parts)
    kept = {index for name in finished for index in index_range(name)}
    cut = {index for name in parts for index in index_range(name)} - kept

    sources = populations(monkeypatch)
    summary = scan(pattern, db, "--shard-index", "on", "--workers", "2")
    # The earlier run's files (summaries read from them) and this run's: one population, no index pass.
    assert sources == ["summaries"]
    assert not shards.exists()
    assert f"from {len(finished)} shard file(s) an interrupted scan had finished" in " ".join(
        summary["notes"]
    )
    runs = dict(rows(db, "SELECT idx, run_id FROM samples"))
    first_run, resumed_run = min(runs.values()), max(runs.values())
    assert first_run < resumed_run
    assert {index for index, run in runs.items() if run == first_run} >= kept  # not measured again
    assert all(runs[index] == resumed_run for index in cut)  # the half-written file's shard: measured again
    assert summary["scanned"] == sum(1 for run in runs.values() if run == resumed_run)
    # Nothing lost, nothing twice: the same rows, findings and list as one uninterrupted single writer.
    single = tmp_path / "single.db"
    single_summary = scan(pattern, single, "--shard-index", "off", "--workers", "2")
    assert_same_scan(db, summary, single, single_summary)
    assert len(runs) == summary["length"] == len({key for (key,) in rows(db, "SELECT key FROM samples")})


@pytest.mark.slow
def test_the_dask_backend_writes_shard_files_on_its_workers(
    faulty: tuple[str, Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed")
    pattern, single, single_summary = faulty
    db = tmp_path / "dask.db"
    made = merges(monkeypatch)
    sources = populations(monkeypatch)
    reduced: list[shard_writers.FilesSummary | None] = []
    reduce = dask_backend.reduce_summaries
    monkeypatch.setattr(
        dask_backend, "reduce_summaries", lambda *args: reduced.append(reduce(*args)) or reduced[-1]
    )
    summary = scan(pattern, db, "--shard-index", "on", "--backend", "dask", "--workers", "2")
    assert made == [(SHARDS, summary["length"])]
    # The summaries were merged on the cluster (a tree reduce over 6 files), and the findings come from that.
    assert len(reduced) == 1 and reduced[0] is not None and len(reduced[0].paths) == SHARDS
    assert reduced[0].summary.samples == summary["length"] and sources == ["summaries"]
    assert_same_scan(db, summary, single, single_summary)
    assert not shard_writers.folder_of(db).exists()


def test_parquet_files_are_shards_too(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from tests.shards.test_parquet_scan import corrupt_last_row_group, write_part

    good = [jpeg(n) for n in range(8)]
    broken = list(good)
    broken[3] = good[3][:100]
    write_part(tmp_path / "part-0.parquet", good, [f"a{n}" for n in range(8)])
    write_part(tmp_path / "part-1.parquet", broken, [f"b{n}" for n in range(8)])
    corrupt_last_row_group(write_part(tmp_path / "part-2.parquet", good, [f"c{n}" for n in range(8)]))
    pattern = str(tmp_path / "part-*.parquet")
    single = tmp_path / "single.db"
    single_summary = scan(pattern, single, "--shard-index", "off", "--workers", "2", source="--parquet")
    db = tmp_path / "sharded.db"
    summary = scan(pattern, db, "--shard-index", "on", "--workers", "2", source="--parquet")
    assert summary["quarantined"] == 5
    assert_same_scan(db, summary, single, single_summary)


def test_recovery_merges_finished_files_and_drops_half_written_and_damaged_ones(
    faulty: tuple[str, Path, dict[str, Any]], tmp_path: Path
) -> None:
    from datalint.scan.runner import RunnerOptions

    description = webdataset_description(faulty[0])
    db = tmp_path / "index.db"
    folder = shard_writers.folder_of(db)
    folder.mkdir()
    # Two shards of the real source, each written by the real writer (the local engine, one child).
    first = shard_writers.write_shard(description, range(0, 4), RunnerOptions(workers=1), folder, 7)
    second = shard_writers.write_shard(description, range(4, 8), RunnerOptions(workers=1), folder, 7)
    assert (first.samples, first.outcomes) == (4, {"ok": 4})
    assert second.outcomes == {"ok": 1, "damaged": 3}  # train-000001.tar: a cut JPEG, bad JSON, bad cls
    for done in (first, second):  # the summary each writer counted as it wrote is its file's
        with contextlib.closing(sqlite3.connect(done.path)) as connection:
            assert summaries.read_summary(connection) == summaries.summarize(connection)
            assert summaries.summarize(connection).samples == 4
    whole = Path(second.path).read_bytes()
    Path(second.path).write_bytes(whole[: len(whole) // 3])  # finished, then damaged on disk
    (folder / shard_writers.part_name(range(8, 12), 12345)).write_bytes(whole[:4096])  # a writer killed
    recovered = shard_writers.recover(db, rescan=False)
    assert (recovered.files, recovered.samples) == (1, 4)
    assert not folder.exists()
    assert rows(db, "SELECT idx, run_id FROM samples ORDER BY idx") == [(n, 7) for n in range(4)]
    assert measured(db) == measured(faulty[1])[:4]


def test_a_row_the_training_guard_wrote_is_replaced_by_the_shard_files_row(
    faulty: tuple[str, Path, dict[str, Any]], tmp_path: Path
) -> None:
    from datalint.index import store

    db = tmp_path / "guarded.db"
    index = store.open_index(db)
    guard = store.start_run(
        index, kind="guard", spec="train", length=None, fingerprint=None, options={}, environment={}
    )
    store.write_samples(
        index, [store.sample_values({"idx": 5, "key": "k", "status": "error", "run_id": guard})]
    )
    index.conn.close()
    summary = scan(faulty[0], db, "--shard-index", "on", "--workers", "2")
    assert measured(db) == measured(faulty[1])  # measured like every other sample, not refused as a duplicate
    assert summary["scanned"] == summary["length"]


@pytest.mark.slow
def test_a_terminated_sharded_scan_merges_what_its_writers_finished(
    slow_shards: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "terminated.db"
    assert stop_mid_scan(slow_shards, db, signal.SIGTERM) != 0
    assert not shard_writers.folder_of(db).exists()  # finished files merged, half-written ones dropped
    kept = rows(db, "SELECT idx FROM samples ORDER BY idx")
    assert len(kept) >= 2 * 4  # at least the two finished shards (4 samples in the smallest)
    single = tmp_path / "single.db"
    single_summary = scan(slow_shards, single, "--shard-index", "off", "--workers", "2")
    everything = {row[0]: row for row in measured(single)}
    assert measured(db) == [everything[index] for (index,) in kept]  # whole rows, as measured
    # The index keeps the summary of what was merged, covering exactly its rows ...
    with contextlib.closing(sqlite3.connect(db)) as connection:
        held = summaries.read_summary(connection)
        assert held is not None and summaries.coverage_of(connection) == (held.samples, held.coverage)
    # ... so the resumed scan judges from summaries alone, with the findings of one uninterrupted scan.
    sources = populations(monkeypatch)
    resumed = scan(slow_shards, db, "--shard-index", "on", "--workers", "2")
    assert sources == ["summaries"]
    assert_same_scan(db, resumed, single, single_summary)


def test_datalint_quarantine_judges_the_parts_in_the_workers_it_is_given(
    faulty: tuple[str, Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`datalint quarantine --workers N` judges an index kept with a summary part by part in N
    processes (default: the CPUs it may use), and the list is the same whatever N, and the same as
    the single writer's index gives."""
    pattern, single, _ = faulty
    db = tmp_path / "kept.db"
    scan(pattern, db, "--shard-index", "on", "--workers", "2")
    judged_with: list[int] = []
    real = summary_findings._judged_parts

    def spy(db: Any, limits: Any, ranges: Any, workers: int) -> Any:
        judged_with.append(workers)
        return real(db, limits, ranges, workers)

    monkeypatch.setattr(summary_findings, "_judged_parts", spy)
    monkeypatch.setattr(summary_findings, "PART_ROWS", 4)  # several parts to hand out
    documents = {}
    for workers in ("0", "2", None):
        flags = ["--workers", workers] if workers is not None else []
        code, out, err = run_cli("quarantine", str(db), "--kinds", "all", *flags)
        assert code == 1, err
        documents[workers] = json.loads(out)["samples"]
    from datalint.host.cpus import effective_cpu_count

    assert judged_with == [0, 2, effective_cpu_count()]
    code, out, _ = run_cli("quarantine", str(single), "--kinds", "all", "--workers", "2")
    assert documents["0"] == documents["2"] == documents[None] == json.loads(out)["samples"]
    assert documents["0"]  # the faulty shards quarantine something


def test_a_later_command_judges_from_the_kept_summary_until_a_row_changes(
    faulty: tuple[str, Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datalint.scan.api import derive_quarantine

    pattern, single, _ = faulty
    db = tmp_path / "kept.db"
    scan(pattern, db, "--shard-index", "on", "--workers", "2")
    sources = populations(monkeypatch)
    document = derive_quarantine(db, kinds="all")
    assert sources == ["summaries"]
    assert document["samples"] == derive_quarantine(single, kinds="all")["samples"]
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:  # a row rewritten behind it
        connection.execute("UPDATE samples SET status = 'error' WHERE idx = 3")
    sources.clear()
    changed = derive_quarantine(db, kinds="all")
    # The parts found the rows are not those the summary covers: what it gave is dropped, the rows are read.
    assert sources[-1] == "index"
    assert 3 in {entry["index"] for entry in changed["samples"]}
    # A --rescan empties the index: the summary its merge keeps covers the new rows alone.
    sources.clear()
    scan(pattern, db, "--shard-index", "on", "--workers", "2", "--rescan")
    assert sources == ["summaries"]
    assert derive_quarantine(db, kinds="all")["samples"] == document["samples"]


def test_a_scan_judges_its_parts_in_worker_processes(
    faulty: tuple[str, Path, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--workers 2`: the parts of a sharded scan's index are judged by forked processes (a part
    of 4 rows here), and the findings and the list are the single writer's."""
    pattern, single, single_summary = faulty
    judged_by = tmp_path / "judged-by"
    judge = summary_findings.judge_part

    def recorded(*args: Any) -> summary_findings.Part:
        with judged_by.open("a") as out:  # appended by whichever process judges the part
            out.write(f"{os.getpid()}\n")
        return judge(*args)

    monkeypatch.setattr(summary_findings, "PART_ROWS", 4)
    monkeypatch.setattr(summary_findings, "judge_part", recorded)
    sources = populations(monkeypatch)
    db = tmp_path / "sharded.db"
    summary = scan(pattern, db, "--shard-index", "on", "--workers", "2")
    assert sources == ["summaries"]
    pids = judged_by.read_text().split()
    assert len(pids) == -(-summary["length"] // 4) > 2  # every part judged once
    assert str(os.getpid()) not in pids and len(set(pids)) <= 2
    assert_same_scan(db, summary, single, single_summary)
