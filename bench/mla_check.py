"""A decode option switched on against off, on a GPU: by default a K-only (MLA latent) decode
with each key tile unpacked once for both products against once for each.

    python bench/mla_check.py [--out DIR] [--option reuse_keys|parts|words|words_v|pdl|lazy]
        [--heads 16/1/576/k]
        [--formats f16,q8_0,…] [--shapes 1x131072,4x32768]

--option reuse_keys (the default; writes mla.json): LayerCache.decode's reuse_keys. --option
parts (writes parts.json): a head whose width is not a power of two held as a main part and a
tail (512 + 64 lanes for DeepSeek's latent) against one power of two (1,024). --option words
(writes words.json): the packed planes read as int32 words against bytes; words_v
(words_v.json): V's planes alone (K's as the default has them); pdl (pdl.json): each kernel
of a step launched as a programmatic dependent of the one before it; lazy (lazy.json): the
running output rescaled only when the max grows by more than LAZY_MARGIN. --heads: query
heads / KV heads / head_dim, a trailing /k for a K-only cache (V = the keys); the default is
DeepSeek-V2-Lite's shape, 16 query heads over one 576-wide latent. The decode's default
launch; each step replayed from a CUDA graph over enough caches that none is read from L2.
Each row: seconds with the option on and off, the bytes read a second with it on, and whether
the two outputs are identical (reuse_keys) or how far apart (parts: the same values summed in
another order).
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
    ap.add_argument("--option", choices=("reuse_keys", "parts", "words", "words_v", "pdl", "lazy",
                                           "pad_rows"),
                    default="reuse_keys")
    ap.add_argument("--heads", default="16/1/576/k")
    ap.add_argument("--formats", default="f16,fp8_pth,q8_0,q4_0,tbq4,tbq3,nvfp4")
    ap.add_argument("--shapes", default="1x131072,4x32768")
    ap.add_argument("--values", default="true,false",
                    help="the option's values, the first against the others (integers or "
                         "true/false)")
    args = ap.parse_args()
    values = decode.set_heads(args.heads)
    name = "mla.json" if args.option == "reuse_keys" else f"{args.option}.json"
    env = environment("cuda", torch)
    settings = [v == "true" if v in ("true", "false") else int(v)
               for v in args.values.split(",")]
    first = settings[0]
    rows = []
    for shape in args.shapes.split(","):
        batch, tokens = (int(x) for x in shape.split("x"))
        for fmt in args.formats.split(","):
            cache = LayerCache(fmt, fmt, batch, tokens, decode.HKV, decode.D, device="cuda",
                               values=values)
            decode.fill(cache, batch, tokens, torch.float16)
            table = torch.arange(batch, device="cuda", dtype=torch.int32).reshape(batch, 1)
            seq = torch.full((batch,), tokens, device="cuda", dtype=torch.int32)
            q = torch.randn(batch, decode.HQ, decode.D, device="cuda", dtype=torch.float16)
            try:
                outs = {r: cache.decode(q, table, seq, max_len=tokens, **{args.option: r})
                        for r in settings}
            except ValueError as e:  # a setting decode refuses (a short tile's wrong read)
                rows.append({"format": fmt, "heads": args.heads, "batch": batch,
                             "tokens": tokens, "refused": str(e)})
                print(fmt, args.heads, batch, tokens, "refused:", e, flush=True)
                continue
            caches = decode.copies(cache, batch, tokens)
            seconds = {str(r): decode.time_steps(caches, batch, tokens, **{args.option: r})
                       for r in settings}
            ref = outs[settings[-1]]
            diff = max(float((outs[r] - ref).abs().max() / ref.abs().max()) for r in settings)
            row = {"format": fmt, "heads": args.heads, "batch": batch, "tokens": tokens,
                   "bytes": cache.nbytes,
                   "identical": all(bool(torch.equal(outs[r], ref)) for r in settings),
                   "max_rel_diff": diff, "seconds": seconds,
                   "read_gb_s_on": cache.nbytes / seconds[str(first)] / 1e9}
            rows.append(row)
            print(fmt, args.heads, batch, tokens, row["identical"], f"{diff:.1e}",
                  {k: f"{v * 1e6:.1f} us" for k, v in seconds.items()}, flush=True)
            decode.write_json(args.out, name, {"env": env, "option": args.option, "rows": rows})
            del cache, caches
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
