"""The plain formats' append (append_kernel: q4_0, nvfp4, …) by rows a program and warps, in
turns, on the decode benchmark's append shapes (bench/decode.py's append_time: new tokens into a
filled cache, replayed from a CUDA graph over inputs too large for L2), with the default launch
(APPEND_LAUNCH) among them. Where the short append (B=1 4k: 32,768 rows a side, 8 rows a
one-warp program) stands against the 32-programs-a-multiprocessor cap of one-warp programs,
wider programs of the same rows a warp let more warps reside.

    python bench/probes/short_append_launch.py [--formats nvfp4,q4_0] [--shapes 1x4096,8x32768]
        [--configs d,16/2,32/4,16/1] [--rounds 3] [--out DIR]

A config is rows/warps ("d" the default). Writes short-append-launch.json into --out: per
format and shape the seconds of each config in every round and the read-bandwidth fraction of
its best; first the bytes of each config against the default's (1.0: identical).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import HKV, D, append_time, fill  # noqa: E402
from turns import in_turns, turns_row  # noqa: E402

from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def launch(config: str) -> dict:
    if config == "d":
        return {}
    rows, warps = (int(v) for v in config.split("/"))
    return {"rows_per_program": rows, "num_warps": warps}


def timed(fmt: str, batch: int, tokens: int, config: str) -> tuple[float, int]:
    cache = LayerCache(fmt, fmt, batch, tokens, HKV, D, device="cuda")
    fill(cache, batch, tokens, torch.float16)
    try:
        return append_time(cache, batch, tokens, torch.float16, **launch(config))
    finally:
        del cache
        torch.cuda.empty_cache()


def same_bytes(fmt: str, config: str) -> float:
    """The share of the cache's bytes that ``config``'s append writes as the default's does."""
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(3000, HKV, D, device="cuda", dtype=torch.float16, generator=g)
    t = torch.arange(3000, device="cuda")
    caches = []
    for c in ("d", config):
        cache = LayerCache(fmt, fmt, 1, 4096, HKV, D, device="cuda")
        cache.append(x, x, t // 4096, t % 4096, **launch(c))
        caches.append(cache)
    same = total = 0
    for a, b in zip(caches[0].tensors(), caches[1].tensors(), strict=True):
        same += int((a.view(torch.uint8) == b.view(torch.uint8)).sum())
        total += a.numel() * a.element_size()
    return same / total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="nvfp4,q4_0")
    ap.add_argument("--shapes", default="1x4096,8x32768")
    ap.add_argument("--configs", default="d,16/2,32/4,16/1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    configs = args.configs.split(",")
    bw = measure_bandwidth(torch)
    out: dict = {"env": environment("cuda", torch), "bandwidth": bw, "same_bytes": {},
                 "rows": []}
    for fmt in args.formats.split(","):
        out["same_bytes"][fmt] = {c: same_bytes(fmt, c) for c in configs}
        print(fmt, "bytes as the default's:", out["same_bytes"][fmt], flush=True)
        for shape in args.shapes.split(","):
            batch, tokens = (int(v) for v in shape.split("x"))
            times, moved = in_turns(args.rounds, {
                c: partial(timed, fmt, batch, tokens, c) for c in configs})
            out["rows"].append(turns_row(fmt, batch, tokens, moved, times,
                                         bw["read_bytes_per_s"]))
            Path(args.out, "short-append-launch.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
