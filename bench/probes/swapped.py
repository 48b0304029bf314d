"""A probe: decode attention with the products swapped (decode(swap=True): the cache tile the
tensor cores' first operand and the query heads the narrow second one, Sᵀ = K·Qᵀ, Oᵀ = Vᵀ·Pᵀ)
under given launches, against decode's default on the same caches. The unswapped kernel holds
a group of 4 query heads as rows padded to the tensor cores' 16 (its partial output [16, 128]
float32, 64 registers a thread of a one-warp program); swapped, the heads are the product's
narrow side, padded to 8, so that the partial output takes half the registers and more
programs fit a multiprocessor.

    python bench/probes/swapped.py [--formats q4_0,tbq4,tbq3,nvfp4]
        [--shapes 1x131072,8x131072,1x32768] [--configs BN/W/S/QPAD/REGS/PER_SM,…]
        [--reads default|words|bytes] [--out DIR]

First a check on a small paged cache (pages of 16 tokens, a shuffled block table, sequences
of different lengths, several splits) against LayerCache.decode_ref. Then per format and
shape: decode's default (time), and the swapped decode under each config (block_n / warps /
stages / query heads padded to / register cap, 0 none / programs a multiprocessor; --reads:
the planes as decode reads them by default, as int32 words or as bytes), its registers and
spills (bench/probes/int_keys.registers), its largest difference from the default's output,
its time (CUDA graph over cache copies, as bench/decode.py times). Writes swapped.json. In the
interpreter (TRITON_INTERPRET=1, no GPU) only the check runs, on the CPU.

The results swapped-formats-h200.json, swapped-h200.json, swapped-tbq3-h200.json and the
probe's side of swapped-gap-h200.json were made before decode had ``swap``, by this probe's
own kernel with the products swapped (commit 07badd5): the decode kernel's SWAP branch is that
kernel's loop.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE)]

READS = {"default": None, "words": True, "bytes": False}


def launch(cache, q, table, seq, out, max_len: int, *, block_n: int = 32, num_warps: int = 1,
           num_stages: int = 3, qpad: int = 8, max_registers: int = 0, per_sm: int = 12,
           words: bool | None = None, split_tokens: int | None = None):
    """One swapped decode step over ``cache`` (a LayerCache) into ``out`` under this launch
    (``split_tokens`` instead of ``per_sm`` where given)."""
    return cache.decode(q, table, seq, max_len=max_len, out=out, swap=True, block_n=block_n,
                        num_warps=num_warps, num_stages=num_stages, pad_rows=qpad,
                        max_registers=max_registers or None,
                        programs_per_sm=None if split_tokens else per_sm, words=words,
                        split_tokens=split_tokens)


def check(fmt: str, device: str, configs: list[tuple[int, ...]],
          words: bool | None = None) -> dict[str, float | str]:
    """The swapped decode against LayerCache.decode_ref on a small paged cache (pages of 16,
    a shuffled block table, lengths 37, 200 and 129, splits of 64 tokens; GQA 8/2 × 128): the
    largest difference over the output's largest magnitude, per config (NaN: an output left
    unwritten; a launch decode refuses: its message)."""
    import torch
    from decode import fill_paged

    from kvcore.kernels.cache import LayerCache

    torch.manual_seed(0)
    bsz, hkv, hq, d, ps = 3, 2, 8, 128, 16
    lens = [37, 200, 129]
    per = max(math.ceil(n / ps) for n in lens)
    cache = LayerCache(fmt, fmt, bsz * per, ps, hkv, d, device=device)
    perm = torch.randperm(bsz * per, device=device)
    table = perm.view(bsz, per).to(torch.int32)
    k, v = (torch.zeros(bsz, max(lens), hkv, d, device=device, dtype=torch.float16)
            for _ in range(2))
    for b, n in enumerate(lens):
        k[b, :n] = torch.randn(n, hkv, d, device=device, dtype=torch.float16)
        v[b, :n] = torch.randn(n, hkv, d, device=device, dtype=torch.float16)
    fill_paged(cache, table, k, v, lens)
    seq = torch.tensor(lens, device=device, dtype=torch.int32)
    q = torch.randn(bsz, hq, d, device=device, dtype=torch.float16)
    ref = cache.decode_ref(q, table, seq, int_query=False).float()
    res = {}
    for c in configs:
        out = torch.full((bsz, hq, d), float("nan"), device=device)
        bn, nw, ns, qpad = c[:4]
        try:
            launch(cache, q, table, seq, out, max(lens), block_n=bn, num_warps=nw,
                   num_stages=ns, qpad=qpad, words=words, split_tokens=64)
        except ValueError as e:
            res["/".join(map(str, c))] = str(e)
            continue
        err = float((out - ref).abs().max() / ref.abs().max())
        res["/".join(map(str, c))] = err if not torch.isnan(out).any() else float("nan")
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--formats", default="q4_0,tbq4,tbq3,nvfp4")
    ap.add_argument("--shapes", default="1x131072,8x131072,1x32768")
    ap.add_argument("--configs", default="32/1/3/8/0/12,32/1/3/8/128/16,32/1/3/8/0/16,"
                                         "16/1/3/8/0/16,16/1/3/8/128/16,32/1/3/16/0/12")
    ap.add_argument("--reads", choices=tuple(READS), default="default",
                    help="the packed planes as decode reads them by default, as words or bytes")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    configs = [tuple(int(x) for x in c.split("/")) for c in args.configs.split(",")]
    words = READS[args.reads]
    formats = args.formats.split(",")
    if os.environ.get("TRITON_INTERPRET") == "1":
        for fmt in formats:
            print(fmt, check(fmt, "cpu", [c for c in configs if c[0] <= 32][:2], words),
                  flush=True)
        return

    import torch
    from decode import HKV, HQ, D, copies, fill, graph_time, sdpa_time, time_steps
    from int_keys import registers

    from kvcore.kernels.bandwidth import measure_bandwidth
    from kvcore.kernels.cache import LayerCache
    from kvcore.measure import environment

    res: dict = {"env": environment("cuda", torch), "bandwidth": measure_bandwidth(torch),
                 "configs": args.configs, "reads": args.reads, "check": {}, "rows": []}
    bw = res["bandwidth"]["read_bytes_per_s"]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for fmt in formats:
        res["check"][fmt] = check(fmt, "cuda", configs, words)
        print(fmt, res["check"][fmt], flush=True)
    for spec in args.shapes.split(","):
        bsz, tokens = (int(x) for x in spec.split("x"))
        t_sdpa = sdpa_time(bsz, tokens)
        for fmt in formats:
            cache = LayerCache(fmt, fmt, bsz, tokens, HKV, D, device="cuda")
            fill(cache, bsz, tokens, torch.float16)
            caches = copies(cache, bsz, tokens)
            table = torch.arange(bsz, device="cuda", dtype=torch.int32).reshape(bsz, 1)
            seq = torch.full((bsz,), tokens, device="cuda", dtype=torch.int32)
            q = torch.randn(bsz, HQ, D, device="cuda", dtype=torch.float16)
            # compared against the default's output (q8_0: its float16 key product, as the
            # swapped products take)
            ref = cache.decode(q, table, seq, max_len=tokens, int_keys=False)
            t_dec = time_steps(caches, bsz, tokens, torch.float16)
            row = {"format": fmt, "batch": bsz, "tokens": tokens, "sdpa_f16_seconds": t_sdpa,
                   "decode_seconds": t_dec,
                   "decode_fraction_of_read_bw": cache.nbytes / t_dec / bw, "configs": []}
            for c in configs:
                bn, nw, ns, qpad, regs, per_sm = c
                out = torch.empty(bsz, HQ, D, device="cuda")
                try:
                    launch(cache, q, table, seq, out, tokens, block_n=bn, num_warps=nw,
                           num_stages=ns, qpad=qpad, max_registers=regs, per_sm=per_sm,
                           words=words)
                    torch.cuda.synchronize()
                    regs_spills = registers()
                except Exception as exc:  # a launch decode refuses or the compiler cannot lay out
                    row["configs"].append({"config": "/".join(map(str, c)),
                                           "error": f"{type(exc).__name__}: {exc}"[:300]})
                    continue
                diff = float((out - ref).abs().max() / ref.abs().max())
                outs = [torch.empty_like(out) for _ in caches]
                t = graph_time([partial(launch, cc, q, table, seq, o, tokens, block_n=bn,
                                        num_warps=nw, num_stages=ns, qpad=qpad,
                                        max_registers=regs, per_sm=per_sm, words=words)
                                for cc, o in zip(caches, outs, strict=True)])
                rs = regs_spills[0] if regs_spills else [-1, -1, nw]
                row["configs"].append({"config": "/".join(map(str, c)), "seconds": t,
                                       "registers": rs[0], "spills": rs[1],
                                       "diff_vs_decode": diff,
                                       "vs_decode": t_dec / t, "vs_sdpa": t_sdpa / t,
                                       "fraction_of_read_bw": cache.nbytes / t / bw})
            best = min((x for x in row["configs"] if "seconds" in x),
                       key=lambda x: x["seconds"], default=None)
            print(f"{fmt} B={bsz} T={tokens}: decode {t_dec * 1e6:.1f} us "
                  f"({t_sdpa / t_dec:.2f}x sdpa); best swapped "
                  + (f"{best['config']} {best['seconds'] * 1e6:.1f} us ({best['vs_sdpa']:.2f}x, "
                     f"{best['registers']} regs, diff {best['diff_vs_decode']:.1e})"
                     if best else "none"), flush=True)
            res["rows"].append(row)
            (out_dir / "swapped.json").write_text(json.dumps(res, indent=1))
            del caches, cache
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
