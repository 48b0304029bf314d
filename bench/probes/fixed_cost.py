"""A probe: where a decode step's fixed cost goes, for the Gluon kernel (q4_0 and q8_0) at
batch 1 (GQA 32/8, head_dim 128).

Per format and context (32k to 1M tokens), timed as bench/decode.py times a step (CUDA graph
over cache copies, launched as programmatic dependents):

- ``step``: the kernel and its merge (decode_gluon, forced, at decode's programs a
  multiprocessor);
- ``empty``: the same launches over sequences of length 0 (every program stores an empty
  result): the launches' and the merge's cost without the cache;
- ``merge``: reduce_splits alone over the step's partial results.

A straight line through the steps, t = fixed + per_token × tokens, gives the fixed cost;
``step - empty`` is what reading the cache costs. Writes fixed-cost.json.

    python bench/probes/fixed_cost.py [--formats q4_0,q8_0] [--tokens 32768,...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="q4_0,q8_0")
    ap.add_argument("--tokens", default="32768,65536,131072,262144,524288,1048576")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()

    import torch
    from decode import HKV, HQ, D, copies, fill, graph_time

    from kvcore.kernels.bandwidth import measure_bandwidth
    from kvcore.kernels.cache import LayerCache, gluon_launch
    from kvcore.kernels.gluon_q4_0 import decode_gluon, splits_for
    from kvcore.kernels.triton_ops import reduce_splits
    from kvcore.measure import environment

    res: dict = {"env": environment("cuda", torch), "bandwidth": measure_bandwidth(torch),
                 "rows": []}
    bw = res["bandwidth"]["read_bytes_per_s"]
    group = HQ // HKV
    for fmt in args.formats.split(","):
        for tokens in (int(x) for x in args.tokens.split(",")):
            per_sm = gluon_launch(fmt, fmt, D, D, group, tokens, HKV, tokens, "cuda",
                                  faster_only=False)
            n = splits_for(HKV, tokens, per_sm)[1]
            cache = LayerCache(fmt, fmt, 1, tokens, HKV, D, device="cuda")
            fill(cache, 1, tokens, torch.float16)
            caches = copies(cache, 1, tokens)
            table = torch.zeros(1, 1, device="cuda", dtype=torch.int32)
            full = torch.full((1,), tokens, device="cuda", dtype=torch.int32)
            none = torch.zeros(1, device="cuda", dtype=torch.int32)
            q = torch.randn(1, HQ, D, device="cuda", dtype=torch.float16)
            out = torch.empty(1, HQ, D, device="cuda")
            acc = torch.empty(HQ * n * D, device="cuda")
            ml = torch.empty(HQ * n * 2, device="cuda")

            t_step, t_empty = (
                graph_time([partial(decode_gluon, c, q, table, seq, out, tokens, per_sm, acc,
                                    ml, pdl=True) for c in caches])
                for seq in (full, none))
            t_merge = graph_time([partial(reduce_splits, acc, ml, out, n, 1, HKV, group, D,
                                          pdl=True)])
            row = {"format": fmt, "tokens": tokens, "per_sm": per_sm, "splits": n,
                   "step_seconds": t_step, "empty_seconds": t_empty,
                   "merge_seconds": t_merge, "cache_bytes": cache.nbytes,
                   "fraction_of_read_bw": cache.nbytes / t_step / bw}
            res["rows"].append(row)
            print(f"{fmt} T={tokens}: step {t_step * 1e6:.1f} us, empty {t_empty * 1e6:.1f}, "
                  f"merge {t_merge * 1e6:.1f}, {row['fraction_of_read_bw']:.0%} bw", flush=True)
            del caches, cache
            torch.cuda.empty_cache()
        rows = [r for r in res["rows"] if r["format"] == fmt]
        xs = [r["tokens"] for r in rows]
        ys = [r["step_seconds"] for r in rows]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
                 / sum((x - mx) ** 2 for x in xs))
        res[f"{fmt}_fit"] = {"fixed_seconds": my - slope * mx, "seconds_per_token": slope,
                             "bytes_per_s_at_slope": rows[0]["cache_bytes"] / xs[0] / slope}
        print(fmt, res[f"{fmt}_fit"], flush=True)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fixed-cost.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
