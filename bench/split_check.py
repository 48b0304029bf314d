"""Context split of the decode kernel: LayerCache.decode's default split against fixed numbers
of splits.

    python bench/split_check.py [--out DIR] [--formats F,…] [--shapes BxT[@N/N…],…]
        [--splits N,…] [--launches R/P,…]

For f16, q4_0 and tbq4 at batch 1 (32k, 128k and 1M tokens) and batch 8 (32k), or the formats
and shapes given: the step time with the default split and with 64, 128 and 256 splits a
sequence, or the numbers given (a shape's own after its "@", else --splits; the merge reads
the splits in chunks, so more splits cost it little). --launches: the default split with
registers a thread capped at R and P programs a multiprocessor (decode(max_registers=R,
programs_per_sm=P)). Each row also records the registers, spilled bytes, warps and
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

from decode import compiled, filled_copies, time_steps, write_json  # noqa: E402

from kvcore.kernels.gluon_q4_0 import q4_0_swapped_kernel  # noqa: E402
from kvcore.kernels.triton_ops import decode_split_kernel  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--formats", default="f16,q4_0,tbq4")
    ap.add_argument("--shapes", default="1x32768,1x131072,1x1048576,8x32768",
                    help="sequences x tokens, comma-separated")
    ap.add_argument("--splits", default="64,128,256", help="splits a sequence to time")
    ap.add_argument("--launches", default="", help="R/P,…: registers capped at R, P programs "
                    "a multiprocessor")
    args = ap.parse_args()
    env = environment("cuda", torch)
    rows = []
    for shape in args.shapes.split(","):
        size, _, own = shape.partition("@")
        batch, tokens = (int(x) for x in size.split("x"))
        counts = [int(x) for x in (own.split("/") if own else args.splits.split(",")) if x]
        for fmt in args.formats.split(","):
            caches = filled_copies(fmt, batch, tokens)
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
            row["kernels"] = [v for k, v in {**compiled(decode_split_kernel),
                                             **compiled(q4_0_swapped_kernel)}.items()
                              if k not in before]
            rows.append(row)
            write_json(args.out, "split.json", {"env": env, "rows": rows})
            print({k: (f"{v * 1e6:.1f} us" if isinstance(v, float) else v)
                   for k, v in row.items()}, flush=True)
            del caches
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
