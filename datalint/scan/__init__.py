"""The scan half: per-sample probes in isolated workers, one SQLite writer, quarantine policy.

`datalint.scan(...)` is the public entry point (`datalint.scan.api.scan`). Because this package
has the same name, the package module itself is made callable: once any `datalint.scan.*`
module is imported, the attribute `datalint.scan` is this package, and calling it still scans.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from datalint.scan.api import scan

        return scan(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:  # help(), IDEs and inspect see scan()'s keywords
        from datalint.scan.api import scan

        return inspect.signature(scan)


sys.modules[__name__].__class__ = _CallableModule
