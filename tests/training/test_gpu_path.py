"""benchmarks/gpu_path.py's dry run: the training path with the list and the guard runs on the CPU,
and the output holds both arms' step time, idle share and host memory."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_path.py"


def test_the_dry_run_measures_both_arms_side_by_side() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--json"], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["device"].startswith("cpu")
    settings = result["settings"]
    assert settings["device"] == "cpu" and settings["workers"] == 2
    assert set(result["arms"]) == {"plain", "datalint"}
    for arm in result["arms"].values():
        assert arm["steps"] == settings["rounds"] * settings["steps"]
        low, high = arm["step_ms_quartiles"]
        assert 0 < low <= arm["step_ms_median"] <= high
        assert 0 <= arm["gpu_idle_share"] <= 1
        assert arm["host_pss_mib_median"] > 0


def test_the_table_names_each_arm_and_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("gpu_path", SCRIPT)
    assert spec is not None and spec.loader is not None
    gpu_path = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_path", gpu_path)  # its dataclasses look their module up
    spec.loader.exec_module(gpu_path)  # benchmarks/ is not a package
    arm = {"step_ms_median": 12.5, "step_ms_quartiles": [11.0, 14.0], "gpu_idle_share": 0.25}
    result = {
        "device": "NVIDIA H100 80GB HBM3",
        "settings": {"device": "cuda"},
        "arms": {
            "plain": {**arm, "host_pss_mib_median": 900.0},
            "datalint": {**arm, "host_pss_mib_median": 950.0},
        },
    }
    lines = gpu_path.render(result).splitlines()
    assert lines[0] == "device: NVIDIA H100 80GB HBM3"
    assert [line.split()[0] for line in lines[3:]] == ["plain", "datalint"]
    assert "25.0%" in lines[3] and lines[4].endswith("950.0")
