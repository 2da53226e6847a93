"""Peak memory of `datalint check` on one large generated file, by the file's shape.

Each file is written to a temporary folder and checked from a fresh interpreter
(`python -m datalint check --no-cache FILE`); the child's peak RSS and CPU time (user + sys) come
from `os.wait4`. The shapes:

- `x = 1`: the issue's file, one constant bound to one name per line, to just under the size
  limit (10 MB), and the same at 48 MB (over the limit: a DL000, nothing read);
- `v123 = 123`: a constant bound to a new name per line (nothing can be left out of the tree);
- code: datalint's own package sources, concatenated until the size (classes, functions, calls).

    .venv/bin/python benchmarks/lint_memory.py                   # every shape, 10 MB and 48 MB
    .venv/bin/python benchmarks/lint_memory.py --shape ones --megabytes 2
    .venv/bin/python benchmarks/lint_memory.py --datalint /path/to/other/checkout   # before/after

Wall time is printed too, but on a shared machine only the CPU time is comparable.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 10_000_000  # the default max-file-size


def ones(size: int) -> str:
    return "x = 1\n" * (size // 6)


def distinct(size: int) -> str:
    lines, total, number = [], 0, 0
    while True:
        line = f"v{number} = {number}\n"
        if total + len(line) > size:
            return "".join(lines)
        lines.append(line)
        total += len(line)
        number += 1


def code(size: int) -> str:
    sources = [
        text if text.endswith("\n") else text + "\n"
        for path in sorted((ROOT / "datalint").rglob("*.py"))
        if "\r" not in (text := path.read_text(encoding="utf-8"))
    ]
    parts, total = [], 0
    while True:
        for text in sources:
            if total + len(text) > size:
                return "".join(parts)
            parts.append(text)
            total += len(text)


SHAPES: dict[str, Callable[[int], str]] = {"ones": ones, "distinct": distinct, "code": code}


def write_in_child(shape: str, size: int, path: Path) -> None:
    """Write the file from another process: a child's peak RSS counts what its parent held when
    it was forked, so this process never holds the text."""
    subprocess.run([sys.executable, __file__, "--write", shape, str(size), str(path)], check=True)


def measure(path: Path, checkout: Path = ROOT) -> tuple[int, float, float, float, str]:
    """(exit code, peak RSS MiB, CPU seconds, wall seconds, last report line) of one check with
    the datalint of `checkout`."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(
            # -S: without site-packages, where an editable install's import hook would pick this
            # checkout's datalint whatever PYTHONPATH says (`check` needs the standard library only)
            [sys.executable, "-S", "-m", "datalint", "check", "--no-cache", str(path)],
            cwd=path.parent,
            stdout=out,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(checkout)},
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        lines = out.read().decode("utf-8", errors="replace").splitlines()
    last = lines[-1] if lines else ""
    return child.returncode, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, wall, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=SHAPES, action="append", help="only this shape (repeatable)")
    parser.add_argument(
        "--megabytes", type=float, action="append", help="file sizes in MB (default: just under 10, and 48)"
    )
    parser.add_argument(
        "--datalint",
        type=Path,
        default=ROOT,
        help="the checkout whose datalint is measured (default: this one)",
    )
    parser.add_argument("--write", nargs=3, metavar=("SHAPE", "BYTES", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write:
        shape, size, path = args.write
        Path(path).write_text(SHAPES[shape](int(size)), encoding="utf-8")
        return 0
    sizes = [int(mb * 1_000_000) for mb in args.megabytes] if args.megabytes else [LIMIT - 16, 48_000_000]
    print("| shape | bytes | exit | peak RSS MiB | CPU s | wall s | last line of the report |")
    print("|---|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as folder:
        for shape in args.shape or list(SHAPES):
            for size in sizes:
                if size > LIMIT and shape != "ones":
                    continue  # over the limit every shape is the same DL000
                path = Path(folder) / f"{shape}.py"
                write_in_child(shape, size, path)
                code_, rss, cpu, wall, last = measure(path, args.datalint.resolve())
                shown = last.replace("|", "\\|")[:90]
                size_shown = f"{path.stat().st_size:,}"
                cells = (shape, size_shown, code_, f"{rss:.0f}", f"{cpu:.1f}", f"{wall:.1f}", shown)
                print("| " + " | ".join(map(str, cells)) + " |")
                path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
