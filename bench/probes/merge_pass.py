"""A probe: the merge (reduce_kernel) loading a row's maxima, sums and partial outputs in one
round trip where one chunk holds every split (ONE, the default) against the maxima first and
the rest after (the form before), in whole decode steps and alone.

    python bench/probes/merge_pass.py [--out DIR] [--formats F,…] [--shapes BxT,…]
        [--passes 2]

Each pass times each format and shape with the flag on and off, in turns, so that a card that
slows within a run counts against both. ``merge_alone`` times reduce_splits by itself over
the step's partial results. Writes merge-pass.json after every row. Needs a GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import HKV, HQ, D, filled_copies, graph_time, time_steps, write_json  # noqa: E402

from kvcore.kernels import triton_ops  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--formats", default="f16,q8_0,q4_0,fp8_pth")
    ap.add_argument("--shapes", default="1x32768,1x131072,8x32768")
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args()
    env = environment("cuda", torch)
    rows = []
    for shape in args.shapes.split(","):
        batch, tokens = (int(x) for x in shape.split("x"))
        for fmt in args.formats.split(","):
            caches = filled_copies(fmt, batch, tokens)
            row = {"format": fmt, "batch": batch, "tokens": tokens, "one": [], "two": [],
                   "merge_one": [], "merge_two": []}
            for _ in range(args.passes):
                for one in (True, False):
                    triton_ops.MERGE_ONE_PASS = one
                    row["one" if one else "two"].append(time_steps(caches, batch, tokens))
                    for n in (128,):  # the merge alone over n splits of partial results
                        acc = torch.randn(batch * HQ * n * D, device="cuda")
                        ml = torch.randn(batch * HQ * n * 2, device="cuda")
                        out = torch.empty(batch, HQ, D, device="cuda")
                        t = graph_time([partial(triton_ops.reduce_splits, acc, ml, out, n, batch,
                                                HKV, HQ // HKV, D, pdl=True)])
                        row["merge_one" if one else "merge_two"].append((n, t))
            triton_ops.MERGE_ONE_PASS = True
            rows.append(row)
            print(fmt, batch, tokens, "one", [f"{t * 1e6:.1f}" for t in row["one"]], "two",
                  [f"{t * 1e6:.1f}" for t in row["two"]], "merge alone one",
                  [f"{n}:{t * 1e6:.2f}" for n, t in row["merge_one"]], "two",
                  [f"{n}:{t * 1e6:.2f}" for n, t in row["merge_two"]], flush=True)
            write_json(args.out, "merge-pass.json", {"env": env, "rows": rows})
            del caches
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
