"""K-only (MLA latent) decode with each key tile unpacked once for both products against once
for each, on a GPU.

    python bench/mla_check.py [--out DIR] [--formats f16,q8_0,…] [--shapes 1x131072,4x32768]

DeepSeek-V2-Lite's shape: 16 query heads over one 576-wide latent (V = the latent), the
decode's default launch; each step replayed from a CUDA graph over enough caches that none is
read from L2. Writes mla.json: seconds with reuse_keys True and False, and whether the two
outputs are identical.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import decode  # noqa: E402  (bench/decode.py, beside this file)

from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--formats", default="f16,fp8_pth,q8_0,q4_0,tbq4,tbq3,nvfp4")
    ap.add_argument("--shapes", default="1x131072,4x32768")
    args = ap.parse_args()
    decode.HQ, decode.HKV, decode.D = 16, 1, 576
    env = environment("cuda", torch)
    rows = []
    for shape in args.shapes.split(","):
        batch, tokens = (int(x) for x in shape.split("x"))
        for fmt in args.formats.split(","):
            cache = LayerCache(fmt, fmt, batch, tokens, 1, 576, device="cuda", values=False)
            decode.fill(cache, batch, tokens, torch.float16)
            table = torch.arange(batch, device="cuda", dtype=torch.int32).reshape(batch, 1)
            seq = torch.full((batch,), tokens, device="cuda", dtype=torch.int32)
            q = torch.randn(batch, 16, 576, device="cuda", dtype=torch.float16)
            outs = {r: cache.decode(q, table, seq, max_len=tokens, reuse_keys=r)
                    for r in (True, False)}
            caches = decode.copies(cache, batch, tokens)
            row = {"format": fmt, "batch": batch, "tokens": tokens, "bytes": cache.nbytes,
                   "identical": bool(torch.equal(outs[True], outs[False])),
                   "seconds": {str(r): decode.time_steps(caches, batch, tokens, reuse_keys=r)
                               for r in (True, False)}}
            rows.append(row)
            print(fmt, batch, tokens, row["identical"],
                  {k: f"{v * 1e6:.1f} us" for k, v in row["seconds"].items()}, flush=True)
            decode.write_json(args.out, "mla.json", {"env": env, "rows": rows})
            del cache, caches
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
