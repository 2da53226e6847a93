"""Start a real `datalint serve` on a free loopback port for the service benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


class Service:
    def __init__(self, folder: Path, datasets: str, extra: str = "", level: str = "info") -> None:
        """`extra`: more [service] keys (TOML lines)."""
        self.folder = folder
        self.port = free_port()
        tokens = folder / "tokens.toml"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "datalint",
                "serve",
                "token",
                "add",
                "bench",
                "--scopes",
                "admin",
                "--tokens",
                str(tokens),
            ],
            capture_output=True,
            text=True,
            env=environment(),
            check=True,
        )
        self.token = done.stdout.strip()
        self.config = folder / "datalint-service.toml"
        self.config.write_text(
            f'[service]\ndata-dir = "state"\nport = {self.port}\ntokens = "tokens.toml"\n'
            + f'log-level = "{level}"\n'
            + extra
            + datasets
        )
        self.start()

    def start(self) -> None:
        """Start the service process (again, after `stop()`: the same config, state and token)."""
        log = (self.folder / "service.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "datalint", "serve", "--config", str(self.config)],
            cwd=self.folder,
            stdout=log,
            stderr=log,
            env=environment(),
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("the service did not start")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def cpu_seconds(self) -> float:
        """The service process's CPU time so far (user + system), from /proc."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def log(self) -> str:
        return (self.folder / "service.log").read_text()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
