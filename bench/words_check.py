"""Word-wise against byte-wise reads of the packed planes in the decode kernel.

    python bench/words_check.py [--out DIR]

For fp8_pth, q8_0, q4_0, tbq4 and nvfp4 at (B=1, 128k), (B=8, 128k) and (B=64, 4k) tokens:
the step time of each launch configuration (4-warp ones and, since v11, 1- and 2-warp ones) with the planes read byte by byte and as int32
words, and the largest difference between the two outputs (the unpacked values are the same, so
it must be 0). Writes words.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode import HKV, HQ, D, copies, fill, time_steps, write_json  # noqa: E402

from kvcore.kernels.cache import LAUNCH, LAUNCH_MANY, MANY_ROWS, LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402

CONFIGS = [(32, 2, 2), (64, 4, 2), (64, 4, 3), (128, 4, 2), (64, 1, 2), (32, 1, 3), (64, 2, 3),
           (128, 2, 2)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--formats", default="fp8_pth,q8_0,q4_0,tbq4,nvfp4")
    args = ap.parse_args()
    env = environment("cuda", torch)
    rows = []
    for batch, tokens in ((1, 131072), (8, 131072), (64, 4096)):
        for fmt in args.formats.split(","):
            cache = LayerCache(fmt, fmt, batch, tokens, HKV, D, device="cuda")
            fill(cache, batch, tokens, torch.float16)
            table = torch.arange(batch, device="cuda", dtype=torch.int32).reshape(batch, 1)
            seq = torch.full((batch,), tokens, device="cuda", dtype=torch.int32)
            q = torch.randn(batch, HQ, D, device="cuda", dtype=torch.float16)
            a = cache.decode(q, table, seq, words=False)
            b = cache.decode(q, table, seq, words=True)
            caches = copies(cache, batch, tokens)
            default = (LAUNCH_MANY if batch * HKV >= MANY_ROWS else LAUNCH)[fmt]
            row = {"format": fmt, "batch": batch, "tokens": tokens,
                   "max_abs_diff": float((a - b).abs().max()), "default": list(default),
                   "times": {}}
            for bn, nw, ns in dict.fromkeys([default, *CONFIGS]):
                for words in (False, True):
                    try:
                        t = time_steps(caches, batch, tokens, block_n=bn, num_warps=nw,
                                       num_stages=ns, words=words)
                    except triton.runtime.errors.OutOfResources:
                        continue
                    row["times"][f"{bn}/{nw}/{ns}/{'words' if words else 'bytes'}"] = t
            best = {m: min((t, k) for k, t in row["times"].items() if k.endswith(m))
                    for m in ("bytes", "words")}
            row["best"] = {m: {"seconds": t, "config": k} for m, (t, k) in best.items()}
            rows.append(row)
            print(fmt, batch, tokens, f"diff {row['max_abs_diff']:.1e}",
                  {m: f"{t * 1e6:.1f} us {k}" for m, (t, k) in best.items()}, flush=True)
            del cache, caches
            torch.cuda.empty_cache()
            write_json(args.out, "words.json", {"env": env, "rows": rows})


if __name__ == "__main__":
    main()
