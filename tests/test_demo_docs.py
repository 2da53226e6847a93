"""The README's `make demo` output names the files scripts/demo.sh really writes."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def demo_dataset_scan_flags() -> dict[str, str]:
    """The `--db` and `--quarantine` of the demo's dataset scan, with `$OUT` filled in."""
    script = (ROOT / "scripts" / "demo.sh").read_text(encoding="utf-8")
    out = re.search(r"^OUT=(\S+)$", script, re.M).group(1)  # type: ignore[union-attr]
    command = re.search(r"\$BIN/datalint scan --dataset .*?(?<!\\)\n", script, re.S).group(0)  # type: ignore[union-attr]
    flags = dict(re.findall(r"(--db|--quarantine) (\S+)", command))
    return {flag: value.strip('"').replace("$OUT", out) for flag, value in flags.items()}


def test_the_readme_names_the_list_the_demo_writes() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("`make demo` prints:", 1)[1].split("```console", 1)[1].split("```", 1)[0]
    flags = demo_dataset_scan_flags()
    printed_list = re.search(r"^\s*quarantine: (\S+)", block, re.M).group(1)  # type: ignore[union-attr]
    assert printed_list == flags["--quarantine"] == "out/demo/demo.quarantine.json"
    assert f"--quarantine {flags['--quarantine']}" in block and f"--db {flags['--db']}" in block
