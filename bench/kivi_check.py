"""KIVI decode launches: warps a program, pipeline stages and tokens a program (the split),
against the default.

    python bench/kivi_check.py [--out DIR] [--configs W/S/SPLIT[/T[/L[/P[/R[/X]]]]],…] [--no-check]

kivi2 and kivi4, 8 KV heads, head_dim 128, GQA 4: (1 sequence, 32k), (1, 128k), (8, 32k) or
--shapes; each
step replayed from a CUDA graph over enough caches that none is read from L2. SPLIT 0: the
default split; T: quantized tokens a step (decode(tile_tokens=T), 0 the default); L 1: the
lazy rescale (decode(lazy=True)); P: programs a multiprocessor the split aims at
(decode(programs_per_sm=P)); R: registers a thread at most (decode(max_registers=R)); X 1:
the products swapped (decode(swap=True)), 2: not swapped; 0 the defaults. Each row records
the registers, spilled bytes, warps and shared-memory bytes of the decode kernels first
compiled for it. First, on the GPU: the PTX unpacking against the plain path
(asm=False) and both against exact attention over the dequantized cache (``correctness``).
Writes kivi.json.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode import HQ, compiled, graph_time, kivi_copies, kivi_fill, rel, write_json  # noqa: E402

from kvcore.kernels.kivi import KIVI_LAZY, KIVI_STAGES, KIVI_WARPS, KiviCache  # noqa: E402
from kvcore.kernels.kivi_triton import kivi_decode_kernel  # noqa: E402
from kvcore.measure import environment  # noqa: E402

D = 128


def correctness(dims: tuple[int, ...] = (128, 96)) -> list[dict]:
    """The PTX unpacking against the plain path and both against exact attention, on the GPU:
    kivi2 and kivi4, K and V or K only, at head widths ``dims``, a quantized region of an odd
    number of groups plus the ring; with K and V the swapped products against both too."""
    out = []
    g = torch.Generator(device="cuda").manual_seed(5)
    for fmt in ("kivi2", "kivi4"):
        for values in (True, False):
            for d in dims:
                cache = KiviCache(fmt, 3, 2, d, 2000, device="cuda", values=values)
                for s, n in enumerate((1999, 700, 45)):
                    k = torch.randn(n, 2, d, device="cuda", generator=g).half()
                    v = torch.randn(n, 2, d, device="cuda", generator=g).half()
                    cache.append_triton(s, k, v)
                q = torch.randn(3, 8, d, device="cuda", generator=g).half()
                ptx = cache.decode(q, 256)
                plain = cache.decode(q, 256, asm=False)
                ref = cache.decode_ref(q.float())

                row = {"format": fmt, "values": values, "head_dim": d,
                       "ptx_vs_plain_max_abs": float((ptx - plain).abs().max()),
                       "ptx_vs_exact_rel": rel(ptx, ref), "plain_vs_exact_rel": rel(plain, ref),
                       "nan": bool(torch.isnan(ptx).any())}
                if values:  # the swapped products (K and V only)
                    swapped = cache.decode(q, 256, swap=True)
                    row |= {"swapped_vs_ptx_max_abs": float((swapped - ptx).abs().max()),
                            "swapped_vs_exact_rel": rel(swapped, ref),
                            "swapped_nan": bool(torch.isnan(swapped).any())}
                print(row, flush=True)
                out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--configs", default="2/2/0,1/3/0,1/2/0/128,1/2/0/0/0,1/2/512")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness checks")
    ap.add_argument("--shapes", default="1x32768,1x131072,8x32768",
                    help="sequences x tokens, comma-separated")
    ap.add_argument("--dims", default="128,96", help="head widths of the correctness checks")
    ap.add_argument("--check-only", action="store_true", help="the correctness checks alone")
    args = ap.parse_args()
    env = environment("cuda", torch)
    checks = [] if args.no_check else correctness(tuple(int(x) for x in args.dims.split(",")))
    if args.check_only:
        write_json(args.out, "kivi.json", {"env": env, "correctness": checks})
        return
    default = (KIVI_WARPS, KIVI_STAGES, 0, 0, int(KIVI_LAZY), 0, 0, 0)
    configs = [default] + [
        tuple(int(x) for x in c.split("/")) + default[len(c.split("/")):]
        for c in args.configs.split(",")]
    rows = []
    for fmt in ("kivi2", "kivi4"):
        for seqs, tokens in (tuple(int(x) for x in sh.split("x"))
                             for sh in args.shapes.split(",")):
            caches = kivi_copies(kivi_fill(fmt, seqs, tokens))
            q = torch.randn(seqs, HQ, D, device="cuda").half()
            row = {"format": fmt, "sequences": seqs, "tokens": tokens,
                   "bytes": caches[0].nbytes, "seconds": {}}
            before = compiled(kivi_decode_kernel)
            for w, st, split, tok, lazy, per_sm, regs, swap in dict.fromkeys(configs):
                row["seconds"][f"{w}/{st}/{split}/{tok}/{lazy}/{per_sm}/{regs}/{swap}"] = \
                    graph_time([partial(c.decode, q, split or None, num_warps=w, num_stages=st,
                                        tile_tokens=tok or None, lazy=bool(lazy),
                                        programs_per_sm=per_sm or None,
                                        max_registers=regs or None,
                                        swap=None if swap == 0 else swap == 1)
                                for c in caches])
            row["kernels"] = [v for k, v in compiled(kivi_decode_kernel).items()
                              if k not in before]
            rows.append(row)
            print(fmt, seqs, tokens, row["kernels"], {k: f"{v * 1e6:.1f} us" for k, v in row["seconds"].items()},
                  flush=True)
            del caches
            torch.cuda.empty_cache()
    write_json(args.out, "kivi.json", {"env": env, "note": "configs: warps/stages/split/tile "
                                       "tokens/lazy/programs a multiprocessor/registers/swapped "
                                       "(1) or not (2) (0: the defaults)",
                                       "correctness": checks, "rows": rows})


if __name__ == "__main__":
    main()
