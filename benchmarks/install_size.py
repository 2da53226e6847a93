"""How big is what a user installs? The wheel, a fresh venv without extras, the pre-commit hooks' envs.

Builds the wheel from this checkout, installs it without extras into a fresh `python -m venv`, and
runs both pre-commit hooks of `.pre-commit-hooks.yaml` through a `.pre-commit-config.yaml` whose
`rev:` is a commit (the documented form before the first tag), so the hook environments stay in
PRE_COMMIT_HOME to be measured. Needs the package index (build isolation, the hooks' packages).

    .venv/bin/python benchmarks/install_size.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FILES = ("datalint", "rules", "docs", "README.md", "pyproject.toml", ".pre-commit-hooks.yaml")
INSTALLER = ("pip", "setuptools", "pkg_resources", "_distutils_hack", "wheel")


def tree_bytes(folder: Path) -> int:
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:.1f} MB"


def run(command: list[str], cwd: Path, **env: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**clean, **env}, timeout=900)
    return time.perf_counter() - started, done


def git(cwd: Path, *args: str) -> str:
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@datalint.invalid"]
    return subprocess.run(["git", *ident, *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="datalint-install-"))
    try:
        build = [sys.executable, "-m", "build", "--wheel", "--outdir", str(work), str(ROOT)]
        seconds, built = run(build, work)
        assert built.returncode == 0, built.stderr
        (wheel,) = work.glob("*.whl")
        print(f"wheel {wheel.name}: {wheel.stat().st_size / 1e3:.0f} kB (built in {seconds:.1f} s)")

        venv = work / "venv"
        run([sys.executable, "-m", "venv", str(venv)], work)
        seconds, _ = run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], work)
        packages = site_packages(venv)
        installer = sum(tree_bytes(packages / name) for name in INSTALLER if (packages / name).exists())
        print(
            f"fresh venv, no extras: {mb(tree_bytes(venv))} in all; pip and setuptools {mb(installer)}; "
            f"datalint {mb(tree_bytes(packages / 'datalint'))} (pip install {seconds:.1f} s)"
        )

        hook = work / "hook"
        hook.mkdir()
        for name in PACKAGE_FILES:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, hook / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(source, hook / name)
        git(hook, "init", "-q")
        git(hook, "add", "-A")
        git(hook, "commit", "-qm", "datalint")
        commit = git(hook, "rev-parse", "HEAD").strip()
        user = work / "user"
        user.mkdir()
        (user / "train.py").write_text("from torch.utils.data import DataLoader\n")
        (user / "cat.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        config = (
            f"repos:\n  - repo: {hook}\n    rev: {commit}\n"
            "    hooks:\n      - id: datalint\n      - id: datalint-images\n"
        )
        (user / ".pre-commit-config.yaml").write_text(config)
        git(user, "init", "-q")
        git(user, "add", "-A")
        cache = work / "cache"
        for hook_id in ("datalint", "datalint-images"):
            before = {p.name for p in cache.glob("repo*/py_env-*")}
            first, _ = run(
                [sys.executable, "-m", "pre_commit", "run", hook_id, "--all-files"],
                user,
                PRE_COMMIT_HOME=str(cache),
            )
            again, _ = run(
                [sys.executable, "-m", "pre_commit", "run", hook_id, "--all-files"],
                user,
                PRE_COMMIT_HOME=str(cache),
            )
            (environment,) = [p for p in cache.glob("repo*/py_env-*") if p.name not in before] or sorted(
                cache.glob("repo*/py_env-*"), key=lambda p: p.stat().st_mtime
            )[-1:]
            print(
                f"pre-commit hook {hook_id}: environment {mb(tree_bytes(environment))}; "
                f"first run {first:.1f} s (installs it), second {again:.1f} s"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
