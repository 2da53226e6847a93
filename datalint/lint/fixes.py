"""Fixes as data: a `Fix` is a list of text edits with ranges, built from a finding's match.

A fixer is a pure function `(module, match, params) -> Fix | None` registered by rule code in
`FIXERS`; it returns None when the code is too unusual to rewrite mechanically. One function,
`apply_fixes`, turns fixes into new text; `fix_source` repeats lint -> apply until nothing
fixable is left, and never keeps a result that no longer parses.

A fix is *safe* when the code behaves as before except that the reported failure is gone
(an argument torch rejects at construction is dropped); *unsafe* when behaviour may change
for code that works today (`weights_only=True` refuses pickled objects), and those are applied
only with `--unsafe-fixes`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from datalint.lint.module import LOADER_DEFAULTS, LOADER_POSITIONAL, Match, Module
from datalint.records import record

if TYPE_CHECKING:
    from datalint.lint.engine import Finding, Linter
    from datalint.lint.noqa import Directive

Applicability = Literal["safe", "unsafe"]
# A line as the parser counts them (ast positions use these lines), ending included.
_PARSER_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
MAX_PASSES = 10  # a fix may reveal another finding; ruff loops the same way, with a cap


@record(order=True)
class Edit:
    """Replace the text from (line, column) up to (end_line, end_column) with `content`.

    Lines and columns are 1-based and count characters, like findings; the end is exclusive.
    An insertion has start == end; a deletion has empty content.
    """

    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@record
class Fix:
    message: str  # what the fix does, for --show-fixes and the JSON output
    edits: tuple[Edit, ...]
    applicability: Applicability = "safe"

    def applies(self, unsafe: bool) -> bool:
        return self.applicability == "safe" or unsafe


Fixer = Callable[[Module, Match, Mapping[str, Any]], "Fix | None"]


# ---- positions ------------------------------------------------------------------------------


def _lines(module: Module) -> list[str]:
    return _PARSER_LINE.findall(module.source)


def _position(lines: Sequence[str], line: int, byte_offset: int) -> tuple[int, int]:
    """ast's (line, UTF-8 byte offset) -> (line, 1-based character column)."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    if text.isascii():
        return line, byte_offset + 1
    return line, len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace")) + 1


def _start(lines: Sequence[str], node: ast.AST) -> tuple[int, int]:
    return _position(lines, node.lineno, node.col_offset)  # type: ignore[attr-defined]


def _end(lines: Sequence[str], node: ast.AST) -> tuple[int, int]:
    return _position(lines, node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]


def _edit(start: tuple[int, int], end: tuple[int, int], content: str) -> Edit:
    return Edit(start[0], start[1], end[0], end[1], content)


def _text_between(lines: Sequence[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    if start[0] == end[0]:
        return lines[start[0] - 1][start[1] - 1 : end[1] - 1]
    middle = "".join(lines[start[0] : end[0] - 1])
    return lines[start[0] - 1][start[1] - 1 :] + middle + lines[end[0] - 1][: end[1] - 1]


# ---- fixers ---------------------------------------------------------------------------------


def drop_loader_argument(name: str, *alternatives: str, unsafe: frozenset[str] = frozenset()) -> Fixer:
    """A fixer that removes one DataLoader argument torch rejects in this combination.

    A keyword is deleted with its comma; a positional argument (which cannot be deleted without
    shifting the others) is replaced by DataLoader's default for it. With `alternatives`, the
    first of the names the call sets (to something other than None or False) goes; the re-lint
    of the next pass removes the next one if it still conflicts. Dropping a name in `unsafe`
    changes what the loader does (a sampler), so that fix is unsafe.
    """

    def fixer(module: Module, match: Match, params: Mapping[str, Any]) -> Fix | None:
        call = match.node
        if not isinstance(call, ast.Call):
            return None
        chosen = next((n for n in (name, *alternatives) if _sets(module, call, n)), None)
        if chosen is None:
            return None
        fix = _drop(module, call, chosen)
        if fix is not None and chosen in unsafe:
            return Fix(fix.message, fix.edits, "unsafe")
        return fix

    return fixer


def _sets(module: Module, call: ast.Call, name: str) -> bool:
    """Whether the call passes `name` (by keyword, or by position) as something but None / False."""
    node = next((k.value for k in call.keywords if k.arg == name), None)
    if node is None and name in LOADER_POSITIONAL and LOADER_POSITIONAL.index(name) < len(call.args):
        node = call.args[LOADER_POSITIONAL.index(name)]
    if node is None:
        return False
    value = module.literal(node)  # UNKNOWN for an expression: set, to something
    return not (value is None or value is False)


def _drop(module: Module, call: ast.Call, name: str) -> Fix | None:
    """Remove one argument (keyword) or reset it to its default (positional)."""
    lines = _lines(module)
    keyword = next((k for k in call.keywords if k.arg == name), None)
    if keyword is not None:
        edit = _remove_argument(lines, call, keyword)
        removed = _text_between(lines, (edit.line, edit.column), (edit.end_line, edit.end_column))
        written = " ".join(_text_between(lines, _start(lines, keyword), _end(lines, keyword)).split())
        return Fix(f"Remove `{written}`", (edit,), "unsafe" if "#" in removed else "safe")
    position = LOADER_POSITIONAL.index(name) if name in LOADER_POSITIONAL else len(call.args)
    before = call.args[: position + 1]
    if position >= len(call.args) or any(isinstance(a, ast.Starred) for a in before):
        return None
    argument = call.args[position]
    default = repr(LOADER_DEFAULTS.get(name))
    return Fix(
        f"Replace positional `{name}` with its default `{default}`",
        (_edit(_start(lines, argument), _end(lines, argument), default),),
    )


def _remove_argument(lines: Sequence[str], call: ast.Call, target: ast.keyword) -> Edit:
    """Delete one argument and one neighbouring comma: up to the next argument, else from the previous."""
    arguments: list[ast.AST] = sorted(
        [*call.args, *call.keywords],
        key=lambda a: (a.lineno, a.col_offset),  # type: ignore[attr-defined]
    )
    index = arguments.index(target)
    if index + 1 < len(arguments):
        return _edit(_start(lines, target), _start(lines, arguments[index + 1]), "")
    if index > 0:
        return _edit(_end(lines, arguments[index - 1]), _end(lines, target), "")
    return _edit(_start(lines, target), _end(lines, target), "")


def weights_only_true(module: Module, match: Match, params: Mapping[str, Any]) -> Fix | None:
    """`torch.load(path)` -> `torch.load(path, weights_only=True)` (unsafe: pickled objects are refused)."""
    call = match.node
    if not isinstance(call, ast.Call) or not (call.args or call.keywords):
        return None
    lines = _lines(module)
    given = next((k for k in call.keywords if k.arg == "weights_only"), None)
    if given is not None:
        edit = _edit(_start(lines, given.value), _end(lines, given.value), "True")
    else:
        last = max([*call.args, *call.keywords], key=lambda a: (a.end_lineno, a.end_col_offset))  # type: ignore[attr-defined]
        edit = _edit(_end(lines, last), _end(lines, last), ", weights_only=True")
    return Fix("Load with `weights_only=True`", (edit,), "unsafe")


def public_import(module: Module, match: Match, params: Mapping[str, Any]) -> Fix | None:
    """`from torch.utils.data._utils.collate import default_collate` -> `from torch.utils.data import ...`.

    Only when every imported name has the same public home; `import ..._utils... as C` is left alone
    (its uses would need rewriting too).
    """
    node = match.node
    public_names: Mapping[str, str] = params.get("public_names") or {}
    if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
        return None
    homes = {public_names.get(f"{node.module}.{alias.name}") for alias in node.names}
    if None in homes:
        return None
    packages = {home.rpartition(".")[0] for home in homes if home}
    if len(packages) != 1:
        return None
    names = ", ".join(
        public_names[f"{node.module}.{a.name}"].rpartition(".")[2] + (f" as {a.asname}" if a.asname else "")
        for a in node.names
    )
    lines = _lines(module)
    start, end = _start(lines, node), _end(lines, node)
    original = _text_between(lines, start, end)
    replacement = f"from {packages.pop()} import {names}"
    return Fix(
        f"Import from `{replacement.split()[1]}`",
        (_edit(start, end, replacement),),
        "unsafe" if "#" in original else "safe",
    )


def truncated_images_refused(module: Module, match: Match, params: Mapping[str, Any]) -> Fix | None:
    """`ImageFile.LOAD_TRUNCATED_IMAGES = True` -> `= False` (unsafe: truncated files then raise)."""
    node = match.node
    if isinstance(node, ast.Assign):
        value: ast.expr = node.value
    elif isinstance(node, ast.Call) and len(node.args) == 3:
        value = node.args[2]
    else:
        return None
    lines = _lines(module)
    return Fix("Set it to `False`", (_edit(_start(lines, value), _end(lines, value), "False"),), "unsafe")


FIXERS: dict[str, Fixer] = {
    "DL001": drop_loader_argument("prefetch_factor"),
    "DL002": drop_loader_argument("persistent_workers"),
    "DL003": drop_loader_argument("shuffle"),
    "DL005": drop_loader_argument("drop_last"),
    "DL006": drop_loader_argument(
        "shuffle", "sampler", "batch_sampler", unsafe=frozenset({"sampler", "batch_sampler"})
    ),
    "DL503": truncated_images_refused,
    "DL505": weights_only_true,
    "DL506": public_import,
}


def fix_for(code: str, module: Module, match: Match, params: Mapping[str, Any]) -> Fix | None:
    """The fix of one match, or None (no fixer for the rule, or code too unusual to rewrite)."""
    fixer = FIXERS.get(code)
    return fixer(module, match, params) if fixer is not None else None


# ---- applying -------------------------------------------------------------------------------


def apply_fixes(text: str, fixes: Iterable[Fix]) -> tuple[str, list[Fix]]:
    """Apply fixes whose edits do not overlap an earlier one's; (new text, fixes applied).

    Fixes go in order of their first edit; one that touches a range another already changed
    waits for the next pass (the re-lint finds it again on the new text).
    """
    lines = _PARSER_LINE.findall(text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        if line > len(lines):
            return len(text)
        return starts[line - 1] + column - 1

    taken: list[tuple[int, int]] = []
    chosen: list[tuple[int, int, str]] = []
    applied: list[Fix] = []
    for fix in sorted(fixes, key=lambda f: min(f.edits)):
        spans = [(offset(e.line, e.column), offset(e.end_line, e.end_column), e.content) for e in fix.edits]
        if any(_overlaps(start, end, other) for start, end, _ in spans for other in taken):
            continue
        taken.extend((start, end) for start, end, _ in spans)
        chosen.extend(spans)
        applied.append(fix)
    for start, end, content in sorted(chosen, reverse=True):
        text = text[:start] + content + text[end:]
    return text, applied


def _overlaps(start: int, end: int, other: tuple[int, int]) -> bool:
    return (start < other[1] and other[0] < end) or start == end == other[0] == other[1]


@record
class FixOutcome:
    text: str  # the fixed text (the input when nothing applied)
    fixed: tuple[Finding, ...]  # the findings whose fixes were applied, in the order applied
    remaining: tuple[Finding, ...]  # what the last lint of `text` reported


def fix_source(linter: Linter, text: str, path: str, *, unsafe: bool = False) -> FixOutcome:
    """Lint, apply the applicable fixes, lint again, until nothing applicable is left.

    A pass whose result does not parse is discarded (that is a fixer bug, and the file must stay
    valid Python); what was fixed before it is kept.
    """
    fixed: list[Finding] = []
    findings = linter.check_source(text, path)
    for _ in range(MAX_PASSES):
        fixable = [f for f in findings if f.fix is not None and f.fix.applies(unsafe)]
        if not fixable:
            break
        by_fix = {id(f.fix): f for f in fixable}
        new_text, applied = apply_fixes(text, [f.fix for f in fixable if f.fix is not None])
        if not applied or not _parses(new_text, path):
            break
        text = new_text
        fixed.extend(by_fix[id(fix)] for fix in applied)
        findings = linter.check_source(text, path)
    return FixOutcome(text, tuple(fixed), tuple(findings))


def _parses(text: str, path: str) -> bool:
    try:
        ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return False
    return True


def unified_diff(before: str, after: str, path: str) -> str:
    """`--diff` output for one file: what `--fix` would change."""
    import difflib

    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
        )
    )


def drop_noqa_codes(directive: Directive, codes: set[str]) -> Fix:
    """DL900's fix: take the unused codes out of a `# noqa: ...`, or the directive out of the line."""
    line, text = directive.line, directive.line_text
    start, end = directive.span
    remaining = [code for code in directive.codes or () if code not in codes]
    if remaining:
        edit = Edit(line, start + 1, line, end + 1, f"# noqa: {', '.join(remaining)}")
        return Fix(f"Remove unused {', '.join(sorted(codes))} from the noqa directive", (edit,))
    rest = text[end : directive.comment_end].strip()
    if start == directive.comment_start and not rest:
        code_end = len(text[:start].rstrip())  # the whole comment goes, with the spaces before it
        edit = Edit(line, code_end + 1, line, directive.comment_end + 1, "")
    elif start == directive.comment_start:
        edit = Edit(line, start + 1, line, end + 1 + (len(text[end:]) - len(text[end:].lstrip(" -:;"))), "# ")
    else:  # a comment before the directive (`type: ignore`, an explanation) stays
        kept = len(text[:start].rstrip())
        edit = Edit(line, kept + 1, line, end + 1, "")
    return Fix("Remove the unused noqa directive", (edit,))


def fix_notebook(linter: Linter, document: str, path: str, *, unsafe: bool = False) -> FixOutcome:
    """`--fix` for a Jupyter notebook: each fix's edits, found on the joined code cells, are moved
    into the cell they fall in, and the notebook is written back with its own JSON indentation.

    A fix whose edits touch two cells, or a cell that is a `%%` magic, is left alone; a pass whose
    code would not parse is discarded, as for a plain file. `text` of the outcome is the notebook.
    """
    import json

    from datalint.lint.notebook import notebook_code

    notebook = json.loads(document)
    indent = _json_indent(document)
    fixed: list[Finding] = []
    for _ in range(MAX_PASSES):
        code = notebook_code(document)
        findings = linter.check_source(code.text, path)
        per_cell: dict[int, list[tuple[Fix, Finding]]] = {}
        for finding in findings:
            if finding.fix is None or not finding.fix.applies(unsafe):
                continue
            moved = _into_cell(finding.fix, code.origin)
            if moved is not None:
                per_cell.setdefault(moved[0], []).append((moved[1], finding))
        changed: list[Finding] = []
        cells = notebook["cells"]
        for number, pairs in per_cell.items():
            cell = cells[number - 1]
            source = cell.get("source", "")
            text = "".join(source) if isinstance(source, list) else str(source)
            new_text, applied = apply_fixes(text, [fix for fix, _ in pairs])
            chosen = {id(fix) for fix in applied}
            changed.extend(finding for fix, finding in pairs if id(fix) in chosen)
            cell["source"] = new_text.splitlines(keepends=True) if isinstance(source, list) else new_text
        if not changed:
            break
        new_document = json.dumps(notebook, indent=indent, ensure_ascii=False) + "\n"
        if not _parses(notebook_code(new_document).text, path):
            break
        document = new_document
        fixed.extend(_placed(finding, code.origin) for finding in changed)
    return FixOutcome(document, tuple(fixed), tuple(linter.check_notebook(document, path)))


def _into_cell(fix: Fix, origin: Callable[[int], tuple[int, int]]) -> tuple[int, Fix] | None:
    edits = []
    cells = set()
    for edit in fix.edits:
        (cell, line), (end_cell, end_line) = origin(edit.line), origin(edit.end_line)
        if cell != end_cell:
            return None
        cells.add(cell)
        edits.append(Edit(line, edit.column, end_line, edit.end_column, edit.content))
    if len(cells) != 1:
        return None
    return cells.pop(), Fix(fix.message, tuple(edits), fix.applicability)


def fix_in_cell(fix: Fix, origin: Callable[[int], tuple[int, int]], cell: int) -> Fix | None:
    """A fix found on a notebook's joined cells, in `cell`'s own lines; None if it reaches elsewhere."""
    moved = _into_cell(fix, origin)
    return moved[1] if moved is not None and moved[0] == cell else None


def _placed(finding: Finding, origin: Callable[[int], tuple[int, int]]) -> Finding:
    from datalint.records import replace

    cell, line = origin(finding.line)
    return replace(finding, line=line, end_line=line, cell=cell, fix=finding.fix)


def _json_indent(document: str) -> int:
    """The indentation the notebook was written with (nbformat's is 1), to keep the diff small."""
    for line in document.splitlines()[1:3]:
        stripped = line.lstrip(" ")
        if stripped != line:
            return len(line) - len(stripped)
    return 1
