"""The host side of a llama.cpp plan with weights in host memory, measured: copies from host memory
to the card (what op offload does with host-held weights for each batch of 32 tokens or more),
from pinned memory (llama.cpp's CUDA_Host buffers, with --no-mmap) and from pageable memory
(its mmap'd CPU_Mapped buffers), against the card's host link in kvplan's catalog; and the
host memory's read rate with every CPU thread (what a decode step's host part reads).

    python bench/host_link.py [--out DIR]

Writes host-link.json (with the machine's CPU, its thread count and the usual env block).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvcore import find_gpu  # noqa: E402
from kvcore.measure import environment  # noqa: E402

MiB = 2**20
SIZES_MIB = [64, 256, 1024, 4096]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def copy_rate(src: torch.Tensor, dst: torch.Tensor, repeats: int = 5) -> float:
    """Bytes a second of host-to-card copies of ``src`` into ``dst``, the best of ``repeats``
    after one warm-up, timed with CUDA events around the copy alone."""
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src, non_blocking=True)
        b.record()
        torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3)
    return src.numel() * src.element_size() / best


def read_rate(x: torch.Tensor, repeats: int = 5) -> float:
    """Bytes a second the CPU reads summing ``x`` with every thread, the best of ``repeats``."""
    x.sum()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t)
    return x.numel() * x.element_size() / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    card = find_gpu(torch.cuda.get_device_name(0))
    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    rows = []
    for size in SIZES_MIB:
        n = size * MiB
        dst = torch.empty(n, dtype=torch.uint8, device="cuda")
        pinned = torch.empty(n, dtype=torch.uint8, pin_memory=True).fill_(1)
        pageable = torch.empty(n, dtype=torch.uint8).fill_(1)
        rows.append({"mib": size, "pinned_bytes_per_s": copy_rate(pinned, dst),
                     "pageable_bytes_per_s": copy_rate(pageable, dst)})
        del dst, pinned, pageable
        torch.cuda.empty_cache()
    host = torch.ones(4096 * MiB // 4, dtype=torch.float32)
    read = read_rate(host)
    link = card.host_link_bytes_per_s
    best_pinned = max(r["pinned_bytes_per_s"] for r in rows)
    best_pageable = max(r["pageable_bytes_per_s"] for r in rows)
    out = {"env": environment("cuda", torch), "cpu": cpu_name(), "cpu_threads": threads,
           "card": card.id, "catalog_host_link": card.host_link,
           "catalog_host_link_bytes_per_s": link, "copies": rows,
           "pinned_share_of_link": best_pinned / link if link else None,
           "pageable_share_of_link": best_pageable / link if link else None,
           "host_read_bytes_per_s": read, "host_read_threads": threads}
    path = Path(args.out) / "host-link.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"{card.name}: catalog host link {card.host_link}, {link / 1e9:.1f} GB/s" if link
          else f"{card.name}: no host link in the catalog")
    for r in rows:
        print(f"  {r['mib']:>5} MiB  pinned {r['pinned_bytes_per_s'] / 1e9:6.1f} GB/s  "
              f"pageable {r['pageable_bytes_per_s'] / 1e9:6.1f} GB/s")
    print(f"host memory read, {threads} threads ({out['cpu']}): {read / 1e9:.1f} GB/s")


if __name__ == "__main__":
    main()
