"""The install docs say what a new user on a CPU-only box needs: torch first, from the index they
choose, and the constraints form that `make demo` and `make test` install with."""

from __future__ import annotations

import re
import shlex

import pytest
from packaging_support import ROOT

INSTALL_DOCS = [ROOT / "README.md", ROOT / "docs" / "install.md"]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def pip_installs(path) -> list[list[str]]:
    """The `pip install` lines of a page's code blocks, as the shell splits them."""
    blocks = re.findall(r"```(?:sh|console|bash)\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
    lines = [line.strip().removeprefix("$ ") for block in blocks for line in block.splitlines()]
    return [shlex.split(line, comments=True) for line in lines if line.startswith("pip install")]


def installs_torch_extra(words: list[str]) -> bool:
    return any(re.search(r"\[[^\]]*\b(torch|all)\b", word) for word in words)


@pytest.mark.parametrize("page", INSTALL_DOCS, ids=lambda p: p.name)
def test_a_cpu_torch_comes_before_the_torch_extra(page) -> None:
    installs = pip_installs(page)
    torch_first = [i for i, words in enumerate(installs) if words[2:3] == ["torch"] and CPU_INDEX in words]
    extra = [i for i, words in enumerate(installs) if installs_torch_extra(words)]
    assert torch_first, f"{page.name}: no `pip install torch --index-url {CPU_INDEX}`"
    assert extra and min(torch_first) < min(extra), f"{page.name}: the torch extra is installed before torch"


@pytest.mark.parametrize("page", INSTALL_DOCS, ids=lambda p: p.name)
def test_the_makefiles_constraints_form_is_shown(page) -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "-c constraints.txt" in makefile  # the form documented is the one the Makefile runs
    assert any(words[2:4] == ["-c", "constraints.txt"] for words in pip_installs(page)), page.name
