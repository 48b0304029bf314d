"""A probe: where a decode step's fixed cost goes, for the Gluon kernel (q4_0 and q8_0) at
batch 1 (GQA 32/8, head_dim 128).

Per format and context (32k to 1M tokens), timed as bench/decode.py times a step (CUDA graph
over cache copies, launched as programmatic dependents):

- ``step``: the kernel and its merge (decode_gluon, forced, at decode's programs a
  multiprocessor);
- ``empty``: the same launches over sequences of length 0 (every program stores an empty
  result): the launches' and the merge's cost without the cache;
- ``merge``: reduce_splits alone over the step's partial results;
- ``kernel_empty``: the Gluon kernel alone over the empty sequences, without its merge;
- ``split``: the Gluon kernel alone over the whole sequences, without its merge (``step -
  split``: what the merge adds to a step);
- ``noop``: a Triton kernel of the same grid that only waits on the step before and stores one
  value a program (the launch and the hand-over between launches, nothing else);
- ``step_no_pdl``: the step launched plainly, each kernel after the one before has finished.

A straight line through the steps, t = fixed + per_token × tokens, gives the fixed cost;
``step - empty`` is what reading the cache costs. Writes fixed-cost.json.

With ``--per-sm 6,8`` each format runs at each of those programs a multiprocessor as well as
at decode's.

    python bench/probes/fixed_cost.py [--formats q4_0,q8_0] [--tokens 32768,...]
        [--per-sm N,...] [--out DIR]
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

import triton  # noqa: E402 (after the paths)
import triton.language as tl  # noqa: E402

from kvcore.kernels.triton_ops import pdl_enter  # noqa: E402


@triton.jit
def noop_kernel(OUT, PDL: tl.constexpr):
    """Wait on the launch before (with PDL), store one value a program."""
    pdl_enter(PDL)
    tl.store(OUT + tl.program_id(2), 1.0)


def noop(out, kv_heads: int, n: int) -> None:
    """noop_kernel over the step's grid (one sequence), as a programmatic dependent."""
    noop_kernel[(1, kv_heads, n)](out, PDL=True, launch_pdl=True, num_warps=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="q4_0,q8_0")
    ap.add_argument("--tokens", default="32768,65536,131072,262144,524288,1048576")
    ap.add_argument("--per-sm", default="")
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
            cache = LayerCache(fmt, fmt, 1, tokens, HKV, D, device="cuda")
            fill(cache, 1, tokens, torch.float16)
            caches = copies(cache, 1, tokens)
            table = torch.zeros(1, 1, device="cuda", dtype=torch.int32)
            full = torch.full((1,), tokens, device="cuda", dtype=torch.int32)
            none = torch.zeros(1, device="cuda", dtype=torch.int32)
            q = torch.randn(1, HQ, D, device="cuda", dtype=torch.float16)
            out = torch.empty(1, HQ, D, device="cuda")
            decode_per_sm = gluon_launch(fmt, fmt, D, D, group, tokens, HKV, tokens, "cuda",
                                         faster_only=False)
            extra = [int(x) for x in args.per_sm.split(",") if x]
            for per_sm in [decode_per_sm] + [x for x in extra if x != decode_per_sm]:
                n = splits_for(HKV, tokens, per_sm)[1]
                acc = torch.empty(HQ * n * D, device="cuda")
                ml = torch.empty(HQ * n * 2, device="cuda")
                step = partial(decode_gluon, q=q, block_table=table, out=out, max_len=tokens,
                               per_sm=per_sm, acc=acc, ml=ml)
                t_step, t_empty = (graph_time([partial(step, c, seq_lens=seq, pdl=True)
                                               for c in caches]) for seq in (full, none))
                t_plain = graph_time([partial(step, c, seq_lens=full) for c in caches])
                t_kernel = graph_time([partial(step, c, seq_lens=none, pdl=True, merge=False)
                                       for c in caches])
                t_split = graph_time([partial(step, c, seq_lens=full, pdl=True, merge=False)
                                      for c in caches])
                t_merge = graph_time([partial(reduce_splits, acc, ml, out, n, 1, HKV, group, D,
                                              pdl=True)])
                t_noop = graph_time([partial(noop, acc, HKV, n)])
                row = {"format": fmt, "tokens": tokens, "per_sm": per_sm,
                       "decode_per_sm": per_sm == decode_per_sm, "splits": n,
                       "step_seconds": t_step, "empty_seconds": t_empty,
                       "kernel_empty_seconds": t_kernel, "merge_seconds": t_merge,
                       "split_seconds": t_split,
                       "noop_seconds": t_noop, "step_no_pdl_seconds": t_plain,
                       "cache_bytes": cache.nbytes,
                       "fraction_of_read_bw": cache.nbytes / t_step / bw}
                res["rows"].append(row)
                print(f"{fmt} T={tokens} per_sm {per_sm}: step {t_step * 1e6:.1f} us "
                      f"(no pdl {t_plain * 1e6:.1f}, without its merge {t_split * 1e6:.1f}), "
                      f"empty {t_empty * 1e6:.1f}, kernel alone "
                      f"{t_kernel * 1e6:.1f}, merge {t_merge * 1e6:.1f}, noop "
                      f"{t_noop * 1e6:.1f}, {row['fraction_of_read_bw']:.0%} bw", flush=True)
            del caches, cache
            torch.cuda.empty_cache()
        rows = [r for r in res["rows"] if r["format"] == fmt and r["decode_per_sm"]]
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
