"""The 304 of a quarantine list from `datalint serve`, per server stack, with the client in its own process.

    python benchmarks/service_304.py [--requests 20000] [--rounds 4] [--entries 1000]
                                     [--stacks h11/asyncio,httptools/asyncio,httptools/uvloop]
                                     [--connect keep-alive|each]

Target: a conditional GET (`If-None-Match` naming the published ETag) answered with 304 in under
5 ms at p99. One service is started per stack (`[service] http` / `loop`), all on the same small
index (a 304 never touches the list's bytes, so its size does not matter), and all left running; a
round sends `--requests / --rounds` requests to each service in a shuffled order, so every stack
sees the same neighbours. The client is a separate process that writes the request bytes on a raw
socket and reads the 304's head (a keep-alive connection, or a new one per request as datalint's
urllib client makes): nothing of an HTTP library's own cost is in the figure, and its CPU time is
reported beside the service's (both from the kernel's accounting of each process). The first 1% of
each round is warm-up and dropped. Printed: p50/p90/p99/p99.9/max in ms, CPU per request of the
client and the service, and the load average before and after (2 cores shared here).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from service_common import Service, load, percentile
from service_lists import write_index

CLIENT_FLAG = "--client-run"


def client_run(port: int, token: str, etag: str, requests: int, connect: str) -> None:
    """The measuring client (its own process): one JSON line of latencies (s) and its CPU seconds."""
    request = (
        f"GET /v1/datasets/big/quarantine HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {token}\r\nIf-None-Match: {etag}\r\nAccept-Encoding: gzip\r\n\r\n"
    ).encode()
    sock = None
    times = []
    cpu = time.process_time()
    for _ in range(requests):
        started = time.perf_counter()
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(request)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                raise RuntimeError("the service closed the connection")
            head += chunk
        times.append(time.perf_counter() - started)
        if not head.startswith(b"HTTP/1.1 304"):
            raise RuntimeError(f"expected a 304, got {head[:60]!r}")
        if connect == "each":
            sock.close()
            sock = None
    cpu = time.process_time() - cpu
    print(json.dumps({"times": times, "cpu_s": cpu}))


def one_round(service: Service, etag: str, requests: int, connect: str) -> tuple[list[float], float, float]:
    """Run the client process once: (latencies, client CPU s, service CPU s)."""
    before = service.cpu_seconds()
    command = [sys.executable, __file__, CLIENT_FLAG, str(service.port), service.token, etag, str(requests)]
    done = subprocess.run([*command, connect], capture_output=True, text=True, check=True)
    service_cpu = service.cpu_seconds() - before
    result = json.loads(done.stdout)
    warm = max(1, requests // 100)
    return result["times"][warm:], result["cpu_s"], service_cpu


def summary(times: list[float], client_cpu: float, service_cpu: float, requests: int) -> dict[str, float]:
    def ms(q: float) -> float:
        return round(percentile(times, q) * 1000, 3)

    return {
        "requests": len(times),
        "p50_ms": ms(0.5),
        "p90_ms": ms(0.9),
        "p99_ms": ms(0.99),
        "p999_ms": ms(0.999),
        "max_ms": round(max(times) * 1000, 2),
        "client_cpu_us": round(client_cpu / requests * 1e6, 1),
        "service_cpu_us": round(service_cpu / requests * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000, help="304s per stack, all rounds together")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--stacks", default="h11/asyncio,httptools/asyncio,httptools/uvloop")
    parser.add_argument("--connect", choices=("keep-alive", "each"), default="keep-alive")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    stacks = [tuple(stack.split("/")) for stack in args.stacks.split(",")]
    per_round = args.requests // args.rounds
    figures: dict[str, object] = {"connect": args.connect, "load_before": load()}
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        write_index(base / "index.db", args.entries)
        services: dict[str, Service] = {}
        etags: dict[str, str] = {}
        try:
            for stack in stacks:
                # a third part: the log level (warning: no access log)
                http, loop, level = (*stack, "info")[:3]
                name = "/".join(stack)
                home = base / name.replace("/", "-")
                (home / "state" / "datasets" / "big").mkdir(parents=True)
                os.link(base / "index.db", home / "state" / "datasets" / "big" / "index.db")
                table = '\n[[datasets]]\nname = "big"\nimages = "/nonexistent"\n'
                extra = f'http = "{http}"\nloop = "{loop}"\n'
                services[name] = Service(home, table, extra=extra, level=level)
                first = httpx.get(
                    services[name].base + "/v1/datasets/big/quarantine",
                    headers=services[name].headers,
                    timeout=60,
                )
                etags[name] = first.headers["etag"]
            gathered: dict[str, tuple[list[float], float, float]] = {n: ([], 0.0, 0.0) for n in services}
            shuffle = random.Random(args.seed)
            for _ in range(args.rounds):
                order = list(services)
                shuffle.shuffle(order)
                for name in order:
                    times, client_cpu, service_cpu = one_round(
                        services[name], etags[name], per_round, args.connect
                    )
                    so_far = gathered[name]
                    gathered[name] = (so_far[0] + times, so_far[1] + client_cpu, so_far[2] + service_cpu)
        finally:
            for service in services.values():
                service.stop()
        figures["stacks"] = {
            name: summary(times, client, served, per_round * args.rounds)
            for name, (times, client, served) in gathered.items()
        }
    figures["load_after"] = load()
    print(json.dumps(figures))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CLIENT_FLAG:
        port, token, etag, requests, connect = sys.argv[2:7]
        client_run(int(port), token, etag, int(requests), connect)
    else:
        main()
