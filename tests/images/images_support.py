"""Helpers for the image-scan tests: the corpus generator (imported by path) and a probe runner."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from datalint.scan.images import (
    ImageOptions,
    ImageProbe,
    ShapeThresholds,
    StderrCapture,
    duplicate_findings,
    probe_image_file,
    shape_findings,
)

REPO = Path(__file__).resolve().parents[2]


def corpus_module() -> ModuleType:
    """benchmarks/image_corpus.py, imported by path (benchmarks/ is not a package)."""
    name = "datalint_image_corpus"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "image_corpus.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return sys.modules[name]


def kinds_found(images: Path, relpaths: list[str], options: ImageOptions | None = None) -> list[set[str]]:
    """Finding kinds per file: the probe, then the whole-index rules (shape, duplicates) as a scan does."""
    capture = StderrCapture()
    probes: list[ImageProbe] = [
        probe_image_file(images / relpath, options or ImageOptions(), capture) for relpath in relpaths
    ]
    capture.close()
    hashes = {i: (relpaths[i], p.sha256) for i, p in enumerate(probes) if p.sha256 and not p.damaged}
    duplicates = duplicate_findings(hashes)
    found = []
    for i, probe in enumerate(probes):
        kinds = {f.kind for f in probe.findings}
        if probe.width is not None and probe.height is not None and not probe.damaged:
            kinds |= {f.kind for f in shape_findings(probe.width, probe.height, ShapeThresholds())}
        if i in duplicates:
            kinds.add("duplicate")
        found.append(kinds)
    return found


def run_cli(*argv: str) -> tuple[int, str, str]:
    """`datalint ARGV` in this process (the scan still forks real workers): (exit code, stdout, stderr)."""
    import contextlib
    import io

    from datalint.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def findings_by_key(db: Path) -> dict[str, set[str]]:
    """key -> finding kinds, read from a real index file."""
    import contextlib
    import sqlite3

    found: dict[str, set[str]] = {}
    with contextlib.closing(sqlite3.connect(db)) as connection:
        for key, kind in connection.execute(
            "SELECT s.key, f.kind FROM findings f JOIN samples s USING (idx)"
        ):
            found.setdefault(key, set()).add(kind)
    return found
