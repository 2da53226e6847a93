"""One scan job, run as its own process: `python -m datalint.service.scanjob JOB.json`.

The service starts this in a new session (its own process group), so a scan that crashes, runs out of
memory or is SIGKILLed takes only itself down, and cancelling signals the whole group (the scan's
workers too). SIGTERM is the engine's checkpoint: what was measured is flushed and a rerun resumes.
The result (the scan's summary, or the error) is written beside the job file as `<id>.result.json`.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any


def scan_arguments(job: dict[str, Any], scan: Any) -> dict[str, Any]:
    """datalint.scan()'s keyword arguments for this job; `incremental` only where the engine has it."""
    arguments: dict[str, Any] = dict(job["scan_options"])
    arguments.update(db=job["index"], quarantine=job["quarantine"], progress="none")
    if job.get("scheduler"):
        arguments.setdefault("scheduler", job["scheduler"])
        arguments.setdefault("backend", "dask")
    mode = job.get("mode")
    accepted = inspect.signature(scan).parameters
    if mode == "full" and not job.get("resumed"):
        arguments["rescan"] = True
    if mode == "incremental" and "incremental" in accepted:
        arguments["incremental"] = True
    return {key: value for key, value in arguments.items() if key in accepted}


def source_of(job: dict[str, Any]) -> Any:
    if job.get("images"):
        from datalint.scan.images import images_description

        return images_description(folder=job["images"], labels=tuple(job["scan_options"].get("label", ())))
    return job["dataset"]


def main(argv: list[str]) -> int:
    job_path = Path(argv[0])
    result_path = job_path.with_name(job_path.stem + ".result.json")
    job = json.loads(job_path.read_text(encoding="utf-8"))
    try:
        from datalint.scan.api import scan, write_json_atomically

        summary = scan(source_of(job), **scan_arguments(job, scan))
        document: dict[str, Any] = {"ok": True, "summary": summary.to_dict()}
        incremental = getattr(summary, "incremental", None)
        if incremental is not None:
            document["incremental"] = (
                incremental if isinstance(incremental, dict | list) else str(incremental)
            )
    except KeyboardInterrupt:  # SIGTERM: the engine flushed what it measured; the service resumes later
        return 130
    except Exception as exc:  # the job's edge: the service shows this message as the job's error
        document = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    write_json_atomically(result_path, document)
    return 0 if document["ok"] else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
