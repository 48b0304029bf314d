"""q4_0's and q8_0's Gluon decode kernel at split counts that make whole waves of programs,
against its default (splits_for).

    python bench/probes/gluon_waves.py [--out DIR] [--shapes BxT,…] [--waves 1,2,4]
        [--resident 12,8] [--ceil 12,16] [--name gluon-waves.json] [--rounds 1]

For each shape and format: the default step time, then one at floor(w · r · 132 / rows)
splits a row for each wave count w and resident programs r, and at ceil(p · 132 / rows) for
each p of --ceil (the rule before v51, which rounded the wave up), with the largest difference
of its output from the default's; with --rounds, that many times each, alternating the order.
Needs a GPU.
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


def _us(t: float | list[float]) -> str:
    """Seconds (or a list of them) as microseconds."""
    return " ".join(f"{x * 1e6:.1f}" for x in (t if isinstance(t, list) else [t])) + " us"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="8x131072,16x131072,64x32768")
    ap.add_argument("--waves", default="1,2,4")
    ap.add_argument("--resident", default="12,8")
    ap.add_argument("--formats", default="q4_0,q8_0")
    ap.add_argument("--ceil", default="")
    ap.add_argument("--name", default="gluon-waves.json")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time the default and the counts this many times, the counts in "
                         "reverse order every other round (a card that slows within a run "
                         "then counts against each)")
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
            row = {"format": fmt, "batch": batch, "tokens": tokens, "default": [],
                   "splits": {n: [] for n in counts}, "max_abs": {}}
            for r in range(args.rounds):
                row["default"].append(time_steps(caches, batch, tokens))
                for n in counts if r % 2 == 0 else counts[::-1]:
                    gluon_q4_0.splits_for = fixed(n)
                    try:
                        out = cache.decode(q, table, seq, max_len=tokens)
                        row["max_abs"][n] = float((out - base).abs().max())
                        row["splits"][n].append(time_steps(caches, batch, tokens))
                    finally:
                        gluon_q4_0.splits_for = default_splits
            if args.rounds == 1:  # one time a count, as the files before --rounds hold them
                row["default"] = row["default"][0]
                row["splits"] = {n: t[0] for n, t in row["splits"].items()}
            rows_out.append(row)
            print(fmt, batch, tokens, "default", _us(row["default"]),
                  {n: _us(t) for n, t in row["splits"].items()}, flush=True)
            del cache, caches
            torch.cuda.empty_cache()
    write_json(args.out, args.name, {
        "env": env, "note": "seconds a decode step; splits: fixed splits a (sequence, KV head) "
        "row; max_abs: the largest difference of the output from the default split's",
        "rows": rows_out})


if __name__ == "__main__":
    main()
