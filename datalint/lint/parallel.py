"""`datalint check --jobs N`: the files of one run linted in N processes.

Each process gets the configuration and the project (its summaries and the classes held by
Datasets, already gathered by the parent) once, at start; files go out in chunks and findings
come back. The parent sorts and reports: workers measure, the parent decides.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from datalint.config import Config, ConfigResolver
from datalint.lint.catalog import Catalog
from datalint.lint.project import Project

_LINTER = None  # the worker process's Linter, built once by `_start`


def _start(
    config: Config, catalog: Catalog | None, project: Project, resolver: ConfigResolver | None
) -> None:
    global _LINTER
    import gc

    from datalint.lint.engine import LINT_GC_THRESHOLDS, Linter, LinterCache

    gc.set_threshold(*LINT_GC_THRESHOLDS)  # the worker only lints (see `collector_tuned_for_lint`)
    _LINTER = LinterCache(Linter(config, catalog, project), resolver, project)


def _lint_chunk(paths: Sequence[Path]) -> tuple[list, list]:
    from datalint.lint.engine import LinterCache, _lint_serially

    assert isinstance(_LINTER, LinterCache)
    return _lint_serially(_LINTER, paths)


def lint_in_processes(
    paths: Sequence[Path],
    config: Config,
    catalog: Catalog | None,
    project: Project,
    jobs: int,
    resolver: ConfigResolver | None = None,
) -> tuple[list, list]:
    """(findings, errors) of every file, linted in `jobs` processes; order is restored by the caller."""
    chunk = max(1, min(64, len(paths) // (jobs * 4) or 1))
    chunks = [list(paths[i : i + chunk]) for i in range(0, len(paths), chunk)]
    findings: list = []
    errors: list = []
    context = multiprocessing.get_context()
    with ProcessPoolExecutor(
        jobs, mp_context=context, initializer=_start, initargs=(config, catalog, project, resolver)
    ) as pool:
        for found, failed in pool.map(_lint_chunk, chunks):
            findings.extend(found)
            errors.extend(failed)
    return findings, errors
