"""A probe: the Gluon kernel's nvfp4 form (K and V in nvfp4, the scaled forms) on a GPU, or
with --format tbq4 (tbq3) its tbq4 (tbq3) form.

    python bench/probes/gluon_nvfp4.py [--out DIR] [--shapes BxT,…] [--per-sm 8,12,8p,12pu]
        [--rounds 2] [--no-check] [--format nvfp4|tbq4|tbq3|q4_0] [--heads 32/8/128]
        [--like-decode]

First decode's GPU check with the Gluon kernel forced (three sequences of 1,000, 1 and 777
tokens under a shuffled block table, pages of 32, 64 and 96 tokens) at 4, 8 and 16 query heads a
KV head, against LayerCache.decode_ref, exact attention and the split kernel. Then, at each
shape (GQA 32/8, head_dim 128), decode_split_kernel (decode without the Gluon kernel) and the
Gluon kernel at each count of programs a multiprocessor (a trailing p: with PIPE, each tile's
scores beside the tile before's value product; u: its registers not capped), timed in turns (the order reversed every other
round), fp16 SDPA once; the largest difference of each Gluon output from the split
kernel's. Writes gluon-FORMAT.json after every row.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import decode  # noqa: E402
from decode import (  # noqa: E402
    _check,
    compiled,
    filled_copies,
    sdpa_time,
    step_inputs,
    time_steps,
    write_json,
)

from kvcore.kernels import cache as kcache  # noqa: E402
from kvcore.kernels import gluon_q4_0  # noqa: E402
from kvcore.measure import environment  # noqa: E402

PLAIN = gluon_q4_0.launch_consts
PLAIN_LAUNCH = kcache.gluon_launch
PLAIN_REGISTERS = gluon_q4_0.launch_registers


def launch(name: str) -> None:
    """Decode's Gluon launch for variant ``name`` ("gluon12", "gluon8p", "gluon12pu",
    "gluon12pl4", "gluon12pc168": programs a multiprocessor, then p for PIPE, u for no cap on
    the registers, l for LAZY, a digit for STAGES, c and a number for that cap)."""
    m = re.fullmatch(r"gluon(\d+)(p?)(u?)(l?)(\d?)(?:c(\d+))?", name)
    assert m, name
    per_sm = int(m.group(1))
    more = {"PIPE": bool(m.group(2)), "LAZY": bool(m.group(4))}
    if m.group(5):
        more["STAGES"] = int(m.group(5))
    cap = 0 if m.group(3) else int(m.group(6) or 0)
    gluon_q4_0.launch_registers = (PLAIN_REGISTERS if not (m.group(3) or m.group(6))
                                   else lambda fmt, consts: cap)
    kcache.gluon_launch = lambda *a, **k: per_sm if PLAIN_LAUNCH(*a, **k) else None

    def consts(fmt: str, group: int, per_sm: int = 0) -> dict:
        return {**PLAIN(fmt, group, per_sm), **more}

    gluon_q4_0.launch_consts = consts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="1x131072,8x32768,1x32768,8x131072,1x1048576,64x4096")
    ap.add_argument("--per-sm", default="8,12")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--format", default="nvfp4", choices=("nvfp4", "tbq4", "tbq3", "q4_0"))
    ap.add_argument("--heads", default="32/8/128",
                    help="the timed shapes' query heads/KV heads/head_dim (the checks: their own)")
    ap.add_argument("--like-decode", action="store_true",
                    help="build each shape's caches as bench/decode.py does: filled, then an "
                    "append timed into it, then its copies")
    args = ap.parse_args()
    counts = args.per_sm.split(",")
    doc: dict = {"env": environment("cuda", torch), "check": {}, "rows": []}
    for heads in () if args.no_check else ("32/8/128", "32/4/128", "32/2/128"):
        decode.set_heads(heads)
        for page in (32, 64, 96):
            for n in counts:
                launch(f"gluon{n}")
                doc["check"][f"{heads}-page-{page}-{n}"] = _check(args.format, page, gluon=True)
    decode.set_heads(args.heads)
    print("check", {k: round(v["vs_reference"], 7) for k, v in doc["check"].items()}, flush=True)
    out_name = f"gluon-{args.format}.json"
    doc["heads"] = args.heads
    write_json(args.out, out_name, doc)
    for shape in args.shapes.split(","):
        batch, tokens = (int(x) for x in shape.split("x"))
        if args.like_decode:
            cache = kcache.LayerCache(args.format, args.format, batch, tokens, decode.HKV,
                                      decode.D, device="cuda")
            decode.fill(cache, batch, tokens, torch.float16)
            decode.append_time(cache, batch, tokens, torch.float16)
            caches = decode.copies(cache, batch, tokens)
        else:
            caches = filled_copies(args.format, batch, tokens)
        table, seq, q = step_inputs(batch, tokens)
        base = caches[0].decode(q, table, seq, max_len=tokens, gluon=False).clone()
        row: dict = {"format": args.format, "batch": batch, "tokens": tokens,
                     "sdpa_f16_seconds": sdpa_time(batch, tokens), "split": [],
                     **{f"gluon{n}": [] for n in counts}, "max_abs": {}}
        variants = ["split"] + [f"gluon{n}" for n in counts]
        for r in range(args.rounds):
            for name in (variants if r % 2 == 0 else variants[::-1]):
                if name == "split":
                    row[name].append(time_steps(caches, batch, tokens, gluon=False))
                    continue
                launch(name)
                out = caches[0].decode(q, table, seq, max_len=tokens, gluon=True)
                row["max_abs"][name] = float((out - base).abs().max())
                row[name].append(time_steps(caches, batch, tokens, gluon=True))
        doc["rows"].append(row)
        doc["compiled"] = list(compiled(gluon_q4_0.q4_0_swapped_kernel).values())
        sdpa = row["sdpa_f16_seconds"]
        print(batch, tokens, f"sdpa {sdpa * 1e6:.1f}",
              *(f"{v} {[round(t * 1e6, 1) for t in row[v]]} {sdpa / min(row[v]):.2f}x"
                for v in variants), row["max_abs"], flush=True)
        write_json(args.out, out_name, doc)
        del caches
        torch.cuda.empty_cache()
    print("compiled [registers, spilled bytes, warps, shared]", doc["compiled"])


if __name__ == "__main__":
    main()
