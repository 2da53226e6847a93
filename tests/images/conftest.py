"""Shared fixtures for the image-scan tests: the corpus generator's small mode, generated once."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from images_support import corpus_module


@pytest.fixture(scope="session")
def corpus() -> ModuleType:
    return corpus_module()


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory: pytest.TempPathFactory, corpus: ModuleType) -> tuple[Path, list[Any]]:
    """(images folder, manifest rows) of the small corpus: one or two files of every kind."""
    out = tmp_path_factory.mktemp("corpus")
    rows = corpus.generate_corpus(out, seed=1234, small=True)
    return out / "images", rows
