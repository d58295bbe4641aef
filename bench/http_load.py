"""`bench_enqueue.py`'s load generator when `wrk` is not installed: `connections` aiohttp
clients, each sending POSTs back to back for `seconds`, each with a fresh Idempotency-Key, in
a process of their own. One Python process: near a few thousand requests/s it may be the
bottleneck itself (install `wrk` for the ceiling rows).

    python bench/http_load.py '{"url": …, "headers": {…}, "body": "…"}' CONNECTIONS SECONDS
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid

import aiohttp


async def main(spec: dict[str, object], connections: int, seconds: float) -> dict[str, float]:
    url = str(spec["url"])
    headers = dict(spec["headers"])  # type: ignore[call-overload]
    body = str(spec["body"]).encode()
    run = uuid.uuid4().hex[:12]
    latencies: list[float] = []
    failed = 0
    deadline = time.perf_counter() + seconds

    async def client(session: aiohttp.ClientSession, number: int) -> None:
        nonlocal failed
        sent = 0
        while time.perf_counter() < deadline:
            sent += 1
            key = {"Idempotency-Key": f"{run}-{number}-{sent}"}
            began = time.perf_counter()
            async with session.post(url, data=body, headers={**headers, **key}) as response:
                await response.read()
                if response.status >= 300:
                    failed += 1
            latencies.append(time.perf_counter() - began)

    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.perf_counter()
        await asyncio.gather(*(client(session, i) for i in range(connections)))
        elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "requests_per_s": len(latencies) / elapsed,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))] * 1000,
        "failed": failed,
    }


if __name__ == "__main__":
    result = asyncio.run(main(json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
    print(json.dumps(result))
