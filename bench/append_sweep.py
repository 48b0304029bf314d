"""Append kernel on a GPU: bits against the torch reference, and throughput under several
launch configurations.

    python bench/append_sweep.py [--out DIR] [--formats f16,q4_0,…] [--configs ROWS/WARPS,…]
    python bench/append_sweep.py --head-dims 64,96,256,512,576 [--formats tbq4,tbq3]
    python bench/append_sweep.py --heads 128/1/576/k --formats tbq4,tbq3 --configs 16/4,…

Each format first appends 3,000 tokens × 8 KV heads (head_dim 128) with the kernel and with the
torch reference and reports the share of identical bytes per plane; then a filled 8 × 32,768
token cache takes appends of 16,384 new tokens (fp16 in), replayed from a CUDA graph
(decode.append_time), under each (rows per program, warps, …), with --rounds in turns. Where a
config takes the rotated formats' search by lookup, its bytes against the default search's too. Bytes
moved per call: the input read plus the cache bytes written. Writes append-sweep.json and
prints a table. With
--head-dims, only the bytes against the reference at those head widths (fp16 and bf16 rows),
into append-agreement.json. With --heads (query heads/KV heads/head_dim[/k], as
bench/decode.py's scripts take it; /k a K-only cache, an MLA latent), the timed cache has those
heads (the bytes against the reference stay at 8 heads of 128).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import decode  # noqa: E402  (bench/decode.py, beside this file)
from decode import HKV, append_time, fill, write_json  # noqa: E402

from kvcore.kernels.bandwidth import measure_bandwidth  # noqa: E402
from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.measure import environment  # noqa: E402

FORMATS = ["f16", "fp8_pth", "q8_0", "q4_0", "tbq4", "tbq3", "nvfp4"]
#: (rows per program, num_warps)
CONFIGS = [(16, 2), (32, 2), (32, 4), (64, 4), (128, 4), (64, 8), (128, 8)]


def agreement(fmt: str, dtype=torch.float16, head_dim: int = decode.D) -> dict[str, float]:
    """Share of identical bytes, per plane, between the kernel's and the reference's append
    (input rows of ``dtype``, heads ``head_dim`` wide)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(3000, HKV, head_dim, device="cuda", generator=g) * 3).to(dtype)
    kern = LayerCache(fmt, fmt, 1, 4096, HKV, head_dim, device="cuda")
    refc = LayerCache(fmt, fmt, 1, 4096, HKV, head_dim, device="cuda")
    t = torch.arange(3000, device="cuda")
    kern.append(x, x, torch.zeros_like(t), t)
    refc.append_ref(x, x, torch.zeros_like(t), t)
    return {name: float((p.view(torch.uint8) == refc.k.planes[name].view(torch.uint8))
                        .float().mean()) for name, p in kern.k.planes.items()}


def lookup_agreement(fmt: str) -> dict[str, float]:
    """Share of identical bytes, per plane and side, between the rotated append's search by
    lookup and its default search (the staircase), on agreement()'s rows: the lookup's GPU
    path (its table read by inline PTX) must write the same bytes."""
    g = torch.Generator(device="cuda").manual_seed(1)
    x = (torch.randn(3000, HKV, decode.D, device="cuda", generator=g) * 3).to(torch.float16)
    caches = [LayerCache(fmt, fmt, 1, 4096, HKV, decode.D, device="cuda") for _ in range(2)]
    t = torch.arange(3000, device="cuda")
    caches[0].append(x, x.flip(0), torch.zeros_like(t), t, lookup=False)
    caches[1].append(x, x.flip(0), torch.zeros_like(t), t, lookup=True)
    return {f"{side} {name}": float((getattr(caches[1], side).planes[name].view(torch.uint8)
                                     == p.view(torch.uint8)).float().mean())
            for side in ("k", "v") for name, p in getattr(caches[0], side).planes.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--configs", help="rows per program/warps[/programs per multiprocessor"
                    "[/stages[/registers[/one launch: 1 K and V together, 0 a side at a time"
                    "[/fma search: 1 the rotated formats' search on the FMA pipes, 0 by "
                    "selects[/fma bias in quarters: 1 is 0.25[/prefetch: 1 the rotated "
                    "formats' next rows loaded a block ahead[/lookup: 1 the FMA search by "
                    "lookup, one comparison a value; registers 0 leave it uncapped]]]]]]], "
                    "the rotated formats' persistent launch],… instead of the built-in list")
    ap.add_argument("--rounds", type=int, default=1, help="time the configs this many times in "
                    "turns, the order reversed every other round")
    ap.add_argument("--head-dims", help="only the bytes against the reference, for these head "
                    "widths (comma-separated), fp16 and bf16 rows; no timing")
    ap.add_argument("--heads", help="the timed cache's query heads/KV heads/head_dim[/k] "
                    "(32/8/128 by default; /k: K only)")
    args = ap.parse_args()
    if args.head_dims:
        env = environment("cuda", torch)
        result = {"env": env, "agreement": {}}
        for fmt in args.formats.split(","):
            for hd in (int(x) for x in args.head_dims.split(",")):
                for dtype in (torch.float16, torch.bfloat16):
                    key = f"{fmt} {hd} {str(dtype).removeprefix('torch.')}"
                    result["agreement"][key] = agreement(fmt, dtype, hd)
                    print(key, result["agreement"][key], flush=True)
        write_json(args.out, "append-agreement.json", result)
        return
    configs = ([tuple(int(x) for x in c.split("/")) for c in args.configs.split(",")]
               if args.configs else CONFIGS)
    env = environment("cuda", torch)
    bw = measure_bandwidth(torch)
    print(env, {k: f"{v / 1e12:.2f} TB/s" for k, v in bw.items()}, flush=True)
    values = decode.set_heads(args.heads) if args.heads else True
    result: dict = {"env": env, "bandwidth": bw, "agreement": {}, "rows": [],
                    "heads": {"kv_heads": decode.HKV, "head_dim": decode.D, "values": values}}
    batch, tokens = 8, 32768
    for fmt in args.formats.split(","):
        result["agreement"][fmt] = agreement(fmt)
        print(fmt, "identical bytes:", result["agreement"][fmt], flush=True)
        if fmt in ("tbq4", "tbq3"):  # the rotation reads bfloat16 input as it is
            result.setdefault("agreement_bf16", {})[fmt] = agreement(fmt, torch.bfloat16)
            print(fmt, "bfloat16 in:", result["agreement_bf16"][fmt], flush=True)
            if any(len(c) > 9 and c[9] for c in configs):
                result.setdefault("lookup_agreement", {})[fmt] = lookup_agreement(fmt)
                print(fmt, "lookup against the staircase:", result["lookup_agreement"][fmt],
                      flush=True)
        dtype = torch.bfloat16 if fmt == "bf16" else torch.float16
        cache = LayerCache(fmt, fmt, batch, tokens, decode.HKV, decode.D, device="cuda",
                           values=values)
        fill(cache, batch, tokens, dtype)
        turns = [c for r in range(args.rounds) for c in (configs if r % 2 == 0
                                                          else configs[::-1])]
        for rows, warps, *more in turns:
            launch = dict(zip(("programs_per_sm", "num_stages", "max_registers", "one_launch",
                               "fma_search", "fma_bias", "prefetch", "lookup"), more,
                              strict=False))
            for flag in ("one_launch", "fma_search", "prefetch", "lookup"):
                if flag in launch:
                    launch[flag] = bool(launch[flag])
            # a config that names no lookup times the staircase (a format's default may be
            # the lookup: cache.LOOKUP)
            launch.setdefault("lookup", False)
            if "fma_bias" in launch:
                launch["fma_bias"] = launch["fma_bias"] / 4
            s, moved = append_time(cache, batch, tokens, dtype, rows_per_program=rows,
                                   num_warps=warps, **launch)
            row = {"format": fmt, "rows_per_program": rows, "num_warps": warps, **launch,
                   "seconds": s, "bytes": moved, "bytes_per_s": moved / s,
                   "fraction_of_read_bw": moved / s / bw["read_bytes_per_s"]}
            result["rows"].append(row)
            print(f"{fmt:8s} rows {rows:4d} warps {warps} {launch or ''}: {s * 1e6:7.1f} us "
                  f"{moved / s / 1e12:5.2f} TB/s ({row['fraction_of_read_bw']:5.1%})", flush=True)
            write_json(args.out, "append-sweep.json", result)
        del cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
