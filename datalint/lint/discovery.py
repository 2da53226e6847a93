"""Which files `datalint check` reads: named files as given, and under named folders every `.py`
and `.ipynb` file that no exclude glob, default folder or `.gitignore` rule leaves out.

Excludes come from the Config that governs each folder (the nearest pyproject.toml), so a
sub-project's own `exclude` applies inside it. `.gitignore` files (and `.git/info/exclude`)
are read the way git reads them, from the repository's top down to each walked folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from datalint.config import DEFAULT_EXCLUDES, Config
from datalint.errors import UsageError
from datalint.records import record

SOURCE_SUFFIXES: tuple[str, ...] = (".py", ".ipynb")
# Default folders that are often real packages too (`dist` of a distribution tool, `build` steps):
# skipped only when they are not packages, i.e. hold no __init__.py.
PACKAGE_NAMED_DEFAULTS: frozenset[str] = frozenset({"build", "dist"})

ConfigFor = Callable[[Path], Config]


@record
class IgnoreRule:
    base: str  # the folder of the .gitignore, POSIX, absolute
    pattern: re.Pattern[str]
    negated: bool
    folders_only: bool


def gitignore_rules(text: str, base: Path) -> list[IgnoreRule]:
    """The rules of one .gitignore file (gitignore(5): `!`, trailing `/`, anchoring, `**`)."""
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if raw.endswith("\\ "):
            line += " "
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        if line.startswith(("\\#", "\\!")):
            line = line[1:]
        folders_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = _glob_regex(line)
        regex = body if anchored else f"(?:.*/)?{body}"
        rules.append(IgnoreRule(base.as_posix(), re.compile(f"{regex}\\Z", re.DOTALL), negated, folders_only))
    return rules


def _glob_regex(glob: str) -> str:
    out, index = [], 0
    while index < len(glob):
        char = glob[index]
        if glob.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if glob.startswith("/**", index) and index + 3 == len(glob):
            out.append("/.*")
            index += 3
            continue
        if glob.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = glob.find("]", index + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                content = glob[index + 1 : end].replace("\\", "\\\\")
                if content.startswith("!"):
                    content = "^" + content[1:]
                out.append(f"[{content}]")
                index = end
        elif char == "\\" and index + 1 < len(glob):
            index += 1
            out.append(re.escape(glob[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def is_ignored(rules: Sequence[IgnoreRule], path: Path, is_folder: bool) -> bool:
    """git's answer for one path: the last matching rule decides (a `!` rule re-includes)."""
    absolute = path.as_posix()
    ignored = False
    for rule in rules:
        if rule.folders_only and not is_folder:
            continue
        if not absolute.startswith(rule.base + "/"):
            continue
        if rule.pattern.match(absolute[len(rule.base) + 1 :]):
            ignored = not rule.negated
    return ignored


def _repository_top(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _read_rules(folder: Path) -> list[IgnoreRule]:
    try:
        text = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return gitignore_rules(text, folder)


def _inherited_rules(folder: Path) -> list[IgnoreRule]:
    """The rules that apply on entering `folder`: .git/info/exclude and .gitignore files above it."""
    top = _repository_top(folder)
    if top is None:
        return []
    rules: list[IgnoreRule] = []
    try:
        exclude = (top / ".git" / "info" / "exclude").read_text(encoding="utf-8", errors="replace")
        rules.extend(gitignore_rules(exclude, top))
    except OSError:
        pass
    chain = [folder, *folder.parents]
    for ancestor in reversed(chain[1 : chain.index(top) + 1] if top in chain else []):
        rules.extend(_read_rules(ancestor))
    return rules


def iter_source_files(paths: Sequence[Path | str], config_for: ConfigFor) -> Iterator[Path]:
    """Files to lint, sorted per folder, no repeats; a path that does not exist is a usage error.

    A named file is linted whatever its extension (pre-commit passes scripts without one)
    unless an `exclude` glob names it; folders are walked for `.py` and `.ipynb` files.
    """
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise UsageError(f"{given}: no such file or directory")
        if path.is_dir():
            candidates = walk(path, config_for)
        else:
            candidates = iter([path]) if not config_for(path).is_excluded(path) else iter(())
        for candidate in candidates:
            key = candidate.resolve()
            if key not in seen:
                seen.add(key)
                yield candidate


def walk(folder: Path, config_for: ConfigFor) -> Iterator[Path]:
    absolute_root = folder.resolve()
    config = config_for(folder)
    inherited = _inherited_rules(absolute_root) if config.respect_gitignore else []
    rules_at: dict[str, list[IgnoreRule]] = {}
    unlistable: list[Path] = []
    for current, dirs, files in _walk_tree(folder, unlistable):
        base = Path(current)
        absolute = absolute_root / os.path.relpath(current, folder)
        absolute = Path(os.path.normpath(absolute))
        config = config_for(base)
        parent_rules = rules_at.get(absolute.parent.as_posix(), inherited)
        rules = [*parent_rules, *_read_rules(absolute)] if config.respect_gitignore else []
        rules_at[absolute.as_posix()] = rules
        dirs[:] = sorted(
            d
            for d in dirs
            if not _skipped_folder(base / d, config)
            and not (rules and is_ignored(rules, absolute / d, is_folder=True))
        )
        for name in sorted(files):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            if rules and is_ignored(rules, absolute / name, is_folder=False):
                continue
            if not config.is_excluded(base / name):
                yield base / name
    yield from unlistable  # a folder that cannot be listed: reading it fails, and that is its DL000


def _walk_tree(top: Path, unlistable: list[Path]) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(top)` (top-down, `dirs` pruned in place) without recursion: a tree may be 10,000 deep.

    Python 3.11's `os.walk` recurses once per level and skips a folder it cannot list in silence;
    here such a folder goes to `unlistable`.
    """
    pending = [os.fspath(top)]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as listing:
                entries = list(listing)
        except OSError:
            unlistable.append(Path(current))
            continue
        dirs: list[str] = []
        files: list[str] = []
        for entry in entries:
            (dirs if _is_folder(entry) else files).append(entry.name)
        yield current, dirs, files
        pending.extend(os.path.join(current, name) for name in reversed(dirs))


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:  # vanished, or cannot be looked at: listed as a file, whose read says why
        return False


def _skipped_folder(folder: Path, config: Config) -> bool:
    name = folder.name
    if config.default_excludes and (name in DEFAULT_EXCLUDES or name.endswith(".egg-info")):
        if name in PACKAGE_NAMED_DEFAULTS and (folder / "__init__.py").is_file():
            return config.is_excluded(folder)  # a real package named like a build folder is linted
        return True
    return config.is_excluded(folder)
