"""Parsing a large file in bounded memory: top-level statements a piece at a time.

`ast.parse` of a whole file holds, at its peak, the parser's tokens, its memo and its C syntax
tree besides the Python tree it returns: measured on a 10 MB file of `x = 1` lines, 4 GB at the
peak for a tree that alone is 2.2 GB (about 1.35 KB a statement). Parsed in pieces of about
`PIECE_BYTES`, each cut before a line that starts a top-level statement, the parser's part is
one piece's; the pieces' statements make one `ast.Module` with the line numbers the whole file
gives (each piece is parsed behind as many newlines as precede it, which the tokenizer skips
without making tokens).

The tree of such a file is then made smaller where nothing can tell: in a run of top-level
statements that read nothing (a constant bound to a plain name, a bare constant, `pass`), only
the last binding of each name can be seen by what follows, so the others are left out. A file
of a million `x = 1` lines keeps one statement.
"""

from __future__ import annotations

import ast
import re

PIECE_BYTES = 1 << 18

# A line that may start a top-level statement: not indented, not a comment, not closing a
# bracket, not a clause that continues the statement before it.
_STATEMENT_START = re.compile(r"^(?![ \t\f\r\n#)\]}]|(?:else|elif|except|finally)\b)", re.MULTILINE)
# What `ast.parse` says when a piece was cut inside a statement rather than after one.
_CUT_SHORT = ("never closed", "unterminated", "unexpected EOF", "expected an indented block")


def parse_in_pieces(text: str, filename: str) -> ast.Module:
    """`ast.parse(text)`, for a text with `\\n` line ends, in pieces of top-level statements.

    Raises SyntaxError (with the whole file's line number) or ValueError like `ast.parse`.
    """
    body = _Compacted()
    type_ignores: list[ast.TypeIgnore] = []
    start, line_offset = 0, 0
    while start < len(text):
        end = _cut_after(text, start + PIECE_BYTES)
        while True:
            try:
                piece = ast.parse("\n" * line_offset + text[start:end], filename=filename)
                break
            except SyntaxError as exc:
                if end >= len(text) or not _cut_short(exc, line_offset + text.count("\n", start, end)):
                    raise
                end = _cut_after(text, end + PIECE_BYTES)  # cut inside a statement: take more
        for statement in piece.body:
            body.add(statement)
        type_ignores.extend(piece.type_ignores)
        line_offset += text.count("\n", start, end)
        start = end
    return ast.Module(body=body.finish(), type_ignores=type_ignores)


def _cut_after(text: str, position: int) -> int:
    """The start of the first line at or after `position` that may begin a top-level statement."""
    if position >= len(text):
        return len(text)
    line_start = text.rfind("\n", 0, position) + 1
    if line_start < position:  # `position` is inside a line: the next line, then
        line_start = text.find("\n", position) + 1 or len(text)
    found = _STATEMENT_START.search(text, line_start)
    return found.start() if found is not None else len(text)


def _cut_short(error: SyntaxError, last_line: int) -> bool:
    """Whether the piece ends inside a statement (a bracket, a string, a `\\` or a decorator)."""
    return any(words in (error.msg or "") for words in _CUT_SHORT) or (error.lineno or 0) >= last_line


def compact(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` without the statements no later statement can observe: in a run of statements that
    read nothing, a constant bound to a name bound again later in the run, and bare constants
    (the first statement, a docstring, stays)."""
    kept = _Compacted()
    for statement in body:
        kept.add(statement)
    return kept.finish()


class _Compacted:
    """Statements kept as they come, piece after piece (`compact`), in one pass over each."""

    def __init__(self) -> None:
        self.kept: list[ast.stmt] = []
        self.run: dict[str, ast.stmt] = {}  # the current run's last binding of each name
        self.first = True

    def add(self, statement: ast.stmt) -> None:
        first, self.first = self.first, False
        name = _inert_binding(statement)
        if name is not None:
            self.run.pop(name, None)
            self.run[name] = statement
        elif first or not _inert(statement):
            self._end_run()
            self.kept.append(statement)

    def finish(self) -> list[ast.stmt]:
        self._end_run()
        return self.kept

    def _end_run(self) -> None:
        if self.run:
            self.kept.extend(sorted(self.run.values(), key=_position))
            self.run.clear()


def _position(statement: ast.stmt) -> tuple[int, int]:
    return statement.lineno, statement.col_offset


def _inert_binding(statement: ast.stmt) -> str | None:
    """The name `statement` binds to a constant (`x = 1`, `x = -1.5`), else None."""
    if type(statement) is not ast.Assign or len(statement.targets) != 1:
        return None
    target, value = statement.targets[0], statement.value
    if type(target) is not ast.Name:
        return None
    if type(value) is ast.UnaryOp and type(value.op) in (ast.USub, ast.UAdd):
        value = value.operand
    return target.id if type(value) is ast.Constant else None


def _inert(statement: ast.stmt) -> bool:
    """A statement that reads and binds nothing: `pass`, or a bare constant."""
    return type(statement) is ast.Pass or (
        type(statement) is ast.Expr and type(statement.value) is ast.Constant
    )
