"""`datalint docs [TOPIC]`: the documentation that ships with datalint, on the terminal.

The wheel carries `docs/*.md` as `datalint/docs/` (pyproject.toml); a checkout reads its `docs/`.
Every pointer datalint prints names this command (`datalint docs scan`), never a repository path a
pip user does not have.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from datalint.errors import UsageError

# Names a user may reach for that are documented under another topic.
ALIASES: dict[str, str] = {
    "bench": "doctor",
    "dask": "distributed",
    "torch": "training",
    "quarantine": "training",
    "rules": "worker-rules",
    "schema": "index",
    "serve": "service",
    "guard": "training",
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "docs",
        help="print datalint's documentation (the list of topics without one)",
        description="Print one topic of the documentation that ships with datalint, or list the topics.",
    )
    parser.add_argument("topic", nargs="?", metavar="TOPIC", help="a topic from the list, e.g. scan")
    parser.add_argument("--path", action="store_true", help="print the topic's file path instead")
    parser.set_defaults(run=run)


def docs_dir() -> Path:
    """`datalint/docs` in a wheel, the checkout's `docs/` in an editable install or a source tree."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "docs", package.parent / "docs"):
        if candidate.is_dir() and any(candidate.glob("*.md")):
            return candidate
    raise UsageError(f"the documentation is missing from this installation (looked in {package / 'docs'})")


def topics(folder: Path) -> dict[str, Path]:
    return {path.stem: path for path in sorted(folder.glob("*.md"))}


def title(path: Path) -> str:
    """The first heading, without its `#` and backticks: the line the list shows."""
    with path.open(encoding="utf-8") as file:
        for line in file:
            if line.startswith("#"):
                return line.lstrip("#").strip().replace("`", "")
    return ""


def find_topic(name: str, available: dict[str, Path]) -> Path:
    from datalint.text import did_you_mean

    stem = Path(name).stem.lower() if name.lower().endswith(".md") else name.lower()
    stem = ALIASES.get(stem, stem)
    if stem in available:
        return available[stem]
    hint = did_you_mean(stem, [*available, *ALIASES])
    raise UsageError(f"no docs topic {name!r}{hint}; `datalint docs` lists them")


def run(args: argparse.Namespace) -> int:
    available = topics(docs_dir())
    if args.topic is None:
        width = max(map(len, available))
        lines = [f"  {name:<{width}}  {title(path)}" for name, path in available.items()]
        sys.stdout.write("datalint docs TOPIC prints one of:\n" + "\n".join(lines) + "\n")
        return 0
    path = find_topic(args.topic, available)
    sys.stdout.write(f"{path}\n" if args.path else path.read_text(encoding="utf-8"))
    return 0
