"""`datalint check --jobs N`: the files of one run summarized, then linted, in N processes.

First the files' summaries (what each tells the others) are made in the processes, each file
parsed there or read from the summary cache, and handed to the parent's project; on a cold cache
that is a parse of every file, which the parent would otherwise make alone before any linting.
Then each process gets the configuration and the project (its summaries and the classes held by
Datasets, gathered by the parent) once, at start; files go out in chunks and findings come back.
The parent sorts and reports: workers measure, the parent decides.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from datalint.config import Config, ConfigResolver
from datalint.lint.catalog import Catalog
from datalint.lint.project import Project, Summarized

_LINTER = None  # the worker process's Linter, built once by `_start`
_SUMMARIZER: Project | None = None  # the worker process's own project, built by `_start_summaries`


def _start_summaries(root: Path | None, cache_folder: Path | None, max_file_size: int | None) -> None:
    global _SUMMARIZER
    import gc

    from datalint.lint.engine import LINT_GC_THRESHOLDS
    from datalint.lint.project import SummaryCache

    gc.set_threshold(*LINT_GC_THRESHOLDS)
    _SUMMARIZER = Project(root, SummaryCache(cache_folder), max_file_size)


def _summarize_chunk(paths: Sequence[Path]) -> list[tuple[Path, Summarized | None]]:
    assert _SUMMARIZER is not None
    return [(path, _SUMMARIZER.summarized(path)) for path in paths]


def summarize_in_processes(paths: Sequence[Path], project: Project, jobs: int) -> None:
    """Give `project` the summary of every file of `paths`: read back from the summary cache here,
    and made in `jobs` processes for the files it does not hold (a warm cache starts none)."""
    missing = [path for path in paths if not project.knows_summary(path)]
    if not missing:
        return
    chunks = _chunks(missing, jobs)
    context = multiprocessing.get_context()
    initargs = (project.root, project.cache.folder, project.max_file_size)
    with ProcessPoolExecutor(
        jobs, mp_context=context, initializer=_start_summaries, initargs=initargs
    ) as pool:
        for done in pool.map(_summarize_chunk, chunks):
            for path, summarized in done:
                if summarized is not None:
                    project.adopt(path, summarized)


def _chunks(paths: Sequence[Path], jobs: int) -> list[list[Path]]:
    chunk = max(1, min(64, len(paths) // (jobs * 4) or 1))
    return [list(paths[i : i + chunk]) for i in range(0, len(paths), chunk)]


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
    chunks = _chunks(paths, jobs)
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
