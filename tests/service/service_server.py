"""A real `datalint serve` on a free loopback port, as its own process (so it can be SIGKILLed)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from datalint.service import auth

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), env.get("PYTHONPATH", "")])
    env.pop("DATALINT_TOKEN", None)
    return env


def add_token(tokens: Path, name: str, scopes: str) -> str:
    """A token added by the library `datalint serve token add` calls; in this process, since the
    command itself is tested in test_service_cli.py and a child per token cost each server ~1 s."""
    created = datetime.now(UTC).replace(microsecond=0).isoformat()
    return auth.add_token(tokens, name, auth.parse_scopes(scopes), created)


class Server:
    """The service of `config_text` in `folder`; tokens named admin, writer and reader."""

    def __init__(
        self, folder: Path, datasets: str, *, tokens: bool = True, service: str = "", data_dir: str = "state"
    ) -> None:
        self.folder = folder
        self.port = free_port()
        self.tokens: dict[str, str] = {}
        lines = ["[service]", f"data-dir = {json.dumps(data_dir)}", f"port = {self.port}", service]
        if tokens:
            path = folder / "tokens.toml"
            for name, scopes in (("admin", "admin"), ("writer", "write"), ("reader", "read")):
                self.tokens[name] = add_token(path, name, scopes)
            lines.append('tokens = "tokens.toml"')
        self.config = folder / "datalint-service.toml"
        self.config.write_text("\n".join(lines) + "\n" + datasets, encoding="utf-8")
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / "service.log"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        log = self.log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "datalint", "serve", "--config", str(self.config)],
            cwd=self.folder,
            stdout=log,
            stderr=log,
            env=environment(),
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited ({self.process.returncode}):\n{self.log.read_text()}")
            try:
                if httpx.get(self.base + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"the service did not answer within 30 s:\n{self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL the service process only (a scan child in its own session survives, as in a crash)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def request(self, method: str, path: str, token: str | None = "admin", **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {self.tokens.get(token, token)}"
        return httpx.request(method, self.base + path, headers=headers, timeout=30, **kwargs)

    def wait_job(
        self, job_id: str, states: tuple[str, ...] = ("succeeded", "failed", "cancelled"), timeout: float = 90
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.request("GET", f"/v1/scans/{job_id}", token="reader").json()
            if job["state"] in states:
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} still {job['state']} after {timeout} s:\n{self.log.read_text()}")


def dataset_table(name: str, n: int = 60, bad_every: int = 10, delay: float = 0.0, workers: int = 1) -> str:
    spec = f"{HERE / 'service_data.py'}:make({n}, {bad_every}, {delay})"
    return f'\n[[datasets]]\nname = "{name}"\ndataset = "{spec}"\nworkers = {workers}\ntimeout = 20\n'
