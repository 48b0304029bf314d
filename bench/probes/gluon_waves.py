"""q4_0's and q8_0's Gluon decode kernel at split counts that make whole waves of programs,
against its default (splits_for).

    python bench/probes/gluon_waves.py [--out DIR] [--shapes BxT,…] [--waves 1,2,4]
        [--resident 12,8] [--ceil 12,16] [--name gluon-waves.json]

For each shape and format: the default step time, then one at floor(w · r · 132 / rows)
splits a row for each wave count w and resident programs r, and at ceil(p · 132 / rows) for
each p of --ceil (the rule before v51, which rounded the wave up), with the largest difference
of its output from the default's. Needs a GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import HKV, filled_copies, step_inputs, time_steps, write_json  # noqa: E402

from kvcore.kernels import gluon_q4_0  # noqa: E402
from kvcore.kernels.cache import wave_splits, wave_up  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def fixed(n: int):
    """A splits_for that makes ``n`` splits a row (whole 32-token tiles)."""
    def splits(rows: int, max_len: int, per_sm: int) -> tuple[int, int]:
        return gluon_q4_0.tiled_splits(max_len, n)
    return splits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="8x131072,16x131072,64x32768")
    ap.add_argument("--waves", default="1,2,4")
    ap.add_argument("--resident", default="12,8")
    ap.add_argument("--formats", default="q4_0,q8_0")
    ap.add_argument("--ceil", default="")
    ap.add_argument("--name", default="gluon-waves.json")
    args = ap.parse_args()
    env = environment("cuda", torch)
    default_splits = gluon_q4_0.splits_for
    rows_out = []
    for batch, tokens in (tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")):
        rows = batch * HKV
        counts = sorted({wave_splits(rows, w * r) for w in map(int, args.waves.split(","))
                         for r in map(int, args.resident.split(","))}
                        | {wave_up(rows, p) for p in map(int, filter(None, args.ceil.split(",")))})
        for fmt in args.formats.split(","):
            caches = filled_copies(fmt, batch, tokens)
            cache = caches[0]
            table, seq, q = step_inputs(batch, tokens)
            assert cache.takes_gluon(q, seq, tokens), "not the Gluon kernel's launch"
            base = cache.decode(q, table, seq, max_len=tokens).clone()
            row = {"format": fmt, "batch": batch, "tokens": tokens,
                   "default": time_steps(caches, batch, tokens), "splits": {}, "max_abs": {}}
            for n in counts:
                gluon_q4_0.splits_for = fixed(n)
                try:
                    out = cache.decode(q, table, seq, max_len=tokens)
                    row["max_abs"][n] = float((out - base).abs().max())
                    row["splits"][n] = time_steps(caches, batch, tokens)
                finally:
                    gluon_q4_0.splits_for = default_splits
            rows_out.append(row)
            print(fmt, batch, tokens, f"default {row['default'] * 1e6:.1f} us",
                  {n: f"{t * 1e6:.1f} us" for n, t in row["splits"].items()}, flush=True)
            del cache, caches
            torch.cuda.empty_cache()
    write_json(args.out, args.name, {
        "env": env, "note": "seconds a decode step; splits: fixed splits a (sequence, KV head) "
        "row; max_abs: the largest difference of the output from the default split's",
        "rows": rows_out})


if __name__ == "__main__":
    main()
