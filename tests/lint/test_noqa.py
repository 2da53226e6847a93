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


def test_the_tree_reader_agrees_with_tokenize_on_joined_strings_and_headers() -> None:
    """Directives are read from the syntax tree (fast); tokenizing the whole file gives the same answer."""
    from datalint.lint.module import Module

    source = textwrap.dedent(
        '''\
        message = (
            f"first piece {x} "  # noqa: DL001
            "second piece # noqa: DL002"
        )
        doc = """
        # noqa: DL003
        """
        try:
            pass
        except (
            ValueError,
        ):  # noqa: DL004
            pass
        def make(
            dataset,
        ):  # noqa: DL005
            return DataLoader(dataset, prefetch_factor=2)  # noqa: DL001
        '''
    )
    module = Module.parse(source, "x.py")
    parsed = module.noqa_directives
    tokens = read_directives(source)
    assert {k: v.codes for k, v in parsed.by_line.items()} == {k: v.codes for k, v in tokens.by_line.items()}
    assert sorted(parsed.by_line) == [2, 12, 16, 17]
    for line in range(1, len(source.splitlines()) + 1):
        assert parsed.for_line(line) == tokens.for_line(line), line
