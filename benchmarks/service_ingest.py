"""Guard-failure ingestion into `datalint serve`: failures/s and POST latency with concurrent senders.

    python benchmarks/service_ingest.py [--senders 32] [--batch 100] [--seconds 10]

Target: at least 5,000 failures/s in batches, p99 POST latency under 20 ms, at 32 concurrent senders.
Senders are asyncio tasks on one httpx client (keep-alive connections), on the same machine as the
service: both share its cores. Two loads: `--rate R` paces the 32 senders to R failures/s in all (each
sends a batch every senders * batch / R seconds, as training workers do), which is what the latency
target is about; `--rate 0` sends back to back, which measures the most the service takes (latency
is then the queue: concurrency x service time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx
from service_common import Service, load, percentile

DATASET = '\n[[datasets]]\nname = "train"\nimages = "/nonexistent"\n'


async def sender(
    client: httpx.AsyncClient,
    url: str,
    number: int,
    batch: int,
    until: float,
    latencies: list[float],
    period: float = 0.0,
) -> int:
    sent = 0
    counter = 0
    next_at = time.perf_counter() + period * (number % 32) / 32  # spread the senders' phases
    while time.perf_counter() < until:
        if period:
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            next_at += period
        failures = [
            {
                "index": number * 10_000_000 + counter + i,
                "key": f"img/{counter + i}.jpg",
                "error_type": "OSError",
                "message": "image file is truncated",
                "host": f"node-{number}",
                "pid": 1000 + number,
            }
            for i in range(batch)
        ]
        counter += batch
        started = time.perf_counter()
        answer = await client.post(url, json={"failures": failures})
        latencies.append(time.perf_counter() - started)
        answer.raise_for_status()
        sent += batch
    return sent


async def run(service: Service, senders: int, batch: int, seconds: float, rate: float) -> dict[str, float]:
    url = service.base + "/v1/datasets/train/failures"
    limits = httpx.Limits(max_connections=senders, max_keepalive_connections=senders)
    async with httpx.AsyncClient(headers=service.headers, limits=limits, timeout=30) as client:
        await sender(client, url, 999, batch, time.perf_counter() + 1.0, [])  # warm up: index, guard run
        latencies: list[float] = []
        started = time.perf_counter()
        until = started + seconds
        period = senders * batch / rate if rate else 0.0
        counts = await asyncio.gather(
            *(sender(client, url, n, batch, until, latencies, period) for n in range(senders))
        )
        elapsed = time.perf_counter() - started
    return {
        "failures_per_s": sum(counts) / elapsed,
        "posts": len(latencies),
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--senders", type=int, default=32)
    parser.add_argument("--batch", type=int, nargs="+", default=[100])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--rate", type=float, nargs="+", default=[5000.0, 0.0], help="failures/s in all; 0: flat out"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        service = Service(Path(folder), DATASET)
        try:
            for rate in args.rate:
                for batch in args.batch:
                    result = asyncio.run(run(service, args.senders, batch, args.seconds, rate))
                    figures = {k: round(v, 1) for k, v in result.items()}
                    print(
                        json.dumps(
                            {"senders": args.senders, "rate": rate, "batch": batch, **figures, "load": load()}
                        )
                    )
        finally:
            service.stop()


if __name__ == "__main__":
    main()
