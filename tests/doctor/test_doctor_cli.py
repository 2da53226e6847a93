"""`datalint doctor` as a user runs it: the real machine, overridden limits, a real dataset measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from doctor_support import HOST_CHECK_NAMES

from datalint.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "datasets"
IMAGENET_LIKE = f"{FIXTURES / 'bench_tensors.py'}:imagenet_like"
CHECK_KEYS = {"name", "status", "value", "detail", "fix"}


def doctor_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["doctor", "--format", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def by_name(document: dict) -> dict[str, dict]:
    return {check["name"]: check for check in document["checks"]}


def test_doctor_on_this_machine_reports_every_check_and_exits_by_the_worst(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document = doctor_json(capsys)
    checks = by_name(document)
    assert set(HOST_CHECK_NAMES) <= set(checks)
    assert all(set(c) == CHECK_KEYS and c["status"] in ("ok", "warn", "fail") for c in document["checks"])
    assert document["estimate"] is None
    assert code == (1 if any(c["status"] == "fail" for c in document["checks"]) else 0)


def test_a_batch_too_big_for_a_docker_default_shm_fails_with_exit_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, document = doctor_json(
        capsys,
        "--sample-bytes",
        "588k",
        "--batch-size",
        "64",
        "--num-workers",
        "2",
        "--shm-bytes",
        "64m",
    )
    assert code == 1
    shm = by_name(document)["loader shared memory"]
    assert shm["status"] == "fail"
    assert "--shm-size" in shm["fix"]
    estimate = document["estimate"]
    assert estimate["shm_in_flight"] == 2 * 2 * 64 * 588 * 1024
    assert estimate["fits"] == {"max_workers": 0, "max_batch_size": 22}
    assert estimate["limits"]["shm_source"] == "--shm-bytes"


def test_a_batch_that_fits_in_64_mib_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, document = doctor_json(
        capsys,
        "--sample-bytes",
        "588k",
        "--batch-size",
        "8",
        "--num-workers",
        "2",
        "--shm-bytes",
        "64m",
        "--memory-bytes",
        "16g",
    )
    checks = by_name(document)
    assert checks["loader shared memory"]["status"] == "ok"
    assert checks["loader host memory"]["status"] == "ok"
    assert code == (1 if any(c["status"] == "fail" for c in document["checks"]) else 0)


def test_real_samples_are_measured_in_isolated_workers(capsys: pytest.CaptureFixture[str]) -> None:
    code, document = doctor_json(
        capsys,
        "--dataset",
        IMAGENET_LIKE,
        "--batch-size",
        "64",
        "--num-workers",
        "2",
        "--shm-bytes",
        "64m",
        "--samples",
        "12",
    )
    sizes = document["estimate"]["sizes"]
    assert sizes["measured"] == 12 and sizes["failed"] == 0
    assert sizes["p99"] == 3 * 224 * 224 * 4 + 8  # the image plus its int label, as the scan probes count
    assert sizes["worker_footprint"] > 0  # read from the live workers' private memory
    assert by_name(document)["loader shared memory"]["status"] == "fail"
    assert code == 1


def test_failing_samples_are_counted_not_fatal(capsys: pytest.CaptureFixture[str]) -> None:
    spec = f"{FIXTURES / 'bench_faulty.py'}:make(16, raise_at=[0, 5])"
    _, document = doctor_json(capsys, "--dataset", spec, "--batch-size", "4", "--num-workers", "1")
    sizes = document["estimate"]["sizes"]
    assert (sizes["measured"], sizes["failed"]) == (14, 2)
    assert any("sample 5: error ValueError: corrupt sample 5" in line for line in sizes["failures"])


def test_text_output_shows_each_verdict_its_fix_and_the_formula(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["doctor", "--sample-bytes", "1m", "--batch-size", "32", "--num-workers", "4", "--shm-bytes", "64m"]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "fail  loader shared memory" in out
    assert "fix: " in out
    assert "num_workers x prefetch_factor x batch bytes = 4 x 2 x 32.0 MiB = 256.0 MiB" in out
    assert "largest batch_size that fits at num_workers=4: 6" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-size", "8"], "add --dataset SPEC"),
        (["--sample-bytes", "1m", "--batch-size", "8"], "needs --num-workers"),
        (
            ["--dataset", "no_such_module_xyz:ds", "--batch-size", "8", "--num-workers", "1"],
            "no_such_module_xyz",
        ),
    ],
)
def test_usage_mistakes_exit_2_with_a_message(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["doctor", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_size_that_does_not_parse_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["doctor", "--shm-bytes", "lots"])
    assert exit_info.value.code == 2
    assert "expected a size such as 67108864, 64m or 8g" in capsys.readouterr().err


def test_sizes_can_come_from_an_existing_scan_index(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from datalint.index.store import SampleWriter, open_index, start_run

    db = open_index(tmp_path / "scan.db")
    run_id = start_run(
        db, kind="dataset", spec="mymod:ds", length=101, fingerprint=None, options={}, environment={}
    )
    writer = SampleWriter(db, run_id)
    writer.add([{"idx": i, "status": "ok", "nbytes": 1 << 20} for i in range(100)])
    writer.add([{"idx": 100, "status": "crash", "error_type": "SIGSEGV"}])
    writer.flush()
    db.conn.close()

    code, document = doctor_json(
        capsys,
        "--index",
        str(tmp_path / "scan.db"),
        "--batch-size",
        "16",
        "--num-workers",
        "4",
        "--shm-bytes",
        "64m",
    )
    sizes = document["estimate"]["sizes"]
    assert (sizes["measured"], sizes["p99"]) == (100, 1 << 20)
    assert sizes["failures"] == ["1 samples failed in the scan"]
    assert by_name(document)["loader shared memory"]["status"] == "fail"  # 4 x 2 x 16 MiB = 128 MiB
    assert code == 1


def test_an_index_that_is_not_there_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["doctor", "--index", str(tmp_path / "none.db"), "--batch-size", "8", "--num-workers", "1"])
    assert code == 2
    assert "none.db: no such file; `datalint scan` writes one" in capsys.readouterr().err
