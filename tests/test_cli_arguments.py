"""Flag values every command reads the same way (datalint.commands.arguments), seen from the CLI."""

from __future__ import annotations

import pytest

from datalint.cli import build_parser, main

BENCH = ["bench", "--dataset", "m:ds", "--batch-size"]


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The message argparse prints for a value it refuses (exit 2, before any work starts)."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    assert exit_info.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scan", "--dataset", "m:ds", "--workers", "-1"], "argument --workers: expected 0 or more, got -1"),
        (["scan", "--dataset", "m:ds", "--timeout", "0"], "argument --timeout: expected more than 0, got 0"),
        (["scan", "--dataset", "m:ds", "--num-classes", "0"], "argument --num-classes: expected 1 or more"),
        (["scan", "--images", "d", "--max-pixels", "many"], "expected a whole number, got 'many'"),
        (
            ["scan", "--dataset", "m:ds", "--max-bytes", "lots"],
            "expected a size such as 500000, 64MB or 1GiB,",
        ),
        (["quarantine", "x.db", "--num-classes", "-3"], "argument --num-classes: expected 1 or more, got -3"),
        (["quarantine", "x.db", "--max-bytes", "64ib"], "got '64ib'"),
        (["doctor", "--num-workers", "two"], "argument --num-workers: expected a whole number, got 'two'"),
        (["doctor", "--timeout", "-1"], "argument --timeout: expected more than 0, got -1"),
        (["doctor", "--shm-bytes", "lots"], "expected a size such as 67108864, 64m or 8g, got 'lots'"),
        ([*BENCH, "0"], "argument --batch-size: expected 1 or more, got 0"),
        ([*BENCH, "4", "--timeout", "0"], "argument --timeout: expected more than 0, got 0"),
        ([*BENCH, "4", "--warmup", "0"], "argument --warmup: expected 1 or more, got 0"),
        (["report", "x.db", "--max-rows", "-1"], "argument --max-rows: expected 0 or more, got -1"),
    ],
)
def test_a_bad_value_is_refused_naming_the_flag_what_was_expected_and_what_was_given(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert message in refused(capsys, *argv)


def test_sample_sizes_read_mb_as_decimal_and_memory_limits_read_it_as_docker_does() -> None:
    # --max-bytes is a size on disk (MB = 1000^2, MiB = 1024^2); --shm-bytes is copied from
    # `docker run --shm-size`, where every unit is binary.
    scan = build_parser("scan").parse_args(["scan", "--dataset", "m:ds", "--max-bytes", "64MB"])
    quarantine = build_parser("quarantine").parse_args(["quarantine", "x.db", "--max-bytes", "1.5GiB"])
    doctor = build_parser("doctor").parse_args(["doctor", "--shm-bytes", "64MB", "--memory-bytes", "8g"])
    assert scan.max_bytes == 64_000_000
    assert quarantine.max_bytes == 3 * 2**29
    assert (doctor.shm_bytes, doctor.memory_bytes) == (64 * 2**20, 8 * 2**30)
