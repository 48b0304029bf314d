"""A probe: the Gluon kernel finding each tile's page by a shift and a mask (pages of a power
of two tokens, gluon_q4_0.PAGE_SHIFTS, the default) against a division, in whole decode steps.

    python bench/probes/page_shift.py [--out DIR] [--formats q4_0,q8_0] [--shapes BxT,…]
        [--passes 3] [--name page-shift.json]

Each pass times each format and shape with the shift and with the division, in turns, so that a
card that slows within a run counts against both; the two outputs must be the same to the bit.
Before timing, decode's GPU check (bench/decode.py's _check, the Gluon kernel forced) runs on
pages of 32 and 64 tokens (shifts) and 96 (a division). Records each compiled variant's
registers and spilled bytes. Writes NAME after every row. Needs a GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from decode import HQ, D, _check, compiled, filled_copies, step_inputs, time_steps, write_json  # noqa: E402

from kvcore.kernels import gluon_q4_0  # noqa: E402
from kvcore.measure import environment  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--formats", default="q4_0,q8_0")
    ap.add_argument("--shapes", default="8x131072,1x131072,8x32768,64x32768,1x1048576")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--name", default="page-shift.json")
    args = ap.parse_args()
    doc: dict = {"env": environment("cuda", torch), "checks": {}, "rows": []}
    for fmt in args.formats.split(","):
        for page in (32, 64, 96):
            doc["checks"][f"{fmt}_page_{page}"] = _check(fmt, page, gluon=True)
    print("checks", doc["checks"], flush=True)
    for shape in args.shapes.split(","):
        batch, tokens = (int(x) for x in shape.split("x"))
        for fmt in args.formats.split(","):
            caches = filled_copies(fmt, batch, tokens)
            row: dict = {"format": fmt, "batch": batch, "tokens": tokens, "shift": [],
                         "division": []}
            outs = {}
            table, seq, q = step_inputs(batch, tokens, torch.float16)
            for _ in range(args.passes):
                for shift in (True, False):
                    gluon_q4_0.PAGE_SHIFTS = shift
                    row["shift" if shift else "division"].append(
                        time_steps(caches, batch, tokens))
                    out = torch.empty(batch, HQ, D, device="cuda", dtype=torch.float32)
                    caches[0].decode(q, table, seq, max_len=tokens, out=out)
                    outs[shift] = out
            gluon_q4_0.PAGE_SHIFTS = True
            row["same_output"] = bool(torch.equal(outs[True], outs[False]))
            rows = doc["rows"]
            rows.append(row)
            doc["compiled"] = [v for v in compiled(gluon_q4_0.q4_0_swapped_kernel).values()]
            print(fmt, batch, tokens, "shift", [f"{t * 1e6:.1f}" for t in row["shift"]],
                  "division", [f"{t * 1e6:.1f}" for t in row["division"]],
                  "same" if row["same_output"] else "DIFFERENT", flush=True)
            write_json(args.out, args.name, doc)
            del caches
            torch.cuda.empty_cache()
    print("compiled [registers, spilled bytes, warps, shared]", doc["compiled"])


if __name__ == "__main__":
    main()
