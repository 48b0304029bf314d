"""A probe: q4_0 decode attention (K and V in q4_0, 128-wide heads, groups of at most 16 query
heads) by a split kernel that states its layouts (Triton's Gluon dialect), so that the packed
bytes are loaded straight into the registers the tensor cores read, with no pass through
shared memory and no byte moved between lanes.

- Keys: a lane loads one 16-byte q4_0 block of a token (one 128-bit load) and unpacks it with
  PTX into the second operand of the score product. The operand's columns are head dimensions
  in the order the block's nibbles fall into the lanes' registers; the query's columns are
  gathered in the same order, so the product is unchanged.
- Values: a lane loads 8 bytes of each of its tokens; the PTX pairs the nibbles of two tokens
  at the same head dimension in one register, as the weight-times-value product wants them.
  Its output columns are head dimensions in that order, and are stored in order.
- The softmax runs on the score product's accumulator layout, which is the weight operand's:
  no conversion.
- A tile is 32 tokens of one page (pages of a multiple of 32 tokens); one warp a program; the
  splits are merged by decode's reduce_splits.
- The kernel is kvcore.kernels.gluon_q4_0.q4_0_swapped_kernel, which decode runs for q4_0
  (LayerCache.decode's ``gluon``): tiles copied into shared memory two ahead (cp.async), the
  products swapped; ``swapped3-lazy`` rescales lazily. The probe's baseline is decode with
  ``gluon=False``. At commit 2d4c2dd the probe also held the kernel's earlier forms, timed in
  bench/results/gluon-q4_0-h200.json: ``sync`` (each tile loaded at the top of its
  iteration), ``async3`` and ``async4`` (copied 2 or 3 ahead, products not swapped).

    python bench/probes/gluon_q4_0.py [--shapes 1x131072,8x131072,1x32768,8x32768]
        [--per-sm 8,12,16] [--regs 0,168] [--out DIR]

First a check against LayerCache.decode_ref on small paged caches (pages of 32 and 64, a
shuffled block table, lengths that end mid-tile, groups of 4, 8 and 16). Then per shape:
decode's default (q4_0) and this kernel under each programs-a-multiprocessor count and
register cap, timed as bench/decode.py times (CUDA graph over cache copies), against torch's
fp16 SDPA. Writes gluon-q4_0.json. Needs a GPU (Gluon has no interpreter).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
from functools import partial
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE)]



def launch(cache, q, table, seq, out, max_len: int, per_sm: int = 12, regs: int = 0,
           **consts):
    """One decode step: decode's Gluon path (kvcore.kernels.gluon_q4_0.decode_gluon: the split
    kernel, then reduce_splits) under this launch; ``consts`` go to the kernel."""
    import torch

    from kvcore.kernels.gluon_q4_0 import decode_gluon, splits_for

    bsz, hq, d = q.shape
    n = splits_for(bsz * cache.kv_heads, max_len, per_sm)[1]
    acc = torch.empty(bsz * hq * n * d, device=q.device, dtype=torch.float32)
    ml = torch.empty(bsz * hq * n * 2, device=q.device, dtype=torch.float32)
    return decode_gluon(cache, q, table, seq, out, max_len, per_sm, acc, ml,
                       max_registers=regs, **consts)

def variants(fmt: str = "q4_0") -> dict:
    """The variants the probe runs for ``fmt``: name → the kernel's compile-time arguments."""
    if fmt == "q8_0":  # its form as decode_gluon takes it from the cache, without and with PIPE
        return {"q8-s2": {"STAGES": 2, "PIPE": False}, "q8-s3": {"STAGES": 3, "PIPE": False},
                "q8-pipe": {"STAGES": 3, "PIPE": True}, "q8-pipe-s4": {"STAGES": 4, "PIPE": True}}
    return {"swapped3": {"STAGES": 3, "K_AFTER": False, "V_AFTER": False},
            "swapped3-lazy": {"STAGES": 3, "LAZY": True, "K_AFTER": False, "V_AFTER": False},
            "k-after": {"STAGES": 3, "K_AFTER": True, "V_AFTER": False},
            "v-after": {"STAGES": 3, "K_AFTER": False, "V_AFTER": True},
            "after": {"STAGES": 3, "K_AFTER": True, "V_AFTER": True},
            "after-lazy": {"STAGES": 3, "LAZY": True, "K_AFTER": True, "V_AFTER": True},
            "after-s2": {"STAGES": 2, "K_AFTER": True, "V_AFTER": True},
            "after-pipe": {"STAGES": 3, "K_AFTER": True, "V_AFTER": True, "PIPE": True},
            "after-pipe-s4": {"STAGES": 4, "K_AFTER": True, "V_AFTER": True, "PIPE": True}}


def check(device: str = "cuda", fmt: str = "q4_0", names: tuple[str, ...] = ()) -> dict:
    """Largest difference from decode_ref over the output's largest magnitude, per case."""
    import torch
    from decode import fill_paged

    from kvcore.kernels.cache import LayerCache

    res = {}
    # (page, group, lengths, V's magnitude, the query's): the last case has small values and
    # a flat softmax over long rows, so that the weights times the V scales are small
    for ps, group, lens, vmag, qmag in ((32, 4, [37, 200, 129, 1], 1, 1),
                                        (64, 8, [300, 64, 65], 1, 1), (32, 16, [95, 33], 1, 1),
                                        (64, 4, [2048, 1000], 1, 1),
                                        (32, 4, [16384, 5000], 0.01, 0.05)):
        torch.manual_seed(ps + group)
        hkv, d = 2, 128
        hq = hkv * group
        bsz = len(lens)
        per = max(math.ceil(n / ps) for n in lens)
        if fmt == "q8_0" and group > 8:
            continue  # the AFTER forms (q8_0's only) take groups of up to 8
        cache = LayerCache(fmt, fmt, bsz * per, ps, hkv, d, device=device)
        table = torch.randperm(bsz * per, device=device).view(bsz, per).to(torch.int32)
        k, v = (torch.randn(bsz, max(lens), hkv, d, device=device, dtype=torch.float16)
                for _ in range(2))
        fill_paged(cache, table, k, v * vmag, lens)
        seq = torch.tensor(lens, device=device, dtype=torch.int32)
        q = torch.randn(bsz, hq, d, device=device, dtype=torch.float16) * qmag
        # the kernel multiplies the float16 query (q8_0's split kernel and its reference an
        # int8 one)
        ref = cache.decode_ref(q, table, seq, int_query=False).float()
        base_ref = cache.decode_ref(q, table, seq).float()
        base = cache.decode(q, table, seq, max_len=max(lens), gluon=False)
        for (vname, consts), per_sm in itertools.product(variants(fmt).items(), (1, 12)):
            if names and vname not in names:
                continue
            out = torch.full((bsz, hq, d), float("nan"), device=device)
            launch(cache, q, table, seq, out, max(lens), per_sm, 0, **consts)
            torch.cuda.synchronize()
            name = (f"{vname}-page{ps}-group{group}-lens{'/'.join(map(str, lens))}"
                    f"{f'-v{vmag}-q{qmag}' if vmag != 1 else ''}-per_sm{per_sm}")
            res[name] = {
                "vs_ref": float((out - ref).abs().max() / ref.abs().max()),
                "decode_vs_ref": float((base - base_ref).abs().max() / base_ref.abs().max()),
                "nan": bool(torch.isnan(out).any())}
            print(name, res[name], flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1x131072,8x131072,1x32768,8x32768")
    ap.add_argument("--per-sm", default="8,12,16")
    ap.add_argument("--regs", default="0,168")
    ap.add_argument("--variants", default="swapped3,swapped3-lazy")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--format", default="q4_0", choices=("q4_0", "q8_0"))
    args = ap.parse_args()

    import torch
    from decode import HKV, HQ, D, copies, fill, graph_time, sdpa_time, time_steps

    from kvcore.kernels.bandwidth import measure_bandwidth
    from kvcore.kernels.cache import LayerCache
    from kvcore.measure import environment

    names = tuple(args.variants.split(","))
    res: dict = {"env": environment("cuda", torch), "bandwidth": measure_bandwidth(torch),
                 "format": args.format, "check": check(fmt=args.format, names=names),
                 "rows": []}
    bw = res["bandwidth"]["read_bytes_per_s"]
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for spec in args.shapes.split(","):
        bsz, tokens = (int(x) for x in spec.split("x"))
        t_sdpa = sdpa_time(bsz, tokens)
        cache = LayerCache(args.format, args.format, bsz, tokens, HKV, D, device="cuda")
        fill(cache, bsz, tokens, torch.float16)
        caches = copies(cache, bsz, tokens)
        table = torch.arange(bsz, device="cuda", dtype=torch.int32).reshape(bsz, 1)
        seq = torch.full((bsz,), tokens, device="cuda", dtype=torch.int32)
        q = torch.randn(bsz, HQ, D, device="cuda", dtype=torch.float16)
        ref = cache.decode(q, table, seq, max_len=tokens, gluon=False)
        t_dec = time_steps(caches, bsz, tokens, torch.float16, gluon=False)
        row = {"batch": bsz, "tokens": tokens, "sdpa_f16_seconds": t_sdpa,
               "decode_seconds": t_dec, "decode_vs_sdpa": t_sdpa / t_dec,
               "decode_fraction_of_read_bw": cache.nbytes / t_dec / bw, "configs": []}
        for (vname, consts), per_sm, regs in itertools.product(
                variants(args.format).items(), (int(x) for x in args.per_sm.split(",")),
                (int(x) for x in args.regs.split(","))):
            if vname not in names:
                continue
            out = torch.empty(bsz, HQ, D, device="cuda")
            launch(cache, q, table, seq, out, tokens, per_sm, regs, **consts)
            diff = float((out - ref).abs().max() / ref.abs().max())
            outs = [torch.empty_like(out) for _ in caches]
            t = graph_time([partial(launch, c, q, table, seq, o, tokens, per_sm,
                                    regs, **consts)
                            for c, o in zip(caches, outs, strict=True)])
            row["configs"].append({"variant": vname, "per_sm": per_sm, "regs": regs,
                                   "seconds": t,
                                   "diff_vs_decode": diff, "vs_decode": t_dec / t,
                                   "vs_sdpa": t_sdpa / t,
                                   "fraction_of_read_bw": cache.nbytes / t / bw})
        best = min(row["configs"], key=lambda x: x["seconds"])
        print(f"B={bsz} T={tokens}: sdpa {t_sdpa * 1e6:.1f} us, decode {t_dec * 1e6:.1f} us "
              f"({t_sdpa / t_dec:.2f}x); gluon best {best['variant']} {best['per_sm']}/{best['regs']} "
              f"{best['seconds'] * 1e6:.1f} us ({best['vs_sdpa']:.2f}x, "
              f"{best['fraction_of_read_bw']:.0%} bw, diff {best['diff_vs_decode']:.1e})",
              flush=True)
        res["rows"].append(row)
        (out_dir / f"gluon-{args.format}.json").write_text(json.dumps(res, indent=1))
        del caches, cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
