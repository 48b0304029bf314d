"""Drive `kvplan serve` on loopback with many concurrent clients, valid plans mixed with bad
input, bounded in count and time; report requests/s, p50/p99, status codes and the server's
memory before and after.

    python bench/load.py [--clients 32] [--requests 4000] [--seconds 60]

Prints a table and, on its last line, one JSON document; writes bench/results/load.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.localserver import running_server  # noqa: E402

VALID = [
    ("GET", "/api/v1/plan?" + urlencode({"model": "qwen3.5-27b", "gpu": "4090", "context": "256k",
                                          "kv": "tbq4", "weights": "q4_k_m"}), None),
    ("POST", "/api/v1/plan", {"model": "llama-3.1-70b", "gpu": "h100", "gpus": "2",
                              "context": "32k", "sequences": 8, "engine": "vllm"}),
    ("POST", "/api/v1/plan", {"model": "deepseek-v3", "gpu": "h200", "gpus": "8",
                              "context": "128k", "kv": "fp8", "engine": "sglang"}),
    ("POST", "/api/v1/plan", {"model": "gemma-3-27b-it", "gpu": "3090", "context": "64k",
                              "engine": "llama.cpp", "kv": "q8_0", "weights": "q4_k_m"}),
    ("GET", "/api/v1/models/gpt-oss-120b", None),
    ("GET", "/api/v1/healthz", None),
    ("GET", "/?model=qwen3-8b&gpu=4090&context=32k", None),
]
BAD = [
    ("POST", "/api/v1/plan", {"model": "nosuch", "gpu": "4090"}),
    ("POST", "/api/v1/plan", {"model": "qwen3-8b", "context": "-5"}),
    ("POST", "/api/v1/plan", {"model": "qwen3-8b", "sequences": 10**9}),
    ("POST", "/api/v1/plan", {"model": "/etc/passwd"}),
    ("POST", "/api/v1/plan", {"config": {"model_type": "llama", "num_hidden_layers": -1}}),
    ("POST", "/api/v1/plan", "{not json"),
    ("GET", "/api/v1/plan?model=qwen3-8b&kv=q3", None),
    ("POST", "/api/v1/measure", {"model": "qwen3-8b"}),
    ("GET", "/models/..%2f..%2fetc%2fpasswd", None),
]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def client(port: int, deadline: float, budget: list[int], lock: threading.Lock,
           out: list[tuple[float, int, bool]], seed: int) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while time.time() < deadline:
        with lock:
            if budget[0] <= 0:
                break
            budget[0] -= 1
        bad = rng.random() < 0.3
        method, path, body = rng.choice(BAD if bad else VALID)
        data = None
        headers = {}
        if body is not None:
            data = body if isinstance(body, str) else json.dumps(body)
            headers["Content-Type"] = "application/json"
        t0 = time.perf_counter()
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException):
            status = 0
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        out.append((time.perf_counter() - t0, status, bad))
    conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args()
    with running_server() as (server, port):
        # warm the caches, then read memory
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for method, path, body in VALID:
            conn.request(method, path, body=json.dumps(body) if body else None,
                         headers={"Content-Type": "application/json"} if body else {})
            conn.getresponse().read()
        conn.close()
        rss_before = rss_kib(server.pid)
        out: list[tuple[float, int, bool]] = []
        budget, lock = [args.requests], threading.Lock()
        deadline = time.time() + args.seconds
        threads = [threading.Thread(target=client, args=(port, deadline, budget, lock, out, i))
                   for i in range(args.clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        rss_after = rss_kib(server.pid)
    lat = sorted(x[0] for x in out)
    statuses: dict[str, int] = {}
    for _, status, _bad in out:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    wrong_valid = sum(1 for _, s, bad in out if not bad and s != 200)
    result = {
        "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
        "cpus": os.cpu_count(), "clients": args.clients, "requests": len(out),
        "seconds": wall, "requests_per_s": len(out) / wall,
        "p50_ms": statistics.median(lat) * 1e3 if lat else None,
        "p99_ms": lat[int(0.99 * (len(lat) - 1))] * 1e3 if lat else None,
        "statuses": statuses, "server_errors": sum(v for k, v in statuses.items()
                                                   if k.startswith("5") or k == "0"),
        "valid_not_ok": wrong_valid, "rss_before_kib": rss_before, "rss_after_kib": rss_after,
    }
    print(f"{result['requests']} requests from {args.clients} clients in {wall:.1f} s: "
          f"{result['requests_per_s']:.0f} req/s, p50 {result['p50_ms']:.1f} ms, "
          f"p99 {result['p99_ms']:.1f} ms; statuses {statuses}; RSS {rss_before} → "
          f"{rss_after} KiB")
    out_path = ROOT / "bench" / "results" / "load.json"
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
