"""The service's datasets and their files: `<data-dir>/datasets/<name>/index.db` and `quarantine.json`.

Both are today's formats (`datalint docs index`), so `datalint report`, `datalint quarantine`, datasette
and `load_quarantine()` work on them directly. The list each dataset serves is kept by
`datalint.service.lists` (published snapshots, rebuilt off the request path).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datalint.index import read
from datalint.service.config import ConfigError, DatasetConfig, ServiceConfig, parse_dataset, valid_name
from datalint.service.lists import ListKeeper

logger = logging.getLogger("datalint.service")

REGISTERED_FILE = "datasets.json"  # datasets registered through the API, beside the config's


@dataclass(frozen=True)
class DatasetStats:
    samples: int
    quarantined: int
    last_scan: dict[str, Any] | None
    guard_failures: int


class Registry:
    """Datasets by name, their folders, and (`lists`) the list each one serves."""

    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.root = config.data_dir / "datasets"
        self._lock = threading.Lock()
        self._datasets: dict[str, DatasetConfig] = {d.name: d for d in config.datasets}
        self._registered_path = config.data_dir / REGISTERED_FILE
        for dataset in self._load_registered():
            self._datasets.setdefault(dataset.name, dataset)
        self.lists = ListKeeper(self.index_path, self.names)

    # ---- datasets ----------------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self._datasets)

    def get(self, name: str) -> DatasetConfig | None:
        return self._datasets.get(name) if valid_name(name) else None

    def register(self, entry: dict[str, Any]) -> DatasetConfig:
        """Add a dataset (an API request's body, the keys of a [[datasets]] table); persisted."""
        dataset = parse_dataset(entry, "request", Path.cwd())
        with self._lock:
            if dataset.name in self._datasets:
                raise ConfigError(f"dataset {dataset.name!r} is registered already")
            self._datasets[dataset.name] = dataset
            registered = [d for d in self._load_registered()] + [dataset]
            self._write_registered(registered)
        return dataset

    def _load_registered(self) -> list[DatasetConfig]:
        if not self._registered_path.is_file():
            return []
        try:
            entries = json.loads(self._registered_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{self._registered_path}: cannot read the registered datasets: {exc}"
            ) from None
        if not isinstance(entries, list):
            raise ConfigError(f"{self._registered_path}: expected a list of datasets")
        return [parse_dataset(_as_table(e), str(self._registered_path), Path("/")) for e in entries]

    def _write_registered(self, datasets: list[DatasetConfig]) -> None:
        from datalint.scan.api import write_json_atomically

        write_json_atomically(self._registered_path, [d.to_dict() for d in datasets])

    # ---- files --------------------------------------------------------------------------------

    def folder(self, name: str) -> Path:
        # Names are validated (one safe path segment); the check here keeps that true for any caller.
        if not valid_name(name):
            raise ValueError(f"not a dataset name: {name!r}")
        return self.root / name

    def index_path(self, name: str) -> Path:
        return self.folder(name) / "index.db"

    def quarantine_path(self, name: str) -> Path:
        return self.folder(name) / "quarantine.json"

    def stats(self, name: str) -> DatasetStats:
        path = self.index_path(name)
        if not path.is_file():
            return DatasetStats(0, 0, None, 0)
        with read.reading(path) as connection:
            totals = read.totals(connection)
        run = totals.last_scan
        last = None
        if run is not None:
            last = {
                "id": run.id,
                "kind": run.kind,
                "started": run.started,
                "finished": run.finished,
                "length": run.length,
            }
        return DatasetStats(totals.samples, totals.quarantined, last, totals.failures)


def _as_table(entry: Any) -> Any:
    """A saved DatasetConfig.to_dict() back as the keys of a [[datasets]] table."""
    if not isinstance(entry, dict):
        return entry
    table = {"name": entry.get("name")}
    for key in ("images", "dataset"):
        if entry.get(key):
            table[key] = entry[key]
    for key, value in (entry.get("scan_options") or {}).items():
        table[key.replace("_", "-")] = value
    if entry.get("watch"):
        table["watch"] = True
    if entry.get("interval"):
        table["interval"] = entry["interval"]
    for key, value in (entry.get("watch_options") or {}).items():
        table[key.replace("_", "-")] = value
    return table
