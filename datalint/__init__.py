"""datalint: the linter and bad-sample scanner for PyTorch data pipelines.

The public API is re-exported here lazily, so `import datalint` stays as cheap
as the standard library: the scan half (numpy, PIL, OpenCV, sqlite-utils) and
torch load only when one of their names is first used. (The doctor itself is
`datalint.diagnosis.doctor`; its one-call entry point is `host_checks()`.)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "lint_source": "datalint.lint.engine",
    "lint_paths": "datalint.lint.engine",
    "Finding": "datalint.lint.engine",
    "load_catalog": "datalint.lint.catalog",
    "scan": "datalint.scan.api",
    "load_quarantine": "datalint.torch",
    "QuarantineSampler": "datalint.torch",
    "DistributedQuarantineSampler": "datalint.torch",
    "quarantine_filter": "datalint.torch",
    "GuardedDataset": "datalint.torch",
    "guarded_collate": "datalint.torch",
    "host_checks": "datalint.diagnosis.doctor",
    "write_report": "datalint.report",
    "ReportOptions": "datalint.report",
    "open_index": "datalint.scan.reader",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'datalint' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
