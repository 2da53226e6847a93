"""noqa directives read from comment tokens: strings, statement ends, file-level directives."""

from __future__ import annotations

import textwrap

from datalint.config import Config
from datalint.lint.engine import Linter
from datalint.lint.noqa import read_directives

LOADER_RULES = Config(select=("DL0",))


def lines_reported(source: str, config: Config = LOADER_RULES) -> list[int]:
    return [f.line for f in Linter(config).check_source(textwrap.dedent(source), "x.py")]


def test_a_noqa_inside_a_string_or_docstring_silences_nothing() -> None:
    source = """\
        from torch.utils.data import DataLoader
        a = DataLoader(ds, prefetch_factor=2, collate_fn=f("# noqa"))
        b = DataLoader(ds, prefetch_factor=2, collate_fn=f('''
        # noqa: DL001
        '''))
        c = DataLoader(ds, prefetch_factor=2)  # a real comment  # noqa: DL001
        """
    assert lines_reported(source) == [2, 3]


def test_the_last_line_of_a_statement_covers_every_line_of_it() -> None:
    source = """\
        from torch.utils.data import DataLoader
        loader = DataLoader(
            ds,
            prefetch_factor=2,
        )  # noqa: DL001
        other = DataLoader(
            ds, prefetch_factor=2,
        )
        """
    assert lines_reported(source) == [6]


def test_file_level_directives() -> None:
    body = (
        "from torch.utils.data import DataLoader\n"
        "a = DataLoader(ds, prefetch_factor=2, persistent_workers=True)\n"
    )
    assert lines_reported("# datalint: noqa\n" + body) == []
    codes = [f.code for f in Linter(LOADER_RULES).check_source("# datalint: noqa: DL002\n" + body, "x.py")]
    assert codes == ["DL001"]
    quoted = 'NOTE = "# datalint: noqa"\n' + body
    assert len(lines_reported(quoted)) == 2  # only a comment is a directive


def test_directives_keep_their_place_and_codes() -> None:
    directives = read_directives("x = 1  # type: ignore  # NOQA:dl001, DL2 because of reasons\n")
    (directive,) = directives.by_line.values()
    assert directive.codes == ("DL001", "DL2")
    assert directive.line_text[directive.span[0] : directive.span[1]] == "# NOQA:dl001, DL2"
    assert read_directives("x = 1\n").by_line == {}
