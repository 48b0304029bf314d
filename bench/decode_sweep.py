"""Launch-configuration sweep and K/V split of the decode kernel on a GPU.

    python bench/decode_sweep.py [--out DIR] [--formats f16,q4_0,…] [--no-split] [--occupancy]
        [--shapes 1x131072,8x131072] [--configs BN/W/S[/PPS[/REGS[/QROWS[/PAD]]]],…]
        [--heads HQ/HKV/D[/k]]

For B=1 and B=8 at 131,072 tokens (or the batch × tokens shapes of --shapes) (GQA 32/8, head_dim
128, or the query heads, KV heads and head_dim of --heads; a trailing /k: a K-only cache, an
MLA latent attended with V = the keys): every format under several
(block_n, num_warps, num_stages); then each quantized format on the K side only and on the V
side only (the other side f16), which says which side's unpacking costs the time. Writes
sweep.json and prints a table.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import decode  # noqa: E402  (bench/decode.py, beside this file)
from decode import copies, fill, sdpa_time, time_steps, write_json  # noqa: E402

from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.kernels.cache import LAUNCH, LAUNCH_MANY, MANY_ROWS, LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402

FORMATS = ["f16", "fp8_pth", "q8_0", "q4_0", "tbq4", "tbq3", "nvfp4"]
CONFIGS = [(16, 4, 2), (32, 2, 2), (32, 4, 2), (32, 4, 3), (64, 4, 2), (64, 4, 3), (64, 4, 4),
           (64, 8, 2), (128, 4, 2), (128, 8, 2)]


def build(fk: str, fv: str, batch: int, tokens: int, values: bool = True) -> LayerCache:
    """A filled cache of decode.py's head shape; ``values`` False: K only (--heads …/k)."""
    cache = LayerCache(fk, fv, batch, tokens, decode.HKV, decode.D, device="cuda",
                       values=values)
    fill(cache, batch, tokens, torch.float16)
    return cache


def time_decode(caches: list[LayerCache], batch: int, tokens: int,
                cfg: tuple[int, ...]) -> float:
    """cfg: (block_n, num_warps, num_stages[, programs_per_sm[, max_registers[,
    query_rows[, pad_rows]]]]), 0 for the decode's own choice of any; () the decode's own
    choice of all."""
    bn, w, st, pps, regs, rows, pad = (*cfg, None, None, None, None, None, None, None)[:7]
    return time_steps(caches, batch, tokens, block_n=bn or None, num_warps=w or None,
                      num_stages=st or None, programs_per_sm=pps or None,
                      max_registers=regs or None, query_rows=rows or None,
                      pad_rows=pad or None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--no-split", action="store_true", help="skip the K-only and V-only runs")
    ap.add_argument("--configs", help="block_n/num_warps/num_stages[/programs per "
                    "multiprocessor[/max registers[/query rows[/pad rows]]]],… (0: the decode's "
                    "choice) to try instead of the built-in list (each format's default is "
                    "always timed too)")
    ap.add_argument("--shapes", default="1x131072,8x131072",
                    help="batch x tokens,… (default: B=1 and B=8 at 128k)")
    ap.add_argument("--occupancy", action="store_true",
                    help="time each format's default launch at 4, 8, 16 and 32 programs per "
                         "multiprocessor, with and without a cap of 80 registers per thread")
    ap.add_argument("--heads", help="query heads/KV heads/head_dim[/k] (default 32/8/128)")
    args = ap.parse_args()
    values = decode.set_heads(args.heads) if args.heads else True
    formats = args.formats.split(",")
    configs = CONFIGS
    if args.configs:
        configs = [tuple(int(x) for x in c.split("/")) for c in args.configs.split(",")]
    env = environment("cuda", torch)
    bw = measure_bandwidth(torch)["read_bytes_per_s"]
    rows = []
    shapes = [tuple(int(x) for x in sh.split("x")) for sh in args.shapes.split(",")]
    for batch, tokens in shapes:
        sdpa = sdpa_time(batch, tokens)
        rows.append({"k": "sdpa_f16", "v": "sdpa_f16", "batch": batch, "tokens": tokens,
                     "seconds": sdpa})
        print(f"fp16 SDPA B={batch} {sdpa * 1e6:8.1f} us", flush=True)
        pairs = [(f, f) for f in formats]
        quantized = [f for f in formats if f != "f16"]
        if not args.no_split:
            pairs += [(f, "f16") for f in quantized] + [("f16", f) for f in quantized]
        for fk, fv in pairs:
            cache = build(fk, fv, batch, tokens, values)
            caches = copies(cache, batch, tokens)
            best = None
            if args.occupancy:
                # the format's default launch, split finer and with fewer registers
                cfgs = [(*LAUNCH[fk], pps, regs) for pps in (4, 8, 16, 32)
                        for regs in (None, 80)]
            elif decode.D > 128:
                # wider heads: the decode's own launch, then the others
                cfgs = [(), *configs] if fk == fv else [()]
            else:
                launch = (LAUNCH_MANY if batch * decode.HKV >= MANY_ROWS else LAUNCH)[fk]
                cfgs = (list(dict.fromkeys([launch, *configs])) if fk == fv
                        else [(64, 4, 2), (32, 4, 2)])
            for cfg in cfgs:
                try:
                    t = time_decode(caches, batch, tokens, cfg)
                except (triton.runtime.errors.OutOfResources, RuntimeError) as exc:
                    # too large for the card, or a launch the compiler cannot lay out
                    print(f"K {fk} V {fv} {cfg}: {type(exc).__name__}", flush=True)
                    continue
                rows.append({"k": fk, "v": fv, "batch": batch, "tokens": tokens,
                             "config": cfg, "seconds": t, "bytes": cache.nbytes,
                             "fraction_of_read_bw": cache.nbytes / t / bw})
                if best is None or t < best[0]:
                    best = (t, cfg)
            assert best is not None
            print(f"K {fk:8s} V {fv:8s} B={batch} best {best[0] * 1e6:8.1f} us "
                  f"{cache.nbytes / best[0] / 1e12:5.2f} TB/s ({cache.nbytes / best[0] / bw:5.1%})"
                  f" at {best[1]}, {sdpa / best[0]:.2f}x SDPA", flush=True)
            write_json(args.out, "sweep.json", {"env": env, "read_bytes_per_s": bw,
                                                "heads": [decode.HQ, decode.HKV, decode.D],
                                                "values": values, "rows": rows})
            del cache, caches
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
