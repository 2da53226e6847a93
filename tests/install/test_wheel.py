"""The wheel as a new user gets it: built from this checkout, installed without extras in a fresh venv.

The base install must lint, carry its docs and catalog, install nothing else, and say which extra
to install for everything that needs one. Figures: benchmarks/README.md, "install size".
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging_support import BAD_PYTHON, ROOT, run, tree_bytes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

INSTALLER = {"pip", "setuptools", "wheel"}  # what `python -m venv` puts in every environment


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding only the wheel built from this checkout (no extras)."""
    work = tmp_path_factory.mktemp("wheel")
    built = run([sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(ROOT)], work)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (work / "dist").glob("torch_datalint-*.whl")
    environment = work / "venv"
    created = run([sys.executable, "-m", "venv", str(environment)], work)
    assert created.returncode == 0, created.stderr
    installed = run([str(environment / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], work)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return environment


def site_packages(venv: Path) -> Path:
    version = sysconfig.get_python_version()
    return venv / "lib" / f"python{version}" / "site-packages"


def test_the_base_install_is_datalint_alone_and_lints(venv: Path, tmp_path: Path) -> None:
    listed = run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"], tmp_path)
    names = {entry["name"].lower() for entry in json.loads(listed.stdout)}
    assert names - INSTALLER == {"torch-datalint"}  # no numpy, Pillow, OpenCV, torch...
    package = site_packages(venv) / "datalint"
    # datalint's own code, rules and docs, compiled (5.0 MB at 0.2): a cap that catches data or a
    # vendored library shipped by mistake, with room for the code to grow.
    assert tree_bytes(package) < 8_000_000
    assert tree_bytes(venv) < 40_000_000  # the venv, pip and setuptools included

    (tmp_path / "train.py").write_text(BAD_PYTHON)
    checked = run([str(venv / "bin" / "datalint"), "check", "train.py"], tmp_path)
    assert checked.returncode == 1, checked.stderr
    assert "train.py:3:10: DL001" in checked.stdout
    version = run([str(venv / "bin" / "datalint"), "--version"], tmp_path)
    assert version.stdout.strip() == "datalint 0.1.0"


def test_commands_that_need_an_extra_name_it_in_one_line_and_exit_2(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "cat.jpg").write_bytes(b"\xff\xd8\xff")
    commands = {
        "scan": (["scan", "cat.jpg"], "[scan]"),
        "report": (["report", "x.db", "-o", "r.html"], "[scan]"),
        "quarantine": (["quarantine", "x.db"], "[scan]"),
        "bench": (["bench", "--dataset", "m:ds", "--batch-size", "4"], "[torch]"),
    }
    for name, (argv, extra) in commands.items():
        result = run([str(venv / "bin" / "datalint"), *argv], tmp_path)
        assert result.returncode == 2, (name, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (name, lines)
        assert f"`datalint {name}` needs the {extra} extra" in lines[0]
        assert f"pip install 'torch-datalint{extra}'" in lines[0]
        assert "internal error" not in result.stderr
    assert not (tmp_path / ".datalint").exists()  # refused before any work


def test_import_datalint_torch_raises_an_import_error_with_the_install_line(
    venv: Path, tmp_path: Path
) -> None:
    probe = (
        "try:\n"
        "    import datalint.torch\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, isinstance(exc, ModuleNotFoundError), exc.name, exc, sep='|')\n"
    )
    result = run([str(venv / "bin" / "python"), "-c", probe], tmp_path)
    kind, not_found, name, message = result.stdout.strip().split("|")
    assert (kind, not_found, name) == ("MissingExtraError", "True", "torch")
    assert message.startswith("`import datalint.torch` needs the [torch] extra (missing: torch")
    assert message.endswith("install it with: pip install 'torch-datalint[torch]'")


def test_the_docs_and_the_catalog_travel_in_the_wheel(venv: Path, tmp_path: Path) -> None:
    datalint = str(venv / "bin" / "datalint")
    listing = run([datalint, "docs"], tmp_path).stdout
    shipped = {path.stem for path in (ROOT / "docs").glob("*.md")}
    assert shipped <= {line.split()[0] for line in listing.splitlines()[1:]}
    where = run([datalint, "docs", "scan", "--path"], tmp_path).stdout.strip()
    assert Path(where).is_relative_to(site_packages(venv))
    assert run([datalint, "docs", "scan"], tmp_path).stdout == (ROOT / "docs" / "scan.md").read_text()
    rule = run([datalint, "rule", "DL001"], tmp_path)
    assert rule.returncode == 0 and "prefetch-factor-without-workers" in rule.stdout


def test_installed_from_a_checkout_the_install_line_names_the_checkout(tmp_path: Path) -> None:
    # `pip install .` from a checkout, as the README says to before the first release.
    environment = tmp_path / "venv"
    assert run([sys.executable, "-m", "venv", "--without-pip", str(environment)], tmp_path).returncode == 0
    python = str(environment / "bin" / "python")
    installed = run([sys.executable, "-m", "pip", "--python", python, "install", "-q", str(ROOT)], tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    (tmp_path / "cat.jpg").write_bytes(b"\xff\xd8\xff")
    result = run([str(environment / "bin" / "datalint"), "scan", "cat.jpg"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.rstrip().endswith(f"install it with: pip install '{ROOT}[scan]'")
