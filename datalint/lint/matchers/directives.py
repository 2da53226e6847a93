"""Rules about datalint's own comments, which the engine checks itself (like DL000).

Whether a `# noqa` silenced anything is known only after every other rule has run on the file,
so `datalint.lint.engine.apply_noqa` reports DL900; its matcher finds nothing on its own and
only makes the rule a catalog entry like the others (docs, selection, `# noqa`).
"""

from __future__ import annotations

from collections.abc import Iterator

from datalint.lint.module import Match, Module


def unused_noqa(module: Module) -> Iterator[Match]:
    """DL900's matcher finds nothing: the engine reports unused directives after the other rules."""
    return iter(())


MATCHERS = {"unused-noqa": unused_noqa}
