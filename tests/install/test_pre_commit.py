"""The pre-commit hooks as documented, run by the real pre-commit on real git repositories.

A user's repository stages loader code with a DataLoader bug, a truncated JPEG, a valid JPEG and a
Markdown file; `datalint` must fail on the code, `datalint-images` on the truncated image only.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from packaging_support import ROOT, dataset_repository, git, hook_repository, run, tree_bytes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PRE_COMMIT = [sys.executable, "-m", "pre_commit"]


def documented_configs() -> list[str]:
    """The `.pre-commit-config.yaml` blocks of `datalint docs pre-commit`, in order."""
    text = (ROOT / "docs" / "pre-commit.md").read_text()
    return [block for block in re.findall(r"```yaml\n(.*?)```", text, re.S) if "repos:" in block]


def assert_both_hooks_judged(output: str) -> None:
    assert "train.py:3:10: DL001" in output
    assert "notes.md" not in output
    worst = output[output.index("worst samples:") :]
    assert "images/truncated.jpg" in worst and "corrupt" in worst
    assert "images/good.jpg" not in worst
    assert "2 image file(s)" in output


def test_try_repo_runs_both_hooks_on_the_staged_files(tmp_path: Path) -> None:
    hook, _ = hook_repository(tmp_path / "hook")
    user = dataset_repository(tmp_path / "user")
    result = run(
        [*PRE_COMMIT, "try-repo", str(hook), "--all-files"],
        user,
        timeout=540,
        PRE_COMMIT_HOME=str(tmp_path / "cache"),
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "datalint check" in output and "datalint scan (image files)" in output
    assert_both_hooks_judged(output)
    # The scan's index went to .datalint/, which keeps itself out of git.
    assert (user / ".datalint" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert git("status", "--porcelain", "--untracked-files=all", cwd=user).find(".datalint") == -1


def test_the_documented_config_with_a_commit_rev_installs_a_small_environment(tmp_path: Path) -> None:
    hook, commit = hook_repository(tmp_path / "hook")
    user = dataset_repository(tmp_path / "user")
    remote = documented_configs()[0]
    config = re.sub(r"repo: \S+", f"repo: {hook}", remote, count=1)
    config = re.sub(r"rev: \S+", f"rev: {commit}", config, count=1)
    (user / ".pre-commit-config.yaml").write_text(config)
    cache = tmp_path / "cache"
    command = [*PRE_COMMIT, "run", "datalint", "--all-files"]
    result = run(command, user, timeout=540, PRE_COMMIT_HOME=str(cache))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train.py:3:10: DL001" in result.stdout
    (environment,) = cache.glob("repo*/py_env-*")
    assert tree_bytes(environment) < 20_000_000  # the hook's whole virtualenv, pip included


def test_the_documented_local_hooks_use_the_datalint_on_path(tmp_path: Path) -> None:
    installed = shutil.which("datalint", path=str(Path(sys.executable).parent))
    if installed is None:
        pytest.skip("no datalint command beside this interpreter (install the checkout: pip install -e .)")
    user = dataset_repository(tmp_path / "user")
    (user / ".pre-commit-config.yaml").write_text(documented_configs()[1])
    path = f"{Path(installed).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    # The command beside this interpreter runs this checkout's code (an editable install, or PYTHONPATH).
    env = {"PATH": path, "PRE_COMMIT_HOME": str(tmp_path / "cache")}
    result = run([*PRE_COMMIT, "run", "--all-files"], user, timeout=300, **env, PYTHONPATH=str(ROOT))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert_both_hooks_judged(output)
