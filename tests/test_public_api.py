"""`import datalint`: the public names, each loading its part of the package only when first used."""

from __future__ import annotations

import json
import subprocess
import sys

import datalint

HEAVY = (
    "datalint.diagnosis.doctor", "datalint.report", "datalint.scan", "datalint.torch",
    "numpy", "torch", "PIL",
)


def loaded_after(statement: str) -> list[str]:
    """Which of HEAVY a fresh interpreter holds after `import datalint` and `statement`."""
    report = f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    code = f"import sys, json, datalint\n{statement}\n{report}"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(done.stdout))


def test_import_datalint_loads_none_of_its_heavy_parts() -> None:
    assert loaded_after("pass") == []


def test_the_doctor_and_report_entry_points_load_only_their_own_modules() -> None:
    assert loaded_after("datalint.host_checks") == ["datalint.diagnosis.doctor"]
    loaded = loaded_after("datalint.write_report, datalint.ReportOptions")
    assert "datalint.report" in loaded and "torch" not in loaded


def test_every_public_name_resolves() -> None:
    for name in datalint.__all__:
        assert getattr(datalint, name) is not None, name
