"""The service tests run a real `datalint serve` (uvicorn) on a loopback port; nothing leaves 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from service_server import Server, dataset_table  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_client_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own list cache and spool folder, and no token from the environment."""
    monkeypatch.setenv("DATALINT_CACHE_DIR", str(tmp_path / "client-cache"))
    monkeypatch.setenv("DATALINT_SPOOL_DIR", str(tmp_path / "client-spool"))
    monkeypatch.delenv("DATALINT_TOKEN", raising=False)


@pytest.fixture(scope="module")
def scanned_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A service with dataset `train` (60 samples, every 10th raising) scanned once."""
    server = Server(tmp_path_factory.mktemp("service"), dataset_table("train")).start()
    try:
        job = server.request("POST", "/v1/datasets/train/scans").json()
        done = server.wait_job(job["id"])
        assert done["state"] == "succeeded", done
        yield server
    finally:
        server.stop()
