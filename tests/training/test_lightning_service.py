"""QuarantineCallback against a real `datalint serve`: the list by URL, and the guard's failures from
Lightning's loader workers posted to the service's index."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("lightning")
pytest.importorskip("fastapi")

from torch.utils.data import DataLoader

from datalint.index import store
from datalint.lightning import QuarantineCallback
from tests.training.lightning_job import LENGTH, Numbered, Recorder, seen, trainer

SERVICE_TESTS = Path(__file__).resolve().parents[1] / "service"
sys.path.insert(0, str(SERVICE_TESTS))

from service_server import Server, dataset_table  # noqa: E402


def guard_failures(server: Server, name: str) -> list[int]:
    db = store.open_index(server.folder / "state" / "datasets" / name / "index.db", create=False)
    try:
        rows = db.execute(
            "SELECT idx FROM samples WHERE run_id IN (SELECT id FROM runs WHERE kind = 'guard') ORDER BY idx"
        )
        return [int(row[0]) for row in rows]
    finally:
        db.close()


def test_the_list_by_url_and_the_guards_failures_from_lightnings_workers_reach_the_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATALINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DATALINT_SPOOL_DIR", str(tmp_path / "spool"))
    server = Server(tmp_path, dataset_table("train", n=LENGTH, bad_every=10)).start()
    try:
        job = server.request("POST", "/v1/datasets/train/scans").json()
        assert server.wait_job(job["id"])["state"] == "succeeded"
        monkeypatch.setenv("DATALINT_TOKEN", server.tokens["reader"])
        url = f"{server.base}/v1/datasets/train"
        failing = {11, 26}
        loader = DataLoader(Numbered(LENGTH, frozenset(failing)), batch_size=4, shuffle=True, num_workers=2)
        writer = server.tokens["writer"]
        callback = QuarantineCallback(url, record=url, token=writer, spool=tmp_path / "spool")
        trainer(callback, 1, accelerator="cpu", devices=1).fit(Recorder(tmp_path, loader))
        trained = seen(tmp_path, 0)[0]
        quarantined = {0, 10, 20, 30}  # what the service's scan listed
        assert len(trained) == LENGTH - len(quarantined)
        assert not set(trained) & (quarantined | failing)
        deadline = time.monotonic() + 30
        while guard_failures(server, "train") != sorted(failing) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert guard_failures(server, "train") == sorted(failing)
    finally:
        server.stop()
