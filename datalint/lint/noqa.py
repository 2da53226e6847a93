"""`# noqa` directives read from a file's comment tokens, not from its raw lines.

Only real comments count: a `"# noqa"` inside a string silences nothing. And knowing where each
statement ends lets a directive sit on the last line of a statement that spans several lines
(`DataLoader(\\n ...\\n)  # noqa: DL001`).

Two readers give the same answer. `read_directives_parsed`, used on every linted file, works
from the syntax tree: it looks only at the lines that mention noqa, knows the string literals
from the tree, and finds a statement's end only when a finding asks (tokenize, pure Python and
as slow as the parse itself, never runs over a whole file). `read_directives` tokenizes the
whole text; `--add-noqa` and text that does not parse use it. Files that never spell "noqa"
cost one substring search.

Two kinds of directive:
- a line directive, `# noqa` (every code) or `# noqa: DL001, DL2` (codes or prefixes);
- a file directive, `# datalint: noqa` or `# datalint: noqa: DL101`, on a line of its own
  anywhere in the file, which silences those codes in the whole file.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence

from datalint.records import record

# A noqa directive, optionally with codes (`NOQA:DL001`, `noqa: DL001, DL2`); codes need a digit, so the
# words of an explanation after them (`noqa: DL101 because ...`) are not read as codes.
NOQA = re.compile(
    r"#\s*noqa(?P<colon>\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:(?:\s*,\s*|\s+)[A-Z]+[0-9]+)*))?", re.IGNORECASE
)
FILE_NOQA = re.compile(
    r"#\s*datalint\s*:\s*noqa(?:\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)
CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)
# A line as tokenize and the parser count them: ended by \n, \r\n or \r (form feeds do not end one).
PARSER_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@record
class Noqa:
    """A `# noqa` comment; codes is None for a bare `# noqa`, which silences every code."""

    codes: frozenset[str] | None

    def silences(self, code: str) -> bool:
        return self.codes is None or any(code.startswith(prefix) for prefix in self.codes)


@record
class Directive:
    """One `# noqa` comment where it stands: 1-based line, 1-based character column of the `#`.

    `codes` keeps the order and spelling-as-upper-case of the comment (None when bare);
    `span` is the directive's own text inside the comment, (start, end) in characters of
    that line, so a fix can drop a code or the whole directive.
    """

    line: int
    column: int
    codes: tuple[str, ...] | None
    span: tuple[int, int]
    comment_start: int  # 0-based column of the comment's `#`
    comment_end: int  # 0-based column where the comment ends (the line's end)
    line_text: str  # the physical line, without its line break

    @property
    def noqa(self) -> Noqa:
        return Noqa(None if self.codes is None else frozenset(self.codes))


@record
class Directives:
    """Every noqa directive in one file, and which lines each directive covers."""

    by_line: dict[int, Directive]  # the directive on a physical line
    covers: Mapping[
        int, int
    ]  # physical line -> the last line of its statement, where a directive also counts
    file_codes: frozenset[str] | None  # what a file directive silences; None: every code
    file_directive: bool  # the file has a `# datalint: noqa` directive

    def for_line(self, line: int) -> Directive | None:
        """The directive that applies to a finding starting on `line`, if any."""
        own = self.by_line.get(line)
        if own is not None:
            return own
        end = self.covers.get(line)
        return self.by_line.get(end) if end is not None else None

    def file_silences(self, code: str) -> bool:
        if not self.file_directive:
            return False
        return self.file_codes is None or any(code.startswith(prefix) for prefix in self.file_codes)


NO_DIRECTIVES = Directives({}, {}, None, False)


class _FileCodes:
    """The file directives of one file, gathered comment by comment into one `Directives`."""

    def __init__(self) -> None:
        self.seen = False
        self.codes: set[str] | None = set()  # None once a bare `# datalint: noqa` silences every code

    def add(self, directive: re.Match[str]) -> None:
        self.seen = True
        codes = directive.group("codes")
        if codes is None:
            self.codes = None
        elif self.codes is not None:
            self.codes.update(c.upper() for c in CODE.findall(codes))

    def directives(self, by_line: dict[int, Directive], covers: Mapping[int, int]) -> Directives:
        return Directives(by_line, covers, None if self.codes is None else frozenset(self.codes), self.seen)


def parse_noqa(text: str) -> Noqa | None:
    """The `# noqa` directive in one comment (or line) of text, if any."""
    match = NOQA.search(text)
    if match is None:
        return None
    codes = match.group("codes")
    return Noqa(None if codes is None else frozenset(c.upper() for c in CODE.findall(codes)))


def read_directives(source: str) -> Directives:
    """The noqa directives of a file, read from its comment tokens (empty when it never says noqa)."""
    lowered = source.lower()
    if "noqa" not in lowered:
        return NO_DIRECTIVES
    by_line: dict[int, Directive] = {}
    covers: dict[int, int] = {}
    file_codes = _FileCodes()
    statement_start: int | None = None
    try:
        for token in _tokens(source):
            kind, text, (row, column), _, line_text = token
            if statement_start is None and kind not in _NON_CODE:
                statement_start = row
            if kind == tokenize.COMMENT:
                whole = FILE_NOQA.match(text)
                if whole is not None:
                    file_codes.add(whole)
                    continue
                directive = _directive(text, row, column, line_text.rstrip("\r\n"))
                if directive is not None:
                    by_line[row] = directive
            elif kind == tokenize.NEWLINE:
                # The logical line ended: its first lines are covered by a directive on its last line.
                if statement_start is not None:
                    for covered in range(statement_start, row):
                        covers[covered] = row
                statement_start = None
    except (tokenize.TokenError, SyntaxError):
        pass  # keep what was read: the parser reports the real problem
    return file_codes.directives(by_line, covers)


def read_directives_parsed(source: str, tree: ast.Module, strings: Iterable[ast.expr]) -> Directives:
    """`read_directives` for parsed source: `strings` are the tree's string literals (Constant and
    JoinedStr nodes), which tell a comment's `#` from one inside a string."""
    if "noqa" not in source.lower():
        return NO_DIRECTIVES
    lines = [line.rstrip("\r\n") for line in PARSER_LINE.findall(source)]
    candidates = [number for number, text in enumerate(lines, start=1) if "noqa" in text.lower()]
    inside = _string_spans(strings, candidates, lines)
    by_line: dict[int, Directive] = {}
    file_codes = _FileCodes()
    for number in candidates:
        text = lines[number - 1]
        start = _comment_start(text, inside.get(number, ()))
        if start is None:
            continue
        comment = text[start:]
        whole = FILE_NOQA.match(comment)
        if whole is not None:
            file_codes.add(whole)
            continue
        directive = _directive(comment, number, start, text)
        if directive is not None:
            by_line[number] = directive
    covers: Mapping[int, int] = _StatementEnds(tree, lines) if by_line else {}
    return file_codes.directives(by_line, covers)


_NO_END = 1 << 30  # a string that goes on past the end of the line


def _string_spans(
    strings: Iterable[ast.expr], candidates: Sequence[int], lines: Sequence[str]
) -> dict[int, list[tuple[int, int]]]:
    """For each candidate line, the UTF-8 byte ranges that string literals cover on it.

    A literal over several lines may be implicitly joined pieces with comments between them
    (`"a "  # noqa` then `"b"` on the next line): those are tokenized to find the pieces.
    """
    spans: dict[int, list[tuple[int, int]]] = {}
    for node in strings:
        if isinstance(node, ast.Constant) and not isinstance(node.value, str | bytes):
            continue
        first, last = node.lineno, node.end_lineno or node.lineno
        wanted = candidates[bisect_left(candidates, first) : bisect_left(candidates, last + 1)]
        if not wanted:
            continue
        if first == last:
            spans.setdefault(first, []).append((node.col_offset, node.end_col_offset or _NO_END))
            continue
        for line, span in _pieces(node, lines):
            if line in wanted:
                spans.setdefault(line, []).append(span)
    return spans


def _pieces(node: ast.expr, lines: Sequence[str]) -> list[tuple[int, tuple[int, int]]]:
    """(line, byte range) of each string token of a literal spanning several lines."""
    first, last = node.lineno, node.end_lineno or node.lineno
    start = _char_column(lines[first - 1], node.col_offset)
    end = _char_column(lines[last - 1], node.end_col_offset or 0)
    text = "\n".join([lines[first - 1][start:], *lines[first : last - 1], lines[last - 1][:end]])
    found: list[tuple[int, tuple[int, int]]] = []
    opened: tuple[int, int] | None = None
    try:
        for kind, _, (row, column), (end_row, end_column), _ in _tokens(f"({text})"):
            name = tokenize.tok_name.get(kind, "")
            if name == "FSTRING_START":  # Python 3.12+: an f-string is several tokens
                opened = (row, column)
                continue
            if name == "FSTRING_END" and opened is not None:
                (row, column), opened = opened, None
            elif kind != tokenize.STRING or opened is not None:
                continue
            for offset in range(row, end_row + 1):
                line = first + offset - 1
                text_line = lines[line - 1]
                shift = start - 1 if offset == 1 else 0  # the "(" added in front, and the literal's column
                begin = column + shift if offset == row else 0
                finish = end_column + (start - 1 if offset == 1 else 0) if offset == end_row else None
                found.append((line, (_byte_column(text_line, begin), _byte_column(text_line, finish))))
    except (tokenize.TokenError, SyntaxError):
        return [(line, (0, _NO_END)) for line in range(first, last + 1)]  # cannot tell: all string
    return found


def _char_column(text: str, byte_offset: int) -> int:
    return (
        byte_offset if text.isascii() else len(text.encode("utf-8")[:byte_offset].decode("utf-8", "replace"))
    )


def _byte_column(text: str, column: int | None) -> int:
    if column is None:
        return _NO_END
    return column if text.isascii() else len(text[:column].encode("utf-8"))


def _comment_start(text: str, inside: Sequence[tuple[int, int]]) -> int | None:
    """The column of the `#` that starts the line's comment: the first one outside every string."""
    position = text.find("#")
    while position != -1:
        offset = position if text.isascii() else len(text[:position].encode("utf-8"))
        if not any(start <= offset < end for start, end in inside):
            return position
        position = text.find("#", position + 1)
    return None


_COMPOUND = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    *((ast.TryStar,) if hasattr(ast, "TryStar") else ()),
    *((ast.Match,) if hasattr(ast, "Match") else ()),
)


class _StatementEnds(Mapping[int, int]):
    """Line -> the last line of the statement (or compound statement's header) it belongs to.

    Built on first use from the tree: simple statements end at `end_lineno`, decorators at theirs;
    a compound statement's header ends at its first NEWLINE token, found by tokenizing just it.
    """

    def __init__(self, tree: ast.Module, lines: Sequence[str]) -> None:
        self._tree = tree
        self._lines = lines
        self._ends: dict[int, int] | None = None

    def _index(self) -> dict[int, int]:
        if self._ends is None:
            ends: dict[int, int] = {}
            for node in ast.walk(self._tree):  # breadth first: inner statements overwrite outer ones
                if isinstance(node, ast.ExceptHandler):  # `except (\n A,\n B,\n):` is a header too
                    _assign(ends, node.lineno, _header_end(self._lines, node.lineno))
                if not isinstance(node, ast.stmt):
                    continue
                if isinstance(node, _COMPOUND):
                    for decorator in getattr(node, "decorator_list", ()):
                        _assign(ends, decorator.lineno, decorator.end_lineno or decorator.lineno)
                    _assign(ends, node.lineno, _header_end(self._lines, node.lineno))
                else:
                    _assign(ends, node.lineno, node.end_lineno or node.lineno)
            self._ends = ends
        return self._ends

    def __getitem__(self, line: int) -> int:
        return self._index()[line]

    def __iter__(self) -> Iterator[int]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())


def _assign(ends: dict[int, int], first: int, last: int) -> None:
    for line in range(first, last + 1):
        ends[line] = last


def _header_end(lines: Sequence[str], first: int) -> int:
    """The line where a compound statement's header (`def f(\\n  x,\\n):`) ends."""
    rest = iter(f"{line}\n" for line in lines[first - 1 :])
    try:
        for kind, _, (row, _), _, _ in tokenize.generate_tokens(lambda: next(rest, "")):
            if kind == tokenize.NEWLINE:
                return first + row - 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return first


_NON_CODE = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
)


def _tokens(source: str) -> Iterator[tokenize.TokenInfo]:
    return tokenize.generate_tokens(io.StringIO(source).readline)


def _directive(comment: str, row: int, column: int, line_text: str) -> Directive | None:
    match = NOQA.search(comment)
    if match is None:
        return None
    codes_text = match.group("codes")
    codes = None if codes_text is None else tuple(c.upper() for c in CODE.findall(codes_text))
    comment_end = column + len(comment)
    span = (column + match.start(), column + match.end())
    return Directive(row, span[0] + 1, codes, span, column, comment_end, line_text)


def comment_safe_lines(source: str) -> frozenset[int]:
    """Lines whose end is outside any string and not a backslash continuation: a comment fits there."""
    unsafe: set[int] = set()
    try:
        for kind, _, (row, _), (end_row, _), _ in _tokens(source):
            if kind in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)) and end_row > row:
                unsafe.update(range(row, end_row))
    except (tokenize.TokenError, SyntaxError):
        return frozenset()
    lines = [line.rstrip("\r\n") for line in PARSER_LINE.findall(source)]
    safe = {
        n for n in range(1, len(lines) + 1) if n not in unsafe and not lines[n - 1].rstrip().endswith("\\")
    }
    return frozenset(safe)


def statement_ends(source: str) -> dict[int, int]:
    """Physical line -> the last line of its logical line, for every line of a multi-line statement."""
    ends: dict[int, int] = {}
    start: int | None = None
    try:
        for kind, _, (row, _), _, _ in _tokens(source):
            if start is None and kind not in _NON_CODE:
                start = row
            if kind == tokenize.NEWLINE:
                if start is not None:
                    for covered in range(start, row + 1):
                        ends[covered] = row
                start = None
    except (tokenize.TokenError, SyntaxError):
        pass
    return ends


def add_noqa(source: str, codes_by_line: dict[int, set[str]]) -> tuple[str, int]:
    """`--add-noqa`: a directive for each finding, where datalint will read it; (new text, codes added).

    The directive goes on the finding's line when a comment can end that line, else on the
    last line of its statement. An existing `# noqa: ...` there gets the codes added; a bare
    one already covers everything; another comment stays and the directive follows it.
    """
    safe = comment_safe_lines(source)
    ends = statement_ends(source)
    existing = read_directives(source).by_line
    wanted: dict[int, set[str]] = {}
    for line, codes in codes_by_line.items():
        target = line if line in safe else ends.get(line, line)
        wanted.setdefault(target, set()).update(codes)
    lines = PARSER_LINE.findall(source)
    added = 0
    for number, codes in wanted.items():
        if not 0 < number <= len(lines):
            continue
        text = lines[number - 1]
        body = text.rstrip("\r\n")
        ending = text[len(body) :]
        directive = existing.get(number)
        if directive is not None and directive.codes is None:
            continue
        if directive is not None:
            assert directive.codes is not None
            new = sorted(codes - set(directive.codes))
            if not new:
                continue
            start, end = directive.span
            body = body[:start] + f"# noqa: {', '.join([*directive.codes, *new])}" + body[end:]
        else:
            new = sorted(codes)
            body = f"{body}  # noqa: {', '.join(new)}"
        lines[number - 1] = body + ending
        added += len(new)
    return "".join(lines), added
