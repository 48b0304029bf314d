"""Context split of the decode kernel: LayerCache.decode's default split against fixed numbers
of splits.

    python bench/split_check.py [--out DIR] [--formats F,…] [--shapes BxT[@N/N…],…]
        [--splits N,…] [--launches R/P,…] [--prefetch N,…]

For f16, q4_0 and tbq4 at batch 1 (32k, 128k and 1M tokens) and batch 8 (32k), or the formats
and shapes given: the step time with the default split and with 64, 128 and 256 splits a
sequence, or the numbers given (a shape's own after its "@", else --splits; the merge reads
the splits in chunks, so more splits cost it little). --launches: the default split with
registers a thread capped at R and P programs a multiprocessor (decode(max_registers=R,
programs_per_sm=P)). --prefetch: the default launch with each program asking L2 for its
first N tokens before it waits on the step before (decode(prefetch=N); a count given twice is
timed twice, the second as prefetch_N_again), and whether its output is the same as the
default's to the bit. Each row also records the registers, spilled bytes, warps and
shared-memory bytes of the split kernels (and Gluon kernels) first compiled for it. Writes
split.json after every row.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decode import (  # noqa: E402
    HKV,
    HQ,
    D,
    compiled,
    copies,
    fill,
    step_inputs,
    time_steps,
    write_json,
)

from kvcore.kernels.cache import LayerCache  # noqa: E402
from kvcore.kernels.gluon_q4_0 import q4_0_swapped_kernel  # noqa: E402
from kvcore.kernels.triton_ops import decode_split_kernel  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def same_output(cache: LayerCache, batch: int, tokens: int, **launch: object) -> bool:
    """Whether a step with ``launch`` writes the same output as the default launch, bit for
    bit (each launched as a programmatic dependent where the GPU has it, after a step)."""
    table, seq, q = step_inputs(batch, tokens)
    outs = []
    for given in ({}, launch):
        out = torch.full((batch, HQ, D), float("nan"), device="cuda")
        cache.decode(q, table, seq, max_len=tokens)
        cache.decode(q, table, seq, max_len=tokens, out=out, **given)
        outs.append(out)
    torch.cuda.synchronize()
    return bool(torch.equal(*outs))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--formats", default="f16,q4_0,tbq4")
    ap.add_argument("--shapes", default="1x32768,1x131072,1x1048576,8x32768",
                    help="sequences x tokens, comma-separated")
    ap.add_argument("--splits", default="64,128,256", help="splits a sequence to time")
    ap.add_argument("--launches", default="", help="R/P,…: registers capped at R, P programs "
                    "a multiprocessor")
    ap.add_argument("--prefetch", default="", help="N,…: tokens a program asks L2 for before "
                    "its wait")
    args = ap.parse_args()
    env = environment("cuda", torch)
    rows = []
    for shape in args.shapes.split(","):
        size, _, own = shape.partition("@")
        batch, tokens = (int(x) for x in size.split("x"))
        counts = [int(x) for x in (own.split("/") if own else args.splits.split(",")) if x]
        for fmt in args.formats.split(","):
            cache = LayerCache(fmt, fmt, batch, tokens, HKV, D, device="cuda")
            fill(cache, batch, tokens, torch.float16)
            caches = copies(cache, batch, tokens)
            before = {**compiled(decode_split_kernel), **compiled(q4_0_swapped_kernel)}
            row = {"format": fmt, "batch": batch, "tokens": tokens,
                   "default": time_steps(caches, batch, tokens)}
            for n in counts:
                row[f"splits_{n}"] = time_steps(caches, batch, tokens,
                                                split_tokens=math.ceil(tokens / n))
            for launch in filter(None, args.launches.split(",")):
                regs, per_sm = (int(x) for x in launch.split("/"))
                row[f"regs_{regs}_per_sm_{per_sm}"] = time_steps(
                    caches, batch, tokens, max_registers=regs, programs_per_sm=per_sm)
            for n in (int(x) for x in args.prefetch.split(",") if x):
                key = f"prefetch_{n}" + ("_again" if f"prefetch_{n}" in row else "")
                row[key] = time_steps(caches, batch, tokens, prefetch=n)
                row[f"{key}_same"] = same_output(caches[0], batch, tokens, prefetch=n)
            row["kernels"] = [v for k, v in {**compiled(decode_split_kernel),
                                             **compiled(q4_0_swapped_kernel)}.items()
                              if k not in before]
            rows.append(row)
            write_json(args.out, "split.json", {"env": env, "rows": rows})
            print({k: (f"{v * 1e6:.1f} us" if isinstance(v, float) else v)
                   for k, v in row.items()}, flush=True)
            del cache, caches
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
