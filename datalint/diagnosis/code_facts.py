"""What `datalint check` knows of a dataset's code that a memory estimate cannot measure.

`doctor` measures a few dozen samples in fresh workers. Two patterns grow a worker's memory after
that, sample by sample, so no short measurement sees them (docs/doctor.md, "What the estimate
leaves out"):

- DL302, a per-worker cache without a bound: each worker keeps every sample it has read; with a
  shuffled sampler each worker reads every sample over the epochs, so its cache heads for the whole
  dataset (length x sample bytes) in every worker;
- DL301, Python containers of per-sample objects read in `__getitem__`: every read touches their
  reference counts, so their pages turn private in each worker (copy-on-read) until each worker
  holds a copy.

The dataset's class and its bases are linted where their source files are found (the standard
library's `inspect`, on the classes the spec already imported: nothing is imported for this), and
the findings inside those classes are kept.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MEMORY_RULES = ("DL301", "DL302")


@dataclass(frozen=True)
class CodeFinding:
    """A finding of `datalint check` in the dataset's own code."""

    code: str
    path: str
    line: int
    message: str
    owner: str  # the class it is in: Dataset.__qualname__

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def dataset_findings(dataset: Any, rules: Sequence[str] = MEMORY_RULES) -> tuple[CodeFinding, ...]:
    """The findings of `rules` inside the dataset's class and the bases defined beside it (a base
    from an installed package is not the user's code and is not read)."""
    found: list[CodeFinding] = []
    for cls, path, first, last in _own_classes(type(dataset)):
        for finding in _lint(path, rules):
            if first <= finding.line <= last:
                found.append(CodeFinding(finding.code, str(path), finding.line, finding.message,
                                         cls.__qualname__))
    return tuple(sorted(set(found), key=lambda f: (f.path, f.line, f.code)))


def _own_classes(cls: type) -> Iterable[tuple[type, Path, int, int]]:
    """(class, file, first line, last line) for the class and its bases whose source is the user's."""
    for klass in cls.__mro__:
        if klass is object or _installed(klass):
            continue
        try:
            path = inspect.getsourcefile(klass)
            lines, first = inspect.getsourcelines(klass)
        except (OSError, TypeError):
            continue  # built in, defined in a notebook cell or a string: no file to read
        if path is not None:
            yield klass, Path(path), first, first + len(lines) - 1


def _installed(klass: type) -> bool:
    module = getattr(klass, "__module__", "") or ""
    if module.split(".")[0] in ("torch", "builtins", "typing", "datalint"):
        return True
    try:
        path = inspect.getsourcefile(klass) or ""
    except TypeError:
        return True
    return "site-packages" in path or "dist-packages" in path


def _lint(path: Path, rules: Sequence[str]) -> list[Any]:
    from datalint.config import Config
    from datalint.lint.engine import lint_source

    try:
        source = path.read_bytes()
    except OSError:
        return []
    return lint_source(source, str(path), Config(select=tuple(rules)))


def left_out(findings: Sequence[CodeFinding], length: int | None, sample_bytes: int,
             num_workers: int) -> list[str]:
    """One line a finding: what the estimate leaves out, with the bound where one can be given."""
    lines: list[str] = []
    for finding in findings:
        if finding.code == "DL302":
            bound = ""
            if length:
                from datalint.units import human_bytes

                per_worker = length * sample_bytes
                copies = max(1, num_workers)
                bound = (f": up to {length:,} samples x {human_bytes(sample_bytes)} = "
                         f"{human_bytes(per_worker)} in each of {copies} worker(s), "
                         f"{human_bytes(per_worker * copies)} in all")
            lines.append(f"{finding.owner} caches every sample it reads without a bound (DL302 at "
                         f"{finding.where}){bound}; the estimate measured fresh workers and leaves it out")
        elif finding.code == "DL301":
            lines.append(f"{finding.owner} reads Python containers of per-sample objects in its workers "
                         f"(DL301 at {finding.where}): copy-on-read makes their pages private in each "
                         "worker as the epoch goes on; the estimate's worker footprint is from the first "
                         "samples only")
    return lines


def cache_bound(findings: Sequence[CodeFinding], length: int | None, sample_bytes: int,
                num_workers: int) -> int | None:
    """The memory an unbounded per-worker cache can reach in all workers (None: no such cache, or
    the dataset's length is not known)."""
    if not length or not any(f.code == "DL302" for f in findings):
        return None
    return length * sample_bytes * max(1, num_workers)
