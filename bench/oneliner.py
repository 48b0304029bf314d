"""Wall time of the kvplan one-liner (a fresh process each run) and of one plan in-process.

Prints a table and, on its last line, one JSON document; writes bench/results/oneliner.json.
"""

from __future__ import annotations

import datetime
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = [
    ["qwen3.5-27b", "--ctx", "262144", "--kv", "tbq4", "--weights", "q4_k_m", "--gpu", "4090"],
    ["deepseek-v3", "--ctx", "128k", "--seqs", "8", "--kv", "fp8", "--gpu", "h200"],
    ["gemma-3-27b-it", "--ctx", "32k", "--seqs", "4", "--kv-k", "q8_0", "--kv-v", "q4_0",
     "--gpu", "3090", "--json"],
]
RUNS = 15


def wall(args: list[str]) -> list[float]:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "app.cli", *args], check=True,
                       capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def in_process() -> float:
    import kvcore

    req = kvcore.PlanRequest(spec=kvcore.load_model("qwen3.5-27b"), context=262_144,
                             cache=kvcore.CacheOptions(kv_k="tbq4", kv_v="tbq4"),
                             weights="q4_k_m", gpu=kvcore.find_gpu("4090"))
    kvcore.plan(req)
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        kvcore.plan(req)
    return (time.perf_counter() - start) / n


def main() -> None:
    rows = []
    for args in CASES:
        t = sorted(wall(args))
        rows.append({"command": "kvplan " + " ".join(args), "median_s": statistics.median(t),
                     "p90_s": t[int(0.9 * (len(t) - 1))], "runs": RUNS})
    per_plan = in_process()
    result = {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "cases": rows,
        "plan_in_process_s": per_plan,
    }
    for r in rows:
        print(f"{r['median_s'] * 1000:7.1f} ms median  {r['p90_s'] * 1000:7.1f} ms p90  {r['command']}")
    print(f"{per_plan * 1000:7.2f} ms per plan in-process (with max-context search)")
    out = Path(__file__).parent / "results" / "oneliner.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
