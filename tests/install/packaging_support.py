"""Helpers for the packaging tests: the checkout, real git repositories, commands run as a user runs them."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What `pip install .` of a hook repository needs: the package, its catalog and docs, the metadata.
PACKAGE_FILES = ("datalint", "rules", "docs", "README.md", "pyproject.toml", ".pre-commit-hooks.yaml")

BAD_PYTHON = "from torch.utils.data import DataLoader\n\nloader = DataLoader([], prefetch_factor=2)\n"


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without PYTHONPATH, so an installed datalint is the one that runs."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    return {**env, **extra}


def run(command: list[str], cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=clean_env(**env)
    )


def git(*args: str, cwd: Path) -> str:
    identity = ["-c", "user.name=datalint tests", "-c", "user.email=tests@datalint.invalid"]
    done = subprocess.run(
        ["git", *identity, *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def copy_package(target: Path) -> Path:
    """A copy of this checkout's package files in `target` (no caches, no build output)."""
    target.mkdir(parents=True, exist_ok=True)
    for name in PACKAGE_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(source, target / name)
    return target


def hook_repository(target: Path) -> tuple[Path, str]:
    """This checkout's package as a one-commit git repository: (its path, the commit)."""
    copy_package(target)
    git("init", "-q", cwd=target)
    git("add", "-A", cwd=target)
    git("commit", "-qm", "datalint", cwd=target)
    return target, git("rev-parse", "HEAD", cwd=target)


def jpeg_bytes(seed: int = 0) -> bytes:
    """A real 64x64 JPEG (random pixels, so it does not compress to almost nothing)."""
    import numpy as np
    from PIL import Image

    pixels = (np.random.default_rng(seed).random((64, 64, 3)) * 255).astype("uint8")
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=90)
    return out.getvalue()


def dataset_repository(target: Path) -> Path:
    """A user's repository with staged files: bad loader code, a truncated JPEG, a valid one, notes."""
    target.mkdir(parents=True, exist_ok=True)
    (target / "train.py").write_text(BAD_PYTHON)
    (target / "notes.md").write_text("DataLoader(ds, prefetch_factor=2)\n")  # not Python, not an image
    images = target / "images"
    images.mkdir()
    whole = jpeg_bytes()
    (images / "good.jpg").write_bytes(whole)
    (images / "truncated.jpg").write_bytes(whole[: len(whole) // 2])
    git("init", "-q", cwd=target)
    git("add", "-A", cwd=target)
    return target


def tree_bytes(folder: Path) -> int:
    return sum(path.lstat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())
